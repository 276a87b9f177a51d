"""The full encoder-decoder Transformer (lesson 08).

    src (B, T_src) --src_embed, + positions--> N x EncoderLayer --> memory (B, T_src, d_model)
    tgt (B, T_tgt) --tgt_embed, + positions--> N x DecoderLayer(·, memory) --> out --> logits

The encoder reads the whole source at once (self-attention, padding mask). The decoder
reads the target shifted right (`<bos> y1 y2 ...`) under a causal mask, and each of its
layers looks at the encoder's output, the "memory", through cross-attention; a linear
layer `out` turns every position's vector into scores over the target vocabulary (the
softmax is left to the loss). Attributes, for the lessons that train and decode it:

    src_embed, tgt_embed   TokenEmbedding (course.positional): ids -> vectors * sqrt(d_model)
    pos                    PositionalEncoding: + sinusoidal positions, then dropout (both
                           sides); with positions="rotary" an nn.Dropout alone (no table)
    encoder_layers         nn.ModuleList of n_layers EncoderLayer (course.layers)
    decoder_layers         nn.ModuleList of n_layers DecoderLayer
    encoder_norm,          LayerNorm after the last layer when norm_first=True (pre-LN leaves
      decoder_norm           the residual stream un-normalised, so the stack ends with one);
                           None for the paper's post-LN, whose every layer ends with a norm
    out                    nn.Linear(d_model, tgt_vocab): the pre-softmax projection

positions="sinusoidal" (the default) adds the paper's table to both embeddings.
positions="rotary" adds none: every self-attention, encoder and decoder, rotates its
queries and keys by their positions instead (lesson 05's apply_rotary, base 10000), so
its scores see only how far apart two words are, not where they stand. Cross-attention
is never rotated (course.layers.DecoderLayer says why).

fused=True (keyword only; lesson 10, `make bench`) runs every attention, encoder and
decoder, on PyTorch's fused kernel F.scaled_dot_product_attention: the same function, faster,
and no layer keeps its attention weights (`.attn` is None; course.multihead says why).

tie_embeddings=True (one vocabulary for both languages, src_vocab == tgt_vocab) shares one
matrix between src_embed, tgt_embed and out, as the paper does (§3.4): one Parameter.

Masks are boolean, True = may attend (course.masking). When none are given they are
built from pad_id: padding_mask(src) (B, 1, 1, T_src) for the encoder and for the
cross-attention, decoder_mask(tgt) (B, 1, T_tgt, T_tgt) for the decoder's self-attention.

Initialisation: Xavier-uniform (Glorot and Bengio 2010) on every matrix, embeddings
included, as torch.nn.Transformer does for its layers; biases and LayerNorms keep their
defaults. The paper does not say how it initialised.

Unlike torch.nn.Transformer, which always ends its encoder and decoder with a LayerNorm,
the post-LN model has none (the paper's): `from_torch` therefore loads an nn.Transformer
whose final norms are removed for post-LN (encoder.norm = decoder.norm = None).
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from course.layers import (
    DecoderLayer,
    EncoderLayer,
    LayerNorm,
    load_decoder_layer,
    load_encoder_layer,
)
from course.masking import decoder_mask, padding_mask
from course.positional import PositionalEncoding, TokenEmbedding
from course.utils import describe, is_token_ids

# The paper's two configurations (Table 3): N layers, d_model, d_ff, h heads, P_drop.
# Both translate with a shared source-target vocabulary of about 37000 BPE tokens (§5.1)
# and tie the two embeddings and the pre-softmax projection (§3.4). The big model's
# P_drop is 0.3 for English-German (0.1 for English-French, §6.1).
PAPER_BASE = dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, dropout=0.1)
PAPER_BIG = dict(d_model=1024, n_heads=16, n_layers=6, d_ff=4096, dropout=0.3)
PAPER_VOCAB = 37000
# How the model knows word order: the paper's sinusoidal table added to the embeddings, or
# rotary positions (RoFormer) in every self-attention, with the base of lesson 05.
POSITIONS = ("sinusoidal", "rotary")
ROTARY_BASE = 10000.0


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class Transformer(nn.Module):
    """The paper's encoder-decoder: Transformer(src_vocab, tgt_vocab)(src, tgt) -> logits.

    encode(src, src_mask=None) -> memory (B, T_src, d_model)
    decode(tgt, memory, src_mask=None, tgt_mask=None) -> logits (B, T_tgt, tgt_vocab)
    forward(src, tgt, src_mask=None, tgt_mask=None) = decode(tgt, encode(src), ...)

    decode can be called on a growing prefix, one step at a time (greedy or beam search):
    the causal mask makes position t's logits depend on tgt[:, :t+1] only. Pass decode the
    src_mask the memory was encoded with, so that it ignores the source's padding too.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        max_len: int = 5000,
        pad_id: int = 0,
        tie_embeddings: bool = False,
        positions: str = "sinusoidal",
        *,
        fused: bool = False,
    ):
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(
                f"positions must be one of {', '.join(map(repr, POSITIONS))}, got {positions!r}"
            )
        self.src_vocab = _positive_int("src_vocab", src_vocab)
        self.tgt_vocab = _positive_int("tgt_vocab", tgt_vocab)
        n_layers = _positive_int("n_layers", n_layers)
        self.max_len = _positive_int("max_len", max_len)
        if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
            raise ValueError(f"pad_id must be an int token id, got {pad_id!r}")
        if not 0 <= pad_id < min(src_vocab, tgt_vocab):
            raise ValueError(
                f"pad_id must be a token id of both vocabularies, 0 .. "
                f"{min(src_vocab, tgt_vocab) - 1}, got {pad_id}"
            )
        if tie_embeddings and src_vocab != tgt_vocab:
            raise ValueError(
                "tie_embeddings=True shares one embedding matrix between the source, the target "
                f"and the output layer, so it needs one vocabulary: src_vocab == tgt_vocab; got "
                f"src_vocab={src_vocab}, tgt_vocab={tgt_vocab}"
            )
        self.pad_id, self.norm_first, self.tie_embeddings = int(pad_id), norm_first, tie_embeddings
        self.src_embed = TokenEmbedding(src_vocab, d_model, name="src")
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model, name="tgt")
        self.positions = positions
        if positions == "sinusoidal":
            self.pos = PositionalEncoding(d_model, max_len, dropout)
            rotary_base = None
        else:  # rotary: no table on the embeddings (they keep their dropout); the
            self.pos = nn.Dropout(dropout)  # self-attentions rotate q and k instead
            rotary_base = ROTARY_BASE
        if not isinstance(fused, bool):
            raise ValueError(f"fused must be True or False, got {fused!r}")
        self.fused = fused
        layer_args = (d_model, n_heads, d_ff, dropout, norm_first)
        layer_kwargs = dict(rotary_base=rotary_base, fused=fused)
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(*layer_args, **layer_kwargs) for _ in range(n_layers)]
        )
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(*layer_args, **layer_kwargs) for _ in range(n_layers)]
        )
        self.encoder_norm = LayerNorm(d_model) if norm_first else None
        self.decoder_norm = LayerNorm(d_model) if norm_first else None
        self.out = nn.Linear(d_model, tgt_vocab)  # scores over the target vocabulary
        if tie_embeddings:  # one (vocab, d_model) matrix, three uses
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.out.weight = self.src_embed.embedding.weight
        for p in self.parameters():  # a tied matrix is visited once
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @property
    def d_model(self) -> int:
        return self.src_embed.d_model

    def _check_tokens(self, tokens: object, name: str) -> None:
        """Raise unless tokens is a non-empty (B, T) integer tensor with T <= max_len.

        Only the shape and dtype are checked here, never the values: reading a tensor's
        min or max back to the host would make the CPU wait for a GPU at every call. The
        range of the ids is checked by the embedding's lookup (course.positional's
        TokenEmbedding, which names src or tgt in its error)."""
        if not is_token_ids(tokens):
            raise ValueError(
                f"{name} must be a (B, T) integer tensor of token ids, got {describe(tokens)}"
            )
        if tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"{name} is empty: shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"{name} has T={tokens.shape[1]} positions, longer than max_len={self.max_len}: "
                "build the Transformer with a larger max_len, or cut the sequence"
            )

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src (B, T_src) token ids -> memory (B, T_src, d_model)."""
        self._check_tokens(src, "src")
        if src_mask is None:
            src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, T_src)
        x = self.pos(self.src_embed(src))  # (B, T_src) -> (B, T_src, d_model)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)  # (B, T_src, d_model)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tgt (B, T_tgt) token ids, memory (B, T_src, d_model) -> logits (B, T_tgt, tgt_vocab).

        src_mask (the source's padding, (B, 1, 1, T_src)) hides padded memory positions
        from the cross-attention; None lets every position of memory be seen.
        """
        self._check_tokens(tgt, "tgt")
        if (
            not isinstance(memory, torch.Tensor)
            or memory.dim() != 3
            or memory.shape[-1] != self.d_model
        ):
            raise ValueError(
                f"memory must be the encoder's output (B, T_src, d_model={self.d_model}), "
                f"got {describe(memory)}"
            )
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"tgt and memory must hold the same batch: tgt has B={tgt.shape[0]} sentences, "
                f"memory B={memory.shape[0]}"
            )
        if tgt_mask is None:
            tgt_mask = decoder_mask(tgt, self.pad_id)  # (B, 1, T_tgt, T_tgt): causal & padding
        y = self.pos(self.tgt_embed(tgt))  # (B, T_tgt) -> (B, T_tgt, d_model)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)  # (B, T_tgt, d_model)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.out(y)  # (B, T_tgt, d_model) -> (B, T_tgt, tgt_vocab)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """src (B, T_src), tgt (B, T_tgt) -> logits (B, T_tgt, tgt_vocab): teacher forcing,
        every target position predicted in one pass."""
        self._check_tokens(src, "src")
        self._check_tokens(tgt, "tgt")
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src and tgt must hold the same batch of sentence pairs: src has "
                f"B={src.shape[0]}, tgt B={tgt.shape[0]}"
            )
        if src_mask is None:
            src_mask = padding_mask(src, self.pad_id)  # (B, 1, 1, T_src)
        memory = self.encode(src, src_mask)  # (B, T_src, d_model)
        return self.decode(tgt, memory, src_mask, tgt_mask)  # (B, T_tgt, tgt_vocab)

    def extra_repr(self) -> str:
        return (
            f"src_vocab={self.src_vocab}, tgt_vocab={self.tgt_vocab}, pad_id={self.pad_id}, "
            f"norm_first={self.norm_first}, tie_embeddings={self.tie_embeddings}, "
            f"positions={self.positions!r}" + (", fused=True" if self.fused else "")
        )

    @classmethod
    def from_torch(
        cls,
        theirs: nn.Transformer,
        src_embedding: nn.Embedding,
        tgt_embedding: nn.Embedding,
        out: nn.Linear,
        *,
        max_len: int = 5000,
        pad_id: int = 0,
    ) -> Transformer:
        """A Transformer computing what `theirs` computes when wrapped the paper's way:

            logits = out(theirs(pe(src_embedding(src) * sqrt(d)), pe(tgt_embedding(tgt) * sqrt(d)),
                                masks...))

        with pe adding the sinusoidal table and then dropout. torch.nn.Transformer holds no
        embeddings, positions or output layer, so they are passed in. When src_embedding,
        tgt_embedding and out share one weight, the result ties them too. theirs must be
        batch_first, with as many decoder layers as encoder layers, ReLU, and final norms
        exactly when norm_first (nn.Transformer always adds them: for post-LN set
        theirs.encoder.norm = theirs.decoder.norm = None, as the paper has none).
        """
        if not isinstance(theirs, nn.Transformer):
            raise ValueError(f"expected a torch.nn.Transformer, got {type(theirs).__name__}")
        enc, dec = theirs.encoder.layers, theirs.decoder.layers
        if len(enc) != len(dec):
            raise ValueError(
                f"ours has as many decoder layers as encoder layers; theirs has {len(enc)} "
                f"encoder and {len(dec)} decoder layers"
            )
        first = enc[0]
        norm_first = first.norm_first
        for name, norm in (("encoder", theirs.encoder.norm), ("decoder", theirs.decoder.norm)):
            if (norm is not None) != norm_first:
                raise ValueError(
                    f"theirs.{name}.norm is {'a LayerNorm' if norm is not None else 'None'} "
                    f"with norm_first={norm_first}: ours ends each stack with a LayerNorm "
                    "exactly when norm_first=True (pre-LN). torch.nn.Transformer always adds "
                    "one: for post-LN set theirs.encoder.norm = theirs.decoder.norm = None"
                )
        weights = (src_embedding.weight, tgt_embedding.weight, out.weight)
        tied = weights[0] is weights[1] is weights[2]
        if not tied and any(a is b for i, a in enumerate(weights) for b in weights[i + 1 :]):
            raise ValueError(
                "some but not all of src_embedding, tgt_embedding and out share a weight: "
                "ours ties all three (tie_embeddings=True) or none"
            )
        attn = first.self_attn
        ours = cls(
            src_embedding.num_embeddings,
            tgt_embedding.num_embeddings,
            d_model=attn.embed_dim,
            n_heads=attn.num_heads,
            n_layers=len(enc),
            d_ff=first.linear1.out_features,
            dropout=first.dropout.p,
            norm_first=norm_first,
            max_len=max_len,
            pad_id=pad_id,
            tie_embeddings=tied,
        )
        return load_transformer(ours, theirs, src_embedding, tgt_embedding, out)


def load_transformer(
    ours: Transformer,
    theirs: nn.Transformer,
    src_embedding: nn.Embedding,
    tgt_embedding: nn.Embedding,
    out: nn.Linear,
) -> Transformer:
    """Copy an nn.Transformer's layers and final norms, and the embeddings and output layer
    passed with it, into `ours` (same sizes). Returns `ours`."""
    pairs = [
        (ours.src_embed.embedding.weight, src_embedding.weight),
        (ours.tgt_embed.embedding.weight, tgt_embedding.weight),
        (ours.out.weight, out.weight),
        (ours.out.bias, out.bias),
    ]
    with torch.no_grad():
        for mine, torchs in pairs:
            if torchs is None or mine.shape != torchs.shape:
                got = None if torchs is None else tuple(torchs.shape)
                raise ValueError(
                    f"shapes differ: ours {tuple(mine.shape)}, given {got}: build both with the "
                    "same vocabularies and d_model (and out with a bias)"
                )
            mine.copy_(torchs)
    for mine, torchs in zip(ours.encoder_layers, theirs.encoder.layers, strict=True):
        load_encoder_layer(mine, torchs)
    for mine, torchs in zip(ours.decoder_layers, theirs.decoder.layers, strict=True):
        load_decoder_layer(mine, torchs)
    for mine, torchs in ((ours.encoder_norm, theirs.encoder.norm),
                         (ours.decoder_norm, theirs.decoder.norm)):  # fmt: skip
        if mine is not None:
            with torch.no_grad():
                mine.weight.copy_(torchs.weight)
                mine.bias.copy_(torchs.bias)
            mine.eps = torchs.eps
    return ours


def parameter_counts(model: Transformer) -> dict[str, int]:
    """The model's parameters by component, each counted once (a tied matrix once, under
    the first component that holds it). The values add up to the model's total."""
    groups = {
        "source embedding": model.src_embed,
        "target embedding": model.tgt_embed,
        "output projection": model.out,
        "encoder self-attention": [layer.self_attn for layer in model.encoder_layers],
        "encoder feed-forward": [layer.ff for layer in model.encoder_layers],
        "encoder LayerNorms": [m for layer in model.encoder_layers
                               for m in (layer.norm1, layer.norm2)],
        "decoder self-attention": [layer.self_attn for layer in model.decoder_layers],
        "decoder cross-attention": [layer.cross_attn for layer in model.decoder_layers],
        "decoder feed-forward": [layer.ff for layer in model.decoder_layers],
        "decoder LayerNorms": [m for layer in model.decoder_layers
                               for m in (layer.norm1, layer.norm2, layer.norm3)],
        "final LayerNorms": [m for m in (model.encoder_norm, model.decoder_norm) if m is not None],
    }  # fmt: skip
    seen: set[int] = set()
    counts = {}
    for name, modules in groups.items():
        modules = modules if isinstance(modules, list) else [modules]
        total = 0
        for module in modules:
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    total += p.numel()
        counts[name] = total
    return counts
