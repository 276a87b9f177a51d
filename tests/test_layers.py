"""course.layers: LayerNorm equals torch.nn.LayerNorm, EncoderLayer equals
torch.nn.TransformerEncoderLayer (post-LN and norm_first=True) given the same weights,
outputs and gradients, with a padding mask; the pieces keep the names lesson 08 needs.

About torch's "fast path": in eval mode, without autograd, nn.TransformerEncoderLayer
runs a fused kernel (torch._transformer_encoder_layer_fwd), and nn.TransformerEncoder
may pack a padded batch into a nested tensor and return zeros at padded positions. The
main comparison therefore runs torch's layer in *training* mode with dropout=0, which is
never the fast path, so every position and every gradient is compared; a second test
compares the fast path itself, and says exactly which positions it compares.
"""

import pytest
import torch
import torch.nn.functional as F
from _layer_helpers import _gen, _randomize
from torch import nn

from course.layers import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    load_encoder_layer,
)
from course.masking import padding_mask, to_torch_key_padding_mask
from course.multihead import MultiHeadAttention

B, T, D_MODEL, H, D_FF = 2, 5, 12, 2, 20  # every size differs, so a swapped axis shows
# sentence 0 has 5 real tokens, sentence 1 has 3 then 2 pads (pad id 0)
TOKENS = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]])


# ------------------------------------------------------------- LayerNorm ----------


def test_layer_norm_parameters_start_as_identity():
    norm = LayerNorm(D_MODEL)
    names = dict(norm.named_parameters())
    assert set(names) == {"weight", "bias"}
    assert torch.equal(norm.weight, torch.ones(D_MODEL))
    assert torch.equal(norm.bias, torch.zeros(D_MODEL))
    assert norm.eps == 1e-5
    assert "12, eps=1e-05" in repr(norm)


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
@pytest.mark.parametrize(
    "shape", [(B, T, D_MODEL), (1, 1, D_MODEL), (7, D_MODEL), (2, 3, 4, D_MODEL)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layer_norm_equals_torchs_values_and_gradients(eps, shape, dtype):
    ours = _randomize(LayerNorm(D_MODEL, eps)).to(dtype)
    theirs = nn.LayerNorm(D_MODEL, eps=eps).to(dtype)
    with torch.no_grad():
        theirs.weight.copy_(ours.weight)
        theirs.bias.copy_(ours.bias)
    x = torch.randn(shape, generator=_gen(1), dtype=dtype) * 0.1  # small var: eps matters
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_ours, out_theirs = ours(x_ours), theirs(x_theirs)
    assert out_ours.dtype == dtype
    assert torch.allclose(out_ours, out_theirs, atol=1e-6 if dtype == torch.float32 else 1e-12)
    projection = torch.randn(out_ours.shape, generator=_gen(2), dtype=dtype)
    (out_ours * projection).sum().backward()
    (out_theirs * projection).sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    assert torch.allclose(x_ours.grad, x_theirs.grad, atol=tol)
    assert torch.allclose(ours.weight.grad, theirs.weight.grad, atol=tol)
    assert torch.allclose(ours.bias.grad, theirs.bias.grad, atol=tol)


def test_layer_norm_uses_the_biased_variance_and_eps_inside_the_root():
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])  # mean 3, biased var (4+1+0+9)/4 = 3.5
    out = LayerNorm(4, eps=0.5)(x)
    assert torch.allclose(out, (x - 3.0) / 2.0)  # sqrt(3.5 + 0.5) = 2
    unit = LayerNorm(4)(torch.randn(3, 4, generator=_gen()))
    assert torch.allclose(unit.mean(-1), torch.zeros(3), atol=1e-6)
    assert torch.allclose(unit.var(-1, correction=0), torch.ones(3), atol=1e-4)


def test_layer_norm_normalises_each_position_on_its_own():
    x = torch.randn(B, T, D_MODEL, generator=_gen())
    norm = _randomize(LayerNorm(D_MODEL))
    alone = norm(x[1:, 2:3])  # one token of one sentence
    assert torch.allclose(norm(x)[1:, 2:3], alone)


def test_layer_norm_errors_name_what_was_expected():
    with pytest.raises(ValueError, match=r"\(\.\.\., d_model=12\), got \(2, 5, 8\)"):
        LayerNorm(D_MODEL)(torch.zeros(2, 5, 8))
    with pytest.raises(ValueError, match="got list"):
        LayerNorm(D_MODEL)([1.0] * D_MODEL)
    with pytest.raises(ValueError, match="d_model must be a positive int, got 0"):
        LayerNorm(0)
    with pytest.raises(ValueError, match="d_model must be a positive int, got 12.0"):
        LayerNorm(12.0)
    with pytest.raises(ValueError, match="eps must be positive, got 0"):
        LayerNorm(D_MODEL, eps=0)


# ----------------------------------------------------------- FeedForward ----------


def test_feed_forward_contract_and_formula():
    ff = _randomize(FeedForward(D_MODEL, D_FF))
    assert isinstance(ff.linear1, nn.Linear) and ff.linear1.weight.shape == (D_FF, D_MODEL)
    assert isinstance(ff.linear2, nn.Linear) and ff.linear2.weight.shape == (D_MODEL, D_FF)
    x = torch.randn(B, T, D_MODEL, generator=_gen())
    hidden = torch.clamp(x @ ff.linear1.weight.T + ff.linear1.bias, min=0)  # max(0, x W_1 + b_1)
    assert torch.allclose(ff(x), hidden @ ff.linear2.weight.T + ff.linear2.bias, atol=1e-6)
    # the same two layers at every position: a token's output depends on that token only
    assert torch.allclose(ff(x)[:, 3], ff(x[:, 3]), atol=1e-6)


def test_feed_forward_dropout_after_the_relu_only_while_training():
    ff = _randomize(FeedForward(D_MODEL, D_FF, dropout=0.5))
    x = torch.randn(4, 8, D_MODEL, generator=_gen())
    ff.eval()
    assert torch.equal(ff(x), ff(x))
    ff.train()
    torch.manual_seed(0)
    got = ff(x)
    torch.manual_seed(0)
    hidden = F.dropout(F.relu(ff.linear1(x)), 0.5)  # the same draw, at the same place
    assert torch.allclose(got, ff.linear2(hidden), atol=1e-6)
    assert not torch.equal(ff(x), ff(x))


def test_feed_forward_errors():
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.0"):
        FeedForward(D_MODEL, D_FF, dropout=1.0)
    with pytest.raises(ValueError, match=r"FeedForward expects x of shape \(\.\.\., d_model=12\)"):
        FeedForward(D_MODEL, D_FF)(torch.zeros(B, T, D_FF))


# ---------------------------------------------------------- EncoderLayer ----------


def test_encoder_layer_contract():
    layer = EncoderLayer(D_MODEL, H, D_FF)
    assert isinstance(layer.self_attn, MultiHeadAttention) and layer.self_attn.n_heads == H
    assert isinstance(layer.ff, FeedForward)
    assert isinstance(layer.norm1, LayerNorm) and isinstance(layer.norm2, LayerNorm)
    assert layer.norm1 is not layer.norm2
    assert layer.norm_first is False
    assert layer.self_attn.dropout == 0.1 and layer.ff.dropout.p == 0.1
    assert layer.dropout1.p == layer.dropout2.p == 0.1
    x = torch.randn(B, T, D_MODEL, generator=_gen())
    assert layer(x).shape == (B, T, D_MODEL)
    assert layer(x, padding_mask(TOKENS, 0)).shape == (B, T, D_MODEL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_count_equals_torchs(norm_first):
    ours = EncoderLayer(D_MODEL, H, D_FF, norm_first=norm_first)
    theirs = nn.TransformerEncoderLayer(D_MODEL, H, D_FF, batch_first=True, norm_first=norm_first)
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in theirs.parameters())
    attention, feed_forward, norms = 4 * D_MODEL**2 + 4 * D_MODEL, 2 * D_MODEL * D_FF, 4 * D_MODEL
    assert count == attention + feed_forward + D_FF + D_MODEL + norms


def _torch_pair(norm_first: bool, dropout: float = 0.0, seed: int = 0, dtype=torch.float32):
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, H, D_FF, dropout=dropout, batch_first=True, norm_first=norm_first
    )
    theirs = _randomize(theirs, seed).to(dtype)
    return EncoderLayer.from_torch(theirs).to(dtype), theirs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torchs_outputs_and_gradients(norm_first, masked, dtype):
    """Training mode with dropout=0: torch's slow (reference) path, never the fast path,
    so every position, padded ones included, and every gradient is compared."""
    ours, theirs = _torch_pair(norm_first, dtype=dtype)
    ours.train(), theirs.train()
    mask = padding_mask(TOKENS, 0) if masked else None  # (B, 1, 1, T), True = real token
    kpm = to_torch_key_padding_mask(mask) if masked else None  # (B, T), True = padding
    x = torch.randn(B, T, D_MODEL, generator=_gen(3), dtype=dtype)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_ours = ours(x_ours, mask)
    out_theirs = theirs(x_theirs, src_key_padding_mask=kpm)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert torch.allclose(out_ours, out_theirs, atol=tol)
    projection = torch.randn(out_ours.shape, generator=_gen(4), dtype=dtype)
    (out_ours * projection).sum().backward()
    (out_theirs * projection).sum().backward()
    assert torch.allclose(x_ours.grad, x_theirs.grad, atol=tol * 10)
    attn = theirs.self_attn
    pairs = {
        "linear1.weight": (ours.ff.linear1.weight, theirs.linear1.weight),
        "linear2.bias": (ours.ff.linear2.bias, theirs.linear2.bias),
        "norm1.weight": (ours.norm1.weight, theirs.norm1.weight),
        "norm2.bias": (ours.norm2.bias, theirs.norm2.bias),
        "out_proj.weight": (ours.self_attn.w_o.weight, attn.out_proj.weight),
    }
    for name, (mine, torchs) in pairs.items():
        assert torch.allclose(mine.grad, torchs.grad, atol=tol * 10), name
    in_proj = torch.cat([ours.self_attn.w_q.weight.grad, ours.self_attn.w_k.weight.grad,
                         ours.self_attn.w_v.weight.grad])  # fmt: skip
    assert torch.allclose(in_proj, attn.in_proj_weight.grad, atol=tol * 10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_mask_changes_the_real_tokens_outputs(norm_first):
    ours, _ = _torch_pair(norm_first)
    ours.eval()
    x = torch.randn(B, T, D_MODEL, generator=_gen(3))
    with torch.no_grad():
        masked, unmasked = ours(x, padding_mask(TOKENS, 0)), ours(x)
    assert torch.allclose(masked[0], unmasked[0])  # sentence 0 has no padding
    assert not torch.allclose(masked[1, :3], unmasked[1, :3])  # sentence 1's real tokens
    # and a real token's output does not depend on what the pads hold
    garbage = x.clone()
    garbage[1, 3:] = 100.0
    with torch.no_grad():
        assert torch.allclose(ours(garbage, padding_mask(TOKENS, 0))[1, :3], masked[1, :3])


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torchs_fast_path_in_eval_mode(norm_first):
    """Eval mode without autograd: torch takes its fused fast path (an even number of
    heads, batch_first, ReLU). For one layer it gives every position, padded ones too."""
    ours, theirs = _torch_pair(norm_first, dropout=0.1)
    ours.eval(), theirs.eval()
    mask = padding_mask(TOKENS, 0)
    x = torch.randn(B, T, D_MODEL, generator=_gen(3))
    with torch.no_grad():
        fast = theirs(x, src_key_padding_mask=to_torch_key_padding_mask(mask))
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            slow = theirs(x, src_key_padding_mask=to_torch_key_padding_mask(mask))
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        got = ours(x, mask)
    assert torch.allclose(got, slow, atol=1e-5)
    assert torch.allclose(got, fast, atol=1e-5)


def test_a_stack_equals_torchs_encoder_at_real_positions():
    """nn.TransformerEncoder in eval mode packs a padded batch into a nested tensor and
    returns zeros at the padded positions; so only the real positions are compared."""
    ours, theirs = _torch_pair(norm_first=False)
    stack = nn.TransformerEncoder(theirs, num_layers=2, enable_nested_tensor=True).eval()
    layers = [EncoderLayer.from_torch(layer).eval() for layer in stack.layers]
    mask = padding_mask(TOKENS, 0)
    x = torch.randn(B, T, D_MODEL, generator=_gen(3))
    with torch.no_grad(), pytest.warns(UserWarning, match="nested tensors"):
        want = stack(x, src_key_padding_mask=to_torch_key_padding_mask(mask))
    got = x
    with torch.no_grad():
        for layer in layers:
            got = layer(got, mask)
    real = mask[:, 0, 0, :]  # (B, T)
    assert torch.allclose(got[real], want[real], atol=1e-5)
    padded = want[~real]
    assert torch.equal(padded, torch.zeros_like(padded)) or torch.allclose(padded, got[~real])


def test_dropout_only_while_training_and_nowhere_when_zero():
    layer = _randomize(EncoderLayer(D_MODEL, H, D_FF, dropout=0.3))
    x = torch.randn(B, T, D_MODEL, generator=_gen())
    layer.eval()
    assert torch.equal(layer(x), layer(x))
    layer.train()
    assert not torch.equal(layer(x), layer(x))
    calm = _randomize(EncoderLayer(D_MODEL, H, D_FF, dropout=0.0)).train()
    assert torch.equal(calm(x), calm.eval()(x))


def test_pre_ln_with_silent_sublayers_is_the_identity():
    """The residual stream of pre-LN: sublayers that write nothing leave x untouched;
    post-LN normalises x even then."""
    for norm_first, identity in [(True, True), (False, False)]:
        layer = _randomize(EncoderLayer(D_MODEL, H, D_FF, dropout=0.0, norm_first=norm_first))
        with torch.no_grad():
            for linear in (layer.self_attn.w_o, layer.ff.linear2):
                linear.weight.zero_()
                linear.bias.zero_()
        x = torch.randn(B, T, D_MODEL, generator=_gen()) * 3
        assert torch.allclose(layer.eval()(x), x) is identity


def test_encoder_layer_errors():
    with pytest.raises(ValueError, match=r"EncoderLayer expects x of shape \(\.\.\., d_model=12\)"):
        EncoderLayer(D_MODEL, H, D_FF)(torch.zeros(B, T, 8))
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got -0.1"):
        EncoderLayer(D_MODEL, H, D_FF, dropout=-0.1)
    with pytest.raises(ValueError, match="d_model=12, n_heads=5"):
        EncoderLayer(D_MODEL, 5, D_FF)


@pytest.mark.parametrize(
    "ours, torchs",
    [(EncoderLayer, nn.TransformerEncoderLayer), (DecoderLayer, nn.TransformerDecoderLayer)],
    ids=["encoder", "decoder"],
)
def test_from_torch_refuses_what_it_cannot_copy(ours, torchs):
    with pytest.raises(ValueError, match=f"expected a torch.nn.{torchs.__name__}, got Linear"):
        ours.from_torch(nn.Linear(2, 2))
    gelu = torchs(D_MODEL, H, D_FF, activation="gelu", batch_first=True)
    with pytest.raises(ValueError, match="ReLU"):
        ours.from_torch(gelu)
    with pytest.raises(ValueError, match="batch_first"):
        ours.from_torch(torchs(D_MODEL, H, D_FF))
    no_bias = torchs(D_MODEL, H, D_FF, batch_first=True, bias=False)
    with pytest.raises(ValueError, match="bias=True"):
        ours.from_torch(no_bias)


def test_from_torch_keeps_eps_and_dropout():
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, H, D_FF, dropout=0.2, layer_norm_eps=1e-3, batch_first=True, norm_first=True
    )
    ours = EncoderLayer.from_torch(theirs)
    assert ours.norm_first and ours.norm1.eps == ours.norm2.eps == 1e-3
    assert ours.self_attn.dropout == ours.ff.dropout.p == ours.dropout1.p == 0.2


def test_load_encoder_layer_fills_any_layer_with_our_names():
    """What the lesson does with the learner's own class: same names, torch's weights."""

    class Mine(EncoderLayer):  # another class; only the names matter
        pass

    _, theirs = _torch_pair(norm_first=True)
    ours = load_encoder_layer(Mine(D_MODEL, H, D_FF, 0.0, norm_first=True), theirs)
    x = torch.randn(B, T, D_MODEL, generator=_gen(3))
    mask = padding_mask(TOKENS, 0)
    with torch.no_grad():
        want = theirs.train()(x, src_key_padding_mask=to_torch_key_padding_mask(mask))
        assert torch.allclose(ours(x, mask), want, atol=1e-5)
    with pytest.raises(ValueError, match=r"shapes differ: ours \(16, 12\), torch's \(20, 12\)"):
        load_encoder_layer(EncoderLayer(D_MODEL, H, 16), theirs)
    with pytest.raises(ValueError, match="expected a torch.nn.TransformerEncoderLayer"):
        load_encoder_layer(ours, ours)
