"""What every checker promises, whatever its exercise (docs/exercises.md).

- the course's own reference answer passes, with one "✅ name: passed" line;
- a stub (`raise NotImplementedError`) gets "⏳ not implemented yet", never a ❌;
- a checker never raises, prints exactly one verdict line and returns a bool, even on
  answers that return nonsense, crash, or take the wrong arguments;
- handing over a result instead of the function or class is explained;
- checking leaves the notebook's global random state exactly as it was;
- backward as well as forward: the reference with its outputs detached, run under
  torch.no_grad(), or with NaN patched into its outputs' gradients after the fact, gives
  the same values and is still rejected, with a message that says what is wrong;
- an answer that needs another function the learner has not written yet names it.

Each lesson's own test file (tests/test_check_*.py) shows its checker's diagnoses.
"""

import functools
import inspect

import pytest
import torch

from course import (
    attention,
    check,
    decoding,
    efficient,
    layers,
    lm,
    masking,
    multihead,
    positional,
    rnn,
    tatoeba,
    transformer,
)
from course.check import EXERCISES

# The course's answer to each exercise: what a learner's correct answer must match.
REFERENCES = {
    "rnn_forward": rnn.rnn_forward,
    "dot_product_attention": attention.dot_product_attention,
    "scaled_dot_product_attention": attention.scaled_dot_product_attention,
    "split_heads": multihead.split_heads,
    "merge_heads": multihead.merge_heads,
    "MultiHeadAttention": multihead.MultiHeadAttention,
    "sinusoidal_encoding": positional.sinusoidal_encoding,  # lesson 05
    "causal_mask": masking.causal_mask,  # lesson 06
    "padding_mask": masking.padding_mask,  # lesson 06
    "LayerNorm": layers.LayerNorm,  # lesson 07
    "EncoderLayer": layers.EncoderLayer,  # lesson 07
    "DecoderLayer": layers.DecoderLayer,  # lesson 08
    "EncoderDecoder": transformer.Transformer,  # lesson 08: the whole model, assembled
    "greedy_decode": decoding.greedy_decode,  # lesson 09
    "kv_cache_attention": efficient.kv_cache_attention,  # lesson 10
    "grouped_split": tatoeba.grouped_split,  # lesson 11
    "sample_next": lm.sample_next,  # lesson 12
}
# Exercises whose answer is a constant of its integer arguments (a table, a boolean mask),
# token ids chosen by argmax under torch.no_grad() (greedy_decode), or lists of items with
# no tensor at all (grouped_split): nothing flows backward through them, so the backward
# mutations below do not apply. Their checkers judge what such an answer can get wrong
# instead (dtype, shape, values; for grouped_split, the properties of its splits).
NOT_DIFFERENTIABLE = {
    "sinusoidal_encoding",
    "causal_mask",
    "padding_mask",
    "greedy_decode",
    "grouped_split",
    "sample_next",
}
NAMES = list(EXERCISES)


def test_every_exercise_is_registered_under_its_name_and_has_a_reference():
    assert set(NAMES) == set(REFERENCES)
    for name in NAMES:
        assert getattr(check, name) is EXERCISES[name]
        assert name in check.__all__


def test_exercises_are_registered_in_lesson_order():
    assert NAMES == list(REFERENCES)


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_passes(name, verdict):
    passed, printed = verdict(EXERCISES[name], REFERENCES[name])
    assert passed is True and printed.startswith(f"✅ {name}: passed"), printed


def stub(*args, **kwargs):
    # YOUR CODE HERE
    raise NotImplementedError


@pytest.mark.parametrize("name", NAMES)
def test_a_stub_is_not_implemented_yet(name, verdict):
    passed, printed = verdict(EXERCISES[name], stub)
    assert passed is False and printed.startswith(f"⏳ {name}: not implemented yet"), printed


ABSURD = {
    "returns None": lambda *a, **k: None,
    "returns a pair of Nones": lambda *a, **k: (None, None),
    "returns a string": lambda *a, **k: "attention",
    "returns a huge tuple": lambda *a, **k: tuple(range(100)),
    "divides by zero": lambda *a, **k: 1 / 0,
    "takes no arguments": lambda: 0,
    "raises a KeyError": lambda *a, **k: {}["x"],
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("what", ABSURD)
def test_a_checker_never_raises(name, what, verdict):
    passed, printed = verdict(EXERCISES[name], ABSURD[what])
    assert passed is False and printed.startswith(f"❌ {name}: "), printed


@pytest.mark.parametrize("name", NAMES)
def test_a_result_instead_of_the_answer_is_explained(name, verdict):
    passed, printed = verdict(EXERCISES[name], torch.zeros(2, 3))
    assert passed is False and f"check.{name}({name})" in printed, printed


@pytest.mark.parametrize("name", NAMES)
def test_checking_leaves_the_global_random_state_alone(name, verdict):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    verdict(EXERCISES[name], REFERENCES[name])
    assert torch.equal(torch.rand(3), expected)


# ------------------------------------------------- generic mutations ----------
# Each takes the reference's forward and gives one that returns the same values but breaks
# the backward pass the way a learner's code can.


def _map_tensors(result, f):
    if isinstance(result, tuple | list):
        return type(result)(f(r) for r in result)
    return f(result)


def _nan_patched(out):
    """Same values; a NaN made in the forward pass and patched away (nan_to_num), so the
    gradient that flows back through it is NaN."""
    nan = out / (out - out)  # 0/0 and x/0: NaN and inf everywhere, still in the graph
    return out + torch.nan_to_num(nan, nan=0.0, posinf=0.0, neginf=0.0)


def _detached(forward):
    return lambda *a, **k: _map_tensors(forward(*a, **k), lambda t: t.detach())


def _under_no_grad(forward):
    def run(*a, **k):
        with torch.no_grad():
            return forward(*a, **k)

    return run


def _with_nan_gradients(forward):
    return lambda *a, **k: _map_tensors(forward(*a, **k), _nan_patched)


MUTATIONS = {
    "outputs detached": (_detached, "carries no gradient"),
    "forward under torch.no_grad()": (_under_no_grad, "carries no gradient"),
    "NaN patched after the fact": (_with_nan_gradients, "holds NaN or inf"),
}


def mutate(answer, mutation):
    """The reference answer with `mutation` applied to its forward: a function is wrapped;
    a class gets a subclass whose forward is wrapped."""
    if inspect.isclass(answer):

        def forward(self, *a, **k):
            return mutation(functools.partial(answer.forward, self))(*a, **k)

        return type(answer.__name__, (answer,), {"forward": forward})
    return functools.wraps(answer)(mutation(answer))


@pytest.mark.parametrize("name", [n for n in NAMES if n not in NOT_DIFFERENTIABLE])
@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_broken_backward_is_rejected_and_named(name, mutation, verdict):
    wrap, diagnosis = MUTATIONS[mutation]
    passed, printed = verdict(EXERCISES[name], mutate(REFERENCES[name], wrap))
    assert passed is False and printed.startswith(f"❌ {name}: "), printed
    assert diagnosis in printed, printed


def test_the_nan_patch_keeps_values_and_makes_gradients_nan():
    x = torch.randn(3, requires_grad=True)
    patched = _nan_patched(x * 2)
    assert torch.equal(patched, x * 2)
    patched.sum().backward()
    assert torch.isnan(x.grad).all()


# ------------------------------------------------------------- the verdict ----------


@pytest.mark.parametrize("name", NAMES)
def test_the_verdict_is_true_or_false_and_shows_nothing_in_a_notebook(name, capsys):
    """`ok = check.x(x)`, `if ok:`, `assert check.x(x)`, `ok == True` work as with a bool;
    as a cell's last expression IPython shows nothing (no `True` under the verdict line)."""
    from IPython.core.formatters import DisplayFormatter

    passed, failed = EXERCISES[name](REFERENCES[name]), EXERCISES[name](stub)
    capsys.readouterr()
    assert passed and not failed
    assert passed == True and failed == False  # noqa: E712 (what a learner may write)
    assert bool(passed) is True and bool(failed) is False
    assert (repr(passed), str(failed), f"{passed}") == ("True", "False", "True")
    assert sum([passed, failed, passed]) == 2
    assert DisplayFormatter().format(passed) == ({}, {})
    assert DisplayFormatter().format(failed) == ({}, {})


def test_a_hint_after_torchs_own_words_has_one_full_stop():
    """torch's messages often end with a full stop: the hint after them gets no second one."""
    from course.check._framework import then

    assert (
        then("Use .reshape(...) instead.", "The tensor") == "Use .reshape(...) instead. The tensor"
    )
    assert then("size mismatch", "Check the axis") == "size mismatch. Check the axis"
    assert then("size mismatch.", "") == "size mismatch."
