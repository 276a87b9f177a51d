"""course.attention against torch: the same numbers as F.scaled_dot_product_attention.

torch's fused function returns only the output. Its weights are recovered by attending
with the identity matrix as the values: output = weights @ I = weights.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course.attention import AttentionHead, dot_product_attention, scaled_dot_product_attention

B, H, T_Q, T_K, D_K, D_V = 2, 3, 4, 6, 5, 7  # every size differs, so a swapped axis shows


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _qkv(*batch, T_q=T_Q, T_k=T_K, seed=0):
    gen = _gen(seed)
    q = torch.randn(*batch, T_q, D_K, generator=gen)
    k = torch.randn(*batch, T_k, D_K, generator=gen)
    v = torch.randn(*batch, T_k, D_V, generator=gen)
    return q, k, v


def _torch(q, k, v, mask=None, scale=None):
    """torch's output and weights (the weights: the same attention over identity values)."""
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    eye = torch.eye(k.shape[-2]).expand(*k.shape[:-1], k.shape[-2])  # (..., T_k, T_k)
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask, scale=scale)
    return output, weights


def test_dot_product_attention_is_torchs_with_scale_one():
    q, k, v = _qkv(B)
    output, weights = dot_product_attention(q, k, v)
    want_output, want_weights = _torch(q, k, v, scale=1.0)
    torch.testing.assert_close(output, want_output)
    torch.testing.assert_close(weights, want_weights)


def _causal(T_q, T_k):
    return torch.ones(T_q, T_k, dtype=torch.bool).tril()  # (T_q, T_k)


def _padding(lengths, T_k):
    return torch.arange(T_k) < torch.tensor(lengths)[:, None]  # (B, T_k)


MASKS = {
    "none": lambda: None,
    "causal (T_q, T_k)": lambda: _causal(T_Q, T_K),
    "padding (B, 1, 1, T_k)": lambda: _padding([4, 2], T_K)[:, None, None, :],
    "per head (B, h, T_q, T_k)": lambda: torch.rand(B, H, T_Q, T_K, generator=_gen(9)) < 0.6,
    "padding & causal (B, 1, T_q, T_k)": lambda: (
        _padding([5, 3], T_K)[:, None, None, :] & _causal(T_Q, T_K)
    ),
}


@pytest.mark.parametrize("name", MASKS)
def test_equals_torchs_scaled_dot_product_attention(name):
    q, k, v = _qkv(B, H)  # (B, h, T, d): the shape multi-head attention uses
    mask = MASKS[name]()
    output, weights = scaled_dot_product_attention(q, k, v, mask)
    want_output, want_weights = _torch(q, k, v, mask)
    assert output.shape == (B, H, T_Q, D_V) and weights.shape == (B, H, T_Q, T_K)
    torch.testing.assert_close(output, want_output)
    torch.testing.assert_close(weights, want_weights)
    if mask is not None:  # masked keys get exactly zero weight
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_scaling_is_by_sqrt_d_k():
    q, k, v = _qkv(B)
    _, weights = scaled_dot_product_attention(q, k, v)
    expected = (q @ k.transpose(-2, -1) / math.sqrt(D_K)).softmax(dim=-1)
    torch.testing.assert_close(weights, expected)
    _, unscaled = dot_product_attention(q, k, v)
    assert not torch.allclose(weights, unscaled)


def test_works_on_one_sequence_without_a_batch():
    q, k, v = _qkv()
    output, weights = scaled_dot_product_attention(q, k, v, _causal(T_Q, T_K))
    want_output, want_weights = _torch(q, k, v, _causal(T_Q, T_K))
    torch.testing.assert_close(output, want_output)
    torch.testing.assert_close(weights, want_weights)


def test_a_query_that_may_attend_to_nothing_gets_zeros_like_torch():
    q, k, v = _qkv(B)
    mask = torch.ones(B, T_Q, T_K, dtype=torch.bool)
    mask[0, 1] = False  # query 1 of sequence 0 may attend to no key
    output, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    assert (weights[0, 1] == 0).all() and (output[0, 1] == 0).all()
    want_output, want_weights = _torch(q, k, v, mask)
    torch.testing.assert_close(output, want_output)
    torch.testing.assert_close(weights, want_weights)


def test_gradients_equal_torchs_and_stay_finite_on_empty_rows():
    mask = _causal(T_Q, T_K).expand(B, T_Q, T_K).clone()
    mask[1, 0] = False  # an empty row: its gradient must not be NaN
    ours = [t.requires_grad_() for t in _qkv(B, seed=3)]
    theirs = [t.detach().clone().requires_grad_() for t in ours]
    upstream = torch.randn(B, T_Q, D_V, generator=_gen(4))
    (scaled_dot_product_attention(*ours, mask)[0] * upstream).sum().backward()
    (F.scaled_dot_product_attention(*theirs, attn_mask=mask) * upstream).sum().backward()
    for mine, torchs in zip(ours, theirs, strict=True):
        assert torch.isfinite(mine.grad).all()
        torch.testing.assert_close(mine.grad, torchs.grad)


def test_dropout_drops_weights_and_rescales_the_rest():
    q, k, v = _qkv(B, H)
    _, clean = scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    output, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.25)
    dropped = weights == 0
    assert 0.1 < dropped.float().mean() < 0.4
    torch.testing.assert_close(weights[~dropped], clean[~dropped] / 0.75)
    torch.testing.assert_close(output, weights @ v)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda q, k, v: scaled_dot_product_attention(q, k[..., :3], v), "share d_k"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v[:, :3]), "same length T_k"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v, torch.ones(T_Q, T_K)), "bool"),
        (
            lambda q, k, v: scaled_dot_product_attention(q, k, v, torch.ones(T_K, T_Q).bool()),
            r"mask of shape \(6, 4\) does not broadcast to .* \(2, 4, 6\)",
        ),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v, dropout_p=1.0), r"\[0, 1\)"),
        (lambda q, k, v: scaled_dot_product_attention(q.tolist(), k, v), "torch.Tensor"),
        (lambda q, k, v: scaled_dot_product_attention(q[0, 0], k, v), r"\(\.\.\., T, d\)"),
    ],
    ids=["d_k", "T_k", "float mask", "mask shape", "dropout_p", "list", "1-d"],
)
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call(*_qkv(B))


def test_the_error_for_mismatched_d_k_names_both_shapes():
    q, k, v = _qkv(B)
    with pytest.raises(ValueError, match=r"q is \(2, 4, 5\), k is \(2, 6, 3\)"):
        scaled_dot_product_attention(q, k[..., :3], v)


# ------------------------------------------------------------ one learned head ----------


def test_attention_head_equals_torchs_single_head_attention():
    d_model, T = 6, 5
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, 1, bias=False, batch_first=True)
    head = AttentionHead(d_model, d_k=d_model)
    with torch.no_grad():  # same W_Q, W_K, W_V; torch's W_O set to the identity
        w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)
        head.w_q.weight.copy_(w_q)
        head.w_k.weight.copy_(w_k)
        head.w_v.weight.copy_(w_v)
        theirs.out_proj.weight.copy_(torch.eye(d_model))
    x = torch.randn(B, T, d_model, generator=_gen())
    causal = _causal(T, T)
    want, want_weights = theirs(x, x, x, attn_mask=~causal)  # torch: True = NOT allowed
    got = head(x, mask=causal)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(head.attn, want_weights)


def test_attention_head_shapes_and_errors():
    head = AttentionHead(d_model=8, d_k=3, d_v=5)
    x = torch.randn(B, 7, 8, generator=_gen())
    assert head(x).shape == (B, 7, 5)
    assert head.attn.shape == (B, 7, 7) and not head.attn.requires_grad
    assert sum(p.numel() for p in head.parameters()) == 8 * 3 + 8 * 3 + 8 * 5
    with pytest.raises(ValueError, match=r"\(B, T, d_model=8\), got \(2, 7, 4\)"):
        head(torch.zeros(B, 7, 4))
