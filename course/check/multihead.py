"""Checkers for lesson 04 (multi-head attention): split_heads, merge_heads, the module.

Every input has B, h, T and d_k all different, so an axis in the wrong place shows up
as a wrong shape, and distinct values everywhere, so a right shape with the numbers in
the wrong places is caught and named.

Every case is judged backward too (gradients with respect to the inputs and, for the
module, every projection's weight and bias); one case per checker has a batch of one in
float64 with non-contiguous inputs.

About `.attn`: the output is checked first, on every case. A module built on torch's
fused F.scaled_dot_product_attention computes the right output but has no weights to
keep; it fails only on the last step, with a message saying the output is right and
that `self.attn` (needed for the lesson's heatmaps) is missing.

About dropout and `.attn`. In training mode `self.attn` may hold the weights after dropout
(the ones that multiply v, as the course's module keeps them) or before it (as d2l.ai's
does, the better picture): both are right, as long as the output is computed from
correctly dropped weights. In the second case those weights are read back from the output
(a float64 case with d_k = T, where w_o and each head's values can be inverted) and judged
as `self.attn` would be: rate, rescaling, each weight on its own, a new draw every call.
"""

import functools
import math

import torch
from torch import nn

from course import multihead as reference
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_dropout,
    expect_fresh_randomness,
    expect_gradients,
    expect_shape,
    expect_signature,
    expect_tensor,
    generator,
    noncontiguous,
    randn,
)

# (B, T, d_model, n_heads): d_k differs from B, T and h in each; n_heads varies. One has a
# batch of one; the last is the robust case: float64 and non-contiguous.
_SPLIT_CASES = [(2, 5, 12, 3), (3, 2, 8, 2), (2, 4, 30, 5), (1, 3, 7, 1), (2, 4, 6, 2)]
_ROBUST = len(_SPLIT_CASES) - 1


def _random(gen, shape: tuple, i: int) -> torch.Tensor:
    """Case i's random input: float32, or, for the robust case, float64 (drawn as such, so
    its values are not float32 numbers: rounding through float32 shows) and non-contiguous."""
    if i == _ROBUST:
        return noncontiguous(randn(gen, *shape, dtype=torch.float64))
    return randn(gen, *shape)


def _case_name(t: torch.Tensor) -> str:
    extra = "" if t.dtype == torch.float32 else ", float64"
    return f"x of shape {tuple(t.shape)}{extra}" + ("" if t.is_contiguous() else ", non-contiguous")


_VIEW_HINT = {
    "view size is not compatible": "After a transpose the tensor is no longer contiguous in "
    "memory: use .reshape(...) instead of .view(...), or .contiguous().view(...)",
}


# ------------------------------------------------------------ split_heads ----------


_SPLIT_HINTS = {
    "is invalid for input of size": "Compute the sizes from the inputs: B, T, d_model = x.shape "
    "and d_k = d_model // n_heads, using the n_heads argument (not a fixed number)",
}


def _split_mistakes(x: torch.Tensor, n_heads: int) -> dict[str, torch.Tensor]:
    """What the usual wrong versions of split_heads return (those with the right shape)."""
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    reshaped_only = x.reshape(B, n_heads, T, d_k)  # keeps the memory order
    interleaved = x.reshape(B, T, d_k, n_heads).permute(0, 3, 1, 2)  # head j: j, j+h, ...
    return {
        "you reshaped (B, T, d_model) straight to (B, h, T, d_k): that keeps the memory order, "
        "so a head gets whole vectors of a few positions instead of its own slice of every "
        "position. Cut the features first, .view(B, T, h, d_k), "
        "then .transpose(1, 2)": reshaped_only,
        "the heads are interleaved: you cut d_model as (d_k, h), so head j gets features "
        "j, j+h, j+2h, ... Head j must hold the contiguous block j*d_k:(j+1)*d_k: "
        ".view(B, T, h, d_k)": interleaved,
        "the heads come out in reverse order: head 0 must hold the first d_k features, "
        "x[..., :d_k]; don't flip the head axis": reference.split_heads(x, n_heads).flip(1),
    }


def _split_shape_hint(got: torch.Tensor, x: torch.Tensor, n_heads: int) -> str:
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    shape = tuple(got.shape)
    if shape == (B, T, n_heads, d_k):
        return (
            "You cut the features into (h, d_k) but left the heads after time: "
            ".transpose(1, 2) to bring them in front, giving (B, h, T, d_k)"
        )
    if shape == (B, d_k, T, n_heads):
        return "You used n_heads as the size of each head: d_k = d_model // n_heads"
    if sorted(shape) == sorted((B, n_heads, T, d_k)):
        return (
            "The right sizes in the wrong order: you transposed the wrong axes. "
            "From (B, T, h, d_k), swap time and heads: .transpose(1, 2) or .permute(0, 2, 1, 3)"
        )
    return "It is (B, h, T, d_k) with d_k = d_model // n_heads"


@exercise("split_heads")
def split_heads(candidate) -> str:
    expect_signature(candidate, ("x", "n_heads"), "split_heads(x, n_heads)")
    gen = generator(4)
    for i, (B, T, d_model, n_heads) in enumerate(_SPLIT_CASES):
        if i == 0:  # distinct, readable numbers: any misplaced one is visible
            x = torch.arange(B * T * d_model, dtype=torch.float).view(B, T, d_model)
        else:
            x = _random(gen, (B, T, d_model), i)
        want = reference.split_heads(x, n_heads)
        got = call(candidate, x, n_heads, names=("x", "n_heads"), hints=_SPLIT_HINTS)
        expect_tensor(got, "the result")
        inputs = f"({_case_name(x)}, n_heads={n_heads})"
        expect_shape(got, want.shape, f"the result {inputs}", _split_shape_hint(got, x, n_heads))
        wrong = _split_mistakes(x, n_heads) if n_heads > 1 else {}
        expect_close(got, want, f"the result {inputs}", wrong=wrong, atol=0, rtol=0)
        expect_gradients(
            lambda x, n_heads=n_heads: call(candidate, x, n_heads, names=("x", "n_heads")),
            lambda x, n_heads=n_heads: reference.split_heads(x, n_heads),
            {"x": x},
            f"the result {inputs}",
        )
    return (
        f"{len(_SPLIT_CASES)} inputs, 1 to 5 heads, float64 and non-contiguous too; every "
        "number in its head, gradients included"
    )


# ------------------------------------------------------------ merge_heads ----------


def _merge_mistakes(heads: torch.Tensor) -> dict[str, torch.Tensor]:
    B, h, T, d_k = heads.shape
    return {
        "you reshaped (B, h, T, d_k) straight to (B, T, h*d_k) without moving the heads back "
        "behind time: the numbers end up at the wrong positions. First .transpose(1, 2) to "
        "(B, T, h, d_k), then .reshape(B, T, h * d_k)": heads.reshape(B, T, h * d_k),
        "the heads' features are interleaved: you flattened (d_k, h) instead of (h, d_k). "
        "Head j's d_k features must stay together at j*d_k:(j+1)*d_k: "
        ".transpose(1, 2).reshape(B, T, h * d_k)": heads.permute(0, 2, 3, 1).reshape(B, T, h * d_k),
        "you transposed the wrong axes: the heads (dim 1) and time (dim 2) must swap, "
        ".transpose(1, 2), before the reshape": heads.transpose(2, 3).reshape(B, T, h * d_k),
        "the heads are concatenated in reverse order: head 0's features come first, "
        "then head 1's, ...; don't flip the head axis": reference.merge_heads(heads.flip(1)),
    }


def _merge_shape_hint(got: torch.Tensor, heads: torch.Tensor) -> str:
    B, h, T, d_k = heads.shape
    if tuple(got.shape) == (B, T, h, d_k):
        return "Almost: now flatten the last two axes, .reshape(B, T, h * d_k)"
    if tuple(got.shape) == (B, h, T * d_k):
        return "You flattened time with the features: first .transpose(1, 2) to (B, T, h, d_k)"
    return "It is (B, T, h * d_k): the heads' answers side by side for each position"


@exercise("merge_heads")
def merge_heads(candidate) -> str:
    expect_signature(candidate, ("x",), "merge_heads(x)")
    gen = generator(5)
    for i, (B, T, d_model, n_heads) in enumerate(_SPLIT_CASES):
        d_k = d_model // n_heads
        if i == 0:
            heads = torch.arange(B * n_heads * T * d_k, dtype=torch.float)
            heads = heads.view(B, n_heads, T, d_k)
        else:
            heads = _random(gen, (B, n_heads, T, d_k), i)
        want = reference.merge_heads(heads)
        got = call(candidate, heads, names=("x",), hints=_VIEW_HINT)
        expect_tensor(got, "the result")
        what = f"the result ({_case_name(heads)})"
        expect_shape(got, want.shape, what, _merge_shape_hint(got, heads))
        wrong = _merge_mistakes(heads) if n_heads > 1 else {}
        expect_close(got, want, what, wrong=wrong, atol=0, rtol=0)
        expect_gradients(
            lambda x: call(candidate, x, names=("x",)), reference.merge_heads, {"x": heads}, what
        )
        if i == 0:
            x = torch.arange(B * T * d_model, dtype=torch.float).view(B, T, d_model)
            round_trip = call(candidate, reference.split_heads(x, n_heads), names=("x",))
            expect_close(round_trip, x, "merge_heads(split_heads(x))", atol=0, rtol=0)
    return (
        f"{len(_SPLIT_CASES)} inputs, 1 to 5 heads, float64 and non-contiguous too, gradients "
        "included; merge_heads(split_heads(x)) == x"
    )


# ------------------------------------------------------- MultiHeadAttention ----------

_PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")

_SOURCES_HINT = (
    "Which input feeds which projection? q = w_q(query); k = w_k(key) and v = w_v(value), "
    "both T_k long: only q comes from query"
)

_INIT_HINTS = {
    # the checker passes the arguments positionally: this error comes from a call inside
    # __init__, most often nn.Dropout(dropout=...)
    "unexpected keyword argument 'dropout'": "nn.Dropout and F.dropout call the rate p: "
    "nn.Dropout(p=dropout), F.dropout(weights, p=dropout)",
    "positional argument": "The constructor's signature is "
    "__init__(self, d_model, n_heads, dropout=0.0, bias=True), in that order",
}

_CALL_HINTS = {
    "must have the same length T_k": _SOURCES_HINT,
    "Expected size for first two dimensions": _SOURCES_HINT,
    "does not broadcast with previously seen size": _SOURCES_HINT,
    "positional argument": "The module is called as mha(query, key, value, mask=None)",
    "unexpected keyword argument 'mask'": "Name the last argument of forward `mask`: "
    "forward(self, query, key, value, mask=None)",
    "view size is not compatible": _VIEW_HINT["view size is not compatible"],
    "must match the size": "Check the axes: q, k, v are (B, h, T, d_k) after the split, "
    "the weights (B, h, T_q, T_k); the mask arrives broadcastable to (B, h, T_q, T_k) as it is",
    "shape '[": "Check the sizes you reshape to: query has T_q positions, key and value T_k",
}


def _instantiate(candidate, d_model: int, n_heads: int, *rest) -> nn.Module:
    """candidate(d_model, n_heads, *rest), positionally as the lesson's signature states."""
    names = ("d_model", "n_heads", "dropout", "bias")
    module = call(candidate, d_model, n_heads, *rest, names=names, hints=_INIT_HINTS)
    if not isinstance(module, nn.Module):
        raise Mistake(
            f"MultiHeadAttention({d_model}, {n_heads}) gave a {type(module).__name__}, not an "
            "nn.Module: write `class MultiHeadAttention(nn.Module)` and call "
            "super().__init__() first in __init__"
        )
    return module


def _copy_weights(module: nn.Module, ref: reference.MultiHeadAttention) -> None:
    """Put the reference's weights into the learner's w_q, w_k, w_v, w_o (a reference
    built with bias=False has none to copy, and the learner's must have none either)."""
    d = ref.d_model
    with_bias = ref.w_q.bias is not None
    for name in _PROJECTIONS:
        theirs = getattr(module, name, None)
        if theirs is None:
            present = [n for n in _PROJECTIONS if getattr(module, n, None) is not None]
            raise Mistake(
                f"your module has no attribute {name}. Name the four projections "
                f"self.w_q, self.w_k, self.w_v, self.w_o = nn.Linear(d_model, d_model) "
                f"(found: {', '.join(present) or 'none of them'})"
            )
        weight, bias = getattr(theirs, "weight", None), getattr(theirs, "bias", None)
        if not isinstance(weight, torch.Tensor):
            raise Mistake(
                f"self.{name} is a {type(theirs).__name__}, expected an nn.Linear(d_model, "
                "d_model) (a layer with a .weight)"
            )
        if tuple(weight.shape) != (d, d):
            raise Mistake(
                f"self.{name}.weight has shape {tuple(weight.shape)} for d_model={d}, expected "
                f"({d}, {d}): all four projections are nn.Linear(d_model, d_model); the heads "
                "are cut out of their output by split_heads"
            )
        if not with_bias:
            if bias is not None:
                raise Mistake(
                    f"with bias=False, self.{name} still has a bias: pass the argument on, "
                    "nn.Linear(d_model, d_model, bias=bias)"
                )
        elif not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (d,):
            raise Mistake(
                f"self.{name} has no bias of shape ({d},): by default (bias=True) each "
                "projection is nn.Linear(d_model, d_model, bias=bias) with a bias"
            )
        with torch.no_grad():
            weight.copy_(getattr(ref, name).weight)
            if with_bias:
                bias.copy_(getattr(ref, name).bias)


def _parameters(module: nn.Module, ref: reference.MultiHeadAttention) -> dict:
    """'w_q.weight' -> (the learner's tensor, the reference's), for every projection."""
    pairs = {}
    for name in _PROJECTIONS:
        for kind in ("weight", "bias"):
            theirs, ours = getattr(getattr(module, name), kind), getattr(getattr(ref, name), kind)
            if ours is not None:
                pairs[f"{name}.{kind}"] = (theirs, ours)
    return pairs


def _variant(
    ref,
    query,
    key,
    value,
    mask=None,
    *,
    scale="d_k",
    heads=True,
    w_o=True,
    split=reference.split_heads,
    merge=reference.merge_heads,
    mask_mode="as is",
    projections=("w_q", "w_k", "w_v"),
    softmax_dim=-1,
):
    """The reference's forward with one usual mistake switched on, computed from its weights.

    scale: what the scores are divided by ("d_k": sqrt(d_k), right; "d_model"; "none");
    heads=False: one full-width head; mask_mode: "as is", "ignored" or "inverted";
    projections: which of ref's layers make q, k and v; softmax_dim: the softmax's axis.
    """
    h = ref.n_heads if heads else 1
    w_for_q, w_for_k, w_for_v = (getattr(ref, name) for name in projections)
    q = split(w_for_q(query), h)  # (B, h, T_q, d_k)
    k = split(w_for_k(key), h)  # (B, h, T_k, d_k)
    v = split(w_for_v(value), h)  # (B, h, T_k, d_k)
    divisor = {"d_k": math.sqrt(ref.d_k), "d_model": math.sqrt(ref.d_model), "none": 1.0}[scale]
    if mask is not None and mask_mode != "as is":
        mask = None if mask_mode == "ignored" else ~mask
    scores = q @ k.transpose(-2, -1) / divisor  # (B, h, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = scores.softmax(dim=softmax_dim) @ v  # (B, h, T_q, d_k)
    out = merge(out)  # (B, T_q, d_model)
    return ref.w_o(out) if w_o else out


def _mha_mistakes(ref, query, key, value, mask) -> dict[str, torch.Tensor]:
    """Diagnosis -> the output that mistake gives, on these inputs."""
    args = (ref, query, key, value, mask)
    wrong = {
        "the output skips w_o: after merging the heads, mix them with self.w_o "
        "(return self.w_o(merged))": _variant(*args, w_o=False),
        "the scores are not scaled: each head divides q·k by sqrt(d_k), "
        "with d_k = d_model // n_heads": _variant(*args, scale="none"),
        "the scores are divided by sqrt(d_model); each head works in d_k = d_model // n_heads "
        "dimensions, so divide by sqrt(d_k)": _variant(*args, scale="d_model"),
        "the heads are not split: this is one full-width head. Cut q, k and v into n_heads "
        "heads with split_heads before the attention, and merge them after": _variant(
            *args, heads=False, scale="d_model"
        ),
        "the heads are not split: this is one full-width head (scaled by sqrt(d_k)). Cut q, k "
        "and v into n_heads heads with split_heads before the attention, "
        "merge them after": _variant(*args, heads=False, scale="d_k"),
        "the heads are scrambled: q, k, v were reshaped straight to (B, h, T, d_k). Split with "
        ".view(B, T, h, d_k).transpose(1, 2)": _variant(
            *args, split=lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)
        ),
        "the heads are merged back in the wrong order: (B, h, T, d_k) was reshaped straight to "
        "(B, T, d_model). Use .transpose(1, 2) first, then .reshape": _variant(
            *args, merge=lambda x: x.reshape(x.shape[0], x.shape[2], -1)
        ),
        "query, key and value are mixed up: you used value for the keys and key for the "
        "values. Scores compare w_q(query) with w_k(key); "
        "the weights average w_v(value)": _variant(ref, query, value, key, mask),
        "the values come from key: project value with w_v, v = w_v(value)": _variant(
            ref, query, key, key, mask
        ),
        "the keys come from value: project key with w_k, k = w_k(key)": _variant(
            ref, query, value, value, mask
        ),
        "the values are projected with w_k: v = self.w_v(value)": _variant(
            *args, projections=("w_q", "w_k", "w_k")
        ),
        "the values are projected with w_q: v = self.w_v(value)": _variant(
            *args, projections=("w_q", "w_k", "w_q")
        ),
        "the keys are projected with w_q: k = self.w_k(key)": _variant(
            *args, projections=("w_q", "w_q", "w_v")
        ),
        "the softmax runs over the heads (dim=1): each query's weights must sum to 1 over the "
        "keys, the last axis: softmax(dim=-1)": _variant(*args, softmax_dim=1),
        "the heads are concatenated in reverse order: after the attention, head 0's answer "
        "comes first, then head 1's, ... (merge without flipping the head axis)": _variant(
            *args, merge=lambda x: reference.merge_heads(x.flip(1))
        ),
    }
    if mask is not None:
        wrong = {
            "the mask is ignored: pass it on to the attention of every head (it is "
            "already broadcastable to (B, h, T_q, T_k))": _variant(*args, mask_mode="ignored"),
            "the mask is inverted: True means *may attend*, so fill the scores with -inf "
            "where the mask is False (e.g. scores.masked_fill(~mask, float('-inf')))": _variant(
                *args, mask_mode="inverted"
            ),
        } | wrong
    return wrong


def _cases(gen, d_model: int):
    """(name, query, key, value, mask): self, cross (T_q != T_k, key != value, inputs not
    contiguous), masks, and a batch of one in float64 with non-contiguous inputs."""
    B, T, T_q, T_k = 2, 5, 4, 6
    x = randn(gen, B, T, d_model)
    query, key = randn(gen, B, T_q, d_model), randn(gen, B, T_k, d_model)
    value = randn(gen, B, T_k, d_model)
    # padding: sequence 0 has 4 real keys of 6, sequence 1 has 2; so both the mask and its
    # inverse leave every query something to attend to
    padding = (torch.arange(T_k) < torch.tensor([4, 2])[:, None])[:, None, None, :]  # (B,1,1,T_k)
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    self_padding = (torch.arange(T) < torch.tensor([5, 3])[:, None])[:, None, None, :]
    return [
        ("self-attention", x, x, x, None),
        # non-contiguous with B = 2: in a batch of one, .view(B * T, d_model) still works
        ("cross-attention (T_q=4, T_k=6, key != value), non-contiguous",
         *(noncontiguous(t) for t in (query, key, value)), None),
        ("cross-attention with a padding mask (B, 1, 1, T_k)", query, key, value, padding),
        ("self-attention with a causal mask (T, T)", x, x, x, causal),
        ("self-attention with causal & padding masks (B, 1, T, T)", x, x, x, self_padding & causal),
        ("cross-attention, a batch of one, float64, non-contiguous",
         *(noncontiguous(t[:1].double()) for t in (query, key, value)), padding[1:]),
    ]  # fmt: skip


def _expect_no_head_axis_added(module, query, key, value, mask, want, what: str) -> None:
    """The output failed with a 4-D mask: if the module is right on the same mask without
    its head axis, it adds one itself (mask.unsqueeze(1)): name that."""
    if mask is None or mask.dim() != 4 or mask.shape[1] != 1:
        return
    try:
        got = module(query, key, value, mask[:, 0])  # (B, T_q or 1, T_k): the head axis removed
    except Exception:  # the probe is the checker's own call: any failure means "not that"
        return
    if isinstance(got, torch.Tensor) and close(got, want):
        raise Mistake(
            f"on {what}, your module adds a head axis to the mask (mask.unsqueeze(1)), as the "
            "Annotated Transformer does for its (B, 1, T) masks; the course's masks come with "
            f"it already, {tuple(mask.shape)}, broadcastable to (B, h, T_q, T_k). Pass the mask "
            "on to the attention as it is"
        )


def _run(module, query, key, value, mask, what: str, by_keyword=False) -> torch.Tensor:
    """module(query, key, value[, mask]): positionally, or with mask=mask by keyword."""
    args = (query, key, value) if mask is None or by_keyword else (query, key, value, mask)
    names = ("query", "key", "value", "mask")
    kwargs = {"mask": mask} if mask is not None and by_keyword else {}
    out = call(module, *args, names=names, hints=_CALL_HINTS, **kwargs)
    if isinstance(out, tuple | list):
        raise Mistake(
            f"forward returned a {type(out).__name__} of {len(out)} things on {what}: "
            "return only the output tensor (B, T_q, d_model); keep the weights in self.attn"
        )
    return expect_tensor(out, f"the output on {what}")


def _attn_mistakes(ref, query, key, mask) -> dict[str, torch.Tensor]:
    """What self.attn holds when it keeps the scores (before the softmax) instead."""
    q = reference.split_heads(ref.w_q(query), ref.n_heads)  # (B, h, T_q, d_k)
    k = reference.split_heads(ref.w_k(key), ref.n_heads)  # (B, h, T_k, d_k)
    scores = q @ k.transpose(-2, -1)  # (B, h, T_q, T_k)
    keep = "keep the weights (after the softmax), the ones that multiply v"
    wrong = {
        f"self.attn holds the raw scores q·k, before the softmax: {keep}": scores,
        f"self.attn holds the scaled scores q·k / sqrt(d_k), before the softmax: {keep}": (
            scores / math.sqrt(ref.d_k)
        ),
    }
    if mask is not None:
        wrong |= {
            f"self.attn holds the masked scores, before the softmax: {keep}": (
                (scores / math.sqrt(ref.d_k)).masked_fill(~mask, float("-inf"))
            ),
        }
    return wrong


def _check_attn(module, want: torch.Tensor, what: str, wrong: dict) -> None:
    attn = getattr(module, "attn", None)
    if attn is None:
        raise Mistake(
            "your output is right on every case, but self.attn is missing: keep the attention "
            "weights (B, h, T_q, T_k) in self.attn for plotting (torch's fused "
            "F.scaled_dot_product_attention does not return them; "
            "course.attention.scaled_dot_product_attention returns (output, weights))"
        )
    B, h, T_q, T_k = want.shape
    hint = (
        "One map per head: don't average over the heads"
        if isinstance(attn, torch.Tensor) and tuple(attn.shape) == (B, T_q, T_k)
        else "Keep the weights of the latest call: one (T_q, T_k) map per batch item and head"
    )
    expect_shape(attn, want.shape, f"self.attn after {what}", hint)
    expect_close(attn.detach(), want, f"self.attn after {what}", wrong=wrong)


@exercise("MultiHeadAttention")
def MultiHeadAttention(candidate) -> str:
    # Building modules draws their initial weights from torch's global generator: fork it,
    # so that checking leaves the notebook's random state as it was.
    with torch.random.fork_rng(devices=[]):
        return _check_module(candidate)


def _reference(gen, d_model: int, n_heads: int, bias: bool = True):
    """The course's module with weights from the private stream (biases non-zero)."""
    ref = reference.MultiHeadAttention(d_model, n_heads, bias=bias).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(randn(gen, *p.shape) * 0.4)
    return ref


def _check_module(candidate) -> str:
    if isinstance(candidate, nn.Module):
        raise Mistake(
            "pass the class itself, not an instance: check.MultiHeadAttention(MultiHeadAttention)"
            " (the checker builds its own modules)"
        )
    if isinstance(candidate, type) and issubclass(candidate, nn.Module):
        expect_signature(
            candidate.__init__,
            ("d_model", "n_heads", "dropout", "bias"),
            "MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=True)",
        )
        expect_signature(
            candidate.forward,
            ("query", "key", "value", "mask"),
            "forward(query, key, value, mask=None)",
        )
    gen = generator(6)
    n_cases, kept_weights = 0, []
    for d_model, n_heads in [(12, 3), (16, 4), (8, 1)]:
        ref = _reference(gen, d_model, n_heads)
        module = _instantiate(candidate, d_model, n_heads)
        _copy_weights(module, ref)
        module.eval()
        cases = _cases(gen, d_model)
        if n_cases:  # every targeted case once, then a cross- and a masked case per size
            cases = [cases[1], cases[-2]]
        for what, query, key, value, mask in cases:
            what = f"{what}, d_model={d_model}, n_heads={n_heads}"
            if query.dtype == torch.float64:
                module.double(), ref.double()
            with torch.no_grad():
                want = ref(query, key, value, mask)
                try:
                    got = _run(module, query, key, value, mask, what, by_keyword=n_cases == 2)
                    expect_shape(
                        got,
                        want.shape,
                        f"the output on {what}",
                        "It is (B, T_q, d_model): one vector per query position",
                    )
                except Mistake:
                    _expect_no_head_axis_added(module, query, key, value, mask, want, what)
                    raise
                wrong = functools.partial(_mha_mistakes, ref, query, key, value, mask)
                expect_close(
                    got, want, f"the output on {what}", wrong=wrong if n_heads > 1 else None
                )
            _check_gradients(module, ref, query, key, value, mask, what)
            n_cases += 1
        module.float(), ref.float()
        with torch.no_grad():  # .attn holds the last call's weights
            _run(module, query.float(), key.float(), value.float(), mask, what)
            ref(query.float(), key.float(), value.float(), mask)
            wrong = functools.partial(_attn_mistakes, ref, query.float(), key.float(), mask)
        kept_weights.append((module, ref.attn, what, wrong))
    for module, want, what, wrong in kept_weights:  # the output is right everywhere: now .attn
        _check_attn(module, want, what, wrong)
    _check_bias(candidate, gen)
    _check_dropout(candidate, gen)
    return (
        f"{n_cases} cases: self- and cross-attention, padding and causal masks, 1 to 4 heads, "
        "float64 and a batch of one; values and gradients; bias=False; dropout on the "
        "attention weights, only while training"
    )


def _check_gradients(module, ref, query, key, value, mask, what: str) -> None:
    """Backward: gradients of the inputs and of every projection equal the reference's.
    In self-attention one tensor is query, key and value at once, as in the lesson."""
    if query is key is value:

        def run(x):
            return _run(module, x, x, x, mask, what)

        def run_reference(x):
            return ref(x, x, x, mask)

        inputs = {"x": query}
    else:

        def run(q, k, v):
            return _run(module, q, k, v, mask, what)

        def run_reference(q, k, v):
            return ref(q, k, v, mask)

        inputs = {"query": query, "key": key, "value": value}
    expect_gradients(
        run, run_reference, inputs, f"the output on {what}", parameters=_parameters(module, ref)
    )


def _check_bias(candidate, gen) -> None:
    """MultiHeadAttention(d_model, n_heads, 0.0, False): no bias anywhere, same result."""
    ref = _reference(gen, 12, 3, bias=False)
    module = _instantiate(candidate, 12, 3, 0.0, False)
    _copy_weights(module, ref)
    module.eval()
    x = randn(gen, 2, 5, 12)
    what = "self-attention with bias=False"
    with torch.no_grad():
        expect_close(_run(module, x, x, x, None, what), ref(x, x, x), f"the output on {what}")


def _check_dropout(candidate, gen) -> None:
    """dropout=p: no effect in eval mode; in training mode, .attn holds the weights with
    about p of them dropped, each on its own, the rest scaled by 1 / (1 - p), new on every
    call, and the output is what those weights give."""
    d_model, n_heads = 12, 3
    x = randn(gen, 4, 16, d_model)  # 4 x 3 heads x 16 x 16 = 3072 weights: rates measurable
    for p in (0.5, 0.2):
        ref = _reference(gen, d_model, n_heads)
        module = _instantiate(candidate, d_model, n_heads, p)
        _copy_weights(module, ref)
        with torch.no_grad():
            want = ref(x, x, x)
            kept_all = ref.attn  # (B, h, T, T), no dropout: ref is in eval mode
            module.eval()
            torch.manual_seed(0)  # the checker runs inside fork_rng: the notebook's state is safe
            evaluated = _run(module, x, x, x, None, f"self-attention with dropout={p}, eval mode")
            expect_shape(evaluated, want.shape, f"the output with dropout={p} in eval mode")
            if not close(evaluated, want):
                raise Mistake(
                    f"with dropout={p} the output changes in eval mode: drop attention weights "
                    "only while training, dropout_p = self.dropout if self.training else 0.0 "
                    "(an nn.Dropout module does this by itself)"
                )
            module.train()
            what = f"self-attention with dropout={p} in training mode"
            trained = _run(module, x, x, x, None, what)
            attn = getattr(module, "attn", None)
            if close(trained, want):
                if isinstance(attn, torch.Tensor) and attn.shape == kept_all.shape:
                    if not close(attn, kept_all):  # dropped, but not the weights used
                        raise Mistake(
                            f"with dropout={p} in training mode the output does not come from "
                            "the dropped weights in self.attn: drop the attention weights, then "
                            "multiply those by v (keep the same weights in self.attn)"
                        )
                raise Mistake(
                    f"with dropout={p} in training mode nothing was dropped: drop attention "
                    "weights while training, dropout_p = self.dropout if self.training else 0.0"
                )
            if isinstance(attn, torch.Tensor) and attn.shape == kept_all.shape:
                if close(attn, kept_all):  # self.attn before dropout, the output dropped
                    _check_dropout_behind_output(candidate, p, what)
                    continue
            expect_shape(attn, kept_all.shape, f"self.attn after {what}")
            expect_dropout(attn, kept_all, p, f"self.attn after {what}")
            v = reference.split_heads(ref.w_v(x), n_heads)  # (B, h, T, d_k)
            from_attn = ref.w_o(reference.merge_heads(attn @ v))  # what self.attn gives
            if not close(trained, from_attn) and _dropout_drawn_twice(candidate, p, what):
                raise Mistake(
                    f"with dropout={p} in training mode the output and self.attn come from two "
                    "different dropout draws (each call to dropout draws a new random mask): "
                    "drop the weights once, dropped = dropout(weights), keep dropped in "
                    "self.attn and multiply the same dropped weights by v"
                )
            expect_close(trained, from_attn, f"the output on {what}")
            first = attn.clone()
            _run(module, x, x, x, None, what)
            expect_fresh_randomness(first, module.attn, f"self.attn after {what}")


def _weights_behind(module, ref, x, n_heads: int, what: str):
    """The attention weights the module's output was computed from, read back from it.

    The output is w_o(merge(weights @ v)); with d_k = T the values of a head are a square
    (T, T) matrix, so in float64 both steps can be undone: merged = (out - b_o) W_o^-T,
    then weights = heads v^-1. Entries within 1e-9 of 0 are set to 0 (dropped)."""
    out = _run(module, x, x, x, None, what).detach().double()
    merged = torch.linalg.solve(ref.w_o.weight.T, out - ref.w_o.bias, left=False)
    heads = reference.split_heads(merged, n_heads)  # (B, h, T, d_k)
    v = reference.split_heads(ref.w_v(x), n_heads)  # (B, h, T, d_k), d_k = T: square
    weights = torch.linalg.solve(v, heads, left=False)  # weights @ v = heads
    return weights.masked_fill(weights.abs() < 1e-9, 0.0), heads


def _dropout_drawn_twice(candidate, p: float, what: str) -> bool:
    """Is the output computed from a correct dropout of the weights, and self.attn another,
    different one (dropout called twice)? Read back as in `_check_dropout_behind_output`."""
    d_model, n_heads, T = 48, 3, 16  # d_k = T = 16: the weights can be read back
    gen = generator(7)
    try:
        ref = _reference(gen, d_model, n_heads).double()
        module = _instantiate(candidate, d_model, n_heads, p)
        _copy_weights(module, ref)
        module.double().train()
        x = randn(gen, 4, T, d_model, dtype=torch.float64)
        with torch.no_grad():
            ref(x, x, x)
            kept_all = ref.attn  # (B, h, T, T), no dropout: ref is in eval mode
            behind, _ = _weights_behind(module, ref, x, n_heads, what)
        attn = getattr(module, "attn", None)
    except Exception:  # noqa: BLE001 (any failure here: not this mistake)
        return False

    visible = kept_all > 1e-6  # weights too small to tell dropped from kept are left out

    def a_drop(weights) -> bool:  # about p of them zero, the rest scaled by 1 / (1 - p)
        if not isinstance(weights, torch.Tensor) or weights.shape != kept_all.shape:
            return False
        weights = weights.double()
        kept = (weights != 0) & visible
        rate_ok = abs(1 - float(kept[visible].double().mean()) - p) < 0.07
        scaled = kept_all[kept] / (1 - p)
        return rate_ok and torch.allclose(weights[kept], scaled, rtol=1e-6, atol=1e-9)

    if not (a_drop(behind) and a_drop(attn)):
        return False
    return not torch.equal((behind != 0) & visible, (attn.double() != 0) & visible)


def _check_dropout_behind_output(candidate, p: float, what: str) -> None:
    """self.attn holds the weights before dropout (as d2l keeps them) and the output is
    dropped: right, if the weights the output was computed from are the dropped ones. Read
    them back from the output (see `_weights_behind`) and judge them as self.attn is judged.
    """
    d_model, n_heads, T = 48, 3, 16  # d_k = T = 16
    gen = generator(7)
    ref = _reference(gen, d_model, n_heads).double()
    module = _instantiate(candidate, d_model, n_heads, p)
    _copy_weights(module, ref)
    module.double().train()
    x = randn(gen, 4, T, d_model, dtype=torch.float64)  # 4 x 3 x 16 x 16 = 3072 weights
    with torch.no_grad():
        ref(x, x, x)
        kept_all = ref.attn  # (B, h, T, T), no dropout: ref is in eval mode
        weights, heads = _weights_behind(module, ref, x, n_heads, what)
        dropped_heads = heads.abs() < 1e-9
        if abs(float(dropped_heads.double().mean()) - p) < 0.07:
            raise Mistake(
                f"with dropout={p} in training mode, dropout is applied to the attention's "
                "output (the heads, weights @ v), not to the weights: drop the attention "
                "weights after the softmax, then multiply the dropped weights by v"
            )
        behind = (
            f"the weights behind the output of {what} (self.attn keeps them before dropout, "
            "which is fine)"
        )
        expect_dropout(weights, kept_all, p, behind)
        again, _ = _weights_behind(module, ref, x, n_heads, what)
        expect_fresh_randomness(weights, again, behind)
