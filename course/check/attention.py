"""Checkers for lesson 02 (dot-product attention) and lesson 03 (scaled, masked).

Both exercises return (output, weights) for q (..., T_q, d_k), k (..., T_k, d_k),
v (..., T_k, d_v). The inputs make T_q, T_k, d_k and d_v all different, so a swapped
axis or a swapped return shows up as a wrong shape, and the masks are not symmetric,
so a transposed mask shows up as wrong numbers. Every case is judged forward and
backward (the gradients with respect to q, k and v); one case has a batch of one,
float64 and non-contiguous inputs (as split heads are); lesson 03 adds scores large
enough to overflow a softmax written as exp / sum, and dropout.
"""

import functools
import math

import torch

from course import attention as reference
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_dropout,
    expect_dtype,
    expect_fresh_randomness,
    expect_gradients,
    expect_shape,
    expect_signature,
    expect_tuple,
    generator,
    noncontiguous,
    randn,
    softmax_rows_ok,
    then,
)

# (*batch, T_q, T_k, d_k, d_v), dtype, contiguous: T_q, T_k, d_k, d_v all differ, so a
# swapped axis or a swapped return shows up in a shape; the first sqrt(d_k) is not a round
# number, so a hard-coded temperature (/ 2) is never mistaken for the right one.
_SHAPES = [
    ((3, 5, 7, 6), torch.float32, True),  # one sequence: q (3, 7), k (5, 7), v (5, 6)
    ((2, 3, 5, 9, 6), torch.float32, True),  # a batch of 2; sqrt(d_k) = 3: not d_k, sqrt(d_v)
    ((2, 2, 4, 3, 8, 2), torch.float32, False),  # 2 x 2 heads, laid out as split heads are
    ((1, 4, 3, 5, 2), torch.float64, True),  # a batch of one, float64
]


def _matmul_hint(T_q: int, T_k: int, d_k: int):
    """Which product failed, read off the sizes in PyTorch's message."""

    def hint(message: str) -> str | None:
        if "cannot be multiplied" not in message and "must match the size" not in message:
            return None
        if f"{T_q}x{T_k}" in message or f"{T_k}x{T_q}" in message:
            return (
                "The output is weights (..., T_q, T_k) @ v (..., T_k, d_v): check the order "
                "and that v is used as it is, not transposed"
            )
        if f"x{d_k} and {T_k}x{d_k}" in message:
            return "The scores are q @ k with k's last two axes swapped: k.transpose(-2, -1)"
        return (
            "Check which axes you multiply: scores = q (..., T_q, d_k) @ k.transpose(-2, -1) "
            "(..., d_k, T_k); output = weights (..., T_q, T_k) @ v (..., T_k, d_v)"
        )

    return hint


_BOOLEAN_MASK_HINT = (
    "The mask is boolean: fill with scores.masked_fill(~mask, float('-inf')) or "
    "torch.where(mask, scores, float('-inf'))"
)

# The checker passes the mask and dropout_p positionally, so an "unexpected keyword argument"
# can only come from a call inside the learner's code: no hint for it here.
_MASK_HINTS = {
    # without a mask every shape already worked, so a size mismatch now is the mask's
    "must match the size": "Use the mask as it comes: it is already broadcastable to the "
    "scores' shape (..., T_q, T_k), so don't transpose, reshape or unsqueeze it",
    # torch's words for a mask of another dtype, in masked_fill and in torch.where
    "only supports boolean masks": _BOOLEAN_MASK_HINT,
    "expected condition to be a boolean tensor": _BOOLEAN_MASK_HINT,
    "Subtraction, the `-` operator, with a bool tensor": "The mask is boolean: use ~mask (not "
    "1 - mask) for its opposite",
    "Boolean value of Tensor with more than one value is ambiguous": "`if mask:` asks whether "
    "a whole tensor is true: write `if mask is not None:`",
    "positional argument": "Your function must take the mask as its fourth argument, in the "
    "lesson's order: def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0)",
}

_FRONT_AXES_HINT = (
    "Your code counts axes from the front (k.transpose(2, 3), softmax(dim=3)), which works on "
    "4-D inputs (B, h, T, d_k) only: count them from the end, k.transpose(-2, -1) and "
    "softmax(dim=-1), so that one sequence (T, d_k) and a batch (B, T, d_k) work too"
)

_BATCH_HINT = (
    "It works on one sequence but not on a batch: use k.transpose(-2, -1), not k.T "
    "or k.t(), so the batch axes stay in front"
)


def _inputs(gen, *shape, dtype=torch.float32, contiguous=True):
    *batch, T_q, T_k, d_k, d_v = shape
    q = randn(gen, *batch, T_q, d_k, dtype=dtype)  # (..., T_q, d_k)
    k = randn(gen, *batch, T_k, d_k, dtype=dtype)  # (..., T_k, d_k)
    v = randn(gen, *batch, T_k, d_v, dtype=dtype)  # (..., T_k, d_v)
    if not contiguous:  # as split_heads leaves them
        q, k, v = noncontiguous(q), noncontiguous(k), noncontiguous(v)
    return q, k, v


def _call_attention(candidate, q, k, v, want_out, want_w, hints, *rest):
    """Call an attention answer (positionally: q, k, v, then `rest`); return its
    (output, weights), their shapes and dtypes checked."""
    hints = hints or _matmul_hint(q.shape[-2], k.shape[-2], q.shape[-1])
    names = ("q", "k", "v", "mask", "dropout_p")
    result = call(candidate, q, k, v, *rest, names=names, hints=hints)
    output, weights = expect_tuple(result, ("output", "weights"))
    if (
        getattr(output, "shape", None) == want_w.shape
        and getattr(weights, "shape", None) == want_out.shape
    ):
        raise Mistake("the results come back in the wrong order: return (output, weights)")
    expect_shape(
        weights,
        want_w.shape,
        "weights",
        "They are (..., T_q, T_k): one row per query, one column per key",
    )
    expect_shape(output, want_out.shape, "output",
                 "It is (..., T_q, d_v): one weighted average of the values per query")  # fmt: skip
    expect_dtype(weights, want_w, "weights")
    expect_dtype(output, want_out, "output")
    return output, weights


def _call_on_shape(candidate, shape, q, k, v, want_out, want_w, hints):
    """As _call_attention, adding the batch hint when only the batched shapes fail (not on
    one sequence, nor on the float64 batch of one, which comes after the batched shapes)."""
    try:
        return _call_attention(candidate, q, k, v, want_out, want_w, hints)
    except Mistake as mistake:
        if "Dimension out of range" in str(mistake) and q.dim() < 4:
            raise Mistake(then(str(mistake), _FRONT_AXES_HINT)) from None
        if len(shape) == 4 or q.dtype != torch.float32 or "contiguous" in str(mistake):
            raise
        raise Mistake(then(str(mistake), _BATCH_HINT)) from None


def _unmasked_answers(candidate, gen, attend, hints=None):
    """For each of _SHAPES: (what, q, k, v, output, weights, want_out, want_w), with `attend`
    the reference and the candidate's answer already checked for shapes and return order."""
    for shape, dtype, contiguous in _SHAPES:
        q, k, v = _inputs(gen, *shape, dtype=dtype, contiguous=contiguous)
        want_out, want_w = attend(q, k, v)
        try:
            output, weights = _call_on_shape(candidate, shape, q, k, v, want_out, want_w, hints)
        except Mistake as mistake:
            if dtype == torch.float32 and contiguous:
                raise
            raise Mistake(f"{_describe(q, k, v)}: {mistake}") from None
        yield _describe(q, k, v), q, k, v, output, weights, want_out, want_w


def _describe(q, k, v) -> str:
    """'on q (1, 4, 5) float64 non-contiguous ...': how the robust case looked."""
    extra = "" if q.dtype == torch.float32 else f" {str(q.dtype).removeprefix('torch.')}"
    extra += "" if q.is_contiguous() else " non-contiguous"
    return f"on q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}{extra}"


def _temperature(weights: torch.Tensor, scores: torch.Tensor) -> float | None:
    """c when weights == softmax(scores / c) for one constant c, else None.

    Within a row, log w_j - mean(log w) = (s_j - mean(s)) / c: fitted by least squares.
    """
    weights, scores = weights.detach().double(), scores.detach().double()
    if not (weights > 0).all() or not torch.isfinite(weights).all():
        return None
    log_w = weights.log() - weights.log().mean(-1, keepdim=True)
    if not (log_w.abs() > 1e-4).any():  # uniform weights: no finite c gives them
        return None
    centred = scores - scores.mean(-1, keepdim=True)
    slope = float((log_w * centred).sum() / (centred * centred).sum())
    if slope <= 0 or not torch.allclose(log_w, centred * slope, atol=1e-4, rtol=1e-3):
        return None
    return 1 / slope


def _gradients(candidate, q, k, v, reference_fn, what, *rest, hint=""):
    """Backward: the gradients of q, k, v equal the reference's and are finite."""
    expect_gradients(
        lambda q, k, v: call(candidate, q, k, v, *rest, names=("q", "k", "v")),
        lambda q, k, v: reference_fn(q, k, v, *rest),
        {"q": q, "k": k, "v": v},
        what,
        nonfinite_hint=hint,
    )


# ------------------------------------------------------ lesson 02 ----------


def _unscaled_temperature(weights, q, k) -> str | None:
    c = _temperature(weights, q @ k.transpose(-2, -1))
    if c is None or math.isclose(c, 1.0, rel_tol=1e-3):
        return None
    if math.isclose(c, math.sqrt(q.shape[-1]), rel_tol=1e-3):
        return (
            "the scores are divided by sqrt(d_k): that's lesson 03's idea. Here, use the plain "
            "dot product q·k"
        )
    return (
        f"the scores are divided by {c:.3g} before the softmax (a temperature): here, use "
        "the plain dot product q·k"
    )


@exercise("dot_product_attention")
def dot_product_attention(candidate) -> str:
    expect_signature(candidate, ("q", "k", "v"), "dot_product_attention(q, k, v)")
    answers = _unmasked_answers(candidate, generator(2), reference.dot_product_attention)
    for what, q, k, v, output, weights, want_out, want_w in answers:
        scores = q @ k.transpose(-2, -1)
        expect_close(weights, want_w, "weights", wrong={
            "the softmax runs over the queries (dim=-2); each query's weights must sum to 1 "
            "over the keys: softmax(dim=-1)": scores.softmax(dim=-2),
            "the weights are the raw scores q·k: turn them into a distribution over the keys "
            "with a softmax (dim=-1)": scores,
            "the softmax is taken over all entries at once; take it per query, over the keys "
            "(dim=-1)": scores.flatten(-2).softmax(-1).view_as(scores),
        }, explain=lambda got, q=q, k=k: _unscaled_temperature(got, q, k))  # fmt: skip
        if not softmax_rows_ok(weights):
            raise Mistake("weights do not sum to 1 over the key axis: softmax over dim=-1?")
        expect_close(output, want_out, "output", wrong={
            "the output multiplies the raw scores by v: multiply the softmax weights "
            "instead": scores @ v,
        })  # fmt: skip
        _gradients(candidate, q, k, v, reference.dot_product_attention, what)
    return (
        f"{len(_SHAPES)} input shapes, one sequence, batched, non-contiguous and float64; "
        "values and gradients matched the reference"
    )


# ------------------------------------------------------ lesson 03 ----------

_NONE_HINTS = {
    "NoneType": "mask is None when no mask is given: apply it only `if mask is not None:`",
}

_DROPOUT_HINTS = {
    "positional argument": "Your attention is right without dropout; now add the last "
    "parameter: def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0)",
}


def _softmax(scores, mask=None):
    """Softmax over the keys, as a learner writes it: -inf where masked, so NaN on rows
    where every key is masked (a mistaken answer is undefined there, see `matches`)."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def _weight_mistakes(q, k, v, mask=None) -> dict[str, torch.Tensor]:
    """Diagnosis -> the weights that mistake gives on these inputs."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k), not scaled
    scaled = scores / math.sqrt(d_k)
    wrong = {}
    if mask is not None:
        mask = mask.expand_as(scores)  # (..., T_q, T_k)
        wrong |= {
            "the mask is ignored: before the softmax, set the scores to -inf where the mask is "
            "False, so those keys get exactly zero weight": _softmax(scaled),
            "the mask is inverted: True means *may attend*, so fill the scores with -inf where "
            "the mask is False: scores.masked_fill(~mask, float('-inf'))": _softmax(scaled, ~mask),
            "masked scores are set to 0, but exp(0) = 1 still gives those keys weight: set them "
            "to -inf (or a large negative number like -1e9)": scaled.masked_fill(
                ~mask, 0.0
            ).softmax(dim=-1),
            "the mask is applied after the softmax, so the remaining weights no longer sum to "
            "1: mask the scores *before* the softmax": scaled.softmax(dim=-1) * mask,
        }
        if mask.shape[-1] == mask.shape[-2]:
            wrong[
                "the mask is read the wrong way round: mask[..., i, j] says whether query i may "
                "attend to key j (rows are queries, columns keys); use it as it is, not "
                "transposed"
            ] = _softmax(scaled, mask.transpose(-2, -1))
    masked = scaled if mask is None else scaled.masked_fill(~mask, float("-inf"))
    return wrong | {
        "the scaling comes after the softmax: divide the scores, before the softmax, so the "
        "weights still sum to 1": _softmax(scores, mask) / math.sqrt(d_k),
        "the softmax runs over the queries (dim=-2); each query's weights must sum to 1 over "
        "the keys: softmax(dim=-1)": masked.softmax(dim=-2),
        "the weights are the scaled scores, with no softmax: add .softmax(dim=-1)": scaled,
    }


def _scaling_mistake(weights, q, k, v, mask=None) -> str | None:
    """Name the divisor the learner used when the weights are softmax(q·k / c) for some c."""
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if mask is not None:  # compare only the keys every row may attend to
        mask = mask.expand_as(scores)
        if not mask.all():
            return None
    c = _temperature(weights, scores)
    if c is None:
        return None
    d_k, d_v = q.shape[-1], v.shape[-1]
    named = {
        1.0: "the scores are not scaled: divide q·k by sqrt(d_k), with d_k = q.shape[-1]",
        float(d_k): "the scores are divided by d_k; divide by its square root, math.sqrt(d_k)",
        1 / math.sqrt(d_k): "the scores are multiplied by sqrt(d_k); divide by it instead",
        math.sqrt(d_v): "the scores are divided by the square root of d_v (v's width); the dot "
        "products are q·k, so divide by sqrt(d_k), d_k = q.shape[-1]",
    }
    for divisor, diagnosis in named.items():
        if math.isclose(c, divisor, rel_tol=1e-3):
            return diagnosis
    return (
        f"the scores are divided by {c:.3g}, but here d_k = q.shape[-1] = {d_k}, so divide by "
        f"sqrt(d_k) = {math.sqrt(d_k):.3g}: compute it from q, don't write a fixed number"
    )


def _empty_rows(weights, want_w, mask):
    """Rows of queries that may attend to no key must hold zero weights (the rule of the
    course and of torch's scaled_dot_product_attention)."""
    empty = ~mask.any(dim=-1, keepdim=True).expand_as(want_w)  # (..., T_q, T_k)
    rows = weights.detach()[empty]
    if not torch.isfinite(rows).all():
        raise Mistake(
            "a query whose mask row is all False (it may attend to no key) gets NaN: the "
            "softmax of a row of -inf is 0 / 0. Give such a row zero weights, e.g. "
            "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) after the softmax"
        )
    if close(rows, torch.full_like(rows, 1.0 / want_w.shape[-1])):
        raise Mistake(
            "a query whose mask row is all False gets uniform weights 1/T_k, the average of "
            "keys it was told to ignore (what a -1e9 fill gives). The rule, here and in "
            "torch's scaled_dot_product_attention, is zero weights and a zero output: after "
            "the softmax, weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"
        )
    if not close(rows, torch.zeros_like(rows)):
        raise Mistake(
            "a query whose mask row is all False (it may attend to no key) should get zero "
            f"weights, got values from {float(rows.min()):.3g} to {float(rows.max()):.3g}"
        )


_NAN_GRADIENT = (
    "A softmax over a row of -inf makes NaN, and its backward sends NaN to that row's "
    "scores whatever you do to the weights afterwards (nan_to_num, where(isnan), zeroing the "
    "row). Whether the NaN reaches q and k depends on how the mask got into the scores: "
    "added to them (scores + a 0/-inf mask, or + log(mask)), the NaN passes through the "
    "addition. masked_fill(~mask, float('-inf')) replaces the scores it fills, so its backward "
    "sends them zero and stops the NaN: mask with it, then zero the empty rows after the softmax"
)


def _mask_cases(gen):
    """(name, q, k, v, mask): masks that are not symmetric, in every broadcast shape."""
    causal = torch.ones(5, 5, dtype=torch.bool).tril()  # (T, T): True on and below the diagonal
    # sequence 0 has 4 real keys of 6, sequence 1 has 2: mask and ~mask leave every row a key
    padding = (torch.arange(6) < torch.tensor([4, 2])[:, None])[:, None, :]  # (B, 1, T_k)
    pattern = torch.tensor([[1, 0, 1, 1, 0], [0, 1, 0, 0, 0], [1, 1, 1, 0, 1], [0, 0, 1, 1, 0]])
    empty_rows = torch.ones(2, 4, 5, dtype=torch.bool)  # (B, T_q, T_k)
    empty_rows[0, 1], empty_rows[1, 3] = False, False  # two queries that may attend to nothing
    return [
        ("a causal mask (T, T)", *_inputs(gen, 2, 5, 5, 4, 6), causal),
        ("a padding mask (B, 1, T_k)", *_inputs(gen, 2, 3, 6, 9, 4), padding),
        ("heads (B, h, T_q, T_k) and a mask (T_q, T_k)", *_inputs(gen, 2, 2, 4, 5, 3, 2),
         pattern.bool()),
        ("a mask with a query that may attend to nothing", *_inputs(gen, 2, 4, 5, 3, 6),
         empty_rows),
        ("a causal mask, batch of one, float64", *_inputs(gen, 1, 5, 5, 3, 2,
         dtype=torch.float64), causal),
    ]  # fmt: skip


_NAIVE_SOFTMAX = (
    "the softmax overflows: scores in the hundreds make exp(score) = inf and the weights "
    "inf / inf = NaN. Subtract each row's maximum before exp (softmax(s) = softmax(s - max s)), "
    "or use torch.softmax / scores.softmax(dim=-1), which do it for you"
)


def _check_large_scores(candidate, gen) -> None:
    """Unscaled scores reach the hundreds (lesson 03's point): exp / sum overflows."""
    q, k, v = _inputs(gen, 2, 4, 6, 16, 3)
    q, k = q * 12, k * 12  # scores q·k / 4 of about ±144: exp overflows float32 above 88.7
    want_out, want_w = reference.scaled_dot_product_attention(q, k, v)
    output, weights = _call_attention(candidate, q, k, v, want_out, want_w, None)
    scores = q @ k.transpose(-2, -1) / 4
    naive = scores.exp() / scores.exp().sum(-1, keepdim=True)  # NaN where exp overflowed
    what = "with large scores (q and k of size about 12, d_k = 16)"
    try:
        expect_close(weights, want_w, "weights", wrong={_NAIVE_SOFTMAX: naive})
        expect_close(output, want_out, "output")
        _gradients(candidate, q, k, v, reference.scaled_dot_product_attention, "the gradients",
                   hint=_NAIVE_SOFTMAX)  # fmt: skip
    except Mistake as mistake:
        raise Mistake(f"{what}: {mistake}") from None


def _dropped(candidate, q, k, v, want_out, want_w, p):
    """The candidate's (output, weights) with dropout_p = p, passed positionally."""
    return _call_attention(candidate, q, k, v, want_out, want_w, _DROPOUT_HINTS, None, p)


def _check_dropout(candidate, gen) -> None:
    """dropout_p drops weights after the softmax, each on its own, at the rate asked, and
    scales the kept ones by 1 / (1 - p); a new draw on every call."""
    q, k, v = _inputs(gen, 8, 16, 16, 5, 3)  # 2048 weights: the rate is measurable
    want_out, want_w = reference.scaled_dot_product_attention(q, k, v)
    with torch.random.fork_rng(devices=[]):  # the notebook's random state stays as it was
        torch.manual_seed(0)
        for p in (0.25, 0.6):
            output, weights = _dropped(candidate, q, k, v, want_out, want_w, p)
            what = f"with dropout_p={p}"
            if close(weights, want_w):
                if close(output, want_out):
                    raise Mistake(
                        f"{what} nothing is dropped: drop attention weights at random after "
                        "the softmax, weights = F.dropout(weights, p=dropout_p)"
                    )
                raise Mistake(
                    "the weights you return were not dropped, but the output changed: apply "
                    "dropout to the weights, weights = F.dropout(weights, p=dropout_p), then "
                    "output = weights @ v"
                )
            expect_dropout(weights, want_w, p, what)
            expect_close(output, weights.detach() @ v, f"the output {what}", wrong={
                "the output uses the weights from before dropout: compute it from the dropped "
                "weights you return, output = weights @ v": want_out,
            })  # fmt: skip
            _, again = _dropped(candidate, q, k, v, want_out, want_w, p)
            expect_fresh_randomness(weights, again, what)


@exercise("scaled_dot_product_attention")
def scaled_dot_product_attention(candidate) -> str:
    expect_signature(
        candidate,
        ("q", "k", "v", "mask", "dropout_p"),
        "scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0)",
    )
    gen = generator(3)
    attend = reference.scaled_dot_product_attention
    for what, q, k, v, output, weights, want_out, want_w in _unmasked_answers(
        candidate, gen, attend, _NONE_HINTS
    ):
        try:
            expect_close(
                weights,
                want_w,
                "weights",
                wrong=functools.partial(_weight_mistakes, q, k, v),
                explain=functools.partial(_scaling_mistake, q=q, k=k, v=v),
            )
            expect_close(output, want_out, "output", wrong={
                "the output multiplies the scaled scores by v: multiply the softmax weights "
                "instead": (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) @ v,
            })  # fmt: skip
            _gradients(candidate, q, k, v, attend, what)
        except Mistake as mistake:
            if q.dtype == torch.float32 and q.is_contiguous():
                raise
            raise Mistake(f"{what}: {mistake}") from None
    for what, q, k, v, mask in _mask_cases(gen):
        want_out, want_w = attend(q, k, v, mask)
        try:
            output, weights = _call_attention(candidate, q, k, v, want_out, want_w,
                                              _MASK_HINTS, mask)  # fmt: skip
            if not mask.any(dim=-1).all():
                _empty_rows(weights, want_w, mask)
            expect_close(
                weights,
                want_w,
                "weights",
                wrong=functools.partial(_weight_mistakes, q, k, v, mask),
                explain=functools.partial(_scaling_mistake, q=q, k=k, v=v, mask=mask),
            )
            expect_close(output, want_out, "output", wrong={
                "the output is computed from the weights before masking: use the masked "
                "weights, output = weights @ v": _softmax(
                    q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
                ) @ v,
            })  # fmt: skip
            _gradients(candidate, q, k, v, attend, "the gradients", mask, hint=_NAN_GRADIENT)
        except Mistake as mistake:
            raise Mistake(f"with {what} (mask {tuple(mask.shape)}): {mistake}") from None
    _check_large_scores(candidate, gen)
    _check_dropout(candidate, gen)
    return (
        f"{len(_SHAPES)} shapes without a mask (non-contiguous, float64, batch of one); causal, "
        "padding and per-head masks; a query that may attend to nothing; scores in the hundreds; "
        "values and gradients; dropout at two rates"
    )
