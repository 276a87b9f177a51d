"""The lesson 06 checkers accept every correct mask and name each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line. The masks
are constants (no gradients), so the mistakes are about dtype, shape and values.
"""

import numpy as np
import pytest
import torch
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
