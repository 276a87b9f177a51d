"""The machinery behind every checker.

A checker is a function decorated with `@exercise("name")`. Its body calls the
learner's code through `call(...)`, compares what came back with `expect_*` helpers,
and raises `Mistake("what is wrong, in plain words")` at the first problem. The
decorator turns that into exactly one printed verdict and a True / False result:

    ✅ passed   ⏳ not implemented yet   ❌ the specific mistake found

A checker never raises: the learner's unfinished or broken code must not stop the
notebook. Inputs come from a private, seeded generator, so verdicts are reproducible
and the notebook's own random state is left alone.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable

import torch

EXERCISES: dict[str, Callable[..., bool]] = {}
"""Every exercise name -> its checker, in lesson order."""


class Mistake(Exception):
    """A diagnosis for the learner: what is wrong and, where we can tell, why."""


class NotImplementedYet(Exception):
    """The learner's code still raises NotImplementedError (the stub)."""


def exercise(name: str) -> Callable[[Callable[..., str]], Callable[..., bool]]:
    """Register a checker body under `name` and wrap it into a never-raising checker.

    The body takes the candidate and returns a short summary of what it checked
    (shown after "passed"); it reports problems by raising Mistake.
    """

    def decorate(body: Callable[..., str]) -> Callable[..., bool]:
        @functools.wraps(body)
        def checker(candidate) -> bool:
            try:
                if not callable(candidate):
                    raise Mistake(
                        f"expected your function or class itself, got an object of type "
                        f"{type(candidate).__name__}: "
                        f"write check.{name}({name}), without calling it first"
                    )
                summary = body(candidate)
            except NotImplementedYet:
                print(
                    f"⏳ {name}: not implemented yet. Replace `raise NotImplementedError` "
                    "with your code, run that cell, then this one again."
                )
                return False
            except Mistake as mistake:
                print(f"❌ {name}: {mistake}")
                return False
            except Exception as error:  # a bug in the checker itself: still never raise
                where = traceback.extract_tb(error.__traceback__)[-1]
                print(
                    f"❌ {name}: the checker stopped on an unexpected {type(error).__name__}: "
                    f"{error} ({where.filename}:{where.lineno}). Please report this."
                )
                return False
            print(f"✅ {name}: passed ({summary}).")
            return True

        EXERCISES[name] = checker
        return checker

    return decorate


# ---------------------------------------------------------------- inputs ----------


def generator(seed: int) -> torch.Generator:
    """A private random stream, so checking never disturbs the notebook's own seed."""
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def describe(**tensors) -> str:
    """'q (2, 3, 4), k (2, 5, 4)': how the inputs looked, for error messages."""
    parts = []
    for name, t in tensors.items():
        parts.append(f"{name} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else f"{name}={t!r}")
    return ", ".join(parts)


# ----------------------------------------------------------- calling ----------


def call(
    candidate, *args, names: tuple[str, ...] = (), hints: dict[str, str] | None = None, **kwargs
):
    """Run the learner's code on copies of the inputs and translate what goes wrong.

    - NotImplementedError -> NotImplementedYet (a stub: "not implemented yet");
    - any other exception -> Mistake naming the inputs and the error, plus a hint
      when the error message contains one of `hints`' keys (`names` names the
      positional inputs in that message);
    - an input tensor changed in place -> Mistake.
    """
    originals = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    copies = [a.clone() for a in originals]
    named = {(names[i] if i < len(names) else f"arg{i}"): a for i, a in enumerate(args)} | kwargs
    try:
        result = candidate(*args, **kwargs)
    except NotImplementedError:
        raise NotImplementedYet() from None
    except Exception as error:
        message = f"on inputs {describe(**named)} your code raised {type(error).__name__}: {error}"
        for fragment, hint in (hints or {}).items():
            if fragment in str(error):
                message += f". {hint}"
                break
        raise Mistake(message) from None
    for original, copy in zip(originals, copies, strict=True):
        if original.shape != copy.shape or not torch.equal(original, copy):
            raise Mistake(
                "your code changed one of its input tensors in place; "
                "compute new tensors instead (e.g. x = x * 2, not x *= 2)"
            )
    return result


def expect_tuple(result, names: tuple[str, ...]) -> tuple:
    """The result must be a tuple (or list) with one item per name."""
    wanted = "(" + ", ".join(names) + ")"
    if not isinstance(result, tuple | list):
        got = (
            f"a tensor of shape {tuple(result.shape)}"
            if isinstance(result, torch.Tensor)
            else f"a {type(result).__name__}"
        )
        raise Mistake(f"should return the tuple {wanted}, got {got}")
    if len(result) != len(names):
        raise Mistake(f"should return {len(names)} things {wanted}, got {len(result)}")
    return tuple(result)


def expect_tensor(value, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise Mistake(f"{what} should be a torch.Tensor, got a {type(value).__name__}")
    return value


def expect_shape(value, shape, what: str, hint: str = "") -> torch.Tensor:
    value = expect_tensor(value, what)
    if tuple(value.shape) != tuple(shape):
        raise Mistake(
            f"{what} has shape {tuple(value.shape)}, expected {tuple(shape)}"
            + (f". {hint}" if hint else "")
        )
    return value


def close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Same shape and numerically equal (NaN never equals anything)."""
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol))


def matches(
    got: torch.Tensor, mistaken: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4
) -> bool:
    """`got` is what a mistake gives, wherever that mistake's answer is defined.

    A mistaken answer may hold NaN where the mistake leaves a value undefined (a
    softmax over an empty set of keys, say): a learner's code may give NaN, zeros or
    anything else there, so those entries do not count.
    """
    if got.shape != mistaken.shape:
        return False
    defined = ~torch.isnan(mistaken)
    if not defined.any():
        return False
    a, b = got.double()[defined], mistaken.double()[defined]
    return bool(torch.allclose(a, b, atol=atol, rtol=rtol))


def expect_close(
    got: torch.Tensor,
    want: torch.Tensor,
    what: str,
    wrong: dict[str, torch.Tensor] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """`got` must equal `want`; if not, name the mistake.

    `wrong` maps a diagnosis to the answer that mistake would produce ("softmax over
    dim=-2" -> that tensor; NaN where that answer is undefined, see `matches`). When
    `got` matches one of them, the diagnosis is the message; otherwise the message
    says where and by how much `got` is off.
    """
    got = expect_shape(got, want.shape, what)
    if close(got, want, atol, rtol):
        return
    diagnosis = next((d for d, alt in (wrong or {}).items() if matches(got, alt, atol, rtol)), "")
    if not torch.isfinite(got).all():
        bad = int((~torch.isfinite(got)).sum())
        raise Mistake(
            f"{what} contains {bad} NaN/inf value(s)" + (f": {diagnosis}" if diagnosis else "")
        )
    if diagnosis:
        raise Mistake(diagnosis)
    diff = (got.double() - want.double()).abs()
    index = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    raise Mistake(
        f"{what} is not right: at index {index} you have {float(got[index]):.4g}, "
        f"expected {float(want[index]):.4g} (largest difference {float(diff.max()):.3g})"
    )


def softmax_rows_ok(weights: torch.Tensor) -> bool:
    """Every row is a probability distribution over the last axis."""
    return bool((weights >= -1e-6).all()) and bool(
        torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-4)
    )
