"""course.decoding, the behaviour its mutation run found unpinned: what each error message
says came, the defaults (alpha 0.6, a beam of 4), token id 0 accepted, beam search's tie
rule (an earlier finisher keeps its place against an equal later one), and empty beam
slots that never count as finished hypotheses.
"""

import math
from itertools import product

import pytest
import torch
from test_decoding import SRC, Scripted, _random_model, _rows, _scripted_src
from torch import nn

from course.data import BOS_ID, EOS_ID, PAD_ID
from course.decoding import beam_search, greedy_decode, length_penalty, sequence_scores
from course.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")


class NoPadId(nn.Module):
    def encode(self, src, src_mask=None):
        return src

    def decode(self, tgt, memory, src_mask=None):
        return tgt


class Tie(nn.Module):
    """From <bos>: <eos> and token 4 equally likely (log P = -log 2 each); after <bos> 4,
    <eos> is certain (log P = 0). So with alpha = 0, "<eos>" and "4 <eos>" score the same."""

    pad_id = PAD_ID

    def encode(self, src, src_mask=None):
        return src.double()[..., None]

    def decode(self, tgt, memory, src_mask=None):
        B, T = tgt.shape
        logits = torch.zeros(B, T, 6, dtype=torch.float64)
        logits[:, 0, EOS_ID] = logits[:, 0, 4] = 1000.0
        logits[:, 1:, EOS_ID] = 1000.0
        return logits


class Coin(nn.Module):
    """At every step <eos> and token 4 are equally likely (log P = -log 2 each): "4" * n
    then <eos> has log P = -(n + 1) log 2, so a large alpha prefers longer outputs."""

    pad_id = PAD_ID
    calls = 0  # decoder calls: one per step

    def encode(self, src, src_mask=None):
        return src.double()[..., None]

    def decode(self, tgt, memory, src_mask=None):
        self.calls += 1
        B, T = tgt.shape
        logits = torch.full((B, T, 6), -1000.0, dtype=torch.float64)
        logits[..., EOS_ID] = logits[..., 4] = 0.0
        return logits


@pytest.mark.parametrize("decode", [greedy_decode, beam_search])
def test_each_message_says_what_came(decode):
    model = _random_model()
    with pytest.raises(ValueError, match=r"\), got Linear without encode$"):
        decode(nn.Linear(2, 2), SRC, 5, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"got NoPadId without pad_id$"):
        decode(NoPadId(), SRC, 5, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"max_len must be a positive int .*, got 0$"):
        decode(model, SRC, 0, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"max_len must be a positive int .*, got True$"):
        decode(model, SRC, True, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"^bos_id must be a non-negative int token id, got -1$"):
        decode(model, SRC, 5, -1, EOS_ID)
    with pytest.raises(ValueError, match=r"^eos_id must be a non-negative int token id, got 2.0$"):
        decode(model, SRC, 5, BOS_ID, 2.0)


def test_token_id_zero_is_a_token_id():
    model = Scripted([[4, 0, 5]])
    assert greedy_decode(model, _scripted_src(1), 3, 0, 0).tolist() == [[4, 0]]
    assert beam_search(model, _scripted_src(1), 3, 0, 0, beam_size=1).tolist() == [[4, 0]]


def test_beam_settings_messages_say_what_came():
    model = _random_model()
    with pytest.raises(ValueError, match=r"alpha must be a number >= 0 .*, got -1.0$"):
        beam_search(model, SRC, 5, BOS_ID, EOS_ID, alpha=-1.0)
    with pytest.raises(ValueError, match=r"beam_size must be a positive int, got 2.0$"):
        beam_search(model, SRC, 5, BOS_ID, EOS_ID, beam_size=2.0)
    with pytest.raises(ValueError, match=r"got a torch.int64 tensor of shape \(2, 3\)$"):
        sequence_scores(model, SRC, torch.zeros(2, 3, dtype=torch.long), BOS_ID, EOS_ID)


def test_the_defaults_are_the_papers_alpha_and_beam():
    assert length_penalty(7) == pytest.approx(2**0.6)
    model = _random_model(eos_boost=0.5)
    out = torch.tensor([[4, 5, EOS_ID, 0, 0], [3, 6, 6, 4, 5]])
    default = sequence_scores(model, SRC[:2], out, BOS_ID, EOS_ID)
    assert torch.equal(default, sequence_scores(model, SRC[:2], out, BOS_ID, EOS_ID, alpha=0.6))
    default = beam_search(model, SRC, 9, BOS_ID, EOS_ID)
    assert torch.equal(default, beam_search(model, SRC, 9, BOS_ID, EOS_ID, 4, 0.6))
    for other in ({"beam_size": 5}, {"alpha": 1.6}):  # this model's outputs tell them apart
        assert not torch.equal(default, beam_search(model, SRC, 9, BOS_ID, EOS_ID, **other))


def test_of_two_equal_scores_the_earlier_finisher_wins():
    src = _scripted_src(1)
    out = beam_search(Tie(), src, 4, BOS_ID, EOS_ID, beam_size=2, alpha=0.0)
    assert out.tolist() == [[EOS_ID]]  # log P -log 2 at length 1 and at length 2: a tie
    out = beam_search(Tie(), src, 4, BOS_ID, EOS_ID, beam_size=2, alpha=0.6)
    assert out.tolist() == [[4, EOS_ID]]  # the length penalty breaks it for the longer one


def test_empty_slots_never_count_as_finished():
    """A beam wider than a step's real candidates holds empty slots (log P = -inf, e.g. at
    the start, with one hypothesis); one that happens to sit on <eos> is not a finished
    hypothesis, or the search stops early. V = 4, max_len 5, K = 320: nothing is pruned
    before the last step (at most 4 * 27 = 108 candidates), and at the last step 320 of
    4 * 81 = 324 outputs of one length are kept, that length's best among them; so beam
    search must return the best-scoring of all 364 possible outputs."""
    torch.manual_seed(0)
    model = Transformer(9, 4, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    model = model.double().eval()
    src, max_len = SRC[:3], 5
    beam = beam_search(model, src, max_len, BOS_ID, EOS_ID, beam_size=320, alpha=0.6)
    words = [v for v in range(4) if v != EOS_ID]
    candidates = [
        list(body) + [EOS_ID] for n in range(max_len) for body in product(words, repeat=n)
    ] + [list(body) for body in product(words, repeat=max_len)]
    assert len(candidates) == 364
    padded = torch.tensor([c + [PAD_ID] * (max_len - len(c)) for c in candidates])
    for b in range(src.shape[0]):
        rows = src[b : b + 1].expand(len(candidates), -1)  # (364, T_src)
        scores = sequence_scores(model, rows, padded, BOS_ID, EOS_ID, 0.6)
        assert _rows(beam[b : b + 1]) == [candidates[int(scores.argmax())]]


@pytest.mark.parametrize("beam_size", [2, 3])
def test_a_sentence_stops_once_no_live_hypothesis_can_beat_the_best_finished(beam_size):
    """Coin's "<eos>" finishes at step 1 with log P = -log 2. With alpha = 0 no live
    hypothesis can end above that (log P only falls), so the search stops there: one
    decoder call. With alpha = 5 longer outputs score better ("<eos>" -0.69, "4 <eos>"
    -0.64, "4 4 <eos>" -0.49, ...), so no finished one is safe before max_len: the search
    runs every step and returns a best-scoring output of the longest length."""
    coin = Coin()
    out = beam_search(coin, _scripted_src(1), 6, BOS_ID, EOS_ID, beam_size=beam_size, alpha=0.0)
    assert out.tolist() == [[EOS_ID]]
    assert coin.calls == 1
    coin = Coin()
    out = beam_search(coin, _scripted_src(1), 6, BOS_ID, EOS_ID, beam_size=beam_size, alpha=5.0)
    assert coin.calls == 6
    score = sequence_scores(coin, _scripted_src(1), out, BOS_ID, EOS_ID, 5.0)
    assert score.item() == pytest.approx(-6 * math.log(2) / length_penalty(6, 5.0))


def test_sequence_scores_checks_its_arguments_too():
    model, out = _random_model(), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^src must be a \(B, T_src\) integer tensor"):
        sequence_scores(model, SRC[:2].float(), out, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match="^eos_id must be a non-negative int token id, got -2$"):
        sequence_scores(model, SRC[:2], out, BOS_ID, -2)
    with pytest.raises(ValueError, match="got Linear without encode$"):
        sequence_scores(nn.Linear(2, 2), SRC[:2], out, BOS_ID, EOS_ID)


class OnlyEos(Coin):
    """Every token but <eos> impossible (logit -inf): one real candidate per hypothesis."""

    def decode(self, tgt, memory, src_mask=None):
        self.calls += 1
        logits = torch.full((*tgt.shape, 6), -torch.inf, dtype=torch.float64)
        logits[..., EOS_ID] = 0.0
        return logits


def test_a_sentence_with_no_live_hypothesis_left_is_done():
    """After step 1 "<eos>" has finished and nothing is live: one finished of a beam of
    two, but the search is over, and the decoder is not called again."""
    model = OnlyEos()
    out = beam_search(model, _scripted_src(1), 6, BOS_ID, EOS_ID, beam_size=2)
    assert out.tolist() == [[EOS_ID]]
    assert model.calls == 1


class LateTie(nn.Module):
    """From <bos>: <eos> and 4 equally likely (log P = -log 2 each); then 4 is certain
    until the 7th token, where <eos> and 4 are equally likely again. With alpha = 1,
    lp(1) = 1 and lp(7) = 2, so "<eos>" (-log 2 / 1) and "4 4 4 4 4 4 <eos>" (-2 log 2 / 2)
    score exactly the same, six steps apart."""

    pad_id = PAD_ID

    def encode(self, src, src_mask=None):
        return src.double()[..., None]

    def decode(self, tgt, memory, src_mask=None):
        B, T = tgt.shape
        logits = torch.zeros(B, T, 6, dtype=torch.float64)
        logits[..., 4] = 1000.0
        logits[:, 0, EOS_ID] = 1000.0
        if T >= 7:
            logits[:, 6, EOS_ID] = 1000.0
        return logits


def test_a_later_equal_score_does_not_replace_the_earlier_finisher():
    """The stopping rule keeps the search going after "<eos>" finishes (a live hypothesis
    could still end higher); the longer output that only ties it must not replace it."""
    out = beam_search(LateTie(), _scripted_src(1), 7, BOS_ID, EOS_ID, beam_size=2, alpha=1.0)
    assert out.tolist() == [[EOS_ID]]
    src = _scripted_src(1)
    short, long = (
        sequence_scores(LateTie(), src, torch.tensor(output), BOS_ID, EOS_ID, 1.0).item()
        for output in ([[EOS_ID]], [[4] * 6 + [EOS_ID]])
    )
    assert short == long == pytest.approx(-math.log(2))  # the tie is exact
