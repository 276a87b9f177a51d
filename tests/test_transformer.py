"""course.layers.DecoderLayer equals torch.nn.TransformerDecoderLayer (post-LN and
norm_first=True, batch_first) given the same weights, with causal and padding masks,
outputs and gradients; course.transformer.Transformer equals a torch.nn.Transformer
assembled with the same sizes, embeddings and weights; the paper's base and big models
have the parameter counts their architecture implies; bad input is a clear ValueError.

torch's masks mean the opposite of ours (True = masked out) and come as separate
attn_mask and key_padding_mask arguments: course.masking's converters translate.
"""

import math

import pytest
import torch
from _layer_helpers import _gen, _randomize
from torch import nn

from course.layers import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    load_decoder_layer,
)
from course.masking import (
    causal_mask,
    decoder_mask,
    padding_mask,
    to_torch_attn_mask,
    to_torch_key_padding_mask,
)
from course.multihead import MultiHeadAttention
from course.positional import PositionalEncoding, TokenEmbedding, sinusoidal_encoding
from course.transformer import (
    PAPER_BASE,
    PAPER_BIG,
    PAPER_VOCAB,
    Transformer,
    parameter_counts,
)

# nn.Transformer builds its encoder with enable_nested_tensor=True, and warns for pre-LN
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")

B, T_TGT, T_SRC, D_MODEL, H, D_FF = 2, 5, 7, 12, 2, 20  # every size differs
PAD = 0
# target: sentence 0 has 5 real tokens, sentence 1 has 3 then 2 pads
TGT = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]])
# source: sentence 0 has 7 real tokens, sentence 1 has 4 then 3 pads
SRC = torch.tensor([[2, 7, 1, 8, 2, 8, 1], [8, 2, 8, 4, 0, 0, 0]])


# ----------------------------------------------------------- DecoderLayer ----------


def test_decoder_layer_contract():
    layer = DecoderLayer(D_MODEL, H, D_FF)
    for name in ("self_attn", "cross_attn"):
        attn = getattr(layer, name)
        assert isinstance(attn, MultiHeadAttention) and attn.n_heads == H and attn.dropout == 0.1
    assert layer.self_attn is not layer.cross_attn
    assert isinstance(layer.ff, FeedForward) and layer.ff.dropout.p == 0.1
    norms = [layer.norm1, layer.norm2, layer.norm3]
    assert all(isinstance(n, LayerNorm) for n in norms) and len({id(n) for n in norms}) == 3
    assert layer.dropout1.p == layer.dropout2.p == layer.dropout3.p == 0.1
    assert layer.norm_first is False
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen())
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(1))
    assert layer(x, memory).shape == (B, T_TGT, D_MODEL)
    out = layer(x, memory, decoder_mask(TGT, PAD), padding_mask(SRC, PAD))
    assert out.shape == (B, T_TGT, D_MODEL)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_parameter_count_equals_torchs(norm_first):
    ours = DecoderLayer(D_MODEL, H, D_FF, norm_first=norm_first)
    theirs = nn.TransformerDecoderLayer(D_MODEL, H, D_FF, batch_first=True, norm_first=norm_first)
    count = sum(p.numel() for p in ours.parameters())
    assert count == sum(p.numel() for p in theirs.parameters())
    attention = 4 * D_MODEL**2 + 4 * D_MODEL
    feed_forward = 2 * D_MODEL * D_FF + D_FF + D_MODEL
    assert count == 2 * attention + feed_forward + 3 * 2 * D_MODEL


def _decoder_pair(norm_first: bool, dropout: float = 0.0, seed: int = 0, dtype=torch.float32):
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, H, D_FF, dropout=dropout, batch_first=True, norm_first=norm_first
    )
    theirs = _randomize(theirs, seed).to(dtype)
    return DecoderLayer.from_torch(theirs).to(dtype), theirs


def _torch_masks(masked: bool):
    """Ours (True = may attend) and torch's (True = masked out) for the same batch."""
    if not masked:
        return {}, {}
    ours = {"tgt_mask": decoder_mask(TGT, PAD), "memory_mask": padding_mask(SRC, PAD)}
    theirs = {
        "tgt_mask": to_torch_attn_mask(causal_mask(T_TGT)),  # (T, T)
        "tgt_key_padding_mask": to_torch_key_padding_mask(padding_mask(TGT, PAD)),  # (B, T)
        "memory_key_padding_mask": to_torch_key_padding_mask(padding_mask(SRC, PAD)),
    }
    return ours, theirs


def _largest_gradient_gap(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> float:
    """The largest |difference| between the two layers' parameter gradients."""
    pairs = [
        (ours.ff.linear1, theirs.linear1),
        (ours.ff.linear2, theirs.linear2),
        (ours.norm1, theirs.norm1),
        (ours.norm2, theirs.norm2),
        (ours.norm3, theirs.norm3),
        (ours.self_attn.w_o, theirs.self_attn.out_proj),
        (ours.cross_attn.w_o, theirs.multihead_attn.out_proj),
    ]
    gaps = []
    for mine, torchs in pairs:
        gaps += [(mine.weight.grad - torchs.weight.grad).abs().max()]
        gaps += [(mine.bias.grad - torchs.bias.grad).abs().max()]
    attentions = [(ours.self_attn, theirs.self_attn), (ours.cross_attn, theirs.multihead_attn)]
    for mine, torchs in attentions:
        in_proj = torch.cat([mine.w_q.weight.grad, mine.w_k.weight.grad, mine.w_v.weight.grad])
        in_bias = torch.cat([mine.w_q.bias.grad, mine.w_k.bias.grad, mine.w_v.bias.grad])
        gaps += [(in_proj - torchs.in_proj_weight.grad).abs().max()]
        gaps += [(in_bias - torchs.in_proj_bias.grad).abs().max()]
    return float(max(gaps))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torchs_outputs_and_gradients(norm_first, masked, dtype):
    """Training mode with dropout=0: torch's plain code path; every position, padded ones
    included, every parameter's gradient, and the gradients of x and of memory."""
    ours, theirs = _decoder_pair(norm_first, dtype=dtype)
    ours.train(), theirs.train()
    our_masks, their_masks = _torch_masks(masked)
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen(3), dtype=dtype)
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(4), dtype=dtype)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    m_ours, m_theirs = memory.clone().requires_grad_(), memory.clone().requires_grad_()
    out_ours = ours(x_ours, m_ours, **our_masks)
    out_theirs = theirs(x_theirs, m_theirs, **their_masks)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert out_ours.dtype == dtype
    assert torch.allclose(out_ours, out_theirs, atol=tol)
    projection = torch.randn(out_ours.shape, generator=_gen(5), dtype=dtype)
    (out_ours * projection).sum().backward()
    (out_theirs * projection).sum().backward()
    assert torch.allclose(x_ours.grad, x_theirs.grad, atol=tol * 10)
    assert torch.allclose(m_ours.grad, m_theirs.grad, atol=tol * 10)
    assert m_ours.grad.abs().max() > 0.01  # the memory's gradient is there, not zero
    assert _largest_gradient_gap(ours, theirs) < tol * 10


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_decoder_masks_do_what_they_say(norm_first):
    """Causal: position t's output does not depend on the target after t. Padding: a real
    position's output depends neither on padded targets nor on padded source positions."""
    ours, _ = _decoder_pair(norm_first)
    ours.eval()
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen(3))
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(4))
    masks = {"tgt_mask": decoder_mask(TGT, PAD), "memory_mask": padding_mask(SRC, PAD)}
    changed_x, changed_memory = x.clone(), memory.clone()
    changed_x[:, 3:] = 50.0  # the future of positions 0..2 (and sentence 1's pads)
    changed_memory[1, 4:] = 50.0  # sentence 1's padded source positions
    with torch.no_grad():
        out = ours(x, memory, **masks)
        assert torch.allclose(ours(changed_x, memory, **masks)[:, :3], out[:, :3], atol=1e-6)
        assert torch.allclose(ours(x, changed_memory, **masks), out, atol=1e-6)
        # without the masks the same changes do change the outputs
        assert not torch.allclose(ours(changed_x, memory)[:, :3], ours(x, memory)[:, :3])
        assert not torch.allclose(ours(x, changed_memory)[1], ours(x, memory)[1])


def test_pre_ln_does_not_normalise_memory():
    """torch's pre-LN decoder layer feeds memory to the cross-attention as it is: adding a
    constant to memory changes the output (a LayerNorm on memory would remove it)."""
    ours, _ = _decoder_pair(norm_first=True)
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen(3))
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(4))
    with torch.no_grad():
        assert not torch.allclose(ours.eval()(x, memory), ours(x, memory + 3.0), atol=1e-3)


def test_decoder_dropout_only_while_training_and_nowhere_when_zero():
    layer = _randomize(DecoderLayer(D_MODEL, H, D_FF, dropout=0.3))
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen())
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(1))
    layer.eval()
    assert torch.equal(layer(x, memory), layer(x, memory))
    layer.train()
    assert not torch.equal(layer(x, memory), layer(x, memory))
    calm = _randomize(DecoderLayer(D_MODEL, H, D_FF, dropout=0.0)).train()
    assert torch.equal(calm(x, memory), calm.eval()(x, memory))


def test_decoder_layer_errors():
    layer = DecoderLayer(D_MODEL, H, D_FF)
    x, memory = torch.zeros(B, T_TGT, D_MODEL), torch.zeros(B, T_SRC, D_MODEL)
    with pytest.raises(ValueError, match=r"x of shape \(B, T, d_model=12\), got \(2, 5, 8\)"):
        layer(torch.zeros(B, T_TGT, 8), memory)
    with pytest.raises(ValueError, match=r"expects memory of shape \(B, T, d_model=12\), got list"):
        layer(x, [1.0])
    with pytest.raises(ValueError, match="x has B=2 sentences, memory B=3"):
        layer(x, torch.zeros(3, T_SRC, D_MODEL))
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.5"):
        DecoderLayer(D_MODEL, H, D_FF, dropout=1.5)
    with pytest.raises(ValueError, match="d_model=12, n_heads=5"):
        DecoderLayer(D_MODEL, 5, D_FF)


# DecoderLayer.from_torch refuses what it cannot copy: tests/test_layers.py, with the encoder's.


def test_decoder_from_torch_keeps_eps_dropout_and_norm_first():
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, H, D_FF, dropout=0.2, layer_norm_eps=1e-3, batch_first=True, norm_first=True
    )
    ours = DecoderLayer.from_torch(theirs)
    assert ours.norm_first
    assert ours.norm1.eps == ours.norm2.eps == ours.norm3.eps == 1e-3
    assert ours.self_attn.dropout == ours.cross_attn.dropout == ours.ff.dropout.p == 0.2
    assert ours.dropout1.p == ours.dropout2.p == ours.dropout3.p == 0.2


def test_load_decoder_layer_fills_any_layer_with_our_names():
    """What the lesson does with the learner's own class: same names, torch's weights."""

    class Mine(DecoderLayer):  # another class; only the names matter
        pass

    _, theirs = _decoder_pair(norm_first=False)
    ours = load_decoder_layer(Mine(D_MODEL, H, D_FF, 0.0), theirs)
    x = torch.randn(B, T_TGT, D_MODEL, generator=_gen(3))
    memory = torch.randn(B, T_SRC, D_MODEL, generator=_gen(4))
    our_masks, their_masks = _torch_masks(True)
    with torch.no_grad():
        want = theirs.train()(x, memory, **their_masks)
        assert torch.allclose(ours(x, memory, **our_masks), want, atol=1e-5)
    with pytest.raises(ValueError, match=r"shapes differ: ours \(16, 12\), torch's \(20, 12\)"):
        load_decoder_layer(DecoderLayer(D_MODEL, H, 16), theirs)
    with pytest.raises(ValueError, match="expected a torch.nn.TransformerDecoderLayer"):
        load_decoder_layer(ours, ours)
    assert math.isclose(ours.norm3.eps, theirs.norm3.eps)


# ------------------------------------------------------------ Transformer ----------

SRC_VOCAB, TGT_VOCAB, N_LAYERS = 11, 13, 2


class TorchSeq2Seq(nn.Module):
    """torch.nn.Transformer wrapped the paper's way: embeddings * sqrt(d_model) + the
    sinusoidal table (torch has no positional encoding of its own), the layers, a linear
    output layer. Masks in torch's convention (True = masked out)."""

    def __init__(self, theirs, src_embedding, tgt_embedding, out, max_len=64):
        super().__init__()
        self.theirs, self.out = theirs, out
        self.src_embedding, self.tgt_embedding = src_embedding, tgt_embedding
        self.register_buffer("pe", sinusoidal_encoding(max_len, src_embedding.embedding_dim))

    def embed(self, embedding, tokens):
        d_model = embedding.embedding_dim
        return embedding(tokens) * math.sqrt(d_model) + self.pe[: tokens.shape[1]].to(
            embedding.weight.dtype
        )

    def forward(self, src, tgt):
        hidden = self.theirs(
            self.embed(self.src_embedding, src),
            self.embed(self.tgt_embedding, tgt),
            tgt_mask=to_torch_attn_mask(causal_mask(tgt.shape[1])),  # (T_tgt, T_tgt)
            src_key_padding_mask=src == PAD,  # (B, T_src), True = padding
            tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD,
        )
        return self.out(hidden)  # (B, T_tgt, tgt_vocab)


def _torch_transformer(norm_first: bool, tied: bool, dtype=torch.float32, seed: int = 0):
    """An nn.Transformer (final norms only for pre-LN, as ours), embeddings and output
    layer, all random, and our Transformer loaded from them."""
    vocab = (SRC_VOCAB, SRC_VOCAB) if tied else (SRC_VOCAB, TGT_VOCAB)
    theirs = nn.Transformer(
        D_MODEL, H, N_LAYERS, N_LAYERS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    if not norm_first:  # the paper's post-LN has no final norms; torch adds them always
        theirs.encoder.norm = theirs.decoder.norm = None
    src_embedding, out = nn.Embedding(vocab[0], D_MODEL), nn.Linear(D_MODEL, vocab[1])
    if tied:
        tgt_embedding = src_embedding
        out.weight = src_embedding.weight
    else:
        tgt_embedding = nn.Embedding(vocab[1], D_MODEL)
    wrapped = _randomize(TorchSeq2Seq(theirs, src_embedding, tgt_embedding, out), seed).to(dtype)
    ours = Transformer.from_torch(theirs, src_embedding, tgt_embedding, out, pad_id=PAD)
    return ours.to(dtype), wrapped


def _largest_gap(ours: Transformer, wrapped: TorchSeq2Seq, dtype) -> tuple[float, float]:
    """(largest |logit difference|, largest |gradient difference| over every parameter)."""
    ours.train(), wrapped.train()  # dropout is 0: training mode is torch's plain code path
    src, tgt = SRC, TGT.clamp(max=SRC_VOCAB - 1)
    got, want = ours(src, tgt), wrapped(src, tgt)
    assert got.shape == want.shape == (B, T_TGT, wrapped.out.out_features)
    assert got.dtype == dtype
    projection = torch.randn(got.shape, generator=_gen(6), dtype=dtype)
    (got * projection).sum().backward()
    (want * projection).sum().backward()
    gaps = [
        ours.src_embed.embedding.weight.grad - wrapped.src_embedding.weight.grad,
        ours.tgt_embed.embedding.weight.grad - wrapped.tgt_embedding.weight.grad,
        ours.out.weight.grad - wrapped.out.weight.grad,
        ours.out.bias.grad - wrapped.out.bias.grad,
    ]
    for mine, torchs in zip(ours.encoder_layers, wrapped.theirs.encoder.layers, strict=True):
        in_proj = torch.cat([mine.self_attn.w_q.weight.grad, mine.self_attn.w_k.weight.grad,
                             mine.self_attn.w_v.weight.grad])  # fmt: skip
        gaps += [in_proj - torchs.self_attn.in_proj_weight.grad]
        gaps += [mine.ff.linear1.weight.grad - torchs.linear1.weight.grad]
        gaps += [mine.norm2.weight.grad - torchs.norm2.weight.grad]
    for mine, torchs in zip(ours.decoder_layers, wrapped.theirs.decoder.layers, strict=True):
        gaps += [mine.cross_attn.w_o.weight.grad - torchs.multihead_attn.out_proj.weight.grad]
        gaps += [mine.norm3.bias.grad - torchs.norm3.bias.grad]
    if ours.encoder_norm is not None:
        gaps += [ours.encoder_norm.weight.grad - wrapped.theirs.encoder.norm.weight.grad]
        gaps += [ours.decoder_norm.bias.grad - wrapped.theirs.decoder.norm.bias.grad]
    logits_gap = float((got - want).detach().abs().max())
    return logits_gap, float(max(g.abs().max() for g in gaps))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_equals_torchs_nn_transformer(norm_first, tied, dtype):
    """Padded source and target; logits at every position and every gradient."""
    ours, wrapped = _torch_transformer(norm_first, tied, dtype)
    logits_gap, gradient_gap = _largest_gap(ours, wrapped, dtype)
    tol = 1e-5 if dtype == torch.float32 else 1e-12  # measured: 6e-7 and 2e-15
    assert logits_gap < tol and gradient_gap < tol * 10


def test_torchs_default_final_norms_are_refused_for_post_ln():
    theirs = nn.Transformer(D_MODEL, H, N_LAYERS, N_LAYERS, D_FF, batch_first=True)
    embedding = nn.Embedding(SRC_VOCAB, D_MODEL)
    with pytest.raises(
        ValueError, match="theirs.encoder.norm is a LayerNorm with norm_first=False"
    ):
        Transformer.from_torch(theirs, embedding, embedding, nn.Linear(D_MODEL, SRC_VOCAB))
    pre = nn.Transformer(D_MODEL, H, N_LAYERS, N_LAYERS, D_FF, batch_first=True, norm_first=True)
    pre.decoder.norm = None
    with pytest.raises(ValueError, match="theirs.decoder.norm is None with norm_first=True"):
        Transformer.from_torch(pre, embedding, embedding, nn.Linear(D_MODEL, SRC_VOCAB))
    uneven = nn.Transformer(D_MODEL, H, 2, 3, D_FF, batch_first=True)
    with pytest.raises(ValueError, match="2 encoder and 3 decoder layers"):
        Transformer.from_torch(uneven, embedding, embedding, nn.Linear(D_MODEL, SRC_VOCAB))
    with pytest.raises(ValueError, match="expected a torch.nn.Transformer, got Linear"):
        Transformer.from_torch(nn.Linear(2, 2), embedding, embedding, nn.Linear(2, 2))


def test_from_torch_ties_all_three_or_none():
    theirs = nn.Transformer(D_MODEL, H, 1, 1, D_FF, batch_first=True, norm_first=True)
    src, tgt = nn.Embedding(SRC_VOCAB, D_MODEL), nn.Embedding(SRC_VOCAB, D_MODEL)
    out = nn.Linear(D_MODEL, SRC_VOCAB)
    out.weight = tgt.weight  # target and output tied, source not
    with pytest.raises(ValueError, match="some but not all"):
        Transformer.from_torch(theirs, src, tgt, out)
    with pytest.raises(ValueError, match=r"shapes differ: ours \(13, 12\), given \(11, 12\)"):
        Transformer.from_torch(
            theirs, src, nn.Embedding(TGT_VOCAB, D_MODEL), nn.Linear(D_MODEL, SRC_VOCAB)
        )


def test_decode_step_by_step_equals_one_teacher_forced_pass():
    """The causal mask at work: the logits at position t from the full target equal the
    last logits of decode on the prefix tgt[:, :t+1], what a greedy decoder computes."""
    model = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, N_LAYERS, D_FF, dropout=0.0).eval()
    src, tgt = SRC, TGT
    src_mask = padding_mask(src, PAD)
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        full = model.decode(tgt, memory, src_mask)  # (B, T_tgt, tgt_vocab)
        assert torch.allclose(full, model(src, tgt), atol=1e-6)
        for t in range(T_TGT):
            step = model.decode(tgt[:, : t + 1], memory, src_mask)[:, -1]  # (B, tgt_vocab)
            real = tgt[:, t] != PAD  # a pad's own logits may see other pads: not compared
            assert torch.allclose(step[real], full[real, t], atol=1e-5)


def test_transformer_attributes_and_defaults():
    model = Transformer(SRC_VOCAB, TGT_VOCAB)
    assert model.d_model == 512 and len(model.encoder_layers) == len(model.decoder_layers) == 6
    assert isinstance(model.src_embed, TokenEmbedding) and isinstance(model.pos, PositionalEncoding)
    assert model.pos.max_len == 5000 and model.pos.dropout.p == 0.1
    layer = model.encoder_layers[0]
    assert isinstance(layer, EncoderLayer) and layer.self_attn.n_heads == 8
    assert layer.ff.linear1.out_features == 2048 and layer.norm_first is False
    assert isinstance(model.decoder_layers[0], DecoderLayer)
    assert model.encoder_norm is None and model.decoder_norm is None  # post-LN: none
    assert isinstance(model.out, nn.Linear) and model.out.out_features == TGT_VOCAB
    assert model.src_embed.embedding.weight is not model.tgt_embed.embedding.weight
    pre = Transformer(SRC_VOCAB, TGT_VOCAB, 16, 2, 1, 32, norm_first=True)
    assert isinstance(pre.encoder_norm, LayerNorm) and isinstance(pre.decoder_norm, LayerNorm)
    assert "tie_embeddings=False" in repr(pre)


def test_tied_weights_are_one_parameter():
    model = Transformer(SRC_VOCAB, SRC_VOCAB, D_MODEL, H, 1, D_FF, tie_embeddings=True)
    shared = model.src_embed.embedding.weight
    assert model.tgt_embed.embedding.weight is shared and model.out.weight is shared
    assert sum(p is shared for p in model.parameters()) == 1
    untied = Transformer(SRC_VOCAB, SRC_VOCAB, D_MODEL, H, 1, D_FF)
    count = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for p in untied.parameters()) == count + 2 * SRC_VOCAB * D_MODEL
    # all three uses send their gradient to the one matrix
    model(SRC, TGT).sum().backward()
    alone = model.out.weight.grad.clone()
    assert not torch.allclose(alone, torch.zeros_like(alone))
    with torch.no_grad():
        model.out.weight.add_(1.0)
    assert torch.equal(model.src_embed.embedding.weight, model.out.weight)


def _formula(d_model, n_heads, n_layers, d_ff, vocab, tied=True, norm_first=False):
    """What the architecture implies, written out: per layer attention 4 d^2 + 4 d,
    feed-forward 2 d d_ff + d_ff + d, a LayerNorm 2 d."""
    attention, ff, norm = (
        4 * d_model**2 + 4 * d_model,
        2 * d_model * d_ff + d_ff + d_model,
        2 * d_model,
    )
    encoder = n_layers * (attention + ff + 2 * norm)
    decoder = n_layers * (2 * attention + ff + 3 * norm)
    embeddings = vocab * d_model * (1 if tied else 3)  # source, target, output matrices
    return encoder + decoder + embeddings + vocab + (2 * norm if norm_first else 0)


@pytest.mark.parametrize("config, expected", [(PAPER_BASE, 63_119_496), (PAPER_BIG, 214_282_376)])
def test_the_papers_base_and_big_parameter_counts(config, expected):
    """Built on the meta device (shapes only, no memory): the paper reports 65M and 213M."""
    with torch.device("meta"):
        model = Transformer(PAPER_VOCAB, PAPER_VOCAB, **config, tie_embeddings=True)
    counts = parameter_counts(model)
    total = sum(p.numel() for p in model.parameters())
    assert sum(counts.values()) == total == expected
    sizes = {k: config[k] for k in ("d_model", "n_heads", "n_layers", "d_ff")}
    assert total == _formula(**sizes, vocab=PAPER_VOCAB)
    d = config["d_model"]
    assert counts["source embedding"] == PAPER_VOCAB * d and counts["target embedding"] == 0
    assert counts["output projection"] == PAPER_VOCAB  # its bias: the matrix is the embedding
    assert counts["decoder cross-attention"] == counts["encoder self-attention"]
    with torch.device("meta"):
        untied = Transformer(PAPER_VOCAB, PAPER_VOCAB, **config, norm_first=True)
    assert sum(parameter_counts(untied).values()) == _formula(
        **sizes, vocab=PAPER_VOCAB, tied=False, norm_first=True
    )


def test_a_small_model_is_counted_the_same_way_on_a_real_device():
    model = Transformer(SRC_VOCAB, SRC_VOCAB, D_MODEL, H, N_LAYERS, D_FF, tie_embeddings=True)
    assert sum(p.numel() for p in model.parameters()) == _formula(
        D_MODEL, H, N_LAYERS, D_FF, SRC_VOCAB
    )
    assert sum(parameter_counts(model).values()) == sum(p.numel() for p in model.parameters())


def test_matrices_start_xavier_uniform():
    torch.manual_seed(0)
    model = Transformer(SRC_VOCAB, TGT_VOCAB, 64, 4, 1, 128)
    for name, p in model.named_parameters():
        p = p.detach()
        if p.dim() > 1:
            fan_out, fan_in = p.shape
            bound = math.sqrt(6 / (fan_in + fan_out))
            assert float(p.abs().max()) <= bound, name
            assert float(p.abs().max()) > 0.9 * bound, name  # uniform up to the bound
    assert torch.equal(model.decoder_layers[0].norm3.weight, torch.ones(64))


def test_transformer_bad_input_is_a_clear_value_error():
    model = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, max_len=6)
    src, tgt = SRC[:, :6], TGT
    with pytest.raises(ValueError, match=r"src holds token ids from 1 to 11, but its vocabulary "
                                         r"has 11 tokens, ids 0 \.\. 10"):  # fmt: skip
        model(torch.tensor([[1, 11]]), tgt[:1])
    with pytest.raises(ValueError, match="tgt holds token ids from -1 to 5"):
        model(src, torch.tensor([[5, -1], [1, 2]]))
    with pytest.raises(ValueError, match="src has T=7 positions, longer than max_len=6"):
        model(SRC, tgt)
    with pytest.raises(ValueError, match="tgt has T=7 positions, longer than max_len=6"):
        model.decode(torch.ones(B, 7, dtype=torch.long), torch.zeros(B, 3, D_MODEL))
    with pytest.raises(ValueError, match="src has B=2, tgt B=1"):
        model(src, tgt[:1])
    with pytest.raises(ValueError, match="tgt has B=2 sentences, memory B=1"):
        model.decode(tgt, torch.zeros(1, 3, D_MODEL))
    with pytest.raises(ValueError, match=r"memory must be the encoder's output \(B, T_src, "):
        model.decode(tgt, torch.zeros(B, 3, 8))
    with pytest.raises(ValueError, match="src must be a .* integer tensor .* got a torch.float32"):
        model.encode(torch.zeros(B, 3))
    with pytest.raises(ValueError, match="needs one vocabulary: src_vocab == tgt_vocab; got "
                                         "src_vocab=11, tgt_vocab=13"):  # fmt: skip
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, tie_embeddings=True)
    with pytest.raises(
        ValueError, match=r"pad_id must be a token id of both vocabularies, 0 \.\. 10"
    ):
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, pad_id=12)
    with pytest.raises(ValueError, match="n_layers must be a positive int, got 0"):
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 0, D_FF)


# ------------------------------------------------ rotary positions (positions="rotary") --


def _attention(rotary_base: float | None) -> MultiHeadAttention:
    """The same weights every call (float64, eval): with or without rotary positions."""
    torch.manual_seed(0)
    return MultiHeadAttention(D_MODEL, H, rotary_base=rotary_base).double().eval()


@pytest.mark.parametrize("causal", [False, True])
def test_rotary_self_attention_sees_offsets_only(causal):
    """Shift a sentence `shift` positions on, behind rows it may not see: with rotary
    positions the score of query m + shift and key n + shift is that of m and n, so the
    sentence's outputs do not move. Absolute positions (or a rotation of q alone) would."""
    attn = _attention(10000.0)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(B, T_SRC, D_MODEL, generator=gen, dtype=torch.float64)  # (B, T, d_model)
    mask = causal_mask(T_SRC) if causal else None
    with torch.no_grad():
        expected = attn(x, x, x, mask)  # (B, T, d_model), positions 0 .. T-1
        for shift in (1, 3, 40):
            front = torch.randn(B, shift, D_MODEL, generator=gen, dtype=torch.float64)
            shifted = torch.cat([front, x], dim=1)  # (B, shift + T, d_model)
            mask = torch.arange(shift + T_SRC) >= shift  # (shift + T,): the keys of x only
            if causal:
                mask = mask & causal_mask(shift + T_SRC)  # (shift + T, shift + T)
            got = attn(shifted, shifted, shifted, mask)[:, shift:]  # x at shift .. shift + T-1
            assert torch.allclose(got, expected, atol=1e-10), shift


def test_rotary_self_attention_knows_the_order():
    """Swap two words: plain attention only swaps their outputs (it is order-blind), with
    rotary positions every other word's output changes too."""
    plain, rotary = _attention(None), _attention(10000.0)  # the same weights
    x = torch.randn(1, 5, D_MODEL, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    swapped = x[:, [0, 1, 3, 2, 4]]  # words 2 and 3 change places
    with torch.no_grad():
        assert torch.allclose(plain(swapped, swapped, swapped)[:, 0], plain(x, x, x)[:, 0])
        assert not torch.allclose(rotary(swapped, swapped, swapped)[:, 0], rotary(x, x, x)[:, 0])
        assert torch.allclose(rotary.w_q(x), plain.w_q(x))  # only the rotation differs


def test_rotary_transformer_has_the_same_parameters_and_differs():
    torch.manual_seed(0)
    sinusoidal = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, N_LAYERS, D_FF, dropout=0.0)
    torch.manual_seed(0)
    rotary = Transformer(
        SRC_VOCAB, TGT_VOCAB, D_MODEL, H, N_LAYERS, D_FF, dropout=0.0, positions="rotary"
    )
    assert sinusoidal.positions == "sinusoidal" and rotary.positions == "rotary"
    assert "positions='rotary'" in repr(rotary)
    ours, theirs = rotary.state_dict(), sinusoidal.state_dict()
    assert list(ours) == list(theirs)  # rotation adds no parameter: the same initial weights
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert isinstance(rotary.pos, nn.Dropout)  # no table on the embeddings
    for layer in [*rotary.encoder_layers, *rotary.decoder_layers]:
        assert layer.self_attn.rotary_base == 10000.0
    assert all(layer.cross_attn.rotary_base is None for layer in rotary.decoder_layers)
    assert all(layer.self_attn.rotary_base is None for layer in sinusoidal.encoder_layers)
    with torch.no_grad():
        assert not torch.allclose(rotary(SRC, TGT), sinusoidal(SRC, TGT), atol=1e-3)


def test_rotary_transformer_trains():
    torch.manual_seed(0)
    model = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, positions="rotary")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):  # learn to answer TGT[:, 1:] to SRC (teacher forcing)
        logits = model(SRC, TGT[:, :-1])  # (B, T_tgt - 1, tgt_vocab)
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1), TGT[:, 1:].flatten(), ignore_index=PAD
        )
        optimizer.zero_grad()
        loss.backward()
        assert all(p.grad is not None for p in model.parameters())
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


def test_rotary_decode_step_by_step_equals_one_teacher_forced_pass():
    """What greedy decoding relies on holds with rotary positions too: a prefix's
    positions are 0 .. t whether it is decoded alone or as part of the whole target."""
    torch.manual_seed(0)
    model = Transformer(
        SRC_VOCAB, TGT_VOCAB, D_MODEL, H, N_LAYERS, D_FF, dropout=0.0, positions="rotary"
    ).eval()
    src_mask = padding_mask(SRC, PAD)
    with torch.no_grad():
        memory = model.encode(SRC, src_mask)
        full = model.decode(TGT, memory, src_mask)  # (B, T_tgt, tgt_vocab)
        for t in range(T_TGT):
            step = model.decode(TGT[:, : t + 1], memory, src_mask)[:, -1]  # (B, tgt_vocab)
            real = TGT[:, t] != PAD
            assert torch.allclose(step[real], full[real, t], atol=1e-5)


def test_bad_positions_are_a_clear_value_error():
    with pytest.raises(
        ValueError, match="positions must be one of 'sinusoidal', 'rotary', got 'learned'"
    ):
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, positions="learned")
    with pytest.raises(ValueError, match=r"even head size d_k .* got d_k=3, rotary_base=10000"):
        MultiHeadAttention(12, 4, rotary_base=10000.0)
    for base in (1.0, "10000", True):
        with pytest.raises(ValueError, match="a base greater than 1"):
            MultiHeadAttention(12, 2, rotary_base=base)
