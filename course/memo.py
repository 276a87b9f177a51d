"""One training run, not two, when the course's tests run the same lesson twice.

`make test` runs every lesson's learner notebook and its solution notebook. Outside the
exercises their code is the same, cell for cell (a test checks it), so the training cells of
lessons 09 to 12 train the very same model twice: the same starting weights, the same
batches, the same settings, the same random state. On the course's 2-core machine those second
runs were about three minutes of the suite's work. While `make test` runs nbval (conftest.py sets
COURSE_TRAINING_MEMO for the notebooks' kernels only, never for a learner, never for the
other tests), `course.train.train_steps` keeps what each run ended with, and a run whose
inputs are *all* equal to a kept one's takes its end state instead of computing it again:
the weights, the optimizer's and the scheduler's state, torch's random state and the log.

What makes that safe is the key (`fingerprint`): every input the loop reads, by value. The
model's every parameter and buffer (state_dict leaves out non-persistent ones), which of
them are one tensor, each part's class and other attributes (its mode among them); the
optimizer's and the scheduler's class and state (the learning-rate function's code, and the
values it closes over and the globals it reads); the loss's settings; every batch the run
will take (drawn first, so that the batches' iterator ends where training would leave it);
the steps, the clipping, the device, torch's random state and thread count and version.
Anything it cannot read by value (an object it does not know) means no reuse: the run
trains. A run with an on_step callback always trains (the callback has side effects). A run
with a time budget (lesson 09's RNNs) ends when the clock says: its key holds the budget, and
the batches it took are compared once a later run has drawn as many (`train_once`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import tempfile
import types
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import torch
from torch import nn

ENV = "COURSE_TRAINING_MEMO"  # a folder: set, runs are kept there and reused


def folder() -> Path | None:
    """The folder named by COURSE_TRAINING_MEMO, or None (a learner's kernel: no reuse)."""
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


class Unreadable(TypeError):
    """An input `fingerprint` cannot read by value: the run is not reused."""


_HELD_ELSEWHERE = ("_parameters", "_buffers", "_modules")  # read through named_parameters() & co


def _feed(digest, value, seen: dict[int, object]) -> None:
    """Feed `value` into `digest` by value, with its type, so that equal inputs (and only
    those) give equal digests."""
    put = digest.update
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        put(f"{type(value).__name__}:{value!r};".encode())
        return
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        put(f"tensor:{tensor.dtype}:{tuple(tensor.shape)}:".encode())
        put(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
        return
    if isinstance(value, torch.dtype | torch.device):
        put(f"{type(value).__name__}:{value};".encode())
        return
    if id(value) in seen:  # a cycle or a shared object: its place is enough
        put(f"seen:{list(seen).index(id(value))};".encode())
        return
    seen[id(value)] = value  # kept alive: a freed object's id may be given to a new one
    if isinstance(value, set | frozenset):
        value = sorted(value, key=repr)
    if isinstance(value, list | tuple):
        put(f"{type(value).__name__}[{len(value)}]".encode())
        for item in value:
            _feed(digest, item, seen)
    elif isinstance(value, dict):
        put(f"dict[{len(value)}]".encode())
        for key in sorted(value, key=repr):
            _feed(digest, key, seen)
            _feed(digest, value[key], seen)
    elif isinstance(value, nn.Module):
        # every parameter and buffer (state_dict leaves out a non-persistent buffer, such as
        # lesson 10's sparse pattern), which of them are one tensor (tied weights), and each
        # part's class and every other attribute (its mode, a dropout's p, a loss's smoothing)
        tensors = [*value.named_parameters(remove_duplicate=False),
                   *value.named_buffers(remove_duplicate=False)]  # fmt: skip
        first: dict[int, str] = {}
        _feed(digest, [(name, first.setdefault(id(t), name), t) for name, t in tensors], seen)
        for name, part in value.named_modules():
            rest = {k: v for k, v in vars(part).items() if k not in _HELD_ELSEWHERE}
            _feed(digest, (name, type(part).__qualname__, rest), seen)
    elif isinstance(value, torch.optim.Optimizer):
        put(f"optimizer:{type(value).__qualname__}".encode())
        _feed(digest, value.state_dict(), seen)
    elif isinstance(value, torch.optim.lr_scheduler.LRScheduler):
        put(f"scheduler:{type(value).__qualname__}".encode())
        _feed(digest, value.state_dict(), seen)
        _feed(digest, getattr(value, "lr_lambdas", None), seen)
    elif isinstance(value, partial):
        _feed(digest, (value.func, value.args, value.keywords), seen)
    elif isinstance(value, types.FunctionType):  # its code, and every value it reads
        code = value.__code__
        cells = tuple(cell.cell_contents for cell in value.__closure__ or ())
        _feed(digest, (code, value.__defaults__, value.__kwdefaults__, cells), seen)
        names = _names(code)
        _feed(digest, {k: value.__globals__[k] for k in names if k in value.__globals__}, seen)
    elif isinstance(value, types.CodeType):
        _feed(digest, (value.co_code, value.co_consts, value.co_names), seen)
    elif isinstance(value, weakref.ref):  # what it refers to (a GRU's weights), or None
        put(b"weakref:")
        _feed(digest, value(), seen)
    elif isinstance(value, types.ModuleType):  # an imported module: by name
        put(f"module:{value.__name__};".encode())
    elif isinstance(value, types.BuiltinFunctionType | type):
        put(f"{type(value).__name__}:{value.__module__}.{value.__qualname__};".encode())
    else:
        raise Unreadable(f"cannot read a {type(value).__qualname__} by value")


def _names(code: types.CodeType) -> set[str]:
    """The global names a function's code (nested functions' included) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def fingerprint(*inputs) -> str | None:
    """A hex digest of `inputs` by value, or None when one of them cannot be read."""
    digest = hashlib.sha256(f"torch {torch.__version__};".encode())
    try:
        _feed(digest, inputs, {})
    except Unreadable:
        return None
    return digest.hexdigest()


def train_once(
    run: Callable[[Iterator], object],
    batches: Iterator,
    count: int,
    *,
    budgeted: bool = False,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler,
    settings: dict,
):
    """run(batches) -> log, or the log a run with every input equal left in the memo folder.

    Draws `count` batches first (what the run will take), fingerprints them with the model,
    the optimizer, the scheduler, `settings` and torch's random state, and either restores a
    kept run's end state into model, optimizer and scheduler or calls run on those batches and
    keeps its end state. Without a memo folder, or with an input it cannot read, it just runs.

    A `budgeted` run (a time budget in `settings`) ends when the clock says, so how many
    batches it takes is known only afterwards. Its first run keeps the batches' fingerprint
    and count beside its end state; a later run with every other input equal draws that many
    batches and is reused if they are the same ones (else it trains on them and the rest).
    What it takes is the end of one real run with that budget on this machine, in this session.
    """
    where = folder()
    key = None
    if where is not None:
        state = (torch.get_rng_state(), torch.get_num_threads())
        key = fingerprint(model, optimizer, scheduler, settings, state)
    if key is None:
        return run(batches)
    path = where / f"{key}.pt"
    if not budgeted:
        taken = [batch for _, batch in zip(range(count), batches, strict=False)]
        batches_key = fingerprint(taken)
        if batches_key is None:
            return run(iter(taken))
        path = where / f"{fingerprint(key, batches_key)}.pt"
        if path.is_file():
            return _restore(path, model, optimizer, scheduler)
        log = run(iter(taken))
        _keep(path, log, model, optimizer, scheduler, len(taken), batches_key)
        return log
    if path.is_file():
        kept_count, kept_batches = torch.load(path, weights_only=False)["batches"]
        taken = [batch for _, batch in zip(range(kept_count), batches, strict=False)]
        if fingerprint(taken) == kept_batches:
            return _restore(path, model, optimizer, scheduler)
        return run(itertools.chain(taken, batches))  # other batches: train, keep nothing
    taken = []

    def recorded():  # the batches as the run takes them, one per step
        for batch in batches:
            taken.append(batch)
            yield batch

    log = run(recorded())
    batches_key = fingerprint(taken)
    if batches_key is not None:
        _keep(path, log, model, optimizer, scheduler, len(taken), batches_key)
    return log


def _restore(path: Path, model, optimizer, scheduler):
    """Put a kept run's end state into model, optimizer and scheduler; return its log."""
    kept = torch.load(path, weights_only=False)
    model.load_state_dict(kept["model"])
    model.train(kept["training"])
    optimizer.load_state_dict(kept["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(kept["scheduler"])
    torch.set_rng_state(kept["rng"])
    print(
        f"(reused: this test session already ran this training with the same weights, "
        f"batches and settings; {ENV} is set only under `make test`)",
        file=sys.stderr,
    )
    return kept["log"]


def _keep(path: Path, log, model, optimizer, scheduler, count: int, batches_key: str) -> None:
    """Keep a run's end state, and which batches it took, in `path`."""
    kept = dict(
        model=model.state_dict(),
        training=model.training,
        optimizer=optimizer.state_dict(),
        scheduler=scheduler.state_dict() if scheduler is not None else None,
        rng=torch.get_rng_state(),
        log=log,
        batches=(count, batches_key),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".part") as file:
        torch.save(kept, file)
    os.replace(file.name, path)  # whole or not at all: another process may read it
