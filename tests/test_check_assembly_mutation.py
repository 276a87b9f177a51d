"""Lesson 08's assembly checker: the words of each diagnosis, written out (issue 32).

tests/test_check_assembly.py finds each diagnosis by the checker's own constant
(diagnoses.NO_SCALE, ...), which a change to that constant changes alike: tools/mutation.py
showed that an altered diagnosis went unnoticed. Here each wrong answer's message is
checked for the key words a learner reads, as written in the lesson's terms.
"""

import re

import pytest
import test_check_assembly as answers
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.layers import DecoderLayer, LayerNorm
from course.masking import causal_mask, decoder_mask, padding_mask
from course.positional import sinusoidal_encoding

SAID = {
    answers.NoScale: "the embeddings are not multiplied by sqrt(d_model): the paper scales each "
    "token's vector, embedding(tokens) * math.sqrt(d_model), before adding the positions",
    answers.ScaleSqrtDk: "the embeddings are multiplied by sqrt(d_k) = sqrt(d_model / n_heads): "
    "the scale is sqrt(d_model)",
    answers.ScaleByDModel: "the embeddings are multiplied by d_model itself: the scale is its "
    "square root",
    answers.NoPositions: "no positions are added: attention is order-blind (lesson 05)",
    answers.PositionsScaledToo: "the positions are multiplied by sqrt(d_model) too, (embedding "
    "+ positions) * sqrt(d_model): only the embedding is scaled",
    answers.PositionsAfterDropout: "the positions are added after the dropout: dropout("
    "embedding * sqrt(d_model)) + pe. The sum is dropped",
    answers.NoEmbeddingDropout: "in training mode nothing is dropped from the source embeddings "
    "+ positions: the paper applies dropout to their sum",
    answers.TargetNotDropped: "in training mode nothing is dropped from the target embeddings "
    "+ positions",
    answers.DetachedEmbeddings: "the values are right, but the embeddings are detached "
    "(.detach(), .data or torch.no_grad()), so the embedding tables never learn",
    answers.CausalMaskMissing: "the decoder's self-attention has no causal mask: every target "
    "position sees the words after it",
    answers.TargetPaddingMissing: "the decoder's self-attention has the causal mask but not the "
    "target's padding: it is causal & padding",
    answers.DecoderWithoutMask: "the decoder's self-attention gets no mask at all: it needs "
    "causal & target padding",
    answers.CausalMaskOnTheEncoder: "the encoder is given a causal mask: the encoder reads the "
    "whole source at once",
    answers.EncoderIgnoresPadding: "the encoder's self-attention ignores the source's padding: "
    "give every encoder layer src_mask = padding_mask(src, pad_id)",
    answers.CrossAttentionWithoutSourcePadding: "the cross-attention ignores the source's "
    "padding: every decoder layer gets memory_mask = padding_mask(src, pad_id)",
    answers.TargetMaskAsMemoryMask: "the cross-attention is given the target's mask: its keys "
    "are the *source* positions (the memory)",
    answers.TargetPaddingAsMemoryMask: "the cross-attention is given the target's padding mask: "
    "its keys are the *source* positions",
    answers.NoMasksAtAll: "no masks at all: the encoder and the cross-attention need the "
    "source's padding mask",
    answers.InvertedPaddingMasks: "the padding masks are inverted, True on the padding (tokens "
    "== pad_id)",
    answers.PadIdHardCodedZero: "the masks are built from token id 0, not from pad_id=3: use "
    "the pad_id the model was built with",
    answers.PreLNWithoutEncoderNorm: "in pre-LN (norm_first=True) the encoder's output is not "
    "normalised: pre-LN layers leave the residual stream as it is",
    answers.PreLNWithoutDecoderNorm: "in pre-LN (norm_first=True) the decoder's output is not "
    "normalised before the output layer",
    answers.PreLNWithoutFinalNorms: "in pre-LN (norm_first=True) neither stack ends with its "
    "LayerNorm",
    answers.PostLNWithFinalNorms: "in post-LN (norm_first=False) the encoder's output is "
    "normalised once more at the end: each post-LN layer ends with its own LayerNorm already",
    answers.PostLNFunctionalFinalNorm: "in post-LN (norm_first=False) the decoder's output is "
    "normalised once more at the end",
    answers.FinalNormsSwapped: "encoder_norm and decoder_norm are swapped: encoder_norm ends the "
    "encoder (on the memory)",
    answers.SoftmaxOnTheLogits: "the model returns probabilities (a softmax over the "
    "vocabulary): it returns the logits",
    answers.LayersNotChained: "every encoder layer reads the embeddings, and only the last one's "
    "output is kept: each layer reads the output of the one before it",
    answers.MemoryDetachedInDecode: "the values are right, but the memory (the encoder's output) "
    "is detached before the decoder",
    answers.TargetPaddingOnTheQueryAxis: "the logits are right at every real target position and "
    "differ from the course model's only at the target's padded positions",
    answers.CausalOnlyWhileTraining: "This happens in eval mode only: in training mode (at "
    "dropout=0.0) your model gives the right logits, so your forward depends on self.training",
    answers.ForwardPassesTheMaskDecodeDoesNot: "decode(tgt, memory, src_mask), called as lesson "
    "09 calls it (greedy decoding gives no target mask), runs the decoder's self-attention "
    "with no mask at all, neither causal nor the target's padding: every target position sees "
    "the ones after it. forward may build the mask and pass it on, but decode must build it "
    "itself when it is given none",
    answers.DecodeBuildsOnlyTheCausalMask: "runs the decoder's self-attention with the causal "
    "mask but not the target's padding. forward may build the mask",
    answers.DecodeIgnoresItsSourceMask: "decode(tgt, memory, src_mask), called as lesson 09 "
    "calls it, ignores its src_mask",
    answers.DecodeUsesTheMaskOfTheLastForward: "decode(tgt, memory, src_mask) used a source mask "
    "left over from the last call of forward",
    answers.EncodeWithoutTheFinalNorm: "encode(src, src_mask), called as lesson 09 calls it, "
    "returns the last encoder layer's output without encoder_norm",
    answers.UsesItsOwnUnfinishedDecoderLayer: "your EncoderDecoder calls __init__, a method of a "
    "class of your own that is not implemented yet",
    answers.Untied: "tie_embeddings=True asks for one matrix in three places, but "
    "self.tgt_embed.weight and self.out.weight are not src_embed's matrix",
    answers.TiedWhenNotAsked: "tie_embeddings=False, but src_embed and tgt_embed share one "
    "matrix: tie them only when asked",
    answers.OneLayerRepeated: "self.encoder_layers holds one layer 2 times ([layer] * n_layers "
    "repeats the same module, with the same weights)",
    answers.PositionsLearned: "the sinusoidal table is a parameter (pe), so it would be trained "
    "and saved: keep it a buffer",
    answers.DroppedTwice: "in training mode the source embeddings + positions are dropped twice",
    answers.DroppedBetweenLayers: "in training mode something is dropped between the encoder "
    "layers",
    answers.MemoryDropped: "in training mode the decoder does not receive the encoder's output "
    "as it is (dropout on the memory?)",
    answers.LogitsDropped: "in training mode the output layer does not receive the decoder's "
    "output as it is (dropout on y or on the logits?): logits = self.out(y)",
}


@pytest.mark.parametrize("answer", SAID, ids=[a.__name__ for a in SAID])
def test_each_diagnosis_says_the_mistake_in_so_many_words(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert SAID[answer] in printed, printed


# ------------------------------------------------------------ the signature ----------

SIGNATURE = (
    "EncoderDecoder(src_vocab, tgt_vocab, d_model=512, n_heads=8, n_layers=6, d_ff=2048, "
    "dropout=0.1, norm_first=False, max_len=5000, pad_id=0, tie_embeddings=False)"
)


class HeadsBeforeWidth(answers.Good):
    """n_heads and d_model swapped in the signature: the notebooks pass them positionally."""

    def __init__(
        self,
        src_vocab,
        tgt_vocab,
        n_heads=8,
        d_model=512,
        n_layers=6,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        max_len=5000,
        pad_id=0,
        tie_embeddings=False,
    ):
        super().__init__(
            src_vocab,
            tgt_vocab,
            d_model,
            n_heads,
            n_layers,
            d_ff,
            dropout,
            norm_first,
            max_len,
            pad_id,
            tie_embeddings,
        )


class OnlyTheFirstEight(answers.Good):
    """The signature's first line only: no max_len, pad_id or tie_embeddings."""

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
    ):
        super().__init__(
            src_vocab, tgt_vocab, d_model, n_heads, n_layers, d_ff, dropout, norm_first
        )


def test_parameters_in_another_order_are_named_with_the_lessons_signature(verdict):
    passed, printed = verdict(check.EncoderDecoder, HeadsBeforeWidth)
    assert passed is False
    assert "your parameters come in the order (src_vocab, tgt_vocab, n_heads, d_model," in printed
    assert f"the lesson's signature is {SIGNATURE}, and the notebooks pass" in printed, printed


def test_a_missing_parameter_is_answered_with_the_inputs_and_the_lessons_signature(verdict):
    passed, printed = verdict(check.EncoderDecoder, OnlyTheFirstEight)
    assert passed is False
    inputs = (
        r"on inputs src_vocab=\d+, tgt_vocab=\d+, d_model=\d+, n_heads=\d+, n_layers=\d+, "
        r"d_ff=\d+, dropout=0\.\d+, norm_first=(False|True), max_len=\d+, pad_id=\d+, "
        r"tie_embeddings=(False|True) your code raised TypeError: "
    )
    assert re.search(inputs, printed), printed
    assert "unexpected keyword argument 'max_len'" in printed, printed
    assert printed.rstrip().endswith(f"The constructor's signature is {SIGNATURE}"), printed


# --------------------------------------------- more wrong answers, their full words ----------


class DecodeBuildsOnlyThePaddingMask(answers.Good):
    """decode, given no target mask, masks the target's padding and forgets the causal part."""

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = padding_mask(tgt, self.pad_id)
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)


class ForwardWantsTheMasks(answers.Good):
    """forward(src, tgt, src_mask, tgt_mask), as the Annotated Transformer's model is called."""

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


class PreLNWithoutDecoderNormModule(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.decoder_norm = None

    def final(self, y):
        return y


class PostLNWithADecoderNorm(answers.Good):
    """A final norm on the decoder only, as some post-LN code keeps "to be safe"."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        if not norm_first:
            self.decoder_norm = LayerNorm(d_model)


class OutputTiedToTheTargetTable(answers.Good):
    """Press & Wolf's tying of the decoder's input and output tables, always, even when
    tie_embeddings=False."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.out.weight = self.tgt_embed.weight


class OutputTiedToTheSourceTable(answers.Good):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.out.weight.shape == self.src_embed.weight.shape:
            self.out.weight = self.src_embed.weight


class OnlyTheTargetTableTied(answers.Good):
    def tie(self):
        self.tgt_embed.weight = self.src_embed.weight


class FinalNormsWithoutGainAndBias(answers.Good):
    """nn.LayerNorm(d_model, elementwise_affine=False) for the pre-LN final norms."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        if norm_first:
            self.encoder_norm = nn.LayerNorm(d_model, elementwise_affine=False)
            self.decoder_norm = nn.LayerNorm(d_model, elementwise_affine=False)


MORE = {
    DecodeBuildsOnlyThePaddingMask: "decode(tgt, memory, src_mask), called as lesson 09 calls "
    "it (greedy decoding gives no target mask), runs the decoder's self-attention without the "
    "causal mask: every target position sees the ones after it. forward may build the mask "
    "and pass it on, but decode must build it itself when it is given none",
    ForwardWantsTheMasks: "your code raised TypeError: ForwardWantsTheMasks.forward() missing 2 "
    "required positional arguments: 'src_mask' and 'tgt_mask'. The model is called as "
    "model(src, tgt): two (B, T) tensors of token ids",
    answers.LayersAlwaysPostLN: "self.encoder_layers[0] is built with norm_first=False, but the "
    "model with norm_first=True: pass norm_first on to every layer, reference.EncoderLayer("
    "d_model, n_heads, d_ff, dropout, norm_first)",
    answers.LayersWithTheDefaultRate: "self.encoder_layers[0] drops at rate 0.1, but "
    "dropout=0.0 was asked: pass dropout on to every layer, reference.EncoderLayer(d_model, "
    "n_heads, d_ff, dropout, norm_first)",
    PreLNWithoutDecoderNormModule: "in pre-LN (norm_first=True) the decoder ends with a "
    "LayerNorm: self.decoder_norm = LayerNorm(d_model) when norm_first, else None (found None)",
    PostLNWithADecoderNorm: "in post-LN (norm_first=False) the decoder's output is normalised "
    "once more at the end: each post-LN layer ends with its own LayerNorm already, so the "
    "paper's model has no final norm (self.encoder_norm = self.decoder_norm = None; "
    "torch.nn.Transformer adds them anyway): self.decoder_norm = None when norm_first is False",
    OutputTiedToTheTargetTable: "tie_embeddings=False, but tgt_embed and out share one matrix: "
    "tie them only when asked",
    OutputTiedToTheSourceTable: "tie_embeddings=False, but src_embed and out share one matrix",
    OnlyTheTargetTableTied: "tie_embeddings=True asks for one matrix in three places, but "
    "self.out.weight is not src_embed's matrix: make them the same nn.Parameter",
    FinalNormsWithoutGainAndBias: "your model lacks parameters of the course's model: "
    "encoder_norm.weight, encoder_norm.bias, decoder_norm.weight, decoder_norm.bias",
}


@pytest.mark.parametrize("answer", MORE, ids=[a.__name__ for a in MORE])
def test_more_wrong_answers_are_named_in_full(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert MORE[answer] in printed, printed


class TiedWithTheTargetTableFirst(answers.Good):
    """Correct: tgt_embed made before src_embed and the source tied to it, so that the
    shared matrix's first name (the one named_parameters() gives) is tgt_embed.weight."""

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
        nn.Module.__init__(self)
        self.d_model, self.n_heads, self.pad_id = d_model, n_heads, pad_id
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab)
        if tie_embeddings:
            self.src_embed.weight = self.tgt_embed.weight
            self.out.weight = self.tgt_embed.weight


def test_a_tied_model_whose_target_table_comes_first_is_accepted(verdict):
    assert [n for n, _ in TiedWithTheTargetTableFirst(14, 14, 12, 3, 2, 20, tie_embeddings=True)
            .named_parameters()][0] == "tgt_embed.weight"  # fmt: skip
    passed, printed = verdict(check.EncoderDecoder, TiedWithTheTargetTableFirst)
    assert passed is True, printed


def test_an_id_past_its_table_is_explained():
    """torch's own words for an id past an embedding table get the checker's hint."""
    from course.check.assembly import _call_hint

    with pytest.raises(IndexError) as raised:
        nn.Embedding(3, 2)(torch.tensor([3]))
    assert _call_hint(str(raised.value)) == (
        "An embedding was given ids outside its vocabulary: the source is looked up in "
        "src_embed (src_vocab rows), the target in tgt_embed (tgt_vocab rows)"
    )


class OutputOverTheSourceVocabulary(answers.Good):
    def __init__(self, src_vocab, tgt_vocab, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, *args, **kwargs)
        self.out = nn.Linear(self.d_model, src_vocab)


def make_model(
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
    """A builder function, as the Annotated Transformer's make_model, that forgot its return."""
    answers.Good(src_vocab, tgt_vocab, d_model, n_heads, n_layers, d_ff, dropout, norm_first,
                 max_len, pad_id, tie_embeddings)  # fmt: skip


def test_an_output_layer_of_the_wrong_size_is_named(verdict):
    passed, printed = verdict(check.EncoderDecoder, OutputOverTheSourceVocabulary)
    assert passed is False
    assert "self.out should be nn.Linear(d_model, tgt_vocab) = nn.Linear(" in printed, printed
    assert "the scores over the target vocabulary; found Linear(in_features=" in printed, printed


def test_a_builder_that_returns_nothing_is_told_what_to_write(verdict):
    passed, printed = verdict(check.EncoderDecoder, make_model)
    assert passed is False
    assert re.search(
        r"EncoderDecoder\(\d+, \d+, .*\) gave a NoneType, not an nn\.Module: write "
        r"`class EncoderDecoder\(nn\.Module\)`",
        printed,
    ), printed


class LogitsScaledLikeScores(answers.Good):
    """The logits divided by sqrt(d_model), as the attention scores are: no diagnosis has a
    name for it, so the verdict shows the values."""

    def forward(self, src, tgt):
        return super().forward(src, tgt) / self.d_model**0.5


def test_the_call_a_verdict_shows_builds_the_model_it_judged(verdict):
    """The model in a verdict is shown as a call a learner can paste to rebuild it."""
    passed, printed = verdict(check.EncoderDecoder, LogitsScaledLikeScores)
    assert passed is False
    shown = re.search(r"the output of (EncoderDecoder\(.*?\)) in eval mode", printed)
    assert shown, printed
    model = eval(shown.group(1), {"EncoderDecoder": answers.Good})  # noqa: S307 - our own text
    assert isinstance(model, answers.Good)
    assert model.src_embed.num_embeddings != model.tgt_embed.num_embeddings  # untied: two sizes
    assert len(model.encoder_layers) >= 2 and model.encoder_norm is None  # post-LN


# ------------------------------------------- mistakes named by the values they give ----------


class DecoderLayersNotChained(answers.Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            h = layer(y, memory, tgt_mask, src_mask)  # <- every layer reads the embeddings
        return self.out(self.final(h))


class NoStackChained(answers.LayersNotChained, DecoderLayersNotChained):
    pass


class PostLNFunctionalNormOnTheMemory(answers.Good):
    def encode(self, src, src_mask):
        return F.layer_norm(super().encode(src, src_mask), (self.d_model,))


class PostLNFunctionalNormsOnBoth(
    PostLNFunctionalNormOnTheMemory, answers.PostLNFunctionalFinalNorm
):
    pass


CHAINS_AND_NORMS = {
    DecoderLayersNotChained: "every decoder layer reads the embeddings, and only the last one's "
    "output is kept",
    NoStackChained: "every encoder and decoder layer reads the embeddings, and only the last "
    "one's output is kept",
    PostLNFunctionalNormOnTheMemory: "in post-LN (norm_first=False) the encoder's output is "
    "normalised once more at the end",
    PostLNFunctionalNormsOnBoth: "in post-LN (norm_first=False) the output of both stacks is "
    "normalised once more at the end",
}


@pytest.mark.parametrize("answer", CHAINS_AND_NORMS, ids=[a.__name__ for a in CHAINS_AND_NORMS])
def test_unchained_stacks_and_functional_norms_are_named_by_where(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False, printed
    assert CHAINS_AND_NORMS[answer] in printed, printed


@pytest.mark.parametrize("hard_coded", [1, 2, 3])
def test_a_hard_coded_pad_id_is_named_whichever_it_is(hard_coded, verdict):
    """fairseq's dictionaries put <pad> at 1; any constant in place of self.pad_id is
    named with the id it used, on the first case whose pad_id differs."""

    class PadIdHardCoded(answers.Good):
        def masks(self, src, tgt):
            return padding_mask(src, hard_coded), decoder_mask(tgt, hard_coded)

    passed, printed = verdict(check.EncoderDecoder, PadIdHardCoded)
    assert passed is False
    assert re.search(
        rf"the masks are built from token id {hard_coded}, not from pad_id=\d: use the pad_id "
        "the model was built with",
        printed,
    ), printed


class MasksFromLengths(answers.Good):
    """Correct: the padding masks from each sentence's length (the real tokens come first,
    then padding), as code that keeps lengths builds them."""

    def masks(self, src, tgt):
        def from_lengths(tokens):
            lengths = (tokens != self.pad_id).sum(dim=1)  # (B,)
            return (torch.arange(tokens.shape[1]) < lengths[:, None])[:, None, None, :]

        return from_lengths(src), from_lengths(tgt) & causal_mask(tgt.shape[1])


def test_masks_built_from_lengths_are_accepted(verdict):
    passed, printed = verdict(check.EncoderDecoder, MasksFromLengths)
    assert passed is True, printed


@pytest.mark.parametrize("pad_id", [0, 1, 3])
def test_the_checkers_sentences_are_real_tokens_then_padding(pad_id):
    """What its docstring promises: pad_id never among the real tokens, a 0 among them
    when pad_id is not 0 (so that a hard-coded 0 shows), padding after the lengths."""
    from course.check.assembly import _tokens

    gen = torch.Generator().manual_seed(pad_id)
    lengths, T, vocab = [20, 8, 14], 20, 5  # 42 real tokens drawn from 4 ids
    ids = _tokens(gen, lengths, T, vocab, pad_id)
    assert ids.shape == (3, T) and ids.dtype == torch.long
    real = torch.arange(T) < torch.tensor(lengths)[:, None]
    assert (ids[real] != pad_id).all() and (ids[~real] == pad_id).all()
    assert ids.min() >= 0 and ids.max() < vocab
    if pad_id != 0:
        assert (ids[:, 0] == 0).all()


class DecoderLayersAlwaysPostLN(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(d_model, n_heads, d_ff, dropout, False) for _ in range(n_layers)]
        )


def test_the_decoder_stack_is_judged_as_the_encoders(verdict):
    passed, printed = verdict(check.EncoderDecoder, DecoderLayersAlwaysPostLN)
    assert passed is False
    assert (
        "self.decoder_layers[0] is built with norm_first=False, but the model with "
        "norm_first=True: pass norm_first on to every layer, reference.DecoderLayer(d_model, "
        "n_heads, d_ff, dropout, norm_first)"
    ) in printed, printed


def test_a_crash_in_forward_names_the_inputs_it_was_given(verdict):
    passed, printed = verdict(check.EncoderDecoder, ForwardWantsTheMasks)
    assert passed is False
    assert re.search(
        r"on inputs src \(\d+, \d+\), tgt \(\d+, \d+\) your code raised TypeError", printed
    ), printed


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("tie, pad_id", [(False, 0), (True, 3)])
def test_the_checkers_variants_with_no_mistake_are_the_reference(norm_first, tie, pad_id):
    """The checker names a mistake by rebuilding the reference's forward from its parts
    with that one mistake switched on: with none switched on, it is the reference."""
    from course.check import assembly

    gen = torch.Generator().manual_seed(5)
    ref = assembly._reference(gen, norm_first, 0.1, tie, pad_id, False)
    src = assembly._tokens(gen, [7, 4], 7, ref.src_vocab, pad_id)
    tgt = assembly._tokens(gen, [5, 3], 5, ref.tgt_vocab, pad_id)
    with torch.no_grad():
        want = ref(src, tgt)
        got = assembly._variant(ref, src, tgt)
        assert torch.allclose(got, want, atol=1e-6), (got - want).abs().max()
        # and each mistake's variant differs from it
        for diagnosis, wrong in assembly._mistakes(ref, src, tgt, norm_first, tie).items():
            assert not torch.allclose(wrong, want, atol=1e-4), diagnosis


def test_the_cases_are_what_the_passing_verdict_says(verdict):
    """The ✅ line tells a learner what was tried; the checker's cases must hold each claim."""
    from course.check.assembly import _CASES

    passed, printed = verdict(check.EncoderDecoder, answers.Good)
    assert passed is True
    claims = (
        f"{len(_CASES)} cases, post-LN and pre-LN, tied and untied: source and target padding, "
        "pad_id 0 and not 0, T_src = T_tgt and not, a batch of one in float64"
    )
    assert claims in printed, printed
    norm_firsts, ties, pad_ids = ({case[i] for case in _CASES} for i in range(3))
    assert norm_firsts == {False, True} and ties == {False, True}
    assert 0 in pad_ids and pad_ids - {0}
    assert any(min(c[3][0]) < c[3][1] for c in _CASES)  # a source sentence shorter than T_src
    assert any(min(c[4][0]) < c[4][1] for c in _CASES)  # a target sentence shorter than T_tgt
    assert {c[3][1] == c[4][1] for c in _CASES} == {False, True}  # T_src = T_tgt and not
    assert any(c[5] and len(c[3][0]) == len(c[4][0]) == 1 for c in _CASES)  # one, float64
    # every combination of the arrangement and the tying is tried
    assert {(c[0], c[1]) for c in _CASES} == {(a, t) for a in (False, True) for t in (False, True)}


# ------------------------------------------------ where a value mistake was seen ----------
# "the output of EncoderDecoder(...) in eval mode (<the case>)": the model as a call, the
# case in words, consistent with each other.

CASE = (
    r"the output of EncoderDecoder\(\d+, \d+, \d+, \d+, \d+, \d+, 0\.\d, (?P<norm_first>\w+), "
    r"max_len=\d+, pad_id=(?P<pad>\d), tie_embeddings=(?P<tie>\w+)\) in eval mode "
    r"\((?P<arrangement>pre|post)-LN, (?P<tied>tied|untied), pad_id=(?P<pad_again>\d), "
    r"src \(\d+, \d+\) and tgt \(\d+, \d+\) with padding(?P<wide>, float64)?\)"
)


class LogitsSqueezed(answers.Good):
    """.squeeze() on the logits, "to drop a size-1 axis": a batch of one loses its batch."""

    def forward(self, src, tgt):
        return super().forward(src, tgt).squeeze()


def _case_in(printed: str) -> re.Match:
    case = re.search(CASE, printed)
    assert case, printed
    assert case["norm_first"] == {"pre": "True", "post": "False"}[case["arrangement"]], printed
    assert case["tie"] == {"tied": "True", "untied": "False"}[case["tied"]], printed
    assert case["pad"] == case["pad_again"], printed
    return case


def test_a_value_mistake_names_its_case_in_words(verdict):
    passed, printed = verdict(check.EncoderDecoder, LogitsScaledLikeScores)
    assert passed is False
    case = _case_in(printed)
    assert case["wide"] is None and printed.rstrip().endswith(")"), printed
    assert f"{case[0]} is not right: at index (" in printed, printed


def test_a_mistake_seen_only_in_the_batch_of_one_says_float64(verdict):
    passed, printed = verdict(check.EncoderDecoder, LogitsSqueezed)
    assert passed is False
    assert _case_in(printed)["wide"] == ", float64", printed


def test_dropout_in_eval_mode_is_told_with_its_case(verdict):
    passed, printed = verdict(check.EncoderDecoder, answers.DropoutAlsoInEval)
    assert passed is False
    case = _case_in(printed)
    said = f"{case[0]}: two calls give different outputs, so something is dropped in eval mode"
    assert said in printed, printed


def test_a_mask_missing_only_in_eval_mode_is_told_with_its_case(verdict):
    passed, printed = verdict(check.EncoderDecoder, answers.CausalOnlyWhileTraining)
    assert passed is False
    case = _case_in(printed)
    assert f"{case[0]}: the decoder's self-attention has no causal mask" in printed, printed
    assert "depends on self.training" in printed, printed
    assert ". This happens in eval mode only" in printed and ".. This" not in printed, printed
    assert printed.count(case[0]) == 1, printed  # the case told once, not once per message


def test_the_decoder_state_returned_is_told_to_be_the_logits(verdict):
    passed, printed = verdict(check.EncoderDecoder, answers.ReturnsTheDecoderState)
    assert passed is False
    case = _case_in(printed)
    assert f"{case[0]} has shape (2, 5, 12), expected (2, 5, 11)" in printed, printed
    assert (
        "It is the logits (B, T_tgt, tgt_vocab): one score per target position and target token"
    ) in printed, printed


# ------------------------------------------ encode and decode, as lesson 09 calls them ----------


class EncodeReturnsTheMaskToo(answers.Good):
    """encode returns (memory, src_mask), "to pass the mask on"; forward unpacks it."""

    def encode(self, src, src_mask):
        return super().encode(src, src_mask), src_mask

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        memory, _ = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask, tgt_mask)


class DecodeReturnsTheStateToo(answers.Good):
    """decode returns (logits, y); forward keeps the logits."""

    def decode(self, tgt, memory, src_mask, tgt_mask=None):
        return super().decode(tgt, memory, src_mask, tgt_mask), None

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)[0]


class EncodeMakesItsOwnMask(answers.Good):
    """encode(src) builds the mask itself; forward calls it so, lesson 09 cannot."""

    def encode(self, src):
        return super().encode(src, padding_mask(src, self.pad_id))

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        return self.decode(tgt, self.encode(src), src_mask, tgt_mask)


class DecodeWantsTheTargetMask(answers.Good):
    def decode(self, tgt, memory, src_mask, tgt_mask):
        return self.run_decoder(tgt, memory, tgt_mask, src_mask)


ENCODE_DECODE = {
    EncodeReturnsTheMaskToo: r"(?P<what>model\.encode\(src, src_mask\) in eval mode \(.+?\)) "
    r"returned a tuple of 2 things; lesson 09 takes one tensor from it, memory = "
    r"model\.encode\(src, src_mask\)",
    DecodeReturnsTheStateToo: r"(?P<what>model\.decode\(tgt, memory, src_mask\) in eval mode "
    r"\(.+?\)) returned a tuple of 2 things; lesson 09 takes one tensor from it, logits = "
    r"model\.decode\(tokens, memory, src_mask\)",
    EncodeMakesItsOwnMask: r"on inputs src \(\d+, \d+\), src_mask \(\d+, 1, 1, \d+\)[^:]* your "
    r"code raised TypeError: .*Lesson 09 calls model\.encode\(src, src_mask\) and "
    r"model\.decode\(tgt, memory, src_mask\): decode takes three arguments",
    DecodeWantsTheTargetMask: r"on inputs tgt \(\d+, \d+\), memory \(\d+, \d+, \d+\)[^,]*, "
    r"src_mask \(\d+, 1, 1, \d+\)[^:]* your code raised TypeError: .*Lesson 09 calls",
}


@pytest.mark.parametrize("answer", ENCODE_DECODE, ids=[a.__name__ for a in ENCODE_DECODE])
def test_encode_and_decode_are_called_as_lesson_09_calls_them(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False
    said = re.search(ENCODE_DECODE[answer], printed)
    assert said, printed
    if "what" in said.groupdict():
        assert re.fullmatch(r".+ in eval mode \((pre|post)-LN, (un)?tied, .+\)", said["what"])


@pytest.mark.parametrize(
    "answer, diagnosis",
    [
        (answers.MemoryDetachedInDecode, "the values are right, but the memory"),
        (answers.DetachedEmbeddings, "the values are right, but the embeddings are detached"),
    ],
)
def test_a_part_cut_off_from_the_gradients_is_named_with_its_case(answer, diagnosis, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False
    assert f"{_case_in(printed)[0]}: {diagnosis}" in printed, printed


@pytest.mark.parametrize("answer", [a for a in SAID if a is not answers.CausalOnlyWhileTraining])
def test_a_mistake_made_in_both_modes_is_not_said_to_be_eval_only(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False
    assert "This happens in eval mode only" not in printed, printed


class HandMadeDropoutUnscaled(answers.Good):
    """Dropout written by hand, a mask of rand > p, without the 1 / (1 - p)."""

    def embed(self, table, tokens):
        x = table(tokens) * self.d_model**0.5 + self.pe[: tokens.shape[1]]
        if self.training:
            x = x * (torch.rand_like(x) > self.dropout.p)
        return x


def test_hand_made_dropout_without_the_rescale_is_named_where_it_is(verdict):
    passed, printed = verdict(check.EncoderDecoder, HandMadeDropoutUnscaled)
    assert passed is False
    assert re.search(
        r"\(post-LN\) in training mode: what the first encoder layer receives: the values that "
        r"survive dropout are not rescaled: multiply them by 1 / \(1 - p\)",
        printed,
    ), printed
