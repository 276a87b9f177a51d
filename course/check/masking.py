"""Checkers for lesson 06 (masking): causal_mask, padding_mask.

Both answers are boolean constants of their arguments: nothing flows backward through
them, so there are no gradients to judge. What a mask can get wrong instead, and what
these checkers judge, in this order:

- its **dtype**: bool, nothing else. An int or float 0/1 mask, and an additive float mask
  (0 where allowed, -inf where not, what nn.Transformer.generate_square_subsequent_mask
  returns) each get their own diagnosis saying why: our attention reads True = may attend
  through `scores.masked_fill(~mask, float("-inf"))`, and both `~` and `masked_fill` need
  a bool tensor;
- its **shape**, exactly: (T, T) and (B, 1, 1, T). A (B, T) padding mask broadcasts
  against scores (B, h, T_q, T_k) from the right, B against T_q: wrong numbers when
  B == T_q, an error otherwise; the diagnosis says so;
- its **values**, with the usual wrong ones named: the upper triangle, the diagonal
  excluded, the mask inverted (True = masked out, nn.MultiheadAttention's convention), the
  pad id hard-coded to 0, padding found by position instead of by value.

The cases: T = 1 and T = 2 as well as longer ones; batches where B differs from T, a batch
of one, tokens of dtype int32 and int64, non-contiguous tokens, pad ids other than 0 with
0 a real token, padding at the end, at the start and in between, a sentence with no
padding and one that is all padding. The tokens must come back unchanged (no in-place edit).
"""

import torch

from course import masking as reference
from course.check._framework import (
    Mistake,
    call,
    exercise,
    expect_close,
    expect_shape,
    expect_signature,
    expect_tensor,
    noncontiguous,
    squeeze_hint,
    squeezed_from,
    then,
)

__all__ = ["causal_mask", "padding_mask"]

_WHY_BOOL = (
    "Masks are bool, True = may attend: attention reads them with "
    "scores.masked_fill(~mask, float('-inf')), and masked_fill takes only a bool mask"
)


def _expect_bool(got: torch.Tensor, want: torch.Tensor, what: str, make: str) -> None:
    """The mask is a bool tensor; an int / float 0-1 mask or an additive float mask is named,
    with whether its pattern is right. `make` says how to build a bool one."""
    if got.dtype == torch.bool:
        return
    values = got.detach()
    dtype = str(got.dtype).removeprefix("torch.")
    same_shape = values.shape == want.shape
    if (
        values.is_floating_point()
        and bool((values < -1e3).any())
        and bool(((values == 0) | (values < -1e3)).all())
    ):
        right = same_shape and torch.equal(values == 0, want)
        raise Mistake(
            f"{what} is an additive {dtype} mask (0 where allowed, {float(values.min()):.3g} "
            f"where not{', in the right places' if right else ''}), the kind that is added to "
            "the scores (nn.Transformer.generate_square_subsequent_mask returns one). Ours is "
            f"bool, True = may attend: our attention reads it with masked_fill(~mask, "
            "float('-inf')), and ~ is not even defined on a float tensor. " + make
        )
    if bool(((values == 0) | (values == 1)).all()):
        right = same_shape and torch.equal(values == 1, want)
        pattern = " (the 1s are in the right places)" if right else ""
        kind = "float" if values.is_floating_point() else "integer"
        flip = (
            "~ is not defined on a float tensor"
            if values.is_floating_point()
            else "~ on an integer flips every bit (~1 is -2, ~0 is -1: both non-zero)"
        )
        raise Mistake(
            f"{what} is a 0/1 {kind} mask ({dtype}){pattern}; it must be bool. {_WHY_BOOL}; "
            f"{flip}. " + make
        )
    raise Mistake(f"{what} is {dtype}; it must be bool (True = may attend). {make}")


# ------------------------------------------------------------ causal_mask ----------

_CAUSAL_LENGTHS = (5, 1, 2, 8)  # T = 5 first: every usual mistake shows there
_MAKE_CAUSAL = (
    "Comparisons give bool: torch.ones(T, T, dtype=torch.bool).tril(), or "
    "torch.arange(T)[None, :] <= torch.arange(T)[:, None]"
)


def _causal_mistakes(T: int) -> dict[str, torch.Tensor]:
    ones = torch.ones(T, T, dtype=torch.bool)
    return {
        "True below the diagonal but not on it: each position must see itself (the diagonal "
        "is True), or the first position may attend to nothing. tril() with the default "
        "diagonal=0, or <= rather than <": ones.tril(-1),
        "the mask is inverted: True marks the future, the keys to hide. That is "
        "nn.MultiheadAttention's convention (attn_mask True = masked out); ours is True = may "
        "attend, on and below the diagonal: tril, not triu(1)": ones.triu(1),
        "True on and *above* the diagonal: that lets each position see the future and not the "
        "past. Query t (row t) may attend to keys 0..t (columns s <= t): the lower triangle, "
        "tril, not triu": ones.triu(),
        "every entry is True: this mask hides nothing. Query t (row t) may attend to keys "
        "0..t only: the lower triangle": ones,
    }


def _explain_causal(got: torch.Tensor) -> str:
    wrong = (got != reference.causal_mask(got.shape[0])).nonzero()
    t, s = (int(i) for i in wrong[0])
    where = "key s is in the future of query t" if s > t else "s <= t: query t may see key s"
    return (
        f"the mask is wrong at row (query) {t}, column (key) {s}: you have {bool(got[t, s])}, "
        f"expected {s <= t} ({where}). Row t is True at columns 0..t"
    )


def _causal_shape_hint(got: torch.Tensor, T: int) -> str:
    shape = tuple(got.shape)
    if got.dim() > 2 and shape[-2:] == (T, T) and all(n == 1 for n in shape[:-2]):
        return (
            "Return it without the leading unit axes, (T, T): it broadcasts against scores "
            "(B, h, T, T) as it is"
        )
    if got.dim() == 2 and shape[0] == shape[1]:
        return "Build it from the argument T, not a fixed size"
    return "It is (T, T): one row per query, one column per key"


@exercise("causal_mask")
def causal_mask(candidate) -> str:
    expect_signature(candidate, ("T",), "causal_mask(T)")
    for T in _CAUSAL_LENGTHS:
        want = reference.causal_mask(T)
        got = expect_tensor(call(candidate, T, names=("T",)), f"causal_mask({T})")
        got = got.cpu()  # built on the GPU (device=...) is fine: only the values count
        what = f"causal_mask({T})"
        _expect_bool(got, want, what, _MAKE_CAUSAL)
        expect_shape(got, want.shape, what, _causal_shape_hint(got, T))
        expect_close(got, want, what, wrong=_causal_mistakes(T), explain=_explain_causal)
    return (
        f"T = {', '.join(map(str, sorted(_CAUSAL_LENGTHS)))}: bool, (T, T), True on and "
        "below the diagonal"
    )


# ------------------------------------------------------------ padding_mask ----------

_MAKE_PADDING = "A comparison gives bool: (tokens != pad_id)[:, None, None, :]"


def _padding_cases() -> list[tuple[str, torch.Tensor, int]]:
    """(description, tokens (B, T), pad_id): B differs from T in every case but one."""
    gen = torch.Generator().manual_seed(6)
    random_tokens = torch.randint(0, 6, (5, 9), generator=gen)  # pad 2 wherever it falls
    return [
        (
            "pad_id=1, 0 a real token, padding at the end",
            torch.tensor([[5, 0, 7, 1, 1, 1], [4, 3, 0, 0, 9, 1], [8, 2, 6, 5, 0, 3]]),
            1,
        ),
        (
            "pad_id=0, padding at the end",
            torch.tensor([[4, 9, 6, 0, 0], [7, 3, 0, 0, 0]]),
            0,
        ),
        (
            "pad_id=3, padding at the start, in between, and a sentence all padding",
            torch.tensor([[3, 3, 8, 0, 5, 9, 2], [6, 3, 0, 3, 4, 3, 3], [3, 3, 3, 3, 3, 3, 3]]),
            3,
        ),
        ("a batch of one, int32, pad_id=7", torch.tensor([[2, 5, 7, 7]], dtype=torch.int32), 7),
        (
            "non-contiguous tokens, pad_id=2",
            noncontiguous(torch.tensor([[5, 2, 2], [0, 1, 2], [2, 4, 6], [9, 9, 2]])),
            2,
        ),
        ("T=1, int32, pad_id=4", torch.tensor([[4], [1]], dtype=torch.int32), 4),
        ("seeded random tokens, pad_id=2 wherever it falls", random_tokens, 2),
    ]


def _padding_mistakes(tokens: torch.Tensor, pad_id: int) -> dict[str, torch.Tensor]:
    T = tokens.shape[1]
    real = tokens != pad_id  # (B, T)
    lengths = real.sum(dim=1)  # (B,): real tokens per sentence
    first_pad = (tokens == pad_id).cumsum(dim=1) == 0  # True until the first pad
    by_value = (
        "Find it by value, wherever it is: tokens != pad_id (pads can come first, or in between)"
    )
    mistakes = {
        "the mask is inverted: True marks the padding. That is nn.MultiheadAttention's "
        "convention (key_padding_mask True = masked out); ours is True = may attend, a real "
        "token: tokens != pad_id": ~real,
        "the pad id is hard-coded to 0: use the pad_id argument, tokens != pad_id (here "
        f"pad_id={pad_id}, and 0 is a real token)": tokens != 0,
        "the pad id is hard-coded to 0 and the mask is inverted: use the pad_id argument "
        "and mark the real tokens, tokens != pad_id": tokens == 0,
        f"you compared tokens > pad_id, as if the pad had the smallest id; here pad_id={pad_id} "
        "and smaller ids are real tokens too: tokens != pad_id": tokens > pad_id,
        "you found the padding by position, from the lengths: the first `length` tokens real, "
        f"the rest padding. {by_value}": torch.arange(T)[None, :] < lengths[:, None],
        "you found the padding by position: everything from the first pad on is masked. "
        + by_value: first_pad,
    }
    return {diagnosis: m[:, None, None, :] for diagnosis, m in mistakes.items()}  # (B, 1, 1, T)


def _explain_padding(tokens: torch.Tensor, pad_id: int):
    want = reference.padding_mask(tokens, pad_id)[:, 0, 0]  # (B, T)

    def explain(got: torch.Tensor) -> str:
        b, s = (int(i) for i in (got[:, 0, 0] != want).nonzero()[0])
        token = int(tokens[b, s])
        kind = "the pad id" if token == pad_id else "a real token"
        return (
            f"the mask is wrong at sentence {b}, position {s}: token {token} is {kind} "
            f"(pad_id={pad_id}), so the entry should be {bool(want[b, s])}, you have "
            f"{bool(got[b, 0, 0, s])}. True = a real token, found by value: tokens != pad_id"
        )

    return explain


def _padding_shape_hint(got: torch.Tensor, B: int, T: int) -> str:
    shape = tuple(got.shape)
    if shape == (B, T):
        return (
            "A (B, T) mask broadcasts against the scores (B, h, T_q, T_k) from the right: its "
            "B lines up with T_q and its T with T_k, so each sentence's mask would be applied "
            "to a query position instead (wrong numbers when B == T_q, an error otherwise). "
            "Add the head and query axes: (tokens != pad_id)[:, None, None, :] is (B, 1, 1, T)"
        )
    if shape == (B, 1, T):
        return (
            "(B, 1, T) fits scores (B, T_q, T_k) without heads; against (B, h, T_q, T_k) its "
            "B lines up with h. Add one more axis: (B, 1, 1, T)"
        )
    if shape in ((B, T, 1), (B, T, 1, 1), (B, 1, T, 1)):
        return (
            "T is on a query axis: padding hides *keys*, the last axis of the scores "
            "(B, h, T_q, T_k). Put T last: (tokens != pad_id)[:, None, None, :]"
        )
    if shape in ((B, T, T), (B, 1, T, T)):
        return (
            "A full (T, T) matrix per sentence is not needed: the same keys are hidden from "
            "every query and head, and broadcasting repeats (B, 1, 1, T) over them"
        )
    if shape in ((1, 1, B, T), (1, B, T), (T, B), (1, 1, T, B), (T, 1, 1, B)):
        return (
            "The batch axis comes first, then the two unit axes (heads, queries), then T: "
            "(tokens != pad_id)[:, None, None, :]"
        )
    return "It is (B, 1, 1, T): one row of T entries per sentence, with a head and a query axis"


@exercise("padding_mask")
def padding_mask(candidate) -> str:
    expect_signature(candidate, ("tokens", "pad_id"), "padding_mask(tokens, pad_id)")
    cases = _padding_cases()
    for description, tokens, pad_id in cases:
        B, T = tokens.shape
        want = reference.padding_mask(tokens, pad_id)
        try:
            got = call(candidate, tokens, pad_id, names=("tokens", "pad_id"))
        except Mistake as mistake:
            raise Mistake(then(str(mistake), squeeze_hint(candidate, {"B": B, "T": T}))) from None
        what = f"the mask for tokens {tuple(tokens.shape)} ({description})"
        got = expect_tensor(got, what)
        _expect_bool(got, want, what, _MAKE_PADDING)
        if (B == 1 or T == 1) and squeezed_from(got, want):
            which = "B = 1, so the batch's" if B == 1 else "T = 1, so the time axis"
            raise Mistake(
                f"{what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}: the right "
                f"entries, but an axis of size 1 is gone. A .squeeze() removes axes of size 1, "
                f"and here {which} or a unit axis goes with them: leave the mask as "
                "(tokens != pad_id)[:, None, None, :] makes it, (B, 1, 1, T), without squeezing"
            )
        expect_shape(got, want.shape, what, _padding_shape_hint(got, B, T))
        expect_close(
            got,
            want,
            what,
            wrong=lambda tokens=tokens, pad_id=pad_id: _padding_mistakes(tokens, pad_id),
            explain=_explain_padding(tokens, pad_id),
        )
    return (
        f"{len(cases)} batches: pad ids 0 to 7, padding at the end, the start and in between, a "
        "batch of one, T = 1, int32 and non-contiguous tokens; bool (B, 1, 1, T), tokens unchanged"
    )
