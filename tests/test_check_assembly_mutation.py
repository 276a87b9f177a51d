"""Lesson 08's assembly checker: the words of each diagnosis, written out (issue 32).

tests/test_check_assembly.py finds each diagnosis by the checker's own constant
(diagnoses.NO_SCALE, ...), which a change to that constant changes alike: tools/mutation.py
showed that an altered diagnosis went unnoticed. Here each wrong answer's message is
checked for the key words a learner reads, as written in the lesson's terms.
"""

import re

import pytest
import test_check_assembly as answers

from course import check

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
    "dropout=0.0) your model gives the right logits, so your masks depend on self.training",
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
