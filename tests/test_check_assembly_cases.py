"""Lesson 08's assembly checker: what its cases must hold for its verdicts to be right.

check.EncoderDecoder judges a model on a few batches (course/check/assembly.py, _CASES):
post-LN and pre-LN, tied and untied, pad_id 0 and not 0, T_src = T_tgt and not, a batch
of one in float64. Each case is there to catch some mistake that the others let through.
Here each such mistake is written as a learner would, and the verdict must name it on
the case that exists for it: the message shows the case in words, "(pre-LN, tied,
pad_id=1, src (1, 6) and tgt (1, 5) with padding, float64)". The batches a correct
model receives must be what the passing verdict claims: padded as real batches are.

The checker's own models of the mistakes (_variant) are compared with the learner's
mistaken models they stand for, values and gradients.
"""

import math

import pytest
import test_check_assembly as answers
import torch
import torch.nn.functional as F

from course import check
from course.check import assembly
from course.masking import causal_mask, decoder_mask, padding_mask

EVAL_ONLY = "This happens in eval mode only"


def _rejected(verdict, answer) -> str:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    return printed


# ------------------------------------------- the batches a correct model is given ----------


def test_every_listed_length_is_the_length_of_a_sentence():
    """A length above its T would silently make a full sentence, not the one listed."""
    gen = torch.Generator().manual_seed(0)
    for _, _, pad_id, *sides, _ in assembly._CASES:
        for lengths, T in sides:
            ids = assembly._tokens(gen, lengths, T, 14, pad_id)
            assert (ids != pad_id).sum(dim=1).tolist() == lengths, (lengths, T)


def test_the_cases_are_padded_batches_as_the_verdict_says(verdict):
    """What a correct model receives, case by case: the source padded in every case (the
    encoder's and the cross-attention's masks are judged in each arrangement, tying and
    dtype); a batch of two padded to its longest sentence on each side, the other one
    shorter (so that a mask taken from one sentence, or from none, shows)."""
    batches = []

    class Recording(answers.Good):
        def forward(self, src, tgt):
            if not hasattr(self, "first_seen"):  # each case builds its own model
                self.first_seen = self.training
                if not self.training:
                    batches.append((src, tgt, self.pad_id))
            return super().forward(src, tgt)

    passed, printed = verdict(check.EncoderDecoder, Recording)
    assert passed is True, printed
    n_cases = int(printed.split("passed (")[1].split(" cases")[0])
    assert len(batches) == n_cases, printed
    for src, tgt, pad_id in batches:
        shapes = (tuple(src.shape), tuple(tgt.shape), pad_id)
        assert bool((src == pad_id).any()), f"no source padding in {shapes}"
        if src.shape[0] == 2:
            for side in (src, tgt):
                real = (side != pad_id).sum(dim=1).tolist()
                assert sorted(real)[1] == side.shape[1] > sorted(real)[0], (real, shapes)


# ----------------------------------- mistakes that only one kind of case shows ----------


class PreLNNormOnTheEmbeddings(answers.Good):
    """norm_first read as "normalise the input first": encoder_norm on the embeddings,
    before the stack, instead of after it."""

    def encode(self, src, src_mask):
        if self.encoder_norm is None:
            return super().encode(src, src_mask)
        x = self.encoder_norm(self.embed(self.src_embed, src))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x


class SourceMaskFromIdZero(answers.Good):
    """The source's mask built with a 0 left over from examples where pad_id was 0; the
    target's from self.pad_id."""

    def masks(self, src, tgt):
        return padding_mask(src, 0), decoder_mask(tgt, self.pad_id)


class PreLNPathSourceMaskFromIdZero(answers.Good):
    """One forward per arrangement; the pre-LN one builds the source's mask with id 0."""

    def masks(self, src, tgt):
        if self.encoder_norm is not None:
            return SourceMaskFromIdZero.masks(self, src, tgt)
        return super().masks(src, tgt)


class NoSourceMaskForOneSentence(answers.Good):
    """ "A single sentence has no padding": the source's mask skipped for a batch of one."""

    def masks(self, src, tgt):
        src_mask, tgt_mask = super().masks(src, tgt)
        return (None if src.shape[0] == 1 else src_mask), tgt_mask


class NoPaddingMasksWhenDecodingUnpadded(answers.Good):
    """An inference shortcut: in eval mode, a batch whose target has no padding (as in
    greedy decoding) skips the padding masks, the source's included; the causal mask is
    kept."""

    def masks(self, src, tgt):
        if not self.training and bool((tgt != self.pad_id).all()):
            return None, causal_mask(tgt.shape[1])
        return super().masks(src, tgt)


NAMED_ON = {
    # the first pre-LN case
    PreLNNormOnTheEmbeddings: "(pre-LN, untied, pad_id=0, src (2, 5) and tgt (2, 5) with "
    "padding) is not right",
    # the first case whose pad_id is not 0, and whose source holds a real token 0
    SourceMaskFromIdZero: "(post-LN, tied, pad_id=3, src (2, 7) and tgt (2, 5) with padding) "
    "is not right",
    # the first pre-LN case whose pad_id is not 0
    PreLNPathSourceMaskFromIdZero: "(pre-LN, tied, pad_id=3, src (2, 6) and tgt (2, 4) with "
    "padding) is not right",
    # the one batch whose target has no padding (its source has)
    NoPaddingMasksWhenDecodingUnpadded: "(post-LN, untied, pad_id=2, src (1, 7) and tgt (1, 4) "
    "with padding, float64): ",
}


def test_a_source_mask_skipped_for_a_batch_of_one_is_named(verdict):
    """Only the batch of one (its source padded) shows it; the diagnosis names the mask."""
    printed = _rejected(verdict, NoSourceMaskForOneSentence)
    assert "the source's padding is masked nowhere" in printed, printed


@pytest.mark.parametrize("answer", NAMED_ON, ids=[a.__name__ for a in NAMED_ON])
def test_a_mistake_only_one_kind_of_case_shows_is_named_on_that_case(answer, verdict):
    printed = _rejected(verdict, answer)
    assert NAMED_ON[answer] in printed, printed
    said_eval_only = EVAL_ONLY in printed
    assert said_eval_only is (answer is NoPaddingMasksWhenDecodingUnpadded), printed


def _only_in(norm_first: bool):
    class TargetPaddingToTheCrossAttentionInOnePath(answers.Good):
        """One forward per arrangement; one of them gives the cross-attention the target's
        padding mask: it runs while T_src = T_tgt."""

        def run_decoder(self, tgt, memory, tgt_mask, src_mask):
            if (self.encoder_norm is not None) is norm_first:
                src_mask = padding_mask(tgt, self.pad_id)
            return super().run_decoder(tgt, memory, tgt_mask, src_mask)

    return TargetPaddingToTheCrossAttentionInOnePath


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_the_targets_padding_given_to_the_cross_attention_is_named_in_each_arrangement(
    norm_first, verdict
):
    """Each arrangement is tried with T_src = T_tgt and a target padded otherwise than the
    source, so that the mistake gives numbers the checker names, not a crash."""
    printed = _rejected(verdict, _only_in(norm_first))
    said = "the cross-attention is given the target's padding mask: its keys are the *source* "
    assert said + "positions" in printed, printed
    assert "Check the masks' shapes" not in printed, printed


class TiedLookupsDetached(answers.Good):
    """Tied: the lookups read the shared matrix through .detach(), "so that only the output
    layer trains it". The values are right; the tables learn from the output layer only."""

    def embed(self, table, tokens):
        if table.weight is not self.out.weight:
            return super().embed(table, tokens)
        x = F.embedding(tokens, table.weight.detach()) * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[: tokens.shape[1]])


def test_detached_lookups_of_a_tied_matrix_are_named_by_their_gradients(verdict):
    """The shared matrix still gets a gradient (through self.out), so no part is cut off:
    the gradients are those of the checker's detached-embeddings model."""
    printed = _rejected(verdict, TiedLookupsDetached)
    assert (
        "(post-LN, tied, pad_id=3, src (2, 7) and tgt (2, 5) with padding): the values are "
        "right, but the embeddings are detached"
    ) in printed, printed


class TargetPaddingOrCausalOnTheQueryAxis(answers.Good):
    """The target's padding on the query axis and | for &: a real position sees every
    position, the future included."""

    def masks(self, src, tgt):
        rows = (tgt != self.pad_id)[:, None, :, None]  # (B, 1, T_tgt, 1)
        return padding_mask(src, self.pad_id), rows | causal_mask(tgt.shape[1])


def test_a_mistake_wrong_at_real_positions_is_not_said_to_be_wrong_at_padding_only(verdict):
    printed = _rejected(verdict, TargetPaddingOrCausalOnTheQueryAxis)
    assert "only at the target's padded positions" not in printed, printed
    case = "(post-LN, untied, pad_id=0, src (2, 5) and tgt (2, 5) with padding) is not right"
    assert case in printed, printed
    assert "is not right: at index (" in printed, printed


# ------------------------------ the checker's models of the mistakes are the learner's ----------


def _built(answer, norm_first: bool, pad_id: int = 0):
    """The learner's model and the checker's reference, the same weights; a padded batch."""
    gen = torch.Generator().manual_seed(3)
    module, ref, _, _ = assembly._build(answer, gen, norm_first, 0.1, False, pad_id)
    src = assembly._tokens(gen, [6, 3], 6, ref.src_vocab, pad_id)
    tgt = assembly._tokens(gen, [6, 2], 6, ref.tgt_vocab, pad_id)
    return module.eval(), ref, src, tgt


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_query_axis_variant_is_the_model_with_padding_on_the_query_axis(norm_first):
    module, ref, src, tgt = _built(answers.TargetPaddingOnTheQueryAxis, norm_first)
    with torch.no_grad():
        variant = assembly._variant(ref, src, tgt, dec_mask="query padding")
        assert torch.allclose(variant, module(src, tgt), atol=1e-6)
        assert not torch.allclose(variant, ref(src, tgt), atol=1e-4)  # the padding counts


def _gradients(run, parameters: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
    out = run()
    projection = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    names = list(parameters)
    grads = torch.autograd.grad(
        (out * projection).sum(), [parameters[n] for n in names], allow_unused=True
    )
    return dict(zip(names, grads, strict=True))


@pytest.mark.parametrize(
    "answer, detach", [(answers.Good, False), (answers.DetachedEmbeddings, True)]
)
def test_the_variants_gradients_are_those_of_the_model_they_stand_for(answer, detach):
    """_variant(detach=True) is the learner's detached embeddings: no gradient reaches the
    tables, the rest as the course model's; without it, every gradient is the model's."""
    module, ref, src, tgt = _built(answer, norm_first=True)
    mine = dict(module.named_parameters())
    theirs = dict(ref.named_parameters())
    got = _gradients(lambda: module(src, tgt), mine)
    mistake = {"detach": True} if detach else {}  # none: the checker's default
    want = _gradients(lambda: assembly._variant(ref, src, tgt, **mistake), theirs)
    for name, g in got.items():
        w = want[assembly._ref_name(name)]
        if g is None:
            assert detach and name.startswith(("src_embed", "tgt_embed")) and w is None, name
        else:
            assert w is not None and torch.allclose(g, w, atol=1e-6), name
