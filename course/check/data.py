"""Checker for lesson 11: grouped_split(items, group, test_fraction, seed) -> (train, test).

A correct answer may draw its random order from any local generator seeded by `seed`
(random.Random, numpy's default_rng or RandomState, a torch.Generator), so the checker
never compares with one exact split: it judges properties of the answer's splits, each
with its own diagnosis, in this order (the first problem found is the one reported):

1. the signature (items, group, test_fraction, seed), called positionally;
2. on every case and call below: a pair (train, test) of lists or tuples (a set, which
   loses repeated items, is named); `items` unchanged afterwards (an in-place sort or
   shuffle of the caller's list is named); every item exactly once, exact duplicates
   included (an item lost, repeated or made up is named; so is a set() or dict that drops
   duplicates);
3. no group on both sides, a group being what group(item) returns: one such group is
   named with an item from each side, and the splits of seeds 0 to 19 tell why: a test
   set cut at exactly round(test_fraction * len(items)) items (the last group cut in two),
   the items kept together by item[1] or item[0] instead of group(item), or a split drawn
   pair by pair (many groups cut);
4. the test set's size: test_fraction is a fraction of the *items*, so test holds
   round(test_fraction * n) items give or take one group (the largest: the course's
   answer stops once test holds that many or more; stopping before it is exceeded, or
   int() instead of round(), is right too). (test, train) returned swapped, or
   test_fraction taken as the training fraction, is named. test_fraction taken as a
   fraction of the *groups* (scikit-learn's GroupShuffleSplit) is named from seeds 0 to 99
   of the same case (the same number of groups every time, a varying number of items),
   whether or not this split's size is off, so that every implementation of that rule
   gets the same verdict;
5. the same seed gives the same split: two calls with seed=3 (the global random state or
   an unseeded generator is named); and again when only the hash values of the keys change
   (Sentence keys, whose hash the checker sets): a set of keys iterated in hash order gives
   another split in another process, where PYTHONHASHSEED differs;
6. the seed matters: seeds 0 to 19 give at least 5 different test sets (an ignored seed,
   groups never shuffled, or groups taken in sorted order is named);
7. the groups are drawn at random: over seeds 0 to 99 every group is in the test set at
   least once, the test set is not always a run of consecutive groups (as they appear, or
   sorted), and test_fraction is not a fraction of the groups; over seeds 0 to 199 the
   group of 12 items (among 24 of one) is in the test set in at most half of the splits
   (shuffling the groups: about 28%; groups in the order they first appear among shuffled
   items: about 95%);
7b. the keys are used as given: over seeds 0 to 59 at test_fraction 0.5, two groups whose
   keys differ only in case or spaces ("Go." and "go.") are on different sides at least
   once (a correct answer keeps them together all 60 times with probability about 1e-18);
8. the global random states (random, numpy.random, torch) are as they were before each
   call: seeding or drawing from them resets the caller's own randomness. The checker
   restores them in any case.

The cases: about forty real-looking (French, English) pairs grouped by the English
sentence, some English sentences with 2 to 4 French translations, one French sentence
translating several English ones, and one pair given twice; one item per group; one group
holding a third of the items; a group key that is not item[1] (the English sentence
lowercased, so "Go." and "go." are one group); and frozen dataclass items, which cannot be
indexed at all. test_fraction 0.1, 0.2 and 0.5, seeds 0 to 42. Then, for the judgements
above: the first pairs grouped by Sentence(english), and twenty pairs whose English
sentences differ only in case or spaces, grouped as written. An empty `items` is not
asked for.
"""

from __future__ import annotations

import copy
import random
import zlib
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np
import torch

from course.check._framework import Mistake, call, exercise, expect_signature

__all__ = ["grouped_split"]

_SIGNATURE = "grouped_split(items, group, test_fraction, seed)"
_NAMES = ("items", "group", "test_fraction", "seed")
_RECIPE = (
    "Collect the items of each group (key = group(item)), shuffle the groups with a "
    "generator seeded by seed (rng = random.Random(seed)), then move whole groups into test"
)


# ---------------------------------------------------------------- the cases ----------


class _Items(list):
    """The items handed to the answer: a plain list, whose repr fits in a verdict."""

    def __init__(self, items, shown: str):
        super().__init__(items)
        self.shown = shown

    def __repr__(self) -> str:
        return f"<{self.shown}>"


class _Key:
    """The group function handed to the answer, shown as its source in a verdict."""

    def __init__(self, function: Callable[[object], Hashable], shown: str):
        self.function = function
        self.shown = shown

    def __call__(self, item) -> Hashable:
        return self.function(item)

    def __repr__(self) -> str:
        return self.shown


@dataclass(frozen=True)
class Example:
    """A translation pair as a record, as a data pipeline may keep it."""

    french: str
    english: str
    english_id: int


@dataclass(frozen=True)
class _Case:
    what: str
    items: tuple
    group: _Key
    runs: tuple[tuple[float, int], ...]  # (test_fraction, seed) of each call

    def arguments(self) -> tuple[_Items, _Key]:
        return _Items(self.items, f"{len(self.items)} {self.what}"), self.group

    def key_of(self, item) -> Hashable:
        return self.group(item)


def _lines(text: str) -> tuple[str, ...]:
    """The lines of an indented block of text, stripped."""
    return tuple(line.strip() for line in text.strip().splitlines())


def _table(text: str) -> tuple[tuple[str, ...], ...]:
    """(French, English) pairs written one a line as `French | English`."""
    return tuple(tuple(side.strip() for side in line.split("|")) for line in _lines(text))


# English sentences with several French translations, as Tatoeba has them (the file puts
# one English sentence's pairs next to each other); "Salut !", "Bonjour !" and
# "Fais attention !" translate two English sentences each; ("Salut !", "Hi.") is there twice,
# the second time at the end.
_PAIRS = _table("""
    Va !                 | Go.
    Allez !              | Go.
    Bouge !              | Go.
    Salut !              | Hi.
    Bonjour !            | Hi.
    Cours !              | Run!
    Courez !             | Run!
    Attends !            | Wait!
    Attendez !           | Wait!
    Salut !              | Hello.
    Bonjour !            | Hello.
    Merci !              | Thank you.
    À l'aide !           | Help!
    Au secours !         | Help!
    Qui êtes-vous ?      | Who are you?
    Qui es-tu ?          | Who are you?
    Je vois.             | I see.
    Je comprends.        | I see.
    Aha.                 | I see.
    Entre.               | Come in.
    Entrez.              | Come in.
    Assieds-toi !        | Sit down.
    Asseyez-vous !       | Sit down.
    J'ai froid.          | I'm cold.
    Je suis fatigué.     | I'm tired.
    Je suis fatiguée.    | I'm tired.
    Je suis épuisé.      | I'm tired.
    Je suis épuisée.     | I'm tired.
    Il est tard.         | It's late.
    Tais-toi !           | Be quiet.
    Taisez-vous !        | Be quiet.
    Silence !            | Be quiet.
    Attention !          | Look out!
    Fais attention !     | Look out!
    Bonne nuit !         | Good night.
    Je suis à la maison. | I'm home.
    Je suis chez moi.    | I'm home.
    Arrête !             | Stop!
    Arrêtez !            | Stop!
    Stop !               | Stop!
    Fais attention !     | Be careful.
    Sois prudent.        | Be careful.
    Salut !              | Hi.
""")

# The English sentence in several spellings: one group once lowercased.
_SPELLINGS = _table("""
    Va !              | Go.
    Allez !           | go.
    Vas-y !           | Go.
    Salut !           | Hi.
    Salut !           | hi.
    Cours !           | Run!
    Courez !          | run!
    Fuyez !           | RUN!
    J'ai froid.       | I'm cold.
    Attends !         | Wait!
    Attendez !        | wait!
    Je suis fatigué.  | I'm tired.
    Je suis fatiguée. | I'm Tired.
    Je suis crevé.    | i'm tired.
    Merci !           | Thanks!
    Merci.            | thanks!
    Il est tard.      | It's late.
    Entrez !          | Come in!
    Entre !           | Come In!
    Au revoir !       | Goodbye!
    Salut !           | goodbye!
    Bonne nuit !      | Good night.
    Bonne nuit.       | Good Night.
    Je vois.          | I see.
    Aha.              | I see.
    Je comprends.     | i see.
    Je suis prêt.     | I'm ready.
    Silence !         | Quiet!
    Tais-toi !        | quiet!
    Il pleut.         | It's raining.
    Il pleut !        | It's Raining.
""")

_SORRY = _lines("""
    Je suis désolé.
    Je suis désolée.
    Désolé.
    Désolée.
    Pardon.
    Excuse-moi.
    Excusez-moi.
    Je m'excuse.
    Toutes mes excuses.
    Je regrette.
    Navré.
    Navrée.
""")
_CATS = tuple((f"J'ai {n} chats.", f"I have {n} cats.") for n in range(2, 26))
_AGES = tuple((f"J'ai {n} ans.", f"I'm {n} years old.") for n in range(10, 40))


class Sentence:
    """A group key that is a sentence, with a hash the checker sets (SALT): Python's own
    string hashes change from one process to the next (PYTHONHASHSEED), and a split that
    depends on them (a set of keys, iterated) is not the same split in the next process.
    Equal and ordered as its text; shown as its text."""

    SALT = 0

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other) -> bool:
        return isinstance(other, Sentence) and self.text == other.text

    def __lt__(self, other) -> bool:
        return self.text < other.text

    def __hash__(self) -> int:
        return zlib.crc32(f"{Sentence.SALT}:{self.text}".encode())

    def __repr__(self) -> str:
        return repr(self.text)

    def item(self) -> Sentence:
        """Itself, as numpy's scalars give theirs: code that takes np.unique's elements
        back with .item() runs on these keys too (np.unique keeps them as objects)."""
        return self


# The English sentence as written: keys that differ only in case or spaces are different
# groups, as the caller's group function says.
_AS_WRITTEN = (
    ("Va !", "Go."), ("Allez !", "go."), ("Bouge !", "Go."),
    ("Salut !", "Hi."), ("Salut.", "HI."),
    ("Cours !", "Run!"), ("Courez !", "run!"),
    ("Attends !", "Wait!"), ("Attendez !", "wait!"),
    ("Je vois.", "I see."), ("Je comprends.", "I see. "),
    ("Arrête !", "Stop!"), ("Arrêtez !", " Stop!"),
    ("J'ai froid.", "I'm cold."), ("J'ai très froid.", "I'm  cold."),
    ("Merci !", "Thanks!"), ("Il est tard.", "It's late."), ("Entre.", "Come in."),
    ("Je suis prêt.", "I'm ready."), ("Il pleut.", "It's raining."),
)  # fmt: skip

_ENGLISH = _Key(lambda pair: pair[1], "lambda pair: pair[1]")
_CASES = (
    _Case("(French, English) pairs, grouped by the English sentence", _PAIRS, _ENGLISH,
          ((0.2, 0), (0.5, 7), (0.1, 42), (0.2, 5))),
    _Case("pairs, each English sentence once (one pair per group)", _AGES, _ENGLISH,
          ((0.1, 5), (0.2, 11), (0.5, 1))),
    _Case("pairs, 12 of them in one group", _CATS[:12] + tuple(
              (french, "I'm sorry.") for french in _SORRY) + _CATS[12:], _ENGLISH,
          ((0.2, 2), (0.5, 4), (0.1, 8), (0.2, 30))),
    _Case("pairs grouped by the lowercased English", _SPELLINGS,
          _Key(lambda pair: pair[1].lower(), "lambda pair: pair[1].lower()"),
          ((0.2, 1), (0.5, 9), (0.1, 3), (0.2, 17), (0.5, 23))),
    _Case("Example records grouped by english_id", tuple(
              Example(french, english, 100 + sorted({e for _, e in _PAIRS}).index(english))
              for french, english in _PAIRS[:24]),
          _Key(lambda example: example.english_id, "lambda example: example.english_id"),
          ((0.2, 6), (0.5, 12))),
)  # fmt: skip
_MAIN = _CASES[0]  # reproducibility and randomness are judged on it, at test_fraction 0.2
_BIG = _CASES[2]  # one group of 12 among 25: the groups' order is judged on it
_HASHED = _Case(
    "(French, English) pairs grouped by Sentence(english), a key whose hash the checker changes",
    _PAIRS,
    _Key(lambda pair: Sentence(pair[1]), "lambda pair: Sentence(pair[1])"),
    (),
)
_WRITTEN = _Case("pairs grouped by the English exactly as written", _AS_WRITTEN, _ENGLISH, ())
_WRITTEN_SEEDS = range(60)  # at test_fraction 0.5: two groups kept apart ~30 times


def _normalised(key: str) -> str:
    """What a learner's normalisation makes of a key: case and spaces ignored."""
    return " ".join(key.lower().split())


# ----------------------------------------------------- global random states ----------


def _global_states() -> tuple:
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def _restore(states: tuple) -> None:
    python, numpy_state, torch_state = states
    random.setstate(python)
    np.random.set_state(numpy_state)
    torch.set_rng_state(torch_state)


def _changed(before: tuple, after: tuple) -> list[str]:
    """Which global generators differ between two snapshots."""
    changed = []
    if before[0] != after[0]:
        changed.append("python")
    numpy_before, numpy_after = before[1], after[1]
    if numpy_before[0] != numpy_after[0] or not np.array_equal(numpy_before[1], numpy_after[1]) \
            or tuple(numpy_before[2:]) != tuple(numpy_after[2:]):  # fmt: skip
        changed.append("numpy")
    if not torch.equal(before[2], after[2]):
        changed.append("torch")
    return changed


_GLOBAL = {
    "python": "Python's global random generator (random.seed(seed), random.shuffle(...), "
    "random.sample(...) on the random module itself)",
    "numpy": "numpy's global generator (np.random.seed(seed), np.random.shuffle(...), "
    "np.random.permutation(...))",
    "torch": "torch's global generator (torch.manual_seed(seed), torch.randperm(n) without "
    "generator=)",
}


# ----------------------------------------------------------------- one call ----------


def _hints(message: str) -> str | None:
    if "not subscriptable" in message or "cannot unpack" in message:
        return (
            "Your code takes the items apart (item[1], french, english = item); here an item "
            "is a record, not a pair. Don't look inside the items: group(item) gives each "
            "item's group"
        )
    if "integer" in message and ("slice" in message or "float" in message):
        return (
            "test_fraction * len(items) is a float: round it, "
            "round(test_fraction * len(items)), before using it as a count"
        )
    return None


@dataclass
class _Split:
    case: _Case
    test_fraction: float
    seed: int
    train: list
    test: list

    @property
    def at(self) -> str:
        return (
            f"on {len(self.case.items)} {self.case.what} with "
            f"test_fraction={self.test_fraction}, seed={self.seed}"
        )


class _Judge:
    """Calls the answer, checks each call's result, and notes the global random states."""

    def __init__(self, candidate):
        self.candidate = candidate
        self.global_change: tuple[list[str], str] | None = None  # (generators, which call)

    def split(self, case: _Case, test_fraction: float, seed: int) -> _Split:
        items, group = case.arguments()
        before_items = copy.deepcopy(list(items))
        before = _global_states()
        result = call(self.candidate, items, group, test_fraction, seed, names=_NAMES,
                      hints=_hints)  # fmt: skip
        changed = _changed(before, _global_states())
        if changed and self.global_change is None:
            self.global_change = (changed, f"test_fraction={test_fraction}, seed={seed}")
        where = f"on {len(case.items)} {case.what} with test_fraction={test_fraction}, seed={seed}"
        train, test = _expect_pair(result, where)
        _expect_unchanged(list(items), before_items, where)
        _expect_every_item_once(case.items, train, test, where)
        return _Split(case, test_fraction, seed, list(train), list(test))


def _expect_pair(result, where: str) -> tuple:
    if not isinstance(result, tuple | list):
        raise Mistake(
            f"{where}: should return the pair (train, test), two lists; got a "
            f"{type(result).__name__}"
        )
    if len(result) != 2:
        raise Mistake(
            f"{where}: should return the pair (train, test), two lists; got {len(result)} things"
        )
    for side, name in zip(result, ("train", "test"), strict=True):
        if isinstance(side, set | frozenset):
            raise Mistake(
                f"{where}: {name} is a {type(side).__name__}: a set keeps each item once "
                "(items can repeat: the same pair twice is two items) and in no order. "
                "Return two lists"
            )
        if not isinstance(side, list | tuple):
            raise Mistake(
                f"{where}: {name} should be a list of items, got a {type(side).__name__}. "
                "Return two lists (train, test)"
            )
    return tuple(result)


def _expect_unchanged(now: list, before: list, where: str) -> None:
    if now == before:
        return
    if len(now) != len(before):
        how = f"it now holds {len(now)} items instead of {len(before)} (pop, remove, append?)"
    elif Counter(map(repr, now)) == Counter(map(repr, before)):
        try:
            in_order = now == sorted(before)
        except TypeError:
            in_order = False
        how = (
            "the same items, now sorted: items.sort() sorts the caller's list in place"
            if in_order
            else "the same items, now in another order: shuffling or sorting items itself "
            "(rng.shuffle(items), items.sort(key=...)) reorders the caller's list in place"
        )
    else:
        how = "some of its items were replaced"
    raise Mistake(
        f"{where}: your code changed the caller's items ({how}). The caller's list must stay "
        "as it was: shuffle or sort a copy (list(items), sorted(items)), or shuffle the groups"
    )


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _expect_every_item_once(items: tuple, train, test, where: str) -> None:
    want = Counter(items)
    for name, side in (("train", train), ("test", test)):
        for value in side:
            if not _hashable(value) or value not in want:
                raise Mistake(
                    f"{where}: {name} holds {value!r}, which is not one of the items. "
                    "Return the items themselves, unchanged"
                )
    got = Counter(train) + Counter(test)
    if got == want:
        return
    repeated = [item for item, count in want.items() if count > 1]
    if repeated and all(got[item] == 1 for item in repeated):
        item = repeated[0]
        raise Mistake(
            f"{where}: {item!r} is twice in items but only once in train + test: repeated "
            "items were dropped (a set() or dict keyed by the item keeps one of each). "
            "Every item must be on one side, duplicates included: collect them in lists"
        )
    for item in want:
        if got[item] < want[item]:
            lost = (
                "is in neither train nor test"
                if got[item] == 0
                else (f"is {want[item]} times in items but {got[item]} times in train + test")
            )
            raise Mistake(f"{where}: the item {item!r} {lost}: every item must be on one side")
    item = next(item for item in want if got[item] > want[item])
    sides = [name for name, side in (("train", train), ("test", test)) if item in side]
    raise Mistake(
        f"{where}: the item {item!r} is {got[item]} times in train + test ({' and '.join(sides)})"
        f" but {want[item]} times in items: every item goes to exactly one side"
    )


# ------------------------------------------------------------- the judgements ----------


def _groups(case: _Case) -> dict[Hashable, list]:
    """Group key -> its items, in the order the groups first appear."""
    members: dict[Hashable, list] = {}
    for item in case.items:
        members.setdefault(case.key_of(item), []).append(item)
    return members


def _cut(split: _Split, key: Callable) -> list[Hashable]:
    """The keys (under `key`) with items on both sides, in order of appearance."""
    train = {key(item) for item in split.train}
    test = {key(item) for item in split.test}
    seen = dict.fromkeys(key(item) for item in split.case.items)
    return [k for k in seen if k in train and k in test]


def _target(case: _Case, test_fraction: float) -> int:
    return round(test_fraction * len(case.items))


def _other_keys(case: _Case) -> list[tuple[str, Callable]]:
    """item[1] and item[0], where the items can be indexed and they group differently."""
    if not all(isinstance(item, tuple) and len(item) >= 2 for item in case.items):
        return []
    own = {frozenset(map(repr, g)) for g in _groups(case).values()}
    keys = []
    for shown, index in (("item[1] (the English sentence)", 1), ("item[0] (the French one)", 0)):
        members: dict[Hashable, list] = {}
        for item in case.items:
            members.setdefault(item[index], []).append(item)
        theirs = {frozenset(map(repr, g)) for g in members.values()}
        if theirs != own and any(len(g) > 1 for g in members.values()):
            keys.append((shown, lambda item, index=index: item[index]))
    return keys


def _expect_whole_groups(judge: _Judge, split: _Split) -> None:
    case = split.case
    cut = _cut(split, case.key_of)
    if not cut:
        return
    key = cut[0]
    in_train = next(item for item in split.train if case.key_of(item) == key)
    in_test = next(item for item in split.test if case.key_of(item) == key)
    named = (
        f"{split.at}, the group {key!r} is on both sides: {in_train!r} in train, "
        f"{in_test!r} in test. "
    )
    # More splits of the same case tell why: seeds 0 to 19.
    splits = [split]
    try:
        splits += [judge.split(case, split.test_fraction, s) for s in range(20)]
    except Exception:  # noqa: BLE001 - the first split's diagnosis is enough
        pass
    for shown, other in _other_keys(case):
        if not any(_cut(s, other) for s in splits):
            raise Mistake(
                named + f"Your split keeps the items together by {shown}, not by their group: "
                f"call group(item) to get an item's group (here group is {case.group!r}), "
                "never a field of the item"
            )
    counts = [len(_cut(s, case.key_of)) for s in splits]
    target = _target(case, split.test_fraction)
    if max(counts) <= 1 and all(
        len(s.test) == target for s, n in zip(splits, counts, strict=True) if n
    ):
        raise Mistake(
            named + f"The test set holds exactly round(test_fraction * len(items)) = {target} "
            "items, and to get there the last group taken was cut in two. Move whole groups: "
            f"keep adding groups while test holds fewer than {target} items; it may end up "
            "with a few more"
        )
    if max(counts) >= 2:
        mean = sum(counts) / len(counts)
        raise Mistake(
            named + f"Over seeds 0 to 19, {mean:.1f} groups are cut in two on average: the "
            "split looks drawn pair by pair, which puts translations of one sentence in "
            "both sets and leaks the answers into the test set. " + _RECIPE
        )
    raise Mistake(
        named + "All the items of a group must land on the same side, wherever they are in "
        "items (itertools.groupby only groups neighbouring items). " + _RECIPE
    )


def _expect_size(judge: _Judge, split: _Split) -> None:
    case = split.case
    n = len(case.items)
    target = _target(case, split.test_fraction)
    largest = max(len(g) for g in _groups(case).values())

    def fits(size: int) -> bool:
        return target - largest <= size <= target + largest

    if fits(len(split.test)):
        return
    _expect_fraction_of_items(judge, case, split.test_fraction)
    wanted = (
        f"test should hold round(test_fraction * len(items)) = round({split.test_fraction} * "
        f"{n}) = {target} items, give or take one group (the largest here has {largest}): "
        "test_fraction is a fraction of the items, not of the groups"
    )
    if fits(len(split.train)) and abs(split.test_fraction - 0.5) > 0.1:  # 0.5: no telling
        raise Mistake(
            f"{split.at}: train holds {len(split.train)} items and test {len(split.test)}: "
            f"{wanted}. Either (test, train) is returned swapped (return train, test in that "
            "order) or test_fraction was taken as the fraction for training: it is the test "
            "set's"
        )
    raise Mistake(f"{split.at}: test holds {len(split.test)} of the {n} items; {wanted}")


def _expect_fraction_of_items(judge: _Judge, case: _Case, test_fraction: float,
                              splits: list[_Split] | None = None) -> None:  # fmt: skip
    """test_fraction taken as a fraction of the groups (GroupShuffleSplit's test_size): the
    test set holds the same number of groups for every seed while its number of items
    varies. Judged over seeds 0 to 99, so that every implementation of that rule is named
    alike, whichever groups its generator draws."""
    if splits is None:
        splits = [judge.split(case, test_fraction, seed) for seed in range(100)]
    counts = {len(_test_keys(s)) for s in splits}
    sizes = [len(s.test) for s in splits]
    if len(counts) > 1 or len(set(sizes)) == 1:
        return
    n_groups, target = len(_groups(case)), _target(case, test_fraction)
    raise Mistake(
        f"on {len(case.items)} {case.what} with test_fraction={test_fraction}, seeds 0 to 99: "
        f"test always holds {counts.pop()} of the {n_groups} groups, while its size goes from "
        f"{min(sizes)} to {max(sizes)} items: {_FRACTION_OF_GROUPS}, as scikit-learn's "
        "GroupShuffleSplit(test_size=...) or train_test_split on the keys take it. Here it is "
        "a fraction of the items: add whole groups to test until it holds "
        f"round(test_fraction * len(items)) = {target} items, give or take one group"
    )


_FRACTION_OF_GROUPS = "test_fraction was taken as a fraction of the groups"


def _test_keys(split: _Split) -> frozenset:
    return frozenset(split.case.key_of(item) for item in split.test)


def _is_run(keys: frozenset, order: list, cyclic: bool) -> bool:
    """`keys` are consecutive in `order` (from its start unless cyclic)."""
    k = len(keys)
    starts = range(len(order)) if cyclic else range(1)
    doubled = order + order
    return any(set(doubled[s : s + k]) == keys for s in starts)


def _orders(case: _Case) -> list[tuple[str, list]]:
    appearance = list(_groups(case))
    orders = [("in the order they first appear in items", appearance)]
    try:
        orders.append(("in sorted order (sorted keys)", sorted(appearance)))
    except TypeError:
        pass
    return orders


def _expect_reproducible(judge: _Judge) -> None:
    first = judge.split(_MAIN, 0.2, 3)
    second = judge.split(_MAIN, 0.2, 3)
    if Counter(first.test) != Counter(second.test):
        a, b = Counter(first.test), Counter(second.test)
        only = next(iter((a - b) + (b - a)))
        raise Mistake(
            f"{first.at}: two calls with seed=3 gave different splits ({only!r} was in one "
            "test set only): your code draws from the global random state or an unseeded "
            "generator (random.shuffle, random.Random(), np.random.permutation, torch.randperm "
            "without generator=). Draw from a generator seeded by seed, "
            "rng = random.Random(seed), so that the same seed gives the same split"
        )


def _expect_seed_used(judge: _Judge) -> None:
    splits = [judge.split(_MAIN, 0.2, seed) for seed in range(20)]
    distinct = {_test_keys(s) for s in splits}
    if len(distinct) >= 5:
        return
    if len(distinct) == 1:
        keys = next(iter(distinct))
        for how, order in _orders(_MAIN):
            if _is_run(keys, order, cyclic=False):
                raise Mistake(
                    f"{splits[0].at} and every other seed from 0 to 19, test holds the same "
                    f"groups: always the first groups {how}. The groups are never shuffled: "
                    "shuffle them with rng = random.Random(seed); rng.shuffle(groups), then "
                    "take groups from the front"
                )
    raise Mistake(
        f"on {len(_MAIN.items)} {_MAIN.what} with test_fraction=0.2, seeds 0 to 19 gave "
        f"only {len(distinct)} different test set(s): the seed is ignored. Seed the "
        "generator with the argument, random.Random(seed), not a fixed number"
    )


def _expect_random_groups(judge: _Judge) -> None:
    splits = [judge.split(_MAIN, 0.2, seed) for seed in range(100)]
    _expect_fraction_of_items(judge, _MAIN, 0.2, splits)
    tested = [_test_keys(s) for s in splits]
    ever = frozenset().union(*tested)
    for key in _groups(_MAIN):
        if key not in ever:
            raise Mistake(
                f"on {len(_MAIN.items)} {_MAIN.what} with test_fraction=0.2, seeds 0 to 99: "
                f"the group {key!r} was never in the test set. Every group must have its "
                "chance: shuffle all the groups, not only some of them"
            )
    for how, order in _orders(_MAIN):
        if all(_is_run(keys, order, cyclic=True) for keys in tested):
            raise Mistake(
                f"on {len(_MAIN.items)} {_MAIN.what} with test_fraction=0.2, seeds 0 to 99: "
                f"the test set is always a run of consecutive groups {how}, only its start "
                "changes with the seed. Shuffle the groups themselves: "
                "rng = random.Random(seed); rng.shuffle(groups)"
            )


def _expect_hash_independent(judge: _Judge) -> None:
    """The same seed gives the same split whatever the keys' hashes (which, for strings,
    change with PYTHONHASHSEED from one process to the next). Each split is judged as the
    others are: a split that is the same whatever the hashes must still be a right one."""
    splits = []
    try:
        for salt in (0, 1):
            Sentence.SALT = salt
            split = judge.split(_HASHED, 0.2, 3)
            _expect_whole_groups(judge, split)
            _expect_size(judge, split)
            splits.append(split)
    finally:
        Sentence.SALT = 0
    first, second = (Counter(s.test) for s in splits)
    if first != second:
        only = next(iter((first - second) + (second - first)))
        raise Mistake(
            f"on {len(_HASHED.items)} {_HASHED.what}, test_fraction=0.2, seed=3: two calls gave "
            f"different splits ({only!r} was in one test set only) when only the hash values "
            "of the group keys changed. Your order of the groups follows the keys' hashes: a "
            "set of keys (set(...), {group(item) for item in items}) is iterated in hash "
            "order, and Python's string hashes change from one process to the next "
            "(PYTHONHASHSEED), so the same seed would give another test set tomorrow. Keep "
            "the groups in the order they first appear (a dict keeps insertion order) or "
            "sort the keys, then shuffle them with rng = random.Random(seed)"
        )


def _expect_keys_as_given(judge: _Judge) -> None:
    """Keys that differ only in case or spaces are different groups: the caller's group
    function decides. Over seeds 0 to 59 at test_fraction 0.5 two such groups are on
    different sides about 30 times; never, for a correct answer, with probability 1e-18."""
    splits = [judge.split(_WRITTEN, 0.5, seed) for seed in _WRITTEN_SEEDS]
    keys = list(_groups(_WRITTEN))
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if _normalised(a) != _normalised(b):
                continue
            if any((a in _test_keys(s)) != (b in _test_keys(s)) for s in splits):
                continue
            how = "case" if a.lower() == b.lower() else "spaces"
            raise Mistake(
                f"on {len(_WRITTEN.items)} {_WRITTEN.what} ({_WRITTEN.group!r}), "
                f"test_fraction=0.5, seeds 0 to {len(splits) - 1}: the groups {a!r} and "
                f"{b!r}, whose keys differ only in case or spaces (here {how}), were on the "
                f"same side in all {len(splits)} splits: your code merges them (.lower(), "
                ".strip() or .split() on the keys?). A group is exactly what group(item) "
                "returns, unchanged: the caller's group function decides which items "
                "belong together (one that lowercases, as another case here does, merges "
                "them itself)"
            )


def _expect_groups_equally_likely(judge: _Judge) -> None:
    """Every group is as likely as any other to come first: shuffling the groups. Taking
    them in the order they first appear among shuffled items favours large groups."""
    splits = [judge.split(_BIG, 0.2, seed) for seed in range(200)]
    members = _groups(_BIG)
    key, largest = max(members.items(), key=lambda kv: len(kv[1]))
    tested = sum(key in _test_keys(s) for s in splits)
    n_groups, target = len(members), _target(_BIG, 0.2)
    if tested <= len(splits) // 2:
        return
    raise Mistake(
        f"on {len(_BIG.items)} {_BIG.what}, test_fraction=0.2, seeds 0 to {len(splits) - 1}: "
        f"the group {key!r} ({len(largest)} items) was in the test set in {tested} of the "
        f"{len(splits)} splits. It is one of {n_groups} groups, the others of one item: "
        "shuffled, the groups come in every order alike, and the test set "
        f"({target} items) takes it only when it is among the first {target}, in about "
        f"{target / n_groups:.0%} of the splits. Your order favours large groups (groups "
        "taken in the order they first appear after shuffling the items?). "
        "Shuffle the groups themselves, each once: groups = list(members.values()); "
        "rng.shuffle(groups)"
    )


def _expect_global_states_untouched(judge: _Judge) -> None:
    if judge.global_change is None:
        return
    generators, which = judge.global_change
    named = " and ".join(_GLOBAL[g] for g in generators)
    raise Mistake(
        f"the call with {which} changed the state of {named}. Seeding or "
        "drawing from a global generator resets or moves the caller's own randomness (the "
        "notebook's shuffles and initialisations): use a local generator, "
        "rng = random.Random(seed); rng.shuffle(groups)"
    )


@exercise("grouped_split")
def grouped_split(candidate) -> str:
    expect_signature(candidate, _NAMES, _SIGNATURE)
    states = _global_states()
    judge = _Judge(candidate)
    try:
        for case in _CASES:
            for test_fraction, seed in case.runs:
                split = judge.split(case, test_fraction, seed)
                _expect_whole_groups(judge, split)
                _expect_size(judge, split)
        _expect_reproducible(judge)
        _expect_hash_independent(judge)
        _expect_seed_used(judge)
        _expect_random_groups(judge)
        _expect_groups_equally_likely(judge)
        _expect_keys_as_given(judge)
        _expect_global_states_untouched(judge)
    finally:
        _restore(states)
    calls = sum(len(case.runs) for case in _CASES)
    return (
        f"{len(_CASES)} cases, {calls} splits at test_fraction 0.1, 0.2 and 0.5: every item "
        "once, duplicates kept, no group on both sides, the test set's size, items unchanged; "
        "the same seed the same split, whatever the keys' hashes; a fraction of the items; "
        "seeds 0 to 99 drawing every group, large ones no more often; keys used as given; "
        "global random states untouched"
    )
