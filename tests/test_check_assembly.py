"""Lesson 08's assembly exercise: check.EncoderDecoder accepts every correct model and
names each usual mistake.

Each wrong answer below is one a learner really writes when assembling the Transformer
from the course's parts; each test asserts the checker returns False *and* prints the
diagnosis for that mistake, on one verdict line. The correct answers are written in other
ways than the lesson's (loops, masks by hand, torch's LayerNorm, the course's
TokenEmbedding and PositionalEncoding, F.dropout) and must pass.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.check import assembly as diagnoses
from course.layers import DecoderLayer, EncoderLayer, LayerNorm
from course.masking import causal_mask, decoder_mask, padding_mask
from course.positional import PositionalEncoding, TokenEmbedding, sinusoidal_encoding
from course.transformer import Transformer


class Good(nn.Module):
    """The lesson's answer; each mistake below changes one thing."""

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        d_model=512,
        n_heads=8,
        n_layers=6,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        max_len=5000,
        pad_id=0,
        tie_embeddings=False,
    ):
        super().__init__()
        self.d_model, self.n_heads, self.pad_id = d_model, n_heads, pad_id
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab)
        if tie_embeddings:
            self.tie()

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList([EncoderLayer(*args) for _ in range(n_layers)])
        self.decoder_layers = nn.ModuleList([DecoderLayer(*args) for _ in range(n_layers)])
        self.encoder_norm = LayerNorm(d_model) if norm_first else None
        self.decoder_norm = LayerNorm(d_model) if norm_first else None

    def tie(self):
        self.tgt_embed.weight = self.src_embed.weight
        self.out.weight = self.src_embed.weight

    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model)  # (B, T, d_model)
        return self.dropout(x + self.pe[: tokens.shape[1]])

    def masks(self, src, tgt):
        return padding_mask(src, self.pad_id), decoder_mask(tgt, self.pad_id)

    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x if self.encoder_norm is None else self.encoder_norm(x)

    def final(self, y):
        return y if self.decoder_norm is None else self.decoder_norm(y)

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        """As lesson 09 calls it, decode(tgt, memory, src_mask): the target's mask built
        here when none is given."""
        if tgt_mask is None:
            tgt_mask = self.masks(tgt, tgt)[1]
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)

    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.out(self.final(y))

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


# ------------------------------------------------------ correct alternatives ----------


class LoopsAndHandMadeMasks(nn.Module):
    """Layers appended in a loop, masks built with comparisons and tril, the scale written
    d_model ** 0.5, F.dropout, torch's nn.LayerNorm for the final norms, everything in one
    forward, the tie made through the target embedding."""

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        d_model=512,
        n_heads=8,
        n_layers=6,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        max_len=5000,
        pad_id=0,
        tie_embeddings=False,
    ):
        super().__init__()
        self.p, self.pad, self.d = dropout, pad_id, d_model
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.encoder_layers, self.decoder_layers = nn.ModuleList(), nn.ModuleList()
        for _ in range(n_layers):
            self.encoder_layers.append(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first))
            self.decoder_layers.append(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first))
        self.encoder_norm = nn.LayerNorm(d_model) if norm_first else None
        self.decoder_norm = nn.LayerNorm(d_model) if norm_first else None
        self.out = nn.Linear(d_model, tgt_vocab)
        if tie_embeddings:
            self.tgt_embed.weight = self.src_embed.weight
            self.out.weight = self.tgt_embed.weight

    def forward(self, src, tgt):
        B, S = src.shape
        T = tgt.shape[1]
        src_mask = (src != self.pad).view(B, 1, 1, S)
        future = torch.tril(torch.ones(T, T, dtype=torch.bool))
        tgt_mask = (tgt != self.pad)[:, None, None, :] & future[None, None]
        x = self.src_embed(src) * self.d**0.5 + self.pe[:S].unsqueeze(0)
        x = F.dropout(x, self.p, self.training)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        y = F.dropout(self.tgt_embed(tgt) * self.d**0.5 + self.pe[:T], self.p, self.training)
        for layer in self.decoder_layers:
            y = layer(y, x, tgt_mask=tgt_mask, memory_mask=src_mask)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.out(y)


class CourseEmbeddings(nn.Module):
    """The course's TokenEmbedding (scaled inside) and PositionalEncoding (adds, then
    drops), as course.transformer.Transformer is built; the stacks walked by helpers."""

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        d_model=512,
        n_heads=8,
        n_layers=6,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        max_len=5000,
        pad_id=0,
        tie_embeddings=False,
    ):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model)
        self.pos = PositionalEncoding(d_model, max_len, dropout)
        layer = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer) for _ in range(n_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer) for _ in range(n_layers))
        self.encoder_norm = self.decoder_norm = None
        if norm_first:
            self.encoder_norm, self.decoder_norm = LayerNorm(d_model), LayerNorm(d_model)
        self.out = nn.Linear(d_model, tgt_vocab)
        if tie_embeddings:
            shared = self.src_embed.embedding.weight
            self.tgt_embed.embedding.weight = shared
            self.out.weight = shared

    def forward(self, src, tgt):
        memory_mask = padding_mask(src, self.pad_id)
        self_mask = padding_mask(tgt, self.pad_id) & causal_mask(tgt.shape[1])
        memory = self.pos(self.src_embed(src))
        for layer in self.encoder_layers:
            memory = layer(memory, memory_mask)
        if self.encoder_norm:
            memory = self.encoder_norm(memory)
        y = self.pos(self.tgt_embed(tgt))
        for layer in self.decoder_layers:
            y = layer(y, memory, self_mask, memory_mask)
        return self.out(self.decoder_norm(y) if self.decoder_norm else y)


class ScaleAsATensorMasksByLogicalAnd(Good):
    """The table indexed directly (weight[tokens]), the scale a 0-d tensor in the table's
    dtype, the masks through torch.ne and torch.logical_and."""

    def embed(self, table, tokens):
        scale = torch.tensor(self.d_model, dtype=table.weight.dtype).sqrt()
        return self.dropout(table.weight[tokens] * scale + self.pe[: tokens.shape[1]])

    def masks(self, src, tgt):
        T = tgt.shape[1]
        causal = torch.ones(T, T).tril().bool()
        keys = torch.ne(tgt, self.pad_id).unsqueeze(1).unsqueeze(1)
        return torch.ne(src, self.pad_id)[:, None, None], torch.logical_and(keys, causal)


RIGHT = [
    Good,
    LoopsAndHandMadeMasks,
    CourseEmbeddings,
    ScaleAsATensorMasksByLogicalAnd,
    Transformer,
]


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is True and "✅ EncoderDecoder: passed" in printed, printed


# ------------------------------------------------------------ wrong answers ----------


class Stub(nn.Module):
    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        d_model=512,
        n_heads=8,
        n_layers=6,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        max_len=5000,
        pad_id=0,
        tie_embeddings=False,
    ):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, src, tgt):
        # YOUR CODE HERE
        raise NotImplementedError


class DecodeStub(Good):
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class NoScale(Good):
    def embed(self, table, tokens):
        return self.dropout(table(tokens) + self.pe[: tokens.shape[1]])


class ScaleSqrtDk(Good):
    def embed(self, table, tokens):
        d_k = self.d_model // self.n_heads
        return self.dropout(table(tokens) * math.sqrt(d_k) + self.pe[: tokens.shape[1]])


class NoPositions(Good):
    def embed(self, table, tokens):
        return self.dropout(table(tokens) * math.sqrt(self.d_model))


class PositionsScaledToo(Good):
    def embed(self, table, tokens):
        x = table(tokens) + self.pe[: tokens.shape[1]]
        return self.dropout(x * math.sqrt(self.d_model))


class PositionsAfterDropout(Good):
    def embed(self, table, tokens):
        x = self.dropout(table(tokens) * math.sqrt(self.d_model))
        return x + self.pe[: tokens.shape[1]]


class NoEmbeddingDropout(Good):
    def embed(self, table, tokens):
        return table(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.shape[1]]


class DetachedEmbeddings(Good):
    def embed(self, table, tokens):
        return super().embed(table, tokens).detach()


class CausalMaskMissing(Good):
    def masks(self, src, tgt):
        return padding_mask(src, self.pad_id), padding_mask(tgt, self.pad_id)


class TargetPaddingMissing(Good):
    def masks(self, src, tgt):
        return padding_mask(src, self.pad_id), causal_mask(tgt.shape[1])


class CausalMaskOnTheEncoder(Good):
    def encode(self, src, src_mask):
        return super().encode(src, src_mask & causal_mask(src.shape[1]))


class CrossAttentionWithoutSourcePadding(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        return super().run_decoder(tgt, memory, tgt_mask, None)


class TargetMaskAsMemoryMask(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        return super().run_decoder(tgt, memory, tgt_mask, tgt_mask)


class EncoderIgnoresPadding(Good):
    def encode(self, src, src_mask):
        return super().encode(src, None)


class PadIdHardCodedZero(Good):
    def masks(self, src, tgt):
        return padding_mask(src, 0), decoder_mask(tgt, 0)


class PreLNWithoutFinalNorms(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x  # <- encoder_norm built but never applied

    def final(self, y):
        return y


class PreLNWithoutDecoderNorm(Good):
    def final(self, y):
        return y


class PreLNNoNormModules(Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.encoder_norm = self.decoder_norm = None


class PostLNWithFinalNorms(Good):
    """Final norms always, as torch.nn.Transformer has them."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.encoder_norm, self.decoder_norm = LayerNorm(d_model), LayerNorm(d_model)


class PostLNFunctionalFinalNorm(Good):
    def final(self, y):
        return F.layer_norm(super().final(y), (self.d_model,))


class Untied(Good):
    def tie(self):
        pass


class TiedByCopyingValues(Good):
    def tie(self):
        self.tgt_embed.weight.data = self.src_embed.weight.data
        self.out.weight.data = self.src_embed.weight.data


class TiedWhenNotAsked(Good):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.src_embed.weight.shape == self.tgt_embed.weight.shape:
            self.tie()


class SoftmaxOnTheLogits(Good):
    def forward(self, src, tgt):
        return super().forward(src, tgt).softmax(dim=-1)


class OneLayerRepeated(Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList([EncoderLayer(*args)] * n_layers)


class LayersNotChained(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            h = layer(x, src_mask)  # <- every layer reads the embeddings
        return h if self.encoder_norm is None else self.encoder_norm(h)


class LayersWithTheDefaultRate(Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, 0.1, norm_first)


class LayersAlwaysPostLN(Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, False)
        if norm_first:
            self.encoder_norm, self.decoder_norm = LayerNorm(d_model), LayerNorm(d_model)


class TargetEmbeddedWithSourceTable(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.src_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.out(self.final(y))


class SourceEmbeddedWithTargetTable(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.tgt_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x if self.encoder_norm is None else self.encoder_norm(x)


class PositionsLearned(Good):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pe = nn.Parameter(self.pe.clone())


class MemoryDropped(Good):
    def encode(self, src, src_mask):
        return self.dropout(super().encode(src, src_mask))


class ReturnsTheDecoderState(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.final(y)  # <- self.out forgotten


class BatchOfOneOnly(Good):
    """The masks flattened as if there were one sentence."""

    def masks(self, src, tgt):
        src_mask = (src != self.pad_id).view(1, 1, 1, -1)
        return src_mask, decoder_mask(tgt, self.pad_id)


class CrashesInForward(Good):
    def forward(self, src, tgt):
        memory = self.encode(src, padding_mask(src, self.pad_id))
        return memory @ self.out  # <- a module is not a matrix


def _stacks(which):
    return " and ".join(which)


WRONG = {
    NoScale: diagnoses.NO_SCALE,
    ScaleSqrtDk: diagnoses.SCALE_D_K,
    NoPositions: diagnoses.NO_POSITIONS,
    PositionsScaledToo: diagnoses.POSITIONS_SCALED,
    PositionsAfterDropout: diagnoses.POSITIONS_AFTER_DROPOUT,
    NoEmbeddingDropout: diagnoses.NO_EMBEDDING_DROPOUT.format(side="source"),
    DetachedEmbeddings: diagnoses.EMBEDDINGS_DETACHED,
    CausalMaskMissing: diagnoses.NO_CAUSAL,
    TargetPaddingMissing: diagnoses.NO_TGT_PADDING,
    CausalMaskOnTheEncoder: diagnoses.CAUSAL_ENCODER,
    CrossAttentionWithoutSourcePadding: diagnoses.NO_CROSS_MASK,
    TargetMaskAsMemoryMask: diagnoses.TGT_AS_MEMORY_MASK.format(which="mask"),
    EncoderIgnoresPadding: diagnoses.NO_SRC_PADDING_ENCODER,
    PadIdHardCodedZero: diagnoses.WRONG_PAD_ID.format(used=0, pad_id=3),
    PreLNWithoutFinalNorms: diagnoses.NO_FINAL_NORMS,
    PreLNWithoutDecoderNorm: diagnoses.NO_DECODER_NORM,
    PreLNNoNormModules: "in pre-LN (norm_first=True) the encoder ends with a LayerNorm",
    PostLNWithFinalNorms: diagnoses.EXTRA_FINAL_NORM.format(which="the encoder's output"),
    PostLNFunctionalFinalNorm: diagnoses.EXTRA_FINAL_NORM.format(which="the decoder's output"),
    Untied: diagnoses.UNTIED.format(
        which="self.tgt_embed.weight and self.out.weight are not src_embed's matrix"
    ),
    TiedByCopyingValues: "copying the values, .data or .copy_(), ties nothing",
    TiedWhenNotAsked: diagnoses.TIED_UNASKED.format(which="src_embed and tgt_embed"),
    SoftmaxOnTheLogits: diagnoses.SOFTMAX,
    OneLayerRepeated: diagnoses.SAME_LAYER_REPEATED.format(
        stack="encoder_layers", n=2, kind="reference.EncoderLayer"
    ),
    LayersNotChained: diagnoses.LAYERS_NOT_CHAINED.format(stack="encoder"),
    LayersWithTheDefaultRate: "drops at rate 0.1, but dropout=0.0 was asked",
    LayersAlwaysPostLN: "is built with norm_first=False, but the model with norm_first=True",
    # the checker's source vocabulary is the larger: the target's ids fit in src_embed
    TargetEmbeddedWithSourceTable: "the target is embedded with src_embed: the decoder's "
    "tokens are looked up in their own table, self.tgt_embed(tgt)",
    SourceEmbeddedWithTargetTable: "the source is embedded with tgt_embed: the encoder's "
    "tokens are looked up in their own table, self.src_embed(src)",
    PositionsLearned: "the sinusoidal table is a parameter (pe)",
    MemoryDropped: diagnoses.MEMORY_DROPPED.format(norm=""),
    ReturnsTheDecoderState: "has shape (2, 5, 12), expected (2, 5, 11)",
    BatchOfOneOnly: "Check the masks' shapes",
    CrashesInForward: "your code raised TypeError",
}


def _rejected_naming(verdict, answer, expected):
    """The checker rejects `answer` and its one message contains `expected`."""
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert expected in printed, printed


@pytest.mark.parametrize("answer", WRONG, ids=[a.__name__ for a in WRONG])
def test_wrong_answers_are_named(answer, verdict):
    _rejected_naming(verdict, answer, WRONG[answer])


@pytest.mark.parametrize("answer", [Stub, DecodeStub])
def test_a_stub_is_not_implemented_yet(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and "⏳ EncoderDecoder: not implemented yet" in printed, printed


def test_an_instance_is_explained(verdict):
    passed, printed = verdict(check.EncoderDecoder, Good(11, 13, 12, 3, 2, 20))
    assert passed is False and "pass the class itself" in printed, printed


def test_the_exercise_belongs_to_lesson_08():
    from course.check._framework import lesson_of

    assert lesson_of("EncoderDecoder") == "08"


def test_the_target_embedded_with_the_source_table_is_named_where_it_runs(verdict):
    """With one vocabulary for both sides the mistake runs, and gives other numbers."""
    from course.check.assembly import TGT_WITH_SRC_TABLE, _mistakes, _tokens, _variant

    ref = Transformer(14, 14, 12, 3, 2, 20, 0.1, max_len=40).eval()
    gen = torch.Generator().manual_seed(0)
    src, tgt = _tokens(gen, [5, 3], 6, 14, 0), _tokens(gen, [4, 2], 4, 14, 0)
    with torch.no_grad():
        mistaken = _variant(ref, src, tgt, tgt_table="src_embed")
        assert torch.equal(_mistakes(ref, src, tgt, False, False)[TGT_WITH_SRC_TABLE], mistaken)
        assert not torch.allclose(mistaken, ref(src, tgt))


# ------------------------------------------------ more of the same, one line each ----------


class ScaleByDModel(Good):
    def embed(self, table, tokens):
        return self.dropout(table(tokens) * self.d_model + self.pe[: tokens.shape[1]])


class NoMasksAtAll(Good):
    def forward(self, src, tgt):
        return self.run_decoder(tgt, self.encode(src, None), None, None)


class DecoderWithoutMask(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        return super().run_decoder(tgt, memory, None, src_mask)


class PreLNWithoutEncoderNorm(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x


class FinalNormsSwapped(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x if self.decoder_norm is None else self.decoder_norm(x)

    def final(self, y):
        return y if self.encoder_norm is None else self.encoder_norm(y)


class TargetNotDropped(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.tgt_embed(tgt) * math.sqrt(self.d_model) + self.pe[: tgt.shape[1]]
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.out(self.final(y))


class LogitsDropped(Good):
    def final(self, y):
        return self.dropout(super().final(y))


class DroppedBetweenLayers(Good):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = self.dropout(layer(x, src_mask))
        return x if self.encoder_norm is None else self.encoder_norm(x)


class DroppedTwice(Good):
    def embed(self, table, tokens):
        return self.dropout(super().embed(table, tokens))


class DropoutAlsoInEval(Good):
    """F.dropout's training argument defaults to True: it drops in eval mode too."""

    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.shape[1]]
        return F.dropout(x, self.dropout.p)


class PositionsOfTheSourceLength(Good):
    """The target gets the source's positions: right while T_src = T_tgt, a crash after."""

    def forward(self, src, tgt):
        self.length = src.shape[1]
        return super().forward(src, tgt)

    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[: self.length])


class TargetPaddingAsMemoryMask(Good):
    """The target's padding mask (not the source's) given to the cross-attention: it runs
    while T_src = T_tgt, hiding the wrong keys."""

    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        return super().run_decoder(tgt, memory, tgt_mask, padding_mask(tgt, self.pad_id))


MORE = {
    PositionsOfTheSourceLength: "each side adds its own positions, pe[:T] with its own length",
    DropoutAlsoInEval: "two calls give different outputs, so something is dropped in eval mode",
    ScaleByDModel: diagnoses.SCALE_D_MODEL,
    NoMasksAtAll: diagnoses.NO_MASKS,
    DecoderWithoutMask: diagnoses.NO_DECODER_MASK,
    PreLNWithoutEncoderNorm: diagnoses.NO_ENCODER_NORM,
    FinalNormsSwapped: diagnoses.NORMS_SWAPPED,
    TargetNotDropped: diagnoses.NO_EMBEDDING_DROPOUT.format(side="target"),
    LogitsDropped: diagnoses.LOGITS_DROPPED.format(y="y"),
    DroppedBetweenLayers: diagnoses.DROPOUT_BETWEEN_LAYERS.format(stack="encoder"),
    DroppedTwice: diagnoses.DROPPED_TWICE.format(side="source"),
    TargetPaddingAsMemoryMask: diagnoses.TGT_AS_MEMORY_MASK.format(which="padding mask"),
}


@pytest.mark.parametrize("answer", MORE, ids=[a.__name__ for a in MORE])
def test_more_wrong_answers_are_named(answer, verdict):
    _rejected_naming(verdict, answer, MORE[answer])


# ------------------------------------------- issue 32: wrong answers that passed ----------


class ForwardPassesTheMaskDecodeDoesNot(Good):
    """forward builds the target's mask and hands it to decode; decode called as lesson 09
    calls it, decode(tgt, memory, src_mask), has none: no causal mask while decoding."""

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)


class TargetPaddingOnTheQueryAxis(Good):
    """The target's padding mask on the query axis, (B, 1, T, 1) & causal: the rows of
    padded positions are hidden instead of the columns."""

    def masks(self, src, tgt):
        rows = (tgt != self.pad_id)[:, None, :, None]  # (B, 1, T_tgt, 1)
        return padding_mask(src, self.pad_id), rows & causal_mask(tgt.shape[1])


class MemoryDetachedInDecode(Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        return super().run_decoder(tgt, memory.detach(), tgt_mask, src_mask)


class CausalOnlyWhileTraining(Good):
    """ "The causal mask is for training": in eval mode the decoder sees the whole target."""

    def masks(self, src, tgt):
        src_mask = padding_mask(src, self.pad_id)
        if self.training:
            return src_mask, decoder_mask(tgt, self.pad_id)
        return src_mask, padding_mask(tgt, self.pad_id)


class OwnDecoderLayer(nn.Module):
    """The learner's unfinished DecoderLayer from the exercise above."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        raise NotImplementedError


class UsesItsOwnUnfinishedDecoderLayer(Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.decoder_layers = nn.ModuleList([OwnDecoderLayer(*args) for _ in range(n_layers)])


ISSUE_32 = {
    ForwardPassesTheMaskDecodeDoesNot: "decode(tgt, memory, src_mask), called as lesson 09 "
    "calls it",
    TargetPaddingOnTheQueryAxis: "only at the target's padded positions",
    MemoryDetachedInDecode: "the memory (the encoder's output) is detached",
    CausalOnlyWhileTraining: "in eval mode",
    UsesItsOwnUnfinishedDecoderLayer: "reference.DecoderLayer",
}


@pytest.mark.parametrize("answer", ISSUE_32, ids=[a.__name__ for a in ISSUE_32])
def test_issue_32_mistakes_are_named(answer, verdict):
    _rejected_naming(verdict, answer, ISSUE_32[answer])


def test_the_missing_causal_mask_of_decode_is_named(verdict):
    passed, printed = verdict(check.EncoderDecoder, ForwardPassesTheMaskDecodeDoesNot)
    assert "causal" in printed and "decoder_mask(tgt, self.pad_id)" in printed, printed


def test_padding_on_the_query_axis_says_where_padding_belongs(verdict):
    passed, printed = verdict(check.EncoderDecoder, TargetPaddingOnTheQueryAxis)
    assert "key axis" in printed, printed
    assert "the target's padding is masked on the query axis (rows of the scores" in printed
    assert "embeddings zeroed" not in printed, printed  # its cause named, not guessed at


def test_a_detached_memory_is_not_called_detached_embeddings(verdict):
    passed, printed = verdict(check.EncoderDecoder, MemoryDetachedInDecode)
    assert diagnoses.EMBEDDINGS_DETACHED not in printed, printed


@pytest.mark.parametrize("answer", [OneLayerRepeated, LayersWithTheDefaultRate, LayersAlwaysPostLN])
def test_the_layers_shown_are_the_courses(answer, verdict):
    """The model is built from course.layers: a message shows reference.DecoderLayer(...),
    never a bare DecoderLayer(...), which in the notebook is the learner's own class."""
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and "reference.EncoderLayer(" in printed, printed


# ----------------------------------------- ten more plausible wrong answers ----------


class DecodeBuildsOnlyTheCausalMask(Good):
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt.shape[1])  # the padding forgotten here
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)


class EncodeWithoutTheFinalNorm(Good):
    """Pre-LN: encoder_norm applied in forward, after encode, so encode alone lacks it."""

    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        memory = self.encode(src, src_mask)
        if self.encoder_norm is not None:
            memory = self.encoder_norm(memory)
        return self.decode(tgt, memory, src_mask, tgt_mask)


class DecodeReturnsTheDecoderState(Good):
    """self.out applied in forward, after decode."""

    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask, src_mask)
        return self.final(y)

    def forward(self, src, tgt):
        return self.out(super().forward(src, tgt))


class DropoutRateHardCoded(Good):
    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.shape[1]]
        return F.dropout(x, 0.1, self.training)  # the constructor's rate not used


class PositionsOfTheBatchLength(Good):
    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[: tokens.shape[0]])  # shape[0] is B, not T


class InvertedPaddingMasks(Good):
    def masks(self, src, tgt):
        src_mask = (src == self.pad_id)[:, None, None, :]
        tgt_mask = (tgt == self.pad_id)[:, None, None, :] & causal_mask(tgt.shape[1])
        return src_mask, tgt_mask


class TiedOnlyToTheOutput(Good):
    def tie(self):
        self.out.weight = self.tgt_embed.weight  # the source table left apart


class DecodeUsesTheMaskOfTheLastForward(Good):
    def forward(self, src, tgt):
        self.src_mask = padding_mask(src, self.pad_id)  # kept for decode
        return super().forward(src, tgt)

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        return super().decode(tgt, memory, self.src_mask, tgt_mask)


class EncodeReturnsAPair(Good):
    def encode(self, src, src_mask):
        return super().encode(src, src_mask), src_mask

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        memory, _ = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask, tgt_mask)


class DecodeIgnoresItsSourceMask(Good):
    """forward runs the stacks itself; decode, written for lesson 09, drops src_mask."""

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        return super().decode(tgt, memory, None, tgt_mask)

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        return self.run_decoder(tgt, self.encode(src, src_mask), tgt_mask, src_mask)


class DecodeMasksWithTheMemoryLength(Good):
    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:  # the length of the wrong side
            tgt_mask = padding_mask(tgt, self.pad_id) & causal_mask(memory.shape[1])
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)


EXTRA = {
    DecodeBuildsOnlyTheCausalMask: diagnoses.DECODE_NO_TGT_PADDING,
    EncodeWithoutTheFinalNorm: diagnoses.ENCODE_NO_NORM,
    DecodeReturnsTheDecoderState: "has shape (2, 5, 12), expected (2, 5, 11)",
    DropoutRateHardCoded: "changes the output although dropout=0.0",
    PositionsOfTheBatchLength: "each side adds its own positions, pe[:T] with its own length",
    InvertedPaddingMasks: diagnoses.INVERTED_MASKS,
    TiedOnlyToTheOutput: diagnoses.UNTIED.format(
        which="self.tgt_embed.weight and self.out.weight are not src_embed's matrix"
    ),
    DecodeUsesTheMaskOfTheLastForward: diagnoses.DECODE_STALE_MASK,
    EncodeReturnsAPair: "returned a tuple of 2 things; lesson 09 takes one tensor from it",
    DecodeIgnoresItsSourceMask: diagnoses.DECODE_NO_CROSS_MASK,
    DecodeMasksWithTheMemoryLength: "Check the masks' shapes",
}


@pytest.mark.parametrize("answer", EXTRA, ids=[a.__name__ for a in EXTRA])
def test_extra_wrong_answers_are_named(answer, verdict):
    _rejected_naming(verdict, answer, EXTRA[answer])
