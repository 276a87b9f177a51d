"""The lesson 11 checker, grouped_split: behaviour that tools/mutation.py found no test
pinned down (issue 32). Each wrong answer is one a learner may write; each test asserts
the verdict and the key words of its diagnosis.
"""

import random
import re

import numpy as np
import pytest
import test_check_data

from course import check, tatoeba


def _right(items, group, test_fraction, seed):
    return tatoeba.grouped_split(items, group, test_fraction, seed)


def returns_a_dict(items, group, test_fraction, seed):
    train, test = _right(items, group, test_fraction, seed)
    return {"train": train, "test": test}


def returns_three_lists(items, group, test_fraction, seed):
    train, test = _right(items, group, test_fraction, seed)
    return train, test, []  # "and an empty validation set"


def pops_an_item(items, group, test_fraction, seed):
    last = items.pop()  # the caller's list loses its last item
    train, test = _right([*items, last], group, test_fraction, seed)
    return train, test


def replaces_an_item(items, group, test_fraction, seed):
    train, test = _right(list(items), group, test_fraction, seed)
    items[0] = items[1]  # the caller's list: its first item overwritten
    return train, test


def loses_the_first_item(items, group, test_fraction, seed):
    train, test = _right(list(items)[1:], group, test_fraction, seed)  # an off-by-one
    return train, test


def adds_a_test_item_to_train(items, group, test_fraction, seed):
    train, test = _right(items, group, test_fraction, seed)
    return train + test[:1], test  # one test item also in train


WRONG = [
    (returns_a_dict, "should return the pair (train, test), two lists; got a dict"),
    (returns_three_lists, "should return the pair (train, test), two lists; got 3 things"),
    (
        pops_an_item,
        "your code changed the caller's items (it now holds 42 items instead of 43 (pop, "
        "remove, append?)). The caller's list must stay as it was",
    ),
    (
        replaces_an_item,
        "your code changed the caller's items (some of its items were replaced)",
    ),
    (loses_the_first_item, "is in neither train nor test: every item must be on one side"),
    (
        adds_a_test_item_to_train,
        "is 2 times in train + test (train and test) but 1 times in items: every item goes to "
        "exactly one side",
    ),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[a.__name__ for a, _ in WRONG])
def test_a_result_that_is_not_the_items_split_is_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False and printed.startswith("❌ grouped_split: on 43 "), printed
    assert diagnosis in printed, printed


# ------------------------------------------- the numbers a diagnosis gives the learner ----
# A diagnosis says what the checker saw: how many splits, groups and items, and which.


def strips_spaces(items, group, test_fraction, seed):
    return _right(items, lambda item: " ".join(str(group(item)).split()), test_fraction, seed)


SAID = [
    (
        test_check_data.groups_in_the_order_of_shuffled_items,
        r"seeds 0 to 199: the group \"I'm sorry\.\" \(12 items\) was in the test set in \d+ of "
        r"the 200 splits\. It is one of 25 groups, the others of one item: .* the test set "
        r"\(7 items\) takes it only when it is among the first 7, in about 28% of the splits",
    ),
    (
        test_check_data.keys_normalised,
        r"seeds 0 to 59: the groups 'Go\.' and 'go\.', whose keys differ only in case or "
        r"spaces \(here case\), were on the same side in all 60 splits",
    ),
    (
        strips_spaces,
        r"seeds 0 to 59: the groups '[^']+' and '[^']+', whose keys differ only in case or "
        r"spaces \(here spaces\), were on the same side in all 60 splits",
    ),
    (
        test_check_data.fraction_of_groups_as_group_shuffle_split,
        r"test_fraction=0\.2, seeds 0 to 99: test always holds \d+ of the 20 groups, while its "
        r"size goes from \d+ to \d+ items: .* round\(test_fraction \* len\(items\)\) = 9 "
        r"items, give or take one group",
    ),
    (
        test_check_data.pair_by_pair,
        r"the group '[^']+' is on both sides: \('[^']+', '[^']+'\) in train, \('[^']+', "
        r"'[^']+'\) in test\. Over seeds 0 to 19, \d+\.\d groups are cut in two on average: .* "
        r"Collect the items of each group \(key = group\(item\)\), shuffle the groups with a "
        r"generator seeded by seed \(rng = random\.Random\(seed\)\), then move whole groups into "
        r"test",
    ),
    (
        test_check_data.cuts_the_last_group,
        r"holds exactly round\(test_fraction \* len\(items\)\) = 4 items, .* keep adding groups "
        r"while test holds fewer than 4 items",
    ),
    (
        test_check_data.coin_per_group,
        r"with test_fraction=0\.2, seed=0: test holds 0 of the 43 items; test should hold "
        r"round\(test_fraction \* len\(items\)\) = round\(0\.2 \* 43\) = 9 items, give or take "
        r"one group \(the largest here has 4\)",
    ),
    (
        test_check_data.unseeded_shuffle,
        r"seed=3: two calls with seed=3 gave different splits \(\('[^']+', '[^']+'\) was in one "
        r"test set only\)",
    ),
]


@pytest.mark.parametrize("answer, said", SAID, ids=[a.__name__ for a, _ in SAID])
def test_a_diagnosis_gives_the_numbers_it_saw(answer, said, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False and printed.startswith("❌ grouped_split: on "), printed
    assert re.search(said, printed), printed


def seeds_everything(items, group, test_fraction, seed):
    """ "For reproducibility": every global generator seeded, then a local one used."""
    random.seed(seed)
    np.random.seed(seed)
    return _right(items, group, test_fraction, seed)


def test_the_global_generators_changed_are_named_with_the_call(verdict):
    # The caller's global states are set apart from any seed the checker passes: had an
    # earlier test left them at random.seed(0)'s state, the first call (seed=0) would leave
    # them unchanged and a later call would be named.
    random.seed(987_654_321)
    np.random.seed(987_654)
    passed, printed = verdict(check.grouped_split, seeds_everything)
    assert passed is False, printed
    assert (
        "the call with test_fraction=0.2, seed=0 changed the state of Python's global random "
        "generator (random.seed(seed), random.shuffle(...), random.sample(...) on the random "
        "module itself) and numpy's global generator (np.random.seed(seed)"
    ) in printed, printed
    assert "torch's" not in printed, printed


# ------------------------------------------------ which case a verdict names ----------
# A learner reads which inputs broke the answer: the case, in words, with its group function.

CASES = [
    (43, "(French, English) pairs, grouped by the English sentence", "lambda pair: pair[1]"),
    (30, "pairs, each English sentence once (one pair per group)", "lambda pair: pair[1]"),
    (36, "pairs, 12 of them in one group", "lambda pair: pair[1]"),
    (31, "pairs grouped by the lowercased English", "lambda pair: pair[1].lower()"),
    (24, "Example records grouped by english_id", "lambda example: example.english_id"),
]


@pytest.mark.parametrize("size, what, group", CASES, ids=[w for _, w, _ in CASES])
def test_a_crash_names_the_case_it_happened_on(size, what, group, verdict):
    def crashes_on_one_case(items, group, test_fraction, seed):
        if len(items) == size:
            raise RuntimeError("a bug of its own")
        return _right(items, group, test_fraction, seed)

    passed, printed = verdict(check.grouped_split, crashes_on_one_case)
    assert passed is False
    said = (
        rf"❌ grouped_split: on inputs items=<{re.escape(f'{size} {what}')}>, "
        rf"group={re.escape(group)}, test_fraction=0\.\d, seed=\d+ "
        r"your code raised RuntimeError: a bug of its own"
    )
    assert re.match(said, printed), printed


def keys_compared_with_equals(items, group, test_fraction, seed):
    """Correct: the groups collected in a list, each key found with ==, not in a dict."""
    keys, members = [], []
    for item in items:
        key = group(item)
        for i, known in enumerate(keys):
            if known == key:
                members[i].append(item)
                break
        else:
            keys.append(key)
            members.append([item])
    random.Random(seed).shuffle(members)
    target = round(test_fraction * len(items))
    train, test = [], []
    for group_items in members:
        (test if len(test) < target else train).extend(group_items)
    return train, test


def test_groups_found_by_equality_rather_than_by_hash_are_accepted(verdict):
    passed, printed = verdict(check.grouped_split, keys_compared_with_equals)
    assert passed is True, printed
