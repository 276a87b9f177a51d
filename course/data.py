"""The data sets of lesson 09 and of `python -m course.train`, all generated offline.

Nothing is downloaded: every task is produced by a small program from a fixed seed, so a
run on any machine sees the same sentences. Each task is a list of (source words, target
words) pairs split into `train` and a held-out `test` that shares no source sentence with
it; `load_task(name, seed)` builds one, `make_batches` turns pairs into padded tensors.

Tasks (`TASKS`):

- **toy-translation** (lesson 09): from a toy English-like SVO language into a toy SOV
  language with case particles. The source grammar, one sentence a line:

      S    -> NP V NP                     subject, verb, object
      NP   -> Det (Adj) N (PP | RC)       an optional adjective, an optional modifier
      PP   -> Prep Det N                  "near the river"
      RC   -> that V Det N                "that sees a cat"
      Det  -> the | a                     Adj -> big | small | red | young | happy | quiet
      N    -> dog | cat | bird | child | teacher | farmer | king | horse
            | house | river | tree | book
      V    -> sees | likes | chases | finds | helps | follows | carries | watches
      Prep -> near | behind | under | with

  The target grammar is head-final: every word is translated by a fixed lexicon (the ->
  ka, dog -> baku, sees -> mira, near -> soba, ...) and reordered,

      S_t  -> NP_t ga NP_t wo V_t         the verb last; ga marks the subject, wo the object
      NP_t -> (PP_t | RC_t) Det_t (Adj_t) N_t     the modifier before the noun it modifies
      PP_t -> Det_t N_t Prep_t            a postposition after its noun
      RC_t -> Det_t N_t wo V_t            the relative clause's object, then its verb

  One pair (12 source words, 14 target words):

      the young farmer near a river carries the book that follows a dog
      na suvi soba ka wako gorun ga na baku wo seka ka lipa wo bora

  The main verb, in the middle of the source, ends the target; the words at the end of
  the source (the object's relative clause) come before the noun they modify. A
  translation must therefore reorder across the whole sentence: the word emitted at
  each target step sits almost anywhere in the source. An encoder that squeezes the
  source into one vector (lesson 01) has to keep all of it until the end; attention
  looks each word up when it is needed. The corpus is 10,000 distinct sentences of 5 to
  15 words, the same on every run; `seed` draws the 80/20 split.
- **reverse**: a digit string written backwards ("3 1 4" -> "4 1 3"), 1 to 12 digits;
  every string of 1 or 2 digits and 1,000 of each longer length; seeded 80/20 split.
- **SCAN** (Lake & Baroni, 2018): navigation commands into action sequences ("jump twice
  after walk left" -> "I_TURN_LEFT I_WALK I_JUMP I_JUMP"). `scan_dataset()` generates all
  20,910 commands from the paper's phrase-structure grammar and interpretation rules:

      C   -> S and S | S after S | S      [[S1 and S2]]   = [[S1]] [[S2]]
                                          [[S1 after S2]] = [[S2]] [[S1]]
      S   -> V twice | V thrice | V       [[V twice]] = [[V]] [[V]], thrice: three times
      V   -> X opposite DIR | X around DIR | X DIR | U
      X   -> U | turn                     [[walk]] = I_WALK, ..., [[turn]] = no action
      U   -> walk | look | run | jump     [[left]] = I_TURN_LEFT, [[right]] = I_TURN_RIGHT
      DIR -> left | right

      [[X DIR]] = [[DIR]] [[X]]           [[X opposite DIR]] = [[DIR]] [[DIR]] [[X]]
      [[X around DIR]] = ([[DIR]] [[X]]) repeated 4 times

  (the paper writes V -> D opposite D etc. with D -> U left | turn left | ...: the same
  language, the same meanings). So "turn around right" is I_TURN_RIGHT x 4, "walk
  opposite left" is I_TURN_LEFT I_TURN_LEFT I_WALK, and "turn" alone is no command.
  4 + 3 * 5 * 2 = 34 verb phrases, 102 with twice/thrice, 102 + 2 * 102 * 102 = 20,910
  commands. Splits: **scan-simple** (seeded 80/20: 16,728 / 4,182), **scan-length**
  (train on the commands of at most 22 actions: 16,990 / 3,920), **scan-addjump** (train
  on every command without "jump" plus the bare "jump"; test on every other command
  with "jump": 13,204 / 7,706; the published train file has 14,670 lines because it
  repeats the bare "jump" to make up 10% of them). The last two are fixed: `seed` does
  not change them.
- **fra-eng**, **fra-eng-full** (lesson 11): Tatoeba's French-English pairs, read from the
  data directory (course.tatoeba); **lm-en** (lesson 12): that file's English side for a
  language model, which `load_task("lm-en", seed)` returns as a course.lm.LMData (id
  lists, no source side), not as a Task; it is not in TASKS.

Vocabularies (`Vocab`) put the specials first, with the same ids everywhere: PAD_ID = 0
("<pad>"), BOS_ID = 1 ("<bos>"), EOS_ID = 2 ("<eos>"). `make_batches` yields teacher
forcing's three tensors: the source followed by <eos>, the decoder's input (<bos> then the
target) and what it must predict (the target then <eos>), the same words shifted by one.
"""

from __future__ import annotations

import functools
import numbers
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:  # course.lm imports this module: only the annotation needs it
    from course.lm import LMData

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")  # at ids PAD_ID, BOS_ID, EOS_ID

Pair = tuple[tuple[str, ...], tuple[str, ...]]  # (source words, target words)


class Vocab:
    """Words <-> ids: the three specials first, then each distinct token in the order given.

    `itos[i]` is the word of id i, `stoi[word]` the id of a word. Building a Vocab from
    another's `itos` gives the same Vocab (the specials are not added twice).
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str):
            raise ValueError(f"Vocab expects an iterable of tokens, got the str {tokens!r}")
        tokens = list(tokens)
        for token in tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"every token must be a non-empty str, got {token!r}")
        self.itos: list[str] = list(dict.fromkeys([*SPECIALS, *tokens]))
        self.stoi: dict[str, int] = {word: i for i, word in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:  # two Vocabs are equal when their words are
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # mutable, like the list it wraps

    def __repr__(self) -> str:
        return (
            f"Vocab({len(self)} words: {' '.join(self.itos[:8])}{' ...' if len(self) > 8 else ''})"
        )

    def encode(self, words: Sequence[str]) -> list[int]:
        """The ids of `words` (a sequence of words, not a sentence string), no specials added."""
        if isinstance(words, str):
            raise ValueError(
                f"encode expects a sequence of words, got the str {words!r}: split it first"
            )
        ids = []
        for word in words:
            if word not in self.stoi:
                raise ValueError(
                    f"unknown word {word!r}: not among the {len(self)} words of this vocabulary"
                )
            ids.append(self.stoi[word])
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The words of `ids` up to the first <eos> (excluded), skipping <pad> and <bos>.

        Accepts a list of ints or a 1-D tensor.
        """
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode expects a 1-D tensor of ids, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        words = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise ValueError(f"decode expects int ids, got {i!r} ({type(i).__name__})")
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is out of range for a vocabulary of {len(self)} words")
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            words.append(self.itos[i])
        return words


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


GENERATED_TASKS: tuple[str, ...] = (
    "toy-translation",
    "reverse",
    "scan-simple",
    "scan-length",
    "scan-addjump",
)
REAL_TASKS: tuple[str, ...] = ("fra-eng", "fra-eng-full")  # Tatoeba's (course.tatoeba)
TASKS: tuple[str, ...] = GENERATED_TASKS + REAL_TASKS
# Lesson 12's language-modelling data: not a (source, target) Task, so not in TASKS (which
# every translation model and test walks through); load_task("lm-en") returns a
# course.lm.LMData instead.
LM_TASKS: tuple[str, ...] = ("lm-en",)
UNK = "<unk>"  # a real task's stand-in for a word its training split never had
REAL_TEST_FRACTION = 0.1  # of fra-eng's pairs, in whole groups of one English sentence
# fra-eng-full: 2% of 135,611 pairs is about 2,700 held out, the size of a WMT test set
# (newstest2014, the paper's, has 3,003 sentences) and enough for a stable corpus BLEU;
# 10% would be 13,500 sentences to decode with beam search at every evaluation.
FULL_TEST_FRACTION = 0.02
# One BPE vocabulary for both languages (course.subword), trained on the training split.
# The paper's 37,000 served 4.5 million WMT sentence pairs; this file has 135,000 pairs of
# short everyday sentences. At 8,000 pieces a sentence is 9.3 pieces on average (6.9
# words), and doubling to 16,000 shortens it by only 5% (8.8) for twice the embedding
# matrix and many pieces too rare to learn.
FULL_VOCAB_SIZE = 8000

TEST_FRACTION = 0.2  # of the random splits
SCAN_LENGTH_CUTOFF = 22  # scan-length trains on commands of at most this many actions

# ---------------------------------------------------------------------------------------
# toy-translation: the lexicon (source word -> target word) and the grammar's sampler
# ---------------------------------------------------------------------------------------

DETERMINERS = {"the": "ka", "a": "na"}
ADJECTIVES = {
    "big": "ogo",
    "small": "tiki",
    "red": "raka",
    "young": "wako",
    "happy": "yoro",
    "quiet": "sizu",
}
NOUNS = {
    "dog": "baku",
    "cat": "miro",
    "bird": "tika",
    "child": "nolu",
    "teacher": "sapen",
    "farmer": "gorun",
    "king": "raju",
    "horse": "kesa",
    "house": "dalem",
    "river": "suvi",
    "tree": "koran",
    "book": "lipa",
}
VERBS = {
    "sees": "mira",
    "likes": "ama",
    "chases": "kusa",
    "finds": "lota",
    "helps": "pena",
    "follows": "seka",
    "carries": "bora",
    "watches": "vena",
}
PREPOSITIONS = {"near": "soba", "behind": "ura", "under": "sita", "with": "tomo"}
RELATIVE = "that"  # source only: the target marks a relative clause by its position
SUBJECT_MARKER, OBJECT_MARKER = "ga", "wo"  # target only

TOY_SENTENCES = 10_000
TOY_CORPUS_SEED = 2017  # fixed: every run sees the same corpus; `seed` only draws the split
P_ADJECTIVE = 0.5
P_PP, P_RC = 0.3, 0.3  # else (0.4) the noun phrase has no modifier


def _toy_noun_phrase(rng: random.Random) -> tuple[list[str], list[str]]:
    """One noun phrase, as (source words, target words)."""
    det, noun = rng.choice(list(DETERMINERS)), rng.choice(list(NOUNS))
    adjective = [rng.choice(list(ADJECTIVES))] if rng.random() < P_ADJECTIVE else []
    head_src = [det, *adjective, noun]
    head_tgt = [DETERMINERS[det], *(ADJECTIVES[a] for a in adjective), NOUNS[noun]]
    kind = rng.random()
    if kind < P_PP:  # "near the river" -> "ka suvi soba", before the noun
        prep, det2, noun2 = (
            rng.choice(list(words)) for words in (PREPOSITIONS, DETERMINERS, NOUNS)
        )
        return (
            [*head_src, prep, det2, noun2],
            [DETERMINERS[det2], NOUNS[noun2], PREPOSITIONS[prep], *head_tgt],
        )
    if kind < P_PP + P_RC:  # "that sees a cat" -> "na miro wo mira", before the noun
        verb, det2, noun2 = (rng.choice(list(words)) for words in (VERBS, DETERMINERS, NOUNS))
        return (
            [*head_src, RELATIVE, verb, det2, noun2],
            [DETERMINERS[det2], NOUNS[noun2], OBJECT_MARKER, VERBS[verb], *head_tgt],
        )
    return head_src, head_tgt


def _toy_sentence(rng: random.Random) -> Pair:
    subject_src, subject_tgt = _toy_noun_phrase(rng)
    verb = rng.choice(list(VERBS))
    object_src, object_tgt = _toy_noun_phrase(rng)
    source = (*subject_src, verb, *object_src)  # SVO
    target = (*subject_tgt, SUBJECT_MARKER, *object_tgt, OBJECT_MARKER, VERBS[verb])  # SOV
    return source, target


@functools.cache
def _toy_corpus() -> tuple[Pair, ...]:
    """TOY_SENTENCES distinct sentences, in the order first drawn (the same on every run)."""
    rng = random.Random(TOY_CORPUS_SEED)
    corpus: dict[tuple[str, ...], tuple[str, ...]] = {}
    while len(corpus) < TOY_SENTENCES:
        source, target = _toy_sentence(rng)
        corpus.setdefault(source, target)
    return tuple(corpus.items())


def _toy_vocabularies() -> tuple[Vocab, Vocab]:
    lexicons = (DETERMINERS, ADJECTIVES, NOUNS, VERBS, PREPOSITIONS)
    source_words = [word for lexicon in lexicons for word in lexicon] + [RELATIVE]
    target_words = [word for lexicon in lexicons for word in lexicon.values()]
    return Vocab(source_words), Vocab([*target_words, SUBJECT_MARKER, OBJECT_MARKER])


# ---------------------------------------------------------------------------------------
# reverse
# ---------------------------------------------------------------------------------------

DIGITS = tuple("0123456789")
REVERSE_MAX_LEN = 12
REVERSE_PER_LENGTH = 1000  # distinct strings drawn of each length (all of them when fewer)
REVERSE_CORPUS_SEED = 2017


@functools.cache
def _reverse_corpus() -> tuple[Pair, ...]:
    rng = random.Random(REVERSE_CORPUS_SEED)
    corpus: list[Pair] = []
    for length in range(1, REVERSE_MAX_LEN + 1):
        n_strings = min(len(DIGITS) ** length, REVERSE_PER_LENGTH)
        numbers_drawn = rng.sample(range(len(DIGITS) ** length), n_strings)  # distinct
        for number in numbers_drawn:
            source = tuple(str(number).zfill(length))
            corpus.append((source, source[::-1]))
    return tuple(corpus)


# ---------------------------------------------------------------------------------------
# SCAN
# ---------------------------------------------------------------------------------------

SCAN_PRIMITIVES = {"walk": "I_WALK", "look": "I_LOOK", "run": "I_RUN", "jump": "I_JUMP"}
SCAN_DIRECTIONS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
SCAN_REPEATS = {"twice": 2, "thrice": 3}
SCAN_COMMAND_WORDS = (*SCAN_PRIMITIVES, "turn", *SCAN_DIRECTIONS, "opposite", "around")
SCAN_COMMAND_WORDS += (*SCAN_REPEATS, "and", "after")
SCAN_ACTIONS = (*SCAN_PRIMITIVES.values(), *SCAN_DIRECTIONS.values())


def _scan_verb_phrases() -> list[tuple[str, tuple[str, ...]]]:
    """Every V of the grammar with its meaning: 34 (command, actions) pairs."""
    phrases = [(u, (action,)) for u, action in SCAN_PRIMITIVES.items()]  # V -> U
    for x in (*SCAN_PRIMITIVES, "turn"):
        act = (SCAN_PRIMITIVES[x],) if x != "turn" else ()  # "turn" alone does no action
        for direction, turn in SCAN_DIRECTIONS.items():
            phrases.append((f"{x} {direction}", (turn, *act)))  # V -> D
            phrases.append((f"{x} opposite {direction}", (turn, turn, *act)))
            phrases.append((f"{x} around {direction}", (turn, *act) * 4))
    return phrases


@functools.cache
def _scan_pairs() -> tuple[tuple[str, str], ...]:
    """Every SCAN command with its action sequence, in the grammar's order."""
    sentences = []  # S -> V | V twice | V thrice
    for command, actions in _scan_verb_phrases():
        sentences.append((command, actions))
        for word, times in SCAN_REPEATS.items():
            sentences.append((f"{command} {word}", actions * times))
    pairs = list(sentences)  # C -> S
    for first, first_actions in sentences:
        for second, second_actions in sentences:
            pairs.append((f"{first} and {second}", first_actions + second_actions))
            pairs.append((f"{first} after {second}", second_actions + first_actions))
    return tuple((command, " ".join(actions)) for command, actions in pairs)


def scan_dataset() -> list[tuple[str, str]]:
    """Every distinct SCAN (command, actions) pair, as space-separated strings: 20,910.

    >>> dict(scan_dataset())["jump twice after walk left"]
    'I_TURN_LEFT I_WALK I_JUMP I_JUMP'
    """
    return list(_scan_pairs())  # a fresh list: the cached tuple cannot be edited


def _scan_words() -> list[Pair]:
    return [(tuple(command.split()), tuple(actions.split())) for command, actions in _scan_pairs()]


# ---------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------


def _random_split(pairs: Sequence[Pair], seed: int) -> tuple[list[Pair], list[Pair]]:
    """A seeded split of distinct-source pairs: TEST_FRACTION of them held out."""
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    n_test = round(len(pairs) * TEST_FRACTION)
    test = [pairs[i] for i in order[:n_test]]
    train = [pairs[i] for i in order[n_test:]]
    return train, test


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
    from course import tatoeba  # the real data: read (or downloaded) only when asked for

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
    from course import tatoeba  # the real data: read (or downloaded) only when asked for
    from course.subword import train_subword_vocab

    sentences = tatoeba.full_pairs(tatoeba.load_pairs())  # (French, English) strings
    train_text, test_text = tatoeba.grouped_split(
        sentences, group=lambda pair: pair[1], test_fraction=FULL_TEST_FRACTION, seed=seed
    )
    bpe = train_subword_vocab(
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
        from course.lm import load_lm_data  # course.lm imports this module

        return load_lm_data(seed)
    if name == "fra-eng":
        return _fra_eng_task(seed)
    if name == "fra-eng-full":
        return _fra_eng_full_task(seed)
    if name == "toy-translation":
        train, test = _random_split(_toy_corpus(), seed)
        src_vocab, tgt_vocab = _toy_vocabularies()
    elif name == "reverse":
        train, test = _random_split(_reverse_corpus(), seed)
        src_vocab, tgt_vocab = Vocab(DIGITS), Vocab(DIGITS)
    else:
        pairs = _scan_words()
        if name == "scan-simple":
            train, test = _random_split(pairs, seed)
        elif name == "scan-length":
            train = [p for p in pairs if len(p[1]) <= SCAN_LENGTH_CUTOFF]
            test = [p for p in pairs if len(p[1]) > SCAN_LENGTH_CUTOFF]
        else:  # scan-addjump
            train = [p for p in pairs if "jump" not in p[0] or p[0] == ("jump",)]
            test = [p for p in pairs if "jump" in p[0] and p[0] != ("jump",)]
        src_vocab, tgt_vocab = Vocab(SCAN_COMMAND_WORDS), Vocab(SCAN_ACTIONS)
    return _task(name, train, test, src_vocab, tgt_vocab)


# ---------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------


def pad_rows(rows: Sequence[Sequence[int]]) -> Tensor:
    """Rows of ids of different lengths -> one long tensor (len(rows), longest), PAD_ID after."""
    longest = max(len(row) for row in rows)
    batch = torch.full((len(rows), longest), PAD_ID, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        batch[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return batch


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
