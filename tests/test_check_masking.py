"""The lesson 06 checkers accept every correct mask and name each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line. The masks
are constants (no gradients), so the mistakes are about dtype, shape and values.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import check

# ------------------------------------------------------------ causal_mask ----------


def causal_tril(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def causal_arange(T):
    positions = torch.arange(T)
    return positions[None, :] <= positions[:, None]


def causal_not_triu(T):
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def causal_loops(T):
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        for s in range(t + 1):
            mask[t, s] = True
    return mask


def causal_float_then_bool(T):
    return torch.ones(T, T).tril().bool()


def causal_from_torchs_helper(T):
    return nn.Transformer.generate_square_subsequent_mask(T) == 0


def causal_with_device(T, device=None):
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


CAUSAL_RIGHT = [
    causal_tril,
    causal_arange,
    causal_not_triu,
    causal_loops,
    causal_float_then_bool,
    causal_from_torchs_helper,
    causal_with_device,
]


@pytest.mark.parametrize("answer", CAUSAL_RIGHT)
def test_causal_mask_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.causal_mask, answer)
    assert passed is True and printed.startswith("✅ causal_mask: passed"), printed


def causal_stub(T):
    # YOUR CODE HERE
    raise NotImplementedError


def causal_upper(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


def causal_upper_by_arange(T):
    positions = torch.arange(T)
    return positions[:, None] <= positions[None, :]


def causal_no_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).tril(-1)


def causal_strict_arange(T):
    positions = torch.arange(T)
    return positions[None, :] < positions[:, None]


def causal_inverted(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)


def causal_additive(T):
    return nn.Transformer.generate_square_subsequent_mask(T)


def causal_additive_big_negative(T):
    return torch.where(causal_tril(T), 0.0, -1e9)


def causal_float(T):
    return torch.ones(T, T).tril()


def causal_int(T):
    return torch.ones(T, T, dtype=torch.long).tril()


def causal_uint8_wrong_pattern(T):
    return torch.ones(T, T, dtype=torch.uint8).triu()


def causal_leading_axes(T):
    return causal_tril(T)[None, None]  # (1, 1, T, T)


def causal_fixed_size(T):
    return causal_tril(5)


def causal_all_true(T):
    return torch.ones(T, T, dtype=torch.bool)


def causal_flipped(T):
    return causal_tril(T).flip(-1)


def causal_numpy(T):
    return np.tril(np.ones((T, T), dtype=bool))


def causal_other_values(T):
    return torch.ones(T, T).tril() * 2


CAUSAL_WRONG = [
    (causal_stub, "⏳ causal_mask: not implemented yet"),
    (causal_upper, "True on and *above* the diagonal"),
    (causal_upper_by_arange, "True on and *above* the diagonal"),
    (causal_no_diagonal, "each position must see itself"),
    (causal_strict_arange, "each position must see itself"),
    (causal_inverted, "the mask is inverted: True marks the future"),
    (causal_inverted, "nn.MultiheadAttention's convention (attn_mask True = masked out)"),
    (causal_additive, "is an additive float32 mask (0 where allowed, -inf where not, in the"),
    (causal_additive_big_negative, "additive float32 mask (0 where allowed, -1e+09 where not"),
    (causal_float, "is a 0/1 float mask (float32) (the 1s are in the right places); it must"),
    (causal_float, "~ is not defined on a float tensor"),
    (causal_int, "is a 0/1 integer mask (int64) (the 1s are in the right places)"),
    (causal_int, "~1 is -2"),
    (causal_uint8_wrong_pattern, "is a 0/1 integer mask (uint8); it must be bool"),
    (causal_leading_axes, "has shape (1, 1, 5, 5), expected (5, 5). Return it without the"),
    (causal_fixed_size, "causal_mask(1) has shape (5, 5), expected (1, 1). Build it from the"),
    (causal_all_true, "every entry is True: this mask hides nothing"),
    (causal_flipped, "wrong at row (query) 0, column (key) 0: you have False, expected True"),
    (causal_numpy, "causal_mask(5) should be a torch.Tensor, got a ndarray"),
    (causal_other_values, "is float32; it must be bool (True = may attend)"),
]


@pytest.mark.parametrize(
    "answer, diagnosis",
    CAUSAL_WRONG,
    ids=[f"{w[0].__name__}-{i}" for i, w in enumerate(CAUSAL_WRONG)],
)
def test_causal_mask_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.causal_mask, answer)
    assert passed is False and diagnosis in printed, printed


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_causal_mask_built_on_the_gpu_passes(verdict):
    def causal_on_the_gpu(T):
        return torch.ones(T, T, dtype=torch.bool, device="cuda").tril()

    passed, printed = verdict(check.causal_mask, causal_on_the_gpu)
    assert passed is True, printed


# ------------------------------------------------------------ padding_mask ----------


def padding_index(tokens, pad_id):
    return (tokens != pad_id)[:, None, None, :]


def padding_unsqueeze(tokens, pad_id):
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)


def padding_view(tokens, pad_id):
    B, T = tokens.shape
    return tokens.ne(pad_id).view(B, 1, 1, T)  # adding unit axes: fine even if strided


def padding_reshape(tokens, pad_id):
    B, T = tokens.shape
    return torch.logical_not(tokens == pad_id).reshape(B, 1, 1, T)


def padding_loops(tokens, pad_id):
    B, T = tokens.shape
    mask = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    for b in range(B):
        for s in range(T):
            mask[b, 0, 0, s] = int(tokens[b, s]) != pad_id
    return mask


def padding_where(tokens, pad_id):
    return torch.where(tokens == pad_id, False, True)[:, None, None, :]


def padding_subtract(tokens, pad_id):
    return (tokens - pad_id).bool()[:, None, None]


PADDING_RIGHT = [
    padding_index,
    padding_unsqueeze,
    padding_view,
    padding_reshape,
    padding_loops,
    padding_where,
    padding_subtract,
]


@pytest.mark.parametrize("answer", PADDING_RIGHT)
def test_padding_mask_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.padding_mask, answer)
    assert passed is True and printed.startswith("✅ padding_mask: passed"), printed


def padding_stub(tokens, pad_id):
    # YOUR CODE HERE
    raise NotImplementedError


def padding_inverted(tokens, pad_id):
    return (tokens == pad_id)[:, None, None, :]


def padding_zero_hard_coded(tokens, pad_id):
    return (tokens != 0)[:, None, None, :]


def padding_zero_hard_coded_inverted(tokens, pad_id):
    return (tokens == 0)[:, None, None, :]


def padding_b_t(tokens, pad_id):
    return tokens != pad_id  # (B, T)


def padding_b_1_t(tokens, pad_id):
    return (tokens != pad_id)[:, None, :]  # (B, 1, T)


def padding_t_on_query_axis(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(-1).unsqueeze(-1)  # (B, T, 1, 1)


def padding_full_matrix(tokens, pad_id):
    real = tokens != pad_id
    return real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)


def padding_batch_not_first(tokens, pad_id):
    return (tokens != pad_id)[None, None]  # (1, 1, B, T)


def padding_int(tokens, pad_id):
    return (tokens != pad_id).long()[:, None, None, :]


def padding_float(tokens, pad_id):
    return (tokens != pad_id).float()[:, None, None, :]


def padding_additive(tokens, pad_id):
    return torch.where(tokens != pad_id, 0.0, float("-inf"))[:, None, None, :]


def padding_by_lengths(tokens, pad_id):
    B, T = tokens.shape
    lengths = (tokens != pad_id).sum(dim=1)  # (B,)
    return (torch.arange(T)[None, :] < lengths[:, None])[:, None, None, :]


def padding_up_to_first_pad(tokens, pad_id):
    B, T = tokens.shape
    is_pad = tokens == pad_id
    first = torch.where(is_pad.any(dim=1), is_pad.int().argmax(dim=1), T)  # (B,)
    return (torch.arange(T)[None, :] < first[:, None])[:, None, None, :]


def padding_greater(tokens, pad_id):
    return (tokens > pad_id)[:, None, None, :]


def padding_in_place(tokens, pad_id):
    tokens[tokens == pad_id] = -1
    return (tokens != -1)[:, None, None, :]


def padding_in_place_ne(tokens, pad_id):
    return tokens.ne_(pad_id).bool()[:, None, None, :]


def padding_flatten_with_view(tokens, pad_id):
    B, T = tokens.shape
    flat = tokens.view(B * T) != pad_id  # merging axes needs contiguous memory
    return flat.view(B, 1, 1, T)


def padding_arguments_swapped(pad_id, tokens):
    return padding_index(tokens, pad_id)


def padding_list(tokens, pad_id):
    return padding_index(tokens, pad_id).tolist()


PADDING_WRONG = [
    (padding_stub, "⏳ padding_mask: not implemented yet"),
    (padding_inverted, "the mask is inverted: True marks the padding"),
    (padding_inverted, "nn.MultiheadAttention's convention (key_padding_mask True = masked out)"),
    (padding_zero_hard_coded, "the pad id is hard-coded to 0: use the pad_id argument"),
    (padding_zero_hard_coded_inverted, "hard-coded to 0 and the mask is inverted"),
    (padding_b_t, "has shape (3, 6), expected (3, 1, 1, 6). A (B, T) mask broadcasts against"),
    (padding_b_t, "its B lines up with T_q and its T with T_k"),
    (padding_b_1_t, "has shape (3, 1, 6), expected (3, 1, 1, 6). (B, 1, T) fits scores"),
    (padding_t_on_query_axis, "T is on a query axis: padding hides *keys*"),
    (padding_full_matrix, "A full (T, T) matrix per sentence is not needed"),
    (padding_batch_not_first, "has shape (1, 1, 3, 6), expected (3, 1, 1, 6). The batch axis"),
    (padding_int, "is a 0/1 integer mask (int64) (the 1s are in the right places)"),
    (padding_float, "is a 0/1 float mask (float32) (the 1s are in the right places)"),
    (padding_additive, "is an additive float32 mask (0 where allowed, -inf where not, in the"),
    (padding_by_lengths, "by position, from the lengths"),
    (padding_by_lengths, "(pads can come first, or in between)"),
    (padding_up_to_first_pad, "everything from the first pad on is masked"),
    (padding_greater, "you compared tokens > pad_id"),
    (padding_in_place, "changed one of its input tensors in place"),
    (padding_in_place_ne, "changed one of its input tensors in place"),
    (padding_flatten_with_view, "use .reshape(...) instead of .view(...)"),
    (padding_flatten_with_view, "The tensor is not contiguous in memory"),
    (padding_arguments_swapped, "the lesson's signature is padding_mask(tokens, pad_id)"),
    (padding_list, "should be a torch.Tensor, got a list"),
]


@pytest.mark.parametrize(
    "answer, diagnosis",
    PADDING_WRONG,
    ids=[f"{w[0].__name__}-{i}" for i, w in enumerate(PADDING_WRONG)],
)
def test_padding_mask_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.padding_mask, answer)
    assert passed is False and diagnosis in printed, printed


def test_padding_mask_a_value_mistake_without_a_name_says_where(verdict):
    def off_at_one_place(tokens, pad_id):
        mask = (tokens != pad_id)[:, None, None, :].clone()
        mask[0, 0, 0, 1] = ~mask[0, 0, 0, 1]
        return mask

    passed, printed = verdict(check.padding_mask, off_at_one_place)
    assert passed is False, printed
    assert "wrong at sentence 0, position 1: token 0 is a real token (pad_id=1)" in printed


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the case it names (T, the tokens' shape and description) and its hint.


def causal_unit_batch_axis(T):
    return torch.ones(T, T, dtype=torch.bool).tril()[None]  # (1, T, T)


def causal_one_per_query(T):
    return torch.ones(T, T, T, dtype=torch.bool).tril()  # (T, T, T): leading axis not a unit


def causal_one_key_too_many(T):
    return torch.ones(T, T + 1, dtype=torch.bool).tril()  # (T, T + 1): 2-D, not square


def causal_never_filled(T):
    return torch.zeros(T, T)  # all 0: a 0/1 float mask, not an additive one


def causal_ones_and_minus_inf(T):
    """1 where allowed, -inf where not: neither a 0/1 mask nor an additive one."""
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.ones(T, T).masked_fill(~allowed, float("-inf"))


def causal_additive_inverted(T):
    """An additive mask with -inf in the wrong places (on and below the diagonal)."""
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.zeros(T, T).masked_fill(allowed, float("-inf"))


def causal_sees_one_key_ahead(T):
    return torch.ones(T, T, dtype=torch.bool).tril(1)  # diagonal=1: one future key too many


def causal_crash(T):
    return torch.ones(T, T, dtype=torch.bool).tril(T + "")


def padding_stray_squeeze(tokens, pad_id):
    """A stray .squeeze(0): harmless but for a batch of one."""
    return (tokens != pad_id)[:, None, None, :].squeeze(0)


def padding_stray_squeeze_last(tokens, pad_id):
    """A stray .squeeze(-1): harmless but for T = 1."""
    return (tokens != pad_id)[:, None, None, :].squeeze(-1)


def padding_squeezes_the_tokens(tokens, pad_id):
    """tokens.squeeze() "to drop the batch axis": the batch of one loses it, and indexing fails."""
    return (tokens.squeeze() != pad_id)[:, None, None, :]


def padding_sign_when_pad_is_0(tokens, pad_id):
    """The pad-0 shortcut torch.sign(tokens): the right 1s, but int64."""
    if pad_id == 0:
        return tokens.sign()[:, None, None, :]
    return (tokens != pad_id)[:, None, None, :]


def padding_twos(tokens, pad_id):
    return (tokens != pad_id).float()[:, None, None, :] * 2  # neither bool nor 0/1


def padding_additive_b_t(tokens, pad_id):
    return torch.zeros(tokens.shape).masked_fill(tokens == pad_id, float("-inf"))  # (B, T)


def padding_pad_id_falsy(tokens, pad_id=None):
    """`if not pad_id` meant 'no pad id given', but pad_id = 0 is falsy too."""
    if not pad_id:
        return torch.ones_like(tokens, dtype=torch.bool)[:, None, None, :]
    return (tokens != pad_id)[:, None, None, :]


_WHY = (
    "it must be bool. Masks are bool, True = may attend: attention reads them with "
    "scores.masked_fill(~mask, float('-inf')), and masked_fill takes only a bool mask; "
)
_NOT_FLOAT = "~ is not defined on a float tensor. "
_NOT_INT = "~ on an integer flips every bit (~1 is -2, ~0 is -1: both non-zero). "
_ADDITIVE = (
    "the kind that is added to the scores (nn.Transformer.generate_square_subsequent_mask "
    "returns one). Ours is bool, True = may attend: our attention reads it with "
    "masked_fill(~mask, float('-inf')), and ~ is not even defined on a float tensor. "
)
_MAKE_CAUSAL = (
    "Comparisons give bool: torch.ones(T, T, dtype=torch.bool).tril(), or "
    "torch.arange(T)[None, :] <= torch.arange(T)[:, None]"
)
_MAKE_PADDING = "A comparison gives bool: (tokens != pad_id)[:, None, None, :]"
_CASE_0 = (
    "❌ padding_mask: the mask for tokens (3, 6) (pad_id=1, 0 a real token, padding at the end)"
)

CAUSAL_VERDICTS = [
    (
        causal_tril,
        "✅ causal_mask: passed (T = 1, 2, 5, 8: bool, (T, T), True on and below the diagonal).",
    ),
    (
        causal_flipped,
        "❌ causal_mask: the mask is wrong at row (query) 0, column (key) 0: you have False, "
        "expected True (s <= t: query t may see key s). Row t is True at columns 0..t",
    ),
    (
        causal_sees_one_key_ahead,
        "❌ causal_mask: the mask is wrong at row (query) 0, column (key) 1: you have True, "
        "expected False (key s is in the future of query t). Row t is True at columns 0..t",
    ),
    (
        causal_additive,
        "❌ causal_mask: causal_mask(5) is an additive float32 mask (0 where allowed, -inf where "
        f"not, in the right places), {_ADDITIVE}{_MAKE_CAUSAL}",
    ),
    (
        causal_additive_inverted,
        "❌ causal_mask: causal_mask(5) is an additive float32 mask (0 where allowed, -inf where "
        f"not), {_ADDITIVE}{_MAKE_CAUSAL}",
    ),
    (
        causal_float,
        "❌ causal_mask: causal_mask(5) is a 0/1 float mask (float32) (the 1s are in the right "
        f"places); {_WHY}{_NOT_FLOAT}{_MAKE_CAUSAL}",
    ),
    (
        causal_never_filled,
        f"❌ causal_mask: causal_mask(5) is a 0/1 float mask (float32); {_WHY}{_NOT_FLOAT}"
        + _MAKE_CAUSAL,
    ),
    (
        causal_int,
        "❌ causal_mask: causal_mask(5) is a 0/1 integer mask (int64) (the 1s are in the right "
        f"places); {_WHY}{_NOT_INT}{_MAKE_CAUSAL}",
    ),
    (
        causal_ones_and_minus_inf,
        "❌ causal_mask: causal_mask(5) is float32; it must be bool (True = may attend). "
        + _MAKE_CAUSAL,
    ),
    (
        causal_other_values,
        "❌ causal_mask: causal_mask(5) is float32; it must be bool (True = may attend). "
        + _MAKE_CAUSAL,
    ),
    (
        causal_leading_axes,
        "❌ causal_mask: causal_mask(5) has shape (1, 1, 5, 5), expected (5, 5). Return it "
        "without the leading unit axes, (T, T): it broadcasts against scores (B, h, T, T) as it is",
    ),
    (
        causal_unit_batch_axis,
        "❌ causal_mask: causal_mask(5) has shape (1, 5, 5), expected (5, 5). Return it without "
        "the leading unit axes, (T, T): it broadcasts against scores (B, h, T, T) as it is",
    ),
    (
        causal_one_per_query,
        "❌ causal_mask: causal_mask(5) has shape (5, 5, 5), expected (5, 5). It is (T, T): one "
        "row per query, one column per key",
    ),
    (
        causal_one_key_too_many,
        "❌ causal_mask: causal_mask(5) has shape (5, 6), expected (5, 5). It is (T, T): one row "
        "per query, one column per key",
    ),
    (
        causal_fixed_size,
        "❌ causal_mask: causal_mask(1) has shape (5, 5), expected (1, 1). Build it from the "
        "argument T, not a fixed size",
    ),
    (
        causal_crash,
        "❌ causal_mask: on inputs T=5 your code raised TypeError: unsupported operand type(s) "
        "for +: 'int' and 'str'",
    ),
]

PADDING_VERDICTS = [
    (
        padding_index,
        "✅ padding_mask: passed (7 batches: pad ids 0 to 7, padding at the end, the start and in "
        "between, a batch of one, T = 1, int32 and non-contiguous tokens; bool (B, 1, 1, T), "
        "tokens unchanged).",
    ),
    (
        padding_additive,
        f"{_CASE_0} is an additive float32 mask (0 where allowed, -inf where not, in the right "
        f"places), {_ADDITIVE}{_MAKE_PADDING}",
    ),
    (
        padding_additive_b_t,
        f"{_CASE_0} is an additive float32 mask (0 where allowed, -inf where not), {_ADDITIVE}"
        + _MAKE_PADDING,
    ),
    (
        padding_int,
        f"{_CASE_0} is a 0/1 integer mask (int64) (the 1s are in the right places); {_WHY}"
        f"{_NOT_INT}{_MAKE_PADDING}",
    ),
    (
        padding_float,
        f"{_CASE_0} is a 0/1 float mask (float32) (the 1s are in the right places); {_WHY}"
        f"{_NOT_FLOAT}{_MAKE_PADDING}",
    ),
    (
        padding_twos,
        f"{_CASE_0} is float32; it must be bool (True = may attend). {_MAKE_PADDING}",
    ),
    (
        padding_sign_when_pad_is_0,
        "❌ padding_mask: the mask for tokens (2, 5) (pad_id=0, padding at the end) is a 0/1 "
        f"integer mask (int64) (the 1s are in the right places); {_WHY}{_NOT_INT}{_MAKE_PADDING}",
    ),
    (
        padding_stray_squeeze,
        "❌ padding_mask: the mask for tokens (1, 4) (a batch of one, int32, pad_id=7) has shape "
        "(1, 1, 4), expected (1, 1, 1, 4): the right entries, but an axis of size 1 is gone. A "
        ".squeeze() removes axes of size 1, and here B = 1, so the batch's or a unit axis goes "
        "with them: leave the mask as (tokens != pad_id)[:, None, None, :] makes it, (B, 1, 1, "
        "T), without squeezing",
    ),
    (
        padding_stray_squeeze_last,
        "❌ padding_mask: the mask for tokens (2, 1) (T=1, int32, pad_id=4) has shape (2, 1, 1), "
        "expected (2, 1, 1, 1): the right entries, but an axis of size 1 is gone. A .squeeze() "
        "removes axes of size 1, and here T = 1, so the time axis or a unit axis goes with them: "
        "leave the mask as (tokens != pad_id)[:, None, None, :] makes it, (B, 1, 1, T), without "
        "squeezing",
    ),
    (
        padding_squeezes_the_tokens,
        "❌ padding_mask: on inputs tokens (1, 4), pad_id=7 your code raised IndexError: too many "
        "indices for tensor of dimension 1. Your code calls .squeeze(), which removes every axis "
        "of size 1, and here B = 1: that axis goes too. Squeeze only an axis you name "
        "(.squeeze(1)), or not at all",
    ),
    (
        padding_pad_id_falsy,
        "❌ padding_mask: the mask is wrong at sentence 0, position 3: token 0 is the pad id "
        "(pad_id=0), so the entry should be False, you have True. True = a real token, found by "
        "value: tokens != pad_id",
    ),
    (
        padding_greater,
        "❌ padding_mask: you compared tokens > pad_id, as if the pad had the smallest id; here "
        "pad_id=1 and smaller ids are real tokens too: tokens != pad_id",
    ),
    (
        padding_zero_hard_coded,
        "❌ padding_mask: the pad id is hard-coded to 0: use the pad_id argument, tokens != "
        "pad_id (here pad_id=1, and 0 is a real token)",
    ),
]


@pytest.mark.parametrize(
    "answer, line", CAUSAL_VERDICTS, ids=[v[0].__name__ for v in CAUSAL_VERDICTS]
)
def test_causal_mask_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.causal_mask, answer)
    assert printed == line + "\n"
    assert passed is (answer is causal_tril)


@pytest.mark.parametrize(
    "answer, line", PADDING_VERDICTS, ids=[v[0].__name__ for v in PADDING_VERDICTS]
)
def test_padding_mask_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.padding_mask, answer)
    assert printed == line + "\n"
    assert passed is (answer is padding_index)


def _pads_are_a_suffix(row, pad_id):
    is_pad = (row == pad_id).long()
    return bool((is_pad.diff() >= 0).all())  # once a pad, only pads


def test_the_padding_cases_are_what_they_say():
    """Each case is there for a reason its description states: check the reason holds."""
    from course.check.masking import _padding_cases

    cases = _padding_cases()
    for description, tokens, pad_id in cases:
        assert f"pad_id={pad_id}" in description
        assert (tokens == pad_id).any() and (tokens != pad_id).any(), description
    by_name = {description: (tokens, pad_id) for description, tokens, pad_id in cases}
    assert sum(t.shape[0] == t.shape[1] for t, _ in by_name.values()) <= 1  # B != T but once

    tokens, pad = by_name["pad_id=1, 0 a real token, padding at the end"]
    assert (tokens == 0).any() and (tokens < pad).any()  # tokens > pad_id is then wrong
    assert all(_pads_are_a_suffix(row, pad) for row in tokens)
    assert any((row == pad).any() for row in tokens) and any((row != pad).all() for row in tokens)
    assert (tokens == pad).sum(1).unique().numel() == tokens.shape[0]  # lengths all differ

    tokens, pad = by_name["pad_id=0, padding at the end"]
    assert pad == 0 and all(_pads_are_a_suffix(row, pad) for row in tokens)
    assert (tokens == pad).sum(1).unique().numel() == tokens.shape[0]

    tokens, pad = by_name["pad_id=3, padding at the start, in between, and a sentence all padding"]
    pads = tokens == pad
    assert any(row[0] and not row.all() for row in pads)  # padding at the start
    inner = pads[:, 1:-1] & ~pads[:, :-2] & ~pads[:, 2:]
    assert inner.any()  # a pad between two real tokens
    assert any(row.all() for row in pads)  # a sentence all padding
    assert not any(_pads_are_a_suffix(row, pad) for row in tokens if not (row == pad).all())

    tokens, pad = by_name["a batch of one, int32, pad_id=7"]
    assert tokens.shape[0] == 1 and tokens.dtype == torch.int32
    assert _pads_are_a_suffix(tokens[0], pad)

    tokens, pad = by_name["non-contiguous tokens, pad_id=2"]
    assert not tokens.is_contiguous()

    tokens, pad = by_name["T=1, int32, pad_id=4"]
    assert tokens.shape[1] == 1 and tokens.dtype == torch.int32

    tokens, pad = by_name["seeded random tokens, pad_id=2 wherever it falls"]
    assert not all(_pads_are_a_suffix(row, pad) for row in tokens)


def test_the_causal_lengths_are_what_they_are_for():
    """T = 1 (one position, sees itself) and T = 2 (the smallest with a future) as well as longer
    ones; T = 5 first, where every named mistake differs from the right mask."""
    from course.check.masking import _CAUSAL_LENGTHS, _causal_mistakes

    assert 1 in _CAUSAL_LENGTHS and 2 in _CAUSAL_LENGTHS and max(_CAUSAL_LENGTHS) > 5
    first = _CAUSAL_LENGTHS[0]
    right = torch.ones(first, first, dtype=torch.bool).tril()
    tables = list(_causal_mistakes(first).values())
    for n, t in enumerate(tables):
        assert not torch.equal(t, right)
        assert all(not torch.equal(t, other) for other in tables[n + 1 :])


def padding_b_t_1(tokens, pad_id):
    return (tokens != pad_id)[..., None]  # (B, T, 1)


def padding_b_1_t_1(tokens, pad_id):
    return (tokens != pad_id)[:, None, :, None]  # (B, 1, T, 1)


def padding_1_b_t(tokens, pad_id):
    return (tokens != pad_id)[None]  # (1, B, T)


def padding_1_1_t_b(tokens, pad_id):
    return (tokens != pad_id).T[None, None]  # (1, 1, T, B)


def padding_t_1_1_b(tokens, pad_id):
    return (tokens != pad_id).T[:, None, None, :]  # (T, 1, 1, B)


def padding_t_b(tokens, pad_id):
    return (tokens != pad_id).T  # (T, B)


def padding_flattened(tokens, pad_id):
    return (tokens != pad_id).flatten()  # (B * T,)


def padding_one_hot(tokens, pad_id):
    """One-hot the pad id: F.one_hot takes only int64 indices, and one case is int32."""
    one_hot = F.one_hot(tokens, int(tokens.max()) + 1)  # (B, T, n_ids)
    return ~one_hot[..., pad_id].bool()[:, None, None, :]


_ON_QUERY = (
    "T is on a query axis: padding hides *keys*, the last axis of the scores (B, h, T_q, T_k). "
    "Put T last: (tokens != pad_id)[:, None, None, :]"
)
_BATCH_FIRST = (
    "The batch axis comes first, then the two unit axes (heads, queries), then T: "
    "(tokens != pad_id)[:, None, None, :]"
)
PADDING_SHAPE_VERDICTS = [
    (padding_b_t_1, "(3, 6, 1)", _ON_QUERY),
    (padding_b_1_t_1, "(3, 1, 6, 1)", _ON_QUERY),
    (padding_t_on_query_axis, "(3, 6, 1, 1)", _ON_QUERY),
    (padding_1_b_t, "(1, 3, 6)", _BATCH_FIRST),
    (padding_batch_not_first, "(1, 1, 3, 6)", _BATCH_FIRST),
    (padding_1_1_t_b, "(1, 1, 6, 3)", _BATCH_FIRST),
    (padding_t_1_1_b, "(6, 1, 1, 3)", _BATCH_FIRST),
    (padding_t_b, "(6, 3)", _BATCH_FIRST),
    (
        padding_flattened,
        "(18,)",
        "It is (B, 1, 1, T): one row of T entries per sentence, with a head and a query axis",
    ),
]


@pytest.mark.parametrize(
    "answer, shape, hint",
    PADDING_SHAPE_VERDICTS,
    ids=[v[0].__name__ for v in PADDING_SHAPE_VERDICTS],
)
def test_padding_mask_shape_hint_whole_line(answer, shape, hint, verdict):
    passed, printed = verdict(check.padding_mask, answer)
    assert passed is False
    assert printed == f"{_CASE_0} has shape {shape}, expected (3, 1, 1, 6). {hint}\n"


def test_padding_mask_crash_names_the_inputs(verdict):
    passed, printed = verdict(check.padding_mask, padding_one_hot)
    assert passed is False
    assert printed == (
        "❌ padding_mask: on inputs tokens (1, 4), pad_id=7 your code raised RuntimeError: "
        "one_hot is only applicable to index tensor of type LongTensor.\n"
    )
