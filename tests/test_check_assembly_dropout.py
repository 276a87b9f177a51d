"""Lesson 08's assembly checker: where dropout goes, encode and decode as lesson 09 calls
them, and what a verdict names (tools/mutation.py's survivors in course/check/assembly.py).

Each wrong answer is one a learner writes when assembling the model; each test asserts
the mistake named and where (which model call, which arrangement, which side). Each right
answer written another way must pass.
"""

import math
import re

import pytest
import test_check_assembly as answers
import torch
from torch import nn

from course import check
from course.layers import DecoderLayer
from course.masking import padding_mask


@pytest.fixture(autouse=True)
def _seeded():
    """The learners' dropout draws from torch's global generator: seed it, then restore it."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        yield


def _rejected(verdict, answer) -> str:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    return printed


def _accepted(verdict, answer) -> None:
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is True and printed.startswith("✅ EncoderDecoder: passed"), printed


# The model the dropout check judges, as its verdict shows it: two vocabularies (untied),
# pad_id 0, the rate asked, the arrangement in words after it.
JUDGED = "EncoderDecoder(13, 11, 12, 3, 2, 20, {p}, {norm_first}, max_len=40, pad_id=0, "
JUDGED += "tie_embeddings=False)"
POST_LN_AT_03 = JUDGED.format(p=0.3, norm_first=False) + " (post-LN) in training mode"


# ------------------------------------------- encode and decode, as lesson 09 calls them ----------


class SourceMaskFromLengths(answers.Good):
    """Right: encode rebuilds the source mask from each sentence's length, as code that
    keeps lengths does (a sentence is its real tokens, then padding)."""

    def encode(self, src, src_mask):
        lengths = (src != self.pad_id).sum(dim=1)  # (B,)
        rebuilt = (torch.arange(src.shape[1]) < lengths[:, None])[:, None, None, :]
        return super().encode(src, rebuilt)


def test_an_encode_that_builds_the_mask_from_the_lengths_is_accepted(verdict):
    """encode is judged on other sentences than forward's (the batch reversed), still
    real tokens then padding: a mask built from the lengths is right on them."""
    _accepted(verdict, SourceMaskFromLengths)


class EncodeUsesTheMaskOfTheLastForward(answers.Good):
    """forward keeps its source mask on self; encode uses it, not the one it is given."""

    def forward(self, src, tgt):
        self.src_mask = padding_mask(src, self.pad_id)
        return super().forward(src, tgt)

    def encode(self, src, src_mask):
        return super().encode(src, self.src_mask)


def test_a_stale_mask_in_encode_is_caught_on_the_first_case(verdict):
    """The memory differs by less than 1 on the first case: still wrong, named there."""
    printed = _rejected(verdict, EncodeUsesTheMaskOfTheLastForward)
    said = re.search(
        r"model\.encode\(src, src_mask\) in eval mode \(post-LN, untied, pad_id=0, src \(2, 5\) "
        r"and tgt \(2, 5\) with padding\) is not right: .*\(largest difference (?P<d>[\d.]+)\)",
        printed,
    )
    assert said, printed
    assert float(said["d"]) < 1, printed


# ---------------------------------------------------------------- dropout ----------


class PositionsOnlyDropped(answers.Good):
    """The bracket in the wrong place: the positions dropped, the embeddings never."""

    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model)
        return x + self.dropout(self.pe[: tokens.shape[1]])


class TargetPositionsOnlyDropped(answers.Good):
    """The source side right; on the target side the bracket in the wrong place."""

    def embed(self, table, tokens):
        if table is self.src_embed:
            return super().embed(table, tokens)
        x = table(tokens) * math.sqrt(self.d_model)
        return x + self.dropout(self.pe[: tokens.shape[1]])


class SeededForward(answers.Good):
    """torch.manual_seed in forward "for reproducibility": every call drops the same."""

    def forward(self, src, tgt):
        torch.manual_seed(0)
        return super().forward(src, tgt)


class SeededEmbeddingDropout(answers.Good):
    """Dropout by hand on the embeddings, from a generator seeded on every call."""

    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model) + self.pe[: tokens.shape[1]]
        if self.training:
            fixed = torch.Generator().manual_seed(0)
            keep = torch.rand(x.shape, generator=fixed) >= self.dropout.p
            x = x * keep / (1 - self.dropout.p)
        return x


class DecoderDroppedBetweenLayers(answers.Good):
    def run_decoder(self, tgt, memory, tgt_mask, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = self.dropout(layer(y, memory, tgt_mask, src_mask))  # <- once more per layer
        return self.out(self.final(y))


class PreLNMemoryNormedThenDropped(answers.Good):
    """Pre-LN: the final norm treated as one more sublayer, its output dropped."""

    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x if self.encoder_norm is None else self.dropout(self.encoder_norm(x))


class PreLNOutputNormedThenDropped(answers.Good):
    def final(self, y):
        return y if self.decoder_norm is None else self.dropout(self.decoder_norm(y))


DROPOUT = {
    PositionsOnlyDropped: f"{POST_LN_AT_03}: what the first encoder layer receives: nothing is "
    "dropped at dropout=0.3 in training mode. Drop the sum once, self.dropout(embedding * "
    "sqrt(d_model) + pe[:T])",
    TargetPositionsOnlyDropped: f"{POST_LN_AT_03}: what the first decoder layer receives: "
    "nothing is dropped at dropout=0.3 in training mode. Drop the sum once",
    SeededForward: f"{POST_LN_AT_03}: two calls give the same output",
    SeededEmbeddingDropout: f"{POST_LN_AT_03}: the source embeddings: two calls dropped exactly "
    "the same entries. Dropout must draw a new random mask on every call",
    DecoderDroppedBetweenLayers: "in training mode something is dropped between the decoder "
    "layers: each layer drops its own sublayers' outputs",
    PreLNMemoryNormedThenDropped: "in training mode the decoder does not receive the encoder's "
    "output as it is (dropout on the memory?): memory = the last encoder layer's output, after "
    "self.encoder_norm, passed to every decoder layer unchanged",
    PreLNOutputNormedThenDropped: "in training mode the output layer does not receive the "
    "decoder's output as it is (dropout on y or on the logits?): logits = "
    "self.out(self.decoder_norm(y)), with no dropout after the last decoder layer",
    answers.DropoutRateHardCoded: JUDGED.format(p=0.0, norm_first=False) + " in training mode "
    "changes the output although dropout=0.0: pass the constructor's dropout on to "
    "self.dropout and every layer",
}


@pytest.mark.parametrize("answer", DROPOUT, ids=[a.__name__ for a in DROPOUT])
def test_dropout_mistakes_are_named_with_the_model_and_the_place(answer, verdict):
    printed = _rejected(verdict, answer)
    assert DROPOUT[answer] in printed, printed


def test_the_model_a_dropout_verdict_shows_is_the_one_judged(verdict):
    """The call in the verdict rebuilds a model that shows the mistake named."""
    printed = _rejected(verdict, SeededForward)
    shown = re.search(r"(EncoderDecoder\(.*?\)) \(post-LN\) in training mode", printed)
    assert shown, printed
    model = eval(shown.group(1), {"EncoderDecoder": SeededForward})  # noqa: S307 - our own text
    assert model.dropout.p == 0.3 and model.encoder_norm is None  # the rate, post-LN
    src, tgt = torch.randint(1, 11, (2, 6)), torch.randint(1, 11, (2, 5))
    with torch.no_grad():
        assert torch.equal(model.train()(src, tgt), model(src, tgt))


class EncodesTwice(answers.Good):
    """Right, if wasteful: a leftover line encodes the source once more; in training mode
    the memory used is dropped like any other."""

    def forward(self, src, tgt):
        src_mask, tgt_mask = self.masks(src, tgt)
        self.memory = self.encode(src, src_mask)  # <- kept to look at, left from debugging
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)


def test_a_model_that_runs_the_encoder_twice_is_accepted(verdict):
    """Its encoder layers are called twice per forward: where each layer's input comes
    from cannot be told, so the checker does not judge it."""
    _accepted(verdict, EncodesTwice)


# ------------------------------------------------------ what the checker says first ----------


class OwnDecoderLayer(DecoderLayer):
    """The learner's DecoderLayer from the exercise above: __init__ done (the course's
    parts, the course's names), forward not yet."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class UsesItsOwnLayerWhoseForwardIsAStub(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.decoder_layers = nn.ModuleList([OwnDecoderLayer(*args) for _ in range(n_layers)])


def test_an_own_layer_whose_forward_is_a_stub_is_named(verdict):
    printed = _rejected(verdict, UsesItsOwnLayerWhoseForwardIsAStub)
    assert (
        "your EncoderDecoder calls forward, a method of a class of your own that is not "
        "implemented yet"
    ) in printed, printed
    assert "reference.DecoderLayer(...)" in printed, printed


class TargetFirst(answers.Good):
    """forward(tgt, src): the target first, as decode(tgt, memory, ...) takes it."""

    def forward(self, tgt, src):
        return super().forward(src, tgt)


def test_forward_with_its_inputs_swapped_is_told_the_lessons_order(verdict):
    printed = _rejected(verdict, TargetFirst)
    assert (
        "your parameters come in the order (tgt, src); the lesson's signature is "
        "forward(src, tgt), and the notebooks pass the arguments in that order"
    ) in printed, printed


def test_an_instance_is_told_the_call_to_write(verdict):
    printed = _rejected(verdict, answers.Good(13, 11, 12, 3, 2, 20))
    assert "pass the class itself, not an instance: check.EncoderDecoder(EncoderDecoder)" in printed


# ------------------------------------------------- what the checker calls dropout ----------
# The checker tells "dropped twice" and "positions added after the dropout" from other
# mistakes by asking whether a tensor is another one after dropout: each entry 0 or the
# kept value / (1 - p), some of both.


def _dropout_case(p=0.3):
    gen = torch.Generator().manual_seed(3)
    kept_all = torch.randn(4, 16, 12, generator=gen)  # (B, T, d_model), as the checker's
    keep = torch.rand(kept_all.shape, generator=gen) >= p
    return kept_all, keep, torch.where(keep, kept_all / (1 - p), torch.zeros(()))


def test_a_dropout_is_recognised():
    from course.check.assembly import _is_dropout_of

    kept_all, keep, dropped = _dropout_case()
    assert _is_dropout_of(dropped, kept_all, 0.3)
    assert not _is_dropout_of(kept_all, kept_all, 0.3)  # nothing dropped


def test_everything_dropped_is_not_a_dropout():
    from course.check.assembly import _is_dropout_of

    kept_all, _, _ = _dropout_case()
    assert not _is_dropout_of(torch.zeros_like(kept_all), kept_all, 0.3)


def test_dropped_entries_must_be_zero():
    """Entries set to 0.5 instead of 0 (a small fill value) are not dropped ones."""
    from course.check.assembly import _is_dropout_of

    kept_all, keep, dropped = _dropout_case()
    assert not _is_dropout_of(torch.where(keep, dropped, torch.tensor(0.5)), kept_all, 0.3)


def test_kept_entries_must_be_the_rescaled_values():
    """Kept entries off by 0.5 are not kept_all / (1 - p)."""
    from course.check.assembly import _is_dropout_of

    kept_all, keep, dropped = _dropout_case()
    assert not _is_dropout_of(torch.where(keep, dropped + 0.5, dropped), kept_all, 0.3)
