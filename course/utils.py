"""Small helpers every lesson uses: seeding, choosing a device, the course's thread policy,
comparing, timing, the words of error messages, and writing a file so that no reader ever
sees half of it."""

import builtins
import contextlib
import copy
import math
import os
import random
import secrets
import sys
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


def mps_available() -> bool:
    """Whether Apple's GPU (Metal Performance Shaders, MPS) is here for torch to use."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def device(name: str | torch.device = "auto") -> torch.device:
    """The device `name` names, once it is known to be here. "auto" takes an NVIDIA GPU
    (CUDA) when there is one, else Apple's GPU (MPS), else the CPU. Nothing in the course
    needs a GPU. ValueError for a name torch does not know, or a GPU that is not here."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if mps_available() else "cpu")
    try:
        chosen = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"{name}: unknown device (try auto, cpu, cuda, mps)") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}: no CUDA GPU is available here (use auto or cpu)")
    if chosen.type == "mps" and not mps_available():
        raise ValueError(f"{name}: Apple's MPS is not available here (use auto or cpu)")
    return chosen


def synchronize(device: torch.device | str) -> None:
    """Wait until `device` has finished the work queued on it (a GPU runs it later than
    the Python that asked for it); nothing to wait for on the CPU."""
    kind = torch.device(device).type if isinstance(device, str) else device.type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


# How far the first loss on Apple's GPU may be from the CPU's before the course trusts the
# CPU instead. The same weights and the same batch in float32 differ only in the order of
# their sums: about 1e-6 of the loss. 1e-3 leaves room for a device that multiplies in
# lower precision, and is thousands of times smaller than the failures reported on MPS
# (LLMs-from-scratch #791: a loss of 19.9 where the CPU gave 3.8).
MPS_RTOL = 1e-3


def mps_checked(
    device: torch.device | str,
    model: torch.nn.Module,
    loss_fn: Callable,
    batch,
    rtol: float = MPS_RTOL,
    say: Callable[[str], object] | None = None,
) -> torch.device:
    """`device`, unless it is Apple's MPS and the model's loss on `batch` there is not the
    CPU's: then one line (on stderr, or to `say`) says so, and the CPU is returned.

    loss_fn(model, batch) -> a 0-d loss. The model is copied to each device in eval mode
    (no dropout: both see the same network) and left as it is; on any other device than
    MPS nothing is computed."""
    device = torch.device(device)
    if device.type != "mps":
        return device
    on_device = _loss_on(model, loss_fn, batch, device)
    on_cpu = _loss_on(model, loss_fn, batch, torch.device("cpu"))
    if math.isfinite(on_device) and math.isclose(on_device, on_cpu, rel_tol=rtol):
        return device
    message = (
        f"{device} gave a loss of {on_device:.4f} on the first batch where the CPU gives "
        f"{on_cpu:.4f} (same weights, same batch): using the CPU instead"
    )
    (say or (lambda text: print(text, file=sys.stderr)))(message)
    return torch.device("cpu")


@torch.no_grad()
def _loss_on(model: torch.nn.Module, loss_fn: Callable, batch, where: torch.device) -> float:
    """loss_fn on a copy of `model` and of `batch` on `where`, in eval mode, as a float."""
    copy_ = copy.deepcopy(model).to(where).eval()
    moved = batch.to(where) if torch.is_tensor(batch) else type(batch)(t.to(where) for t in batch)
    return float(loss_fn(copy_, moved))


# The thread policy: one CPU thread, unless you say otherwise. The course's tensors are
# small (d_model 64-192, a few dozen tokens), so a second thread saves little on an idle
# machine (make train: 32.6 s on two threads, 43.0 s on one), and PyTorch's OpenMP threads
# spin while they wait for each other, so on a machine that other programs share (a
# browser, a build) two threads can take ten times as long as one (813 s against 86 s). One
# thread also makes every result the same on every machine: the number of threads changes
# the order in which sums are added, and so the rounding, and with it a whole training
# run. docs/training.md, "Threads", has the measurements.
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
