"""What the grading sandbox costs: one class graded with it and without it, side by side.

    .venv/bin/python tools/sandbox_cost.py                          # 30 copies of lesson 02
    .venv/bin/python tools/sandbox_cost.py --copies 30 --lessons 02,03 --jobs 2 --rounds 2

The class: `--copies` learners, each holding the executed solution notebooks of `--lessons`
(a finished lesson set). It is graded by course.progress.grade with the sandbox (the default
limits) and with none, in alternating order over `--rounds` rounds (with, without; then
without, with; ...) so that a change of the machine's load does not favour one side. Prints
each run's seconds and the 1-minute load average around it, each side's total, and the
ratio; exits 1 if the two sides' verdicts differ anywhere (the sandbox must not change a
grade), 2 when there is no sandbox here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course import progress, sandbox  # noqa: E402
from course.sandbox import Limits  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def make_class(folder: Path, copies: int, lessons: list[str]) -> None:
    for i in range(copies):
        learner = folder / f"learner{i:02d}"
        learner.mkdir(parents=True)
        for lesson in lessons:
            (solution,) = sorted((ROOT / "solutions").glob(f"{lesson}_*.ipynb"))
            shutil.copyfile(solution, learner / solution.name)


def grade_once(folder: Path, lessons: dict, jobs: int, limits: Limits | None):
    learners = progress.find_learners([str(folder)])
    load = os.getloadavg()[0]
    started = time.monotonic()
    rows = progress.grade(learners, lessons, timeout=600, jobs=jobs, sandbox=limits)
    seconds = time.monotonic() - started
    verdicts = [(r.learner, r.exercise, r.verdict.status, r.verdict.message) for r in rows]
    return seconds, load, os.getloadavg()[0], verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=30, help="learners (default 30)")
    parser.add_argument("--lessons", default="02", help="lessons each holds (default 02)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks at once (default 2)")
    parser.add_argument("--rounds", type=int, default=1, help="with/without pairs (default 1)")
    args = parser.parse_args(argv)
    why = sandbox.problem()
    if why:
        print(f"no sandbox here: {why}", file=sys.stderr)
        return 2
    wanted = [w.strip().zfill(2) for w in args.lessons.split(",") if w.strip()]
    every = progress.lesson_exercises()
    lessons = {lesson: every[lesson] for lesson in wanted}
    totals = {"sandbox": 0.0, "none": 0.0}
    seen = {}
    with tempfile.TemporaryDirectory(prefix="sandbox-cost-") as tmp:
        folder = Path(tmp) / "class"
        make_class(folder, args.copies, wanted)
        notebooks = args.copies * len(wanted)
        print(f"{args.copies} learners x lessons {','.join(wanted)} = {notebooks} notebooks, "
              f"--jobs {args.jobs}, {os.cpu_count()} cores")  # fmt: skip
        for round_ in range(args.rounds):
            order = ["sandbox", "none"] if round_ % 2 == 0 else ["none", "sandbox"]
            for side in order:
                limits = Limits() if side == "sandbox" else None
                seconds, before, after, verdicts = grade_once(folder, lessons, args.jobs, limits)
                totals[side] += seconds
                seen.setdefault(side, verdicts)
                print(f"round {round_ + 1} {side:>7}: {seconds:7.1f} s "
                      f"(load {before:.1f} -> {after:.1f})", flush=True)  # fmt: skip
    ratio = totals["sandbox"] / totals["none"]
    print(f"total: sandbox {totals['sandbox']:.1f} s, none {totals['none']:.1f} s, "
          f"sandbox/none = {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)")  # fmt: skip
    if seen["sandbox"] != seen["none"]:
        print("the verdicts differ between the two sides", file=sys.stderr)
        return 1
    passed = sum(v[2] == "passed" for v in seen["none"])
    print(f"verdicts identical on both sides ({passed} of {len(seen['none'])} passed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
