"""Lesson 08's assembly checker: the diagnoses made after a case's values or gradients are
wrong, each one earned by a wrong answer that needs it.

A float64 case that only float64 breaks; a mistake seen in eval mode only, told as such
in a float32 case; embeddings or a memory detached where the model is tied (the shared
matrix still learns there, so only a part is cut off); a cut seen once and gone on the next
call; logits wrong only at the target's padding, and a near miss everywhere that is not
that; a model that cannot be built at dropout=0.0 is not "right in training mode".
tools/mutation.py showed each of these went unchecked (lines 670-780 of
course/check/assembly.py).
"""

import math

import test_check_assembly as answers
import torch
import torch.nn.functional as F
from torch import nn

from course import check

EVAL_ONLY = (
    "This happens in eval mode only: in training mode (at dropout=0.0) your model gives the "
    "right logits, so your forward depends on self.training"
)
NO_CAUSAL = (
    "the decoder's self-attention has no causal mask: every target position sees the words after it"
)
EMBEDDINGS_DETACHED = (
    "the values are right, but the embeddings are detached (.detach(), .data or "
    "torch.no_grad()), so the embedding tables never learn"
)
MEMORY_DETACHED = (
    "the values are right, but the memory (the encoder's output) is detached before the decoder"
)
PADDED_ONLY = (
    "the logits are right at every real target position and differ from the course model's "
    "only at the target's padded positions"
)
NO_SCALE = (
    "the embeddings are not multiplied by sqrt(d_model): the paper scales each token's "
    "vector, embedding(tokens) * math.sqrt(d_model)"
)
# the cases as the verdict names them
FLOAT32_FIRST = "(post-LN, untied, pad_id=0, src (2, 5) and tgt (2, 5) with padding)"
PRE_LN_UNTIED = "(pre-LN, untied, pad_id=0, src (2, 5) and tgt (2, 5) with padding)"
FIRST_TIED = "(post-LN, tied, pad_id=3, src (2, 7) and tgt (2, 5) with padding)"


def _rejected(verdict, answer) -> str:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    return printed


# ------------------------------------------------------------- float64 ----------


class OneHotEmbedding(answers.Good):
    """The embedding as one-hot rows times the table, the one-hot made .float(): right in
    float32, a dtype clash once the model is float64."""

    def embed(self, table, tokens):
        one_hot = F.one_hot(tokens, table.num_embeddings).float()  # (B, T, vocab)
        x = one_hot @ table.weight * math.sqrt(self.d_model)  # (B, T, d_model)
        return self.dropout(x + self.pe[: tokens.shape[1]])


def test_an_answer_right_in_float32_only_is_stopped_at_the_float64_case(verdict):
    """Every float32 case passes; the float64 one (a batch of one) is where it breaks."""
    printed = _rejected(verdict, OneHotEmbedding)
    assert "on inputs src (1, 6), tgt (1, 5) your code raised RuntimeError" in printed, printed
    assert "Your code mixes float32 and float64" in printed, printed


class OneHotCausalOnlyWhileTraining(OneHotEmbedding, answers.CausalOnlyWhileTraining):
    """Both at once: the causal mask built only `if self.training`, the one-hot embedding."""


def test_an_eval_only_mistake_is_told_as_such_in_a_float32_case(verdict):
    """Rebuilt at dropout=0.0 for the training-mode run, the model stays float32 in a
    float32 case: there it is right in training mode, and the verdict says so."""
    printed = _rejected(verdict, OneHotCausalOnlyWhileTraining)
    assert f"in eval mode {FLOAT32_FIRST}: {NO_CAUSAL}" in printed, printed
    assert EVAL_ONLY in printed, printed


# ------------------------------------------------------------ tied models ----------


class EmbeddingsDetachedWhenTied(answers.Good):
    """Tied: the lookups use the shared matrix detached, "self.out trains it already". The
    matrix still gets a gradient (through self.out), only not the embeddings' share."""

    @property
    def tied(self):
        return self.out.weight is self.src_embed.weight

    def embed(self, table, tokens):
        x = super().embed(table, tokens)
        return x.detach() if self.tied else x


def test_embeddings_detached_in_a_tied_model_are_named(verdict):
    """No parameter is left without a gradient: the slopes themselves are compared with
    those of the course model with its embeddings detached."""
    printed = _rejected(verdict, EmbeddingsDetachedWhenTied)
    assert f"in eval mode {FIRST_TIED}: {EMBEDDINGS_DETACHED}" in printed, printed
    assert "your values are right, but the gradient with respect to" not in printed, printed


class MemoryDetachedWhenTied(answers.Good):
    """Tied: the memory detached before the decoder. The shared matrix learns through the
    target's side, so exactly the encoder's parameters are cut off."""

    @property
    def tied(self):
        return self.out.weight is self.src_embed.weight

    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        memory = memory.detach() if self.tied else memory
        return super().run_decoder(tgt, memory, tgt_mask, src_mask)


def test_a_memory_detached_in_a_tied_model_is_named_though_the_table_learns(verdict):
    printed = _rejected(verdict, MemoryDetachedWhenTied)
    assert f"in eval mode {FIRST_TIED}: {MEMORY_DETACHED}" in printed, printed
    assert "no gradient reaches encoder_layers" not in printed, printed


# ------------------------------------------------------- a cut seen once ----------


class MemoryKeptForTheNextCall(answers.Good):
    """The memory of a call made under torch.no_grad() (decoding) kept for the next call on
    the same source, and used once: the first call with gradients gets a memory cut from
    the graph, the one after it a fresh memory."""

    def encode(self, src, src_mask):
        kept = self.__dict__.pop("kept", None)
        if kept is not None and torch.equal(kept[0], src):
            memory = kept[1]
        else:
            memory = super().encode(src, src_mask)
        if not torch.is_grad_enabled():
            self.kept = (src, memory)
        return memory


def test_a_cut_that_is_gone_on_the_next_call_is_not_blamed_on_the_embeddings(verdict):
    """Looked for again, nothing is cut: the verdict keeps what was seen, the parameter no
    gradient reached, and names neither detached embeddings nor a detached memory."""
    printed = _rejected(verdict, MemoryKeptForTheNextCall)
    assert f"in eval mode {FLOAT32_FIRST}: no gradient reaches src_embed.weight" in printed
    assert "the embeddings are detached" not in printed, printed
    assert "the memory (the encoder's output) is detached" not in printed, printed


# ------------------------------------------------------ the target's padding ----------


class PaddedEmbeddingsZeroed(answers.Good):
    """The embeddings + positions of padded tokens set to zero, "as padding_idx does": no
    real position reads a padded one, so only the padded positions' logits change."""

    def embed(self, table, tokens):
        x = super().embed(table, tokens)  # (B, T, d_model)
        return x.masked_fill((tokens == self.pad_id)[..., None], 0.0)


def test_logits_wrong_only_at_the_padded_target_positions_are_named(verdict):
    """None of the usual mistakes gives these logits: the real positions, compared alone,
    name it."""
    printed = _rejected(verdict, PaddedEmbeddingsZeroed)
    assert PADDED_ONLY in printed, printed
    assert "embeddings zeroed or changed?" in printed, printed  # a cause that fits it
    assert "is masked on the query axis (rows" not in printed, printed  # not the mask's case
    assert "is not right: at index" not in printed, printed


class StdLayerNorm(nn.Module):
    """The Annotated Transformer's LayerNorm: the unbiased std, eps added to it."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class FinalNormsWithTheStd(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        if norm_first:
            self.encoder_norm, self.decoder_norm = StdLayerNorm(d_model), StdLayerNorm(d_model)


def test_a_near_miss_at_every_position_is_not_called_padding_only(verdict):
    """The final norms a few percent off: the logits are off by about 0.1 at real positions
    too, which is a wrong answer, not one right at the real positions."""
    printed = _rejected(verdict, FinalNormsWithTheStd)
    assert f"in eval mode {PRE_LN_UNTIED} is not right: at index" in printed, printed
    assert "only at the target's padded positions" not in printed, printed


# ------------------------------------------ right in training mode, or not built ----------


class DefaultRateAndNoScale(answers.LayersWithTheDefaultRate, answers.NoScale):
    """The layers built without the rate (their default 0.1), and the scale forgotten: at
    dropout=0.0 the model cannot be built as asked, so it is not right in training mode."""


def test_a_model_not_built_at_dropout_zero_is_not_called_right_in_training(verdict):
    printed = _rejected(verdict, DefaultRateAndNoScale)
    assert NO_SCALE in printed, printed
    assert "This happens in eval mode only" not in printed, printed
