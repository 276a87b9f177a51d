"""The checker machinery itself (course.check._framework), tested directly.

The checkers' own tests show it at work through real exercises; these pin down each
helper's promise on its own, including the branches no correct exercise reaches: a bug
in a checker still gives one ❌ line, a slightly-off answer is never let through, a
mistaken answer that is NaN everywhere diagnoses nothing.
"""

from pathlib import Path

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


def _lookup(table):
    return table["missing"]  # the line the bug report must point to


def test_a_bug_in_the_checker_is_reported_not_raised(registered, verdict):
    def body(candidate):
        return _lookup({})

    passed, printed = verdict(registered("_t_bug", body), abs)
    line = _lookup.__code__.co_firstlineno + 1  # where the KeyError was raised, in this file
    assert passed is False
    assert printed == (
        f"❌ _t_bug: the checker stopped on an unexpected KeyError: 'missing' "
        f"({__file__}:{line}). Please report this.\n"
    )


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


@torch.no_grad()
def decorated_stub(x):
    # YOUR CODE HERE
    raise NotImplementedError


def test_a_decorated_stub_is_the_candidate_itself():
    """@torch.no_grad() (lesson 09's greedy_decode) wraps the stub: still "not implemented"."""
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(decorated_stub, torch.zeros(2))
    assert caught.value.culprit is None


def test_call_names_another_function_that_is_still_a_stub():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(uses_the_stub, torch.zeros(2))
    assert caught.value.culprit == "stub"


def test_the_verdict_names_the_unfinished_function(registered, verdict):
    checker = registered("_t_culprit", lambda candidate: fw.call(candidate, torch.zeros(2)))
    passed, printed = verdict(checker, uses_the_stub)
    assert passed is False
    assert printed == (
        "⏳ _t_culprit: your code calls stub, which is not implemented yet (it still raises "
        "NotImplementedError). Finish stub first, run its cell, then this one again.\n"
    )


class WithStubMethod:
    def method(self, x):
        # YOUR CODE HERE
        raise NotImplementedError


def test_a_bound_methods_own_stub_is_not_another_function():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(WithStubMethod().method, torch.zeros(2))
    assert caught.value.culprit is None and caught.value.args == (None,)


def test_a_module_without_forward_is_a_mistake_not_a_stub():
    class Misspelled(torch.nn.Module):
        def foward(self, x):  # the typo leaves torch's own forward, which raises
            return x

    with pytest.raises(Mistake) as caught:
        fw.call(Misspelled(), torch.zeros(2))
    assert str(caught.value) == (
        "PyTorch raised NotImplementedError inside your code: Module [Misspelled] is missing "
        'the required "forward" function'
    )


def test_a_not_implemented_error_from_pytorch_is_a_mistake_not_a_stub():
    def sparse_view(x):
        return x.to_sparse().view(-1)  # torch has no such kernel: NotImplementedError

    with pytest.raises(Mistake) as caught:
        fw.call(sparse_view, torch.eye(2))
    assert str(caught.value) == (
        "PyTorch raised NotImplementedError inside your code: Could not run 'aten::view' with "
        "arguments from the 'SparseCPU' backend. This could be because the operator doesn't "
        "exist for this backend, or was omitted during the selective/custom build process (if "
        "using custom build). If you are a Facebook employee using PyTorch on mobile, please "
        "visit https://fburl.com/ptmfixes for possible resolutions. 'aten::view' is only "
        "available for these backends: [" + str(caught.value).split("backends: [")[1]
    )
    assert "\n" not in str(caught.value)  # the first line of PyTorch's message only


def test_call_names_the_inputs_and_gives_the_first_matching_hint():
    def broken(q, k):
        raise ValueError("shapes cannot be multiplied here")

    hints = {"cannot be multiplied": "transpose k", "multiplied": "a later hint"}
    with pytest.raises(Mistake) as caught:
        fw.call(broken, torch.zeros(2, 3), torch.zeros(4, 3), names=("q", "k"), hints=hints)
    assert str(caught.value) == (
        "on inputs q (2, 3), k (4, 3) your code raised ValueError: shapes cannot be "
        "multiplied here. transpose k"
    )


def test_without_a_hint_the_message_ends_with_the_error_and_unnamed_inputs_are_numbered():
    def broken(q, k, extra):
        raise ValueError("boom")

    with pytest.raises(Mistake) as caught:
        fw.call(broken, torch.zeros(2), torch.zeros(1), 0.5, names=("q",))
    assert (
        str(caught.value)
        == "on inputs q (2,), arg1 (1,), arg2=0.5 your code raised ValueError: boom"
    )


def test_a_private_error_is_named_by_its_public_class():
    class _Incomplete(SyntaxError):  # the shape of Python 3.13's _IncompleteInputError
        pass

    def broken(q):
        raise _Incomplete("incomplete input")

    with pytest.raises(Mistake) as caught:
        fw.call(broken, torch.zeros(2), names=("q",))
    assert str(caught.value) == "on inputs q (2,) your code raised SyntaxError: incomplete input"


@pytest.mark.parametrize(
    "operation, hint",
    [
        (lambda a, b: a @ b, "mixes float32 and float64"),  # "... to have the same dtype"
        (lambda a, b: torch.bmm(a[None], b[None]), "mixes float32 and float64"),  # scalar type
        (lambda a, b: a.t().view(-1) @ b, "use .reshape(...) instead of .view(...)"),
    ],
    ids=["same dtype", "scalar type", "view"],
)
def test_common_hints_come_with_the_errors_pytorch_really_raises(operation, hint):
    a, b = torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(Mistake, match=hint.replace("(", "\\(").replace(")", "\\)")):
        fw.call(operation, a, b)


def test_describe_names_tensors_by_shape_and_other_values_by_repr():
    assert fw.describe(q=torch.zeros(2, 3), p=0.5, name="x") == "q (2, 3), p=0.5, name='x'"


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


def test_keyword_only_parameters_are_not_positional_parameters():
    def keyword_only(*, k, q):  # cannot be called positionally at all: call() will say so
        pass

    fw.expect_signature(keyword_only, ("q", "k"), "f(q, k)")


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
    assert fw.matches(got, torch.tensor([1.0, float("nan"), 4.0])) is False
    assert fw.matches(got, torch.tensor([float("nan")] * 3)) is False  # nothing defined
    assert fw.matches(got, got[:2]) is False  # another shape never matches


def test_expect_close_passes_equal_values():
    fw.expect_close(torch.ones(2), torch.ones(2), "x")


def test_expect_close_rejects_a_slightly_off_answer_and_says_where():
    want = torch.ones(2, 3)
    got = want.clone()
    got[1, 2] = 1.01
    with pytest.raises(Mistake) as caught:
        fw.expect_close(got, want, "the output")
    assert str(caught.value) == (
        "the output is not right: at index (1, 2) you have 1.01, expected 1 "
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
    with pytest.raises(
        Mistake, match=r"^should return the tuple \(a, b\), got a tensor of shape \(2,\)$"
    ):
        fw.expect_tuple(torch.ones(2), ("a", "b"))
    with pytest.raises(Mistake, match=r"^should return the tuple \(a, b\), got a str$"):
        fw.expect_tuple("ab", ("a", "b"))
    with pytest.raises(Mistake, match=r"should return 2 things \(a, b\), got 3"):
        fw.expect_tuple((1, 2, 3), ("a", "b"))


def test_expect_shape_adds_the_hint_only_when_there_is_one():
    with pytest.raises(Mistake, match=r"^x has shape \(3,\), expected \(2,\)$"):
        fw.expect_shape(torch.ones(3), (2,), "x")
    with pytest.raises(Mistake, match=r"^x has shape \(3,\), expected \(2,\)\. one per key$"):
        fw.expect_shape(torch.ones(3), (2,), "x", "one per key")


def test_softmax_rows_ok_sums_over_the_last_axis():
    rows = torch.full((2, 2, 3), 1 / 3)  # every row sums to 1 over the last axis only
    assert fw.softmax_rows_ok(rows)


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


def test_noncontiguous_stores_axes_in_reverse_order():
    assert fw.noncontiguous(torch.zeros(3, 4)).stride() == (1, 3)
    assert fw.noncontiguous(torch.zeros(2, 3, 4)).stride() == (1, 2, 6)
    assert fw.noncontiguous(torch.zeros(5)).stride() == (2,)


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


def test_a_view_made_under_no_grad_carries_no_gradient_either():
    def viewed_under_no_grad(x, w):
        with torch.no_grad():
            return x.view(-1)  # keeps requires_grad, but has no grad_fn: cut from the graph

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="^y: the result carries no gradient"):
        fw.expect_gradients(viewed_under_no_grad, lambda x, w: x * 1, inputs, "y")


def test_an_input_returned_as_it_is_is_a_fine_result():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    fw.expect_gradients(lambda x, w: (x, w * 2), lambda x, w: (x * 1, w + w), inputs, "y")


def test_every_output_must_be_a_tensor():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="^every output should be a torch.Tensor, got a float$"):
        fw.expect_gradients(lambda x, w: (x * w, 1.0), square, inputs, "y")


def test_expect_gradients_rejects_a_cut_input():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake) as caught:
        fw.expect_gradients(lambda x, w: square(x, w.detach()), square, inputs, "y")
    assert str(caught.value) == (
        "y: no gradient reaches w, so it could not learn: something between w and the result "
        "is cut from the graph (.detach(), torch.no_grad(), values copied with torch.tensor(...) "
        "or .item())"
    )


def test_expect_gradients_rejects_nan_gradients_with_the_hint():
    def patched(x, w):
        y = square(x, w)
        return y + torch.nan_to_num(y / (y - y), nan=0.0, posinf=0.0, neginf=0.0)

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match=r"gradient with respect to x holds NaN or inf.*\. mind 0/0$"):
        fw.expect_gradients(patched, square, inputs, "y", nonfinite_hint="mind 0/0")
    with pytest.raises(Mistake) as caught:
        fw.expect_gradients(patched, square, inputs, "y")
    assert str(caught.value) == (
        "y: the gradient with respect to x holds NaN or inf, so one training step would make "
        "the model NaN"
    )


def test_expect_gradients_names_a_matching_mistake_or_the_wrong_input():
    def half_cut(x, w):  # same values, gradient of x halved
        return (x * x.detach()) * w

    inputs = {"x": torch.randn(3) * 10, "w": torch.randn(3) * 10}  # gradients far apart
    with pytest.raises(Mistake, match="^y: x is cut once$"):
        fw.expect_gradients(half_cut, square, inputs, "y", wrong={"x is cut once": half_cut})
    with pytest.raises(Mistake) as caught:  # a listed mistake that does not match is not named
        fw.expect_gradients(half_cut, square, inputs, "y", wrong={"w is doubled": square})
    assert str(caught.value) == (
        "y: your values are right, but the gradient with respect to x is not, so training "
        "would follow the wrong slope. Something on the way is cut from the graph or rebuilt "
        "from values (.detach(), .data, torch.tensor(...)), or a step is computed without "
        "autograd"
    )


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
    with pytest.raises(Mistake) as caught:
        fw.expect_gradients(overwrites, square, inputs, "y")
    message = str(caught.value)
    assert message.startswith(
        "the backward pass through your code failed: one of the variables needed for "
        "gradient computation has been modified by an inplace operation"
    )
    assert message.endswith(
        ". An in-place operation (x += ..., x[...] = ..., h.copy_(...)) overwrote a tensor that "
        "autograd still needed for the backward pass: compute a new tensor instead "
        "(h = torch.tanh(...))"
    )


def test_a_backward_failure_without_a_known_hint_ends_with_the_error():
    class Refuses(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("no backward here")

    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(
        Mistake, match="^the backward pass through your code failed: no backward here$"
    ):
        fw.expect_gradients(lambda x, w: Refuses.apply(x) * w, square, inputs, "y")


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
        (_dropped(WEIGHTS, 0.3) * torch.linspace(1, 1.2, 16), "either 0 \\(dropped\\) or weight"),
        (WEIGHTS * (torch.rand(8, 16, 1) >= 0.3) / 0.7, "drops whole rows"),
        (WEIGHTS * (torch.rand(8, 1, 16) >= 0.3) / 0.7, "drops whole keys"),
    ],
    ids=["none", "unscaled", "fixed rate", "keep prob", "not dropout", "rows", "keys"],
)
def test_expect_dropout_names_each_wrong_kind(dropped, message):
    with pytest.raises(Mistake, match=message):
        fw.expect_dropout(dropped, WEIGHTS, 0.3, "w")


DROPOUT_MESSAGES = {
    "none": "w: nothing is dropped at p=0.3. Dropout belongs on these attention weights, after "
    "the softmax, and the dropped weights are the ones that multiply v",
    "unscaled": "w: the values that survive dropout are not rescaled: multiply them by "
    "1 / (1 - p) = 1.43, so their expected value stays the same (F.dropout and nn.Dropout do "
    "it for you)",
    "fixed rate": "w: the kept values are scaled by 1.11, which is dropout at p=0.1, but "
    "p=0.3 was asked. Use the rate you are given, not a fixed number",
    "keep prob": "w: p is the probability to *drop* a weight, not to keep it: the kept "
    "values are scaled by 1/p = 3.33, and should be by 1/(1 - p) = 1.43 "
    "(F.dropout(weights, p=dropout_p))",
    "not dropout": "w: with dropout p=0.3 each attention weight should be either 0 (dropped) "
    "or weight / (1 - p) (kept). Apply dropout to the attention weights, after the softmax, "
    "and to nothing else (not the queries, the scores or the output)",
    "rows": "w: dropout drops whole rows (a query's every weight) at once; drop each weight "
    "on its own, with a random mask of the weights' full shape (F.dropout(weights, p))",
}


@pytest.mark.parametrize(
    "dropped, kind",
    [
        (WEIGHTS, "none"),
        (_dropped(WEIGHTS, 0.3) * 0.7, "unscaled"),
        (_dropped(WEIGHTS, 0.1), "fixed rate"),
        (_dropped(WEIGHTS, 0.7), "keep prob"),
        (_dropped(WEIGHTS, 0.3) * torch.linspace(1, 1.2, 16), "not dropout"),
        (WEIGHTS * (torch.rand(8, 16, 1) >= 0.3) / 0.7, "rows"),
    ],
)
def test_expect_dropout_messages_in_full(dropped, kind):
    with pytest.raises(Mistake) as caught:
        fw.expect_dropout(dropped, WEIGHTS, 0.3, "w")
    assert str(caught.value) == DROPOUT_MESSAGES[kind]


HEADS = torch.rand(2, 4, 16, 16, generator=torch.Generator().manual_seed(2)) + 0.1  # (B, h, T, T)


def test_expect_dropout_on_heads_accepts_real_dropout_and_rejects_whole_heads():
    fw.expect_dropout(_dropped(HEADS, 0.3), HEADS, 0.3, "w")
    whole_heads = HEADS * (torch.rand(2, 4, 1, 1) >= 0.5) / 0.7
    whole_heads[0, 0] = 0  # at least one head dropped, whatever the draw
    with pytest.raises(Mistake, match="drops whole rows"):
        fw.expect_dropout(whole_heads, HEADS, 0.3, "w")
    keys = HEADS * (torch.rand(2, 4, 1, 16, generator=torch.Generator().manual_seed(3)) >= 0.3)
    with pytest.raises(Mistake, match="drops whole keys"):
        fw.expect_dropout(keys / 0.7, HEADS, 0.3, "w")


def test_masked_entries_tell_nothing_about_dropout():
    masked = WEIGHTS.clone()
    masked[:, :, :4] = 0  # four keys masked out everywhere: zero with or without dropout
    dropped = _dropped(masked, 0.3)
    fw.expect_dropout(dropped, masked, 0.3, "w")


def test_a_rate_far_from_p_is_reported():
    rows, keys = torch.arange(16)[:, None], torch.arange(16)
    keep = (rows + keys) % 8 != 0  # 12.5% dropped, on a diagonal: every row and key mixed
    with pytest.raises(Mistake) as caught:
        fw.expect_dropout(WEIGHTS * keep / 0.7, WEIGHTS, 0.3, "w")
    assert str(caught.value) == (
        "w: with dropout p=0.3 you dropped 12% of the weights; about 30% should go. Use the "
        "rate you are given, not a fixed number"
    )


def test_fresh_randomness_is_required():
    first = _dropped(WEIGHTS, 0.3, seed=0)
    fw.expect_fresh_randomness(first, _dropped(WEIGHTS, 0.3, seed=1), "w")
    with pytest.raises(Mistake) as caught:
        fw.expect_fresh_randomness(first, first.clone(), "w")
    assert str(caught.value) == (
        "w: two calls dropped exactly the same entries. Dropout must draw a new random mask on "
        "every call: don't seed inside your function (torch.manual_seed) or keep one mask"
    )


def test_no_gradient_equals_a_zero_gradient_and_nothing_else():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    # w's reference gradient is all zeros; the answer does not use w at all: the same
    fw.expect_gradients(lambda x, w: x * 2, lambda x, w: x * 2 + w * 0, inputs, "y")
    # the reference does not use w; an answer whose result moves with w is not the same
    with pytest.raises(Mistake, match="gradient with respect to w is not"):
        fw.expect_gradients(lambda x, w: x * 2 + w * 1e-3, lambda x, w: x * 2, inputs, "y")


class StubModule(torch.nn.Module):
    def __init__(self, d_model):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError


class CallsAStub(torch.nn.Module):
    def forward(self, x):
        return stub(x)


def test_a_class_whose_own_method_is_a_stub_is_not_implemented_yet():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(StubModule, 4)
    assert caught.value.culprit is None


def test_a_module_that_calls_another_stub_names_it():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(CallsAStub(), torch.zeros(2))
    assert caught.value.culprit == "stub"


def stub_with_a_message(x):
    raise NotImplementedError("todo: attention")


def test_a_stub_with_a_message_is_still_a_stub():
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(lambda x: stub_with_a_message(x) + 1, torch.zeros(2))
    assert caught.value.culprit == "stub_with_a_message"


def test_a_result_handed_over_instead_of_the_answer_is_explained_in_full(registered, verdict):
    checker = registered("_t_object", lambda candidate: "ok")
    assert verdict(checker, torch.zeros(2)) == (
        False,
        "❌ _t_object: expected your function or class itself, got an object of type Tensor: "
        "write check._t_object(_t_object), without calling it first\n",
    )


def test_a_gradient_off_by_one_percent_is_caught():
    inputs = {"x": torch.randn(3), "w": torch.randn(3)}
    with pytest.raises(Mistake, match="gradient with respect to x, w is not"):
        fw.expect_gradients(lambda x, w: square(x, w) * 1.01, square, inputs, "y")


class StubForward(torch.nn.Module):
    def forward(self, x):
        # YOUR CODE HERE
        raise NotImplementedError


def test_a_module_instances_own_stub_forward_is_not_another_function():
    # the checker calls an instance: its class's methods are the learner's own code
    with pytest.raises(fw.NotImplementedYet) as caught:
        fw.call(StubForward(), torch.zeros(2))
    assert caught.value.culprit is None and caught.value.args == (None,)


def test_an_input_neither_answer_uses_is_no_mismatch():
    inputs = {"x": torch.randn(3), "unused": torch.randn(3)}
    fw.expect_gradients(lambda x, unused: x * 2, lambda x, unused: x * 2, inputs, "y")


@pytest.mark.parametrize("p", [0.3, 0.7])
def test_whole_rows_or_keys_are_caught_at_any_rate_on_any_shape(p):
    gen = torch.Generator().manual_seed(5)
    weights = torch.rand(8, 6, 10, generator=gen) + 0.1  # T_q != T_k
    rows = weights * (torch.rand(8, 6, 1, generator=gen) >= p) / (1 - p)
    keys = weights * (torch.rand(8, 1, 10, generator=gen) >= p) / (1 - p)
    with pytest.raises(Mistake, match="drops whole rows"):
        fw.expect_dropout(rows, weights, p, "w")
    with pytest.raises(Mistake, match="drops whole keys"):
        fw.expect_dropout(keys, weights, p, "w")


def test_a_signature_read_from_a_classes_forward_leaves_self_out():
    class Attention(torch.nn.Module):
        def forward(self, key, query, value, mask=None):
            return query

    with pytest.raises(Mistake) as caught:
        fw.expect_signature(Attention.forward, ("query", "key", "value"), "forward(q, k, v)")
    assert str(caught.value).startswith(
        "your parameters come in the order (key, query, value, mask);"
    )


def test_a_not_implemented_error_without_a_message_from_pytorch_is_a_mistake():
    # code compiled under torch's own folder: where PyTorch's NotImplementedErrors come from
    where = str(Path(torch.__file__).parent / "_not_a_real_file.py")
    scope = {}
    exec(compile("def op(x):\n    raise NotImplementedError\n", where, "exec"), scope)
    with pytest.raises(Mistake) as caught:
        fw.call(lambda x: scope["op"](x), torch.zeros(2))
    assert str(caught.value) == (
        "PyTorch raised NotImplementedError inside your code: (no message)"
    )
