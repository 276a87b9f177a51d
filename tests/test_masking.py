"""course.masking: the two masks, the decoder's, the conversions to torch's convention.

Hand-written cases first, then what the masks are for: padding leaves the real tokens'
outputs unchanged, nothing leaks from the future (by autograd), and our masks given to
course.multihead.MultiHeadAttention equal torch.nn.MultiheadAttention with the
converted masks (outputs and gradients).
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course.attention import scaled_dot_product_attention
from course.masking import (
    causal_mask,
    decoder_mask,
    from_torch_attn_mask,
    from_torch_key_padding_mask,
    padding_mask,
    to_torch_attn_mask,
    to_torch_key_padding_mask,
)
from course.multihead import MultiHeadAttention

PAD = 1  # not 0: 0 is a real token in these batches
TOKENS = torch.tensor(
    [
        [5, 0, 7, PAD, PAD],  # 3 real tokens, 0 among them
        [PAD, 4, 4, 2, 0],  # padded at the start (left padding)
        [3, PAD, 6, PAD, 2],  # pads in between, found by value
    ]
)
REAL = torch.tensor(
    [
        [True, True, True, False, False],
        [False, True, True, True, True],
        [True, False, True, False, True],
    ]
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------ causal_mask ----------


def test_causal_mask_by_hand():
    expected = torch.tensor(
        [
            [True, False, False, False],
            [True, True, False, False],
            [True, True, True, False],
            [True, True, True, True],
        ]
    )
    got = causal_mask(4)
    assert got.dtype == torch.bool and torch.equal(got, expected)


@pytest.mark.parametrize("T", [1, 2, 7, 33])
def test_causal_mask_is_the_lower_triangle(T):
    got = causal_mask(T)
    assert got.shape == (T, T) and got.dtype == torch.bool
    assert torch.equal(got, torch.ones(T, T, dtype=torch.bool).tril())
    assert got.diagonal().all()  # every position sees itself
    assert got.sum() == T * (T + 1) // 2


def test_causal_mask_on_a_device():
    assert causal_mask(3, device="meta").device.type == "meta"
    assert causal_mask(3, device=torch.device("cpu")).device.type == "cpu"


@pytest.mark.parametrize(
    "T, shown",
    [(0, "int 0"), (-2, "int -2"), (2.0, "float 2.0"), (True, "bool True"), ("3", "str '3'")],
)
def test_causal_mask_rejects_a_bad_length(T, shown):
    with pytest.raises(ValueError, match=f"positive int length T, got {shown}"):
        causal_mask(T)


def test_causal_mask_rejects_a_tensor_length():
    with pytest.raises(ValueError, match=r"got a torch.int64 tensor of shape \(\)"):
        causal_mask(torch.tensor(3))


# ------------------------------------------------------------ padding_mask ----------


def test_padding_mask_by_hand_with_a_pad_id_that_is_not_zero():
    got = padding_mask(TOKENS, PAD)
    assert got.shape == (3, 1, 1, 5) and got.dtype == torch.bool
    assert torch.equal(got[:, 0, 0], REAL)


def test_padding_mask_with_pad_id_zero():
    tokens = torch.tensor([[4, 9, 0, 0], [0, 3, 3, 0]])
    expected = torch.tensor([[True, True, False, False], [False, True, True, False]])
    assert torch.equal(padding_mask(tokens, 0)[:, 0, 0], expected)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_padding_mask_any_integer_dtype(dtype):
    assert torch.equal(padding_mask(TOKENS.to(dtype), PAD)[:, 0, 0], REAL)


def test_padding_mask_non_contiguous_tokens_and_batch_of_one():
    strided = TOKENS.t().contiguous().t()  # same values, column-major
    assert not strided.is_contiguous()
    assert torch.equal(padding_mask(strided, PAD)[:, 0, 0], REAL)
    one = padding_mask(TOKENS[1:2], PAD)
    assert one.shape == (1, 1, 1, 5) and torch.equal(one[0, 0, 0], REAL[1])


def test_padding_mask_leaves_the_tokens_alone():
    tokens = TOKENS.clone()
    padding_mask(tokens, PAD)
    decoder_mask(tokens, PAD)
    assert torch.equal(tokens, TOKENS)


@pytest.mark.parametrize(
    "tokens, shown",
    [
        (torch.tensor([5, 1, 1]), r"a torch.int64 tensor of shape \(3,\)"),
        (torch.zeros(2, 3, 4, dtype=torch.long), r"a torch.int64 tensor of shape \(2, 3, 4\)"),
        (torch.zeros(2, 3), r"a torch.float32 tensor of shape \(2, 3\)"),
        (torch.zeros(2, 3, dtype=torch.bool), r"a torch.bool tensor of shape \(2, 3\)"),
        ([[5, 1]], r"list \[\[5, 1\]\]"),
    ],
)
def test_padding_mask_rejects_tokens_that_are_not_2d_integers(tokens, shown):
    with pytest.raises(ValueError, match=r"2-D integer tensor \(B, T\) of token ids, got " + shown):
        padding_mask(tokens, 0)


@pytest.mark.parametrize("pad_id, shown", [(0.0, "float 0.0"), (None, "NoneType None")])
def test_padding_mask_rejects_a_pad_id_that_is_not_an_int(pad_id, shown):
    with pytest.raises(ValueError, match=f"pad_id must be an int token id, got {shown}"):
        padding_mask(TOKENS, pad_id)


# ------------------------------------------------------------ decoder_mask ----------


def test_decoder_mask_is_padding_and_causal():
    got = decoder_mask(TOKENS, PAD)
    assert got.shape == (3, 1, 5, 5) and got.dtype == torch.bool
    for b in range(3):
        for t in range(5):
            for s in range(5):
                assert bool(got[b, 0, t, s]) == (s <= t and bool(REAL[b, s]))


def test_decoder_mask_by_hand():
    got = decoder_mask(torch.tensor([[8, 9, 0, 0]]), 0)[0, 0]
    expected = torch.tensor(
        [
            [True, False, False, False],
            [True, True, False, False],
            [True, True, False, False],  # a padding query still sees the real past
            [True, True, False, False],
        ]
    )
    assert torch.equal(got, expected)


def test_decoder_mask_errors_like_padding_mask():
    with pytest.raises(ValueError, match=r"2-D integer tensor \(B, T\)"):
        decoder_mask(torch.zeros(4, dtype=torch.long), 0)


# --------------------------------------------------------------- broadcasting ----------


def test_masks_broadcast_against_scores_with_heads():
    B, h, T = 3, 4, 5
    scores = torch.randn(B, h, T, T, generator=_gen())  # (B, h, T_q, T_k)
    for mask in (causal_mask(T), padding_mask(TOKENS, PAD), decoder_mask(TOKENS, PAD)):
        assert torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
    full = (padding_mask(TOKENS, PAD) & causal_mask(T)).expand(B, h, T, T)
    for b in range(B):
        for j in range(h):
            for t in range(T):
                for s in range(T):
                    assert bool(full[b, j, t, s]) == (s <= t and bool(REAL[b, s]))


def test_padding_mask_zeroes_the_weights_of_every_pad_key():
    B, h, T, d_k = 3, 2, 5, 4
    q, k, v = (torch.randn(B, h, T, d_k, generator=_gen(i)) for i in range(3))
    _, weights = scaled_dot_product_attention(q, k, v, padding_mask(TOKENS, PAD))
    assert weights.shape == (B, h, T, T)
    pad_keys = ~REAL[:, None, None, :].expand(B, h, T, T)
    assert (weights[pad_keys] == 0).all() and (weights[~pad_keys] > 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(B, h, T))


def test_a_query_with_nothing_to_see_gets_zero_weights():
    """Lesson 03's rule on a decoder mask: sentence 1 starts with a pad, so its query 0
    may attend to no key at all."""
    B, h, T, d_k = 3, 2, 5, 4
    q, k, v = (torch.randn(B, h, T, d_k, generator=_gen(i)) for i in range(3))
    mask = decoder_mask(TOKENS, PAD)
    assert not mask[1, 0, 0].any()
    output, weights = scaled_dot_product_attention(q, k, v, mask)
    assert (weights[1, :, 0] == 0).all() and (output[1, :, 0] == 0).all()
    assert torch.isfinite(output).all()


def test_padding_leaves_the_real_tokens_outputs_unchanged_only_with_the_mask():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    embed = nn.Embedding(10, 8)
    sentence = torch.tensor([[3, 7, 2]])  # (1, 3), no padding
    padded = torch.tensor([[3, 7, 2, 0, 0, 0]])  # the same sentence padded with pad_id 0
    with torch.no_grad():
        x, x_padded = embed(sentence), embed(padded)
        alone = mha(x, x, x)  # (1, 3, 8)
        masked = mha(x_padded, x_padded, x_padded, padding_mask(padded, 0))[:, :3]
        unmasked = mha(x_padded, x_padded, x_padded)[:, :3]
    assert torch.allclose(masked, alone, atol=1e-6)
    assert (unmasked - alone).abs().max() > 1e-2


# ----------------------------------------------------------------- no leak ----------


@pytest.mark.parametrize("mask_of", ["causal", "decoder"])
def test_no_leak_from_the_future_by_autograd(mask_of):
    """d output_t / d x_s is zero for every s > t and non-zero for every s <= t."""
    torch.manual_seed(0)
    T, d_model = 5, 8
    mha = MultiHeadAttention(d_model, 2).double()
    tokens = torch.tensor([[4, 2, 9, 3, 6]])  # no padding: every past key is real
    mask = causal_mask(T) if mask_of == "causal" else decoder_mask(tokens, 0)
    x = torch.randn(1, T, d_model, dtype=torch.float64)

    def attend(x):
        return mha(x, x, x, mask)

    jacobian = torch.autograd.functional.jacobian(attend, x)  # (1, T, d, 1, T, d)
    influence = jacobian[0, :, :, 0].abs().sum(dim=(1, 3))  # (T_out, T_in)
    future = ~causal_mask(T)
    assert (influence[future] == 0).all()
    assert (influence[~future] > 1e-8).all()


def test_without_a_mask_the_future_leaks():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 4, 8, dtype=torch.float64, requires_grad=True)
    mha(x, x, x)[0, 0].sum().backward()  # output at t = 0
    assert (x.grad[0, 1:].abs().sum(-1) > 1e-8).all()  # depends on positions 1, 2, 3


# --------------------------------------------------------------- conversions ----------


def test_to_torch_attn_mask_inverts_a_2d_mask():
    mask = causal_mask(4)
    assert torch.equal(to_torch_attn_mask(mask), torch.ones(4, 4, dtype=torch.bool).triu(1))
    assert torch.equal(from_torch_attn_mask(to_torch_attn_mask(mask)), mask)


def test_to_torch_attn_mask_stacks_a_4d_mask_per_head():
    mask = decoder_mask(TOKENS, PAD)  # (3, 1, 5, 5)
    got = to_torch_attn_mask(mask, n_heads=2)
    assert got.shape == (6, 5, 5)
    for b in range(3):
        for j in range(2):
            assert torch.equal(got[b * 2 + j], ~mask[b, 0])
    per_head = torch.rand(3, 2, 5, 5, generator=_gen()) > 0.5  # (B, h, T_q, T_k)
    back = from_torch_attn_mask(to_torch_attn_mask(per_head, 2)).view(3, 2, 5, 5)
    assert torch.equal(back, per_head)


def test_key_padding_mask_round_trip():
    mask = padding_mask(TOKENS, PAD)
    key_padding = to_torch_key_padding_mask(mask)
    assert key_padding.shape == (3, 5) and torch.equal(key_padding, TOKENS == PAD)
    assert torch.equal(from_torch_key_padding_mask(key_padding), mask)


def test_conversion_errors_name_what_came():
    with pytest.raises(ValueError, match=r"mask must be a bool tensor, got a torch.int64 tensor"):
        to_torch_attn_mask(torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(T_q, T_k\) or \(B, h, T_q, T_k\), got .* \(2, 3, 3\)"):
        to_torch_attn_mask(torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="a 4-D mask needs n_heads, a positive int; got NoneType"):
        to_torch_attn_mask(decoder_mask(TOKENS, PAD))
    with pytest.raises(ValueError, match="has 3 heads on dim 1, expected 1 or n_heads=2"):
        to_torch_attn_mask(torch.ones(1, 3, 2, 2, dtype=torch.bool), n_heads=2)
    with pytest.raises(ValueError, match=r"padding mask \(B, 1, 1, T_k\), got .* \(3, 5\)"):
        to_torch_key_padding_mask(REAL)
    with pytest.raises(ValueError, match=r"key_padding_mask must be a bool tensor, got list"):
        from_torch_key_padding_mask([[True]])
    with pytest.raises(
        ValueError, match=r"key_padding_mask must be \(B, T_k\), got .* \(3, 1, 1, 5\)"
    ):
        from_torch_key_padding_mask(padding_mask(TOKENS, PAD))
    with pytest.raises(ValueError, match=r"attn_mask must be a bool tensor, got a torch.float32"):
        from_torch_attn_mask(torch.zeros(2, 2))


def test_fused_sdpa_reads_our_masks_as_they_are():
    """F.scaled_dot_product_attention shares our convention: no conversion needed."""
    B, h, T, d_k = 3, 2, 5, 4
    q, k, v = (torch.randn(B, h, T, d_k, generator=_gen(i)) for i in range(3))
    for mask in (causal_mask(T), padding_mask(TOKENS, PAD), decoder_mask(TOKENS, PAD)):
        ours, _ = scaled_dot_product_attention(q, k, v, mask)
        theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert torch.allclose(ours, theirs, atol=1e-6)


# ------------------------------------------- equal to torch.nn.MultiheadAttention ----------


def _pair(d_model=12, n_heads=3, seed=0):
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    with torch.no_grad():
        for p in theirs.parameters():  # torch starts its biases at 0: make every number count
            p.normal_(std=0.3)
    ours = MultiHeadAttention.from_torch(theirs)  # float32 weights, copied exactly
    return ours.double(), theirs.double()


def _their_grads(theirs):
    w_q, w_k, w_v = theirs.in_proj_weight.grad.chunk(3)  # (3 d, d) -> 3 x (d, d)
    b_q, b_k, b_v = theirs.in_proj_bias.grad.chunk(3)
    out = theirs.out_proj
    return [w_q, w_k, w_v, out.weight.grad, b_q, b_k, b_v, out.bias.grad]


def _our_grads(ours):
    layers = (ours.w_q, ours.w_k, ours.w_v, ours.w_o)
    return [m.weight.grad for m in layers] + [m.bias.grad for m in layers]


def _compare(ours_run, theirs_run, ours, theirs, x):
    x_ours = x.clone().requires_grad_()
    x_theirs = x.clone().requires_grad_()
    got = ours_run(x_ours)
    want = theirs_run(x_theirs)
    projection = torch.randn(want.shape, generator=_gen(7), dtype=want.dtype)
    (got * projection).sum().backward()
    (want * projection).sum().backward()
    assert torch.allclose(got, want, atol=1e-10)
    assert torch.allclose(x_ours.grad, x_theirs.grad, atol=1e-10)
    for g, w in zip(_our_grads(ours), _their_grads(theirs), strict=True):
        assert torch.allclose(g, w, atol=1e-10)


def test_padding_mask_equals_torch_key_padding_mask():
    ours, theirs = _pair()
    x = torch.randn(3, 5, 12, generator=_gen(1), dtype=torch.float64)
    mask = padding_mask(TOKENS, PAD)  # (B, 1, 1, T)
    _compare(
        lambda x: ours(x, x, x, mask),
        lambda x: theirs(x, x, x, key_padding_mask=to_torch_key_padding_mask(mask))[0],
        ours,
        theirs,
        x,
    )


def test_causal_mask_equals_torch_attn_mask():
    ours, theirs = _pair()
    x = torch.randn(2, 6, 12, generator=_gen(2), dtype=torch.float64)
    mask = causal_mask(6)
    _compare(
        lambda x: ours(x, x, x, mask),
        lambda x: theirs(x, x, x, attn_mask=to_torch_attn_mask(mask))[0],
        ours,
        theirs,
        x,
    )
    # torch's own helper builds the same mask in its additive form (0 / -inf)
    additive = nn.Transformer.generate_square_subsequent_mask(6)
    assert torch.equal(to_torch_attn_mask(mask), additive == float("-inf"))


def test_decoder_mask_equals_torch_with_both_masks_or_a_per_head_attn_mask():
    ours, theirs = _pair()
    tokens = torch.tensor([[5, 0, 7, PAD, PAD], [3, PAD, 6, PAD, 2]])  # no leading pad
    x = torch.randn(2, 5, 12, generator=_gen(3), dtype=torch.float64)
    mask = decoder_mask(tokens, PAD)  # (B, 1, T, T)
    _compare(
        lambda x: ours(x, x, x, mask),
        lambda x: theirs(
            x,
            x,
            x,
            attn_mask=to_torch_attn_mask(causal_mask(5)),
            key_padding_mask=to_torch_key_padding_mask(padding_mask(tokens, PAD)),
        )[0],
        ours,
        theirs,
        x,
    )
    ours.zero_grad(), theirs.zero_grad()
    _compare(
        lambda x: ours(x, x, x, mask),
        lambda x: theirs(x, x, x, attn_mask=to_torch_attn_mask(mask, n_heads=3))[0],
        ours,
        theirs,
        x,
    )


# ------------------------------------------ what mutation testing found unpinned ----------


def test_bad_tokens_are_named_tokens():
    with pytest.raises(ValueError, match=r"^tokens must be a 2-D integer tensor \(B, T\) of token"):
        padding_mask(torch.zeros(2, 3), PAD)


def test_one_head_is_a_head_count():
    mask = decoder_mask(TOKENS, PAD)  # (3, 1, 5, 5)
    assert torch.equal(to_torch_attn_mask(mask, n_heads=1), ~mask[:, 0])  # (3, 5, 5)


def test_key_padding_conversion_refuses_what_is_not_a_bool_padding_mask():
    with pytest.raises(ValueError, match=r"^mask must be a bool tensor, got a torch.int64"):
        to_torch_key_padding_mask(padding_mask(TOKENS, PAD).long())
    per_head = torch.ones(3, 2, 1, 5, dtype=torch.bool)  # (B, h, 1, T_k): a head axis
    with pytest.raises(ValueError, match=r"padding mask \(B, 1, 1, T_k\), got .*\(3, 2, 1, 5\)"):
        to_torch_key_padding_mask(per_head)
    with pytest.raises(ValueError, match=r"padding mask \(B, 1, 1, T_k\), got .*\(3, 1, 2, 5\)"):
        to_torch_key_padding_mask(torch.ones(3, 1, 2, 5, dtype=torch.bool))
