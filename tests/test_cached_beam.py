"""course.efficient.cached_beam_search: beam search with lesson 10's KV cache gives
course.decoding.beam_search's token ids exactly, without ever running the decoder over a
whole prefix, and only because the cache follows its hypotheses (KVCache.reorder)."""

from itertools import product

import pytest
import torch
from test_efficient import _model, _source

from course.decoding import beam_search, greedy_decode
from course.efficient import KVCache, cached_beam_search, cached_greedy_decode, decode_step
from course.masking import padding_mask
from course.transformer import Transformer

# Tiny models are all overhead: one thread is faster, and deaf to a loaded machine.
pytestmark = pytest.mark.usefixtures("one_thread")

BOS, EOS = 1, 2


def _both(model, src, max_len, beam_size, alpha=0.6, eos=EOS):
    """(beam_search's ids, cached_beam_search's ids) for the same call."""
    want = beam_search(model, src, max_len, BOS, eos, beam_size=beam_size, alpha=alpha)
    got = cached_beam_search(model, src, max_len, BOS, eos, beam_size=beam_size, alpha=alpha)
    return want, got


def _assert_same(model, src, max_len, beam_size, alpha=0.6, eos=EOS):
    want, got = _both(model, src, max_len, beam_size, alpha, eos)
    assert got.dtype == torch.long and got.shape == want.shape, (got.shape, want.shape)
    assert torch.equal(got, want), (got, want)
    return got


def _eos_early(seed, norm_first=False, positions="sinusoidal"):
    """A model that likes <eos>: its out layer's bias pushes the <eos> logit up (by 0.5, 1
    or 1.5), so that hypotheses end after a few tokens, at steps that differ between them."""
    model = _model(seed, norm_first, 2, positions)
    with torch.no_grad():
        model.out.bias[EOS] += 0.5 * (1 + seed % 3)
    return model


# ----------------------------------------------------------- the same ids as beam_search --


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_beam_search_equals_beam_search(norm_first, positions):
    for seed in range(3):
        model = _model(seed, norm_first, 2, positions)
        for B in (4, 1):  # _source pads row 1 when B > 1: sources of different lengths
            src = _source(seed, B)
            for beam_size in (2, 4):
                _assert_same(model, src, 12, beam_size)


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_beam_of_one_is_cached_greedy(norm_first, positions):
    for seed in range(2):
        model = _model(seed, norm_first, 2, positions)
        for B in (4, 1):
            src = _source(seed, B)
            got = _assert_same(model, src, 12, 1)
            assert torch.equal(got, cached_greedy_decode(model, src, 12, BOS, EOS))
            assert torch.equal(got, greedy_decode(model, src, 12, BOS, EOS))


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
def test_a_beam_wider_than_the_first_steps_candidates(positions):
    # 5 tokens: the first step has 5 real candidates for a beam of 8 (empty slots), the
    # second 25, and <eos>, <bos>, padding are among them
    for seed in range(3):
        model = _model(seed, seed % 2 == 1, 2, positions, vocab=5)
        for B in (3, 1):
            _assert_same(model, _source(seed, B, vocab=5), 10, 8)


def test_max_len_one():
    for seed in range(2):
        model = _model(seed)
        for beam_size in (1, 4):
            got = _assert_same(model, _source(seed), 1, beam_size)
            assert got.shape == (4, 1)


def test_hypotheses_that_finish_at_different_steps():
    lengths, ended, rows = set(), 0, 0
    for norm_first, positions in product((False, True), ("sinusoidal", "rotary")):
        for seed in range(6):
            model = _eos_early(seed, norm_first, positions)
            src = _source(seed, B=6)
            for alpha in (0.0, 0.6, 1.5):
                got = _assert_same(model, src, 12, 4, alpha)
                is_eos = got == EOS
                lengths |= {int(row.nonzero()[0]) + 1 for row in is_eos if row.any()}
                ended, rows = ended + int(is_eos.any(dim=1).sum()), rows + got.shape[0]
    assert ended >= rows // 2, (ended, rows)  # most answers end with <eos>, before max_len
    assert len(lengths) >= 5, lengths  # and at five or more different steps


def test_tied_embeddings():
    for seed in range(2):
        torch.manual_seed(seed)
        model = Transformer(12, 12, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40,
                            tie_embeddings=True).eval()  # fmt: skip
        for B in (4, 1):
            _assert_same(model, _source(seed, B), 12, 4)


# ----------------------------------------------------------------------- refusals --


def test_training_mode_is_refused():
    model = _model(0).train()
    with pytest.raises(ValueError, match=r"eval mode .*call model\.eval\(\) first"):
        cached_beam_search(model, _source(0), 5, BOS, EOS)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"beam_size": 0}, r"^beam_size must be a positive int, got 0$"),
        ({"beam_size": 2.0}, r"^beam_size must be a positive int, got 2.0$"),
        ({"beam_size": True}, r"^beam_size must be a positive int, got True$"),
        ({"alpha": -1.0}, r"^alpha must be a number >= 0 \(0: no length penalty\), got -1.0$"),
        ({"alpha": "0.6"}, r"^alpha must be a number >= 0 .*, got '0.6'$"),
    ],
)
def test_bad_beam_settings_are_refused_as_beam_search_refuses_them(settings, message):
    model, src = _model(0), _source(0)
    for decode in (beam_search, cached_beam_search):
        with pytest.raises(ValueError, match=message):
            decode(model, src, 5, BOS, EOS, **settings)


def test_bad_arguments_are_refused():
    model = _model(0)
    with pytest.raises(ValueError, match="max_len"):
        cached_beam_search(model, _source(0), 0, BOS, EOS)
    with pytest.raises(ValueError, match="src"):
        cached_beam_search(model, _source(0).float(), 5, BOS, EOS)
    with pytest.raises(ValueError, match="Transformer"):
        cached_beam_search(torch.nn.Linear(2, 2).eval(), _source(0), 5, BOS, EOS)
    with pytest.raises(ValueError, match="max_len=40"):  # positions past the table
        cached_beam_search(model, _source(0), 60, BOS, model.tgt_vocab)


# ------------------------------------------------------- the cache is really used --


def test_the_decoder_never_runs_over_a_whole_prefix(monkeypatch):
    model, src = _model(0), _source(0)
    calls = []
    decode = model.decode

    def counting_decode(*args, **kwargs):
        calls.append(args[0].shape)
        return decode(*args, **kwargs)

    monkeypatch.setattr(model, "decode", counting_decode)
    out = cached_beam_search(model, src, 12, BOS, model.tgt_vocab)  # no <eos>: all 12 steps
    assert out.shape == (4, 12) and calls == []
    beam_search(model, src, 12, BOS, model.tgt_vocab)
    assert len(calls) == 12  # the counting works: one whole-prefix decode per step
    assert [shape[1] for shape in calls] == list(range(1, 13))


def test_reorder_keeps_each_rows_past_of_its_parent():
    model, src = _model(0), _source(0, B=2)
    src_mask = padding_mask(src, model.pad_id)
    cache = KVCache.start(model, model.encode(src, src_mask), src_mask)
    with torch.no_grad():
        for token in (BOS, 5, 0):  # 0 is padding: key_is_real moves too
            decode_step(model, torch.full((2,), token), cache)
    cache.key_is_real[1, 2] = True  # the two rows' pasts differ
    before = [(k.clone(), v.clone()) for k, v in cache.self_kv], cache.key_is_real.clone()
    cache.reorder(torch.tensor([1, 1]))
    for (k, v), (k0, v0) in zip(cache.self_kv, before[0], strict=True):
        assert k.shape == k0.shape and torch.equal(k[0], k0[1]) and torch.equal(k[1], k0[1])
        assert torch.equal(v[0], v0[1]) and torch.equal(v[1], v0[1])
    assert cache.key_is_real.tolist() == [[True, True, True]] * 2
    assert cache.length == 3


def test_a_cache_that_does_not_follow_its_hypotheses_is_caught(monkeypatch):
    """Without the reorder, a row's cached past is that of whichever hypothesis sat in the
    row before: the ids change. The tests above would then fail for these models."""
    cases = [(_model(seed, seed % 2 == 1), _source(seed)) for seed in range(3)]
    wants = [beam_search(model, src, 12, BOS, EOS) for model, src in cases]
    assert all(
        torch.equal(cached_beam_search(model, src, 12, BOS, EOS), want)
        for (model, src), want in zip(cases, wants, strict=True)
    )
    monkeypatch.setattr(KVCache, "reorder", lambda self, rows: None)  # the rows stay put
    differ = [
        not torch.equal(cached_beam_search(model, src, 12, BOS, EOS), want)
        for (model, src), want in zip(cases, wants, strict=True)
    ]
    assert sum(differ) >= 2, differ
