"""The lesson 11 checker, grouped_split: it accepts every correct split and names each
usual mistake.

A correct answer may shuffle the groups with any generator seeded by `seed`, so the
checker judges properties of the splits, never one exact split. Each wrong answer below
is one a learner writes; each test asserts the checker returns False *and* prints that
mistake's diagnosis, on one verdict line.
"""

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
import torch

from course import check, tatoeba

# ------------------------------------------------------------ correct answers ----------


def _members(items, group):
    """Group key -> the indices of its items, in order of first appearance."""
    members = {}
    for index, item in enumerate(items):
        members.setdefault(group(item), []).append(index)
    return members


def _take(groups, target):
    """Indices of whole groups, from the front, until there are `target` or more."""
    chosen = []
    for indices in groups:
        if len(chosen) >= target:
            break
        chosen += indices
    return set(chosen)


def _sides(items, in_test):
    train = [item for i, item in enumerate(items) if i not in in_test]
    test = [item for i, item in enumerate(items) if i in in_test]
    return train, test


def split_with_numpy(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    order = np.random.default_rng(seed).permutation(len(groups))
    return _sides(items, _take([groups[i] for i in order], round(test_fraction * len(items))))


def split_with_torch(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    order = torch.randperm(len(groups), generator=torch.Generator().manual_seed(seed))
    return _sides(items, _take([groups[i] for i in order], round(test_fraction * len(items))))


def split_stopping_before_the_target(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    target = round(test_fraction * len(items))
    in_test = []
    for indices in groups:
        if len(in_test) + len(indices) > target:
            break
        in_test += indices
    return _sides(items, set(in_test))


def split_returning_tuples(items, group, test_fraction, seed):
    train, test = tatoeba.grouped_split(items, group, test_fraction, seed)
    return tuple(train), tuple(test)


def split_in_shuffled_order(items, group, test_fraction, seed):
    by_group = {}
    for item in items:
        by_group.setdefault(group(item), []).append(item)
    groups = list(by_group.values())
    random.Random(seed).shuffle(groups)
    target = round(test_fraction * len(items))
    train, test = [], []
    for members in groups:
        (test if len(test) < target else train).extend(members)
    return train, test


def split_like_group_shuffle_split(items, group, test_fraction, seed):
    """As scikit-learn's GroupShuffleSplit draws: the unique keys, permuted by a RandomState."""
    keys = [group(item) for item in items]
    sizes = Counter(keys)
    unique = np.unique(np.array(keys))  # sorted
    order = np.random.RandomState(seed).permutation(len(unique))
    target, count, chosen = round(test_fraction * len(items)), 0, set()
    for i in order:
        if count >= target:
            break
        key = unique[i].item()
        chosen.add(key)
        count += sizes[key]
    train = [item for item, key in zip(items, keys, strict=True) if key not in chosen]
    test = [item for item, key in zip(items, keys, strict=True) if key in chosen]
    return train, test


RIGHT = [
    tatoeba.grouped_split,
    split_with_numpy,
    split_with_torch,
    split_stopping_before_the_target,
    split_returning_tuples,
    split_in_shuffled_order,
    split_like_group_shuffle_split,
]


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is True and printed.startswith("✅ grouped_split: passed"), printed


# ------------------------------------------------------------ wrong answers ----------


def stub(items, group, test_fraction, seed):
    # YOUR CODE HERE
    raise NotImplementedError


def pair_by_pair(items, group, test_fraction, seed):
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    n_test = round(test_fraction * len(items))
    return shuffled[n_test:], shuffled[:n_test]


def _split_by(items, key, test_fraction, seed):
    """The reference's method with another group key."""
    return tatoeba.grouped_split(items, key, test_fraction, seed)


def by_the_french_sentence(items, group, test_fraction, seed):
    return _split_by(items, lambda pair: pair[0], test_fraction, seed)


def by_item_1(items, group, test_fraction, seed):
    return _split_by(items, lambda pair: pair[1], test_fraction, seed)


def no_shuffle(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def sorted_groups(items, group, test_fraction, seed):
    members = _members(items, group)
    groups = [members[key] for key in sorted(members)]
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def seed_ignored(items, group, test_fraction, seed):
    return tatoeba.grouped_split(items, group, test_fraction, 0)


def global_seed_and_shuffle(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.seed(seed)
    random.shuffle(groups)
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def unseeded_shuffle(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.shuffle(groups)
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def torch_randperm_without_generator(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    order = torch.randperm(len(groups))
    return _sides(items, _take([groups[i] for i in order], round(test_fraction * len(items))))


def torch_manual_seed(items, group, test_fraction, seed):
    torch.manual_seed(seed)
    groups = list(_members(items, group).values())
    order = torch.randperm(len(groups))
    return _sides(items, _take([groups[i] for i in order], round(test_fraction * len(items))))


def numpy_global_seed(items, group, test_fraction, seed):
    np.random.seed(seed)
    groups = list(_members(items, group).values())
    order = np.random.permutation(len(groups))
    return _sides(items, _take([groups[i] for i in order], round(test_fraction * len(items))))


def fraction_for_train(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    in_train = _take(groups, round(test_fraction * len(items)))
    train = [item for i, item in enumerate(items) if i in in_train]
    test = [item for i, item in enumerate(items) if i not in in_train]
    return train, test


def swapped(items, group, test_fraction, seed):
    train, test = tatoeba.grouped_split(items, group, test_fraction, seed)
    return test, train


def through_a_set(items, group, test_fraction, seed):
    return tatoeba.grouped_split(list(set(items)), group, test_fraction, seed)


def through_a_dict(items, group, test_fraction, seed):
    by_group = {}
    for item in items:
        by_group.setdefault(group(item), {})[item] = True  # one entry per distinct item
    keys = list(by_group)
    random.Random(seed).shuffle(keys)
    target = round(test_fraction * len(items))
    train, test = [], []
    for key in keys:
        (test if len(test) < target else train).extend(by_group[key])
    return train, test


def sorts_items_in_place(items, group, test_fraction, seed):
    items.sort(key=lambda item: repr(group(item)))
    return tatoeba.grouped_split(items, group, test_fraction, seed)


def sorts_items_plainly_in_place(items, group, test_fraction, seed):
    items.sort()
    return tatoeba.grouped_split(items, group, test_fraction, seed)


def shuffles_items_in_place(items, group, test_fraction, seed):
    random.Random(seed).shuffle(items)
    return tatoeba.grouped_split(items, group, test_fraction, seed)


def cuts_the_last_group(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    order = [i for indices in groups for i in indices]
    n_test = round(test_fraction * len(items))
    return _sides(items, set(order[:n_test]))


def returns_sets(items, group, test_fraction, seed):
    train, test = tatoeba.grouped_split(items, group, test_fraction, seed)
    return set(train), set(test)


def rotates_by_the_seed(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    start = seed % len(groups)
    return _sides(items, _take(groups[start:] + groups[:start], round(test_fraction * len(items))))


def shuffles_only_the_first_groups(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    head = groups[:8]
    random.Random(seed).shuffle(head)
    return _sides(items, _take(head + groups[8:], round(test_fraction * len(items))))


def groupby_without_sorting(items, group, test_fraction, seed):
    groups = [
        list(run) for _, run in itertools.groupby(range(len(items)), lambda i: group(items[i]))
    ]
    random.Random(seed).shuffle(groups)
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def slices_with_a_float(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    flat = [i for indices in groups for i in indices]
    return _sides(items, set(flat[: test_fraction * len(items)]))


def unpacks_pairs(items, group, test_fraction, seed):
    by_group = {}
    for french, english in items:  # assumes pairs
        by_group.setdefault(group((french, english)), []).append((french, english))
    groups = list(by_group.values())
    random.Random(seed).shuffle(groups)
    target = round(test_fraction * len(items))
    train, test = [], []
    for members in groups:
        (test if len(test) < target else train).extend(members)
    return train, test


def only_test(items, group, test_fraction, seed):
    return tatoeba.grouped_split(items, group, test_fraction, seed)[1]


def parameters_reordered(items, test_fraction, group, seed):
    return tatoeba.grouped_split(items, group, test_fraction, seed)


WRONG = [
    (stub, "⏳ grouped_split: not implemented yet"),
    (pair_by_pair, "the split looks drawn pair by pair"),
    (pair_by_pair, "is on both sides: "),
    (by_the_french_sentence, "keeps the items together by item[0] (the French one)"),
    (by_the_french_sentence, "call group(item) to get an item's group"),
    (by_item_1, "pairs grouped by the lowercased English with test_fraction="),
    (by_item_1, "keeps the items together by item[1] (the English sentence)"),
    (by_item_1, "here group is lambda pair: pair[1].lower()"),
    (no_shuffle, "always the first groups in the order they first appear in items"),
    (sorted_groups, "always the first groups in sorted order"),
    (seed_ignored, "seeds 0 to 19 gave only 1 different test set(s): the seed is ignored"),
    (global_seed_and_shuffle, "changed the state of Python's global random generator"),
    (global_seed_and_shuffle, "use a local generator, rng = random.Random(seed)"),
    (unseeded_shuffle, "two calls with seed=3 gave different splits"),
    (torch_randperm_without_generator, "two calls with seed=3 gave different splits"),
    (torch_manual_seed, "changed the state of torch's global generator (torch.manual_seed"),
    (numpy_global_seed, "changed the state of numpy's global generator (np.random.seed"),
    (fraction_for_train, "test_fraction was taken as the fraction for training"),
    (swapped, "(test, train) is returned swapped"),
    (swapped, "train holds 9 items and test 34"),
    (through_a_set, "is twice in items but only once in train + test"),
    (through_a_set, "a set() or dict keyed by the item keeps one of each"),
    (through_a_dict, "is twice in items but only once in train + test"),
    (sorts_items_in_place, "your code changed the caller's items"),
    (sorts_items_in_place, "the same items, now in another order: shuffling or sorting items"),
    (sorts_items_plainly_in_place, "now sorted: items.sort() sorts the caller's list in place"),
    (shuffles_items_in_place, "your code changed the caller's items (the same items, now in"),
    (cuts_the_last_group, "holds exactly round(test_fraction * len(items)) = "),
    (cuts_the_last_group, "the last group taken was cut in two"),
    (returns_sets, "train is a set: a set keeps each item once"),
    (rotates_by_the_seed, "the test set is always a run of consecutive groups in the order"),
    (shuffles_only_the_first_groups, "was never in the test set"),
    (groupby_without_sorting, "the group 'Hi.' is on both sides"),
    (groupby_without_sorting, "itertools.groupby only groups neighbouring items"),
    (slices_with_a_float, "round(test_fraction * len(items)), before using it as a count"),
    (unpacks_pairs, "here an item is a record, not a pair"),
    (unpacks_pairs, "Example records grouped by english_id"),
    (only_test, "should return the pair (train, test), two lists"),
    (parameters_reordered, "the lesson's signature is grouped_split(items, group, "),
]


@pytest.mark.parametrize(
    "answer, diagnosis",
    WRONG,
    ids=[f"{w[0].__name__}-{i}" for i, w in enumerate(WRONG)],
)
def test_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False and diagnosis in printed, printed
    if diagnosis.startswith("⏳"):
        assert printed.startswith(diagnosis), printed
    else:
        assert printed.startswith("❌ grouped_split: "), printed


def test_an_answer_that_raises_gets_a_friendly_verdict(verdict):
    def raises(items, group, test_fraction, seed):
        return {}[group(items[0])]

    passed, printed = verdict(check.grouped_split, raises)
    assert passed is False and printed.startswith("❌ grouped_split: on inputs items=<43 "), printed
    assert "your code raised KeyError" in printed and "Traceback" not in printed, printed
    assert "group=lambda pair: pair[1], test_fraction=0.2, seed=0" in printed, printed


@pytest.mark.parametrize(
    "answer", [global_seed_and_shuffle, torch_manual_seed, numpy_global_seed, unseeded_shuffle]
)
def test_checking_leaves_the_global_random_states_as_they_were(answer, verdict):
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    verdict(check.grouped_split, answer)
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected


def test_the_message_names_the_items_shown_not_their_full_list(verdict):
    passed, printed = verdict(check.grouped_split, pair_by_pair)
    assert "Go." in printed and len(printed) < 900, printed


# ------------------------------------------- issue 32: wrong answers that passed ----------


def keys_through_a_set(items, group, test_fraction, seed):
    """The keys deduplicated by a set, then shuffled: the set's order follows the keys'
    hashes, which change with PYTHONHASHSEED from one process to the next."""
    keys = list({group(item) for item in items})
    random.Random(seed).shuffle(keys)
    target, chosen, count = round(test_fraction * len(items)), set(), 0
    sizes = Counter(group(item) for item in items)
    for key in keys:
        if count >= target:
            break
        chosen.add(key)
        count += sizes[key]
    train = [item for item in items if group(item) not in chosen]
    test = [item for item in items if group(item) in chosen]
    return train, test


def keys_normalised(items, group, test_fraction, seed):
    """'Go.' and 'go.' made one group: the keys lowercased and stripped."""
    return tatoeba.grouped_split(
        items, lambda item: str(group(item)).strip().lower(), test_fraction, seed
    )


def groups_in_the_order_of_shuffled_items(items, group, test_fraction, seed):
    """The items shuffled, then the groups taken in the order they first appear: a group
    with many items is likely to appear early."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    members = {}
    for i in order:
        members.setdefault(group(items[i]), []).append(i)
    return _sides(items, _take(list(members.values()), round(test_fraction * len(items))))


def fraction_of_groups_as_group_shuffle_split(items, group, test_fraction, seed):
    """scikit-learn's GroupShuffleSplit(test_size=test_fraction): ceil(test_fraction *
    n_groups) groups, drawn from the sorted unique keys by a RandomState."""
    keys = [group(item) for item in items]
    unique = sorted(set(keys))
    order = np.random.RandomState(seed).permutation(len(unique))
    n_test = int(np.ceil(test_fraction * len(unique)))
    chosen = {unique[i] for i in order[:n_test]}
    train = [item for item, key in zip(items, keys, strict=True) if key not in chosen]
    test = [item for item, key in zip(items, keys, strict=True) if key in chosen]
    return train, test


def fraction_of_groups_as_train_test_split(items, group, test_fraction, seed):
    """train_test_split on the keys (in order of appearance), test_size=test_fraction."""
    keys = list(dict.fromkeys(group(item) for item in items))
    shuffled = [keys[i] for i in np.random.RandomState(seed).permutation(len(keys))]
    n_test = math.ceil(test_fraction * len(keys))
    test_keys = set(shuffled[:n_test])
    train = [item for item in items if group(item) not in test_keys]
    test = [item for item in items if group(item) in test_keys]
    return train, test


_FRACTION_OF_GROUPS = "test_fraction was taken as a fraction of the groups"
ISSUE_32 = [
    (keys_through_a_set, "PYTHONHASHSEED"),
    (keys_normalised, "differ only in case or spaces"),
    (groups_in_the_order_of_shuffled_items, "favours large groups"),
    (fraction_of_groups_as_group_shuffle_split, _FRACTION_OF_GROUPS),
    (fraction_of_groups_as_train_test_split, _FRACTION_OF_GROUPS),
]


@pytest.mark.parametrize("answer, diagnosis", ISSUE_32, ids=[w[0].__name__ for w in ISSUE_32])
def test_issue_32_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False and printed.startswith("❌ grouped_split: "), printed
    assert diagnosis in printed, printed


def split_with_int_target(items, group, test_fraction, seed):
    """int() instead of round(): inside the tolerance of one group."""
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    return _sides(items, _take(groups, int(test_fraction * len(items))))


def split_with_sorted_keys(items, group, test_fraction, seed):
    """The keys sorted before the seeded shuffle: the same split in every process."""
    members = _members(items, group)
    keys = sorted(members)
    random.Random(seed).shuffle(keys)
    return _sides(items, _take([members[k] for k in keys], round(test_fraction * len(items))))


@pytest.mark.parametrize("answer", [split_with_int_target, split_with_sorted_keys])
def test_more_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is True, printed


# ----------------------------------------- ten more plausible wrong answers ----------


def returns_indices(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    in_test = _take(groups, round(test_fraction * len(items)))
    return [i for i in range(len(items)) if i not in in_test], sorted(in_test)


def returns_groups_nested(items, group, test_fraction, seed):
    by_group = {}
    for item in items:
        by_group.setdefault(group(item), []).append(item)
    groups = list(by_group.values())
    random.Random(seed).shuffle(groups)
    target, train, test = round(test_fraction * len(items)), [], []
    for members in groups:
        (test if sum(map(len, test)) < target else train).append(members)  # lists of lists
    return train, test


def samples_a_fraction_of_the_groups(items, group, test_fraction, seed):
    keys = list(dict.fromkeys(group(item) for item in items))
    test_keys = set(random.Random(seed).sample(keys, round(test_fraction * len(keys))))
    train = [item for item in items if group(item) not in test_keys]
    test = [item for item in items if group(item) in test_keys]
    return train, test


def target_counted_in_groups(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    return _sides(items, _take(groups, round(test_fraction * len(groups))))  # items vs groups


def coin_per_group(items, group, test_fraction, seed):
    rng = random.Random(seed)
    keys = list(dict.fromkeys(group(item) for item in items))
    test_keys = {key for key in keys if rng.random() < test_fraction}
    train = [item for item in items if group(item) not in test_keys]
    test = [item for item in items if group(item) in test_keys]
    return train, test


def generator_made_per_group(items, group, test_fraction, seed):
    keys = list(dict.fromkeys(group(item) for item in items))
    test_keys = {key for key in keys if random.Random(seed).random() < test_fraction}
    train = [item for item in items if group(item) not in test_keys]
    test = [item for item in items if group(item) in test_keys]
    return train, test


def smallest_groups_first(items, group, test_fraction, seed):
    groups = list(_members(items, group).values())
    random.Random(seed).shuffle(groups)
    groups.sort(key=len)  # "small groups first, to hit the target exactly"
    return _sides(items, _take(groups, round(test_fraction * len(items))))


def shuffled_by_a_seeded_hash(items, group, test_fraction, seed):
    """The groups ordered by hash((seed, key)), "a shuffle without a generator": hash() of a
    str changes from one process to the next."""
    members = _members(items, group)
    keys = sorted(members, key=lambda key: hash((seed, key)))
    return _sides(items, _take([members[k] for k in keys], round(test_fraction * len(items))))


def returns_filters(items, group, test_fraction, seed):
    train, test = tatoeba.grouped_split(items, group, test_fraction, seed)
    return filter(None, train), filter(None, test)


def items_in_a_set_per_group(items, group, test_fraction, seed):
    by_group = {}
    for item in items:
        by_group.setdefault(group(item), set()).add(item)  # a set: duplicates collapse
    groups = list(by_group.values())
    random.Random(seed).shuffle(groups)
    target, train, test = round(test_fraction * len(items)), [], []
    for members in groups:
        (test if len(test) < target else train).extend(members)
    return train, test


MORE = [
    (returns_indices, "which is not one of the items. Return the items themselves"),
    (returns_groups_nested, "which is not one of the items"),
    (samples_a_fraction_of_the_groups, _FRACTION_OF_GROUPS),
    (target_counted_in_groups, "test_fraction is a fraction of the items, not of the groups"),
    (coin_per_group, "give or take one group"),
    (generator_made_per_group, "test holds 0 of the 43 items"),
    (smallest_groups_first, "was never in the test set"),
    (shuffled_by_a_seeded_hash, "when only the hash values of the group keys changed"),
    (returns_filters, "should be a list of items, got a filter"),
    (items_in_a_set_per_group, "is twice in items but only once in train + test"),
]


@pytest.mark.parametrize("answer, diagnosis", MORE, ids=[w[0].__name__ for w in MORE])
def test_more_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False and printed.startswith("❌ grouped_split: "), printed
    assert diagnosis in printed, printed
