"""course.decoding: greedy decoding equals an independent token-by-token argmax loop;
every sentence stops at its own <eos> (padding after it) and the loop at max_len; the
encoder runs once; beam search with beam_size=1 is greedy decoding, with a beam wide
enough to keep every hypothesis it finds the best-scoring output of all, and on a
trained model it scores at least as well as greedy; bad input is a clear ValueError.

Three models: a scripted one whose every choice is known in advance (the loop's
bookkeeping), a random float64 Transformer with a boosted <eos> (sentences of different
lengths, no rounding ties), and a Transformer trained for a few seconds on `reverse`.
"""

import copy
import itertools
import math

import pytest
import torch
from torch import nn

from course.data import BOS_ID, EOS_ID, PAD_ID, load_task, make_batches
from course.decoding import beam_search, greedy_decode, length_penalty, sequence_scores
from course.train import build_model, build_optimizer, training_batches
from course.transformer import Transformer

# Tiny models are all overhead: one thread is faster, and deaf to a loaded machine.
pytestmark = pytest.mark.usefixtures("one_thread")


class Scripted(nn.Module):
    """A stand-in model: sentence b (told by its first source token, 3 + b) writes
    script[b][t] at output position t, whatever it was fed; the logits at *every* position
    of the prefix say so, so a decoder that reads the wrong position or stops late
    shows. Counts its encode calls and records what decode was fed."""

    pad_id = PAD_ID

    def __init__(self, scripts: list[list[int]], vocab: int = 8):
        super().__init__()
        self.scripts, self.vocab = scripts, vocab
        self.encodes, self.fed = 0, []

    def encode(self, src, src_mask=None):
        self.encodes += 1
        return src.double()[..., None]  # (B, T_src, 1)

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None):
        self.fed.append(tgt.clone())
        B, T = tgt.shape
        logits = torch.zeros(B, T, self.vocab, dtype=torch.float64)
        for b in range(B):
            script = self.scripts[int(memory[b, 0, 0]) - 3]
            for t in range(T):
                logits[b, t, script[min(t, len(script) - 1)]] = 10.0
        return logits


def _scripted_src(n: int) -> torch.Tensor:
    return torch.tensor([[3 + b, 5, 6] for b in range(n)])  # (n, 3): sentence ids first


def _random_model(eos_boost: float = 1.5, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(9, 7, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0)
    with torch.no_grad():
        model.out.bias[EOS_ID] += eos_boost  # so that sentences end, at different steps
    return model.double().eval()


SRC = torch.tensor(
    [[3, 4, 5, 6, 7, 8, 2], [8, 7, 2, 0, 0, 0, 0], [5, 5, 5, 5, 2, 0, 0], [6, 3, 8, 2, 0, 0, 0],
     [4, 4, 2, 0, 0, 0, 0], [7, 3, 6, 5, 4, 2, 0]]
)  # fmt: skip


def _argmax_loop(model, src_row: torch.Tensor, max_len: int) -> list[int]:
    """One sentence, the slow obvious way: the full model on the growing prefix each step."""
    tokens = [BOS_ID]
    with torch.no_grad():
        while len(tokens) - 1 < max_len:
            logits = model(src_row[None], torch.tensor([tokens]))  # (1, t, V)
            tokens.append(int(logits[0, -1].argmax()))
            if tokens[-1] == EOS_ID:
                break
    return tokens[1:]


def _rows(out: torch.Tensor) -> list[list[int]]:
    """Each row up to and with its first <eos> (all of it when it has none)."""
    rows = []
    for row in out.tolist():
        rows.append(row[: row.index(EOS_ID) + 1] if EOS_ID in row else row)
    return rows


@pytest.fixture(scope="module")
def trained():
    """A small Transformer trained for 150 steps on `reverse`, and a held-out batch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    task = load_task("reverse")
    config = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, norm_first=False,
                  positions="sinusoidal", warmup=50, lr_factor=1.0)  # fmt: skip
    model = build_model(task, config)
    optimizer, scheduler = build_optimizer(model, config)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    batches = training_batches(task, 64, 0, 0, 0)
    for _ in range(150):
        _, _, (src, tgt_in, tgt_out) = next(batches)
        loss = criterion(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    src, _, _ = next(iter(make_batches(task.test[:48], task, 48, shuffle=False)))
    torch.set_num_threads(threads)
    return model.eval(), src, task.max_tgt_len + 1


# ------------------------------------------------------------------ greedy_decode --


def test_greedy_follows_each_script_and_stops_at_its_own_eos():
    scripts = [[4, 5, EOS_ID], [6, EOS_ID], [3, 3, 3, 4, EOS_ID]]
    model = Scripted(scripts)
    out = greedy_decode(model, _scripted_src(3), 10, BOS_ID, EOS_ID)
    assert out.dtype == torch.long
    assert out.tolist() == [[4, 5, EOS_ID, 0, 0], [6, EOS_ID, 0, 0, 0], [3, 3, 3, 4, EOS_ID]]
    assert model.encodes == 1  # the encoder runs once
    assert len(model.fed) == 5  # the loop ended when the last sentence did
    fed = model.fed[-1]  # each step fed back what it chose, <bos> first, PAD once done
    assert fed.tolist() == [[BOS_ID, 4, 5, EOS_ID, 0], [BOS_ID, 6, EOS_ID, 0, 0],
                            [BOS_ID, 3, 3, 3, 4]]  # fmt: skip


def test_greedy_respects_max_len_and_batch_of_one():
    never_ends = Scripted([[4, 5, 6, 7]])
    out = greedy_decode(never_ends, _scripted_src(1), 6, BOS_ID, EOS_ID)
    assert out.tolist() == [[4, 5, 6, 7, 7, 7]]  # (1, max_len), no <eos>
    ends_at_once = Scripted([[EOS_ID]])
    assert greedy_decode(ends_at_once, _scripted_src(1), 6, BOS_ID, EOS_ID).tolist() == [[EOS_ID]]
    mixed = Scripted([[4, EOS_ID], [5, 5, 5, 5, 5, 5, 5, 5]])
    out = greedy_decode(mixed, _scripted_src(2), 3, BOS_ID, EOS_ID)
    assert out.tolist() == [[4, EOS_ID, 0], [5, 5, 5]]


def test_greedy_equals_an_independent_argmax_loop():
    model = _random_model()
    for max_len in (1, 4, 9):
        out = greedy_decode(model, SRC, max_len, BOS_ID, EOS_ID)
        expected = [_argmax_loop(model, row, max_len) for row in SRC]
        assert _rows(out) == expected
        assert out.shape[1] == max(len(row) for row in expected) <= max_len
        for row, tokens in zip(out.tolist(), expected, strict=True):
            assert row[len(tokens) :] == [PAD_ID] * (len(row) - len(tokens))  # pad after
    one = greedy_decode(model, SRC[2:3], 9, BOS_ID, EOS_ID)  # a batch of one
    assert _rows(one) == [_argmax_loop(model, SRC[2], 9)]


def test_greedy_keeps_no_graph_and_leaves_the_mode_alone():
    model = _random_model().train()
    model.pos.dropout.p = 0.0
    out = greedy_decode(model, SRC, 5, BOS_ID, EOS_ID)
    assert not out.requires_grad and model.training  # model.eval() is the caller's job


def test_greedy_on_the_trained_model(trained):
    model, src, max_len = trained
    model = copy.deepcopy(model).double()  # no rounding ties between batched and one by one
    out = greedy_decode(model, src, max_len, BOS_ID, EOS_ID)
    expected = [_argmax_loop(model, row, max_len) for row in src]
    assert _rows(out) == expected
    assert len({len(row) for row in expected}) >= 5  # sentences end at different steps


# -------------------------------------------------------------------- beam search --


def test_length_penalty_values():
    assert length_penalty(1) == 1.0  # ((5 + 1) / 6) ** alpha
    assert length_penalty(7, 0.6) == pytest.approx(2**0.6)
    assert length_penalty(10, 0.0) == 1.0
    lengths = torch.tensor([1.0, 7.0])
    assert torch.allclose(length_penalty(lengths, 1.0), torch.tensor([1.0, 2.0]))


def test_sequence_scores_by_hand():
    model = _random_model()
    out = torch.tensor([[4, 5, EOS_ID, 0, 0], [3, 6, 6, 4, 5]])  # ended; ran to the end
    src = SRC[:2]
    scores = sequence_scores(model, src, out, BOS_ID, EOS_ID, alpha=0.6)
    for b, tokens in enumerate(([4, 5, EOS_ID], [3, 6, 6, 4, 5])):
        logits = model(src[b : b + 1], torch.tensor([[BOS_ID, *tokens[:-1]]]))  # (1, t, V)
        log_p = logits[0].log_softmax(-1)[torch.arange(len(tokens)), tokens].sum()
        assert scores[b].item() == pytest.approx(log_p.item() / ((5 + len(tokens)) / 6) ** 0.6)


def test_beam_of_one_is_greedy():
    model = _random_model()
    for max_len in (1, 5, 9):
        greedy = greedy_decode(model, SRC, max_len, BOS_ID, EOS_ID)
        beam = beam_search(model, SRC, max_len, BOS_ID, EOS_ID, beam_size=1)
        assert torch.equal(beam, greedy)


def test_beam_of_one_is_greedy_on_the_trained_model(trained):
    model, src, max_len = trained
    greedy = greedy_decode(model, src, max_len, BOS_ID, EOS_ID)
    assert torch.equal(beam_search(model, src, max_len, BOS_ID, EOS_ID, beam_size=1), greedy)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_a_beam_that_keeps_everything_finds_the_best_output(alpha):
    """V = 7 tokens, max_len 3: 7 + 42 + 294 hypotheses, fewer than the beam's 400, so
    none is pruned and beam search must return the best-scoring of all possible outputs
    (enumerated here and scored by a separate teacher-forced pass). Greedy's output is
    one of them, so its score can be no higher."""
    model = _random_model(eos_boost=0.5)
    src = SRC[:3]
    max_len, V = 3, 7
    beam = beam_search(model, src, max_len, BOS_ID, EOS_ID, beam_size=400, alpha=alpha)
    greedy = greedy_decode(model, src, max_len, BOS_ID, EOS_ID)
    beam_scores = sequence_scores(model, src, beam, BOS_ID, EOS_ID, alpha)
    greedy_scores = sequence_scores(model, src, greedy, BOS_ID, EOS_ID, alpha)
    candidates = [  # every output: ended by <eos> at any length, or cut at max_len
        list(body) + [EOS_ID]
        for n in range(max_len)
        for body in itertools.product([v for v in range(V) if v != EOS_ID], repeat=n)
    ] + [list(body) for body in itertools.product(
        [v for v in range(V) if v != EOS_ID], repeat=max_len)]  # fmt: skip
    for b in range(src.shape[0]):
        rows = src[b : b + 1].expand(len(candidates), -1)  # (n, T_src)
        padded = torch.tensor([c + [PAD_ID] * (max_len - len(c)) for c in candidates])
        scores = sequence_scores(model, rows, padded, BOS_ID, EOS_ID, alpha)
        best = int(scores.argmax())
        assert _rows(beam[b : b + 1]) == [candidates[best]]
        assert beam_scores[b].item() == pytest.approx(scores[best].item())
        assert beam_scores[b] >= greedy_scores[b] - 1e-12


def test_beam_scores_at_least_greedy_on_the_trained_model(trained):
    """Not a theorem for a narrow beam (greedy's path can fall out of a beam of 4 and the
    beam end worse), but on a trained model beam search should find outputs the model
    scores at least as high as greedy's nearly always, and better on average."""
    model, src, max_len = trained
    greedy = greedy_decode(model, src, max_len, BOS_ID, EOS_ID)
    beam = beam_search(model, src, max_len, BOS_ID, EOS_ID, beam_size=4, alpha=0.6)
    assert beam.dtype == torch.long and beam.shape[0] == src.shape[0]
    assert beam.shape[1] <= max_len
    greedy_scores = sequence_scores(model, src, greedy, BOS_ID, EOS_ID, 0.6)
    beam_scores = sequence_scores(model, src, beam, BOS_ID, EOS_ID, 0.6)
    at_least = (beam_scores >= greedy_scores - 1e-6).float().mean().item()
    assert at_least >= 0.9, at_least
    assert beam_scores.mean() > greedy_scores.mean()
    assert not torch.equal(beam, greedy)  # the beam made a difference here


def test_beam_search_sentence_by_sentence_equals_the_batch(trained):
    model, src, max_len = trained
    model = copy.deepcopy(model).double()  # no rounding ties between batch sizes
    batch = beam_search(model, src[:12], max_len, BOS_ID, EOS_ID)
    alone = [beam_search(model, row[None], max_len, BOS_ID, EOS_ID) for row in src[:12]]
    assert _rows(batch) == [_rows(one)[0] for one in alone]


def test_beam_output_format():
    scripts = [[4, 5, EOS_ID], [6, EOS_ID], [3, 3, 3, 4, EOS_ID]]
    model = Scripted(scripts)
    out = beam_search(model, _scripted_src(3), 10, BOS_ID, EOS_ID, beam_size=3)
    assert out.tolist() == [[4, 5, EOS_ID, 0, 0], [6, EOS_ID, 0, 0, 0], [3, 3, 3, 4, EOS_ID]]
    assert model.encodes == 1  # once for the batch
    never_ends = Scripted([[4, 5, 6, 7]])
    out = beam_search(never_ends, _scripted_src(1), 6, BOS_ID, EOS_ID, beam_size=2)
    assert out.tolist() == [[4, 5, 6, 7, 7, 7]]  # (1, max_len): a batch of one, cut


# -------------------------------------------------------------------- bad input --


@pytest.mark.parametrize("decode", [greedy_decode, beam_search])
def test_bad_input_is_a_clear_value_error(decode):
    model = _random_model()
    with pytest.raises(ValueError, match=r"src must be a \(B, T_src\) integer tensor"):
        decode(model, SRC.float(), 5, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match=r"src must be .* shape \(7,\)"):
        decode(model, SRC[0], 5, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match="max_len must be a positive int"):
        decode(model, SRC, 0, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match="eos_id must be a non-negative int"):
        decode(model, SRC, 5, BOS_ID, 2.0)
    with pytest.raises(ValueError, match="model must have encode, decode and pad_id"):
        decode(nn.Linear(2, 2), SRC, 5, BOS_ID, EOS_ID)


def test_beam_search_bad_settings():
    model = _random_model()
    with pytest.raises(ValueError, match="beam_size must be a positive int, got 0"):
        beam_search(model, SRC, 5, BOS_ID, EOS_ID, beam_size=0)
    with pytest.raises(ValueError, match="alpha must be a number >= 0"):
        beam_search(model, SRC, 5, BOS_ID, EOS_ID, alpha=-1.0)
    with pytest.raises(ValueError, match=r"out must be the \(B=6, T_out\) token ids"):
        sequence_scores(model, SRC, torch.zeros(2, 3, dtype=torch.long), BOS_ID, EOS_ID)


def test_length_penalty_matches_the_formula_for_many_lengths():
    for length in range(1, 30):
        assert length_penalty(length, 0.6) == pytest.approx(math.pow((5 + length) / 6, 0.6))
