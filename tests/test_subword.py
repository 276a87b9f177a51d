"""course.subword: the shared BPE vocabulary of lesson 11, on a small made-up corpus.

The corpus is generated here (a few hundred short French-like and English-like sentences,
accents included); no data file is read.
"""

import pickle
import random
import re

import pytest
import torch

from course.data import BOS_ID, EOS_ID, PAD_ID, SPECIALS
from course.subword import (
    UNK,
    UNK_ID,
    WORD_BOUNDARY,
    SubwordVocab,
    average_length,
    minimum_vocab_size,
    train_subword_vocab,
)

FRENCH = {
    "subject": ["je", "tu", "il", "elle", "nous", "vous", "le garçon", "ma sœur", "mon père"],
    "verb": ["vois", "aime", "préfère", "achète", "cherche", "ai reçu", "ai mangé"],
    "object": [
        "la forêt",
        "le château",
        "un gâteau",
        "la côte",
        "un hôtel",
        "le cœur",
        "une leçon",
        "la fenêtre",
        "le élève",
        "la mère",
    ],
    "end": [".", "à la maison .", "déjà .", "très tôt .", "là-bas ?", "!"],
}
ENGLISH = {
    "subject": ["i", "you", "he", "she", "we", "they", "the boy", "my sister", "my father"],
    "verb": ["see", "like", "prefer", "buy", "look for", "received", "ate"],
    "object": [
        "the forest",
        "the castle",
        "a cake",
        "the coast",
        "a hotel",
        "the heart",
        "a lesson",
        "the window",
        "the pupil",
        "the mother",
    ],
    "end": [".", "at home .", "already .", "very early .", "over there ?", "!"],
}
# Sentences the corpus never has, of words it mostly never has, in its letters only.
UNSEEN = [
    "les élèves préfèrent les fenêtres .",
    "ma mère a reçu des leçons à la côte .",
    "nos cœurs sont là-bas !",
    "the pupils preferred the castles .",
    "they looked for the coats at the hotel ?",
]


def _sentences(words: dict[str, list[str]], rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(words[part]) for part in words) for _ in range(n)]


def _corpus(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return _sentences(FRENCH, rng, n) + _sentences(ENGLISH, rng, n)


CORPUS = _corpus()
SIZES = (60, 120, 240)  # minimum_vocab_size(CORPUS) < 60; 240 is below the largest BPE allows


@pytest.fixture(scope="module")
def vocab() -> SubwordVocab:
    return train_subword_vocab(CORPUS, 120)


def test_the_test_corpus_fits_the_sizes_and_never_holds_the_unseen_sentences():
    assert minimum_vocab_size(CORPUS) < SIZES[0]
    assert not set(UNSEEN) & set(CORPUS)


# --- ids and specials ------------------------------------------------------------------------


def test_specials_sit_at_ids_0_to_3_and_encode_never_produces_them(vocab):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert vocab.itos[:4] == [*SPECIALS, UNK] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(vocab) == len(vocab.itos) == 120
    for text in CORPUS + UNSEEN:
        ids = vocab.encode(text)
        assert ids and all(4 <= i < len(vocab) for i in ids), text


def test_len_and_repr(vocab):
    assert len(vocab) == 120
    assert repr(vocab).startswith("SubwordVocab(120 BPE pieces: <pad> <bos> <eos> <unk> ")


# --- round trips -----------------------------------------------------------------------------


def test_every_training_sentence_round_trips(vocab):
    for text in CORPUS:
        assert vocab.decode(vocab.encode(text)) == text


@pytest.mark.parametrize("text", ["je suis très fatigué .", "ça a été tôt ?", *UNSEEN])
def test_unseen_sentences_with_accents_round_trip(vocab, text):
    ids = vocab.encode(text)
    assert UNK_ID not in ids  # every letter is in the corpus: é è ç à ô œ ê
    assert vocab.decode(ids) == text
    assert vocab.decode(torch.tensor(ids)) == text


def test_whitespace_runs_become_single_spaces(vocab):
    assert vocab.encode("  je\tvois   la côte .\n") == vocab.encode("je vois la côte .")
    assert vocab.decode(vocab.encode("  je\tvois   la côte .\n")) == "je vois la côte ."
    assert vocab.encode("") == [] and vocab.decode([]) == ""


# --- what BPE learns -------------------------------------------------------------------------


def test_training_is_deterministic():
    first, second = train_subword_vocab(CORPUS, 120), train_subword_vocab(list(CORPUS), 120)
    assert first == second and first.itos == second.itos
    assert all(first.encode(t) == second.encode(t) for t in CORPUS + UNSEEN)
    assert train_subword_vocab(CORPUS, 120, seed=7).itos == first.itos  # nothing sampled


def test_a_bigger_vocabulary_gives_shorter_or_equal_sequences():
    lengths = [average_length(train_subword_vocab(CORPUS, v), CORPUS) for v in SIZES]
    assert lengths[0] >= lengths[1] >= lengths[2], lengths
    assert lengths[0] > lengths[2], lengths
    letters = sum(len(t.replace(" ", "")) for t in CORPUS) / len(CORPUS)
    assert lengths[0] < letters  # even the smallest has merged something


@pytest.mark.parametrize("word", ["la", "le", "the", "my", "a", "à", "."])
def test_frequent_words_become_one_piece(vocab, word):
    assert vocab.pieces(word) == [WORD_BOUNDARY + word]
    assert len(vocab.encode(f"{word} {word}")) == 2


def test_rare_words_stay_in_pieces_until_the_vocabulary_grows(vocab):
    assert len(vocab.pieces("préfère")) > 1  # in 1 French sentence in 7
    assert len(vocab.pieces("préfèrent")) > 1  # never seen: spelt with known pieces
    assert train_subword_vocab(CORPUS, SIZES[-1]).pieces("je") == ["▁je"]


def test_pieces_never_span_a_space(vocab):
    for text in CORPUS + UNSEEN:
        pieces = vocab.pieces(text)
        assert all(WORD_BOUNDARY not in p[1:] for p in pieces), pieces
        assert sum(p.startswith(WORD_BOUNDARY) for p in pieces) == len(text.split())
        assert "".join(pieces).replace(WORD_BOUNDARY, " ").strip() == text
        assert [vocab.itos[i] for i in vocab.encode(text)] == pieces


def test_average_length_is_the_mean_number_of_pieces(vocab):
    texts = ["je", "je vois", "il aime la forêt ."]
    expected = sum(len(vocab.pieces(t)) for t in texts) / 3
    assert average_length(vocab, texts) == pytest.approx(expected)
    assert average_length(vocab, ["la la la", "the"]) == 2.0


# --- unknown characters ----------------------------------------------------------------------


@pytest.mark.parametrize("char", ["你", "😀", "ß"])
def test_unseen_characters_encode_to_unk(vocab, char):
    text = f"je vois {char} ."
    ids = vocab.encode(text)
    assert UNK_ID in ids
    assert vocab.decode(ids) == f"je vois {UNK} ."
    assert vocab.decode(vocab.encode(f"la {char}{char}{char}")) == f"la {UNK}"  # one per run


# --- decode ----------------------------------------------------------------------------------


def test_decode_stops_at_eos_and_skips_pad_and_bos(vocab):
    ids = vocab.encode("je vois la côte .")
    other = vocab.encode("the heart")
    sequence = [BOS_ID, *ids, EOS_ID, *other, PAD_ID]
    assert vocab.decode(sequence) == "je vois la côte ."
    assert vocab.decode(torch.tensor(sequence)) == "je vois la côte ."
    assert vocab.decode([PAD_ID, BOS_ID, *ids[:2], PAD_ID, *ids[2:], EOS_ID]) == vocab.decode(ids)
    assert vocab.decode([EOS_ID, *ids]) == ""


# --- save, load, pickle ----------------------------------------------------------------------


def test_save_and_load_round_trip(vocab, tmp_path):
    path = vocab.save(tmp_path / "fr-en.model")
    assert path.is_file() and list(tmp_path.iterdir()) == [path]
    loaded = SubwordVocab.load(path)
    assert loaded == vocab and loaded.itos == vocab.itos and len(loaded) == len(vocab)
    assert all(loaded.encode(t) == vocab.encode(t) for t in CORPUS + UNSEEN)
    assert SubwordVocab.load(str(path)) == vocab


def test_a_vocabulary_pickles(vocab):
    copy = pickle.loads(pickle.dumps(vocab))
    assert copy == vocab and copy.encode(UNSEEN[0]) == vocab.encode(UNSEEN[0])


# --- errors ----------------------------------------------------------------------------------


def test_a_too_small_vocab_size_says_the_minimum():
    minimum = minimum_vocab_size(CORPUS)
    letters = {c for t in CORPUS for c in t if c != " "}
    assert minimum == 4 + len(letters) + 1  # the specials, the letters and "▁"
    message = rf"vocab_size {minimum - 1} is too small.*at least {minimum} .*got {minimum - 1}"
    with pytest.raises(ValueError, match=message):
        train_subword_vocab(CORPUS, minimum - 1)
    assert len(train_subword_vocab(CORPUS, minimum)) == minimum  # the alphabet, no merge


def test_a_too_large_vocab_size_says_the_maximum():
    with pytest.raises(ValueError, match=r"vocab_size 5000 is too large.*at most \d+, got 5000"):
        train_subword_vocab(CORPUS, 5000)


@pytest.mark.parametrize(
    "texts, message",
    [
        (["je vois .", 42], "every sentence to be a str, got 42 (int) at position 1"),
        (["je vois .", None], "every sentence to be a str, got None (NoneType)"),
        ([b"je vois ."], "every sentence to be a str, got b'je vois .' (bytes)"),
        ("je vois la côte .", "an iterable of sentences, got the str 'je vois la côte .'"),
        ([], "at least one non-empty sentence, got 0 texts"),
        (["", "  ", "\n"], "at least one non-empty sentence, got 3 texts"),
        (iter([]), "at least one non-empty sentence, got 0 texts"),
    ],
)
def test_bad_training_texts_are_clear_errors(texts, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        train_subword_vocab(texts, 100)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_size": 100.0}, "vocab_size must be an int, got 100.0 (float)"),
        ({"vocab_size": True}, "vocab_size must be an int, got True (bool)"),
        ({"vocab_size": 100, "seed": -1}, "seed must be a non-negative int, got -1"),
    ],
)
def test_bad_training_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        train_subword_vocab(CORPUS, **kwargs)


@pytest.mark.parametrize(
    "ids, message",
    [
        ([4, 120], "id 120 is out of range: expected 0 to 119 for a vocabulary of 120 pieces"),
        ([-1], "id -1 is out of range: expected 0 to 119"),
        (torch.tensor([5, 999]), "id 999 is out of range: expected 0 to 119"),
        ([4, 5.0], "decode expects int ids, got 5.0 (float)"),
        ([True], "decode expects int ids, got True (bool)"),
        (torch.zeros(2, 3, dtype=torch.long), "a 1-D tensor of ids, got shape (2, 3)"),
        ("je", "decode expects ids, got the str 'je'"),
    ],
)
def test_bad_ids_are_clear_errors(vocab, ids, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        vocab.decode(ids)


def test_other_misuse_is_a_clear_error(vocab, tmp_path):
    with pytest.raises(ValueError, match=re.escape("encode expects a str, got ['je'] (list)")):
        vocab.encode(["je"])
    with pytest.raises(ValueError, match=re.escape("pieces expects a str, got 3 (int)")):
        vocab.pieces(3)
    with pytest.raises(ValueError, match="average_length expects at least one sentence, got none"):
        average_length(vocab, [])
    with pytest.raises(ValueError, match="average_length expects every sentence to be a str"):
        average_length(vocab, [["je"]])
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(ValueError, match=r"junk\.model: expected a serialized sentencepiece"):
        SubwordVocab.load(junk)
