"""Small helpers every lesson uses: seeding, choosing a device, the course's thread policy,
comparing, timing, the words of error messages, and writing a file so that no reader ever
sees half of it."""

import builtins
import contextlib
import os
import random
import secrets
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch so that a notebook run twice prints the same numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def device() -> torch.device:
    """The GPU when there is one, else the CPU. Nothing in the course needs a GPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# The thread policy: one CPU thread, unless you say otherwise. The course's tensors are
# small (d_model 64-192, a few dozen tokens), so a second thread saves little on an idle
# machine (make train: 32.6 s on two threads, 43.0 s on one), and PyTorch's OpenMP threads
# spin while they wait for each other, so on a machine that other programs share (a
# browser, a build) two threads can take ten times as long as one (813 s against 86 s). One
# thread also makes every result the same on every machine: the number of threads changes
# the order in which sums are added, and so the rounding, and with it a whole training
# run. README.md, "Threads", has the measurements.
THREADS_VARIABLES = ("COURSE_THREADS", "OMP_NUM_THREADS")


def course_threads() -> int:
    """How many CPU threads the course's code runs on: $COURSE_THREADS if set, else
    $OMP_NUM_THREADS if set, else 1. `import course` applies it (torch.set_num_threads)."""
    for variable in THREADS_VARIABLES:
        text = os.environ.get(variable, "").strip()
        if text:
            if not text.isdigit() or int(text) < 1:
                raise ValueError(
                    f"{variable} must be a whole number of threads, at least 1, got {text!r}"
                )
            return int(text)
    return 1


@contextlib.contextmanager
def use_threads(threads: int):
    """Run the block on `threads` CPU threads (torch.set_num_threads), then restore the
    caller's count, even when the block raises."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int, at least 1, got {threads!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def gap(got: torch.Tensor, want: torch.Tensor) -> str:
    """The largest absolute difference between two tensors, as text that reads the same on
    every run: "< 1e-6" when they agree to float32 rounding, else its order of magnitude."""
    difference = (got.detach() - want.detach()).abs().max().item()
    return "< 1e-6" if difference < 1e-6 else f"{difference:.0e}"


def best_seconds(fn: Callable, *args, repeats: int = 5) -> float:
    """The fastest of `repeats` timed calls fn(*args), after one warm-up call.

    The minimum, not the mean: the other processes of a busy machine only ever add time,
    so the fastest run is the closest to what the work itself costs.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    fn(*args)  # warm up: first-call allocations and lazy imports are not the work
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def describe(x: object) -> str:
    """What came, for an error message: a tensor's dtype and shape, else its type and value."""
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"{type(x).__name__} {x!r}"


def error_name(error: BaseException | type | str) -> str:
    """The name to show for an error (an exception, its class, or a class's name as a kernel
    reports it): the class's own name, unless it is private, then the first public class's
    up its MRO.

    Python and libraries raise private subclasses of public errors: Python 3.13 compiles an
    unfinished cell (`x = (1,`) to `_IncompleteInputError`, a SyntaxError, and NumPy's
    ufuncs raise `_UFuncNoLoopError`, a UFuncTypeError. A leading "_" marks a name as no
    one's to rely on: documented nowhere a learner looks, not the one an `except` names.
    The general rule (not a list of special cases) keeps the next such class readable too:
    "SyntaxError: incomplete input" on every Python. A name (str) is looked up among the
    builtins, where `_IncompleteInputError` lives; one found nowhere is returned as it is.
    """
    if isinstance(error, str):
        found = getattr(builtins, error, None) if error.startswith("_") else None
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            return error
        error = found
    kind = error if isinstance(error, type) else type(error)
    return next((k.__name__ for k in kind.__mro__ if not k.__name__.startswith("_")), kind.__name__)


def is_token_ids(x: object) -> bool:
    """Whether x is a (B, T) tensor of integer token ids (not float, complex or bool)."""
    return (
        isinstance(x, torch.Tensor)
        and x.dim() == 2
        and not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
    )


def write_atomically(path: Path, write: Callable) -> None:
    """write(file) into a temporary file beside `path`, then rename it into place.

    os.replace is atomic on one file system: a reader (or a run resumed after a crash)
    sees the old file or the new one, never half of one. On any error the temporary file
    is removed and the old file is left as it was.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as file:  # a new file, with the umask's permissions
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
