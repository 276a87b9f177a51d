"""Checkers for lesson 02 (dot-product attention) and lesson 03 (scaled, masked)."""

import math

from course import attention as reference
from course.check._framework import (
    Mistake,
    call,
    expect_close,
    expect_shape,
    expect_tuple,
    exercise,
    generator,
    randn,
    softmax_rows_ok,
)

# T_q, T_k, d_k, d_v all differ, so a swapped axis or a swapped return shows up in a shape.
_SHAPES = [
    (3, 5, 4, 6),  # one sequence: q (3, 4), k (5, 4), v (5, 6)
    (2, 3, 5, 4, 6),  # a batch of 2
    (2, 2, 4, 3, 8, 2),  # a batch of 2 x 2 heads
]

_SHAPE_HINTS = {
    "cannot be multiplied": "The scores are q @ k with k's last two axes swapped: "
    "k.transpose(-2, -1)",
    "must match the size": "Check which axes you multiply: scores are (T_q, T_k), the output (T_q, d_v)",
}

_BATCH_HINT = ("It works on one sequence but not on a batch: use k.transpose(-2, -1), not k.T "
               "or k.t(), so the batch axes stay in front")


def _inputs(gen, *shape):
    *batch, T_q, T_k, d_k, d_v = shape
    return randn(gen, *batch, T_q, d_k), randn(gen, *batch, T_k, d_k), randn(gen, *batch, T_k, d_v)


@exercise("dot_product_attention")
def dot_product_attention(candidate) -> str:
    gen = generator(2)
    for shape in _SHAPES:
        q, k, v = _inputs(gen, *shape)
        want_out, want_w = reference.dot_product_attention(q, k, v)
        try:
            result = call(candidate, q, k, v, names=("q", "k", "v"), hints=_SHAPE_HINTS)
            output, weights = expect_tuple(result, ("output", "weights"))
            if (getattr(output, "shape", None) == want_w.shape
                    and getattr(weights, "shape", None) == want_out.shape):
                raise Mistake("the results come back in the wrong order: return (output, weights)")
            expect_shape(weights, want_w.shape, "weights",
                         "They are (..., T_q, T_k): one row per query, one column per key")
            expect_shape(output, want_out.shape, "output",
                         "It is (..., T_q, d_v): one weighted average of the values per query")
        except Mistake as mistake:
            if len(shape) == 4:
                raise
            raise Mistake(f"{mistake}. {_BATCH_HINT}") from None

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
        })
        if not softmax_rows_ok(weights):
            raise Mistake("weights do not sum to 1 over the key axis: softmax over dim=-1?")
        expect_close(output, want_out, "output", wrong={
            "the output multiplies the raw scores by v: multiply the softmax weights "
            "instead": scores @ v,
        })
    return f"{len(_SHAPES)} input shapes, one sequence and batched, all matched the reference"
