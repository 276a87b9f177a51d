"""fra-eng-full: every pair of the file up to 20 words, as written, in pieces of one shared
BPE vocabulary trained on the training split only; a tied-embedding model trains on it and
translates. Read from tests/_tatoeba_sample.py's generated file (conftest), never the real one."""

from __future__ import annotations

import json

import pytest
import torch

from course import tatoeba
from course.data import BOS_ID, EOS_ID, PAD_ID, UNK, load_task, make_batches
from course.subword import WORD_BOUNDARY, train_subword_vocab
from course.train import main as train_main
from course.translate import load, translate


@pytest.fixture(scope="module")
def task():
    return load_task("fra-eng-full", seed=0)


def test_full_normalize_keeps_the_text_as_written_but_one_kind_of_space():
    assert tatoeba.full_normalize("  Je suis fatigué\u202f!  ") == "Je suis fatigué !"
    assert tatoeba.full_normalize("C\u2019est\u00a0l\u2019heure\u200b.") == "C'est l'heure."
    assert tatoeba.full_normalize("Tom a 3\u00a0chats.") == "Tom a 3 chats."
    # one Unicode form: "é" typed as e + a combining accent is the same text as "é"
    assert tatoeba.full_normalize("fatigue\u0301") == "fatigu\u00e9"


def test_full_pairs_keep_case_accents_and_punctuation_and_drop_only_long_pairs():
    pairs = [
        ("I'm tired.", "Je suis fatigué."),
        ("Go.", "Va\u202f!"),
        (" ".join(["word"] * 20), " ".join(["mot"] * 20)),  # 20 words: kept
        (" ".join(["word"] * 21), "Court."),  # 21 English words: dropped
        ("Short.", " ".join(["mot"] * 21)),  # 21 French words: dropped
    ]
    kept = tatoeba.full_pairs(pairs)
    assert kept[:2] == [("Je suis fatigué.", "I'm tired."), ("Va !", "Go.")]  # French first
    assert len(kept) == 3
    assert len(tatoeba.full_pairs(pairs, max_words=1)) == 0
    assert len(tatoeba.full_pairs(pairs, max_words=2)) == 1  # "Va !" / "Go."


def test_pieces_to_text_undoes_the_word_boundaries():
    pieces = [f"{WORD_BOUNDARY}Je", f"{WORD_BOUNDARY}suis", f"{WORD_BOUNDARY}fatigu", "é", "."]
    assert tatoeba.pieces_to_text(pieces) == "Je suis fatigué."
    assert tatoeba.pieces_to_text([]) == ""


def test_the_task_is_french_to_english_in_pieces_of_one_shared_vocabulary(task):
    assert task.src_vocab is task.tgt_vocab  # one id space: the embeddings can be tied
    assert task.src_vocab.itos[:4] == ["<pad>", "<bos>", "<eos>", UNK]
    assert (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2)
    source, target = task.train[0]
    assert all(piece in task.src_vocab.stoi for piece in source + target)
    french = {tatoeba.full_normalize(fr) for _, fr in tatoeba.read_pairs(tatoeba.find())}
    english = {tatoeba.full_normalize(en) for en, _ in tatoeba.read_pairs(tatoeba.find())}
    for source, target in task.train:
        assert tatoeba.pieces_to_text(source) in french
        assert tatoeba.pieces_to_text(target) in english
    # the text as written: capitals, accents and the apostrophe survive
    texts = [tatoeba.pieces_to_text(target) for _, target in task.train]
    assert any(text[0].isupper() for text in texts) and any("'" in text for text in texts)
    assert any("ê" in tatoeba.pieces_to_text(source) for source, _ in task.train)


def test_every_pair_of_the_file_is_used_not_only_the_tutorials(task):
    pairs = tatoeba.read_pairs(tatoeba.find())
    assert len(task.train) + len(task.test) == len(pairs)  # none over 20 words in the sample
    assert len(tatoeba.tutorial_pairs(pairs)) < len(pairs)
    used = {tatoeba.pieces_to_text(target) for _, target in task.train} | set(task.references)
    assert "Tom can't swim." in used  # the tutorial's filter drops it (no "i am", "he is")


def test_no_held_out_english_sentence_is_in_training_and_the_references_are_the_text(task):
    train_english = {tatoeba.pieces_to_text(target) for _, target in task.train}
    assert task.test and task.references
    assert not train_english & set(task.references)
    assert [tatoeba.pieces_to_text(t) for _, t in task.test] == task.references


def test_the_vocabulary_is_trained_on_the_training_split_only(task, monkeypatch):
    seen = []
    real = train_subword_vocab

    def spy(texts, *args, **kwargs):
        seen.extend(texts)
        return real(texts, *args, **kwargs)

    monkeypatch.setattr("course.subword.train_subword_vocab", spy)
    again = load_task("fra-eng-full", seed=0)
    assert again.src_vocab == task.src_vocab  # deterministic
    trained_on = set(seen)
    train_text = {tatoeba.pieces_to_text(side) for pair in again.train for side in pair}
    assert trained_on == train_text
    assert not trained_on & set(again.references)


def test_another_seed_draws_another_split(task):
    other = load_task("fra-eng-full", seed=1)
    assert set(other.references) != set(task.references)


def test_a_sentence_is_tokenized_as_the_training_pairs_were(task):
    source, _ = task.train[0]
    text = tatoeba.pieces_to_text(source)
    assert task.tokenize(text) == list(source)
    assert task.tokenize("  " + text.replace(" ", "\u00a0") + " ") == list(source)
    assert task.unit == "subword pieces"


def test_batches_of_pieces(task):
    src, tgt_in, tgt_out = next(make_batches(task.train[:3], task, batch_size=3, shuffle=False))
    first_source, first_target = task.train[0]
    assert src[0, : len(first_source)].tolist() == task.src_vocab.encode(first_source)
    assert tgt_in[0, 0] == BOS_ID and tgt_out[0, len(first_target)] == EOS_ID


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny tied model trained for 30 steps: its --out folder."""
    out = tmp_path_factory.mktemp("full")
    argv = ["--task", "fra-eng-full", "--device", "cpu", "--out", str(out), "--seed", "0",
            "--set", "time_budget=0", "--steps", "30", "--set", "d_model=32", "--set", "d_ff=64",
            "--set", "n_layers=1", "--set", "beam_size=2", "--set", "warmup=20"]  # fmt: skip
    assert train_main(argv) == 0
    return out


def test_the_full_task_trains_a_tied_model_and_scores_its_text(trained):
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["task"] == "fra-eng-full"
    assert {"bleu", "chrf", "exact_match", "greedy"} <= set(metrics)
    assert 0.0 <= metrics["bleu"] <= 100.0 and 0.0 <= metrics["chrf"] <= 100.0
    model, task = load(trained / "checkpoint.pt")
    assert model.tie_embeddings
    assert model.src_embed.embedding.weight is model.tgt_embed.embedding.weight
    assert model.out.weight is model.src_embed.embedding.weight
    result = translate(model, task, "Je suis fatigué !", beam=2)
    assert result.source_words[-1] == "<eos>"
    assert result.text == tatoeba.pieces_to_text([w for w in result.output_words if w != "<eos>"])
    assert result.attention.shape == (len(result.output_words), len(result.source_words))


def test_tied_embeddings_need_one_vocabulary(tmp_path, capsys):
    argv = ["--task", "fra-eng", "--device", "cpu", "--out", str(tmp_path),
            "--set", "tie_embeddings=true", "--set", "time_budget=1"]  # fmt: skip
    assert train_main(argv) == 2
    assert "tie_embeddings" in capsys.readouterr().err


def test_an_unseen_character_is_read_as_unk(trained):
    model, task = load(trained / "checkpoint.pt")
    result = translate(model, task, "Je suis \u4e2d !")
    assert UNK in result.source_words and result.unknown
    assert torch.isfinite(result.attention).all()
