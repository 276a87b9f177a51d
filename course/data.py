"""The task registry: every task of the course by name, `load_task(name, seed)`, and
`make_batches`, which turns a task's pairs into padded tensors.

The course's data is a house of floors, each importing only from the floors below it:

    course.data        this module: Task, TASKS, load_task, make_batches (the roof)
    course.lm          lesson 12's language-model data (load_lm_data), with its model
    course.subword     a BPE vocabulary (sentencepiece), for fra-eng-full and lm-en
    course.tatoeba     the real sentences: the Tatoeba file, read or downloaded once
    course.generated   the generated tasks: toy-translation, reverse, SCAN (scan_dataset)
    course.tokens      the ground floor: PAD_ID, BOS_ID, EOS_ID, UNK, Vocab, pad_rows

so a task's whole path is found by going down: load_task("fra-eng-full") below is
course.tatoeba's pairs, course.subword's pieces and course.tokens' Vocab. Every name of
the floors below that the lessons use from here (the specials, Vocab, pad_rows, the toy
lexicon, scan_dataset, ...) is imported into this module and works as before, e.g.
`from course.data import PAD_ID, Vocab, load_task, scan_dataset`.

Tasks (`TASKS`), each a list of (source words, target words) pairs split into `train`
and a held-out `test` that shares no source sentence with it:

- **toy-translation** (lesson 09), **reverse**, **scan-simple**, **scan-length**,
  **scan-addjump**: generated offline by small programs from fixed seeds, the same on
  every machine (course.generated describes their grammars and splits);
- **fra-eng**, **fra-eng-full** (lesson 11): Tatoeba's French-English pairs, read from the
  data directory (course.tatoeba); fra-eng-full in the subword pieces of one shared BPE
  vocabulary (course.subword);
- **lm-en** (lesson 12): that file's English side for a language model, which
  `load_task("lm-en", seed)` returns as a course.lm.LMData (id lists, no source side),
  not as a Task; it is not in TASKS.

Vocabularies (`Vocab`) put the specials first, with the same ids everywhere: PAD_ID = 0
("<pad>"), BOS_ID = 1 ("<bos>"), EOS_ID = 2 ("<eos>"). `make_batches` yields teacher
forcing's three tensors: the source followed by <eos>, the decoder's input (<bos> then the
target) and what it must predict (the target then <eos>), the same words shifted by one.
Every id in them comes from the task's Vocab, so it is in range by construction: this is
where token ids enter the model's path, and where they are checked (an unknown word is a
ValueError before the first batch), once, on the CPU.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from course import lm, subword, tatoeba
from course.generated import (  # noqa: F401  (the lessons import these from here)
    ADJECTIVES,
    DETERMINERS,
    DIGITS,
    GENERATED_TASKS,
    NOUNS,
    OBJECT_MARKER,
    PREPOSITIONS,
    RELATIVE,
    SCAN_ACTIONS,
    SCAN_COMMAND_WORDS,
    SCAN_LENGTH_CUTOFF,
    SUBJECT_MARKER,
    TEST_FRACTION,
    VERBS,
    generated_split,
    scan_dataset,
)
from course.lm import LMData
from course.tokens import (  # noqa: F401  (the lessons import these from here)
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK,
    Pair,
    Vocab,
    pad_rows,
)


@dataclass(frozen=True)
class Task:
    """One task: its pairs, split, and its two vocabularies.

    `max_src_len` and `max_tgt_len` count words (no <bos>/<eos>) of the longest source and
    target over train and test; a model needs max_src_len + 1 and max_tgt_len + 1 positions.
    """

    name: str
    train: list[Pair]
    test: list[Pair]
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_src_len: int
    max_tgt_len: int
    # Real text (fra-eng): the held-out targets as text, and how output words become text.
    # Scores then compare detokenize(output words) with these strings, as papers do; for
    # the generated tasks both are None and the words are compared as they are.
    references: list[str] | None = None
    detokenize: Callable[[Sequence[str]], str] | None = None
    # Real text: how a sentence someone types becomes the source tokens the model reads
    # (the task's normalization, then words or subword pieces), and what a token is called.
    tokenize: Callable[[str], list[str]] | None = field(default=None, compare=False)
    unit: str = "words"

    def __repr__(self) -> str:
        return (
            f"Task({self.name!r}: {len(self.train)} train / {len(self.test)} test pairs, "
            f"vocab {len(self.src_vocab)} -> {len(self.tgt_vocab)}, "
            f"max length {self.max_src_len} -> {self.max_tgt_len})"
        )


REAL_TASKS: tuple[str, ...] = ("fra-eng", "fra-eng-full")  # Tatoeba's (course.tatoeba)
TASKS: tuple[str, ...] = GENERATED_TASKS + REAL_TASKS
# Lesson 12's language-modelling data: not a (source, target) Task, so not in TASKS (which
# every translation model and test walks through); load_task("lm-en") returns a
# course.lm.LMData instead.
LM_TASKS: tuple[str, ...] = ("lm-en",)
REAL_TEST_FRACTION = 0.1  # of fra-eng's pairs, in whole groups of one English sentence
# fra-eng-full: 2% of 135,611 pairs is about 2,700 held out, the size of a WMT test set
# (newstest2014, the paper's, has 3,003 sentences) and enough for a stable corpus BLEU;
# 10% would be 13,500 sentences to decode with beam search at every evaluation.
FULL_TEST_FRACTION = 0.02
# One BPE vocabulary for both languages (course.subword), trained on the training split.
# The paper's 37,000 served 4.5 million WMT sentence pairs; this file has 135,000 pairs of
# short everyday sentences. At 8,000 pieces a sentence is 9.2 pieces on average (6.4
# words; seed 0's training split, both languages), and doubling to 16,000 shortens it by only
# 5% (8.8) for twice the embedding
# matrix and many pieces too rare to learn.
FULL_VOCAB_SIZE = 8000


# ---------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------


def _task(name, train, test, src_vocab, tgt_vocab, **text) -> Task:
    """A Task, its longest source and target measured over both splits."""
    everything = train + test
    return Task(
        name=name,
        train=train,
        test=test,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
        max_src_len=max(len(source) for source, _ in everything),
        max_tgt_len=max(len(target) for _, target in everything),
        **text,
    )


def _with_unknowns(words: Sequence[str], vocab: Vocab) -> tuple[str, ...]:
    return tuple(word if word in vocab.stoi else UNK for word in words)


def _fra_eng_task(seed: int) -> Task:
    """The PyTorch tutorial's French -> English set, split by whole English sentences.

    The vocabularies hold the words of the training split only, as a model deployed
    would know them: a held-out word never seen in training becomes <unk> (in the source
    and in the teacher-forcing target; the references keep the real text).
    """
    sentences = tatoeba.tutorial_pairs(tatoeba.load_pairs())  # (French, English) strings
    train_text, test_text = tatoeba.grouped_split(
        sentences, group=lambda pair: pair[1], test_fraction=REAL_TEST_FRACTION, seed=seed
    )
    train = [(tuple(fr.split()), tuple(en.split())) for fr, en in train_text]
    src_vocab = Vocab([UNK, *(word for source, _ in train for word in source)])
    tgt_vocab = Vocab([UNK, *(word for _, target in train for word in target)])
    test = [
        (_with_unknowns(fr.split(), src_vocab), _with_unknowns(en.split(), tgt_vocab))
        for fr, en in test_text
    ]
    return _task(
        "fra-eng",
        train,
        test,
        src_vocab,
        tgt_vocab,
        references=[tatoeba.detokenize(en.split()) for _, en in test_text],
        detokenize=tatoeba.detokenize,
        tokenize=lambda sentence: tatoeba.tutorial_normalize(sentence).split(),
    )


def _fra_eng_full_task(seed: int) -> Task:
    """Every pair of the Tatoeba file up to tatoeba.FULL_MAX_WORDS words, French -> English,
    as written (tatoeba.full_normalize), in subword pieces of one shared BPE vocabulary.

    The split is grouped by English sentence, FULL_TEST_FRACTION held out. The vocabulary
    (at most FULL_VOCAB_SIZE pieces, fewer for a small file) is trained on the training
    split's French and English sentences only; a held-out character it never saw becomes
    <unk>. Source and target use the same Vocab, so the model can tie its embeddings.
    """
    sentences = tatoeba.full_pairs(tatoeba.load_pairs())  # (French, English) strings
    train_text, test_text = tatoeba.grouped_split(
        sentences, group=lambda pair: pair[1], test_fraction=FULL_TEST_FRACTION, seed=seed
    )
    bpe = subword.train_subword_vocab(
        [side for pair in train_text for side in pair], FULL_VOCAB_SIZE, seed=seed, exact=False
    )
    vocab = Vocab(bpe.itos)  # the same ids as the BPE model's: the specials, <unk>, pieces

    def tokenize(sentence: str) -> list[str]:
        return bpe.pieces(tatoeba.full_normalize(sentence))

    def pieces(pair: tuple[str, str]) -> Pair:
        return tuple(_with_unknowns(tokenize(side), vocab) for side in pair)

    return _task(
        "fra-eng-full",
        [pieces(pair) for pair in train_text],
        [pieces(pair) for pair in test_text],
        vocab,
        vocab,
        references=[english for _, english in test_text],
        detokenize=tatoeba.pieces_to_text,
        tokenize=tokenize,
        unit="subword pieces",
    )


def load_task(name: str, seed: int = 0) -> Task | LMData:
    """The task called `name` (one of TASKS, or "lm-en"), its random split drawn with `seed`.

    scan-length and scan-addjump are fixed splits: `seed` does not change them.
    fra-eng and fra-eng-full read the Tatoeba file (course.tatoeba), downloading it once
    when absent.

    "lm-en" (lesson 12) is not a translation task: it returns a course.lm.LMData (the
    English side of the same file as `<bos> BPE pieces <eos>` id lists, split and with a
    vocabulary of its own), course.lm.load_lm_data(seed) with its defaults, not a Task.
    """
    if name not in TASKS + LM_TASKS:
        known = ", ".join(TASKS + LM_TASKS)
        raise ValueError(f"unknown task {name!r}; the known tasks are: {known}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
    seed = int(seed)
    if name == "lm-en":
        return lm.load_lm_data(seed)
    if name == "fra-eng":
        return _fra_eng_task(seed)
    if name == "fra-eng-full":
        return _fra_eng_full_task(seed)
    train, test, src_vocab, tgt_vocab = generated_split(name, seed)
    return _task(name, train, test, src_vocab, tgt_vocab)


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


def make_batches(
    pairs: Sequence[Pair],
    task: Task,
    batch_size: int,
    shuffle: bool,
    generator: torch.Generator | None = None,
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """One epoch over `pairs` in batches: (src, tgt_in, tgt_out), long tensors on the CPU.

        src      (B, T_src)   source words, then <eos>          "the dog sees a cat <eos>"
        tgt_in   (B, T_tgt)   <bos>, then the target words      "<bos> ka baku ga ..."
        tgt_out  (B, T_tgt)   the target words, then <eos>      "ka baku ga ... <eos>"

    tgt_out is tgt_in shifted one step left: position t of the decoder sees tgt_in[:, :t+1]
    and must predict tgt_out[:, t] (teacher forcing). Each tensor is padded with PAD_ID to
    the longest row of its own batch. Every pair comes exactly once; the last batch is
    smaller when batch_size does not divide len(pairs). With shuffle=True the order is
    drawn from `generator` (torch's global generator when None), else pairs keep their
    order. Words are checked (ValueError for an unknown one) before the first batch.
    """
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, numbers.Integral)
        or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(task, Task):
        raise ValueError(f"task must be a Task (from load_task), got {type(task).__name__}")
    if not isinstance(shuffle, bool):
        raise ValueError(f"shuffle must be True or False, got {shuffle!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )
    pairs = list(pairs)
    if not pairs:
        raise ValueError("make_batches needs at least one (source, target) pair, got none")
    encoded = []  # (source ids, target ids), checked now rather than mid-epoch
    for pair in pairs:
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise ValueError(f"each pair must be (source words, target words), got {pair!r}")
        source, target = pair
        encoded.append((task.src_vocab.encode(source), task.tgt_vocab.encode(target)))
    order = torch.randperm(len(encoded), generator=generator).tolist() if shuffle else None
    return _batches(encoded, order, int(batch_size))


def _batches(
    encoded: list[tuple[list[int], list[int]]], order: list[int] | None, batch_size: int
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    if order is None:
        order = list(range(len(encoded)))
    for start in range(0, len(order), batch_size):
        chosen = [encoded[i] for i in order[start : start + batch_size]]
        src = pad_rows([source + [EOS_ID] for source, _ in chosen])  # (B, T_src)
        tgt_in = pad_rows([[BOS_ID] + target for _, target in chosen])  # (B, T_tgt)
        tgt_out = pad_rows([target + [EOS_ID] for _, target in chosen])  # (B, T_tgt)
        yield src, tgt_in, tgt_out
