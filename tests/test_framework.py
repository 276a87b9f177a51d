"""The checker machinery itself (course.check._framework), tested directly.

The checkers' own tests show it at work through real exercises; these pin down each
helper's promise on its own, including the branches no correct exercise reaches: a bug
in a checker still gives one ❌ line, a slightly-off answer is never let through, a
mistaken answer that is NaN everywhere diagnoses nothing.
"""

import pytest
import torch

from course.check import _framework as fw
from course.check._framework import Mistake


@pytest.fixture
def registered():
    """Register throwaway exercises and remove them afterwards."""
    names = []

    def register(name, body):
        names.append(name)
        return fw.exercise(name)(body)

    yield register
    for name in names:
        fw.EXERCISES.pop(name, None)


# ------------------------------------------------------------- exercise ----------


def test_a_passing_body_prints_its_summary(registered, verdict):
    checker = registered("_t_pass", lambda candidate: "3 cases")
    assert verdict(checker, abs) == (True, "✅ _t_pass: passed (3 cases).\n")


def test_a_mistake_is_printed_and_returns_false(registered, verdict):
    def body(candidate):
        raise Mistake("the axis is wrong")

    assert verdict(registered("_t_mistake", body), abs) == (
        False,
        "❌ _t_mistake: the axis is wrong\n",
    )


def test_a_bug_in_the_checker_is_reported_not_raised(registered, verdict):
    def body(candidate):
        return {}["missing"]

    passed, printed = verdict(registered("_t_bug", body), abs)
    assert passed is False
    assert printed.startswith("❌ _t_bug: the checker stopped on an unexpected KeyError")
    assert "Please report this." in printed


def test_an_exercise_is_registered_under_its_name(registered):
    checker = registered("_t_registered", lambda candidate: "ok")
    assert fw.EXERCISES["_t_registered"] is checker


# ----------------------------------------------------------------- call ----------


def stub(x):
    # YOUR CODE HERE
    raise NotImplementedError


def uses_the_stub(x):
    return stub(x) + 1


def test_call_turns_the_candidates_own_stub_into_not_implemented_yet():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(stub, torch.zeros(2))
    assert caught.value.culprit is None


def test_call_names_another_function_that_is_still_a_stub():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(uses_the_stub, torch.zeros(2))
    assert caught.value.culprit == "stub"


def test_the_verdict_names_the_unfinished_function(registered, verdict):
    checker = registered("_t_culprit", lambda candidate: fw.call(candidate, torch.zeros(2)))
    passed, printed = verdict(checker, uses_the_stub)
    assert passed is False
    assert printed.startswith("⏳ _t_culprit: your code calls stub, which is not implemented")


def test_a_not_implemented_error_from_pytorch_is_a_mistake_not_a_stub():
    def sparse_view(x):
        return x.to_sparse().view(-1)  # torch has no such kernel: NotImplementedError

    with pytest.raises(Mistake, match="PyTorch raised NotImplementedError"):
        fw.call(sparse_view, torch.eye(2))


def test_call_names_the_inputs_and_gives_the_first_matching_hint():
    def broken(q, k):
        raise ValueError("shapes cannot be multiplied here")

    hints = {"cannot be multiplied": "transpose k", "multiplied": "a later hint"}
    with pytest.raises(Mistake) as caught:
        fw.call(broken, torch.zeros(2, 3), torch.zeros(4, 3), names=("q", "k"), hints=hints)
    message = str(caught.value)
    assert "on inputs q (2, 3), k (4, 3) your code raised ValueError" in message
    assert message.endswith(". transpose k")


def test_a_hint_function_wins_and_common_hints_back_it_up():
    def ambiguous(x):
        if x:
            return x

    with pytest.raises(Mistake, match="test for None explicitly"):
        fw.call(ambiguous, torch.ones(3), hints=lambda message: None)
    with pytest.raises(Mistake, match="mine"):
        fw.call(ambiguous, torch.ones(3), hints=lambda message: "mine")


def test_call_notices_an_input_changed_in_place():
    def doubles(x):
        x *= 2
        return x

    with pytest.raises(Mistake, match="changed one of its input tensors in place"):
        fw.call(doubles, torch.ones(3))


def test_call_returns_the_result_and_leaves_inputs_alone():
    x = torch.arange(3.0)
    assert torch.equal(fw.call(lambda t: t * 2, x), torch.tensor([0.0, 2.0, 4.0]))
    assert torch.equal(x, torch.arange(3.0))


# ------------------------------------------------------------ signature ----------


def test_the_same_parameters_in_another_order_are_reported():
    def swapped(k, q, v):
        pass

    with pytest.raises(Mistake, match=r"order \(k, q, v\); the lesson's signature is f\(q, k, v\)"):
        fw.expect_signature(swapped, ("q", "k", "v"), "f(q, k, v)")


def test_other_names_and_extra_parameters_are_fine():
    def renamed(query, key, value):
        pass

    def extra(q, k, v, scale=None):
        pass

    fw.expect_signature(renamed, ("q", "k", "v"), "f(q, k, v)")
    fw.expect_signature(extra, ("q", "k", "v"), "f(q, k, v)")
    fw.expect_signature(print, ("q",), "f(q)")  # no readable signature: nothing to judge


# ---------------------------------------------------------- comparisons ----------


def test_close_needs_the_same_shape_and_values():
    a = torch.tensor([1.0, 2.0])
    assert fw.close(a, a + 1e-7)
    assert not fw.close(a, a + 1e-2)
    assert not fw.close(a, a[None])
    assert not fw.close(torch.tensor([float("nan")]), torch.tensor([float("nan")]))


def test_matches_ignores_the_mistakes_undefined_entries_only():
    got = torch.tensor([1.0, 2.0, 3.0])
    assert fw.matches(got, torch.tensor([1.0, float("nan"), 3.0]))
    assert not fw.matches(got, torch.tensor([1.0, float("nan"), 4.0]))
    assert not fw.matches(got, torch.tensor([float("nan")] * 3))  # nothing defined: no match
    assert not fw.matches(got, got[:2])  # another shape never matches


def test_expect_close_passes_equal_values():
    fw.expect_close(torch.ones(2), torch.ones(2), "x")


def test_expect_close_rejects_a_slightly_off_answer_and_says_where():
    want = torch.zeros(2, 3)
    got = want.clone()
    got[1, 2] = 0.01
    with pytest.raises(Mistake) as caught:
        fw.expect_close(got, want, "the output")
    assert str(caught.value) == (
        "the output is not right: at index (1, 2) you have 0.01, expected 0 "
        "(largest difference 0.01)"
    )


def test_expect_close_names_the_matching_mistake_first():
    want = torch.tensor([1.0, 2.0])
    wrong = {"not this one": torch.tensor([5.0, 5.0]), "doubled": want * 2}
    with pytest.raises(Mistake, match="^doubled$"):
        fw.expect_close(want * 2, want, "x", wrong=wrong)
    with pytest.raises(Mistake, match="^doubled$"):
        fw.expect_close(want * 2, want, "x", wrong=lambda: wrong)  # computed on demand


def test_expect_close_asks_explain_only_when_no_listed_mistake_matches():
    want = torch.tensor([1.0, 2.0])
    with pytest.raises(Mistake, match="^tripled$"):
        fw.expect_close(want * 3, want, "x", explain=lambda got: "tripled")
    with pytest.raises(Mistake, match="is not right"):
        fw.expect_close(want * 3, want, "x", explain=lambda got: None)


def test_expect_close_counts_nan_and_adds_the_diagnosis():
    want = torch.ones(3)
    got = torch.tensor([1.0, float("nan"), float("inf")])
    with pytest.raises(Mistake, match=r"^x contains 2 NaN/inf value\(s\)$"):
        fw.expect_close(got, want, "x")
    mistaken = torch.tensor([1.0, float("nan"), float("nan")])
    with pytest.raises(Mistake, match=r"value\(s\): overflow$"):
        fw.expect_close(got, want, "x", wrong={"overflow": mistaken})


def test_expect_close_checks_shape_and_dtype_first():
    with pytest.raises(Mistake, match=r"x has shape \(3,\), expected \(2,\)"):
        fw.expect_close(torch.ones(3), torch.ones(2), "x")
    with pytest.raises(Mistake, match="x is float32, but the inputs were float64"):
        fw.expect_close(torch.ones(2), torch.ones(2, dtype=torch.float64), "x")
    with pytest.raises(Mistake, match="x should be a torch.Tensor, got a list"):
        fw.expect_close([1.0, 1.0], torch.ones(2), "x")


def test_expect_tuple_names_what_came():
    assert fw.expect_tuple([1, 2], ("a", "b")) == (1, 2)
    with pytest.raises(Mistake, match=r"should return the tuple \(a, b\), got a tensor of shape"):
        fw.expect_tuple(torch.ones(2), ("a", "b"))
    with pytest.raises(Mistake, match=r"should return 2 things \(a, b\), got 3"):
        fw.expect_tuple((1, 2, 3), ("a", "b"))


def test_softmax_rows_ok_in_any_dtype():
    rows = torch.tensor([[0.25, 0.75], [1.0, 0.0]], dtype=torch.float64)
    assert fw.softmax_rows_ok(rows)
    assert not fw.softmax_rows_ok(rows * 2)
    assert not fw.softmax_rows_ok(torch.tensor([[1.5, -0.5]]))


# --------------------------------------------------------------- inputs ----------


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 4)])
def test_noncontiguous_keeps_the_values_but_not_the_layout(shape):
    t = torch.randn(shape)
    spread = fw.noncontiguous(t)
    assert torch.equal(spread, t) and not spread.is_contiguous()


def test_noncontiguous_breaks_view_that_merges_axes():
    x = fw.noncontiguous(torch.randn(2, 3, 4))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(6, 4)
    assert torch.equal(x.reshape(6, 4), x.contiguous().view(6, 4))


def test_the_private_generator_is_seeded():
    a = fw.randn(fw.generator(1), 3, dtype=torch.float64)
    assert torch.equal(a, fw.randn(fw.generator(1), 3, dtype=torch.float64))
    assert a.dtype == torch.float64


# ------------------------------------------------------------- gradients ----------


def square(x, w):
    return x * x * w


def test_expect_gradients_accepts_the_same_function_written_otherwise():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    fw.expect_gradients(lambda x, w: x.pow(2) * w, square, inputs, "y")


def test_expect_gradients_rejects_a_detached_result():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="^y: the result carries no gradient"):
        fw.expect_gradients(lambda x, w: square(x, w).detach(), square, inputs, "y")


def test_expect_gradients_rejects_a_cut_input():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="^y: no gradient reaches w"):
        fw.expect_gradients(lambda x, w: square(x, w.detach()), square, inputs, "y")


def test_expect_gradients_rejects_nan_gradients_with_the_hint():
    def patched(x, w):
        y = square(x, w)
        return y + torch.nan_to_num(y / (y - y), nan=0.0, posinf=0.0, neginf=0.0)

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match=r"gradient with respect to x holds NaN or inf.*\. mind 0/0$"):
        fw.expect_gradients(patched, square, inputs, "y", nonfinite_hint="mind 0/0")


def test_expect_gradients_names_a_matching_mistake_or_the_wrong_input():
    def half_cut(x, w):  # same values, gradient of x halved
        return (x * x.detach()) * w

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="^y: x is cut once$"):
        fw.expect_gradients(half_cut, square, inputs, "y", wrong={"x is cut once": half_cut})
    with pytest.raises(Mistake, match="gradient with respect to x is not"):
        fw.expect_gradients(half_cut, square, inputs, "y")


def test_expect_gradients_compares_parameters_too():
    ours, theirs = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    theirs.load_state_dict(ours.state_dict())
    x = {"x": torch.randn(4, 3)}
    pairs = {"weight": (theirs.weight, ours.weight), "bias": (theirs.bias, ours.bias)}
    fw.expect_gradients(theirs, ours, x, "y", parameters=pairs)

    def frozen_bias(x):
        return x @ theirs.weight.T + theirs.bias.detach()

    with pytest.raises(Mistake, match="no gradient reaches bias"):
        fw.expect_gradients(frozen_bias, ours, x, "y", parameters=pairs)


def test_a_backward_that_fails_is_explained():
    def overwrites(x, w):
        y = torch.sigmoid(x)
        y.mul_(2)  # sigmoid's backward needs its output: in-place edit breaks it
        return y * w

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="backward pass through your code failed.*in-place"):
        fw.expect_gradients(overwrites, square, inputs, "y")


# --------------------------------------------------------------- dropout ----------


def _dropped(weights, p, seed=0):
    keep = torch.rand(weights.shape, generator=torch.Generator().manual_seed(seed)) >= p
    return weights * keep / (1 - p)


WEIGHTS = torch.rand(8, 16, 16, generator=torch.Generator().manual_seed(1)) + 0.1


def test_expect_dropout_accepts_real_dropout():
    fw.expect_dropout(_dropped(WEIGHTS, 0.3), WEIGHTS, 0.3, "w")


@pytest.mark.parametrize(
    "dropped, message",
    [
        (WEIGHTS, "nothing is dropped at p=0.3"),
        (_dropped(WEIGHTS, 0.3) * 0.7, "not rescaled"),
        (_dropped(WEIGHTS, 0.1), "which is dropout at p=0.1, but p=0.3 was asked"),
        (_dropped(WEIGHTS, 0.7), "p is the probability to \\*drop\\*"),
        (_dropped(WEIGHTS, 0.3) * torch.linspace(1, 2, 16), "either 0 \\(dropped\\) or weight"),
        (WEIGHTS * (torch.rand(8, 16, 1) >= 0.3) / 0.7, "drops whole rows"),
        (WEIGHTS * (torch.rand(8, 1, 16) >= 0.3) / 0.7, "drops whole keys"),
    ],
    ids=["none", "unscaled", "fixed rate", "keep prob", "not dropout", "rows", "keys"],
)
def test_expect_dropout_names_each_wrong_kind(dropped, message):
    with pytest.raises(Mistake, match=message):
        fw.expect_dropout(dropped, WEIGHTS, 0.3, "w")


def test_a_rate_far_from_p_is_reported():
    rows, keys = torch.arange(16)[:, None], torch.arange(16)
    keep = (rows + keys) % 8 != 0  # 12.5% dropped, on a diagonal: every row and key mixed
    with pytest.raises(Mistake, match="you dropped 12% of the weights; about 30% should go"):
        fw.expect_dropout(WEIGHTS * keep / 0.7, WEIGHTS, 0.3, "w")


def test_fresh_randomness_is_required():
    first = _dropped(WEIGHTS, 0.3, seed=0)
    fw.expect_fresh_randomness(first, _dropped(WEIGHTS, 0.3, seed=1), "w")
    with pytest.raises(Mistake, match="two calls dropped exactly the same entries"):
        fw.expect_fresh_randomness(first, first.clone(), "w")
