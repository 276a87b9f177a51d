"""The machinery behind every checker.

A checker is a function decorated with `@exercise("name")`. Its body calls the
learner's code through `call(...)`, compares what came back with `expect_*` helpers,
and raises `Mistake("what is wrong, in plain words")` at the first problem. The
decorator turns that into exactly one printed verdict and a `Verdict`, which is true or
false (`ok = check.x(x)`, `if ok:`, `assert check.x(x)`, `ok == True`) but shows nothing
as a cell's last expression, so the learner sees the verdict line alone:

    ✅ passed   ⏳ not implemented yet   ❌ the specific mistake found

A checker never raises: the learner's unfinished or broken code must not stop the
notebook. Inputs come from a private, seeded generator, so verdicts are reproducible
and the notebook's own random state is left alone.

What every checker judges, with the helpers below:
- forward values (`expect_close`, which also requires the input's dtype to be kept);
- backward: `expect_gradients` backpropagates a fixed random projection of the outputs
  and compares the gradient with respect to every input and parameter with the
  reference's; they must be there (no `.detach()`, no `torch.no_grad()`) and finite;
- robust inputs: batch size 1, float64, `noncontiguous(...)` tensors, and calls made
  positionally, exactly as the lesson's signature states (`expect_signature`);
- randomness where it belongs: `expect_dropout` (elementwise, at the rate asked, rescaled,
  different on every call).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from course.utils import error_name, use_threads


class Verdict(int):
    """What a checker returns: 1 (passed) or 0, so it is true or false, equals True or
    False, and sums as a count; it is not the object True itself (`is True` is false:
    write `bool(ok)`, `ok == True` or `if ok:`).

    As a notebook cell's last expression it shows nothing: the checker has printed its
    one verdict line already, and a `True` under it would say the same again. Elsewhere
    (print, repr, f-strings, a plain Python prompt) it reads True or False, as a bool does.
    """

    def __new__(cls, passed: bool) -> Verdict:
        return super().__new__(cls, bool(passed))

    def __repr__(self) -> str:
        return "True" if self else "False"

    __str__ = __repr__

    def _ipython_display_(self) -> None:
        """IPython calls this instead of showing the value: show nothing."""


PASSED, FAILED = Verdict(True), Verdict(False)

EXERCISES: dict[str, Callable[..., Verdict]] = {}
"""Every exercise name -> its checker, in lesson order."""


class Mistake(Exception):
    """A diagnosis for the learner: what is wrong and, where we can tell, why."""


class NotImplementedYet(Exception):
    """The learner's code still raises NotImplementedError (the stub).

    `culprit` names another function of the learner's that the answer calls and that is
    still a stub (MultiHeadAttention written, split_heads not yet), or is None.
    """

    def __init__(self, culprit: str | None = None):
        super().__init__(culprit)
        self.culprit = culprit


# Every checker runs on one CPU thread, whatever the notebook's count, which it restores.
# A checker's tensors are tiny: splitting them between threads costs more than it saves,
# and on a busy 2-core machine about ten times more (measured: 0.25 s against 2.9 s for
# the DecoderLayer checker on the reference).
def exercise(name: str) -> Callable[[Callable[..., str]], Callable[..., Verdict]]:
    """Register a checker body under `name` and wrap it into a never-raising checker.

    The body takes the candidate and returns a short summary of what it checked
    (shown after "passed"); it reports problems by raising Mistake.
    """

    def decorate(body: Callable[..., str]) -> Callable[..., Verdict]:
        @functools.wraps(body)
        def checker(candidate) -> Verdict:
            try:
                if not callable(candidate):
                    raise Mistake(
                        f"expected your function or class itself, got an object of type "
                        f"{type(candidate).__name__}: "
                        f"write check.{name}({name}), without calling it first"
                    )
                with use_threads(1):  # one thread: see the comment above
                    summary = body(candidate)
            except NotImplementedYet as stub:
                if stub.culprit:
                    print(
                        f"⏳ {name}: your code calls {stub.culprit}, which is not implemented "
                        f"yet (it still raises NotImplementedError). Finish {stub.culprit} "
                        "first, run its cell, then this one again."
                    )
                else:
                    print(
                        f"⏳ {name}: not implemented yet. Replace `raise NotImplementedError` "
                        "with your code, run that cell, then this one again."
                    )
                return FAILED
            except Mistake as mistake:
                print(f"❌ {name}: {one_line(str(mistake))}")
                return FAILED
            except Exception as error:  # a bug in the checker itself: still never raise
                where = traceback.extract_tb(error.__traceback__)[-1]
                print(
                    f"❌ {name}: the checker stopped on an unexpected {error_name(error)}: "
                    f"{one_line(str(error))} ({where.filename}:{where.lineno}). Please report "
                    "this."
                )
                return FAILED
            print(f"✅ {name}: passed ({summary}).")
            return PASSED

        EXERCISES[name] = checker
        return checker

    return decorate


# ---------------------------------------------------------------- inputs ----------


def generator(seed: int) -> torch.Generator:
    """A private random stream, so checking never disturbs the notebook's own seed."""
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=dtype)


def noncontiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values stored in reverse axis order (column-major), as a transposed tensor
    is: not contiguous, so `.view` that merges axes fails on it where `.reshape` works."""
    if t.dim() < 2:
        return torch.stack([t, torch.zeros_like(t)], dim=-1)[..., 0]  # a gap after each entry
    reverse = tuple(range(t.dim() - 1, -1, -1))
    return t.permute(reverse).contiguous().permute(reverse)


def describe(**tensors) -> str:
    """'q (2, 3, 4), k (2, 5, 4)': how the inputs looked, for error messages."""
    parts = []
    for name, t in tensors.items():
        parts.append(f"{name} {tuple(t.shape)}" if isinstance(t, torch.Tensor) else f"{name}={t!r}")
    return ", ".join(parts)


# ----------------------------------------------------------- calling ----------


# Hints every checker gives for errors any answer can run into.
COMMON_HINTS = {
    "Boolean value of Tensor with more than one value is ambiguous": "A tensor was used as a "
    "truth value (`if mask:`, `h0 or ...`): test for None explicitly, `if mask is not None:`, "
    "`h0 if h0 is not None else ...`",
    "same dtype": "Your code mixes float32 and float64: create new tensors in the inputs' dtype "
    "(x.new_zeros(...), torch.zeros(..., dtype=x.dtype)) and don't call .float() or .double()",
    "expected scalar type": "Your code mixes float32 and float64: create new tensors in the "
    "inputs' dtype (x.new_zeros(...), torch.zeros(..., dtype=x.dtype)) and don't call "
    ".float() or .double()",
    "view size is not compatible": "The tensor is not contiguous in memory (a transpose or a "
    "slice made it so): use .reshape(...) instead of .view(...), or .contiguous().view(...)",
    "modified by an inplace operation": "An in-place operation (x += ..., x[...] = ..., "
    "h.copy_(...)) overwrote a tensor that autograd still needed for the backward pass: "
    "compute a new tensor instead (h = torch.tanh(...))",
}

Hints = dict[str, str] | Callable[[str], str | None] | None


def one_line(text: str) -> str:
    """A verdict is one line: an error's text can span several (torch prints a tensor in
    its message row by row), so each line break, with the indentation around it, becomes
    one space. Other spaces stay as they are (the data a message quotes may hold two)."""
    return re.sub(r"[ \t]*[\r\n]+\s*", " ", text.strip("\r\n"))


def then(text: str, hint: str) -> str:
    """`text`, then `hint` as a sentence of its own: one full stop between them, whether or
    not `text` (often torch's own words) ends with one already."""
    if not hint:
        return text
    return text.rstrip().rstrip(".") + ". " + hint


def _hint(error: Exception, hints: Hints) -> str:
    """The hint for this error: the checker's own first, then the common ones."""
    text = str(error)
    if callable(hints):
        found = hints(text)
        if found:
            return found
        hints = None
    for table in (hints or {}, COMMON_HINTS):
        for fragment, hint in table.items():
            if fragment in text:
                return hint
    return ""


def _own_code(candidate) -> set:
    """The code objects of the candidate itself: the function, or its class's methods.

    A decorated function (@torch.no_grad(), functools.wraps) counts as the function it wraps.
    """
    candidate = getattr(candidate, "__func__", candidate)  # a bound method: its function
    if inspect.isfunction(candidate):
        candidate = inspect.unwrap(candidate)  # @torch.no_grad() def f: f itself, not the wrapper
    if not (inspect.isclass(candidate) or inspect.isfunction(candidate)):
        candidate = type(candidate)  # a module instance: its class
    if inspect.isclass(candidate):
        return {
            f.__code__
            for cls in candidate.__mro__
            if not cls.__module__.startswith(("torch", "builtins"))
            for f in vars(cls).values()
            if inspect.isfunction(f)
        }
    return {candidate.__code__} if hasattr(candidate, "__code__") else set()


def _stub_culprit(error: NotImplementedError, candidate) -> str | None:
    """Which function raised: None for the candidate itself, else the stub it called.

    A stub is a `raise NotImplementedError` line. Anything else that raises it is PyTorch
    saying an operation has no implementation for these inputs: a Mistake, not a stub.
    """
    frames = traceback.extract_tb(error.__traceback__)
    raised = error.__traceback__
    while raised.tb_next is not None:
        raised = raised.tb_next
    code = raised.tb_frame.f_code
    in_torch = Path(torch.__file__).parent in Path(code.co_filename).parents
    a_stub = (frames[-1].line or "").startswith("raise NotImplementedError") or not str(error)
    if in_torch or not a_stub:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "(no message)"
        raise Mistake(f"PyTorch raised NotImplementedError inside your code: {first_line}")
    if code in _own_code(candidate):
        return None
    return code.co_name


def call(candidate, *args, names: tuple[str, ...] = (), hints: Hints = None, **kwargs):
    """Run the learner's code on copies of the inputs and translate what goes wrong.

    - NotImplementedError -> NotImplementedYet (a stub: "not implemented yet"), naming
      the stub when it is another function the answer calls;
    - any other exception -> Mistake naming the inputs and the error, plus a hint: the
      first of `hints` whose key is in the error message (or `hints(message)` when it
      is a function), else one of COMMON_HINTS; `names` names the positional inputs;
    - an input tensor changed in place -> Mistake.
    """
    originals = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    copies = [a.detach().clone() for a in originals]
    named = {(names[i] if i < len(names) else f"arg{i}"): a for i, a in enumerate(args)} | kwargs
    try:
        result = candidate(*args, **kwargs)
    except NotImplementedError as error:
        raise NotImplementedYet(_stub_culprit(error, candidate)) from None
    except Exception as error:
        message = f"on inputs {describe(**named)} your code raised {error_name(error)}: {error}"
        hint = _hint(error, hints)
        raise Mistake(then(message, hint)) from None
    for original, copy in zip(originals, copies, strict=True):
        if original.shape != copy.shape or not torch.equal(original.detach(), copy):
            raise Mistake(
                "your code changed one of its input tensors in place; "
                "compute new tensors instead (e.g. x = x * 2, not x *= 2)"
            )
    return result


def squeeze_hint(candidate, units: dict[str, int]) -> str:
    """When the answer calls .squeeze() with no axis and one of the inputs' sizes `units`
    names is 1 ({"B": 1, "T": 5}): the hint that squeeze removed that axis too; else ""."""
    ones = [name for name, size in units.items() if size == 1]
    if not ones:
        return ""
    try:
        source = inspect.getsource(inspect.unwrap(candidate))
    except (OSError, TypeError):
        return ""
    if ".squeeze()" not in source:
        return ""
    here = " and ".join(f"{name} = 1" for name in ones)
    return (
        f"Your code calls .squeeze(), which removes every axis of size 1, and here {here}: "
        f"{'that axis goes' if len(ones) == 1 else 'those axes go'} too. Squeeze only an axis "
        "you name (.squeeze(1)), or not at all"
    )


def squeezed_from(got, want: torch.Tensor) -> bool:
    """`got` holds `want`'s entries with some of its size-1 axes removed (a .squeeze())."""
    if not isinstance(got, torch.Tensor) or got.dim() >= want.dim() or got.numel() != want.numel():
        return False
    matched = 0  # got's shape must be want's with some 1s left out
    for n in want.shape:
        if matched < got.dim() and got.shape[matched] == n:
            matched += 1
        elif n != 1:
            return False
    if matched != got.dim():
        return False
    return torch.equal(got.detach().reshape(want.shape).to(want.dtype), want)


def expect_signature(function, expected: Sequence[str], shown: str) -> None:
    """`function` takes the lesson's parameters in the lesson's order: the notebooks call
    it positionally. Other names are fine (`query` for `q`); the same names in another
    order are reported, with the lesson's signature `shown`."""
    try:
        params = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
        ]
    except (TypeError, ValueError):  # a builtin or a callable without a readable signature
        return
    if set(expected) <= set(params) and [p for p in params if p in expected] != list(expected):
        raise Mistake(
            f"your parameters come in the order ({', '.join(params)}); the lesson's signature "
            f"is {shown}, and the notebooks pass the arguments in that order"
        )


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


def expect_dtype(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    """The answer keeps the inputs' dtype: float64 in, float64 out."""
    if got.dtype != want.dtype:
        raise Mistake(
            f"{what} is {str(got.dtype).removeprefix('torch.')}, but the inputs were "
            f"{str(want.dtype).removeprefix('torch.')}: keep the inputs' dtype (make new "
            "tensors with x.new_zeros(...) or dtype=x.dtype; no .float() or .double())"
        )


def expect_close(
    got: torch.Tensor,
    want: torch.Tensor,
    what: str,
    wrong: dict[str, torch.Tensor] | Callable[[], dict[str, torch.Tensor]] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    explain: Callable[[torch.Tensor], str | None] | None = None,
) -> None:
    """`got` must equal `want`, in `want`'s dtype; if not, name the mistake.

    `wrong` maps a diagnosis to the answer that mistake would produce ("softmax over
    dim=-2" -> that tensor; NaN where that answer is undefined, see `matches`). When
    `got` matches one of them, the diagnosis is the message; else `explain(got)` may
    name it (a mistake with a parameter, such as the divisor used); otherwise the
    message says where and by how much `got` is off. `wrong` may be a function that
    returns that dict: it is then computed only when `got` is wrong.
    """
    got = expect_shape(got, want.shape, what)
    expect_dtype(got, want, what)
    got = got.detach()
    if close(got, want, atol, rtol):
        return
    if callable(wrong):
        wrong = wrong()
    diagnosis = next((d for d, alt in (wrong or {}).items() if matches(got, alt, atol, rtol)), "")
    if not diagnosis and explain is not None and torch.isfinite(got).all():
        diagnosis = explain(got) or ""
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


# ---------------------------------------------------------- backward ----------


def _tensors(result) -> list[torch.Tensor]:
    """The output tensors of a forward: one tensor, or a tuple / list of them."""
    items = list(result) if isinstance(result, tuple | list) else [result]
    return [expect_tensor(item, "every output") for item in items]


def _backward(run, inputs: Sequence[torch.Tensor], parameters: Sequence[torch.Tensor]):
    """Run `run` on leaf copies of `inputs`, backpropagate a fixed random projection of
    its outputs; returns (outputs, gradients of inputs + parameters, None where none).

    The projection (one seeded standard-normal tensor per output) makes every output
    entry count with its own weight, so a gradient that is wrong anywhere shows.
    """
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    outputs = _tensors(run(*leaves))
    gen = generator(99)
    loss = 0
    for out in outputs:
        # no grad_fn: detached, or a view made under torch.no_grad() (which keeps
        # requires_grad but is cut from the graph all the same)
        if not out.requires_grad or (out.grad_fn is None and all(out is not t for t in leaves)):
            return outputs, None
        projection = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.dtype)
        loss = loss + (out * projection).sum()
    wrt = [*leaves, *parameters]
    try:
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    except RuntimeError as error:
        hint = _hint(error, None)
        raise Mistake(then(f"the backward pass through your code failed: {error}", hint)) from None
    return outputs, list(grads)


def expect_gradients(
    run: Callable[..., object],
    reference: Callable[..., object],
    inputs: dict[str, torch.Tensor],
    what: str,
    parameters: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    wrong: dict[str, Callable[..., object]] | None = None,
    nonfinite_hint: str = "",
    atol: float = 1e-4,
    rtol: float = 1e-3,
) -> None:
    """The gradients of the learner's code equal the reference's, and are finite.

    `run(*inputs)` calls the learner's code (through `call`), `reference(*inputs)` the
    course's, on the same inputs (the forward values were checked already). A fixed
    random projection of the outputs is backpropagated through both; the gradients with
    respect to every input and every parameter (`parameters` maps a name to the
    learner's tensor and the reference's) must match. `wrong` maps a diagnosis to a
    forward that makes that mistake (same values, other gradients: a state detached at
    every step, say); when the learner's gradients match one, it is named.
    """
    names = list(inputs)
    parameters = parameters or {}
    names += list(parameters)
    theirs = [p for p, _ in parameters.values()]
    ours = [p for _, p in parameters.values()]
    _, want = _backward(reference, list(inputs.values()), ours)
    outputs, got = _backward(run, list(inputs.values()), theirs)
    if got is None:
        raise Mistake(
            f"{what}: the result carries no gradient, so nothing before it could learn. "
            "Something cut it from the computation graph: .detach(), a `with torch.no_grad():` "
            "block, or a new tensor made from values (torch.tensor(...), .item(), .numpy())"
        )
    for name, g, w in zip(names, got, want, strict=True):
        if g is not None and not torch.isfinite(g).all():
            raise Mistake(
                f"{what}: the gradient with respect to {name} holds NaN or inf, so one training "
                "step would make the model NaN" + (f". {nonfinite_hint}" if nonfinite_hint else "")
            )
        if g is None and w is not None and bool(w.any()):
            raise Mistake(
                f"{what}: no gradient reaches {name}, so it could not learn: something between "
                f"{name} and the result is cut from the graph (.detach(), torch.no_grad(), "
                "values copied with torch.tensor(...) or .item())"
            )

    def same(g, w) -> bool:  # None (no gradient at all) counts as zeros
        if g is None or w is None:
            return (g is None or not g.any()) and (w is None or not w.any())
        g = g.detach()
        return close(g, w, atol, rtol)

    mismatched = [name for name, g, w in zip(names, got, want, strict=True) if not same(g, w)]
    if not mismatched:
        return
    for diagnosis, mistaken in (wrong or {}).items():
        _, alt = _backward(mistaken, list(inputs.values()), ours)
        if alt is not None and all(same(g, a) for g, a in zip(got, alt, strict=True)):
            raise Mistake(f"{what}: {diagnosis}")
    raise Mistake(
        f"{what}: your values are right, but the gradient with respect to "
        f"{', '.join(mismatched)} is not, so training would follow the wrong slope. Something "
        "on the way is cut from the graph or rebuilt from values (.detach(), .data, "
        "torch.tensor(...)), or a step is computed without autograd"
    )


# ---------------------------------------------------------- dropout ----------


def expect_dropout(dropped: torch.Tensor, kept_all: torch.Tensor, p: float, what: str) -> None:
    """`dropped` is `kept_all` after dropout at rate p: every entry either 0 or scaled by
    1 / (1 - p), each decided on its own (not whole rows or columns), about p of them 0.

    Entries where `kept_all` is 0 (masked) tell nothing and are left out.
    """
    dropped = dropped.detach()
    informative = kept_all.abs() > 1e-6
    zero = dropped.abs() <= 1e-7
    if not zero[informative].any():
        raise Mistake(
            f"{what}: nothing is dropped at p={p}. Dropout belongs on these attention weights, "
            "after the softmax, and the dropped weights are the ones that multiply v"
        )
    scaled = torch.isclose(dropped.double(), kept_all.double() / (1 - p), atol=1e-6, rtol=1e-4)
    if not (zero | scaled)[informative].all():
        ratio = (dropped.double() / kept_all.double())[informative & ~zero]
        scale = float(ratio.mean()) if ratio.numel() else 0.0  # one scale for all kept?
        if ratio.numel() and float(ratio.max() - ratio.min()) < 1e-4 and scale > 1.001:
            used = 1 - 1 / scale
            if math.isclose(used, 1 - p, abs_tol=1e-3):
                raise Mistake(
                    f"{what}: p is the probability to *drop* a weight, not to keep it: the "
                    f"kept values are scaled by 1/p = {1 / p:.3g}, and should be by "
                    f"1/(1 - p) = {1 / (1 - p):.3g} (F.dropout(weights, p=dropout_p))"
                )
            raise Mistake(
                f"{what}: the kept values are scaled by {scale:.3g}, which is dropout "
                f"at p={used:.2g}, but p={p} was asked. Use the rate you are given, not a "
                "fixed number"
            )
        if torch.isclose(dropped.double(), kept_all.double(), atol=1e-6, rtol=1e-4)[
            informative & ~zero
        ].all():
            raise Mistake(
                f"{what}: the values that survive dropout are not rescaled: multiply them by "
                f"1 / (1 - p) = {1 / (1 - p):.3g}, so their expected value stays the same "
                "(F.dropout and nn.Dropout do it for you)"
            )
        raise Mistake(
            f"{what}: with dropout p={p} each attention weight should be either 0 (dropped) "
            "or weight / (1 - p) (kept). Apply dropout to the attention weights, after the "
            "softmax, and to nothing else (not the queries, the scores or the output)"
        )
    zero = zero & informative
    for axis, whole in ((-1, "whole rows (a query's every weight)"), (-2, "whole keys")):
        decided = zero.transpose(axis, -1)  # the entries along `axis` last
        uniform = decided.all(dim=-1) | (~decided).all(dim=-1)  # all dropped, or all kept
        if float(uniform.float().mean()) > 0.5:
            raise Mistake(
                f"{what}: dropout drops {whole} at once; drop each weight on its own, "
                "with a random mask of the weights' full shape (F.dropout(weights, p))"
            )
    share = float(zero.sum()) / float(informative.sum())  # some are informative: see above
    if abs(share - p) > 0.07:
        raise Mistake(
            f"{what}: with dropout p={p} you dropped {share:.0%} of the weights; about "
            f"{p:.0%} should go. Use the rate you are given, not a fixed number"
        )


def expect_fresh_randomness(first: torch.Tensor, second: torch.Tensor, what: str) -> None:
    """Two calls on the same inputs drop different entries: no fixed seed inside."""
    if torch.equal(first.detach() == 0, second.detach() == 0):
        raise Mistake(
            f"{what}: two calls dropped exactly the same entries. Dropout must draw a new "
            "random mask on every call: don't seed inside your function (torch.manual_seed) "
            "or keep one mask"
        )


def softmax_rows_ok(weights: torch.Tensor) -> bool:
    """Every row is a probability distribution over the last axis."""
    weights = weights.detach().double()
    return bool((weights >= -1e-6).all()) and bool(
        torch.allclose(weights.sum(-1), torch.ones((), dtype=torch.float64), atol=1e-4)
    )


# ------------------------------------------------------------- lessons ----------

# The lesson whose notebook holds each exercise, for `python -m course.progress`: the lesson
# of the checker module that registers it, so a new exercise in an existing module needs no
# edit here; a new module adds one line. A module serving two lessons lists the later
# lesson's exercises in LESSON_OF_EXERCISE.
LESSON_OF_MODULE = {
    "rnn": "01",
    "attention": "02",
    "multihead": "04",
    "positional": "05",
    "masking": "06",
    "layers": "07",
    "transformer": "08",
    "decoding": "09",
    "efficient": "10",
    "data": "11",
    "sampling": "12",
}
LESSON_OF_EXERCISE = {"scaled_dot_product_attention": "03"}


def lesson_of(name: str) -> str | None:
    """The lesson number ("03") whose notebook holds exercise `name`; None if unknown."""
    if name in LESSON_OF_EXERCISE:
        return LESSON_OF_EXERCISE[name]
    module = EXERCISES[name].__module__  # functools.wraps keeps the checker body's module
    return LESSON_OF_MODULE.get(module.rsplit(".", 1)[-1])
