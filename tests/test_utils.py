"""course.utils: seeding, the difference report the notebooks print, timing."""

import sys

import pytest
import torch

from course import utils
from course.utils import describe, device, error_name, gap, is_token_ids, seed_everything


def test_seed_everything_repeats_the_same_numbers():
    seed_everything(3)
    first = torch.randn(4)
    seed_everything(3)
    assert torch.equal(torch.randn(4), first)


def test_gap_reads_the_same_whatever_the_rounding_noise():
    a = torch.ones(3)
    assert gap(a, a) == "< 1e-6"
    assert gap(a, a + 3e-7) == "< 1e-6"
    assert gap(a, a + torch.tensor([0.0, 2e-3, 0.0])) == "2e-03"


def test_device_is_a_torch_device():
    assert isinstance(device(), torch.device)


def test_best_seconds_calls_once_to_warm_up_then_repeats_and_keeps_the_fastest():
    calls = []
    seconds = utils.best_seconds(lambda x: calls.append(x), 7, repeats=3)
    assert calls == [7, 7, 7, 7]
    assert 0 <= seconds < 0.1


def test_best_seconds_needs_a_repeat():
    with pytest.raises(ValueError, match="repeats must be at least 1, got 0"):
        utils.best_seconds(print, repeats=0)


def test_describe_says_what_came():
    assert describe(torch.zeros(2, 3, dtype=torch.int32)) == "a torch.int32 tensor of shape (2, 3)"
    assert describe([1, 2]) == "list [1, 2]"


def test_token_ids_are_2d_integer_tensors():
    assert is_token_ids(torch.zeros(2, 3, dtype=torch.long))
    assert is_token_ids(torch.zeros(2, 3, dtype=torch.uint8))
    for not_ids in (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool),
                    torch.zeros(2, 3, dtype=torch.complex64), torch.zeros(3, dtype=torch.long),
                    [[1, 2]]):  # fmt: skip
        assert not is_token_ids(not_ids)


class _PrivateSyntaxError(SyntaxError):
    """Like Python 3.13's _IncompleteInputError: a private class under a public error."""


class _EvenMorePrivate(_PrivateSyntaxError):
    pass


def test_error_name_is_the_first_public_class_up_the_mro():
    assert error_name(KeyError("k")) == error_name(KeyError) == "KeyError"
    assert error_name(_PrivateSyntaxError("incomplete input")) == "SyntaxError"
    assert error_name(_EvenMorePrivate) == "SyntaxError"
    # a name as a kernel reports it: public as it is, private looked up among the builtins
    assert error_name("NameError") == "NameError"
    assert error_name("_NotABuiltin") == "_NotABuiltin"  # nothing to go up: said as it came
    assert error_name("_IncompleteInputError") == (
        "SyntaxError" if sys.version_info >= (3, 13) else "_IncompleteInputError"
    )


def test_error_name_of_the_private_errors_python_and_numpy_really_raise():
    import numpy as np

    with pytest.raises(TypeError) as caught:
        np.add(np.array(["a"]), 1)  # numpy raises its private _UFuncNoLoopError
    assert error_name(caught.value) == "UFuncTypeError"
    if sys.version_info >= (3, 13):  # codeop's flag: an unfinished input is its own class
        with pytest.raises(SyntaxError) as caught:
            compile("x = (1,", "cell", "exec", flags=0x4000)  # PyCF_ALLOW_INCOMPLETE_INPUT
        assert type(caught.value).__name__ == "_IncompleteInputError"
        assert error_name(caught.value) == "SyntaxError"
