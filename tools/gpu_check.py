"""The GPU check of issue 24, prepared to run in one call on a machine with a CUDA GPU.

    PYTHONPATH=. python3 tools/gpu_check.py --out "$OUT"          # on the GPU machine
    python tools/gpu_check.py --device cpu --quick --out /tmp/gc  # a dry run on a CPU

It measures, in this order (the most wanted first, so that a short lease still returns them):

1. resume: `course.train --task reverse` for 2N steps without a break (twice, to see how
   far two identical GPU runs differ), and for N steps then `--resume` to 2N; the resumed
   run must reach the same step and data position, and its losses must match the
   uninterrupted run's as closely as two uninterrupted runs match each other. The step-N
   checkpoint is also resumed with the GPU hidden (CUDA_VISIBLE_DEVICES=""): a GPU
   checkpoint must load on a machine without one.
2. paper: the training step at the issue's sizes (6 + 6 layers, d_model 512, B 64, T 64),
   ours explicit, fused and torch.compile'd fused against torch.nn.Transformer, float32
   and bf16 autocast (make bench's training rows at those sizes, 20 interleaved repeats).
3. train: `make train`'s task (toy-translation, 600 steps) on the GPU in bf16 (the default
   there), with --compile reduce-overhead (CUDA graphs), with --compile, and in float32;
   steps per second over the whole run and at the median step's pace, beside a 200-step
   run on two of the machine's CPU cores.
4. bench: `python -m course.bench --device D`, float32 and `--bf16` (make bench's table).

Each part runs in its own processes with a time limit taken from what is left of --budget
seconds; a part that fails or runs out of time is recorded, and the next one runs.
results.json (figures) and log.md (every command, its seconds, the end of its output) are
rewritten in --out after every command, so whatever finished comes back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Check:
    """Runs commands under one overall time budget and keeps their record in --out."""

    def __init__(self, out: Path, budget: float, least: float = 10.0):
        # least: a command with fewer seconds left than this is not started
        self.out, self.deadline, self.least = out, time.monotonic() + budget, least
        self.results: dict = {}
        self.log: list[str] = []
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, command: list[str], limit: float, env: dict | None = None) -> tuple[int, str]:
        """Run `command` in the repository root for at most `limit` seconds (less if the
        budget has less left). Returns (exit status, its stdout); 124 when it ran out of
        time. The log keeps the end of stdout and stderr together."""
        limit = min(limit, self.left())
        if limit < self.least:
            self.note(f"skipped (budget spent): `{' '.join(command)}`")
            return 124, ""
        started = time.monotonic()
        environment = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
                       **(env or {})}  # fmt: skip
        try:
            done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True,
                                  text=True, timeout=limit)  # fmt: skip
            status, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as stopped:
            status = 124
            stdout, stderr = (
                part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                for part in (stopped.stdout, stopped.stderr)
            )
        seconds = time.monotonic() - started
        shown = " ".join(command) if not env else f"{env} {' '.join(command)}"
        lines = (stdout + stderr).strip().splitlines()[-25:]
        tail = "\n".join(line.split("\r")[-1] for line in lines)  # a progress bar's last state
        self.note(f"`{shown}`: exit {status}, {seconds:.1f} s\n\n```\n{tail}\n```")
        return status, stdout

    def note(self, text: str) -> None:
        self.log.append(text)
        self.save()

    def save(self) -> None:
        (self.out / "log.md").write_text("\n\n".join(self.log) + "\n")
        (self.out / "results.json").write_text(json.dumps(self.results, indent=1) + "\n")


def train(check: Check, args, out: Path, *extra: str, limit: float, env=None) -> dict | None:
    """One `python -m course.train` run; its metrics (the last stdout line), or None."""
    command = [sys.executable, "-m", "course.train", "--out", str(out), *extra]
    status, output = check.run(command, limit, env)
    if status != 0:
        return None
    try:
        return json.loads(output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None


def checkpoint_of(run: Path) -> dict:
    import torch

    return torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)


def largest_difference(a: list[float], b: list[float]) -> float | None:
    if len(a) != len(b):
        return None
    return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0.0)


def weights_difference(a: dict, b: dict) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def compare(a: dict, b: dict) -> dict:
    """Two checkpoints of the same task, seed and steps: where they are and how far apart."""
    return {
        "same_step_epoch_position": all(a[k] == b[k] for k in ("step", "epoch", "position")),
        "loss_difference": largest_difference(a["losses"], b["losses"]),
        "weight_difference": weights_difference(a["model"], b["model"]),
    }


def part_resume(check: Check, args) -> None:
    n = 10 if args.quick else 100
    runs = check.out / "runs"
    task = ["--task", "reverse", "--device", args.device, "--seed", "0",
            "--set", f"checkpoint_every={n}"]  # fmt: skip
    limit = 60 if args.quick else 150
    whole = train(check, args, runs / "whole", *task, "--steps", str(2 * n), limit=limit)
    again = train(check, args, runs / "again", *task, "--steps", str(2 * n), limit=limit)
    first = train(check, args, runs / "resumed", *task, "--steps", str(n), limit=limit)
    result: dict = {"steps_each": n, "whole": whole is not None, "again": again is not None}
    if first is not None:
        shutil.copytree(runs / "resumed", runs / "on_cpu")
        resumed = train(check, args, runs / "resumed", *task, "--steps", str(2 * n),
                        "--resume", limit=limit)  # fmt: skip
        cpu_task = [*task[:3], "cpu", *task[4:]]
        on_cpu = train(check, args, runs / "on_cpu", *cpu_task, "--steps", str(2 * n),
                       "--resume", limit=limit, env={"CUDA_VISIBLE_DEVICES": ""})  # fmt: skip
        result["resumed"] = resumed is not None
        result["gpu_checkpoint_resumed_on_cpu"] = on_cpu is not None and on_cpu["steps"] == 2 * n
        if whole is not None and resumed is not None:
            a = checkpoint_of(runs / "whole")
            result["resumed_vs_whole"] = compare(a, checkpoint_of(runs / "resumed"))
            result["exact_match_whole_resumed"] = [whole["exact_match"], resumed["exact_match"]]
            if again is not None:  # how far two runs without a break differ on this device
                result["again_vs_whole"] = compare(a, checkpoint_of(runs / "again"))
    check.results["resume"] = result
    check.save()


def part_bench(check: Check, args) -> None:
    base = [sys.executable, "-m", "course.bench", "--device", args.device]
    if args.quick:
        base.append("--quick")
    for name, extra in (("float32", []), ("bf16", ["--bf16"])):  # compiled: part "paper"
        status, output = check.run(base + extra, 60 if args.quick else 150)
        table = [line for line in output.splitlines() if " | " in line]  # format_table's
        check.results[f"bench_{name}"] = {"exit": status, "table": table}
        check.save()


# The sizes through make bench's own rows (course.bench.training_rows: ours
# explicit, fused and compiled against torch.nn.Transformer, interleaved repeats, median
# ratios; the FLOP/s row beside), once in float32 and once under bf16 autocast.
PAPER_STEP = """
import dataclasses, json
from course import bench
sizes = dict(bench.QUICK if {quick} else bench.FULL, n_layers={layers}, batch={batch},
             repeats={repeats}, warmup=2)
rows = {{}}
for bf16 in (False, True):
    found = bench.training_rows(sizes, compile_model=True, device="{device}", bf16=bf16)
    print(bench.format_table(found))
    rows["bf16" if bf16 else "float32"] = [dataclasses.asdict(row) for row in found]
print(json.dumps(rows))
"""


def part_paper(check: Check, args) -> None:
    layers, batch = (1, 4) if args.quick else (6, 64)
    code = PAPER_STEP.format(quick=args.quick, layers=layers, batch=batch, device=args.device,
                             repeats=3 if args.quick else 20)  # fmt: skip
    status, output = check.run([sys.executable, "-c", code], 150 if args.quick else 240)
    try:
        rows = json.loads(output.strip().splitlines()[-1]) if status == 0 else None
    except (json.JSONDecodeError, IndexError):
        rows = None
    check.results["paper_sizes"] = {"layers": f"{layers}+{layers}", "batch": batch,
                                    "T": 8 if args.quick else 64, "exit": status,
                                    "rows": rows}  # fmt: skip
    check.save()


def per_second(metrics: dict) -> dict:
    """Steps per second over the whole run (a compiled run's compiling included) and at
    the median step's pace (the rate once compiled)."""
    return {"whole_run": round(metrics["steps"] / metrics["train_seconds"], 2),
            "median_step": round(1 / metrics["median_step_seconds"], 2)}  # fmt: skip


def part_train(check: Check, args) -> None:
    runs = check.out / "runs"
    steps = ["--steps", "30"] if args.quick else []
    task = ["--task", "toy-translation", "--seed", "0", *steps]
    limit = 90 if args.quick else 150
    gpu = [*task, "--device", args.device]
    variants = {  # the most wanted first
        "gpu_bf16": (gpu, limit),
        "gpu_cuda_graphs_bf16": ([*gpu, "--compile", "reduce-overhead"], 2 * limit),
        "gpu_compiled_bf16": ([*gpu, "--compile"], 2 * limit),
        "gpu_float32": ([*gpu, "--set", "bf16=false"], limit),
    }
    results = {}
    for name, (extra, seconds) in variants.items():
        metrics = train(check, args, runs / name, *extra, limit=seconds)
        if metrics is not None:
            kept = ("steps", "train_seconds", "median_step_seconds", "exact_match", "bf16",
                    "compile_mode")  # fmt: skip
            results[name] = {key: metrics[key] for key in kept}
            results[name]["steps_per_second"] = per_second(metrics)
        check.results["train"] = results
        check.save()
    cpus = ["taskset", "-c", "0,1"] if shutil.which("taskset") else []
    cpu_steps = "20" if args.quick else "200"
    command = [*cpus, sys.executable, "-m", "course.train", "--out", str(runs / "cpu_2_cores"),
               "--task", "toy-translation", "--seed", "0", "--steps", cpu_steps, "--device",
               "cpu", "--set", "threads=2"]  # fmt: skip
    status, output = check.run(command, limit)
    if status == 0:
        metrics = json.loads(output.strip().splitlines()[-1])
        results["cpu_2_threads"] = {"steps": metrics["steps"],
                                    "train_seconds": metrics["train_seconds"],
                                    "median_step_seconds": metrics["median_step_seconds"],
                                    "steps_per_second": per_second(metrics)}  # fmt: skip
    check.results["train"] = results
    check.save()


PARTS = {"resume": part_resume, "paper": part_paper, "train": part_train, "bench": part_bench}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_check")))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny runs: a dry run of the script")
    parser.add_argument("--budget", type=float, default=570.0, help="seconds for every part")
    parser.add_argument("--parts", default=",".join(PARTS), help="which, in order")
    args = parser.parse_args(argv)
    check = Check(args.out, args.budget)
    import torch

    check.results["machine"] = {
        "torch": torch.__version__, "cuda": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "cpus": os.cpu_count(), "device": args.device, "quick": args.quick}  # fmt: skip
    check.save()
    for name in args.parts.split(","):
        started = time.monotonic()
        try:
            PARTS[name](check, args)
        except Exception as error:  # one part's failure must not cost the others
            check.note(f"part {name} failed: {type(error).__name__}: {error}")
        check.note(f"part {name}: {time.monotonic() - started:.0f} s")
    print(json.dumps(check.results, indent=1))


if __name__ == "__main__":
    main()
