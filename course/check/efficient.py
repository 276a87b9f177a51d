"""Checker for lesson 10: kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache,
mask=None, rotary_base=None) -> (output, k_cache, v_cache).

The contract (course.efficient.kv_cache_attention): q_new, k_new, v_new (B, h, 1, d_k)
are the newest position's; k_cache, v_cache (B, h, t, d_k) the t positions before it, or
both None at the first step. The answer returns the output (B, h, 1, d_k) of the new
query attending to every cached key and to its own, and the new caches (B, h, t + 1, d_k):
the old ones with the new key and value appended along time (dim -2), as new tensors.
mask (bool, True = may attend) broadcasts to (B, h, 1, t + 1). With rotary_base (a number)
the new query and key are rotated by their position t (the cache's length) before use;
the cache holds keys already rotated, each by its own position.

Why positions are part of the step. With the paper's sinusoidal table, positions are
added to the embedding before any layer: there, "positions restarting at 0" would bite in
the decoding loop (course.efficient.decode_step adds the table's row t, not row 0), not in
this step. With rotary positions they enter here, and the natural mistake is
apply_rotary(q_new, base) on the one new row: it rotates by position 0 at every step.

Cases: the first step (caches None); a cache of 3, non-contiguous (with B = 2, where
merging B and h with .view fails); a batch of one in float64, non-contiguous too; a
padding mask over the keys; left padding (lesson 06): a mask that hides every key of one
sentence, whose query must get lesson 03's zero output (a -1e9 fill gives it the mean of
the values, a bare -inf fill NaN: both named); rotary positions at a cache of 4 (and at
the first step);
then several steps in sequence, the answer's own caches fed back, each output compared
with row t of full causal attention. Values of the output and both caches, their dtype,
and the gradients with respect to every input (caches included).

The usual mistakes, computed from a parametrised copy of the reference (`_step`) and
named: the cache not extended (the old cache, or None, returned); the new key appended
twice, or put before the cached ones; the cache ignored (only the new key attended) or the
new key left out of the attention; a causal mask applied to the single query
(torch.tril(ones(1, t + 1)), causal_mask(t + 1)[:1], or
F.scaled_dot_product_attention(..., is_causal=True), all top-left aligned: the new query
sees position 0 only); positions restarting at 0, off by one, or the cached keys rotated
again; concatenation along the wrong axis; keys and values swapped in the cache or in the
attention; the cache holding the new key before its rotation; softmax over the wrong axis;
scores unscaled or divided by d_k; the mask ignored or inverted; an input (the cache
passed in, or q_new) changed in place; a returned tensor cut from the gradient graph; the
float64 inputs' dtype not kept; the first step's None caches not handled (hinted).
"""

from __future__ import annotations

import math

import torch

from course import efficient
from course.attention import scaled_dot_product_attention
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_gradients,
    expect_signature,
    expect_tensor,
    expect_tuple,
    generator,
    noncontiguous,
    randn,
    squeeze_hint,
    then,
)
from course.masking import causal_mask
from course.positional import apply_rotary

__all__ = ["kv_cache_attention"]

_SIGNATURE = (
    "kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None)"
)
_NAMES = ("q_new", "k_new", "v_new", "k_cache", "v_cache", "mask", "rotary_base")
_BASE = 10000.0

_HINTS = {
    "Sizes of tensors must match": "torch.cat joins the cache and the new key along time, "
    "dim=-2: (B, h, t, d_k) and (B, h, 1, d_k) -> (B, h, t + 1, d_k)",
    "must match the size of tensor": "the cache grows along time, dim=-2 (B, h, t, d_k) + "
    "(B, h, 1, d_k) -> (B, h, t + 1, d_k); check the axis you concatenate along",
    "leaf Variable that requires grad is being used in an in-place": "an in-place operation "
    "(x /= ..., x[...] = ...) wrote into one of your inputs: compute a new tensor instead "
    "(x = x / 2, not x /= 2)",
    "NoneType": "at the first step k_cache and v_cache are None: then the new key and value "
    "alone are the keys and values (test `if k_cache is None:`)",
}


# ------------------------------------------------- the reference and its mistakes ----------


def _step(q, k, v, k_cache, v_cache, mask, rotary_base, *, position_shift=0, no_rotation=False,
          rotate_all=False, twice=False, keys="all", causal=False, softmax_dim=-1,
          scale="sqrt", use_mask="given", swap_kv=False, prepend=False,
          rotated="qk", half=False):  # fmt: skip
    """course.efficient.kv_cache_attention with one mistake switched on (defaults: none).

    Returns (output, k_all, v_all). position_shift: rotate by t + shift; no_rotation:
    rotate by 0 (the identity); rotate_all: rotate the whole concatenated k by 0 .. t
    (the cached keys a second time); twice: the new key and value appended twice; keys:
    "all", "new" (the cache ignored), "cache" (the new key left out); causal: a top-left
    causal mask, the query sees position 0 only; softmax_dim; scale: "sqrt", "none",
    "d_k"; use_mask: "given", "none", "inverted"; swap_kv: keys and values swapped in the
    attention; rotated: which of the new q, k, v are rotated ("qk"; "q": the key is not,
    "qkv": the value is too); half: rotated in Hugging Face's layout, feature j paired with
    j + d/2 (rotate_half), not 2i with 2i + 1. scale also "keys" (sqrt(t + 1), the number of
    keys) and "cache" (sqrt(t), the cache's length).
    """
    t = 0 if k_cache is None else k_cache.shape[-2]
    if rotary_base is not None and not no_rotation and not rotate_all:
        position = torch.tensor([t + position_shift])
        turn = (
            (lambda x: _rotate_half(x, rotary_base, t + position_shift))
            if half
            else (lambda x: apply_rotary(x, rotary_base, position))
        )
        q, k, v = (turn(x) if name in rotated else x
                   for name, x in zip("qkv", (q, k, v), strict=True))  # fmt: skip
    new_k, new_v = ([k, k], [v, v]) if twice else ([k], [v])
    old_k, old_v = ([], []) if k_cache is None else ([k_cache], [v_cache])
    if prepend:  # the new position first, the cached ones after it
        old_k, new_k, old_v, new_v = new_k, old_k, new_v, old_v
    k_all = torch.cat(old_k + new_k, dim=-2)  # (B, h, t + 1, d_k)
    v_all = torch.cat(old_v + new_v, dim=-2)  # (B, h, t + 1, d_k)
    if rotary_base is not None and rotate_all:
        k_all = apply_rotary(k_all, rotary_base)  # every row by 0 .. t, cached ones again
        q = apply_rotary(q, rotary_base, torch.tensor([t]))
    k_att, v_att = k_all, v_all
    if keys == "new":
        k_att, v_att = k_all[..., -1:, :], v_all[..., -1:, :]
    elif keys == "cache":
        k_att, v_att = k_all[..., :-1, :], v_all[..., :-1, :]
    if swap_kv:
        k_att, v_att = v_att, k_att
    T_k = k_att.shape[-2]
    if use_mask == "none" or mask is None or keys != "all" or twice:
        att_mask = None
    else:
        att_mask = ~mask if use_mask == "inverted" else mask
    if causal:
        top_left = torch.tril(torch.ones(1, T_k, dtype=torch.bool))  # (1, T_k): key 0 only
        att_mask = top_left if att_mask is None else att_mask & top_left
    d_k = q.shape[-1]
    divisor = {"sqrt": math.sqrt(d_k), "none": 1.0, "d_k": float(d_k), "keys": math.sqrt(T_k),
               "cache": math.sqrt(max(t, 1))}[scale]  # fmt: skip
    scores = q @ k_att.transpose(-2, -1) / divisor  # (B, h, 1, T_k)
    if att_mask is not None:
        scores = scores.masked_fill(~att_mask, float("-inf"))
    weights = scores.softmax(dim=softmax_dim)  # NaN where a mistake leaves it undefined
    return weights @ v_att, k_all, v_all


def _rotate_half(x: torch.Tensor, base: float, position: int) -> torch.Tensor:
    """Rotary positions in Hugging Face's layout: feature j paired with feature j + d/2."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angle = torch.cat([position * theta, position * theta]).to(x.dtype)  # (d,)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * angle.cos() + torch.cat([-x2, x1], dim=-1) * angle.sin()


_CAUSAL = (
    "a causal mask was applied to the single new query, aligned top-left "
    "(torch.tril(torch.ones(1, t + 1)), causal_mask(t + 1)[:1], or "
    "F.scaled_dot_product_attention(..., is_causal=True)), so it sees position 0 only. The "
    "new query is the last position: every cached key is in its past, so it needs no causal "
    "mask at all"
)
_RESTART = (
    "with a cache of t positions, the new query and key are not rotated by their position t: "
    "they come out as they went in, as a rotation by position 0 leaves them. Either "
    "rotary_base is used only at the first step (when k_cache is None), or apply_rotary(q_new, "
    "base) turned the one new row by position 0, as if the sequence restarted at every step "
    "(both give these numbers). Rotate both by t = k_cache.shape[-2] (0 at the first step): "
    "apply_rotary(x, rotary_base, torch.tensor([t]))"
)
_ROTATE_HALF = (
    "the rotation pairs feature j with j + d/2 (Hugging Face's rotate_half layout). Lesson "
    "05's rotary positions pair neighbours, 2i with 2i + 1, and the cached keys were rotated "
    "that way: use apply_rotary(x, rotary_base, torch.tensor([t])), or pair x[..., 0::2] with "
    "x[..., 1::2]"
)
_SCALE_KEYS = (
    "the scores are divided by the square root of the number of keys (t + 1, the cache's "
    "length with the new key); the scale is sqrt(d_k), d_k = q_new.shape[-1], the width of a "
    "key, the same at every step"
)
_SCALE_CACHE = (
    "the scores are divided by the square root of the cache's length t (k_cache.shape[-2]); "
    "the scale is sqrt(d_k), d_k = q_new.shape[-1], the width of a key, the same at every step"
)
_PREPEND = (
    "the new key and value are put before the cached ones: append them at the end, "
    "torch.cat([k_cache, k_new], dim=-2), so that row t of the cache is position t (the mask "
    "and the next steps read it in that order)"
)
_OFF_BY_ONE = (
    "the new query and key are rotated by position t + 1; the new token's position is t, "
    "the number of positions already cached (k_cache.shape[-2]), counting from 0"
)
_UNROTATED_CACHE = (
    "the cache holds the new key before its rotation: store the rotated key, the one the new "
    "query attended to (a cached key is rotated once, when it is new)"
)
_ROTATE_ALL = (
    "the whole concatenated k was rotated by positions 0 .. t, so the cached keys, which "
    "were rotated when they were new, are rotated a second time: rotate only the new query "
    "and key, by position t"
)

_QUERY_ONLY = (
    "only the new query is rotated, not the new key: rotate both by position t, so that their "
    "dot product depends on the offset between their positions (a key keeps its rotation in "
    "the cache)"
)
_VALUE_ROTATED = (
    "the new value is rotated too: rotary positions turn the query and the key only (their "
    "dot product carries the offset); the values are averaged as they are"
)


def _output_mistakes(args) -> dict[str, torch.Tensor]:
    q, k, v, k_cache, v_cache, mask, rotary_base = args
    cases = {
        "the new key and value are appended to the cache twice (once to extend it, once more "
        "for the attention), so the new position counts double in the softmax: concatenate "
        "once and attend over the result": dict(twice=True),
        "the new query attends to the new key alone, ignoring the cache: attend over "
        "torch.cat([k_cache, k_new], dim=-2) and the values likewise": dict(keys="new"),
        "the new query attends to the cached keys only: append the new key and value first, "
        "the position attends to itself too": dict(keys="cache"),
        _CAUSAL: dict(causal=True),
        _PREPEND: dict(prepend=True),
        "the softmax runs over the wrong axis (dim=-2, the single query): the weights must be "
        "a distribution over the keys, softmax(dim=-1)": dict(softmax_dim=-2),
        "the scores are not scaled: divide q k^T by sqrt(d_k)": dict(scale="none"),
        "the scores are divided by d_k; the scale is sqrt(d_k)": dict(scale="d_k"),
        _SCALE_KEYS: dict(scale="keys"),
        "keys and values are swapped in the attention: scores come from q and the keys, the "
        "output averages the values": dict(swap_kv=True),
    }
    if mask is not None:
        cases["the mask is ignored: pass it to the attention (True = may attend)"] = dict(
            use_mask="none"
        )
        cases["the mask is inverted: True means may attend, so hide the keys where it is "
              "False (masked_fill(~mask, -inf))"] = dict(use_mask="inverted")  # fmt: skip
    if k_cache is not None:
        cases[_SCALE_CACHE] = dict(scale="cache")
    if rotary_base is not None:
        cases[_ROTATE_HALF] = dict(half=True)
        if k_cache is not None:
            cases[_RESTART] = dict(no_rotation=True)
            cases[_ROTATE_ALL] = dict(rotate_all=True)
        cases[_OFF_BY_ONE] = dict(position_shift=1)
        cases["rotary_base is given but the query and key are not rotated"] = dict(no_rotation=True)
        cases[_QUERY_ONLY] = dict(rotated="q")
        cases[_VALUE_ROTATED] = dict(rotated="qkv")
    wrong = {}
    for diagnosis, mistake in cases.items():
        out = _step(*args, **mistake)[0]
        if out.shape == q.shape:
            wrong[diagnosis] = out
    return wrong


def _cache_mistakes(args, which: int) -> dict[str, torch.Tensor]:
    """What the returned k_cache (which=1) or v_cache (which=2) holds under each mistake."""
    _, _, _, k_cache, _, _, rotary_base = args
    right = _step(*args)
    wrong = {
        "keys and values are swapped in the returned cache: return (output, k_cache, v_cache) "
        "in that order, keys first": right[3 - which],
    }
    if k_cache is not None:
        wrong[_PREPEND] = _step(*args, prepend=True)[which]
    if rotary_base is not None and which == 1:
        # checked after the output: an answer whose output is right and cache is not
        unrotated = _step(*args, no_rotation=True)[1]
        wrong[_UNROTATED_CACHE] = unrotated
        if k_cache is not None:
            wrong[_ROTATE_ALL] = _step(*args, rotate_all=True)[1]
        wrong[_OFF_BY_ONE] = _step(*args, position_shift=1)[1]
        wrong[_ROTATE_HALF] = _step(*args, half=True)[1]
    if rotary_base is not None and which == 2:
        wrong[_VALUE_ROTATED] = _step(*args, rotated="qkv")[2]
    return wrong


# ---------------------------------------------------------------------- cases ----------


def _inputs(gen, B, h, t, d_k, dtype=torch.float32, *, masked=False, rotary=False, strided=False,
            empty_row=False):  # fmt: skip
    q, k, v = (randn(gen, B, h, 1, d_k, dtype=dtype) for _ in range(3))
    k_cache = randn(gen, B, h, t, d_k, dtype=dtype) if t else None
    v_cache = randn(gen, B, h, t, d_k, dtype=dtype) if t else None
    if strided:
        q, k, v = noncontiguous(q), noncontiguous(k), noncontiguous(v)
        if t:
            k_cache, v_cache = noncontiguous(k_cache), noncontiguous(v_cache)
    mask = None
    if masked:  # a padding mask over the t + 1 keys: some hidden, never all of a row
        mask = torch.ones(B, 1, 1, t + 1, dtype=torch.bool)
        mask[0, ..., 1] = False
        mask[-1, ..., t - 1] = False
        if empty_row:  # left padding (lesson 06): sentence 1 has no real token yet
            mask[1] = False
    return q, k, v, k_cache, v_cache, mask, (_BASE if rotary else None)


_CASES = [
    ("the first step: k_cache and v_cache are None", dict(B=2, h=2, t=0, d_k=4)),
    ("a cache of 3 positions, B = 2, h = 2, d_k = 4, non-contiguous inputs",
     dict(B=2, h=2, t=3, d_k=4, strided=True)),  # B > 1: merging B and h with .view fails
    ("a batch of one in float64, non-contiguous inputs, a cache of 5",
     dict(B=1, h=3, t=5, d_k=2, dtype=torch.float64, strided=True)),
    ("a padding mask (B, 1, 1, t + 1) over a cache of 4", dict(B=3, h=2, t=4, d_k=4, masked=True)),
    ("left padding: a padding mask over a cache of 2 that hides every key of sentence 1",
     dict(B=3, h=2, t=2, d_k=4, masked=True, empty_row=True)),
    ("rotary positions, rotary_base = 10000.0, a cache of 4",
     dict(B=2, h=2, t=4, d_k=6, rotary=True)),
    ("rotary positions at the first step", dict(B=2, h=2, t=0, d_k=6, rotary=True)),
]  # fmt: skip


def _call(candidate, *args):
    """call(...), with the generic in-place message made specific: which input changed."""
    before = {
        n: a.detach().clone()
        for n, a in zip(_NAMES, args, strict=True)
        if isinstance(a, torch.Tensor)
    }
    try:
        return call(candidate, *args, names=_NAMES, hints=_HINTS)
    except Mistake as mistake:
        if "changed one of its input tensors in place" not in str(mistake):
            B, h = args[0].shape[:2]
            hint = squeeze_hint(candidate, {"B": B, "h": h})
            if hint and "squeeze" not in str(mistake):
                raise Mistake(then(str(mistake), hint)) from None
            raise
        given = dict(zip(_NAMES, args, strict=True))
        changed = [
            n for n, old in before.items()
            if given[n].shape != old.shape or not torch.equal(given[n].detach(), old)
        ]  # fmt: skip
        if any(n in ("k_cache", "v_cache") for n in changed):
            raise Mistake(
                f"your code changed the cache passed in ({', '.join(changed)}) in place. Return "
                "new tensors (torch.cat([k_cache, k_new], dim=-2)) and leave the old cache as "
                "it was: the caller may still need it (beam search keeps one per hypothesis), "
                "and autograd needs it unchanged for the backward pass"
            ) from None
        raise Mistake(
            f"your code changed {', '.join(changed) or 'an input'} in place (x *= ..., "
            "x[...] = ...): compute new tensors instead (x = x * 2, not x *= 2)"
        ) from None


def _expect_cache(got, want, old, name: str, args, which: int) -> None:
    if got is None:
        raise Mistake(
            f"the returned {name} is None: the cache is not extended. Return the cache with "
            f"the new {'key' if which == 1 else 'value'} appended, shape {tuple(want.shape)}"
        )
    got = expect_tensor(got, f"the returned {name}")
    if old is not None and got.shape == old.shape and torch.equal(got.detach(), old):
        raise Mistake(
            f"the returned {name} is the old cache: the cache is not extended. Return "
            f"torch.cat([{name}, {'k_new' if which == 1 else 'v_new'}], dim=-2), "
            f"shape {tuple(want.shape)}"
        )
    B, h, T, d_k = want.shape
    if tuple(got.shape) == (B, h, T + 1, d_k):
        raise Mistake(
            f"the returned {name} has {T + 1} positions, one too many: the new key and value "
            "are appended twice. Concatenate once, and return that as the new cache"
        )
    if got.shape != want.shape and old is not None:
        new_shape = (B, h, 1, d_k)
        for dim in range(4):
            if dim == 2:
                continue
            try:
                wrong_shape = torch.cat([old, torch.zeros(new_shape, dtype=old.dtype)], dim=dim)
            except RuntimeError:
                wrong_shape = None
            grown = [*want.shape]
            grown[2] = old.shape[2]
            grown[dim] += 1
            if (wrong_shape is not None and got.shape == wrong_shape.shape) or (
                tuple(got.shape) == tuple(grown)
            ):
                raise Mistake(
                    f"the returned {name} has shape {tuple(got.shape)}: concatenated along dim "
                    f"{dim}. The cache grows along time, dim=-2: (B, h, t, d_k) + (B, h, 1, "
                    f"d_k) -> {tuple(want.shape)}"
                )
    expect_close(got, want, f"the returned {name}", wrong=lambda: _cache_mistakes(args, which))


def _expect_connected(candidate, args) -> None:
    """Each returned tensor carries a gradient when the inputs require one."""
    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor)
              and a.is_floating_point() else a for a in args]  # fmt: skip
    result = _call(candidate, *leaves)
    for name, out in zip(("output", "k_cache", "v_cache"), result, strict=True):
        if isinstance(out, torch.Tensor) and not out.requires_grad:
            raise Mistake(
                f"the returned {name} carries no gradient: something cut it from the graph "
                "(.detach(), torch.no_grad(), a copy made from values). The step is part of the "
                "computation: return the tensors torch.cat and the attention give"
            )


def _expect_empty_rows(got: torch.Tensor, args) -> None:
    """A query whose mask hides every key (left padding: no real token yet) gets lesson 03's
    zero weights and zero output, not NaN and not the mean of the values."""
    q, _, _, _, _, mask, _ = args
    if mask is None or not isinstance(got, torch.Tensor) or got.shape != q.shape:
        return
    empty = ~mask.any(dim=-1, keepdim=True).expand(q.shape[:-1] + (1,))  # (B, h, 1, 1)
    if not empty.any():
        return
    rows = got.detach()[empty.expand_as(got)]
    _, k_all, v_all = efficient.kv_cache_attention(*args)
    mean = v_all.mean(dim=-2, keepdim=True).expand_as(got)[empty.expand_as(got)]
    if not torch.isfinite(rows).all():
        raise Mistake(
            f"{_EMPTY_ROW} gets NaN: the softmax of a row of -inf is 0 / 0, and that NaN would "
            f"spread to every later step. {_EMPTY_RULE}"
        )
    if close(rows, mean):
        raise Mistake(
            f"{_EMPTY_ROW} gets the mean of the values (a -1e9 fill gives every hidden key the "
            f"same weight 1 / (t + 1)), so a padding token reads the padding. {_EMPTY_RULE}"
        )
    if not close(rows, torch.zeros_like(rows)):
        raise Mistake(
            f"{_EMPTY_ROW} should get a zero output, got values from {float(rows.min()):.3g} "
            f"to {float(rows.max()):.3g}. {_EMPTY_RULE}"
        )


_EMPTY_ROW = (
    "a query whose mask hides every key (left padding, lesson 06: a sentence with no real "
    "token yet)"
)
_EMPTY_RULE = (
    "Lesson 03's rule: such a query gets zero weights and a zero output. Use lesson 03's "
    "scaled_dot_product_attention(q, k, v, mask), or after the softmax "
    "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"
)


def _check_case(candidate, what: str, args) -> None:
    q, k, v, k_cache, v_cache, mask, rotary_base = args
    want = efficient.kv_cache_attention(*args)
    got = expect_tuple(_call(candidate, *args), ("output", "k_cache", "v_cache"))
    try:
        _expect_empty_rows(got[0], args)
    except Mistake as mistake:
        raise Mistake(f"on {what}, {mistake}") from None
    expect_close(got[0], want[0], f"the output ({what})", wrong=lambda: _output_mistakes(args))
    _expect_cache(got[1], want[1], k_cache, "k_cache", args, 1)
    _expect_cache(got[2], want[2], v_cache, "v_cache", args, 2)
    _expect_connected(candidate, args)
    tensors = {n: a for n, a in zip(_NAMES[:5], args[:5], strict=True) if a is not None}

    def runner(function):
        def run(*leaves):
            given = dict(zip(tensors, leaves, strict=True))
            full = [given.get(n) for n in _NAMES[:5]]
            return function(*full, mask, rotary_base)

        return run

    expect_gradients(
        runner(lambda *a: _call(candidate, *a)),
        runner(efficient.kv_cache_attention),
        tensors,
        f"gradients ({what})",
    )


def _check_sequence(candidate, gen, rotary: bool) -> None:
    """Five steps from an empty cache, the answer's own caches fed back each time."""
    B, h, T, d_k = 2, 2, 5, 4
    q, k, v = (randn(gen, B, h, T, d_k) for _ in range(3))
    base = _BASE if rotary else None
    if rotary:
        full, _ = scaled_dot_product_attention(
            apply_rotary(q, _BASE), apply_rotary(k, _BASE), v, causal_mask(T)
        )
    else:
        full, _ = scaled_dot_product_attention(q, k, v, causal_mask(T))  # (B, h, T, d_k)
    k_cache = v_cache = None
    for t in range(T):
        step = slice(t, t + 1)
        args = (q[:, :, step], k[:, :, step], v[:, :, step], k_cache, v_cache, None, base)
        got = expect_tuple(_call(candidate, *args), ("output", "k_cache", "v_cache"))
        want = efficient.kv_cache_attention(*args)
        where = f"step {t} of {T} in sequence{', rotary' if rotary else ''}, your caches fed back"
        expect_close(got[0], full[:, :, step], f"the output ({where})",
                     wrong=lambda args=args: _output_mistakes(args))  # fmt: skip
        _expect_cache(got[1], want[1], k_cache, "k_cache", args, 1)
        _expect_cache(got[2], want[2], v_cache, "v_cache", args, 2)
        k_cache, v_cache = got[1].detach(), got[2].detach()


@exercise("kv_cache_attention")
def kv_cache_attention(candidate) -> str:
    expect_signature(candidate, _NAMES[:5], _SIGNATURE)
    expect_signature(candidate, _NAMES, _SIGNATURE)  # mask, rotary_base after the caches too
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        gen = generator(10)
        for what, sizes in _CASES:
            # the left-padding case draws from a stream of its own: the others' inputs stay
            args = _inputs(generator(11) if sizes.get("empty_row") else gen, **sizes)
            _check_case(candidate, what, args)
        _check_sequence(candidate, gen, rotary=False)
        _check_sequence(candidate, gen, rotary=True)
    return (
        f"{len(_CASES)} cases: first step, float64, batch of one, non-contiguous, a padding "
        "mask, left padding hiding every key, rotary positions; 5 steps in sequence twice; "
        "outputs, caches and gradients"
    )
