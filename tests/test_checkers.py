"""What every checker promises, whatever its exercise (DESIGN.md, "Exercises and checkers").

- the course's own reference answer passes, with one "✅ name: passed" line;
- a stub (`raise NotImplementedError`) gets "⏳ not implemented yet", never a ❌;
- a checker never raises, prints exactly one verdict line and returns a bool, even on
  answers that return nonsense, crash, or take the wrong arguments;
- handing over a result instead of the function or class is explained;
- checking leaves the notebook's global random state exactly as it was.

Each lesson's own test file (tests/test_check_*.py) shows its checker's diagnoses.
"""

import pytest
import torch

from course import attention, check, multihead, rnn
from course.check import EXERCISES

# The course's answer to each exercise: what a learner's correct answer must match.
REFERENCES = {
    "rnn_forward": rnn.rnn_forward,
    "dot_product_attention": attention.dot_product_attention,
    "scaled_dot_product_attention": attention.scaled_dot_product_attention,
    "split_heads": multihead.split_heads,
    "merge_heads": multihead.merge_heads,
    "MultiHeadAttention": multihead.MultiHeadAttention,
}
NAMES = list(EXERCISES)


def test_every_exercise_is_registered_under_its_name_and_has_a_reference():
    assert set(NAMES) == set(REFERENCES)
    for name in NAMES:
        assert getattr(check, name) is EXERCISES[name]
        assert name in check.__all__


def test_exercises_are_registered_in_lesson_order():
    assert NAMES == list(REFERENCES)


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_passes(name, verdict):
    passed, printed = verdict(EXERCISES[name], REFERENCES[name])
    assert passed is True and printed.startswith(f"✅ {name}: passed"), printed


def stub(*args, **kwargs):
    # YOUR CODE HERE
    raise NotImplementedError


@pytest.mark.parametrize("name", NAMES)
def test_a_stub_is_not_implemented_yet(name, verdict):
    passed, printed = verdict(EXERCISES[name], stub)
    assert passed is False and printed.startswith(f"⏳ {name}: not implemented yet"), printed


ABSURD = {
    "returns None": lambda *a, **k: None,
    "returns a pair of Nones": lambda *a, **k: (None, None),
    "returns a string": lambda *a, **k: "attention",
    "returns a huge tuple": lambda *a, **k: tuple(range(100)),
    "divides by zero": lambda *a, **k: 1 / 0,
    "takes no arguments": lambda: 0,
    "raises a KeyError": lambda *a, **k: {}["x"],
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("what", ABSURD)
def test_a_checker_never_raises(name, what, verdict):
    passed, printed = verdict(EXERCISES[name], ABSURD[what])
    assert passed is False and printed.startswith(f"❌ {name}: "), printed


@pytest.mark.parametrize("name", NAMES)
def test_a_result_instead_of_the_answer_is_explained(name, verdict):
    passed, printed = verdict(EXERCISES[name], torch.zeros(2, 3))
    assert passed is False and f"check.{name}({name})" in printed, printed


@pytest.mark.parametrize("name", NAMES)
def test_checking_leaves_the_global_random_state_alone(name, verdict):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    verdict(EXERCISES[name], REFERENCES[name])
    assert torch.equal(torch.rand(3), expected)
