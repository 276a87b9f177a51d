"""course.multihead: head split/merge, and MultiHeadAttention equals torch's, same weights."""

import pytest
import torch
from torch import nn

from course.multihead import MultiHeadAttention, load_from_torch, merge_heads, split_heads

B, T_Q, T_K, D_MODEL, H = 2, 4, 6, 12, 3  # every size differs, so a swapped axis shows


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------ split / merge ----------


def test_split_heads_shape_and_contents():
    x = torch.arange(B * T_Q * D_MODEL, dtype=torch.float).view(B, T_Q, D_MODEL)
    heads = split_heads(x, H)
    d_k = D_MODEL // H
    assert heads.shape == (B, H, T_Q, d_k)
    for j in range(H):  # head j holds features j*d_k:(j+1)*d_k of every position
        assert torch.equal(heads[:, j], x[..., j * d_k : (j + 1) * d_k])


def test_split_heads_on_the_lessons_small_example():
    x = torch.arange(12).view(1, 2, 6)  # (B=1, T=2, d_model=6)
    expected = torch.tensor([[[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10, 11]]]])
    assert torch.equal(split_heads(x, 2), expected)


@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 6, 12])
def test_merge_undoes_split(n_heads):
    x = torch.randn(B, T_Q, D_MODEL, generator=_gen())
    assert torch.equal(merge_heads(split_heads(x, n_heads)), x)
    heads = torch.randn(B, n_heads, T_Q, D_MODEL // n_heads, generator=_gen(1))
    assert torch.equal(split_heads(merge_heads(heads), n_heads), heads)


def test_split_heads_works_on_non_contiguous_input():
    x = torch.randn(T_Q, B, D_MODEL, generator=_gen()).transpose(0, 1)  # (B, T, d) strided
    assert not x.is_contiguous()
    assert torch.equal(split_heads(x, H), split_heads(x.contiguous(), H))


def test_split_heads_errors_name_expected_and_actual():
    with pytest.raises(ValueError, match=r"d_model=12, n_heads=5"):
        split_heads(torch.zeros(B, T_Q, 12), 5)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\), got \(4, 12\)"):
        split_heads(torch.zeros(4, 12), 3)
    with pytest.raises(ValueError, match="positive int"):
        split_heads(torch.zeros(B, T_Q, 12), 0)


def test_merge_heads_error_names_expected_and_actual():
    with pytest.raises(ValueError, match=r"\(B, h, T, d_k\), got \(2, 4, 12\)"):
        merge_heads(torch.zeros(2, 4, 12))


# ------------------------------------------------------------- the module ----------


def test_module_contract():
    mha = MultiHeadAttention(D_MODEL, H)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        linear = getattr(mha, name)
        assert isinstance(linear, nn.Linear)
        assert linear.weight.shape == (D_MODEL, D_MODEL) and linear.bias.shape == (D_MODEL,)
    assert mha.d_k == D_MODEL // H
    query = torch.randn(B, T_Q, D_MODEL, generator=_gen())
    memory = torch.randn(B, T_K, D_MODEL, generator=_gen(1))
    out = mha(query, memory, memory)
    assert out.shape == (B, T_Q, D_MODEL)
    assert mha.attn.shape == (B, H, T_Q, T_K) and not mha.attn.requires_grad
    assert torch.allclose(mha.attn.sum(-1), torch.ones(B, H, T_Q))


def test_bias_false_has_no_biases():
    mha = MultiHeadAttention(D_MODEL, H, bias=False)
    assert all(getattr(mha, n).bias is None for n in ("w_q", "w_k", "w_v", "w_o"))
    assert sum(p.numel() for p in mha.parameters()) == 4 * D_MODEL**2


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_count_equals_torchs(bias):
    ours = MultiHeadAttention(D_MODEL, H, bias=bias)
    theirs = nn.MultiheadAttention(D_MODEL, H, bias=bias, batch_first=True)
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in theirs.parameters())
    assert count == 4 * D_MODEL**2 + (4 * D_MODEL if bias else 0)


def test_same_parameter_count_whatever_the_number_of_heads():
    counts = {sum(p.numel() for p in MultiHeadAttention(24, h).parameters()) for h in (1, 2, 3, 4)}
    assert counts == {4 * 24 * 24 + 4 * 24}


def test_module_errors():
    with pytest.raises(ValueError, match=r"d_model=10, n_heads=4"):
        MultiHeadAttention(10, 4)
    mha = MultiHeadAttention(D_MODEL, H)
    x = torch.zeros(B, T_Q, D_MODEL)
    expected = r"key must have shape \(B, T, d_model=12\), got \(2, 4, 8\)"
    with pytest.raises(ValueError, match=expected):
        mha(x, torch.zeros(B, T_Q, 8), x)
    with pytest.raises(ValueError, match="bool"):
        mha(x, x, x, mask=torch.ones(T_Q, T_Q))
    with pytest.raises(ValueError, match="same"):
        mha(x, x, torch.zeros(B, T_Q + 1, D_MODEL))


def test_dropout_only_in_training_mode():
    mha = MultiHeadAttention(D_MODEL, H, dropout=0.5)
    x = torch.randn(B, T_K, D_MODEL, generator=_gen())
    mha.eval()
    first, second = mha(x, x, x), mha(x, x, x)
    assert torch.equal(first, second)
    mha.train()
    torch.manual_seed(0)
    dropped = mha(x, x, x)
    assert not torch.allclose(dropped, first)
    assert (mha.attn == 0).any()  # some weights dropped


def test_a_fully_masked_query_gives_zeros_not_nan():
    mha = MultiHeadAttention(D_MODEL, H, bias=False)
    x = torch.randn(1, 3, D_MODEL, generator=_gen())
    mask = torch.tensor([[False, False, False], [True, True, False], [True, True, True]])
    out = mha(x, x, x, mask=mask)
    assert torch.isfinite(out).all() and torch.equal(out[0, 0], torch.zeros(D_MODEL))


# --------------------------------------------- equal to torch.nn.MultiheadAttention ----------


def _pair(bias: bool):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D_MODEL, H, bias=bias, batch_first=True).eval()
    with torch.no_grad():  # torch starts its biases at zero: make them count
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=_gen(p.numel())) * 0.3)
    return MultiHeadAttention.from_torch(theirs).eval(), theirs


def _padding(lengths, T):
    """Ours: (B, 1, 1, T) True = real token; torch's key_padding_mask: (B, T) True = ignore."""
    real = torch.arange(T) < torch.tensor(lengths)[:, None]  # (B, T)
    return real[:, None, None, :], ~real


def _causal(T_q, T_k):
    allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril()  # (T_q, T_k) True = may attend
    return allowed, ~allowed  # torch's bool attn_mask: True = NOT allowed


CASES = ["self", "cross", "padding", "causal", "causal+padding"]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("case", CASES)
def test_equals_torch_multihead_attention(case, bias):
    ours, theirs = _pair(bias)
    gen = _gen(7)
    T_k = T_Q if case in ("self", "causal", "causal+padding") else T_K
    query = torch.randn(B, T_Q, D_MODEL, generator=gen)
    key = query if T_k == T_Q else torch.randn(B, T_k, D_MODEL, generator=gen)
    value = query if T_k == T_Q else torch.randn(B, T_k, D_MODEL, generator=gen)
    our_mask, their_kwargs = None, {}
    if case in ("padding", "causal+padding"):
        our_mask, their_kwargs["key_padding_mask"] = _padding([T_k, T_k - 2], T_k)
    if case in ("causal", "causal+padding"):
        allowed, their_kwargs["attn_mask"] = _causal(T_Q, T_k)
        our_mask = allowed if our_mask is None else our_mask & allowed  # (B, 1, T_q, T_k)

    with torch.no_grad():
        want, want_weights = theirs(
            query, key, value, need_weights=True, average_attn_weights=False, **their_kwargs
        )
        _, want_mean = theirs(query, key, value, need_weights=True, **their_kwargs)
        got = ours(query, key, value, mask=our_mask)
    assert got.shape == want.shape == (B, T_Q, D_MODEL)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert ours.attn.shape == want_weights.shape == (B, H, T_Q, T_k)
    torch.testing.assert_close(ours.attn, want_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours.attn.mean(dim=1), want_mean, atol=1e-6, rtol=1e-5)
    if our_mask is not None:  # the mask did something: masked keys got exactly zero weight
        assert (ours.attn.masked_select(~our_mask.expand_as(ours.attn)) == 0).all()
        assert not torch.allclose(got, ours(query, key, value))


def test_load_from_torch_fills_any_module_with_the_four_projections():
    ours, theirs = _pair(bias=True)
    other = MultiHeadAttention(D_MODEL, H)
    assert load_from_torch(other, theirs) is other
    x = torch.randn(B, T_Q, D_MODEL, generator=_gen())
    torch.testing.assert_close(other(x, x, x), ours(x, x, x), atol=0, rtol=0)


def test_load_from_torch_refuses_what_it_cannot_copy():
    theirs = nn.MultiheadAttention(D_MODEL, H, batch_first=True)
    with pytest.raises(ValueError, match="bias"):
        load_from_torch(MultiHeadAttention(D_MODEL, H, bias=False), theirs)
    with pytest.raises(ValueError, match=r"nn.Linear\(12, 12\)"):
        load_from_torch(MultiHeadAttention(24, H), theirs)
    with pytest.raises(ValueError, match="kdim"):
        load_from_torch(MultiHeadAttention(D_MODEL, H), nn.MultiheadAttention(D_MODEL, H, kdim=8))
    with pytest.raises(ValueError, match="MultiheadAttention"):
        load_from_torch(MultiHeadAttention(D_MODEL, H), nn.Linear(D_MODEL, D_MODEL))


def test_gradients_match_torchs():
    ours, theirs = _pair(bias=True)
    x = torch.randn(B, T_Q, D_MODEL, generator=_gen(3))
    ours(x, x, x).pow(2).sum().backward()
    theirs(x, x, x, need_weights=False)[0].pow(2).sum().backward()
    grads_q_k_v = torch.cat([ours.w_q.weight.grad, ours.w_k.weight.grad, ours.w_v.weight.grad])
    torch.testing.assert_close(grads_q_k_v, theirs.in_proj_weight.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.w_o.weight.grad, theirs.out_proj.weight.grad)
