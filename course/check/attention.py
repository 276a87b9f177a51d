"""Checkers for lesson 02 (dot-product attention) and lesson 03 (scaled, masked).

Both exercises return (output, weights) for q (..., T_q, d_k), k (..., T_k, d_k),
v (..., T_k, d_v). The inputs make T_q, T_k, d_k and d_v all different, so a swapped
axis or a swapped return shows up as a wrong shape, and the masks are not symmetric,
so a transposed mask shows up as wrong numbers.
"""

import math

import torch

from course import attention as reference
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_shape,
    expect_tuple,
    generator,
    matches,
    randn,
    softmax_rows_ok,
)

# T_q, T_k, d_k, d_v all differ, so a swapped axis or a swapped return shows up in a shape.
_SHAPES = [
    (3, 5, 4, 6),  # one sequence: q (3, 4), k (5, 4), v (5, 6)
    (2, 3, 5, 9, 6),  # a batch of 2; d_k = 9, so sqrt(d_k) = 3 differs from d_k and sqrt(d_v)
    (2, 2, 4, 3, 8, 2),  # a batch of 2 x 2 heads
]

_SHAPE_HINTS = {
    "cannot be multiplied": "The scores are q @ k with k's last two axes swapped: "
    "k.transpose(-2, -1)",
    "must match the size": "Check which axes you multiply: scores are (T_q, T_k), the output "
    "(T_q, d_v)",
}

_MASK_HINTS = {
    "unexpected keyword argument 'mask'": "Your function must take the mask as its fourth "
    "argument: def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0)",
    "must match the size": "Use the mask as it comes: it is already broadcastable to the "
    "scores' shape (..., T_q, T_k), so don't transpose, reshape or unsqueeze it",
    "expected a boolean tensor": "The mask is boolean: fill with scores.masked_fill(~mask, "
    "float('-inf')) or torch.where(mask, scores, float('-inf'))",
    "Subtraction, the `-` operator, with a bool tensor": "The mask is boolean: use ~mask (not "
    "1 - mask) for its opposite",
} | _SHAPE_HINTS

_BATCH_HINT = (
    "It works on one sequence but not on a batch: use k.transpose(-2, -1), not k.T "
    "or k.t(), so the batch axes stay in front"
)


def _inputs(gen, *shape):
    *batch, T_q, T_k, d_k, d_v = shape
    return randn(gen, *batch, T_q, d_k), randn(gen, *batch, T_k, d_k), randn(gen, *batch, T_k, d_v)


def _call_attention(candidate, q, k, v, want_out, want_w, hints, **kwargs):
    """Call an attention answer; return its (output, weights) with the shapes checked."""
    result = call(candidate, q, k, v, names=("q", "k", "v"), hints=hints, **kwargs)
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
    return output, weights


def _call_on_shape(candidate, shape, q, k, v, want_out, want_w, hints, **kwargs):
    """As _call_attention, adding the batch hint when only the batched shapes fail."""
    try:
        return _call_attention(candidate, q, k, v, want_out, want_w, hints, **kwargs)
    except Mistake as mistake:
        if len(shape) == 4:
            raise
        raise Mistake(f"{mistake}. {_BATCH_HINT}") from None


def _unmasked_answers(candidate, gen, attend, hints):
    """For each of _SHAPES: (q, k, v, output, weights, want_out, want_w), with `attend` the
    reference and the candidate's answer already checked for shapes and return order."""
    for shape in _SHAPES:
        q, k, v = _inputs(gen, *shape)
        want_out, want_w = attend(q, k, v)
        output, weights = _call_on_shape(candidate, shape, q, k, v, want_out, want_w, hints)
        yield q, k, v, output, weights, want_out, want_w


# ------------------------------------------------------ lesson 02 ----------


@exercise("dot_product_attention")
def dot_product_attention(candidate) -> str:
    answers = _unmasked_answers(
        candidate, generator(2), reference.dot_product_attention, _SHAPE_HINTS
    )
    for q, k, v, output, weights, want_out, want_w in answers:
        scores = q @ k.transpose(-2, -1)
        expect_close(weights, want_w, "weights", wrong={
            "the softmax runs over the queries (dim=-2); each query's weights must sum to 1 "
            "over the keys: softmax(dim=-1)": scores.softmax(dim=-2),
            "the weights are the raw scores q·k: turn them into a distribution over the keys "
            "with a softmax (dim=-1)": scores,
            "the scores are divided by sqrt(d_k): that's lesson 03's idea. Here, use the plain "
            "dot product q·k": (scores / math.sqrt(q.shape[-1])).softmax(dim=-1),
            "the softmax is taken over all entries at once; take it per query, over the keys "
            "(dim=-1)": scores.flatten(-2).softmax(-1).view_as(scores),
        })  # fmt: skip
        if not softmax_rows_ok(weights):
            raise Mistake("weights do not sum to 1 over the key axis: softmax over dim=-1?")
        expect_close(output, want_out, "output", wrong={
            "the output multiplies the raw scores by v: multiply the softmax weights "
            "instead": scores @ v,
        })  # fmt: skip
    return f"{len(_SHAPES)} input shapes, one sequence and batched, all matched the reference"


# ------------------------------------------------------ lesson 03 ----------

_NONE_HINTS = {
    "NoneType": "mask is None when no mask is given: apply it only `if mask is not None:`",
} | _SHAPE_HINTS

_DROPOUT_HINTS = {
    "unexpected keyword argument 'dropout_p'": "Your attention is right without dropout; now "
    "add the last parameter: def scaled_dot_product_attention(q, k, v, mask=None, "
    "dropout_p=0.0)",
} | _SHAPE_HINTS


def _softmax(scores, mask=None):
    """Softmax over the keys, as a learner writes it: -inf where masked, so NaN on rows
    where every key is masked (a mistaken answer is undefined there, see `matches`)."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def _weight_mistakes(q, k, v, mask=None) -> dict[str, torch.Tensor]:
    """Diagnosis -> the weights that mistake gives on these inputs."""
    d_k, d_v = q.shape[-1], v.shape[-1]
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
    return wrong | {
        "the scores are not scaled: divide q·k by sqrt(d_k), with d_k = q.shape[-1]": (
            _softmax(scores, mask)
        ),
        "the scores are divided by d_k; divide by its square root, math.sqrt(d_k)": (
            _softmax(scores / d_k, mask)
        ),
        "the scores are multiplied by sqrt(d_k); divide by it instead": (
            _softmax(scores * math.sqrt(d_k), mask)
        ),
        "the scores are divided by the square root of d_v (v's width); the dot products are "
        "q·k, so divide by sqrt(d_k), d_k = q.shape[-1]": _softmax(scores / math.sqrt(d_v), mask),
        "the scaling comes after the softmax: divide the scores, before the softmax, so the "
        "weights still sum to 1": _softmax(scores, mask) / math.sqrt(d_k),
        "the softmax runs over the queries (dim=-2); each query's weights must sum to 1 over "
        "the keys: softmax(dim=-1)": (
            scaled.softmax(dim=-2)
            if mask is None
            else scaled.masked_fill(~mask, float("-inf")).softmax(dim=-2)
        ),
        "the weights are the scaled scores, with no softmax: add .softmax(dim=-1)": scaled,
    }


def _accept_empty_rows(weights, want_w, mask, v):
    """Rows of queries that may attend to no key: finite values are required.

    Zero weights (the reference's choice, and torch's) and the uniform 1 / T_k that a
    -1e9 fill gives are both accepted; returns the (output, weights) to expect.
    """
    empty = ~mask.any(dim=-1, keepdim=True).expand_as(want_w)  # (..., T_q, T_k)
    rows = weights[empty]
    if not torch.isfinite(rows).all():
        raise Mistake(
            "a query whose mask row is all False (it may attend to no key) gets NaN: the "
            "softmax of a row of -inf is 0 / 0. Give such a row zero weights, e.g. "
            "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) after the softmax, "
            "or fill with a large negative number (-1e9) instead of -inf"
        )
    uniform = torch.full_like(rows, 1.0 / want_w.shape[-1])
    if not (close(rows, torch.zeros_like(rows)) or close(rows, uniform)):
        raise Mistake(
            "a query whose mask row is all False (it may attend to no key) should get zero "
            f"weights (or the uniform 1/T_k that a -1e9 fill gives), got values from "
            f"{float(rows.min()):.3g} to {float(rows.max()):.3g}"
        )
    want_w = torch.where(empty, weights, want_w)
    return want_w @ v, want_w


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
    ]  # fmt: skip


def _check_dropout(candidate, gen, p=0.25) -> None:
    """dropout_p drops weights after the softmax and scales the kept ones by 1 / (1 - p)."""
    q, k, v = _inputs(gen, 4, 6, 8, 5, 3)
    want_out, want_w = reference.scaled_dot_product_attention(q, k, v)
    with torch.random.fork_rng(devices=[]):  # the notebook's random state stays as it was
        torch.manual_seed(0)
        output, weights = _call_attention(
            candidate, q, k, v, want_out, want_w, _DROPOUT_HINTS, dropout_p=p
        )
    if close(weights, want_w):
        if close(output, want_out):
            raise Mistake(
                f"with dropout_p={p} nothing is dropped: drop attention weights at random "
                "after the softmax, weights = F.dropout(weights, p=dropout_p)"
            )
        raise Mistake(
            "the weights you return were not dropped, but the output changed: apply dropout "
            "to the weights, weights = F.dropout(weights, p=dropout_p), then output = weights @ v"
        )
    dropped = weights == 0
    kept = ~dropped
    if matches(weights, want_w.masked_fill(dropped, float("nan"))) and dropped.any():
        raise Mistake(
            "the weights that survive dropout are not rescaled: multiply them by 1 / (1 - "
            "dropout_p), so their expected value stays the same (F.dropout does it for you)"
        )
    if not (kept.any() and close(weights[kept], want_w[kept] / (1 - p))):
        raise Mistake(
            f"with dropout_p={p} each weight should be either 0 (dropped) or weight / (1 - "
            "dropout_p) (kept): apply dropout to the weights *after* the softmax, "
            "F.dropout(weights, p=dropout_p)"
        )
    share = float(dropped.float().mean())
    if not 0.1 <= share <= 0.4:
        raise Mistake(
            f"with dropout_p={p} you dropped {share:.0%} of the weights; about {p:.0%} should go"
        )
    expect_close(output, weights @ v, f"the output with dropout_p={p}", wrong={
        "the output uses the weights from before dropout: compute it from the dropped "
        "weights you return, output = weights @ v": want_out,
    })  # fmt: skip


@exercise("scaled_dot_product_attention")
def scaled_dot_product_attention(candidate) -> str:
    gen = generator(3)
    answers = _unmasked_answers(candidate, gen, reference.scaled_dot_product_attention, _NONE_HINTS)
    for q, k, v, output, weights, want_out, want_w in answers:
        expect_close(weights, want_w, "weights", wrong=_weight_mistakes(q, k, v))
        expect_close(output, want_out, "output", wrong={
            "the output multiplies the scaled scores by v: multiply the softmax weights "
            "instead": (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) @ v,
        })  # fmt: skip
    for what, q, k, v, mask in _mask_cases(gen):
        want_out, want_w = reference.scaled_dot_product_attention(q, k, v, mask)
        try:
            output, weights = _call_attention(
                candidate, q, k, v, want_out, want_w, _MASK_HINTS, mask=mask
            )
            if not mask.any(dim=-1).all():
                want_out, want_w = _accept_empty_rows(weights, want_w, mask, v)
            expect_close(weights, want_w, "weights", wrong=_weight_mistakes(q, k, v, mask))
            expect_close(output, want_out, "output", wrong={
                "the output is computed from the weights before masking: use the masked "
                "weights, output = weights @ v": _softmax(
                    q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
                ) @ v,
            })  # fmt: skip
        except Mistake as mistake:
            raise Mistake(f"with {what} (mask {tuple(mask.shape)}): {mistake}") from None
    _check_dropout(candidate, gen)
    return (
        f"{len(_SHAPES)} shapes without a mask; causal, padding and per-head masks; a query "
        "that may attend to nothing; dropout"
    )
