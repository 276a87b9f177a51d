"""Checkers for lesson 04 (multi-head attention): split_heads, merge_heads, the module.

Every input has B, h, T and d_k all different, so an axis in the wrong place shows up
as a wrong shape, and distinct values everywhere, so a right shape with the numbers in
the wrong places is caught and named.

About `.attn`: the output is checked first, on every case. A module built on torch's
fused F.scaled_dot_product_attention computes the right output but has no weights to
keep; it fails only on the last step, with a message saying the output is right and
that `self.attn` (needed for the lesson's heatmaps) is missing.
"""

import math

import torch
from torch import nn

from course import multihead as reference
from course.attention import scaled_dot_product_attention
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_shape,
    expect_tensor,
    generator,
    randn,
)

# (B, T, d_model, n_heads): d_k differs from B, T and h in each; n_heads varies.
_SPLIT_CASES = [(2, 5, 12, 3), (3, 2, 8, 2), (2, 4, 30, 5), (1, 3, 7, 1)]

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
        "position. Cut the features first, .view(B, T, h, d_k), then .transpose(1, 2)": (
            reshaped_only
        ),
        "the heads are interleaved: you cut d_model as (d_k, h), so head j gets features "
        "j, j+h, j+2h, ... Head j must hold the contiguous block j*d_k:(j+1)*d_k: "
        ".view(B, T, h, d_k)": interleaved,
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
    gen = generator(4)
    for i, (B, T, d_model, n_heads) in enumerate(_SPLIT_CASES):
        if i == 0:  # distinct, readable numbers: any misplaced one is visible
            x = torch.arange(B * T * d_model, dtype=torch.float).view(B, T, d_model)
        else:
            x = randn(gen, B, T, d_model)
        want = reference.split_heads(x, n_heads)
        got = call(candidate, x, n_heads, names=("x", "n_heads"), hints=_SPLIT_HINTS)
        expect_tensor(got, "the result")
        inputs = f"(x of shape {tuple(x.shape)}, n_heads={n_heads})"
        expect_shape(got, want.shape, f"the result {inputs}", _split_shape_hint(got, x, n_heads))
        wrong = _split_mistakes(x, n_heads) if n_heads > 1 else {}
        expect_close(got, want, f"the result {inputs}", wrong=wrong, atol=0, rtol=0)
    return f"{len(_SPLIT_CASES)} inputs, 1 to 5 heads, every number in its head"


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
    gen = generator(5)
    for i, (B, T, d_model, n_heads) in enumerate(_SPLIT_CASES):
        d_k = d_model // n_heads
        if i == 0:
            heads = torch.arange(B * n_heads * T * d_k, dtype=torch.float)
            heads = heads.view(B, n_heads, T, d_k)
        else:
            heads = randn(gen, B, n_heads, T, d_k)
        want = reference.merge_heads(heads)
        got = call(candidate, heads, names=("x",), hints=_VIEW_HINT)
        expect_tensor(got, "the result")
        what = f"the result (x of shape {tuple(heads.shape)})"
        expect_shape(got, want.shape, what, _merge_shape_hint(got, heads))
        wrong = _merge_mistakes(heads) if n_heads > 1 else {}
        expect_close(got, want, what, wrong=wrong, atol=0, rtol=0)
        if i == 0:
            x = torch.arange(B * T * d_model, dtype=torch.float).view(B, T, d_model)
            round_trip = call(candidate, reference.split_heads(x, n_heads), names=("x",))
            expect_close(round_trip, x, "merge_heads(split_heads(x))", atol=0, rtol=0)
    return f"{len(_SPLIT_CASES)} inputs, 1 to 5 heads; merge_heads(split_heads(x)) == x"


# ------------------------------------------------------- MultiHeadAttention ----------

_PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")

_SOURCES_HINT = (
    "Which input feeds which projection? q = w_q(query); k = w_k(key) and v = w_v(value), "
    "both T_k long: only q comes from query"
)

_INIT_HINTS = {
    "unexpected keyword argument 'dropout'": "The constructor's signature is "
    "__init__(self, d_model, n_heads, dropout=0.0, bias=True)",
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


def _instantiate(candidate, d_model: int, n_heads: int) -> nn.Module:
    module = call(candidate, d_model, n_heads, names=("d_model", "n_heads"))
    if not isinstance(module, nn.Module):
        raise Mistake(
            f"MultiHeadAttention({d_model}, {n_heads}) gave a {type(module).__name__}, not an "
            "nn.Module: write `class MultiHeadAttention(nn.Module)` and call "
            "super().__init__() first in __init__"
        )
    return module


def _copy_weights(module: nn.Module, ref: reference.MultiHeadAttention) -> None:
    """Put the reference's weights into the learner's w_q, w_k, w_v, w_o."""
    d = ref.d_model
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
        if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (d,):
            raise Mistake(
                f"self.{name} has no bias of shape ({d},): by default (bias=True) each "
                "projection is nn.Linear(d_model, d_model, bias=bias) with a bias"
            )
        with torch.no_grad():
            weight.copy_(getattr(ref, name).weight)
            bias.copy_(getattr(ref, name).bias)


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
):
    """The reference's forward with one usual mistake switched on, computed from its weights.

    scale: what the scores are divided by ("d_k": sqrt(d_k), right; "d_model"; "none");
    heads=False: one full-width head; mask_mode: "as is", "ignored" or "inverted".
    """
    h = ref.n_heads if heads else 1
    q = split(ref.w_q(query), h)  # (B, h, T_q, d_k)
    k = split(ref.w_k(key), h)  # (B, h, T_k, d_k)
    v = split(ref.w_v(value), h)  # (B, h, T_k, d_k)
    divisor = {"d_k": math.sqrt(ref.d_k), "d_model": math.sqrt(ref.d_model), "none": 1.0}[scale]
    q = q * math.sqrt(q.shape[-1]) / divisor  # the attention below divides by sqrt(q's width)
    if mask is not None and mask_mode != "as is":
        mask = None if mask_mode == "ignored" else ~mask
    out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_k)
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
        "and v into n_heads heads with split_heads before the attention, merge them after": (
            _variant(*args, heads=False, scale="d_k")
        ),
        "the heads are scrambled: q, k, v were reshaped straight to (B, h, T, d_k). Split with "
        ".view(B, T, h, d_k).transpose(1, 2)": _variant(
            *args, split=lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)
        ),
        "the heads are merged back in the wrong order: (B, h, T, d_k) was reshaped straight to "
        "(B, T, d_model). Use .transpose(1, 2) first, then .reshape": _variant(
            *args, merge=lambda x: x.reshape(x.shape[0], x.shape[2], -1)
        ),
        "query, key and value are mixed up: you used value for the keys and key for the "
        "values. Scores compare w_q(query) with w_k(key); the weights average w_v(value)": (
            _variant(ref, query, value, key, mask)
        ),
        "the values come from key: project value with w_v, v = w_v(value)": _variant(
            ref, query, key, key, mask
        ),
        "the keys come from value: project key with w_k, k = w_k(key)": _variant(
            ref, query, value, value, mask
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
    """(name, query, key, value, mask): self, cross (T_q != T_k, key != value), masks."""
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
        ("cross-attention (T_q=4, T_k=6, key != value)", query, key, value, None),
        ("cross-attention with a padding mask (B, 1, 1, T_k)", query, key, value, padding),
        ("self-attention with a causal mask (T, T)", x, x, x, causal),
        ("self-attention with causal & padding masks (B, 1, T, T)", x, x, x, self_padding & causal),
    ]


def _run(module, query, key, value, mask, what: str) -> torch.Tensor:
    args = (query, key, value)
    names = ("query", "key", "value")
    if mask is None:
        out = call(module, *args, names=names, hints=_CALL_HINTS)
    else:
        out = call(module, *args, names=names, hints=_CALL_HINTS, mask=mask)
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


def _check_module(candidate) -> str:
    if isinstance(candidate, nn.Module):
        raise Mistake(
            "pass the class itself, not an instance: check.MultiHeadAttention(MultiHeadAttention)"
            " (the checker builds its own modules)"
        )
    gen = generator(6)
    n_cases, kept_weights = 0, []
    for d_model, n_heads in [(12, 3), (16, 4), (8, 1)]:
        ref = reference.MultiHeadAttention(d_model, n_heads).eval()
        with torch.no_grad():  # weights from the private stream, biases non-zero
            for p in ref.parameters():
                p.copy_(randn(gen, *p.shape) * 0.4)
        module = _instantiate(candidate, d_model, n_heads)
        _copy_weights(module, ref)
        module.eval()
        cases = _cases(gen, d_model)
        if n_cases:  # every targeted case once, then a cross- and a masked case per size
            cases = [cases[1], cases[-1]]
        for what, query, key, value, mask in cases:
            what = f"{what}, d_model={d_model}, n_heads={n_heads}"
            with torch.no_grad():
                want = ref(query, key, value, mask=mask)
                got = _run(module, query, key, value, mask, what)
                expect_shape(
                    got,
                    want.shape,
                    f"the output on {what}",
                    "It is (B, T_q, d_model): one vector per query position",
                )
                wrong = _mha_mistakes(ref, query, key, value, mask) if n_heads > 1 else {}
                expect_close(got, want, f"the output on {what}", wrong=wrong)
            n_cases += 1
        with torch.no_grad():  # .attn holds the last call's weights
            wrong = _attn_mistakes(ref, query, key, mask)
        kept_weights.append((module, ref.attn, what, wrong))
    for module, want, what, wrong in kept_weights:  # the output is right everywhere: now .attn
        _check_attn(module, want, what, wrong)
    _check_dropout(candidate, gen)
    return (
        f"{n_cases} cases: self- and cross-attention, padding and causal masks, 1 to 4 heads; "
        "dropout only while training"
    )


def _check_dropout(candidate, gen) -> None:
    """dropout=0.5: no effect in eval mode, some effect in training mode."""
    d_model, n_heads = 12, 3
    ref = reference.MultiHeadAttention(d_model, n_heads).eval()
    module = call(
        candidate, d_model, n_heads, names=("d_model", "n_heads"), hints=_INIT_HINTS, dropout=0.5
    )
    _copy_weights(module, ref)
    x = randn(gen, 2, 5, d_model)
    with torch.no_grad():
        want = ref(x, x, x)
        module.eval()
        torch.manual_seed(0)  # the checker runs inside fork_rng: the notebook's state is safe
        evaluated = _run(module, x, x, x, None, "self-attention with dropout=0.5 in eval mode")
        expect_shape(evaluated, want.shape, "the output with dropout=0.5 in eval mode")
        if not close(evaluated, want):
            raise Mistake(
                "with dropout=0.5 the output changes in eval mode: drop attention weights only "
                "while training, dropout_p = self.dropout if self.training else 0.0 "
                "(an nn.Dropout module does this by itself)"
            )
        module.train()
        trained = _run(module, x, x, x, None, "self-attention with dropout=0.5 in train mode")
    if close(trained, want):
        raise Mistake(
            "with dropout=0.5 in training mode nothing was dropped: drop attention weights "
            "while training, dropout_p = self.dropout if self.training else 0.0"
        )
