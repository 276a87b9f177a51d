"""Lesson 08's assembly checker: eight answers judged wrongly (issue 32: five from its
helpers' wrong-answer bank, one found by mutation testing, two tried since), each written
as a learner would and tested before the fix.

- masks without padding in training mode only: passed, since the training-mode checks
  used sentences with no padding;
- float32 logits out of a float64 model: told "right in training mode, masks depend on
  self.training", since the training-mode comparison ignored the dtype;
- torch.manual_seed inside forward: told "nothing is dropped", though dropout happens,
  the same on every call;
- a model that skips the source's padding masks (in eval mode, for an unpadded target):
  told its masks come from token id 1, an id the batch does not hold;
- nn.Embedding(vocab, d_model, padding_idx=pad_id): a common, harmless choice (lesson 09's
  GRU makes it) rejected as "something cut from the graph"; a padding_idx other than
  pad_id is named instead;
- the causal mask alone, no padding masks: a bare value difference (or, under a mutant, a
  pad id the batch does not hold); now told that only the causal mask is there;
- pre-LN with a final norm skipped while training: told to pass the constructor's dropout
  on, "not a fixed rate", though nothing random differs; now told that its forward depends
  on self.training.
"""

import pytest
import test_check_assembly as answers
import torch
from torch import nn

from course import check
from course.masking import causal_mask


def _rejected(verdict, answer) -> str:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    return printed


def _accepted(verdict, answer) -> None:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is True and printed.startswith("✅ EncoderDecoder: passed"), printed


# ------------------------------------------------ masks that depend on self.training ----------


class NoPaddingWhileTraining(answers.Good):
    """The padding masks built for decoding only: training batches "are full anyway"."""

    def masks(self, src, tgt):
        if self.training:
            return None, causal_mask(tgt.shape[1])
        return super().masks(src, tgt)


class NoSourcePaddingWhileTraining(answers.Good):
    """The source's padding mask for decoding only; the target's is built in both modes."""

    def masks(self, src, tgt):
        src_mask, tgt_mask = super().masks(src, tgt)
        return (None if self.training else src_mask), tgt_mask


class NoTargetPaddingWhileTraining(answers.Good):
    """While training only the causal mask on the target; the source's padding in both."""

    def masks(self, src, tgt):
        src_mask, tgt_mask = super().masks(src, tgt)
        return src_mask, (causal_mask(tgt.shape[1]) if self.training else tgt_mask)


@pytest.mark.parametrize(
    "answer", [NoPaddingWhileTraining, NoSourcePaddingWhileTraining, NoTargetPaddingWhileTraining]
)
def test_padding_masked_in_eval_mode_only_is_caught_in_training_mode(verdict, answer):
    printed = _rejected(verdict, answer)
    assert "in training mode (at dropout=0.0)" in printed, printed
    assert "sentences with padding" in printed and "self.training" in printed, printed
    assert "not a fixed rate" not in printed, printed  # not blamed on the dropout rate


# ------------------------------------------------------------ float64 in, float32 out ----------


class Float32Logits(answers.Good):
    """.float() on the logits "to be safe": a float64 model answers in float32."""

    def forward(self, src, tgt):
        return super().forward(src, tgt).float()


def test_float32_logits_of_a_float64_model_are_not_called_an_eval_only_mistake(verdict):
    printed = _rejected(verdict, Float32Logits)
    assert "float64" in printed and "float32" in printed, printed
    assert "eval mode only" not in printed and "self.training" not in printed, printed


# ---------------------------------------------------------------- a seed in forward ----------


class SeededForward(answers.Good):
    """torch.manual_seed(0) at the top of forward, "for reproducibility"."""

    def forward(self, src, tgt):
        torch.manual_seed(0)
        return super().forward(src, tgt)


def test_a_seed_inside_forward_is_named_not_called_no_dropout(verdict):
    with torch.random.fork_rng():
        printed = _rejected(verdict, SeededForward)
    assert "two calls give the same output" in printed, printed
    assert "so nothing is dropped" not in printed, printed
    assert "the same" in printed and "manual_seed" in printed, printed


# ------------------------------------------ a pad id named only when the batch holds it ----------


class NoSourceMasksWhenDecodingUnpadded(answers.Good):
    """The source's padding masked only while the target has padding, in eval mode."""

    def masks(self, src, tgt):
        src_mask, tgt_mask = super().masks(src, tgt)
        if not self.training and bool((tgt != self.pad_id).all()):
            return None, tgt_mask
        return src_mask, tgt_mask


def test_a_pad_id_the_batch_does_not_hold_is_never_named(verdict):
    printed = _rejected(verdict, NoSourceMasksWhenDecodingUnpadded)
    assert "token id" not in printed, printed
    assert "source's padding" in printed and "padding_mask(src, pad_id)" in printed, printed
    assert "eval mode only" in printed, printed


# ------------------------------------------------------------------- padding_idx ----------


class PaddingIdx(answers.Good):
    """nn.Embedding(vocab, d_model, padding_idx=pad_id) on both sides, as lesson 09's GRU."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, pad_id=0, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, pad_id=pad_id, **kwargs)
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        if kwargs.get("tie_embeddings"):
            self.tie()


class PaddingIdxZero(answers.Good):
    """padding_idx=0 written in, whatever pad_id the model is given."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=0)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=0)
        if kwargs.get("tie_embeddings"):
            self.tie()


def test_padding_idx_equal_to_pad_id_is_accepted(verdict):
    _accepted(verdict, PaddingIdx)


def test_a_padding_idx_other_than_pad_id_is_named(verdict):
    printed = _rejected(verdict, PaddingIdxZero)
    assert "padding_idx=0" in printed and "pad_id=3" in printed, printed
    assert "self.src_embed" in printed, printed
    assert "cut from the graph" not in printed, printed


# ------------------------------------------------ the causal mask, and nothing else ----------


class CausalMaskOnly(answers.Good):
    """The decoder "must not look ahead": the causal mask taken as the only one it needs."""

    def masks(self, src, tgt):
        return None, causal_mask(tgt.shape[1])


def test_the_causal_mask_alone_is_told_that_both_padding_masks_are_missing(verdict):
    printed = _rejected(verdict, CausalMaskOnly)
    assert "token id" not in printed, printed  # not a pad id the batch does not hold
    assert "only the causal mask" in printed, printed
    assert "padding_mask(src, pad_id)" in printed and "decoder_mask" in printed, printed


# ----------------------------------------- an eval-only difference with no diagnosis ----------


class LogProbabilitiesWhenDecoding(answers.Good):
    """log_softmax on the logits in eval mode, "since decoding wants log-probabilities"."""

    def forward(self, src, tgt):
        logits = super().forward(src, tgt)
        return logits if self.training else logits.log_softmax(dim=-1)


def test_an_eval_only_value_difference_tells_its_case_once(verdict):
    printed = _rejected(verdict, LogProbabilitiesWhenDecoding)
    assert "is not right: at index" in printed and "eval mode only" in printed, printed
    assert printed.count("in eval mode (post-LN") == 1, printed


# ------------------------------------ a deterministic difference in training mode ----------


class NoEncoderNormWhileTraining(answers.Good):
    """Pre-LN: the encoder's final norm applied for decoding only."""

    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x if self.encoder_norm is None or self.training else self.encoder_norm(x)


class NoDecoderNormWhileTraining(answers.Good):
    """Pre-LN: the decoder's final norm skipped while training."""

    def final(self, y):
        return y if self.decoder_norm is None or self.training else self.decoder_norm(y)


@pytest.mark.parametrize("answer", [NoEncoderNormWhileTraining, NoDecoderNormWhileTraining])
def test_a_step_skipped_while_training_is_not_blamed_on_a_fixed_dropout_rate(verdict, answer):
    """Wrong in training mode at dropout=0.0, the same on every call: nothing random, so
    the rate is not the cause; the forward's dependence on self.training is."""
    printed = _rejected(verdict, answer)
    assert "in training mode gives wrong logits although dropout=0.0" in printed, printed
    assert "the same on every call" in printed and "depends on self.training" in printed
    assert "not a fixed rate" not in printed, printed
