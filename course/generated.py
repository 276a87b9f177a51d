"""The generated tasks: toy-translation, reverse and SCAN, made by programs, offline.

Nothing is downloaded: every corpus is produced by a small program from a fixed seed, so
a run on any machine sees the same sentences. Each task is a list of (source words,
target words) pairs split into `train` and a held-out `test` that shares no source
sentence with it; `generated_split(name, seed)` returns both splits and the two
vocabularies, and course.data.load_task wraps them into a Task. This module stands on
course.tokens alone; course.data (the task registry) is the floor above it.

Tasks (`GENERATED_TASKS`):

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
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

import torch

from course.tokens import Pair, Vocab

GENERATED_TASKS: tuple[str, ...] = (
    "toy-translation",
    "reverse",
    "scan-simple",
    "scan-length",
    "scan-addjump",
)

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
# Splits
# ---------------------------------------------------------------------------------------

TEST_FRACTION = 0.2  # of the random splits
SCAN_LENGTH_CUTOFF = 22  # scan-length trains on commands of at most this many actions


def _random_split(pairs: Sequence[Pair], seed: int) -> tuple[list[Pair], list[Pair]]:
    """A seeded split of distinct-source pairs: TEST_FRACTION of them held out."""
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    n_test = round(len(pairs) * TEST_FRACTION)
    test = [pairs[i] for i in order[:n_test]]
    train = [pairs[i] for i in order[n_test:]]
    return train, test


def generated_split(name: str, seed: int) -> tuple[list[Pair], list[Pair], Vocab, Vocab]:
    """(train, test, source vocabulary, target vocabulary) of the generated task `name`,
    one of GENERATED_TASKS; `seed` draws the random splits (scan-length and scan-addjump
    are fixed: `seed` does not change them)."""
    if name == "toy-translation":
        train, test = _random_split(_toy_corpus(), seed)
        return train, test, *_toy_vocabularies()
    if name == "reverse":
        train, test = _random_split(_reverse_corpus(), seed)
        return train, test, Vocab(DIGITS), Vocab(DIGITS)
    if name not in GENERATED_TASKS:
        raise ValueError(f"unknown generated task {name!r}; they are: {', '.join(GENERATED_TASKS)}")
    pairs = _scan_words()
    if name == "scan-simple":
        train, test = _random_split(pairs, seed)
    elif name == "scan-length":
        train = [p for p in pairs if len(p[1]) <= SCAN_LENGTH_CUTOFF]
        test = [p for p in pairs if len(p[1]) > SCAN_LENGTH_CUTOFF]
    else:  # scan-addjump
        train = [p for p in pairs if "jump" not in p[0] or p[0] == ("jump",)]
        test = [p for p in pairs if "jump" in p[0] and p[0] != ("jump",)]
    return train, test, Vocab(SCAN_COMMAND_WORDS), Vocab(SCAN_ACTIONS)
