"""The lesson 11 checker, grouped_split: the exact words of its verdicts.

A learner reads one line: which case broke the answer (its size and what it holds, the
test_fraction and seed of the call), what the checker saw (sizes, counts, the group or the
item in question) and what to do. Each wrong answer below is one a learner may write (some
from tests/test_check_data.py and tests/test_check_data_mutation.py); each test asserts
the verdict and the whole line the checker prints, so that a changed case, number or piece
of advice shows. A few right answers sit at the limits the checker documents (give or take
one group; the large group in at most half of the splits) and must pass.
"""

import ast
import json
import random
import re

import numpy as np
import pytest
import test_check_data as base
import test_check_data_mutation as mut
import torch

from course import check, tatoeba

PASSED = (
    "✅ grouped_split: passed (5 cases, 18 splits at test_fraction 0.1, 0.2 and 0.5: every item "
    "once, duplicates kept, no group on both sides, the test set's size, items unchanged; the "
    "same seed the same split, whatever the keys' hashes; a fraction of the items; seeds 0 to 99 "
    "drawing every group, large ones no more often; keys used as given; global random states "
    "untouched).\n"
)


def _error_text(expression):
    """What this interpreter says when `expression` fails (its words change between Pythons:
    3.11's `max()` of nothing says "arg is an empty sequence", 3.12's "iterable argument is
    empty"); the verdict must quote the learner's error as raised, whatever the words."""
    try:
        expression()
    except Exception as error:  # noqa: BLE001 - any error: its text is what is quoted
        return f"{type(error).__name__}: {error}"
    raise AssertionError("the expression was meant to fail")


MAX_OF_NOTHING = _error_text(lambda: max([]))  # ValueError: max() arg is an empty sequence


def _right(items, group, test_fraction, seed):
    return tatoeba.grouped_split(items, group, test_fraction, seed)


def _members(items, group):
    members = {}
    for item in items:
        members.setdefault(group(item), []).append(item)
    return list(members.values())


def _shuffled_groups(items, group, seed):
    groups = _members(items, group)
    random.Random(seed).shuffle(groups)
    return groups


def indexes_the_item(items, group, test_fraction, seed):
    """item[1] instead of group(item): a record is not subscriptable."""
    members = {}
    for item in items:
        members.setdefault(item[1], []).append(item)
    return _right(items, group, test_fraction, seed)


def ranges_over_a_float(items, group, test_fraction, seed):
    """range(test_fraction * len(items)): a float is no count."""
    groups = _shuffled_groups(items, group, seed)
    flat = [item for g in groups for item in g]
    test = [flat[i] for i in range(test_fraction * len(items))]
    return flat[len(test) :], test


def indexes_with_a_float(items, group, test_fraction, seed):
    """Test ends with the group of the item at position test_fraction * len(items)."""
    groups = _shuffled_groups(items, group, seed)
    flat = [item for g in groups for item in g]
    last = group(flat[test_fraction * len(items)])
    end = next(i for i, g in enumerate(groups) if group(g[0]) == last) + 1
    return [i for g in groups[end:] for i in g], [i for g in groups[:end] for i in g]


def samples_a_float(items, group, test_fraction, seed):
    """random.sample(keys, test_fraction * len(keys)): a float k, of no item count."""
    keys = list(dict.fromkeys(group(item) for item in items))
    chosen = set(random.Random(seed).sample(keys, test_fraction * len(keys)))
    return [i for i in items if group(i) not in chosen], [i for i in items if group(i) in chosen]


def returns_test_as_a_frozenset(items, group, test_fraction, seed):
    """Test made a frozenset, to say it is not ordered."""
    train, test = _right(items, group, test_fraction, seed)
    return train, frozenset(test)


def returns_test_as_a_generator(items, group, test_fraction, seed):
    """Test handed back lazily, a generator."""
    train, test = _right(items, group, test_fraction, seed)
    return train, (item for item in test)


def returns_test_items_as_lists(items, group, test_fraction, seed):
    """The test pairs made lists, as JSON would give them back."""
    train, test = _right(items, group, test_fraction, seed)
    return train, [list(item) for item in test]


def a_test_item_twice(items, group, test_fraction, seed):
    """One test item appended again (test + test[:1])."""
    train, test = _right(items, group, test_fraction, seed)
    return train, test + test[:1]


def a_train_item_twice(items, group, test_fraction, seed):
    """The last train item appended again: the repeated pair, now 3 times."""
    train, test = _right(items, group, test_fraction, seed)
    return train + train[-1:], test


def _test_size(items, test_fraction):
    round(test_fraction * len(items))  # the return forgotten


def forgets_to_return_the_size(items, group, test_fraction, seed):
    """The size helper computes round(...) and forgets to return it."""
    groups = _shuffled_groups(items, group, seed)
    flat = [item for g in groups for item in g]
    test = [flat[i] for i in range(_test_size(items, test_fraction))]
    return flat[len(test) :], test


def takes_the_last_groups(items, group, test_fraction, seed):
    """No shuffle: test takes the groups from the end."""
    groups = _members(items, group)
    target, test = round(test_fraction * len(items)), []
    for g in reversed(groups):
        if len(test) >= target:
            break
        test = g + test
    return [i for g in groups for i in g if i not in test], test


def seeds_modulo_5(items, group, test_fraction, seed):
    """random.Random(seed % 5): five splits in all, whatever the seed."""
    return _right(items, group, test_fraction, seed % 5)


def seeds_modulo_4(items, group, test_fraction, seed):
    """random.Random(seed % 4): four splits in all, whatever the seed."""
    return _right(items, group, test_fraction, seed % 4)


def rotates_sorted_groups(items, group, test_fraction, seed):
    """The sorted groups rotated by the seed, never shuffled."""
    members = {}
    for item in items:
        members.setdefault(group(item), []).append(item)
    groups = [members[k] for k in sorted(members)]
    start = seed % len(groups)
    groups = groups[start:] + groups[:start]
    target, test = round(test_fraction * len(items)), []
    for g in groups:
        if len(test) >= target:
            break
        test += g
    return [i for i in items if i not in test], test


def keys_as_strings(items, group, test_fraction, seed):
    """Right: every key made a str (str(key)), one string per key."""
    return _right(items, lambda item: str(group(item)), test_fraction, seed)


def _fill(groups, size):
    """Whole groups, in order, skipping those that overflow, until `size` items."""
    test = []
    for g in groups:
        if len(test) + len(g) <= size:
            test += g
    return test


def caps_test_at_40_percent(items, group, test_fraction, seed):
    """Test capped at 40% of the items, "to keep most for training"."""
    groups = _shuffled_groups(items, group, seed)
    size = min(round(test_fraction * len(items)), int(0.4 * len(items)))
    test = _fill(groups, size)
    return [i for g in groups for i in g if i not in test], test


def _aim(name, offset):
    def answer(items, group, test_fraction, seed):
        groups = _shuffled_groups(items, group, seed)
        largest = max(map(len, groups))
        size = max(0, round(test_fraction * len(items)) + offset(largest))
        test = _fill(groups, size)
        rest = [i for g in groups for i in g if i not in test]
        return rest, test

    answer.__name__ = name
    return answer


one_largest_group_short = _aim("one_largest_group_short", lambda largest: -largest)
one_largest_group_over = _aim("one_largest_group_over", lambda largest: largest)
one_item_more_short = _aim("one_item_more_short", lambda largest: -largest - 1)
one_item_more_over = _aim("one_item_more_over", lambda largest: largest + 1)


def strips_spaces(items, group, test_fraction, seed):
    """Keys with spaces collapsed: ' '.join(key.split())."""
    return _right(items, lambda item: " ".join(str(group(item)).split()), test_fraction, seed)


def tops_up_from_the_next_groups(items, group, test_fraction, seed):
    """Whole groups until the next would overflow, then the remainder from the next
    groups, half from each: exactly round(test_fraction * len(items)) items."""
    groups = _shuffled_groups(items, group, seed)
    target = round(test_fraction * len(items))
    test, k = [], 0
    while k < len(groups) and len(test) + len(groups[k]) <= target:
        test += groups[k]
        k += 1
    need = target - len(test)
    nxt = groups[k : k + 2]
    first = min((need + 1) // 2, len(nxt[0]) - 1) if nxt else 0
    test += nxt[0][:first] if nxt else []
    rest = [i for g in groups[k + 1 :] for i in g]
    test += rest[: need - first]
    return [i for g in groups for i in g if i not in test], test


def orders_records_in_place(items, group, test_fraction, seed):
    """Records, which have no order, sorted in place by their group."""
    if not isinstance(items[0], tuple):
        items.sort(key=group)  # records have no order of their own: by their group
    return _right(items, group, test_fraction, seed)


def leaves_out_the_first_group(items, group, test_fraction, seed):
    """range(1, len(groups)): the first group never considered, and no shuffle."""
    groups = _members(items, group)
    target, test = round(test_fraction * len(items)), []
    for k in range(1, len(groups)):
        if len(test) >= target:
            break
        test += groups[k]
    return [i for g in groups for i in g if i not in test], test


def _largest_first_when(name, first):
    def answer(items, group, test_fraction, seed):
        groups = _shuffled_groups(items, group, seed)
        largest = max(groups, key=len)
        groups.remove(largest)
        groups = [largest, *groups] if first(seed) else [*groups, largest]
        target, test = round(test_fraction * len(items)), []
        for g in groups:
            if len(test) >= target:
                break
            test += g
        return [i for g in groups for i in g if i not in test], test

    answer.__name__ = name
    return answer


largest_first_for_even_seeds = _largest_first_when(
    "largest_first_for_even_seeds", lambda seed: seed % 2 == 0
)
largest_first_for_even_seeds_and_1 = _largest_first_when(
    "largest_first_for_even_seeds_and_1", lambda seed: seed % 2 == 0 or seed == 1
)


def cuts_a_group_too_big_for_test(items, group, test_fraction, seed):
    """A group larger than the whole test set is cut to fit."""
    members = {}
    for index, item in enumerate(items):
        members.setdefault(group(item), []).append(index)
    groups = list(members.values())
    random.Random(seed).shuffle(groups)
    target, test = round(test_fraction * len(items)), []
    for g in groups:
        if len(test) >= target:
            break
        test += g[: target - len(test)] if len(g) > target else g
    return [x for i, x in enumerate(items) if i not in test], [items[i] for i in sorted(test)]


def cleans_the_sentences(items, group, test_fraction, seed):
    """Whitespace stripped from every sentence first, as data cleaning does."""
    clean = [tuple(s.strip() for s in item) if isinstance(item, tuple) else item for item in items]
    return _right(clean, group, test_fraction, seed)


def seeds_all_three(items, group, test_fraction, seed):
    """The three global generators seeded, "for reproducibility"."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return _right(items, group, test_fraction, seed)


def shuffles_large_groups_globally(items, group, test_fraction, seed):
    """The items of a large group shuffled among themselves, by the global generator."""
    groups = _shuffled_groups(items, group, seed)
    for g in groups:
        if len(g) > 10:
            random.shuffle(g)
    target, test = round(test_fraction * len(items)), []
    for g in groups:
        if len(test) >= target:
            break
        test += g
    return [i for g in groups for i in g if i not in test], test


def rounds_at_random(items, group, test_fraction, seed):
    """The group that would take test past its size is taken on a coin toss, from the
    global generator."""
    groups = _shuffled_groups(items, group, seed)
    target, test = round(test_fraction * len(items)), []
    for g in groups:
        if len(test) >= target or (len(test) + len(g) > target and random.random() < 0.5):
            break
        test += g
    return [i for g in groups for i in g if i not in test], test


def recording(answer, calls):
    """`answer`, noting each call's (len(items), test_fraction, seed, key type, test)."""

    def recorded(items, group, test_fraction, seed):
        train, test = answer(items, group, test_fraction, seed)
        calls.append((len(items), test_fraction, seed, type(group(items[0])).__name__, list(test)))
        return train, test

    return recorded


def _coin_from_the_hash(parity):
    def answer(items, group, test_fraction, seed):
        """The group that would take test past its size is taken on a "deterministic
        coin", its key's hash: hashes change from one process to the next."""
        groups = _shuffled_groups(items, group, seed)
        target, test = round(test_fraction * len(items)), []
        for g in groups:
            over = len(test) + len(g) > target
            if len(test) >= target or (over and hash((seed, group(g[0]))) % 2 == parity):
                break
            test += g
        return [i for g in groups for i in g if i not in test], test

    answer.__name__ = "a_seeded_coin_from_the_hash"
    return answer


a_seeded_coin_from_the_hash = _coin_from_the_hash(1)


def _cleaned(clean):
    def answer(items, group, test_fraction, seed):
        """Each sentence cleaned first: a pair that changes is no longer one of the items."""
        same = [tuple(map(clean, item)) if isinstance(item, tuple) else item for item in items]
        return _right(same, group, test_fraction, seed)

    return answer


def cleans_leading_spaces(items, group, test_fraction, seed):
    """Each sentence's leading spaces stripped first."""
    return _cleaned(str.lstrip)(items, group, test_fraction, seed)


def collapses_double_spaces(items, group, test_fraction, seed):
    """Each sentence's double spaces collapsed first."""
    return _cleaned(lambda s: s.replace("  ", " "))(items, group, test_fraction, seed)


def split_with_sorted_unique_keys(items, group, test_fraction, seed):
    """Right: the distinct keys as np.unique finds them (sorted, each compared with the one
    before it), shuffled; then each key's items."""
    keys = sorted(group(item) for item in items)
    unique = [key for i, key in enumerate(keys) if i == 0 or keys[i - 1] < key]
    random.Random(seed).shuffle(unique)
    target, train, test = round(test_fraction * len(items)), [], []
    for key in unique:
        members = [item for item in items if group(item) == key]
        (test if len(test) < target else train).extend(members)
    return train, test


def stops_within_the_largest_translated_group(items, group, test_fraction, seed):
    """Stops once test is within the largest group of translations (groups of one pair
    left out of that maximum) of its size."""
    groups = _shuffled_groups(items, group, seed)
    slack = max(len(g) for g in groups if len(g) > 1)
    target, test = round(test_fraction * len(items)), []
    for g in groups:
        if len(test) >= target - slack + 1:
            break
        test += g
    return [i for g in groups for i in g if i not in test], test


def caches_the_order_per_seed():
    """The shuffled order of the groups memoised on the seed alone ("the same seed, the
    same order"): a later case with that seed gets an order for another number of groups."""
    orders = {}

    def answer(items, group, test_fraction, seed):
        groups = _members(items, group)
        if seed not in orders:
            orders[seed] = random.Random(seed).sample(range(len(groups)), len(groups))
        target, test = round(test_fraction * len(items)), []
        for k in orders[seed]:
            if len(test) >= target:
                break
            test += groups[k]
        return [i for g in groups for i in g if i not in test], test

    answer.__name__ = "caches_the_order_per_seed"
    return answer


def caches_the_size_per_fraction():
    """The test set's size memoised on test_fraction alone: a later case with that
    test_fraction gets the size of the first."""
    sizes = {}

    def answer(items, group, test_fraction, seed):
        target = sizes.setdefault(test_fraction, round(test_fraction * len(items)))
        groups, test = _shuffled_groups(items, group, seed), []
        for g in groups:
            if len(test) >= target:
                break
            test += g
        return [i for g in groups for i in g if i not in test], test

    answer.__name__ = "caches_the_size_per_fraction"
    return answer


def caches_the_split_per_seed():
    """The split memoised on the seed alone: a later case with that seed gets the split of
    another case's items."""
    splits = {}

    def answer(items, group, test_fraction, seed):
        if seed not in splits:
            splits[seed] = _right(items, group, test_fraction, seed)
        return splits[seed]

    answer.__name__ = "caches_the_split_per_seed"
    return answer


def caches_the_split_per_fraction_and_seed():
    """The split memoised on (test_fraction, seed): another case with the same call gets
    the first's split."""
    splits = {}

    def answer(items, group, test_fraction, seed):
        if (test_fraction, seed) not in splits:
            splits[test_fraction, seed] = _right(items, group, test_fraction, seed)
        return splits[test_fraction, seed]

    answer.__name__ = "caches_the_split_per_fraction_and_seed"
    return answer


def seeds_in_fives(items, group, test_fraction, seed):
    """random.Random(seed // 5): seeds 0 to 4 give one split, 5 to 9 another, ..."""
    return _right(items, group, test_fraction, seed // 5)


def keys_through_json(items, group, test_fraction, seed):
    """The keys written with json.dumps, "so that any key, a list too, can key a dict"."""
    return _right(items, lambda item: json.dumps(group(item)), test_fraction, seed)


def caches_the_split_per_group_fraction_and_seed():
    """The split memoised on (group, test_fraction, seed), the items left out of the key:
    another case with the same group function and the same call gets the first's split."""
    splits = {}

    def answer(items, group, test_fraction, seed):
        key = (group, test_fraction, seed)
        if key not in splits:
            splits[key] = _right(items, group, test_fraction, seed)
        return splits[key]

    answer.__name__ = "caches_the_split_per_group_fraction_and_seed"
    return answer


def refuses_keys_that_differ_only_in_case(items, group, test_fraction, seed):
    """Checks the data first: keys that differ only in case or spaces are taken for typos,
    and the items that have them are refused, listed in the error."""

    def normal(key):
        return " ".join(str(key).lower().split())

    keys = {group(item) for item in items}
    clashes = [item for item in items if sum(normal(k) == normal(group(item)) for k in keys) > 1]
    if clashes:
        raise ValueError(f"keys that differ only in case or spaces: {clashes}")
    return _right(items, group, test_fraction, seed)


def refuses_groups_of_one_item(items, group, test_fraction, seed):
    """Checks the data first: a group function that puts every item in a group of its own
    is taken for a mistake, and one item is shown."""
    if all(len(g) == 1 for g in _members(items, group)):
        raise ValueError(f"every group holds one item, {items[0]} for one: is group right?")
    return _right(items, group, test_fraction, seed)


# ------------------------------------------------------------------ verdicts ----------

SAID = [
    (
        indexes_the_item,
        "on inputs items=<24 Example records grouped by english_id>, group=lambda example: "
        "example.english_id, test_fraction=0.2, seed=6 your code raised TypeError: 'Example' "
        "object is not subscriptable. Your code takes the items apart (item[1], french, "
        "english = item); here an item is a record, not a pair. Don't look inside the items: "
        "group(item) gives each item's group",
    ),
    (
        ranges_over_a_float,
        "on inputs items=<43 (French, English) pairs, grouped by the English sentence>, "
        "group=lambda pair: pair[1], test_fraction=0.2, seed=0 your code raised TypeError: "
        "'float' object cannot be interpreted as an integer. test_fraction * len(items) is a "
        "float: round it, round(test_fraction * len(items)), before using it as a count",
    ),
    (
        indexes_with_a_float,
        "on inputs items=<43 (French, English) pairs, grouped by the English sentence>, "
        "group=lambda pair: pair[1], test_fraction=0.2, seed=0 your code raised TypeError: "
        "list indices must be integers or slices, not float. test_fraction * len(items) is a "
        "float: round it, round(test_fraction * len(items)), before using it as a count",
    ),
    (
        samples_a_float,
        "on inputs items=<43 (French, English) pairs, grouped by the English sentence>, "
        "group=lambda pair: pair[1], test_fraction=0.2, seed=0 your code raised TypeError: "
        "can't multiply sequence by non-int of type 'float'",
    ),
    (
        forgets_to_return_the_size,
        "on inputs items=<43 (French, English) pairs, grouped by the English sentence>, "
        "group=lambda pair: pair[1], test_fraction=0.2, seed=0 your code raised TypeError: "
        "'NoneType' object cannot be interpreted as an integer",
    ),
    (
        returns_test_as_a_frozenset,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test is a frozenset: a set keeps each item once (items can "
        "repeat: the same pair twice is two items) and in no order. Return two lists",
    ),
    (
        returns_test_as_a_generator,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test should be a list of items, got a generator. Return "
        "two lists (train, test)",
    ),
    (
        returns_test_items_as_lists,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test holds ['Assieds-toi !', 'Sit down.'], which is not "
        "one of the items. Return the items themselves, unchanged",
    ),
    (
        a_test_item_twice,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: the item ('Assieds-toi !', 'Sit down.') is 2 times in "
        "train + test (test) but 1 times in items: every item goes to exactly one side",
    ),
    (
        a_train_item_twice,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: the item ('Salut !', 'Hi.') is 3 times in train + test "
        "(train) but 2 times in items: every item goes to exactly one side",
    ),
    (
        takes_the_last_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 19 gave only 1 different test set(s): the seed is "
        "ignored. Seed the generator with the argument, random.Random(seed), not a fixed "
        "number",
    ),
    (
        leaves_out_the_first_group,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 19 gave only 1 different test set(s): the seed is "
        "ignored. Seed the generator with the argument, random.Random(seed), not a fixed "
        "number",
    ),
    (
        seeds_modulo_5,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: the group 'Hi.' was never in the test set. Every "
        "group must have its chance: shuffle all the groups, not only some of them",
    ),
    (
        seeds_modulo_4,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 19 gave only 4 different test set(s): the seed is "
        "ignored. Seed the generator with the argument, random.Random(seed), not a fixed "
        "number",
    ),
    (
        rotates_sorted_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: the test set is always a run of consecutive groups "
        "in sorted order (sorted keys), only its start changes with the seed. Shuffle the "
        "groups themselves: rng = random.Random(seed); rng.shuffle(groups)",
    ),
    (
        caps_test_at_40_percent,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.5, seed=7: test holds 17 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.5 * 43) = 22 items, give or take one "
        "group (the largest here has 4): test_fraction is a fraction of the items, not of the "
        "groups",
    ),
    (
        one_item_more_short,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test holds 4 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the groups",
    ),
    (
        one_item_more_over,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test holds 14 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the groups",
    ),
    (
        tops_up_from_the_next_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.1, seed=42, the group 'Be quiet.' is on both sides: ('Taisez-vous !', "
        "'Be quiet.') in train, ('Tais-toi !', 'Be quiet.') in test. Over seeds 0 to 19, 0.5 "
        "groups are cut in two on average: the split looks drawn pair by pair, which puts "
        "translations of one sentence in both sets and leaks the answers into the test set. "
        "Collect the items of each group (key = group(item)), shuffle the groups with a "
        "generator seeded by seed (rng = random.Random(seed)), then move whole groups into "
        "test",
    ),
    (
        cuts_a_group_too_big_for_test,
        "on 36 pairs, 12 of them in one group with test_fraction=0.2, seed=2, the group \"I'm "
        "sorry.\" is on both sides: ('Pardon.', \"I'm sorry.\") in train, ('Je suis "
        "désolé.', \"I'm sorry.\") in test. The test set holds exactly round(test_fraction * "
        "len(items)) = 7 items, and to get there the last group taken was cut in two. Move "
        "whole groups: keep adding groups while test holds fewer than 7 items; it may end up "
        "with a few more",
    ),
    (
        orders_records_in_place,
        "on 24 Example records grouped by english_id with test_fraction=0.2, seed=6: your code "
        "changed the caller's items (the same items, now in another order: shuffling or "
        "sorting items itself (rng.shuffle(items), items.sort(key=...)) reorders the caller's "
        "list in place). The caller's list must stay as it was: shuffle or sort a copy "
        "(list(items), sorted(items)), or shuffle the groups",
    ),
    (
        cleans_the_sentences,
        "on 20 pairs grouped by the English exactly as written with test_fraction=0.5, seed=0: "
        "train holds ('Je comprends.', 'I see.'), which is not one of the items. Return the "
        "items themselves, unchanged",
    ),
    (
        cleans_leading_spaces,
        "on 20 pairs grouped by the English exactly as written with test_fraction=0.5, seed=0: "
        "test holds ('Arrêtez !', 'Stop!'), which is not one of the items. Return the items "
        "themselves, unchanged",
    ),
    (
        collapses_double_spaces,
        "on 20 pairs grouped by the English exactly as written with test_fraction=0.5, seed=0: "
        'train holds ("J\'ai très froid.", "I\'m cold."), which is not one of the items. '
        "Return the items themselves, unchanged",
    ),
    (
        strips_spaces,
        "on 20 pairs grouped by the English exactly as written (lambda pair: pair[1]), "
        "test_fraction=0.5, seeds 0 to 59: the groups 'I see.' and 'I see. ', whose keys "
        "differ only in case or spaces (here spaces), were on the same side in all 60 splits: "
        "your code merges them (.lower(), .strip() or .split() on the keys?). A group is "
        "exactly what group(item) returns, unchanged: the caller's group function decides "
        "which items belong together (one that lowercases, as another case here does, merges "
        "them itself)",
    ),
    (
        largest_first_for_even_seeds_and_1,
        "on 36 pairs, 12 of them in one group, test_fraction=0.2, seeds 0 to 199: the group "
        '"I\'m sorry." (12 items) was in the test set in 101 of the 200 splits. It is one of '
        "25 groups, the others of one item: shuffled, the groups come in every order alike, "
        "and the test set (7 items) takes it only when it is among the first 7, in about 28% "
        "of the splits. Your order favours large groups (groups taken in the order they first "
        "appear after shuffling the items?). Shuffle the groups themselves, each once: groups "
        "= list(members.values()); rng.shuffle(groups)",
    ),
    (
        stops_within_the_largest_translated_group,
        "on inputs items=<30 pairs, each English sentence once (one pair per group)>, "
        "group=lambda pair: pair[1], test_fraction=0.1, seed=5 your code raised " + MAX_OF_NOTHING,
    ),
    (
        seeds_in_fives,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 19 gave only 4 different test set(s): the seed is "
        "ignored. Seed the generator with the argument, random.Random(seed), not a fixed "
        "number",
    ),
    (
        keys_through_json,
        "on inputs items=<43 (French, English) pairs grouped by Sentence(english), a key whose "
        "hash the checker changes>, group=lambda pair: Sentence(pair[1]), test_fraction=0.2, "
        "seed=3 your code raised TypeError: Object of type Sentence is not JSON serializable",
    ),
    (
        refuses_keys_that_differ_only_in_case,
        "on inputs items=<20 pairs grouped by the English exactly as written>, group=lambda "
        "pair: pair[1], test_fraction=0.5, seed=0 your code raised ValueError: keys that "
        "differ only in case or spaces: [('Va !', 'Go.'), ('Allez !', 'go.'), ('Bouge !', "
        "'Go.'), ('Salut !', 'Hi.'), ('Salut.', 'HI.'), ('Cours !', 'Run!'), ('Courez !', "
        "'run!'), ('Attends !', 'Wait!'), ('Attendez !', 'wait!'), ('Je vois.', 'I see.'), "
        "('Je comprends.', 'I see. '), ('Arrête !', 'Stop!'), ('Arrêtez !', ' Stop!'), "
        '("J\'ai froid.", "I\'m cold."), ("J\'ai très froid.", "I\'m  cold.")]',
    ),
    (
        refuses_groups_of_one_item,
        "on inputs items=<30 pairs, each English sentence once (one pair per group)>, "
        "group=lambda pair: pair[1], test_fraction=0.1, seed=5 your code raised ValueError: "
        'every group holds one item, ("J\'ai 10 ans.", "I\'m 10 years old.") for one: is group '
        "right?",
    ),
    (
        base.seed_ignored,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 19 gave only 1 different test set(s): the seed is "
        "ignored. Seed the generator with the argument, random.Random(seed), not a fixed "
        "number",
    ),
    (
        base.no_shuffle,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0 and every other seed from 0 to 19, test holds the same "
        "groups: always the first groups in the order they first appear in items. The groups "
        "are never shuffled: shuffle them with rng = random.Random(seed); rng.shuffle(groups), "
        "then take groups from the front",
    ),
    (
        base.sorted_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0 and every other seed from 0 to 19, test holds the same "
        "groups: always the first groups in sorted order (sorted keys). The groups are never "
        "shuffled: shuffle them with rng = random.Random(seed); rng.shuffle(groups), then take "
        "groups from the front",
    ),
    (
        base.rotates_by_the_seed,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: the test set is always a run of consecutive groups "
        "in the order they first appear in items, only its start changes with the seed. "
        "Shuffle the groups themselves: rng = random.Random(seed); rng.shuffle(groups)",
    ),
    (
        base.shuffles_only_the_first_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: the group 'I see.' was never in the test set. Every "
        "group must have its chance: shuffle all the groups, not only some of them",
    ),
    (
        base.swapped,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train holds 9 items and test 34: test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the "
        "groups. Either (test, train) is returned swapped (return train, test in that order) "
        "or test_fraction was taken as the fraction for training: it is the test set's",
    ),
    (
        base.fraction_for_train,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train holds 9 items and test 34: test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the "
        "groups. Either (test, train) is returned swapped (return train, test in that order) "
        "or test_fraction was taken as the fraction for training: it is the test set's",
    ),
    (
        base.through_a_set,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: ('Salut !', 'Hi.') is twice in items but only once in "
        "train + test: repeated items were dropped (a set() or dict keyed by the item keeps "
        "one of each). Every item must be on one side, duplicates included: collect them in "
        "lists",
    ),
    (
        base.slices_with_a_float,
        "on inputs items=<43 (French, English) pairs, grouped by the English sentence>, "
        "group=lambda pair: pair[1], test_fraction=0.2, seed=0 your code raised TypeError: "
        "slice indices must be integers or None or have an __index__ method. test_fraction * "
        "len(items) is a float: round it, round(test_fraction * len(items)), before using it "
        "as a count",
    ),
    (
        base.unpacks_pairs,
        "on inputs items=<24 Example records grouped by english_id>, group=lambda example: "
        "example.english_id, test_fraction=0.2, seed=6 your code raised TypeError: cannot "
        "unpack non-iterable Example object. Your code takes the items apart (item[1], french, "
        "english = item); here an item is a record, not a pair. Don't look inside the items: "
        "group(item) gives each item's group",
    ),
    (
        base.keys_through_a_set,
        "on 43 (French, English) pairs grouped by Sentence(english), a key whose hash the "
        "checker changes, test_fraction=0.2, seed=3: two calls gave different splits (('Salut "
        "!', 'Hi.') was in one test set only) when only the hash values of the group keys "
        "changed. Your order of the groups follows the keys' hashes: a set of keys (set(...), "
        "{group(item) for item in items}) is iterated in hash order, and Python's string "
        "hashes change from one process to the next (PYTHONHASHSEED), so the same seed would "
        "give another test set tomorrow. Keep the groups in the order they first appear (a "
        "dict keeps insertion order) or sort the keys, then shuffle them with rng = "
        "random.Random(seed)",
    ),
    (
        base.target_counted_in_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.5, seed=7: test holds 10 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.5 * 43) = 22 items, give or take one "
        "group (the largest here has 4): test_fraction is a fraction of the items, not of the "
        "groups",
    ),
    (
        base.generator_made_per_group,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test holds 0 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the groups",
    ),
    (
        base.smallest_groups_first,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: the group 'Go.' was never in the test set. Every "
        "group must have its chance: shuffle all the groups, not only some of them",
    ),
    (
        base.groups_in_the_order_of_shuffled_items,
        "on 36 pairs, 12 of them in one group, test_fraction=0.2, seeds 0 to 199: the group "
        '"I\'m sorry." (12 items) was in the test set in 190 of the 200 splits. It is one of '
        "25 groups, the others of one item: shuffled, the groups come in every order alike, "
        "and the test set (7 items) takes it only when it is among the first 7, in about 28% "
        "of the splits. Your order favours large groups (groups taken in the order they first "
        "appear after shuffling the items?). Shuffle the groups themselves, each once: groups "
        "= list(members.values()); rng.shuffle(groups)",
    ),
    (
        base.keys_normalised,
        "on 20 pairs grouped by the English exactly as written (lambda pair: pair[1]), "
        "test_fraction=0.5, seeds 0 to 59: the groups 'Go.' and 'go.', whose keys differ only "
        "in case or spaces (here case), were on the same side in all 60 splits: your code "
        "merges them (.lower(), .strip() or .split() on the keys?). A group is exactly what "
        "group(item) returns, unchanged: the caller's group function decides which items "
        "belong together (one that lowercases, as another case here does, merges them itself)",
    ),
    (
        base.returns_sets,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train is a set: a set keeps each item once (items can "
        "repeat: the same pair twice is two items) and in no order. Return two lists",
    ),
    (
        base.returns_filters,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train should be a list of items, got a filter. Return two "
        "lists (train, test)",
    ),
    (
        base.pair_by_pair,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0, the group 'Go.' is on both sides: ('Allez !', 'Go.') in "
        "train, ('Va !', 'Go.') in test. Over seeds 0 to 19, 6.6 groups are cut in two on "
        "average: the split looks drawn pair by pair, which puts translations of one sentence "
        "in both sets and leaks the answers into the test set. Collect the items of each group "
        "(key = group(item)), shuffle the groups with a generator seeded by seed (rng = "
        "random.Random(seed)), then move whole groups into test",
    ),
    (
        base.by_the_french_sentence,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0, the group 'Go.' is on both sides: ('Allez !', 'Go.') in "
        "train, ('Va !', 'Go.') in test. Your split keeps the items together by item[0] (the "
        "French one), not by their group: call group(item) to get an item's group (here group "
        "is lambda pair: pair[1]), never a field of the item",
    ),
    (
        base.by_item_1,
        "on 31 pairs grouped by the lowercased English with test_fraction=0.2, seed=1, the "
        "group 'go.' is on both sides: ('Va !', 'Go.') in train, ('Allez !', 'go.') in test. "
        "Your split keeps the items together by item[1] (the English sentence), not by their "
        "group: call group(item) to get an item's group (here group is lambda pair: "
        "pair[1].lower()), never a field of the item",
    ),
    (
        base.cuts_the_last_group,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.1, seed=42, the group 'Be quiet.' is on both sides: ('Taisez-vous !', "
        "'Be quiet.') in train, ('Tais-toi !', 'Be quiet.') in test. The test set holds "
        "exactly round(test_fraction * len(items)) = 4 items, and to get there the last group "
        "taken was cut in two. Move whole groups: keep adding groups while test holds fewer "
        "than 4 items; it may end up with a few more",
    ),
    (
        base.groupby_without_sorting,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.5, seed=7, the group 'Hi.' is on both sides: ('Salut !', 'Hi.') in "
        "train, ('Salut !', 'Hi.') in test. All the items of a group must land on the same "
        "side, wherever they are in items (itertools.groupby only groups neighbouring items). "
        "Collect the items of each group (key = group(item)), shuffle the groups with a "
        "generator seeded by seed (rng = random.Random(seed)), then move whole groups into "
        "test",
    ),
    (
        base.sorts_items_in_place,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: your code changed the caller's items (the same items, now "
        "in another order: shuffling or sorting items itself (rng.shuffle(items), "
        "items.sort(key=...)) reorders the caller's list in place). The caller's list must "
        "stay as it was: shuffle or sort a copy (list(items), sorted(items)), or shuffle the "
        "groups",
    ),
    (
        base.sorts_items_plainly_in_place,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: your code changed the caller's items (the same items, now "
        "sorted: items.sort() sorts the caller's list in place). The caller's list must stay "
        "as it was: shuffle or sort a copy (list(items), sorted(items)), or shuffle the groups",
    ),
    (
        base.shuffles_items_in_place,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: your code changed the caller's items (the same items, now "
        "in another order: shuffling or sorting items itself (rng.shuffle(items), "
        "items.sort(key=...)) reorders the caller's list in place). The caller's list must "
        "stay as it was: shuffle or sort a copy (list(items), sorted(items)), or shuffle the "
        "groups",
    ),
    (
        base.returns_indices,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train holds 0, which is not one of the items. Return the "
        "items themselves, unchanged",
    ),
    (
        base.returns_groups_nested,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: train holds [('Va !', 'Go.'), ('Allez !', 'Go.'), ('Bouge "
        "!', 'Go.')], which is not one of the items. Return the items themselves, unchanged",
    ),
    (
        base.samples_a_fraction_of_the_groups,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: test always holds 4 of the 20 groups, while its "
        "size goes from 5 to 12 items: test_fraction was taken as a fraction of the groups, as "
        "scikit-learn's GroupShuffleSplit(test_size=...) or train_test_split on the keys take "
        "it. Here it is a fraction of the items: add whole groups to test until it holds "
        "round(test_fraction * len(items)) = 9 items, give or take one group",
    ),
    (
        base.coin_per_group,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: test holds 0 of the 43 items; test should hold "
        "round(test_fraction * len(items)) = round(0.2 * 43) = 9 items, give or take one group "
        "(the largest here has 4): test_fraction is a fraction of the items, not of the groups",
    ),
    (
        base.fraction_of_groups_as_group_shuffle_split,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seeds 0 to 99: test always holds 4 of the 20 groups, while its "
        "size goes from 5 to 12 items: test_fraction was taken as a fraction of the groups, as "
        "scikit-learn's GroupShuffleSplit(test_size=...) or train_test_split on the keys take "
        "it. Here it is a fraction of the items: add whole groups to test until it holds "
        "round(test_fraction * len(items)) = 9 items, give or take one group",
    ),
    (
        base.fraction_of_groups_as_train_test_split,
        "on 31 pairs grouped by the lowercased English with test_fraction=0.5, seeds 0 to 99: "
        "test always holds 8 of the 15 groups, while its size goes from 14 to 20 items: "
        "test_fraction was taken as a fraction of the groups, as scikit-learn's "
        "GroupShuffleSplit(test_size=...) or train_test_split on the keys take it. Here it is "
        "a fraction of the items: add whole groups to test until it holds round(test_fraction "
        "* len(items)) = 16 items, give or take one group",
    ),
    (
        base.shuffled_by_a_seeded_hash,
        "on 43 (French, English) pairs grouped by Sentence(english), a key whose hash the "
        "checker changes, test_fraction=0.2, seed=3: two calls gave different splits (('Qui "
        "êtes-vous ?', 'Who are you?') was in one test set only) when only the hash values of "
        "the group keys changed. Your order of the groups follows the keys' hashes: a set of "
        "keys (set(...), {group(item) for item in items}) is iterated in hash order, and "
        "Python's string hashes change from one process to the next (PYTHONHASHSEED), so the "
        "same seed would give another test set tomorrow. Keep the groups in the order they "
        "first appear (a dict keeps insertion order) or sort the keys, then shuffle them with "
        "rng = random.Random(seed)",
    ),
    (
        base.only_test,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: should return the pair (train, test), two lists; got 9 "
        "things",
    ),
    (
        base.parameters_reordered,
        "your parameters come in the order (items, test_fraction, group, seed); the lesson's "
        "signature is grouped_split(items, group, test_fraction, seed), and the notebooks pass "
        "the arguments in that order",
    ),
    (
        mut.returns_a_dict,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: should return the pair (train, test), two lists; got a "
        "dict",
    ),
    (
        mut.returns_three_lists,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: should return the pair (train, test), two lists; got 3 "
        "things",
    ),
    (
        mut.pops_an_item,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: your code changed the caller's items (it now holds 42 "
        "items instead of 43 (pop, remove, append?)). The caller's list must stay as it was: "
        "shuffle or sort a copy (list(items), sorted(items)), or shuffle the groups",
    ),
    (
        mut.replaces_an_item,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: your code changed the caller's items (some of its items "
        "were replaced). The caller's list must stay as it was: shuffle or sort a copy "
        "(list(items), sorted(items)), or shuffle the groups",
    ),
    (
        mut.loses_the_first_item,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: the item ('Va !', 'Go.') is in neither train nor test: "
        "every item must be on one side",
    ),
    (
        mut.adds_a_test_item_to_train,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=0: the item ('Assieds-toi !', 'Sit down.') is 2 times in "
        "train + test (train and test) but 1 times in items: every item goes to exactly one "
        "side",
    ),
]


@pytest.mark.parametrize(
    "answer, said", SAID, ids=[f"{a.__name__}-{i}" for i, (a, _) in enumerate(SAID)]
)
def test_the_verdict_line_is_exactly_this(answer, said, verdict):
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False
    assert printed == f"❌ grouped_split: {said}\n", printed


RIGHT = [
    tatoeba.grouped_split,
    keys_as_strings,
    split_with_sorted_unique_keys,
    one_largest_group_short,  # round(test_fraction * n) - largest: still one group off
    one_largest_group_over,  # round(test_fraction * n) + largest
    largest_first_for_even_seeds,  # the group of 12 in test in 100 of 200 splits: half
]


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_a_right_answer_gets_the_passing_line(answer, verdict):
    assert verdict(check.grouped_split, answer) == (True, PASSED)


# ------------------------------------------- an answer that remembers earlier calls ----
# A memo on the wrong key breaks a later call: the verdict names that call.

MEMOS = [
    (
        caches_the_order_per_seed,
        "on inputs items=<31 pairs grouped by the lowercased English>, group=lambda pair: "
        "pair[1].lower(), test_fraction=0.2, seed=1 your code raised IndexError: list index "
        "out of range",
    ),
    (
        caches_the_size_per_fraction,
        "on 30 pairs, each English sentence once (one pair per group) with test_fraction=0.2, "
        "seed=11: test holds 9 of the 30 items; test should hold round(test_fraction * "
        "len(items)) = round(0.2 * 30) = 6 items, give or take one group (the largest here has "
        "1): test_fraction is a fraction of the items, not of the groups",
    ),
    (
        caches_the_split_per_seed,
        "on 30 pairs, each English sentence once (one pair per group) with test_fraction=0.1, "
        "seed=5: train holds ('Va !', 'Go.'), which is not one of the items. Return the items "
        "themselves, unchanged",
    ),
    (
        caches_the_split_per_fraction_and_seed,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=1: train holds ('Salut !', 'hi.'), which is not one of the "
        "items. Return the items themselves, unchanged",
    ),
    (
        caches_the_split_per_group_fraction_and_seed,
        "on 43 (French, English) pairs, grouped by the English sentence with "
        "test_fraction=0.2, seed=2: train holds (\"J'ai 2 chats.\", 'I have 2 cats.'), which "
        "is not one of the items. Return the items themselves, unchanged",
    ),
]


@pytest.mark.parametrize("make, said", MEMOS, ids=[m.__name__ for m, _ in MEMOS])
def test_the_call_a_memo_breaks_is_named(make, said, verdict):
    passed, printed = verdict(check.grouped_split, make())
    assert passed is False
    assert printed == f"❌ grouped_split: {said}\n", printed


# ------------------------------------------------ a crash at one test_fraction ----
# An answer with a bug of its own at one test_fraction on one case: the verdict names the
# first call that reaches it, with its seed.

CRASHES = [
    (36, 0.5, "pairs, 12 of them in one group", "lambda pair: pair[1]", 4),
    (36, 0.1, "pairs, 12 of them in one group", "lambda pair: pair[1]", 8),
    (31, 0.5, "pairs grouped by the lowercased English", "lambda pair: pair[1].lower()", 9),
    (31, 0.1, "pairs grouped by the lowercased English", "lambda pair: pair[1].lower()", 3),
    (24, 0.5, "Example records grouped by english_id", "lambda example: example.english_id", 12),
]


@pytest.mark.parametrize("size, fraction, what, group, seed", CRASHES)
def test_a_crash_names_the_call_it_happened_on(size, fraction, what, group, seed, verdict):
    def crashes_at_one_fraction(items, group, test_fraction, seed):
        if (len(items), test_fraction) == (size, fraction):
            raise RuntimeError("a bug of its own")
        return _right(items, group, test_fraction, seed)

    passed, printed = verdict(check.grouped_split, crashes_at_one_fraction)
    assert passed is False
    assert printed == (
        f"❌ grouped_split: on inputs items=<{size} {what}>, group={group}, "
        f"test_fraction={fraction}, seed={seed} your code raised RuntimeError: a bug of its own\n"
    ), printed


# ------------------------------------------- the global generators an answer moved ----
# The caller's global states are set apart from any seed the checker passes first.

SAID_GLOBAL = [
    (
        seeds_all_three,
        "the call with test_fraction=0.2, seed=0 changed the state of Python's global random "
        "generator (random.seed(seed), random.shuffle(...), random.sample(...) on the random "
        "module itself) and numpy's global generator (np.random.seed(seed), "
        "np.random.shuffle(...), np.random.permutation(...)) and torch's global generator "
        "(torch.manual_seed(seed), torch.randperm(n) without generator=). Seeding or drawing "
        "from a global generator resets or moves the caller's own randomness (the notebook's "
        "shuffles and initialisations): use a local generator, rng = random.Random(seed); "
        "rng.shuffle(groups)",
    ),
    (
        shuffles_large_groups_globally,
        "the call with test_fraction=0.2, seed=2 changed the state of Python's global random "
        "generator (random.seed(seed), random.shuffle(...), random.sample(...) on the random "
        "module itself). Seeding or drawing from a global generator resets or moves the "
        "caller's own randomness (the notebook's shuffles and initialisations): use a local "
        "generator, rng = random.Random(seed); rng.shuffle(groups)",
    ),
    (
        base.global_seed_and_shuffle,
        "the call with test_fraction=0.2, seed=0 changed the state of Python's global random "
        "generator (random.seed(seed), random.shuffle(...), random.sample(...) on the random "
        "module itself). Seeding or drawing from a global generator resets or moves the "
        "caller's own randomness (the notebook's shuffles and initialisations): use a local "
        "generator, rng = random.Random(seed); rng.shuffle(groups)",
    ),
    (
        base.torch_manual_seed,
        "the call with test_fraction=0.2, seed=0 changed the state of torch's global generator "
        "(torch.manual_seed(seed), torch.randperm(n) without generator=). Seeding or drawing "
        "from a global generator resets or moves the caller's own randomness (the notebook's "
        "shuffles and initialisations): use a local generator, rng = random.Random(seed); "
        "rng.shuffle(groups)",
    ),
    (
        base.numpy_global_seed,
        "the call with test_fraction=0.2, seed=0 changed the state of numpy's global generator "
        "(np.random.seed(seed), np.random.shuffle(...), np.random.permutation(...)). Seeding "
        "or drawing from a global generator resets or moves the caller's own randomness (the "
        "notebook's shuffles and initialisations): use a local generator, rng = "
        "random.Random(seed); rng.shuffle(groups)",
    ),
    (
        mut.seeds_everything,
        "the call with test_fraction=0.2, seed=0 changed the state of Python's global random "
        "generator (random.seed(seed), random.shuffle(...), random.sample(...) on the random "
        "module itself) and numpy's global generator (np.random.seed(seed), "
        "np.random.shuffle(...), np.random.permutation(...)). Seeding or drawing from a global "
        "generator resets or moves the caller's own randomness (the notebook's shuffles and "
        "initialisations): use a local generator, rng = random.Random(seed); "
        "rng.shuffle(groups)",
    ),
]


@pytest.mark.parametrize("answer, said", SAID_GLOBAL, ids=[a.__name__ for a, _ in SAID_GLOBAL])
def test_the_global_generators_moved_are_named(answer, said, verdict):
    random.seed(987_654_321)
    np.random.seed(987_654)
    torch.manual_seed(98_765)
    passed, printed = verdict(check.grouped_split, answer)
    assert passed is False
    assert printed == f"❌ grouped_split: {said}\n", printed


# ------------------------------------ the item named is in one of the two test sets only ----


def _named_item(printed):
    return ast.literal_eval(re.search(r"\((\(.*?\)) was in one test set only\)", printed)[1])


@pytest.mark.parametrize(
    "global_seed, said",
    [
        (
            0,
            "on 43 (French, English) pairs, grouped by the English sentence with "
            "test_fraction=0.2, seed=3: two calls with seed=3 gave different splits "
            "(('Attention !', 'Look out!') was in one test set only): your code draws from the "
            "global random state or an unseeded generator (random.shuffle, random.Random(), "
            "np.random.permutation, torch.randperm without generator=). Draw from a generator "
            "seeded by seed, rng = random.Random(seed), so that the same seed gives the same "
            "split",
        ),
        (
            3,
            "on 43 (French, English) pairs, grouped by the English sentence with "
            "test_fraction=0.2, seed=3: two calls with seed=3 gave different splits "
            "(('Attention !', 'Look out!') was in one test set only): your code draws from the "
            "global random state or an unseeded generator (random.shuffle, random.Random(), "
            "np.random.permutation, torch.randperm without generator=). Draw from a generator "
            "seeded by seed, rng = random.Random(seed), so that the same seed gives the same "
            "split",
        ),
    ],
)
def test_two_calls_with_one_seed_name_an_item_of_one_test_set(global_seed, said, verdict):
    # The coin is tossed on the global generator: with global_seed=3 the first call's test
    # set lies inside the second's, with 0 the second's inside the first's.
    calls = []
    random.seed(global_seed)
    passed, printed = verdict(check.grouped_split, recording(rounds_at_random, calls))
    assert passed is False
    assert printed == f"❌ grouped_split: {said}\n", printed
    first, second = [test for n, fraction, seed, _, test in calls if (n, seed) == (43, 3)][:2]
    assert (_named_item(printed) in first) != (_named_item(printed) in second)


HASHED = [
    (
        a_seeded_coin_from_the_hash,
        "on 43 (French, English) pairs grouped by Sentence(english), a key whose hash the "
        "checker changes, test_fraction=0.2, seed=3: two calls gave different splits "
        "(('Attention !', 'Look out!') was in one test set only) when only the hash values of "
        "the group keys changed. Your order of the groups follows the keys' hashes: a set of "
        "keys (set(...), {group(item) for item in items}) is iterated in hash order, and "
        "Python's string hashes change from one process to the next (PYTHONHASHSEED), so the "
        "same seed would give another test set tomorrow. Keep the groups in the order they "
        "first appear (a dict keeps insertion order) or sort the keys, then shuffle them with "
        "rng = random.Random(seed)",
    ),
    (
        base.keys_through_a_set,
        "on 43 (French, English) pairs grouped by Sentence(english), a key whose hash the "
        "checker changes, test_fraction=0.2, seed=3: two calls gave different splits (('Salut "
        "!', 'Hi.') was in one test set only) when only the hash values of the group keys "
        "changed. Your order of the groups follows the keys' hashes: a set of keys (set(...), "
        "{group(item) for item in items}) is iterated in hash order, and Python's string "
        "hashes change from one process to the next (PYTHONHASHSEED), so the same seed would "
        "give another test set tomorrow. Keep the groups in the order they first appear (a "
        "dict keeps insertion order) or sort the keys, then shuffle them with rng = "
        "random.Random(seed)",
    ),
]


@pytest.mark.parametrize("answer, said", HASHED, ids=[a.__name__ for a, _ in HASHED])
def test_hashes_changed_name_an_item_of_one_test_set(answer, said, verdict):
    # a_seeded_coin_from_the_hash: the same groups in the same order under both hashes,
    # one more of them taken under the second: the first test set lies inside the second.
    calls = []
    passed, printed = verdict(check.grouped_split, recording(answer, calls))
    assert passed is False
    assert printed == f"❌ grouped_split: {said}\n", printed
    first, second = [test for *_, key, test in calls if key == "Sentence"][:2]
    assert (_named_item(printed) in first) != (_named_item(printed) in second)
