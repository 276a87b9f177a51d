"""Time what the README and docs/ quote, on this machine, into one record: docs/timings.json
(what `make timings` runs; issue 42). The pages' speed figures are written from that record,
never by hand (`--write-docs`), and tests/test_timings.py checks that they agree.

    python tools/timings.py                               # everything, one after the other
    python tools/timings.py --skip test                   # all but `make test` (the longest)
    python tools/timings.py --only site,train             # some; the record keeps the others
    python tools/timings.py --only run-all --lessons 02,05
    python tools/timings.py --write-docs                  # rewrite the pages from the record
                                                          # (and the translated pages, docs/ko/)
    python tools/timings.py --only all --write-docs       # measure everything, then rewrite

What is timed (the names --only and --skip take), each by its wall-clock seconds:
  run-all    Jupyter's Run All Cells on each learner notebook notebooks/NN_*.ipynb as it
             ships: a copy in a temporary folder (the kernel's working folder), a fresh
             kernel started first (not counted: a learner clicks Run All in a running one),
             then every code cell in order with nbclient, on the course's one torch thread
             (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1, as `make test`). Errors do not stop the run
             (allow_errors, as course.progress runs learner notebooks), but a learner notebook
             runs clean (an exercise's stub raises only inside its checker, which catches it),
             so a notebook with an error is reported and not recorded.
  notebooks  `make notebooks` (python -m course.authoring build), in a copy of the working tree
             (it rewrites the notebooks), with each lesson's seconds from its output.
  test       `make test` (pytest -n 2 --dist loadfile, one thread each), in a copy of the
             working tree (a git repository of its own: tests list its files with git; its
             .venv a link to this one, for `make lab`'s test).
  train      `make train` (python -m course.train --task toy-translation) with --out in a
             temporary folder; its last JSON line (train_seconds, the scores) is kept too.
  site       `make site` (tools/build_site.py) with --out in a temporary folder: build/site
             is left as it is.
  progress   `make progress` over notebooks/ (course.progress runs copies of them).
  threads    what a second torch thread does to `make train`'s step: the same task, on one
             thread and on two (--set threads=N), first on the idle machine (200 steps),
             then beside one busy process per core (`while True: pass`; 60 steps); each
             run's median step (median_step_seconds). docs/training.md's table of threads.
A command that fails is reported and not recorded. The copies read the data of lesson 11
and 12 from this checkout's data folder (COURSE_DATA_DIR, else data/), downloading it there
the first time, as the lessons would.

The record: "machine" (CPU model, cores, system, Python, torch) and "entries", one per name
above, each with its command, "seconds", the 1-minute load average before and after it
("load_before", "load_after"), the git commit, whether the working tree differed from it
("dirty", "changed": which files), and the date; run-all holds one such entry per lesson.
Measuring a subset keeps the record's other entries (and --lessons the other lessons), each
with its own commit, date and load. On another machine (another CPU, core count, Python or
torch) it refuses to mix the two, unless --fresh starts a new record.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "timings.json"
NAMES = ["run-all", "notebooks", "test", "train", "site", "progress", "threads"]  # the order
NOTEBOOK = re.compile(r"^(\d\d)_.*\.ipynb$")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ABOUT = (
    "Written by tools/timings.py (make timings); README.md and docs/*.md quote these figures "
    "(python tools/timings.py --write-docs), tests/test_timings.py checks that they agree."
)
SOURCE = "`docs/timings.json`"


class UsageError(ValueError):
    """The command was misused: what was expected and what came."""


class MachineChanged(UsageError):
    """The record was measured on another machine than this one."""


class MeasurementFailed(RuntimeError):
    """A command failed or a notebook raised: nothing to record."""


# ------------------------------------------------------------ machine ----------


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's on Linux, sysctl's on macOS, else platform's."""
    try:
        for line in (
            Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
        ):
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Processor", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            brand = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
            ).stdout.strip()
            if brand:
                return brand
        except OSError:
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine() -> dict:
    """What the record says it was measured on; another value of any key is another machine."""
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count() or 1,
        "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def short_cpu(model: str) -> str:
    """A CPU's model name without its trade marks, core count, clock and filler words:
    'Intel(R) Xeon(R) CPU @ 2.20GHz' -> 'Intel Xeon', 'AMD EPYC 7B13 64-Core Processor' ->
    'AMD EPYC 7B13'."""
    name = re.sub(r"\((?:R|TM)\)", "", model, flags=re.I)
    name = re.sub(r"@.*$", "", name)
    name = re.sub(r"\b\d+-Core\b|\bCPU\b|\bProcessor\b", "", name, flags=re.I)
    return " ".join(name.split()) or "unknown CPU"


def describe(machine: dict, full: bool = True) -> str:
    """The machine in the pages' words: 'a 2-core Intel Xeon' and, full, its torch and Python."""
    text = f"a {machine['cores']}-core {short_cpu(machine['cpu'])}"
    if full:
        text += f" (torch {machine['torch']}, Python {machine['python']})"
    return text


def load() -> float | None:
    """The 1-minute load average (None where the system has none, Windows)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def changed_paths(status: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """`git status --porcelain -z` -> the paths that differ (a rename's new name only)."""
    changed, fields = [], iter(status.split("\0"))
    for field in fields:
        if len(field) > 3:
            changed.append(field[3:])
            if field[0] in "RC":  # a rename or copy: the next field is where it came from
                next(fields, None)
    return sorted(path for path in changed if path not in ignore)


def git_state(root: Path = ROOT, ignore: tuple[str, ...] = ("docs/timings.json",)) -> dict:
    """The commit checked out and the files that differ from it (the record itself aside)."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "-z"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None, "changed": []}
    changed = changed_paths(status, ignore)
    return {"commit": commit, "dirty": bool(changed), "changed": changed[:20]}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------- record ----------


def read_record(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise UsageError(
            f"{path} is not JSON ({error}): repair it, or start anew with --fresh"
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("entries"), dict):
        raise UsageError(f"{path} holds no record of timings: repair it, or use --fresh")
    return record


def write_record(record: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def merge(old: dict | None, here: dict, measured: dict, fresh: bool = False) -> dict:
    """The record after this run: `measured` ({name: entry}) replaces those entries of `old`
    (run-all lesson by lesson) and keeps its others, each with its own commit, date and load.
    `old` from another machine raises MachineChanged, unless `fresh` (a new record)."""
    if old and not fresh and old.get("machine") != here:
        was = old.get("machine") or {}
        diff = ", ".join(
            f"{key} {was.get(key)!r} there, {here.get(key)!r} here"
            for key in sorted(set(was) | set(here))
            if was.get(key) != here.get(key)
        )
        raise MachineChanged(
            f"the record was measured on another machine ({diff}): one record holds one "
            "machine's figures. Measure everything here with --fresh, or write elsewhere with "
            "--record PATH"
        )
    entries = {} if fresh or not old else copy.deepcopy(old["entries"])
    for name, entry in measured.items():
        entry = copy.deepcopy(entry)
        if name == "run-all":
            lessons = dict(entries.get("run-all", {}).get("lessons", {}))
            lessons.update(entry.get("lessons", {}))
            entry["lessons"] = dict(sorted(lessons.items()))
        entries[name] = entry
    ordered = {name: entries[name] for name in NAMES if name in entries}
    ordered |= {name: entry for name, entry in entries.items() if name not in ordered}
    return {"about": ABOUT, "machine": here, "entries": ordered}


def parse_names(text: str | None, default: list[str]) -> list[str]:
    """'site,train' -> ['train', 'site'] (the record's order); 'all' -> every name."""
    if text is None:
        return list(default)
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    if "all" in wanted:
        return list(NAMES)
    unknown = [w for w in wanted if w not in NAMES]
    if unknown or not wanted:
        raise UsageError(f"expected names among {', '.join(NAMES)} (or all), got {text!r}")
    return [name for name in NAMES if name in wanted]


def learner_notebooks(root: Path = ROOT) -> dict[str, Path]:
    """Lesson number -> notebooks/NN_name.ipynb."""
    found = sorted(p for p in (root / "notebooks").glob("*.ipynb") if NOTEBOOK.match(p.name))
    return {NOTEBOOK.match(p.name).group(1): p for p in found}


def parse_lessons(text: str | None, available: list[str]) -> list[str]:
    if text is None:
        return list(available)
    wanted = [w.strip().zfill(2) for w in text.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in available]
    if unknown or not wanted:
        raise UsageError(
            f"--lessons expects lesson numbers among {', '.join(available)}, got {text!r}"
        )
    return sorted(set(wanted))


# ------------------------------------------------------------ running ----------


@dataclass
class Timed:
    seconds: float
    returncode: int
    lines: list[tuple[float, str]]  # (seconds since the start, line) of stdout
    stderr: str


def run_timed(command: list[str], cwd: Path, env: dict | None = None, timeout=None) -> Timed:
    """Run `command`, timing it by the wall clock and each line of its stdout as it comes;
    one still running after `timeout` seconds is killed (and so fails)."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        watchdog = threading.Timer(timeout, process.kill) if timeout else None
        if watchdog:
            watchdog.start()
        try:
            lines = [(time.perf_counter() - start, line.rstrip("\n")) for line in process.stdout]
            returncode = process.wait()
        finally:
            if watchdog:
                watchdog.cancel()
        seconds = time.perf_counter() - start
        err.seek(0)
        return Timed(seconds, returncode, lines, err.read())


def _failed(what: str, timed: Timed) -> MeasurementFailed:
    tail = "\n".join([line for _, line in timed.lines[-15:]] + timed.stderr.splitlines()[-15:])
    return MeasurementFailed(f"{what} exited with {timed.returncode}:\n{tail}")


def data_dir(root: Path = ROOT) -> Path:
    """Where lessons 11 and 12 find their data (course.tatoeba.data_dir for this checkout)."""
    configured = os.environ.get("COURSE_DATA_DIR")
    return Path(configured).expanduser() if configured else root / "data"


def copy_of_the_tree(target: Path, root: Path = ROOT) -> Path:
    """The files a clone of this working tree would hold (tracked, and new ones git does not
    ignore), copied to `target` (tests/test_site.py builds the website from such a copy)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def working_copy(target: Path, root: Path = ROOT) -> Path:
    """A copy of the working tree (copy_of_the_tree) made a git repository of its own (tests
    ask git for its files), with `.venv` a link to the checkout's (`make lab` runs in it)."""
    copy_of_the_tree(target, root)
    if (root / ".venv").is_dir():
        (target / ".venv").symlink_to((root / ".venv").resolve(), target_is_directory=True)
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(command, cwd=target, check=True, capture_output=True)
    return target


def copy_env(copy_root: Path, **extra: str) -> dict:
    """The environment for a command in a copy: the copy's `course` first (the editable
    install points at the checkout), the checkout's data."""
    path = os.environ.get("PYTHONPATH")
    return dict(
        os.environ,
        PYTHONPATH=str(copy_root) + (os.pathsep + path if path else ""),
        COURSE_DATA_DIR=str(data_dir()),
        **extra,
    )


# ------------------------------------------------------ measurements ----------


def run_all_notebook(path: Path, timeout: int = 1800) -> dict:
    """Run All on a copy of the learner notebook `path`: {seconds, kernel_start_seconds, cells}.
    Raises MeasurementFailed if a cell raised (the time of a broken run is no figure)."""
    import nbformat
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
        copy_path = Path(tmp) / path.name
        shutil.copyfile(path, copy_path)
        nb = nbformat.read(copy_path, as_version=4)
        client = NotebookClient(
            nb,
            kernel_name="python3",
            allow_errors=True,
            timeout=timeout,
            record_timing=False,
            resources={"metadata": {"path": tmp}},
        )
        env = dict(
            os.environ,
            **ONE_THREAD,
            PYDEVD_DISABLE_FILE_VALIDATION="1",
            COURSE_DATA_DIR=str(data_dir()),
        )
        started = time.perf_counter()
        with client.setup_kernel(env=env, stderr=subprocess.DEVNULL):
            ready = time.perf_counter()
            code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
            for index, cell in code:
                client.execute_cell(cell, index)
            done = time.perf_counter()
    errors = [
        f"cell {index + 1}: {out.get('ename')}: {out.get('evalue')}"
        for index, cell in code
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    if errors:
        raise MeasurementFailed(f"{path.name} raised: " + "; ".join(errors[:3]))
    return {
        "seconds": round(done - ready, 2),
        "kernel_start_seconds": round(ready - started, 2),
        "cells": len(code),
    }


def stamped(measure) -> dict:
    """measure() with the load before and after it, the commit and the date."""
    before = load()
    entry = measure()
    return {**entry, "load_before": before, "load_after": load(), **git_state(), "date": now()}


def lesson_seconds(lines: list[tuple[float, str]], end: float) -> dict[str, float]:
    """`make notebooks`' output -> each lesson's seconds, from its "executing solutions/NN_..."
    line to its "wrote solutions/NN_....ipynb" line (or the next lesson's, or the end)."""
    starts = []
    for at, line in lines:
        found = re.match(r"executing solutions[/\\](\d\d)_", line)
        if found:
            starts.append((found.group(1), at))
    seconds = {}
    for i, (lesson, at) in enumerate(starts):
        until = starts[i + 1][1] if i + 1 < len(starts) else end
        wrote = [
            t
            for t, line in lines
            if at <= t <= until and re.match(rf"wrote solutions[/\\]{lesson}_.*\.ipynb", line)
        ]
        seconds[lesson] = round((wrote[0] if wrote else until) - at, 2)
    return seconds


def last_json(lines: list[tuple[float, str]]) -> dict:
    for _, line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise MeasurementFailed("no JSON line in the command's output")


def measure_site(timeout) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
        command = [sys.executable, "tools/build_site.py", "--out", f"{tmp}/site"]
        timed = run_timed(command, ROOT, timeout=timeout)
    if timed.returncode:
        raise _failed("make site", timed)
    return {
        "command": "make site (python tools/build_site.py --out <a temporary folder>)",
        "seconds": round(timed.seconds, 2),
    }


def measure_train(timeout) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
        command = [sys.executable, "-m", "course.train", "--task", "toy-translation"]
        timed = run_timed(command + ["--out", f"{tmp}/run"], ROOT, timeout=timeout)
    if timed.returncode:
        raise _failed("make train", timed)
    metrics = last_json(timed.lines)
    return {
        "command": "make train (python -m course.train --task toy-translation --out <a "
        "temporary folder>)",
        "seconds": round(timed.seconds, 2),
        "train_seconds": metrics.get("train_seconds"),
        "output": [line for _, line in timed.lines if line.strip()][-2:],
    }


def measure_progress(timeout) -> dict:
    command = [sys.executable, "-m", "course.progress", "notebooks"]
    timed = run_timed(command, ROOT, timeout=timeout)
    if timed.returncode:
        raise _failed("make progress", timed)
    said = [line for _, line in timed.lines if re.match(r"\d+ of \d+ exercises passed", line)]
    return {
        "command": "make progress (python -m course.progress notebooks)",
        "seconds": round(timed.seconds, 2),
        "notebooks": len(learner_notebooks()),
        "summary": said[-1] if said else None,
    }


def measure_notebooks(timeout) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
        clone = working_copy(Path(tmp) / "repo")
        command = [sys.executable, "-u", "-m", "course.authoring", "build"]
        timed = run_timed(command, clone, copy_env(clone), timeout=timeout)
    if timed.returncode:
        raise _failed("make notebooks", timed)
    return {
        "command": "make notebooks (python -m course.authoring build, in a copy of the "
        "working tree)",
        "seconds": round(timed.seconds, 2),
        "lessons": lesson_seconds(timed.lines, timed.seconds),
    }


def measure_test(timeout) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
        clone = working_copy(Path(tmp) / "repo")
        command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile"]
        timed = run_timed(command, clone, copy_env(clone, **ONE_THREAD), timeout=timeout)
    if timed.returncode:
        raise _failed("make test", timed)
    said = [line for _, line in timed.lines if line.strip()]
    return {
        "command": "make test (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python -m pytest -n 2 "
        "--dist loadfile, in a copy of the working tree)",
        "seconds": round(timed.seconds, 2),
        "summary": said[-1].strip("= ") if said else None,
    }


THREAD_RUNS = (("idle", 1, 200), ("idle", 2, 200), ("busy", 1, 60), ("busy", 2, 60))


def spinners(count: int) -> list[subprocess.Popen]:
    """`count` processes that each keep a core busy until killed."""
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(spin, stdin=subprocess.DEVNULL) for _ in range(count)]


def measure_threads(timeout, runs=THREAD_RUNS) -> dict:
    """`make train`'s task on one thread and on two, idle and beside one busy process per
    core: each run's median step (the loop alone: no loading, no evaluation counted)."""
    measured = []
    start = time.perf_counter()
    for condition, threads, steps in runs:
        busy = spinners(os.cpu_count() or 1) if condition == "busy" else []
        try:
            time.sleep(1.0 if busy else 0)  # the spinners are running before the run starts
            before = load()
            with tempfile.TemporaryDirectory(prefix="course-timings-") as tmp:
                command = [sys.executable, "-m", "course.train", "--task", "toy-translation",
                           "--steps", str(steps), "--set", f"threads={threads}",
                           "--out", f"{tmp}/run"]  # fmt: skip
                timed = run_timed(command, ROOT, timeout=timeout)
        finally:
            for process in busy:
                process.kill()
                process.wait()
        if timed.returncode:
            raise _failed(f"make train on {threads} thread(s), {condition}", timed)
        metrics = last_json(timed.lines)
        if metrics.get("threads") != threads:
            raise MeasurementFailed(
                f"asked for {threads} threads, the run used {metrics.get('threads')}"
            )
        measured.append({
            "condition": condition,
            "threads": threads,
            "steps": metrics["steps"],
            "median_step_seconds": metrics["median_step_seconds"],
            "train_seconds": metrics["train_seconds"],
            "busy_processes": len(busy),
            "load_before": before,
        })  # fmt: skip
    return {
        "command": "make train's task (python -m course.train --task toy-translation --steps N "
        "--set threads=1|2), idle and beside one `while True: pass` process per core",
        "seconds": round(time.perf_counter() - start, 2),
        "runs": measured,
    }


MEASURE = {
    "notebooks": measure_notebooks,
    "test": measure_test,
    "train": measure_train,
    "site": measure_site,
    "progress": measure_progress,
    "threads": measure_threads,
}


def measure(names: list[str], lessons: list[str], timeout: float, say=print) -> tuple[dict, list]:
    """Measure `names` one after the other: ({name: entry}, [what failed])."""
    measured, failed = {}, []
    notebooks = learner_notebooks()
    for name in names:
        if name == "run-all":
            done = {}
            for lesson in lessons:
                path = notebooks[lesson]
                say(f"timing Run All of notebooks/{path.name} ...")
                try:
                    done[lesson] = {
                        "notebook": f"notebooks/{path.name}",
                        **stamped(lambda p=path: run_all_notebook(p, int(timeout))),
                    }
                except MeasurementFailed as error:
                    failed.append(f"run-all {lesson}: {error}")
                    say(f"  not recorded: {error}")
                    continue
                say(f"  {done[lesson]['seconds']:.1f} s (load {done[lesson]['load_before']})")
            if done:
                measured[name] = {
                    "command": "Run All Cells of the learner notebook (a copy, nbclient, "
                    "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1; kernel start not counted)",
                    "lessons": done,
                }
            continue
        say(f"timing make {name} ...")
        try:
            measured[name] = stamped(lambda n=name: MEASURE[n](timeout))
        except MeasurementFailed as error:
            failed.append(f"{name}: {error}")
            say(f"  not recorded: {error}")
            continue
        say(f"  {measured[name]['seconds']:.1f} s (load {measured[name]['load_before']})")
    return measured, failed


# ---------------------------------------------------------- the pages ----------


def duration(seconds: float) -> str:
    """'43 s' under two minutes, '9.8 minutes' from two minutes on."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} minutes"


def loads(entries: list[dict]) -> str:
    """'load average 0.4 to 1.6' over the entries' before and after."""
    values = [e[k] for e in entries for k in ("load_before", "load_after") if e.get(k) is not None]
    if not values:
        return "load average not known"
    low, high = min(values), max(values)
    return f"load average {low:.1f}" + (f" to {high:.1f}" if f"{high:.1f}" != f"{low:.1f}" else "")


def dates(entries: list[dict]) -> str:
    days = sorted({e["date"][:10] for e in entries if e.get("date")})
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "no date"


CODE_SPAN = r"`[^`]*`"


def wrap(text: str, indent: str = "", width: int = 90, whole: str = CODE_SPAN) -> str:
    """`text` wrapped to `width` columns, never inside what `whole` matches (a `code span`),
    and never starting a line with what Markdown would read as a list item, heading, quote
    or table (a narrower width moves such a word on)."""
    glued = re.sub(whole, lambda m: m.group(0).replace(" ", "\0"), text)
    special = re.compile(r"^\s*(?:[-+*#>|=]|\d+[.)])(?:\s|$)")
    for narrower in range(width, width - 30, -1):
        lines = textwrap.wrap(
            glued,
            width=narrower,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        if not any(special.match(line) for line in lines[1:]):
            return "\n".join(lines).replace("\0", " ")
    return text


def _entries(record: dict) -> dict:
    return record.get("entries", {}) if record else {}


def run_all_cell(record: dict, lesson: str) -> str:
    entry = _entries(record).get("run-all", {}).get("lessons", {}).get(lesson)
    return f"{entry['seconds']:.0f} s" if entry else "—"


def run_all_note(record: dict) -> str:
    lessons = _entries(record).get("run-all", {}).get("lessons", {})
    start = "\"Run All\" is how long Jupyter's Run All Cells takes on the learner's notebook"
    if not lessons:
        return wrap(f"{start}: not measured yet (`make timings` measures it into {SOURCE}).")
    parts = [
        f"{start} as it ships (every cell in order in a running kernel, on the course's one "
        f"torch thread), measured with `nbclient` on {describe(record['machine'])}, "
        f"{loads(list(lessons.values()))}, {dates(list(lessons.values()))} (from {SOURCE})."
    ]
    missing = sorted(set(learner_notebooks()) - set(lessons))
    if missing:
        parts.append("A lesson marked — has not been measured yet.")
    else:
        total = sum(e["seconds"] for e in lessons.values())
        parts.append(f"All {len(lessons)}, one after the other: {duration(total)}.")
    built = _entries(record).get("notebooks")
    if built:
        parts.append(
            "`make notebooks`, which runs every solution notebook, took "
            f"{duration(built['seconds'])}."
        )
    parts.append(
        "The training times that the solution notebooks print are from the machine that built them."
    )
    return wrap(" ".join(parts))


def site_figure(record: dict) -> str:
    entry = _entries(record).get("site")
    if not entry:
        return "not timed yet: `make timings`"
    return (
        f"{duration(entry['seconds'])} on {describe(record['machine'], full=False)}, from {SOURCE}"
    )


def test_figure(record: dict) -> str:
    entry = _entries(record).get("test")
    if not entry:
        return ""
    return (
        f"; {duration(entry['seconds'])} on {describe(record['machine'], full=False)}, "
        f"from {SOURCE}"
    )


TRAIN_FORMAT = [
    "toy-translation: exact match <share>, BLEU <score> on <n> held-out sentences; <steps> steps "
    "in <seconds> s on <device>",
    '{"task": "toy-translation", "exact_match": ..., "bleu": ..., "train_seconds": ..., ...}',
]


def train_example(record: dict) -> str:
    """The two lines `make train` printed last in the record's run (its JSON shortened)."""
    entry = _entries(record).get("train")
    if not entry or len(entry.get("output", [])) != 2:
        return "\n".join(TRAIN_FORMAT)
    summary, line = entry["output"]
    metrics = json.loads(line)
    shown = dict(list(metrics.items())[:9])
    text = json.dumps(shown, ensure_ascii=False)
    if len(shown) < len(metrics):
        text = text[:-1] + ", ...}"
    return f"{summary}\n{text}"


def train_example_note(record: dict) -> str:
    entry = _entries(record).get("train")
    if not entry:
        return wrap(
            "(The form of the two lines; `make timings` records a run of `make train` in "
            f"{SOURCE}, and its lines take their place here.)"
        )
    return wrap(
        "(`python -m course.train --task toy-translation`, what `make train` runs, as "
        f"`make timings` ran it: seed 0, on {describe(record['machine'])}, "
        f"{loads([entry])}, {dates([entry])}; from {SOURCE}.)"
    )


def train_how_long(record: dict) -> str:
    entry = _entries(record).get("train")
    if not entry:
        return wrap(f"**How long.** Not measured yet: `make timings` records it in {SOURCE}.")
    return wrap(
        f"**How long.** {duration(entry['train_seconds'])} of training (`train_seconds`) and "
        f"{duration(entry['seconds'])} for the whole command (loading the task, translating the "
        f"held-out sentences and writing the checkpoint included), on "
        f"{describe(record['machine'])}, {loads([entry])} (from {SOURCE}). Other programs "
        'running beside it make it slower (see "Threads" next).'
    )


def progress_example(record: dict) -> str:
    entry = _entries(record).get("progress")
    return f"{entry['seconds']:.0f} s" if entry else "… s"


def progress_how_long(record: dict) -> str:
    entry = _entries(record).get("progress")
    if not entry:
        return wrap(
            "- **How long.** Not measured yet: `make timings` records `make progress` over "
            f"the learner notebooks in {SOURCE}.",
            indent="  ",
        )
    return wrap(
        f"- **How long.** `make progress` over the {entry.get('notebooks', 'twelve')} learner "
        f"notebooks as they ship took {duration(entry['seconds'])} on "
        f"{describe(record['machine'])}, {loads([entry])} (from {SOURCE}); the example above "
        "shows the same time.",
        indent="  ",
    )


# The lead box at the top of each docs page: its "How long" line, from the record.
BOX_HOW_LONG = r"^(> - \*\*How long:\*\*[^\n]*(?:\n>   [^\n]*)*)"  # through its `>   ` lines
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def in_words(count: int) -> str:
    """12 -> 'twelve' (the pages spell out twelve and under), 13 -> '13'."""
    return NUMBER_WORDS[count] if 0 <= count < len(NUMBER_WORDS) else str(count)


def box_how_long(text: str) -> str:
    """A lead box's line `> - **How long:** text`, wrapped to 90 columns inside the box's
    `> `, a duration never cut from its unit nor a link's text in two: its continuation lines
    start `>   `, so they stay in the box's list item."""
    whole = rf"{CODE_SPAN}|\[[^\]\n]*\]\([^)\n]*\)|\b\d+(?:\.\d+)? (?:s|minutes?)\b"
    lines = wrap(f"- **How long:** {text}", indent="  ", whole=whole).splitlines()
    return "\n".join(f"> {line}" for line in lines)


def on_the_reference(record: dict) -> str:
    return f"on the course's reference machine, {describe(record['machine'], full=False)}"


def not_yet(what: str) -> str:
    return f"not measured yet (`make timings` records {what} in {SOURCE})"


def authoring_box(record: dict) -> str:
    """docs/authoring.md: `make notebooks`, every lesson built from its source."""
    entry = _entries(record).get("notebooks")
    if not entry:
        return box_how_long(f"`make notebooks` for all the lessons: {not_yet('it')}.")
    count = len(entry.get("lessons") or learner_notebooks())
    return box_how_long(
        f"{duration(entry['seconds'])} for all {in_words(count)} lessons "
        f"{on_the_reference(record)} (`make timings`, from {SOURCE})."
    )


def exercises_box(record: dict) -> str:
    """docs/exercises.md: the range of the learner notebooks' Run All, lesson by lesson."""
    lessons = _entries(record).get("run-all", {}).get("lessons", {})
    start = "a checker's run is part of its notebook's Run All"
    if not lessons:
        return box_how_long(f"{start}, {not_yet('it')}; [the course map](index.md).")
    seconds = sorted(entry["seconds"] for entry in lessons.values())
    low, high = duration(seconds[0]), duration(seconds[-1])
    span = low if low == high else f"{low} to {high}"
    missing = len(set(learner_notebooks()) - set(lessons))
    per = f"per lesson ({len(lessons)} measured so far)" if missing else "per lesson"
    return box_how_long(
        f"{start}, which takes {span} {per} {on_the_reference(record)} "
        f"([the course map](index.md), from {SOURCE})."
    )


def lesson_box(record: dict, lesson: str, after: str) -> str:
    """docs/gpt.md and docs/translation.md: the lesson's Run All, then `after` (its tasks)."""
    entry = _entries(record).get("run-all", {}).get("lessons", {}).get(lesson)
    if not entry:
        return box_how_long(
            f"lesson {lesson}'s Run All: {not_yet('it')}; [the course map](index.md){after}"
        )
    return box_how_long(
        f"lesson {lesson}'s Run All takes {duration(entry['seconds'])} "
        f"{on_the_reference(record)} ([the course map](index.md), from {SOURCE}){after}"
    )


GPT_TASK = (
    "; `lm-en` trains for 10 minutes (its `time_budget`), then measures the held-out perplexity."
)
TRANSLATION_TASKS = (
    ". `fra-eng` trains for 10 minutes and `fra-eng-full` for 20 (their `time_budget`), then "
    "translate the held-out sentences (45-50 s for `fra-eng-full`)."
)


def grading_box(record: dict) -> str:
    """docs/grading.md: `make progress` for one learner's notebooks."""
    entry = _entries(record).get("progress")
    start = "about as long as `make progress` for each learner"
    if not entry:
        return box_how_long(f"{start}, {not_yet('it')}; [Where you stand](progress.md).")
    return box_how_long(
        f"{start}, {duration(entry['seconds'])} for {entry.get('notebooks', 12)} notebooks "
        f"{on_the_reference(record)} ([Where you stand](progress.md), from {SOURCE})."
    )


def progress_box(record: dict) -> str:
    """docs/progress.md: `make progress` over the learner notebooks as they ship."""
    entry = _entries(record).get("progress")
    if not entry:
        return box_how_long(f'`make progress`: {not_yet("it")}; "How long" below.')
    return box_how_long(
        f"{duration(entry['seconds'])} for the {entry.get('notebooks', 12)} learner notebooks "
        f'{on_the_reference(record)} ("How long" below, from {SOURCE}).'
    )


def training_box(record: dict) -> str:
    """docs/training.md: `make train`, the whole command and its training."""
    entry = _entries(record).get("train")
    if not entry:
        return box_how_long(f'`make train`: {not_yet("it")}; "How long" below.')
    return box_how_long(
        f"{duration(entry['seconds'])} {on_the_reference(record)}, "
        f"{duration(entry['train_seconds'])} of it training "
        f'("How long" below, from {SOURCE}).'
    )


THREADS_HEADER = "| `make train`'s step (median) | one thread (the default) | two threads |"


def threads_table(record: dict) -> str:
    """docs/training.md's table of one thread against two, idle and busy, and what it shows."""
    entry = _entries(record).get("threads")
    rows = [THREADS_HEADER, "|---|---|---|"]
    if not entry:
        rows.append("| idle, busy | — | — |")
        note = f"Not measured yet: `make timings` measures it into {SOURCE}."
        return "\n".join(rows) + "\n\n" + wrap(note)
    step = {(r["condition"], r["threads"]): r for r in entry["runs"]}
    labels = {"idle": "idle", "busy": f"beside {step[('busy', 1)]['busy_processes']} busy "
              "processes (one per core)"}  # fmt: skip
    for condition in ("idle", "busy"):
        one, two = step[(condition, 1)], step[(condition, 2)]
        rows.append(
            f"| {labels[condition]} | {one['median_step_seconds'] * 1000:.0f} ms | "
            f"{two['median_step_seconds'] * 1000:.0f} ms |"
        )

    def effect(condition: str) -> str:
        one = step[(condition, 1)]["median_step_seconds"]
        two = step[(condition, 2)]["median_step_seconds"]
        if two <= one:
            return f"{1 - two / one:.0%} faster"
        return f"{two / one:.1f} times as slow" if two >= 2 * one else f"{two / one - 1:.0%} slower"

    note = (
        f"Measured by `make timings` (its `threads` entry: `make train`'s task, "
        f"{step[('idle', 1)]['steps']} steps idle and {step[('busy', 1)]['steps']} busy, "
        f"`--set threads=1` and `2`; a step's median, the loop alone) on "
        f"{describe(record['machine'])}, {dates([entry])}, load average "
        f"{max(step[('idle', t)]['load_before'] or 0 for t in (1, 2)):.1f} at most before the "
        f"idle runs (from {SOURCE}). Here a second "
        f"thread made an idle machine's step {effect('idle')} and a busy machine's "
        f"{effect('busy')}."
    )
    return "\n".join(rows) + "\n\n" + wrap(note)


@dataclass(frozen=True)
class Figure:
    """A figure a page quotes: the pattern's one group is the text `render(record)` writes."""

    name: str
    page: str
    pattern: str
    render: object  # (record) -> str


PARAGRAPH = r"[^\n]*(?:\n[^\n]+)*"  # a paragraph's text to its end (no blank line)


def figures(lessons: list[str] | None = None) -> list[Figure]:
    """Every timing figure README.md and docs/*.md quote, and how the record writes it."""
    lessons = lessons if lessons is not None else list(learner_notebooks())
    found = []
    for page in ("README.md", "docs/index.md"):
        for lesson in lessons:
            found.append(
                Figure(
                    f"{page}: Run All of {lesson}",
                    page,
                    rf"^\| {lesson} \| [^\n]*\| ([^|\n]*) \| [^|\n]* \|$",
                    lambda record, lesson=lesson: run_all_cell(record, lesson),
                )
            )
        found.append(
            Figure(
                f"{page}: the Run All note",
                page,
                rf'^("Run All" is how long{PARAGRAPH})',
                run_all_note,
            )
        )
    found += [
        Figure(
            "README.md: make site",
            "README.md",
            r"without running them \(([^;\n]*); see \[The website\]",
            site_figure,
        ),
        Figure("README.md: make test", "README.md", r"\(`JOBS=N` for N([^)\n]*)\) \|", test_figure),
        Figure(
            "docs/training.md: make train's output",
            "docs/training.md",
            r"^```\n(toy-translation: [^\n]*\n[^\n]*)\n```$",
            train_example,
        ),
        Figure(
            "docs/training.md: the run it comes from",
            "docs/training.md",
            rf"^(\({PARAGRAPH})\n\nExact match is",
            train_example_note,
        ),
        Figure(
            "docs/training.md: how long",
            "docs/training.md",
            rf"^(\*\*How long\.\*\*{PARAGRAPH})",
            train_how_long,
        ),
        Figure(
            "docs/training.md: one thread or two",
            "docs/training.md",
            rf"^({re.escape(THREADS_HEADER)}{PARAGRAPH}\n\n{PARAGRAPH})",
            threads_table,
        ),
        Figure(
            "docs/progress.md: the example's time",
            "docs/progress.md",
            r"exercises passed \(([^)\n]*)\)\n```",
            progress_example,
        ),
        Figure(
            "docs/progress.md: how long",
            "docs/progress.md",
            r"^(- \*\*How long\.\*\*[^\n]*(?:\n  [^\n]+)*)",
            progress_how_long,
        ),
    ]
    boxes = {
        "docs/authoring.md": authoring_box,
        "docs/exercises.md": exercises_box,
        "docs/gpt.md": lambda record: lesson_box(record, "12", GPT_TASK),
        "docs/grading.md": grading_box,
        "docs/progress.md": progress_box,
        "docs/training.md": training_box,
        "docs/translation.md": lambda record: lesson_box(record, "11", TRANSLATION_TASKS),
    }
    for page, render in boxes.items():
        found.append(Figure(f"{page}: the lead box's how long", page, BOX_HOW_LONG, render))
    return found


def quoted(figure: Figure, root: Path = ROOT) -> list[re.Match]:
    """Where `figure`'s page holds its pattern (a correct page: exactly once)."""
    text = (root / figure.page).read_text(encoding="utf-8")
    return list(re.finditer(figure.pattern, text, re.M))


def write_docs(record: dict, root: Path = ROOT) -> list[str]:
    """Rewrite every figure in the pages from `record`, then the translated pages generated
    from them (docs/ko/index.md: its figures are its units' fields, so a re-timing stales no
    translation); returns the pages that changed."""
    pages: dict[str, str] = {}
    for figure in figures():
        text = pages.setdefault(figure.page, (root / figure.page).read_text(encoding="utf-8"))
        matches = list(re.finditer(figure.pattern, text, re.M))
        if len(matches) != 1:
            raise UsageError(
                f"{figure.page} holds /{figure.pattern}/ {len(matches)} times, not once: "
                f"{figure.name} cannot be written (update figures() in tools/timings.py)"
            )
        start, end = matches[0].span(1)
        pages[figure.page] = text[:start] + figure.render(record) + text[end:]
    changed = []
    for page, text in pages.items():
        if (root / page).read_text(encoding="utf-8") != text:
            (root / page).write_text(text, encoding="utf-8")
            changed.append(page)
    return changed + translated_pages(root)


def translated_pages(root: Path = ROOT) -> list[str]:
    """Write the translated docs pages afresh (course.i18n, what `make translations` writes
    them with); returns those that changed."""
    if str(ROOT) not in sys.path:  # this checkout's `course`
        sys.path.insert(0, str(ROOT))
    from course import i18n

    changed = []
    for lang in i18n.LANGUAGES:
        for page in i18n.pages(lang, root):
            if i18n.write_page(page, lang, root):
                changed.append(i18n.edition_page(page, lang, root).relative_to(root).as_posix())
    return changed


# ---------------------------------------------------------------- CLI ----------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/timings.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", metavar="NAMES", help=f"measure only these ({','.join(NAMES)})")
    parser.add_argument("--skip", metavar="NAMES", help="measure all but these (e.g. test)")
    parser.add_argument("--lessons", metavar="NN,NN", help="Run All of only these lessons")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite the figures README.md and docs/*.md quote from the record, and the "
        "translated pages docs/<lang>/*.md made from them (alone: measure nothing; with "
        "--only, --skip or --lessons: after measuring)",
    )
    parser.add_argument("--fresh", action="store_true", help="a new record, not an update")
    parser.add_argument("--record", type=Path, default=RECORD, help="default docs/timings.json")
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600,
        metavar="SECONDS",
        help="the longest one command or notebook cell may run (default 3600)",
    )
    args = parser.parse_args(argv)
    try:
        only_docs = args.write_docs and not (args.only or args.skip or args.lessons)
        default = ["run-all"] if args.lessons else NAMES  # --lessons alone: their Run All
        names = [] if only_docs else parse_names(args.only, default)
        skipped = parse_names(args.skip, []) if args.skip else []
        names = [name for name in names if name not in skipped]
        lessons = parse_lessons(args.lessons, list(learner_notebooks()))
        record = read_record(args.record)
        here = machine() if names else None
        if names and record and not args.fresh:
            merge(record, here, {})  # another machine: refuse before measuring anything
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    failed: list[str] = []
    if names:
        print(f"measuring {', '.join(names)} on {describe(here)}, one after the other")
        measured, failed = measure(names, lessons, args.timeout)
        if measured or args.fresh:
            record = merge(record, here, measured, args.fresh)
            write_record(record, args.record)
            print(f"wrote {args.record}: {', '.join(measured) or 'nothing'} measured")
    if args.write_docs:
        if record is None:
            print(f"error: no record in {args.record}: measure first", file=sys.stderr)
            return 2
        try:
            changed = write_docs(record)
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"rewrote {', '.join(changed)}" if changed else "the pages already agree")
    elif names:
        print("the pages are unchanged: `python tools/timings.py --write-docs` writes them")
    for failure in failed:
        print(f"not recorded: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
