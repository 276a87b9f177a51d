"""Lesson 12's package module, course.lm: the decoder-only model, its data, perplexity and
the baselines, sample_next, and generation with the KV cache (on the tests' small sample
of the Tatoeba file, never the real one)."""

import math

import pytest
import torch

from course import lm, tatoeba
from course.data import BOS_ID, EOS_ID, PAD_ID


@pytest.fixture(scope="module")
def data():
    return lm.load_lm_data(seed=0, vocab_size=300, test_fraction=0.1)


def tiny(vocab_size: int, seed: int = 0, **kwargs) -> lm.LanguageModel:
    torch.manual_seed(seed)
    config = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=40)
    return lm.LanguageModel(vocab_size, **{**config, **kwargs})


@pytest.fixture(scope="module")
def trained(data):
    model = tiny(len(data.vocab))
    with torch.random.fork_rng():
        lm.train_lm(model, data.train, steps=60, batch_size=16, lr=1e-2)
    return model.eval()


# ------------------------------------------------------------------ the model ------


def test_the_model_is_pre_ln_with_a_final_norm_and_tied_embeddings():
    model = tiny(50)
    assert all(layer.norm_first for layer in model.layers)
    assert model.out.weight is model.embed.embedding.weight
    assert all(layer.self_attn.rotary_base == lm.ROTARY_BASE for layer in model.layers)
    assert not hasattr(model, "encoder_layers")  # one stack
    n_matrices = sum(1 for p in model.parameters() if p.shape == (50, 16))
    assert n_matrices == 1  # the tied matrix is one parameter


def test_forward_gives_logits_for_every_position():
    model = tiny(50).eval()
    tokens = torch.randint(3, 50, (3, 7))
    assert model(tokens).shape == (3, 7, 50)


def test_a_position_never_sees_the_future():
    model = tiny(50).eval()
    tokens = torch.randint(3, 50, (2, 8))
    changed = tokens.clone()
    changed[:, 5:] = torch.randint(3, 50, (2, 3))
    assert torch.allclose(model(tokens)[:, :5], model(changed)[:, :5], atol=1e-6)
    assert not torch.allclose(model(tokens)[:, 5:], model(changed)[:, 5:])


def test_padding_does_not_change_the_real_positions():
    model = tiny(50).eval()
    row = torch.tensor([[BOS_ID, 7, 8, 9, EOS_ID]])
    padded = torch.tensor([[BOS_ID, 7, 8, 9, EOS_ID, PAD_ID, PAD_ID]])
    assert torch.allclose(model(row), model(padded)[:, :5], atol=1e-6)


@pytest.mark.parametrize(
    "tokens, message",
    [
        (torch.zeros(2, 3), "integer tensor of token ids"),
        (torch.zeros(4, dtype=torch.long), "(B, T)"),
        (torch.zeros(1, 41, dtype=torch.long), "longer than max_len=40"),
        (torch.full((1, 3), 50), "token ids from 50 to 50, but its vocabulary has 50 tokens"),
    ],
)
def test_bad_tokens_get_a_clear_error(tokens, message):
    with pytest.raises(ValueError, match=None) as error:
        tiny(50)(tokens)
    assert message in str(error.value)


def test_the_loss_ignores_padding_and_never_predicts_bos():
    model = tiny(20).eval()
    batch = torch.tensor([[BOS_ID, 5, 6, EOS_ID], [BOS_ID, 7, EOS_ID, PAD_ID]])
    logits = model(batch[:, :-1]).log_softmax(-1)  # (2, 3, V)
    targets = [(0, 0, 5), (0, 1, 6), (0, 2, EOS_ID), (1, 0, 7), (1, 1, EOS_ID)]
    want = -sum(logits[b, t, w] for b, t, w in targets) / len(targets)
    assert torch.allclose(lm.lm_loss(model, batch), want, atol=1e-6)


def test_perplexity_is_exp_of_the_mean_token_cost():
    model = tiny(20)
    with torch.no_grad():  # a model that knows nothing: every token 1/V
        model.out.weight.zero_()
        model.out.bias.zero_()
    sequences = [[BOS_ID, 5, 6, EOS_ID], [BOS_ID, 7, EOS_ID]]
    assert lm.perplexity(model, sequences, batch_size=1) == pytest.approx(20, rel=1e-5)
    assert model.training  # left in the mode it was in


# -------------------------------------------------------------------- the data -----


def test_the_data_is_the_english_side_split_without_leaks(data):
    assert data.train and data.test
    keys = {lm.near_duplicate_key(s) for s in data.train_text}
    assert not any(lm.near_duplicate_key(s) in keys for s in data.test_text)
    assert len(set(data.train_text + data.test_text)) == len(data.train_text + data.test_text)
    for ids in data.train + data.test:
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID and PAD_ID not in ids
    assert data.vocab.decode(data.train[0]) == data.train_text[0]
    assert len(data.vocab) <= 300


def test_english_sentences_are_normalized_and_distinct():
    pairs = [("I\u2019m tired.", "x"), ("I'm tired.", "y"), ("Go.", "Va !"), (" Go. ", "z")]
    assert lm.english_sentences(pairs) == ["I'm tired.", "Go."]
    assert lm.english_sentences([("a b c", "x")], max_words=2) == []


def test_near_duplicates_share_a_group():
    assert lm.near_duplicate_key("I'm tired!") == lm.near_duplicate_key("i'm tired.")
    assert lm.near_duplicate_key("Who?") != lm.near_duplicate_key("Who are you?")


def test_the_vocabulary_comes_from_the_training_split_only():
    pairs = [(f"I see {w}.", "x") for w in ("a", "b", "c", "d", "e", "f", "g", "h")]
    pairs += [("Zzz.", "x")]  # 'Z' appears nowhere else
    found = lm.load_lm_data(seed=0, vocab_size=60, test_fraction=0.12, pairs=pairs)
    if "Zzz." in found.test_text:
        assert 3 in found.test[found.test_text.index("Zzz.")]  # <unk>
    else:
        assert "Z" in "".join(found.vocab.itos)


def test_the_sample_data_is_read_from_the_data_directory(data):
    english = {tatoeba.full_normalize(en) for en, _ in tatoeba.load_pairs(progress=False)}
    assert set(data.train_text + data.test_text) <= english


# --------------------------------------------------------------- the baselines -----


def test_the_unigram_is_add_one_over_the_predictable_ids():
    train = [[BOS_ID, 4, 4, EOS_ID], [BOS_ID, 5, EOS_ID]]
    p = lm.unigram_probabilities(train, vocab_size=6)
    # targets: 4, 4, eos, 5, eos -> N = 5; predictable ids: 2, 3, 4, 5 -> V' = 4
    assert p.tolist() == pytest.approx([0, 0, 3 / 9, 1 / 9, 3 / 9, 2 / 9])
    test = [[BOS_ID, 3, EOS_ID]]  # an id never seen in training: finite
    want = math.exp(-(math.log(1 / 9) + math.log(3 / 9)) / 2)
    assert lm.unigram_perplexity(train, test, 6) == pytest.approx(want)


def test_the_bigram_is_witten_bell_and_sums_to_one():
    train = [[BOS_ID, 4, 5, EOS_ID], [BOS_ID, 4, 4, EOS_ID], [BOS_ID, 5, EOS_ID]]
    bigram = lm.BigramBaseline(train, vocab_size=7)
    for context in (BOS_ID, 4, 5, 6):  # 6: never seen as a context
        total = sum(bigram.prob(context, w) for w in range(7))
        assert total == pytest.approx(1.0)
        assert bigram.prob(context, PAD_ID) == 0 and bigram.prob(context, BOS_ID) == 0
    unigram = lm.unigram_probabilities(train, 7)
    # after 4: c(4) = 3 (5, 4, eos), three different followers: lambda = 3 / 6
    assert bigram.prob(4, 5) == pytest.approx(0.5 * 1 / 3 + 0.5 * float(unigram[5]))
    assert bigram.prob(6, 5) == pytest.approx(float(unigram[5]))
    assert 0 < bigram.prob(5, 6)  # an unseen bigram


def test_on_the_sample_the_bigram_beats_the_unigram_and_the_model_beats_the_unigram(data, trained):
    V = len(data.vocab)
    unigram = lm.unigram_perplexity(data.train, data.test, V)
    bigram = lm.bigram_perplexity(data.train, data.test, V)
    assert math.isfinite(unigram) and bigram < unigram
    assert lm.perplexity(trained, data.test) < unigram


# ---------------------------------------------------------------- sampling ---------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-0.5), "temperature must be a number >= 0"),
        (dict(temperature=float("nan")), "temperature must be a number >= 0"),
        (dict(top_k=0), "top_k must be None or an int >= 1"),
        (dict(top_k=2.5), "top_k must be None or an int >= 1"),
        (dict(top_p=0.0), "top_p must be None or a number in (0, 1]"),
        (dict(top_p=1.5), "top_p must be None or a number in (0, 1]"),
        (dict(generator=3), "generator must be a torch.Generator"),
    ],
)
def test_sample_next_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError) as error:
        lm.sample_next(torch.zeros(2, 5), **kwargs)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "logits, message",
    [
        (torch.zeros(2, 3, 4), "(V,) or (B, V)"),
        (torch.zeros(3, dtype=torch.long), "float tensor"),
        (torch.tensor([0.0, float("nan")]), "NaN"),
        (torch.full((2,), -math.inf), "all -inf"),
    ],
)
def test_sample_next_rejects_bad_logits(logits, message):
    with pytest.raises(ValueError) as error:
        lm.sample_next(logits)
    assert message in str(error.value)


def test_sample_next_shapes_greedy_and_the_generator():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5]])
    assert lm.sample_next(logits, 0.0).tolist() == [1, 0]
    assert lm.sample_next(logits[0], 0.0).shape == ()
    assert lm.sample_next(logits[0], 1.0, generator=torch.Generator()).shape == ()
    state = torch.get_rng_state()
    a = lm.sample_next(logits.repeat(50, 1), generator=torch.Generator().manual_seed(1))
    b = lm.sample_next(logits.repeat(50, 1), generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.dtype == torch.long and a.shape == (100,)
    assert torch.equal(torch.get_rng_state(), state)


def test_top_k_keeps_ties_and_top_p_keeps_the_boundary_token():
    gen = torch.Generator().manual_seed(0)
    tied = torch.tensor([2.0, 1.0, 1.0, 0.0]).repeat(2000, 1)
    assert set(lm.sample_next(tied, top_k=2, generator=gen).tolist()) == {0, 1, 2}
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    drawn = lm.sample_next(probs.log().repeat(2000, 1), top_p=0.6, generator=gen)
    assert set(drawn.tolist()) == {0, 1}  # 0.5 < 0.6: the token that crosses p is kept
    drawn = lm.sample_next(probs.log().repeat(2000, 1), top_p=0.4, generator=gen)
    assert set(drawn.tolist()) == {0}
    # top-k first, then top-p on the renormalised top-2 (0.625, 0.375)
    drawn = lm.sample_next(probs.log().repeat(2000, 1), top_k=2, top_p=0.6, generator=gen)
    assert set(drawn.tolist()) == {0}


def test_sample_next_leaves_the_logits_alone_and_survives_tiny_temperatures():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    kept = logits.clone()
    assert lm.sample_next(logits, 1e-9, top_k=2, top_p=0.5).tolist() == [1]
    assert torch.equal(logits, kept)


# ----------------------------------------------------------------- generation ------


def test_the_cached_step_gives_the_full_models_logits(trained):
    prefix = torch.tensor([[BOS_ID, 5, 9, 12, 7], [BOS_ID, 8, 8, 3, 4]])
    cache = lm.LMCache.start(trained, 2)
    with torch.no_grad():
        full = trained(prefix)  # (2, 5, V)
        for t in range(prefix.shape[1]):
            step = lm.lm_step(trained, prefix[:, t], cache)
            assert torch.allclose(step, full[:, t], atol=1e-5), t
    assert cache.length == 5 and cache.self_kv[0][0].shape == (2, 2, 5, 8)


@pytest.mark.parametrize("settings", [dict(temperature=0.0), dict(temperature=1.0),
                                      dict(temperature=0.8, top_k=5, top_p=0.9)])  # fmt: skip
def test_cached_generation_equals_recomputing_token_for_token(trained, data, settings):
    prompt = torch.tensor([[BOS_ID, *data.vocab.encode("I'm")]] * 4)
    runs = []
    for use_cache in (True, False):
        gen = torch.Generator().manual_seed(3)
        runs.append(lm.generate(trained, prompt, 20, **settings, generator=gen,
                                use_cache=use_cache))  # fmt: skip
    assert torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, : prompt.shape[1]], prompt)


def test_generation_pads_after_eos_and_stops(trained, data):
    prompt = torch.tensor([[BOS_ID, *data.vocab.encode("I'm")]] * 8)
    out = lm.generate(trained, prompt, 30, generator=torch.Generator().manual_seed(0))
    for row in out.tolist():
        if EOS_ID in row:
            assert set(row[row.index(EOS_ID) + 1 :]) <= {PAD_ID}
    assert out.shape[1] <= prompt.shape[1] + 30


def test_generation_errors(trained):
    with pytest.raises(ValueError, match="eval mode"):
        lm.generate(trained.train(), torch.tensor([[BOS_ID]]), 3)
    trained.eval()
    with pytest.raises(ValueError, match="no padding"):
        lm.generate(trained, torch.tensor([[BOS_ID, PAD_ID]]), 3)
    with pytest.raises(ValueError, match="longer than the model's max_len=40"):
        lm.generate(trained, torch.tensor([[BOS_ID]]), 41)
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate(trained, torch.tensor([[BOS_ID]]), 0)


def test_generation_speedup_reports_both_timings(trained):
    result = lm.generation_speedup(trained, torch.tensor([[BOS_ID, 5]]), n_tokens=6, repeats=1)
    assert set(result) == {"recompute_s", "cached_s", "speedup", "n_tokens", "batch"}
    assert result["speedup"] > 0


def test_a_checkpoint_round_trips(trained, data, tmp_path):
    path = lm.save_lm(tmp_path / "lm.pt", trained, data.vocab, seed=0, steps=30)
    model, vocab, extra = lm.load_lm(path)
    assert vocab == data.vocab and extra == {"seed": 0, "steps": 30} and not model.training
    tokens = torch.tensor([[BOS_ID, 5, 6]])
    assert torch.equal(model(tokens), trained(tokens))
    assert model.out.weight is model.embed.embedding.weight
    with pytest.raises(FileNotFoundError):
        lm.load_lm(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="cannot read"):
        lm.load_lm(tmp_path / "junk.pt")
