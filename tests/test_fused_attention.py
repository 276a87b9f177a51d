"""The fused option (lesson 10, `make bench`): MultiHeadAttention(..., fused=True) and
Transformer(..., fused=True) run torch.nn.functional.scaled_dot_product_attention instead of
lesson 03's explicit attention, and compute the same thing: outputs and gradients with
every kind of mask (padding, causal, fully masked rows), a batch of one, eval mode, rotary
positions; dropout in training mode; a fused Transformer equals torch.nn.Transformer given
the same weights, as the explicit one does. The default (fused=False) is unchanged.
"""

import inspect

import pytest
import torch
from test_transformer import (
    N_LAYERS,
    SRC_VOCAB,
    TGT_VOCAB,
    _largest_gap,
    _torch_transformer,
)

from course.decoding import greedy_decode
from course.efficient import cached_greedy_decode
from course.layers import DecoderLayer, EncoderLayer
from course.masking import causal_mask
from course.multihead import MultiHeadAttention
from course.transformer import Transformer

pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")

D_MODEL, H = 16, 4
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def _pair(dtype=torch.float64, dropout=0.0, rotary_base=None, seed=0):
    """An explicit and a fused MultiHeadAttention with the same weights, in eval mode."""
    torch.manual_seed(seed)
    explicit = MultiHeadAttention(D_MODEL, H, dropout, rotary_base=rotary_base)
    fused = MultiHeadAttention(D_MODEL, H, dropout, rotary_base=rotary_base, fused=True)
    fused.load_state_dict(explicit.state_dict())
    return explicit.to(dtype).eval(), fused.to(dtype).eval()


def _masks(B: int, T_q: int, T_k: int) -> dict[str, torch.Tensor | None]:
    """Every mask shape the model uses, True = may attend."""
    lengths = torch.full((B,), T_k)  # (B,): every key real ...
    lengths[-1] = max(T_k - 3, 1)  # ... but the last sentence's, padded
    key_is_real = torch.arange(T_k)[None, :] < lengths[:, None]  # (B, T_k)
    fully = torch.ones(B, 1, T_q, T_k, dtype=torch.bool)
    fully[0, :, T_q // 2] = False  # a query of sentence 0 may attend to nothing
    fully[-1, :, -1] = False  # nor the last query of the last sentence
    masks = {
        "none": None,
        "padding (B, 1, 1, T_k)": key_is_real[:, None, None, :],
        "fully masked rows (B, 1, T_q, T_k)": fully,
    }
    if T_q == T_k:
        masks["causal (T, T)"] = causal_mask(T_q)
        masks["causal & padding (B, 1, T, T)"] = causal_mask(T_q) & key_is_real[:, None, None, :]
    return masks


def _run(module, query, key, value, mask, projection):
    """The output and the gradients of (output * projection).sum() w.r.t. the three inputs
    and every parameter."""
    inputs = [t.detach().clone().requires_grad_() for t in (query, key, value)]
    out = module(*inputs, mask)  # (B, T_q, d_model)
    params = list(module.parameters())
    grads = torch.autograd.grad((out * projection).sum(), inputs + params)
    return out.detach(), grads


CASES = [  # (B, T_q, T_k, self-attention)
    (3, 6, 6, True),
    (1, 5, 5, True),  # a batch of one
    (2, 4, 7, False),  # cross-attention: T_q != T_k
    (1, 1, 9, False),  # one query, as in decoding
]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("B, T_q, T_k, self_attention", CASES)
def test_fused_equals_explicit_outputs_and_gradients(B, T_q, T_k, self_attention, dtype):
    explicit, fused = _pair(dtype)
    gen = torch.Generator().manual_seed(1)
    query = torch.randn(B, T_q, D_MODEL, generator=gen, dtype=dtype)
    key = query if self_attention else torch.randn(B, T_k, D_MODEL, generator=gen, dtype=dtype)
    value = key if self_attention else torch.randn(B, T_k, D_MODEL, generator=gen, dtype=dtype)
    projection = torch.randn(B, T_q, D_MODEL, generator=gen, dtype=dtype)
    for name, mask in _masks(B, T_q, T_k).items():
        want, want_grads = _run(explicit, query, key, value, mask, projection)
        got, got_grads = _run(fused, query, key, value, mask, projection)
        assert got.dtype == dtype and got.shape == want.shape == (B, T_q, D_MODEL)
        assert (got - want).abs().max() < TOL[dtype], name
        for g, w in zip(got_grads, want_grads, strict=True):
            assert torch.isfinite(g).all(), name
            assert (g - w).abs().max() < TOL[dtype], name


def test_a_fully_masked_query_gives_a_zero_head_output_fused_too():
    """The row that may attend to nothing gets zero heads: its output is w_o's bias alone,
    with finite gradients, as the explicit path gives (PyTorch's kernel zeroes such rows)."""
    _, fused = _pair()
    x = torch.randn(2, 4, D_MODEL, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[1, :, 2] = False  # (B, 1, T, T): query 2 of sentence 1 sees nothing
    out = fused(x, x, x, mask)  # (B, T, d_model)
    assert torch.equal(out[1, 2].detach(), fused.w_o.bias.detach())
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


def test_fused_module_keeps_no_weights_and_the_default_does():
    explicit, fused = _pair()
    x = torch.randn(2, 3, D_MODEL, dtype=torch.float64)
    explicit(x, x, x), fused(x, x, x)
    assert explicit.attn.shape == (2, H, 3, 3)
    assert fused.attn is None
    assert explicit.fused is False and fused.fused is True


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_fused_dropout_in_training_mode_only_at_the_rate_asked(p):
    """Zero q and k projections make every weight 1 / T_k = 1 with one key; identity value
    and output projections make each head's output that one weight, after dropout: 0 (with
    probability p) or 1 / (1 - p). Two calls draw afresh; eval mode drops nothing."""
    _, fused = _pair(torch.float32, dropout=p)
    with torch.no_grad():
        for linear in (fused.w_q, fused.w_k):
            linear.weight.zero_(), linear.bias.zero_()
        for linear in (fused.w_v, fused.w_o):
            linear.weight.copy_(torch.eye(D_MODEL)), linear.bias.zero_()
    query = torch.randn(4, 1000, D_MODEL)  # (B, T_q, d_model): 4000 queries x 4 heads
    value = torch.ones(4, 1, D_MODEL)  # (B, T_k = 1, d_model)
    assert torch.equal(fused(query, value, value), torch.ones(4, 1000, D_MODEL))  # eval
    fused.train()
    torch.manual_seed(0)
    first, second = fused(query, value, value), fused(query, value, value)
    heads = first.reshape(4, 1000, H, D_MODEL // H)[..., 0]  # (B, T_q, h): one value a head
    kept = heads != 0
    assert torch.allclose(heads[kept], torch.tensor(1 / (1 - p)))
    assert abs((~kept).float().mean().item() - p) < 0.03  # 16000 draws: 0.03 is > 8 sigma
    assert not torch.equal(first, second)  # fresh randomness every call


def test_fused_rotary_self_attention_equals_explicit():
    explicit, fused = _pair(rotary_base=10000.0)
    x = torch.randn(2, 6, D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    projection = torch.randn(2, 6, D_MODEL, dtype=torch.float64)
    for mask in (None, causal_mask(6)):
        want, want_grads = _run(explicit, x, x, x, mask, projection)
        got, got_grads = _run(fused, x, x, x, mask, projection)
        assert (got - want).abs().max() < 1e-12
        assert all((g - w).abs().max() < 1e-12 for g, w in zip(got_grads, want_grads, strict=True))


# --------------------------------------------------------- the layers and the model ----


def test_layers_pass_fused_to_every_attention():
    encoder = EncoderLayer(D_MODEL, H, 32, fused=True)
    decoder = DecoderLayer(D_MODEL, H, 32, fused=True)
    assert encoder.self_attn.fused and decoder.self_attn.fused and decoder.cross_attn.fused
    assert not EncoderLayer(D_MODEL, H, 32).self_attn.fused


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_fused_transformer_equals_torchs_nn_transformer(norm_first, tied, dtype):
    """As test_transformer's test of the explicit model: padded source and target, logits
    and gradients, with the fused model given the same weights."""
    explicit, wrapped = _torch_transformer(norm_first, tied, dtype)
    fused = Transformer(
        explicit.src_vocab, explicit.tgt_vocab, explicit.d_model,
        explicit.encoder_layers[0].self_attn.n_heads, N_LAYERS,
        explicit.encoder_layers[0].ff.linear1.out_features, dropout=0.0, norm_first=norm_first,
        pad_id=explicit.pad_id, tie_embeddings=tied, fused=True,
    ).to(dtype)  # fmt: skip
    fused.load_state_dict(explicit.state_dict())
    logits_gap, gradient_gap = _largest_gap(fused, wrapped, dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert logits_gap < tol and gradient_gap < tol * 10


def _model_pair(**kwargs):
    torch.manual_seed(0)
    explicit = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 2, 32, **kwargs)
    torch.manual_seed(0)
    fused = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 2, 32, **kwargs, fused=True)
    return explicit.double(), fused.double()


SRC = torch.tensor([[2, 7, 1, 8, 2, 8, 1], [8, 2, 8, 4, 0, 0, 0]])  # sentence 1 padded
TGT = torch.tensor([[1, 3, 4, 1, 5], [1, 9, 2, 0, 0]])


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_fused_transformer_equals_explicit_in_eval_and_training_mode(positions):
    """Same seed, same weights (fused adds no parameter, draws nothing at construction)."""
    explicit, fused = _model_pair(positions=positions, dropout=0.1)
    for name, a in explicit.state_dict().items():
        assert torch.equal(a, fused.state_dict()[name]), name
    explicit.eval(), fused.eval()
    want, got = explicit(SRC, TGT), fused(SRC, TGT)
    assert (got - want).abs().max() < 1e-12
    explicit.train(), fused.train()  # dropout: the two differ, and the fused one draws afresh
    first, second = fused(SRC, TGT), fused(SRC, TGT)
    assert torch.isfinite(first).all() and not torch.equal(first, second)


def test_fused_transformer_keeps_no_attention_weights():
    explicit, fused = _model_pair()
    explicit.eval(), fused.eval()
    explicit(SRC, TGT), fused(SRC, TGT)
    assert explicit.decoder_layers[0].cross_attn.attn.shape == (2, H, 5, 7)
    assert all(layer.cross_attn.attn is None for layer in fused.decoder_layers)
    assert "fused=True" in repr(fused) and "fused" not in repr(explicit)


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_fused_model_decodes_as_the_explicit_one_cached_or_not(positions):
    explicit, fused = _model_pair(positions=positions)
    explicit.eval(), fused.eval()
    want = greedy_decode(explicit, SRC, 6, 1, 2)
    assert torch.equal(greedy_decode(fused, SRC, 6, 1, 2), want)
    assert torch.equal(cached_greedy_decode(fused, SRC, 6, 1, 2), want)


def test_fused_is_keyword_only_and_off_by_default():
    """No positional parameter moved: lessons and checkers call these positionally."""
    for cls in (MultiHeadAttention, EncoderLayer, DecoderLayer, Transformer):
        parameter = inspect.signature(cls).parameters["fused"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default is False
    assert not Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, 32).fused
    names = list(inspect.signature(Transformer).parameters)
    assert names[: names.index("positions") + 1] == [
        "src_vocab", "tgt_vocab", "d_model", "n_heads", "n_layers", "d_ff", "dropout",
        "norm_first", "max_len", "pad_id", "tie_embeddings", "positions",
    ]  # fmt: skip


def test_fused_bad_input_is_a_clear_value_error():
    with pytest.raises(ValueError, match="fused must be True or False, got 1"):
        MultiHeadAttention(D_MODEL, H, fused=1)
    with pytest.raises(ValueError, match="fused must be True or False, got 'yes'"):
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, 32, fused="yes")
    _, fused = _pair()
    x = torch.randn(2, 3, D_MODEL, dtype=torch.float64)
    # a float mask would be added to the scores by PyTorch, not read as True = may attend
    with pytest.raises(ValueError, match="mask must be a bool tensor .* got torch.float64"):
        fused(x, x, x, torch.ones(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 4\) does not broadcast .*3, 3\)"):
        fused(x, x, x, causal_mask(4))
    with pytest.raises(ValueError, match="query must have shape"):
        fused(x[0], x, x)
