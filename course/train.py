"""Train the Transformer on a task, evaluate it, save everything: `python -m course.train`.

    python -m course.train --task toy-translation            # what `make train` runs
    python -m course.train --task reverse --steps 500 --seed 1 --out runs/r1
    python -m course.train --task reverse --steps 1000 --seed 1 --out runs/r1 --resume
    python -m course.train --task reverse --set d_model=64 --set n_layers=2

The recipe is the paper's (Vaswani et al. 2017, section 5) at small scale:

- loss: cross-entropy with label smoothing 0.1, padding ignored
  (nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID));
- Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9;
- the warm-up schedule lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
  (`noam_lr`, through torch.optim.lr_scheduler.LambdaLR): a linear ramp for `warmup`
  steps, then decay as 1/sqrt(step);
- dropout on every sub-layer and on the embeddings (the model's `dropout`);
- batches padded to their longest sentence (course.data.make_batches);
- gradient clipping to a norm of `clip_norm` (not in the paper; 0 turns it off). Not
  needed to pass on toy-translation, but steadier: 600 steps, one thread, exact match
  100% / 100% with clipping and 100% / 99.65% without, for seeds 0 / 1.

The loop itself is `train_steps` (model, batches, optimizer, loss; a time budget and a
callback after each step), which lesson 09 also uses, for the Transformer and for the
RNN baseline of course.rnn; `corpus_scores` is how every translation is scored.

Evaluation decodes the held-out split greedily (course.decoding.greedy_decode) and
reports exact match (the share of sentences whose every token is right, 0-1) and corpus
BLEU by sacrebleu over the tasks' own words (tokenize="none": the words are already
tokens, so BLEU counts exactly their n-grams).

Written to --out (default runs/<task>):

    checkpoint.pt   model, optimizer, scheduler, step, data position, RNG state, config;
                    written atomically (a temporary file in the same folder, then
                    os.replace), every `checkpoint_every` steps and at the end
    config.json     the task, seed and configuration
    metrics.json    the results (the JSON object printed last)
    loss.png        the training loss and the learning rate, step by step

The last line on stdout is one JSON object: task, exact_match, bleu, train_seconds,
params, steps, device, and more. Progress bars go to stderr. `--resume` continues from
the checkpoint in --out and ends exactly where an uninterrupted run with the same seed
ends (same data order, same dropout masks, same parameters) on a CPU.

The same command runs in N processes under torchrun (section "More than one process",
`Processes`), on CPUs or one GPU per process:

    torchrun --standalone --nproc_per_node 2 -m course.train --task reverse --device cpu

Every process builds the same batches and trains on its own slice of each one, with
DistributedDataParallel; the update is the one a single process makes from the whole
batch. Only rank 0 prints, saves and evaluates.

The file, in the order a run takes it: the configurations (`CONFIGS`); the recipe
(`noam_lr`, `build_model`, `build_optimizer`, `training_batches`); the loop (`TrainingLog`,
`train_steps`); scoring and evaluation (`corpus_scores`, `text_scores`, `evaluate`);
checkpoints and the loss plot; more than one process (`GlobalTokenMean`, `Processes`);
the command line (`parse_args`, `run`, `main`); and lesson 12's `--task lm-en`. Lessons 09
and 10 import from the first half; everything after `Processes` serves the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from torch import distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from course import memo
from course.data import BOS_ID, EOS_ID, PAD_ID, TASKS, load_task, make_batches
from course.decoding import greedy_decode
from course.transformer import Transformer
from course.utils import course_threads, mps_checked, seed_everything, use_threads
from course.utils import device as _device
from course.utils import write_atomically as _write_atomically

# Adam's moments as in the paper (section 5.3): beta2 = 0.98 instead of the usual 0.999
# forgets old squared gradients faster, which steadies the first, noisy steps.
ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
# Adam's for-each step updates every parameter tensor with one operator per stage of the
# update (moments, bias correction, step), where the per-tensor loop, PyTorch's default
# on a CPU, issues about nine operators per tensor: the same numbers, bit for bit (a
# test compares them), far fewer operators (PyTorch's own default on a GPU).
ADAM_FOREACH = True

# Every task's default configuration, in one place. `--steps` and `--set KEY=VALUE`
# override them for one run. Model: d_model, n_heads, n_layers, d_ff, dropout, norm_first,
# positions ("sinusoidal" or "rotary": course.transformer.Transformer).
# Optimisation: steps, batch_size (sentences), warmup (steps), lr_factor (the schedule's
# factor), label_smoothing, clip_norm (0: off). Bookkeeping: checkpoint_every,
# eval_batch_size. bf16: on a CUDA GPU, the forward pass and the loss run under bf16
# autocast (torch.autocast: matmuls in bfloat16, the weights, gradients and Adam's moments
# stay float32); the CPU ignores it and trains in float32. threads: CPU threads for the
# run, 0 for the course's policy (course.utils.course_threads: one, unless $COURSE_THREADS
# or $OMP_NUM_THREADS says otherwise).
#
# toy-translation (`make train`): 600 steps of 64 sentences, about 5 epochs of its 8,000
# training pairs. lr_factor 0.5 halves the paper's rate (peak 4.4e-3 at step 200 for
# d_model = 64): with 1.0 the held-out exact match wobbled late in training (98.2% at
# step 450 with seed 1, 99.65% at step 600 with seed 4); with 0.5 it held at 99.95-100%
# from step 300 to 600 (seeds 0, 1, 4; one thread).
#
# SCAN (scan-simple, scan-length, scan-addjump): the same small model, 6,000 steps of 64
# commands, about 23 epochs of scan-simple's 16,728 training pairs. The first guess
# (d_model 128, 3 layers, d_ff 512) has about six times the weights and the work per
# token, too much for 20 minutes on 2 shared cores. Measured on scan-simple (seed 0):
# exact match 2% at step 500 and 59.5% at step 1,000 (400 held-out commands, one
# thread), 93.0% after 3,000 steps and 99.7% after 6,000 (all 4,182; docs/training.md,
# "Training the model"). The length and add-jump splits use the same settings, with
# positions="sinusoidal" or "rotary" (--set positions=rotary). scan-simple trains 8,000
# steps: at 6,000, seed 1 ended at 99.35% (99.23% in an earlier measurement), under the
# 99.5% wanted of every seed; at 8,000 seeds 0, 1, 2 reached 99.83%, 99.55%, 99.78% in
# 1,145-1,157 s of one thread each (docs/training.md, "SCAN").
_COMMON = dict(
    d_model=64,
    n_heads=4,
    n_layers=2,
    d_ff=256,
    dropout=0.1,
    norm_first=False,
    positions="sinusoidal",
    steps=600,
    batch_size=64,
    warmup=200,
    lr_factor=0.5,
    label_smoothing=0.1,
    clip_norm=1.0,
    checkpoint_every=200,
    eval_batch_size=500,
    bf16=True,
    threads=0,
)
_SCAN = dict(steps=6000, checkpoint_every=500)
# fra-eng (lesson 11, real sentences): trained for a time, not a number of steps
# (time_budget seconds of training; steps is then only a ceiling), and scored on text
# (course.train.text_scores). architecture "transformer" or "tutorial-gru" (the PyTorch
# tutorial's GRU with attention, course.rnn.TutorialSeq2Seq, d_model its hidden size);
# schedule "noam" (the paper's warm-up, lr_factor) or "constant" (lr, the tutorial's Adam
# rate); beam_size 1 decodes greedily, more with beam search (alpha 0.6).
#
# What mattered, from 13 runs of 260-390 s on 2 cores each (seed 0, docs/translation.md):
# dropout 0.1, not 0.3 (0.3 and 0.2 left the model guessing "i m very busy." at 10-14
# BLEU: 9,539 short pairs are little data, but 10 minutes is too few steps to need much
# regularisation); 2 layers rather than 3 (more steps in the same time: 42.4 against
# 31.7 BLEU); d_model 128 rather than 192 or 256 (38.7 and 7.8: fewer, slower steps);
# batches of 64 (32 and 128 did worse); the paper's rate (lr_factor 1.0; 2.0 diverged).
_REAL = dict(
    architecture="transformer",
    time_budget=600.0,
    schedule="noam",
    lr=1e-3,
    beam_size=1,
    tie_embeddings=False,
)
CONFIGS: dict[str, dict] = {
    "toy-translation": {**_COMMON},
    "reverse": {**_COMMON, "steps": 2000},
    "scan-simple": {**_COMMON, **_SCAN, "steps": 8000},
    "scan-length": {**_COMMON, **_SCAN},
    "scan-addjump": {**_COMMON, **_SCAN},
    "fra-eng": {
        **_COMMON,
        **_REAL,
        "d_model": 128,
        "n_heads": 4,
        "n_layers": 2,
        "d_ff": 512,
        "dropout": 0.1,
        "beam_size": 4,
        "steps": 100_000,
        "batch_size": 64,
        "warmup": 400,
        "lr_factor": 1.0,
        "checkpoint_every": 500,
    },
    # fra-eng-full: 132,899 training pairs in pieces of one shared BPE vocabulary of 8,000
    # (course.data.FULL_VOCAB_SIZE), the embeddings tied as in the paper (§3.4), 20 minutes.
    "fra-eng-full": {
        **_COMMON,
        **_REAL,
        "time_budget": 1200.0,
        "d_model": 192,
        "n_heads": 4,
        "n_layers": 2,
        "d_ff": 768,
        "dropout": 0.1,
        "beam_size": 4,
        "tie_embeddings": True,
        "steps": 100_000,
        "batch_size": 64,
        "warmup": 800,
        "lr_factor": 1.0,
        "checkpoint_every": 500,
        "eval_batch_size": 250,
    },
}
# --model tutorial-gru: the PyTorch tutorial's model with the tutorial's own recipe (hidden
# size 128, dropout 0.1, Adam at a constant 0.001, batches of 32, greedy decoding), on top
# of the task's settings; --set still overrides any of them.
MODELS: dict[str, dict] = {
    "transformer": {},
    "tutorial-gru": dict(
        architecture="tutorial-gru",
        d_model=128,
        dropout=0.1,
        schedule="constant",
        lr=1e-3,
        batch_size=32,
        beam_size=1,
    ),
}
# The settings of the real task that the generated ones leave at these values.
REAL_DEFAULTS = {"architecture": "transformer", "time_budget": 0.0, "schedule": "noam",
                 "lr": 1e-3, "beam_size": 1, "tie_embeddings": False}  # fmt: skip


def _setting(config: dict, key: str):
    """config[key], or REAL_DEFAULTS[key] for a configuration without it (a generated task's,
    or a checkpoint's from before the real task)."""
    return config.get(key, REAL_DEFAULTS[key])


# What may differ between a checkpoint and the run that resumes it: how far to train and
# how often to save change nothing in the steps that both take; the threads change only
# the order of the sums (the last digits), and a checkpoint from before the setting has none.
RESUMABLE_CHANGES = ("steps", "checkpoint_every", "eval_batch_size", "threads")
CHECKPOINT = "checkpoint.pt"


class UsageError(Exception):
    """A problem with the command line or the --out folder: printed, exit status 2."""


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at `step` (counted from 1), equation (3):

        lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    The two terms are equal at step = warmup, where the rate peaks at
    factor * (d_model * warmup)^-0.5: before it the second term (a linear ramp) is the
    smaller, after it the first (decay as 1/sqrt(step)).
    """
    for name, value in (("step", step), ("d_model", d_model), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            counted = " (steps count from 1)" if name == "step" else ""
            raise ValueError(f"{name} must be a positive int{counted}, got {value!r}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def build_model(task, config: dict) -> nn.Module:
    """The model for `task`'s vocabularies, sized by `config`: the Transformer, or (with
    architecture="tutorial-gru") the PyTorch tutorial's GRU with attention."""
    architecture = _setting(config, "architecture")
    if architecture == "tutorial-gru":
        from course.rnn import TutorialSeq2Seq

        return TutorialSeq2Seq(
            len(task.src_vocab),
            len(task.tgt_vocab),
            d_hidden=config["d_model"],
            dropout=config["dropout"],
            pad_id=PAD_ID,
        )
    if architecture != "transformer":
        raise ValueError(
            f"architecture must be 'transformer' or 'tutorial-gru', got {architecture!r}"
        )
    return Transformer(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_model=config["d_model"],
        n_heads=config["n_heads"],
        n_layers=config["n_layers"],
        d_ff=config["d_ff"],
        dropout=config["dropout"],
        norm_first=config["norm_first"],
        # positions: a source and its <eos>, or <bos> and a target (course.data.make_batches)
        max_len=max(task.max_src_len, task.max_tgt_len) + 1,
        pad_id=PAD_ID,
        positions=config["positions"],
        tie_embeddings=_setting(config, "tie_embeddings"),
    )


def build_optimizer(model: nn.Module, config: dict):
    """Adam with the paper's betas and eps, its learning rate set by noam_lr every step.

    LambdaLR multiplies the optimizer's base rate (1.0 here) by the function of its step
    counter, which starts at 0 while the paper's steps count from 1: hence step + 1.
    """
    optimizer = torch.optim.Adam(
        model.parameters(), lr=1.0, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=ADAM_FOREACH
    )
    d_model, warmup, factor = config["d_model"], config["warmup"], config["lr_factor"]
    if _setting(config, "schedule") == "constant":  # the tutorial's fixed rate
        rate = config["lr"]
        schedule = lambda step: rate  # noqa: E731
    else:
        schedule = lambda step: noam_lr(step + 1, d_model, warmup, factor)  # noqa: E731
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    return optimizer, scheduler


def _epoch_generator(seed: int, epoch: int) -> torch.Generator:
    # Each epoch's shuffle is a function of (seed, epoch) alone, so a resumed run can
    # rebuild the epoch it stopped in and skip the batches it had already seen.
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def training_batches(task, batch_size: int, seed: int, epoch: int, position: int):
    """Yield (epoch, position after this batch, batch) forever, from `position` of `epoch`."""
    while True:
        generator = _epoch_generator(seed, epoch)
        batches = make_batches(task.train, task, batch_size, shuffle=True, generator=generator)
        for index, batch in enumerate(batches):
            if index >= position:
                yield epoch, index + 1, batch
        epoch, position = epoch + 1, 0


@dataclass
class TrainingLog:
    """What `train_steps` has done so far: the optimizer steps taken (counted from the
    run's start, a resumed run's earlier steps included), the loss of each step it took,
    and the seconds those steps took (the callback's time not counted), in all and each.

    A step's loss stays a tensor on the model's device until someone reads `losses`:
    reading a number back from a GPU makes the CPU wait until the GPU has finished
    everything queued so far (a host synchronisation), so the loop does it once every
    `log_every` steps (nanoGPT's log_interval), never once a step. Reading `losses` brings
    back every loss not read yet, all in one transfer, and returns them all as floats."""

    step: int
    seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)
    _read: list[float] = field(default_factory=list, repr=False)
    _unread: list[torch.Tensor] = field(default_factory=list, repr=False)

    def record(self, loss: torch.Tensor) -> None:
        """Keep one step's loss (a 0-d tensor), without reading it back."""
        self._unread.append(loss.detach())

    @property
    def losses(self) -> list[float]:
        """Every step's loss, as floats (the ones still on the device read back now)."""
        if self._unread:
            self._read += torch.stack(self._unread).tolist()  # one transfer for them all
            self._unread.clear()
        return self._read

    def extend(self, later: TrainingLog) -> TrainingLog:
        """This log with the steps of `later`, a run that continued it, added: its step
        count, each loss and the seconds (train_steps(..., log=this) does it)."""
        if later.step - len(later.step_seconds) != self.step:
            raise ValueError(f"a run from step {later.step - len(later.step_seconds)} cannot "
                             f"continue a log at step {self.step}")  # fmt: skip
        self.losses.extend(later.losses)  # both read back: the order stays the steps' order
        self.step = later.step
        self.seconds += later.seconds
        self.step_seconds += later.step_seconds
        return self


def _to(batch, device):
    """A batch on `device`: one tensor, or a tuple of them."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    return tuple(t.to(device) for t in batch)


def translation_loss(model: nn.Module, batch, criterion: nn.Module) -> torch.Tensor:
    """criterion(model(src, tgt_in), tgt_out) over every target position: the loss a
    training step takes, teacher-forced, for a batch (src, tgt_in, tgt_out)."""
    src, tgt_in, tgt_out = batch
    logits = model(src, tgt_in)  # (B, T_tgt, V)
    return criterion(logits.flatten(0, 1), tgt_out.flatten())  # (B*T_tgt, V), (B*T_tgt,)


def checked_device(device, model: nn.Module, criterion: nn.Module, batch) -> torch.device:
    """The device to train on: `device`, or the CPU where `device` is Apple's MPS and the
    model's loss on `batch` (its first) is not the CPU's (course.utils.mps_checked says so
    in one line). Call it before moving the model; on any other device it computes nothing."""
    return mps_checked(device, model, lambda m, b: translation_loss(m, b, criterion), batch)


def train_steps(
    model: nn.Module,
    batches: Iterator,
    optimizer: torch.optim.Optimizer,
    criterion: nn.Module | None,
    steps: int,
    *,
    loss_fn: Callable[[nn.Module, object], torch.Tensor] | None = None,
    scheduler=None,
    clip_norm: float = 0.0,
    device: torch.device | str = "cpu",
    start_step: int = 0,
    time_budget: float | None = None,
    on_step: Callable[[TrainingLog], None] | None = None,
    desc: str = "train",
    progress_every: float = 0.1,
    progress: bool = True,
    clock: Callable[[], float] = time.perf_counter,
    bf16: bool = False,
    log_every: int = 10,
    log: TrainingLog | None = None,
) -> TrainingLog:
    """The training loop: teacher-forced steps from `start_step` until `steps`, or until
    the steps have taken `time_budget` seconds. One loop for the CLI, lesson 09 and its
    RNN baseline, lesson 10's variants, lesson 11 and lesson 12's language model.

    Each step takes the next (src, tgt_in, tgt_out) from `batches`, computes
    criterion(model(src, tgt_in), tgt_out) over every target position (or, given
    loss_fn instead of a criterion, loss_fn(model, batch) of any batch: lesson 12 passes
    course.lm.lm_loss and batches of token rows), clips the
    gradients' norm to `clip_norm` (0: no clipping), steps the optimizer and the
    scheduler (if any). After each step on_step(log) may evaluate or save: the model is
    put back in train mode before the next step, and on_step's time is not counted.
    A progress bar goes to stderr (unless `progress` is False), redrawn at most every
    `progress_every` seconds (a notebook keeps every redraw: give it a few seconds there).

    `clock` times the steps: wall-clock time by default. time.process_time counts only the
    CPU time this process used, which on one thread and a quiet machine is the same, and on
    a busy machine leaves out the time other programs held the cores.

    bf16=True runs the forward pass and the loss under bf16 autocast on `device`'s type
    (torch.autocast); backward and the optimizer see float32 parameters as before.

    The losses are read back from the device every `log_every` steps and at the end (the
    bar then shows the latest), not at every step: nothing in a step waits for a GPU to
    finish (TrainingLog says why). On a GPU the clock around one step therefore times
    the queuing of its work, and the step that reads the losses back waits for the rest;
    the seconds of the steps add up to the time they took.

    Given `log`, the log of the steps taken so far, the run continues it: it starts at
    log.step (`steps` is still where it ends) and adds its steps, losses and seconds to that
    log, which it returns. Lesson 09 trains this way 50 steps at a time, scoring the model
    between the calls.

    Under `make test` only, a run whose every input equals one that already ran in the same
    test session takes that run's end state instead of training again (course/memo.py).
    """
    if log is not None:
        if start_step not in (0, log.step):
            raise ValueError(f"start_step {start_step} and a log at step {log.step}: give one "
                             "(a run continuing a log starts at its step)")  # fmt: skip
        start_step = log.step
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < start_step:
        raise ValueError(f"steps must be an int >= start_step ({start_step}), got {steps!r}")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
        raise ValueError(f"log_every must be a positive int, got {log_every!r}")
    if (criterion is None) == (loss_fn is None):
        raise ValueError(
            "train_steps needs a criterion (translation batches) or a loss_fn(model, batch), "
            f"exactly one; got criterion={criterion!r} and loss_fn={loss_fn!r}"
        )
    if loss_fn is None:
        loss_fn = partial(translation_loss, criterion=criterion)
    run = partial(_train_loop, model, optimizer=optimizer, loss_fn=loss_fn, steps=steps,
                  scheduler=scheduler, clip_norm=clip_norm, device=device, desc=desc,
                  progress_every=progress_every, progress=progress, clock=clock, bf16=bf16,
                  log_every=log_every)  # fmt: skip
    if memo.folder() is not None and on_step is None:  # make test
        settings = dict(loss=loss_fn, steps=steps, start_step=start_step, clip_norm=clip_norm,
                        device=str(device), bf16=bf16, time_budget=time_budget)  # fmt: skip
        taken = memo.train_once(
            lambda batches: run(batches, time_budget=time_budget, on_step=None,
                                log=TrainingLog(step=start_step)),
            batches, steps - start_step, budgeted=time_budget is not None,
            model=model, optimizer=optimizer, scheduler=scheduler, settings=settings,
        )  # fmt: skip
        return taken if log is None else log.extend(taken)
    return run(batches, time_budget=time_budget, on_step=on_step,
               log=TrainingLog(step=start_step) if log is None else log)  # fmt: skip


def _train_loop(model, batches, *, optimizer, loss_fn, steps, scheduler, clip_norm, device,
                time_budget, on_step, desc, progress_every, progress, clock, bf16, log_every,
                log) -> TrainingLog:  # fmt: skip
    """train_steps' loop itself, its arguments checked, continuing `log`."""
    start_step = log.step
    total = steps if time_budget is None else None  # a budget in seconds: no known end
    bar = tqdm(
        total=total,
        initial=start_step,
        desc=desc,
        file=sys.stderr,
        mininterval=progress_every,
        disable=not progress,
    )

    def show_loss() -> None:  # the last loss and the rate of the next step, on the bar
        lr = optimizer.param_groups[0]["lr"]
        bar.set_postfix(loss=f"{log.losses[-1]:.3f}", lr=f"{lr:.2e}", refresh=False)

    while log.step < steps and (time_budget is None or log.seconds < time_budget):
        started = clock()
        model.train()  # on_step may have evaluated, in eval mode
        batch = _to(next(batches), device)  # (src, tgt_in, tgt_out), or lesson 12's tokens
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model, batch)  # translation: teacher forcing
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        log.record(loss)  # kept on the device: no waiting for it here
        log.step += 1
        if log.step % log_every == 0:
            show_loss()  # reads the last log_every losses back, in one transfer
        log.step_seconds.append(clock() - started)
        log.seconds += log.step_seconds[-1]
        bar.update(1)
        if on_step is not None:
            on_step(log)
    if log.step > start_step:
        show_loss()
    bar.close()
    return log


def output_words(ids: list[int], vocab) -> list[str]:
    """A decoded row as words, strictly: up to its first <eos>, and a <pad> or <bos> the
    model wrote before it kept as "<pad>" / "<bos>" (Vocab.decode would drop it), so that
    it counts as the mistake it is."""
    end = ids.index(EOS_ID) if EOS_ID in ids else len(ids)
    return [vocab.itos[i] for i in ids[:end]]


def corpus_scores(hypotheses: list[list[str]], references: list[list[str]]) -> dict:
    """Exact match (the share of hypotheses equal to their reference, 0-1) and sacrebleu's
    corpus BLEU over the words as they are (tokenize="none": the words are the tokens)."""
    import sacrebleu  # imported here: only evaluation needs it

    if len(hypotheses) != len(references) or not references:
        raise ValueError(
            f"expected as many hypotheses as references, at least one; got "
            f"{len(hypotheses)} and {len(references)}"
        )
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    bleu = sacrebleu.corpus_bleu(
        [" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]], tokenize="none"
    )
    return {"exact_match": exact / len(references), "bleu": round(bleu.score, 2)}


def text_scores(hypotheses: list[str], references: list[str]) -> dict:
    """Scores of real text, as papers report them: exact match (0-1), and sacrebleu's corpus
    BLEU and chrF on detokenized text with its standard tokenizer (13a), which splits off
    punctuation the same way for every system, so that numbers from different tokenizers
    can be compared at all."""
    import sacrebleu

    if len(hypotheses) != len(references) or not references:
        raise ValueError(
            f"expected as many hypotheses as references, at least one; got "
            f"{len(hypotheses)} and {len(references)}"
        )
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="13a")
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {
        "exact_match": exact / len(references),
        "bleu": round(bleu.score, 2),
        "chrf": round(chrf.score, 2),
    }


@torch.no_grad()
def evaluate(
    model: nn.Module,
    task,
    device: torch.device,
    batch_size: int,
    pairs: list | None = None,
    decode: Callable = greedy_decode,
    progress: bool = True,
) -> dict:
    """Decode `pairs` (default: the held-out split) and score them: exact match (0-1) and
    corpus BLEU (sacrebleu), by `corpus_scores`.

    decode(model, src, max_len, bos_id, eos_id) -> (B, T_out) ids, as greedy_decode (the
    default) and beam_search; `progress` shows a bar on stderr. Beside the scores and the
    outputs as text it returns the decoded ids, one (B, T_out) tensor per batch of
    make_batches(pairs, task, batch_size, shuffle=False), to score them without decoding again.
    """
    as_text = pairs is None and task.references is not None  # the held-out split of real text
    pairs = task.test if pairs is None else pairs
    model.eval()
    hypotheses, references, decoded = [], [], []
    batches = make_batches(pairs, task, batch_size, shuffle=False)
    n_batches = math.ceil(len(pairs) / batch_size)
    bar = tqdm(batches, total=n_batches, desc="evaluate", leave=False, disable=not progress)
    for src, _, tgt_out in bar:
        out = decode(model, src.to(device), task.max_tgt_len + 1, BOS_ID, EOS_ID).cpu()
        decoded.append(out)  # (B, T_out)
        hypotheses += [output_words(row, task.tgt_vocab) for row in out.tolist()]
        references += [output_words(row, task.tgt_vocab) for row in tgt_out.tolist()]
    if as_text:  # real text: score it as text, against the references
        hypotheses = [task.detokenize(words) for words in hypotheses]
        references = list(task.references)
        scores = text_scores(hypotheses, references)
    else:
        scores = corpus_scores(hypotheses, references)
        hypotheses, references = (
            [" ".join(h) for h in hypotheses],
            [" ".join(r) for r in references],
        )
    return {
        **scores,
        "n_test": len(references),
        "examples": [
            {"output": h, "reference": r}
            for h, r in list(zip(hypotheses, references, strict=True))[:3]
        ],
        "outputs": hypotheses,  # every output, in the order of the pairs
        "ids": decoded,  # the same outputs as ids, one (B, T_out) tensor per batch
    }


def save_checkpoint(path: Path, state: dict) -> None:
    _write_atomically(path, lambda file: torch.save(state, file))


def _write_json(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=2) + "\n"
    _write_atomically(path, lambda file: file.write(text.encode()))


def smoothed_loss_floor(label_smoothing: float, vocab_size: int) -> float:
    """The lowest label-smoothed cross-entropy a model can reach: the entropy of the target
    distribution itself, 1 - eps + eps/V on the right token and eps/V on each other one
    (torch spreads eps over all V classes). A perfect model sits on it, not at zero."""
    eps, V = label_smoothing, vocab_size
    if eps == 0:
        return 0.0
    right, other = 1 - eps + eps / V, eps / V
    return -(right * math.log(right) + (V - 1) * other * math.log(other))


def plot_losses(path: Path, losses: list[float], config: dict, task_name: str, vocab: int):
    """loss.png: the training loss per step (and its running mean), and the learning rate."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    steps = range(1, len(losses) + 1)
    window = max(1, len(losses) // 50)
    running = [
        sum(losses[max(0, i - window + 1) : i + 1]) / (i + 1 - max(0, i - window + 1))
        for i in range(len(losses))
    ]
    if _setting(config, "schedule") == "constant":
        lrs = [config["lr"] for _ in steps]
    else:
        lrs = [noam_lr(s, config["d_model"], config["warmup"], config["lr_factor"]) for s in steps]
    floor = smoothed_loss_floor(config["label_smoothing"], vocab)
    figure, (loss_ax, lr_ax) = plt.subplots(1, 2, figsize=(11, 4))
    loss_ax.plot(steps, losses, color="0.75", linewidth=0.8, label="per batch")
    loss_ax.plot(steps, running, color="C0", label=f"running mean of {window}")
    loss_ax.axhline(
        floor, color="C3", linestyle="--", label=f"floor of label smoothing: {floor:.3f}"
    )
    loss_ax.set_title(f"{task_name}: training loss (label-smoothed cross-entropy)")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss per target token (nats)")
    loss_ax.legend()
    lr_ax.plot(steps, lrs, color="C1")
    lr_ax.set_title(
        f"learning rate: constant {config['lr']:g}"
        if _setting(config, "schedule") == "constant"
        else f"learning rate: warm-up {config['warmup']} steps, then 1/sqrt(step)"
    )
    lr_ax.set_xlabel("step")
    lr_ax.set_ylabel("learning rate")
    figure.tight_layout()
    _write_atomically(path, lambda file: figure.savefig(file, format="png", dpi=100))
    plt.close(figure)


def _rng_state(device: torch.device) -> dict:
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    # torch's generator state is a CPU ByteTensor, whatever device the checkpoint was read to
    torch.set_rng_state(state["torch"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


# ------------------------------------------------------------ More than one process --
#
# torchrun starts N copies of this program and tells each its place in the environment:
# RANK (0..N-1), LOCAL_RANK (its index on this machine: which GPU it takes),
# LOCAL_WORLD_SIZE (how many run on this machine) and WORLD_SIZE (N). Without torchrun
# there is one process, and `Processes()` changes nothing.
#
# The plan, for N > 1:
# - every process builds the same global batches (the same seed, the same shuffles) and
#   keeps its own slice of the rows (`shard`): batch_size sentences in all, not per process;
# - the model is wrapped in DistributedDataParallel (`wrap`), which averages the
#   gradients over the processes during backward, so every process takes the same step;
# - the loss is normalised by the GLOBAL number of target tokens (`GlobalTokenMean`), so
#   that this average is exactly the gradient of one process's loss on the whole batch;
# - rank 0 alone prints, writes files and evaluates; the others wait for it at the end.


class GlobalTokenMean(nn.Module):
    """Label-smoothed cross-entropy averaged over every target token of the global batch,
    for one process among `world_size` under DistributedDataParallel.

    One process computes sum(loss over the batch's tokens) / n_tokens. A rank that averaged
    over its own tokens would weigh its tokens by 1 / n_rank, and ranks hold different
    numbers of tokens (padding). So each rank sums its own tokens' losses and divides by
    the global count (one all_reduce); it multiplies by world_size because DDP divides
    the summed gradients by world_size. The value returned (and logged) is the global
    mean, the same number on every rank; its gradient is this rank's share.
    """

    def __init__(self, criterion: nn.CrossEntropyLoss, world_size: int):
        super().__init__()
        self.summed = nn.CrossEntropyLoss(
            label_smoothing=criterion.label_smoothing,
            ignore_index=criterion.ignore_index,
            reduction="sum",
        )
        self.world_size = world_size

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        rank_sum = self.summed(logits, targets)  # () this rank's tokens, summed
        rank_count = (targets != self.summed.ignore_index).sum()  # () its real tokens
        totals = torch.stack([rank_sum.detach(), rank_count.to(rank_sum.dtype)])  # (2,)
        dist.all_reduce(totals)  # (2,) summed over the ranks: the global batch's
        global_sum, global_count = totals
        loss = rank_sum * self.world_size / global_count  # DDP's average then is the right one
        return loss + (global_sum / global_count - loss).detach()  # value: the global mean


@dataclass(frozen=True)
class Processes:
    """This process's place among those torchrun started; the defaults: a single process,
    for which every method below changes nothing."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @classmethod
    def from_environment(cls) -> Processes:
        env = os.environ
        if "WORLD_SIZE" not in env:
            return cls()
        world_size = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            world_size=world_size,
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world_size)),
        )

    @property
    def main(self) -> bool:
        """Rank 0: the process that prints, saves and evaluates."""
        return self.rank == 0

    @contextlib.contextmanager
    def group(self, device: torch.device):
        """The process group (gloo on CPUs, NCCL on GPUs) for the duration of the block,
        destroyed at its end, also on error. At a normal end the other ranks first wait
        at a barrier for rank 0 to finish evaluating and writing."""
        if self.world_size == 1:
            yield
            return
        if device.type == "cuda":
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
        try:
            yield
            dist.barrier()
        finally:
            dist.destroy_process_group()

    def shard(self, batch: tuple) -> tuple:
        """This rank's rows of a global batch (src, tgt_in, tgt_out), each (B, T).

        torch.tensor_split cuts B rows into world_size contiguous slices; when world_size
        does not divide B, the first B % world_size ranks get one row more. The padding is
        the global batch's, so each row is computed as in one process. A rank left with no
        row (an epoch's short last batch, fewer rows than ranks) takes the last row with
        every target set to padding: it runs the model (DDP needs every rank's backward)
        and adds nothing to the loss or to the gradients.
        """
        if self.world_size == 1:
            return batch
        src, tgt_in, tgt_out = (t.tensor_split(self.world_size)[self.rank] for t in batch)
        if len(src) == 0:
            src, tgt_in = batch[0][-1:], batch[1][-1:]  # (1, T_src), (1, T_tgt)
            tgt_out = torch.full_like(batch[2][-1:], PAD_ID)  # (1, T_tgt): all ignored
        return src, tgt_in, tgt_out

    def wrap(self, model: nn.Module, criterion: nn.CrossEntropyLoss, device: torch.device):
        """(model, criterion) to train with: DDP and the global token mean for N > 1."""
        if self.world_size == 1:
            return model, criterion
        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids), GlobalTokenMean(
            criterion, self.world_size
        )

    def seed_own_stream(self, seed: int, step: int = 0) -> None:
        """Ranks 1.. draw their dropout masks from a stream of their own, a function of
        (seed, rank, step); rank 0 keeps the stream a single process would use."""
        if self.rank > 0:
            torch.manual_seed(((seed * 1_000_003 + self.rank) * 1_000_003 + step) % 2**63)

    def rng_states(self, device: torch.device) -> dict:
        """The random state to checkpoint: "rng" (rank 0's), and with N > 1 "rng_ranks",
        every rank's (a collective: every rank must call it)."""
        state = _rng_state(device)
        if self.world_size == 1:
            return {"rng": state}
        states = [None] * self.world_size
        dist.all_gather_object(states, state)
        return {"rng": states[0], "rng_ranks": states}

    def restore_rng(self, checkpoint: dict, device: torch.device, seed: int) -> None:
        """Each rank takes back its own random state; a rank the checkpoint has none for
        (it was saved by fewer processes) starts its own stream at the checkpoint's step."""
        states = checkpoint.get("rng_ranks", [checkpoint["rng"]])
        if self.rank < len(states):
            _set_rng_state(states[self.rank], device)
        else:
            self.seed_own_stream(seed, checkpoint["step"])


def _parse_override(text: str, config: dict) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or key not in config:
        known = ", ".join(sorted(config))
        raise UsageError(f"--set expects KEY=VALUE with KEY one of: {known}; got {text!r}")
    default = config[key]
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return key, value.lower() in ("true", "1")
        return key, type(default)(value)
    except ValueError:
        kind = {bool: "true or false", int: "an int", float: "a number"}[type(default)]
        raise UsageError(
            f"--set {key}= expects {kind} (default {default!r}), got {value!r}"
        ) from None


def _resolve_device(name: str, processes: Processes) -> torch.device:
    """The device --device names (auto: CUDA, then Apple's MPS, then the CPU; course.utils.
    device); with N processes on GPUs, each its own: cuda:LOCAL_RANK."""
    try:
        device = _device(name)
    except ValueError as error:
        raise UsageError(f"--device {error}") from None
    if device.type == "mps" and processes.world_size > 1:
        raise UsageError("--device mps: torchrun's processes cannot share Apple's GPU; use cpu")
    if device.type == "cuda" and processes.world_size > 1:
        if device.index is not None:
            raise UsageError(
                f"--device {name}: with {processes.world_size} processes each takes its own "
                "GPU, cuda:LOCAL_RANK; pass --device cuda (or auto)"
            )
        if processes.local_world_size > torch.cuda.device_count():  # every rank sees it
            raise UsageError(
                f"{processes.local_world_size} processes on this machine and "
                f"{torch.cuda.device_count()} GPUs: each process needs a GPU of its own; "
                "start at most one per GPU (--nproc_per_node), or use --device cpu"
            )
        device = torch.device("cuda", processes.local_rank)
    return device


# torch.compile's modes: "reduce-overhead" adds CUDA graphs (a GPU only; on the CPU it is
# "default"), "max-autotune" tries kernels for each shape (a long compile).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m course.train",
        description="Train the course's Transformer on a task, evaluate it on the held-out "
        "split, and write a checkpoint, config.json, metrics.json and loss.png to --out. "
        "The last line on stdout is the metrics as one JSON object.",
    )
    parser.add_argument("--task", required=True, choices=TASKS, help="which task to learn")
    parser.add_argument(
        "--model",
        choices=tuple(MODELS),
        default="transformer",
        help="the course's Transformer (default), or the PyTorch tutorial's GRU with attention "
        "and its recipe (lesson 11's baseline; output in runs/<task>-tutorial-gru)",
    )
    parser.add_argument("--steps", type=int, help="optimizer steps (default: the task's)")
    parser.add_argument("--seed", type=int, default=0, help="seeds data order, init, dropout")
    parser.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA, else Apple's MPS, else the CPU), cpu, cuda, mps",
    )
    parser.add_argument("--out", type=Path, help="output folder (default: runs/<task>)")
    parser.add_argument(
        "--resume", action="store_true", help="continue from the checkpoint in --out"
    )
    parser.add_argument(
        "--compile",
        nargs="?",
        const="default",
        choices=COMPILE_MODES,
        help="train through torch.compile (a GPU's launches fused; compiling takes a minute "
        "or more first, and needs a C++ compiler on the CPU); --compile reduce-overhead "
        "also replays each step as CUDA graphs on a GPU (a small model's launches at once)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one entry of the task's configuration, e.g. --set d_model=128",
    )
    return parser.parse_args(argv)


def _median(seconds: list[float]) -> float | None:
    """The median of `seconds` to 0.1 ms, None for no steps (a resumed run already done)."""
    return round(statistics.median(seconds), 4) if seconds else None


def _remaining_budget(config: dict, seconds_so_far: float) -> float | None:
    """The training seconds left of config's time_budget (None: no budget)."""
    budget = _setting(config, "time_budget")
    return budget - seconds_so_far if budget else None


def _decoder(config: dict, beam: bool = True) -> Callable:
    """How evaluation decodes: greedy, or beam search (alpha 0.6) with beam_size > 1. The
    Transformer decodes with lesson 10's KV cache (greedy and beam search alike: the
    outputs of recomputing but for a tie in the last digits, several times faster), unless
    its positions are ones the cache does not know (--set positions=learned)."""
    beam_size = _setting(config, "beam_size") if beam else 1
    cached = _setting(config, "architecture") == "transformer" and config.get(
        "positions", "sinusoidal"
    ) in ("sinusoidal", "rotary")
    if beam_size > 1:
        from course.decoding import beam_search
        from course.efficient import cached_beam_search

        search = cached_beam_search if cached else beam_search
        return lambda model, src, max_len, bos, eos: search(
            model, src, max_len, bos, eos, beam_size=beam_size, alpha=0.6
        )
    if _setting(config, "architecture") == "tutorial-gru":  # one GRU step a token
        return lambda model, src, max_len, bos, eos: model.generate(src, bos, eos, max_len)
    if cached:
        from course.efficient import cached_greedy_decode

        return cached_greedy_decode
    return greedy_decode


def _comparable(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in RESUMABLE_CHANGES}


def _load_for_resume(path: Path, task_name: str, seed: int, config: dict, device) -> dict:
    """The checkpoint at `path`, if it belongs to this task, seed and configuration."""
    if not path.exists():
        raise UsageError(f"--resume: there is no checkpoint at {path} (run without --resume)")
    try:
        # read to the CPU: the random states must stay CPU tensors, and a checkpoint saved on
        # a GPU then resumes on a machine without one; load_state_dict moves the weights
        # and the optimizer's moments to the model's device.
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UsageError(
            f"--resume: cannot read {path} as a checkpoint ({error}); it was left untouched"
        ) from None
    needed = {"task", "seed", "config", "step", "epoch", "position", "model", "optimizer",
              "scheduler", "rng", "losses", "train_seconds"}  # fmt: skip
    present = set(checkpoint) if isinstance(checkpoint, dict) else set()
    if not needed <= present:
        raise UsageError(
            f"--resume: {path} is not a checkpoint of course.train (it lacks "
            f"{', '.join(sorted(needed - present))}); it was left untouched"
        )
    differences = []
    if checkpoint["task"] != task_name:
        differences.append(f"task {checkpoint['task']!r} (this run: {task_name!r})")
    if checkpoint["seed"] != seed:
        differences.append(f"seed {checkpoint['seed']} (this run: {seed})")
    # a checkpoint from before the bf16 setting trained in float32 everywhere
    theirs, ours = _comparable({"bf16": False, **checkpoint["config"]}), _comparable(config)
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            differences.append(f"{key}={theirs.get(key)!r} (this run: {ours.get(key)!r})")
    if differences:
        raise UsageError(
            f"--resume: {path} was written by another run: "
            + "; ".join(differences)
            + ". Resume with the same task, seed and configuration, or train afresh in "
            "another --out folder. The checkpoint was left untouched."
        )
    if checkpoint["step"] > config["steps"]:
        raise UsageError(
            f"--resume: {path} is at step {checkpoint['step']}, past --steps {config['steps']}. "
            "The checkpoint was left untouched."
        )
    return checkpoint


def run(args: argparse.Namespace) -> dict | None:
    """Train and evaluate as `args` asks; returns the metrics. Raises UsageError.

    Under torchrun each process calls it: rank 0 returns the metrics, the others None.
    """
    if args.task in LM_TASKS:  # lesson 12: a language model, its own loop (below)
        if getattr(args, "compile", False):
            raise UsageError(f"--compile is for the translation tasks, not --task {args.task}")
        return run_language_model(args)
    processes = Processes.from_environment()
    config = {**CONFIGS[args.task], **MODELS[args.model]}
    for text in args.set:
        key, value = _parse_override(text, config)
        config[key] = value
    if args.steps is not None:
        config["steps"] = args.steps
    for key in ("steps", "batch_size", "warmup", "checkpoint_every", "eval_batch_size"):
        if config[key] < 1:
            raise UsageError(f"{key} must be at least 1, got {config[key]}")
    for key, allowed, rule in (
        ("label_smoothing", lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
        ("lr_factor", lambda v: v > 0.0, "greater than 0"),
        ("clip_norm", lambda v: v >= 0.0, "at least 0 (0: no clipping)"),
    ):
        if not allowed(config[key]):  # NaN fails every rule
            raise UsageError(f"{key} must be {rule}, got {config[key]}")
    for key, allowed, rule in (
        ("time_budget", lambda v: v >= 0.0, "at least 0 seconds (0: no limit)"),
        ("schedule", lambda v: v in ("noam", "constant"), "'noam' or 'constant'"),
        ("lr", lambda v: v > 0.0, "greater than 0"),
        ("beam_size", lambda v: v >= 1, "at least 1 (1: greedy decoding)"),
    ):
        if key in config and not allowed(config[key]):
            raise UsageError(f"{key} must be {rule}, got {config[key]!r}")
    if _setting(config, "time_budget") and processes.world_size > 1:
        raise UsageError(
            "time_budget counts each process's own seconds, so under torchrun the processes "
            "could stop at different steps: pass --set time_budget=0 and --steps N"
        )
    if config["batch_size"] < processes.world_size:
        raise UsageError(
            f"batch_size is the global batch, split across the {processes.world_size} "
            f"processes: it must be at least {processes.world_size}, got {config['batch_size']}"
        )
    device = _resolve_device(args.device, processes)
    with use_threads(_threads(config)), processes.group(device):
        return _train_and_evaluate(args, config, device, processes)


def _threads(config: dict) -> int:
    """The CPU threads a run trains on: its `threads` setting, or for 0 the course's
    policy, course_threads()."""
    threads = config["threads"]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise UsageError(f"threads must be an int, at least 0 (0: the course's), got {threads!r}")
    return threads or course_threads()


def _train_and_evaluate(
    args: argparse.Namespace, config: dict, device: torch.device, processes: Processes
) -> dict | None:
    """run()'s work once the configuration and the device are settled (inside the group)."""
    default_out = args.task if args.model == "transformer" else f"{args.task}-{args.model}"
    out = args.out if args.out is not None else Path("runs") / default_out
    checkpoint_path = out / CHECKPOINT
    checkpoint = None
    if args.resume:  # checked before anything is written; every rank reads it
        checkpoint = _load_for_resume(checkpoint_path, args.task, args.seed, config, device)

    seed_everything(args.seed)
    task = load_task(args.task, seed=args.seed)
    try:
        model = build_model(task, config)
    except ValueError as error:  # a setting the model refuses, e.g. --set positions=foo
        raise UsageError(f"the configuration cannot build a model: {error}") from None
    criterion = nn.CrossEntropyLoss(label_smoothing=config["label_smoothing"], ignore_index=PAD_ID)
    if device.type == "mps":  # Apple's GPU: its first loss against the CPU's, or the CPU
        first = next(training_batches(task, config["batch_size"], args.seed, 0, 0))[2]
        device = checked_device(device, model, criterion, first)
    model = model.to(device)
    processes.seed_own_stream(args.seed)  # after the init, which is the same on every rank
    optimizer, scheduler = build_optimizer(model, config)
    step, epoch, position, losses, train_seconds = 0, 0, 0, [], 0.0
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        step, epoch, position = checkpoint["step"], checkpoint["epoch"], checkpoint["position"]
        losses, train_seconds = list(checkpoint["losses"]), checkpoint["train_seconds"]
        processes.restore_rng(checkpoint, device, args.seed)  # after the model's init drew
        if processes.main:
            print(f"resuming {checkpoint_path} at step {step}", file=sys.stderr)
    # DDP and the global token mean with N processes; with one, model and criterion as they are
    trained, criterion = processes.wrap(model, criterion, device)
    compile_mode = getattr(args, "compile", None)
    if compile_mode:  # training only: evaluation decodes with the model itself (shapes vary)
        trained = torch.compile(trained, mode=compile_mode)
    bf16 = bool(config.get("bf16")) and device.type == "cuda"
    if processes.main:
        out.mkdir(parents=True, exist_ok=True)
        _write_json(out / "config.json", {"task": args.task, "seed": args.seed, **config})

    def save() -> None:
        rng = processes.rng_states(device)  # every rank's (with N processes, a collective)
        if not processes.main:
            return
        save_checkpoint(
            checkpoint_path,
            {
                "task": args.task,
                "seed": args.seed,
                "config": config,
                "step": step,
                "epoch": epoch,
                "position": position,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                **rng,
                "losses": losses,
                "train_seconds": train_seconds,
            },
        )

    cursor = {"epoch": epoch, "position": position}  # where in the data the last batch was

    def batches() -> Iterator:
        for cursor["epoch"], cursor["position"], batch in training_batches(
            task, config["batch_size"], args.seed, epoch, position
        ):
            yield processes.shard(batch)  # the whole batch, or this rank's rows of it

    earlier_losses, earlier_seconds = losses, train_seconds

    def after_step(log: TrainingLog) -> None:
        nonlocal step, epoch, position, losses, train_seconds
        step, epoch, position = log.step, cursor["epoch"], cursor["position"]
        train_seconds = earlier_seconds + log.seconds
        if step % config["checkpoint_every"] == 0 or step == config["steps"]:
            losses = earlier_losses + log.losses  # read back now, not at every step
            save()  # not timed: saving is not training

    budget = _remaining_budget(config, train_seconds)
    spent = budget is not None and budget <= 0  # a resumed run whose time is used up
    log = train_steps(
        trained,
        batches(),
        optimizer,
        criterion,
        step if spent else config["steps"],
        scheduler=scheduler,
        clip_norm=config["clip_norm"],
        device=device,
        start_step=step,
        time_budget=None if spent else budget,
        on_step=after_step,
        desc=f"train {args.task}",
        progress=processes.main,
        bf16=bf16,
    )
    losses = earlier_losses + log.losses
    if budget is not None and not spent and step % config["checkpoint_every"] != 0:
        save()  # the time ran out between two checkpoints: keep the last step too
    if not processes.main:
        return None  # rank 0 evaluates and writes; this rank waits for it (Processes.group)
    if checkpoint is not None and checkpoint["step"] == step:
        print(f"{checkpoint_path} is at step {step} already: evaluating", file=sys.stderr)

    eval_started = time.perf_counter()
    results = evaluate(model, task, device, config["eval_batch_size"], decode=_decoder(config))
    if _setting(config, "beam_size") > 1:  # greedy beside beam search, on the same model
        greedy = evaluate(
            model, task, device, config["eval_batch_size"], decode=_decoder(config, beam=False)
        )
        results["greedy"] = {
            key: greedy[key] for key in ("exact_match", "bleu", "chrf") if key in greedy
        }
    metrics = {
        "task": args.task,
        "exact_match": results["exact_match"],
        "bleu": results["bleu"],
        **{key: results[key] for key in ("chrf", "greedy") if key in results},
        "train_seconds": round(train_seconds, 2),
        # this run's typical step (the median: a compiled run's first steps wait for the
        # compiler), so that steps per second compare across devices and options
        "median_step_seconds": _median(log.step_seconds),
        "params": sum(p.numel() for p in model.parameters()),
        "steps": step,
        "device": str(device),
        "seed": args.seed,
        "final_loss": round(sum(losses[-100:]) / max(1, len(losses[-100:])), 4),
        "n_test": results["n_test"],
        "eval_seconds": round(time.perf_counter() - eval_started, 2),
        "decoding": "greedy"
        if _setting(config, "beam_size") == 1
        else f"beam {config['beam_size']}",
        "architecture": _setting(config, "architecture"),
        "bleu_tokenize": "13a" if task.references is not None else "none",
        "threads": torch.get_num_threads(),
        "processes": processes.world_size,
        "bf16": bf16,
        "compiled": compile_mode is not None,
        "compile_mode": compile_mode,
        "examples": results["examples"],
    }
    _write_json(out / "metrics.json", metrics)
    plot_losses(out / "loss.png", losses, config, args.task, len(task.tgt_vocab))
    return metrics


# ------------------------------------------------------------ lesson 12: --task lm-en --
# A decoder-only language model (course.lm) on the English side of the Tatoeba file: the
# same command line, the same files in --out, and a last JSON line with the held-out
# perplexity beside the unigram and bigram baselines' on the same split. No --resume, no
# torchrun, no --model for this task; the checkpoint (course.lm.save_lm's format, what
# python -m course.generate reads) is written once, at the end. The loop is train_steps,
# through _NextToken.

LM_TASKS: tuple[str, ...] = ("lm-en",)
TASKS = (*TASKS, *LM_TASKS)  # the choices of --task
# Measured for 10 minutes on the 2-core machine (docs/gpt.md). Small and fast
# rather than wide, as on fra-eng (more steps in the same time): no dropout (under two passes
# over 91,583 sentences, nothing to regularise yet), a short warm-up, then a constant rate.
# One torch thread: the matrices of a model this small gain little from a second thread, and
# on a shared machine two threads wait for each other (docs/training.md's table of threads,
# measured by `make timings`): the course's policy, threads=0.
CONFIGS["lm-en"] = dict(
    d_model=128,
    n_heads=4,
    n_layers=4,
    d_ff=512,
    dropout=0.0,
    vocab_size=4000,  # course.lm.LM_VOCAB_SIZE
    max_len=64,  # at least the longest sequence; room for generation after a prompt
    steps=100_000,  # a ceiling: time_budget ends the run
    time_budget=600.0,
    batch_size=64,
    lr=2e-3,
    warmup=100,
    clip_norm=1.0,
    eval_batch_size=256,
    threads=0,
)
LM_PROMPTS = ("I", "Tom", "Where is", "Can you")  # the examples in metrics.json


class _NextToken(nn.Module):
    """A LanguageModel called as train_steps calls a translation model, model(src, tgt_in):
    src is ignored, tgt_in is the tokens read (<bos> pieces), tgt_out those to predict."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(tgt_in)  # (B, T) -> (B, T, V)


def _lm_training_batches(sequences: list, batch_size: int, seed: int) -> Iterator:
    """(src, tgt_in, tgt_out) for train_steps, epoch after epoch, each epoch shuffled by
    its own seeded generator; tgt_in = tokens[:, :-1], tgt_out = tokens[:, 1:]."""
    from course.lm import lm_batches

    epoch = 0
    while True:
        for tokens in lm_batches(sequences, batch_size, True, _epoch_generator(seed, epoch)):
            yield tokens[:, :0], tokens[:, :-1], tokens[:, 1:]  # (B, 0), (B, T-1), (B, T-1)
        epoch += 1


def run_language_model(args: argparse.Namespace) -> dict:
    """`python -m course.train --task lm-en`: train, measure perplexity, save; the metrics."""

    if args.resume:
        raise UsageError(f"--resume is not supported for {args.task}: train afresh")
    if args.model != "transformer":
        raise UsageError(f"--model {args.model} is for the translation tasks, not {args.task}")
    processes = Processes.from_environment()
    if processes.world_size > 1:
        raise UsageError(f"{args.task} trains in one process: run it without torchrun")
    config = dict(CONFIGS[args.task])
    for text in args.set:
        key, value = _parse_override(text, config)
        config[key] = value
    if args.steps is not None:
        config["steps"] = args.steps
    for key in ("steps", "batch_size", "warmup", "eval_batch_size", "vocab_size", "max_len"):
        if config[key] < 1:
            raise UsageError(f"{key} must be at least 1, got {config[key]}")
    if not config["time_budget"] >= 0 or not config["lr"] > 0 or not config["clip_norm"] >= 0:
        raise UsageError("time_budget and clip_norm must be at least 0, lr greater than 0")
    threads = _threads(config)
    device = _resolve_device(args.device, processes)
    with use_threads(threads):
        return _train_language_model(args, config, device)


def _train_language_model(args: argparse.Namespace, config: dict, device: torch.device) -> dict:
    """run_language_model()'s work once the configuration and the device are settled."""
    from course import lm

    out = args.out if args.out is not None else Path("runs") / args.task
    seed_everything(args.seed)
    data = lm.load_lm_data(seed=args.seed, vocab_size=config["vocab_size"])
    try:
        model = lm.LanguageModel(
            len(data.vocab),
            d_model=config["d_model"],
            n_heads=config["n_heads"],
            n_layers=config["n_layers"],
            d_ff=config["d_ff"],
            dropout=config["dropout"],
            max_len=max(config["max_len"], data.max_len),
        )
    except ValueError as error:
        raise UsageError(f"the configuration cannot build a model: {error}") from None
    criterion = nn.CrossEntropyLoss(ignore_index=PAD_ID)
    if device.type == "mps":  # Apple's GPU: its first loss against the CPU's, or the CPU
        first = next(_lm_training_batches(data.train, config["batch_size"], args.seed))
        device = checked_device(device, _NextToken(model), criterion, first)
    model = model.to(device)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "config.json", {"task": args.task, "seed": args.seed, **config})
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["lr"], betas=(0.9, 0.98), foreach=ADAM_FOREACH
    )
    warmup = config["warmup"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min(1.0, (step + 1) / warmup),  # linear warm-up, then constant
    )
    log = train_steps(
        _NextToken(model),
        _lm_training_batches(data.train, config["batch_size"], args.seed),
        optimizer,
        criterion,
        config["steps"],
        scheduler=scheduler,
        clip_norm=config["clip_norm"],
        device=device,
        time_budget=config["time_budget"] or None,
        desc=f"train {args.task}",
    )
    model.eval()
    eval_started = time.perf_counter()
    V = len(data.vocab)
    perplexity = lm.perplexity(model, data.test, config["eval_batch_size"])
    examples = {}
    for prompt in LM_PROMPTS:
        ids = torch.tensor([[BOS_ID, *data.vocab.encode(prompt)]], device=device)
        greedy = lm.generate(model, ids, 30, temperature=0.0)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        sampled = lm.generate(model, ids, 30, temperature=1.0, top_p=0.9, generator=gen)
        examples[prompt] = {
            "greedy": data.vocab.decode(greedy[0]),
            "top_p_0.9": data.vocab.decode(sampled[0]),
        }
    metrics = {
        "task": args.task,
        "perplexity": round(perplexity, 3),
        "bigram_perplexity": round(lm.bigram_perplexity(data.train, data.test, V), 3),
        "unigram_perplexity": round(lm.unigram_perplexity(data.train, data.test, V), 3),
        "train_seconds": round(log.seconds, 2),
        "median_step_seconds": _median(log.step_seconds),
        "params": sum(p.numel() for p in model.parameters()),
        "steps": log.step,
        "device": str(device),
        "seed": args.seed,
        "final_loss": round(sum(log.losses[-100:]) / max(1, len(log.losses[-100:])), 4),
        "n_train": len(data.train),
        "n_test": len(data.test),
        "n_test_tokens": sum(len(s) - 1 for s in data.test),
        "vocab_size": V,
        "eval_seconds": round(time.perf_counter() - eval_started, 2),
        "threads": torch.get_num_threads(),
        "examples": examples,
    }
    lm.save_lm(out / CHECKPOINT, model, data.vocab, task=args.task, seed=args.seed,
               config=config, steps=log.step, losses=log.losses)  # fmt: skip
    _write_json(out / "metrics.json", metrics)
    return metrics


def main(argv: list[str] | None = None) -> int:
    """The command line: returns the exit status (0, or 2 for a usage problem)."""
    args = parse_args(argv)
    try:
        metrics = run(args)
    except UsageError as error:
        if Processes.from_environment().main:  # every rank stops; one says why
            print(f"python -m course.train: error: {error}", file=sys.stderr)
        return 2
    if metrics is None:  # a rank other than 0 under torchrun: rank 0 prints
        return 0
    if metrics["task"] in LM_TASKS:  # lesson 12: perplexities, no exact match
        print(
            f"{metrics['task']}: perplexity {metrics['perplexity']:.2f} (bigram "
            f"{metrics['bigram_perplexity']:.2f}, unigram {metrics['unigram_perplexity']:.2f}) "
            f"on {metrics['n_test_tokens']} held-out tokens; {metrics['steps']} steps in "
            f"{metrics['train_seconds']:.0f} s on {metrics['device']}"
        )
        print(json.dumps(metrics))
        return 0
    print(
        f"{metrics['task']}: exact match {100 * metrics['exact_match']:.1f}%, "
        f"BLEU {metrics['bleu']:.2f} on {metrics['n_test']} held-out sentences; "
        f"{metrics['steps']} steps in {metrics['train_seconds']:.0f} s on {metrics['device']}"
    )
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
