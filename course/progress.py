"""Where a learner stands: every exercise's verdict, from the learner's own notebooks.

    python -m course.progress                     # notebooks/: your own progress
    python -m course.progress submissions/ --csv grades.csv   # a folder per learner
    make progress PROGRESS_ARGS="submissions/ --csv grades.csv"

PATH is a folder of lesson notebooks (NN_name.ipynb: one learner's; or a course checkout,
its notebooks/), or a folder of such folders (one per learner), or notebook files. Each notebook
runs headless, top to bottom, in a fresh kernel, from a copy in a temporary folder: the
learner's files are only read, never written. On Linux the kernel runs in a bubblewrap
sandbox of its own (course.sandbox: no network, none of the grader's files, the course
read-only, limits on CPU, memory, processes, files and output); where there is none,
grading warns once and runs unsandboxed; --no-sandbox chooses that (docs/grading.md).

How a verdict is obtained. The notebook's own output is never read: a learner who edits a
checker cell (its source or its printed output) gains nothing.
  1. Before the learner's cells, a setup cell keeps the course's checkers
     (`course.check.EXERCISES`), notes every function and class of the course, torch and
     the builtins, prints a random marker it made (the grader reads it from that cell's
     output: no later cell's source holds it) and registers a hook that runs after every
     cell: it notes, for each exercise of the lesson, the object the notebook binds to that
     name, unless the object comes from the `course` package itself (lessons later import
     the reference version under the same name, `from course.positional import ...`).
  2. The learner's cells run, up to the last one that names an exercise of the lesson
     (later cells cannot rebind those names, so they cannot change a verdict; --all-cells
     runs them all). Errors do not stop the run: the first is reported, with its cell
     number (every cell counts, from 1) and error line. A notebook gets --timeout seconds;
     a cell that ignores the interrupt at its limit is stopped 10 s later.
  3. Then, in the same kernel, one cell per exercise calls the kept checker on the learner's
     object and writes a JSON line, tagged with the marker, to the kernel's stdout. The
     checker's return value decides ✅; its verdict line gives the message. A notebook that
     replaced a function the checkers use (noted in 1) is not judged.
An exercise the notebook never defines (its cell was deleted), or defines only by importing
the course's reference, is "missing", and so are the exercises of a lesson whose notebook is
absent. Which exercises belong to which lesson comes from the package
(`course.check._framework.lesson_of`), never from the learner's notebook.

The exit status is 0 whatever the verdicts (this is a report, not a test); 2 when the
command was misused (a PATH that is not a folder of notebooks).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from time import monotonic as real_clock

import nbformat
from nbclient import NotebookClient
from tqdm import tqdm

from course.sandbox import Limits, SandboxedKernelManager
from course.sandbox import problem as sandbox_problem
from course.utils import error_name

NOTEBOOK = re.compile(r"^(\d\d)_.*\.ipynb$")
MARKER = re.compile(r"@course\.progress:[0-9a-f]{32}@")
SYMBOL = {"passed": "✅", "not yet": "⏳", "failed": "❌", "missing": "∅", "not judged": "⚠"}
CSV_COLUMNS = ["learner", "lesson", "notebook", "exercise", "verdict", "message", "notebook_error"]


class UsageError(ValueError):
    """The command was misused: what was expected and what came."""


# ------------------------------------------------------------ lessons ----------


def lesson_exercises() -> dict[str, list[str]]:
    """Lesson number ("03") -> its exercises in lesson order, for every registered checker."""
    from course.check import EXERCISES
    from course.check._framework import lesson_of

    lessons: dict[str, list[str]] = {}
    for name in EXERCISES:
        lesson = lesson_of(name)
        if lesson is None:
            print(
                f"note: exercise {name} belongs to no lesson: add its checker module to "
                "LESSON_OF_MODULE in course/check/_framework.py",
                file=sys.stderr,
            )
            continue
        lessons.setdefault(lesson, []).append(name)
    return dict(sorted(lessons.items()))


# ---------------------------------------------------------- discovery ----------


@dataclass
class Learner:
    name: str
    folder: Path
    notebooks: dict[str, Path]  # lesson number -> notebook
    ignored: list[Path] = field(default_factory=list)  # a second notebook of the same lesson
    only_these: bool = False  # given as notebook files: report their lessons only


def _notebooks_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if p.is_file() and NOTEBOOK.match(p.name))


def _learner(name: str, folder: Path, found: list[Path]) -> Learner:
    learner = Learner(name, folder, {})
    # Prefer the course's own file name (03_scaling.ipynb) over a copy (03_scaling-Copy1.ipynb).
    for path in sorted(found, key=lambda p: ("-" in p.stem or " " in p.stem, p.name)):
        lesson = NOTEBOOK.match(path.name).group(1)
        if lesson in learner.notebooks:
            learner.ignored.append(path)
        else:
            learner.notebooks[lesson] = path
    return learner


def find_learners(paths: list[str]) -> list[Learner]:
    """Each PATH: a learner's folder of NN_name.ipynb notebooks, one such notebook, or a
    folder of learner folders. Raises UsageError naming what was expected and what came."""
    expected = (
        "a folder holding NN_name.ipynb notebooks (a learner's, such as notebooks/), "
        "or a folder of such folders (one per learner)"
    )
    learners: list[Learner] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise UsageError(f"expected {expected}; {given} does not exist")
        if path.is_file():
            if not NOTEBOOK.match(path.name):
                raise UsageError(f"expected {expected}; {given} is a file, not a lesson notebook")
            learner = _learner(str(path.parent), path.parent, [path])
            same = [x for x in learners if x.only_these and x.folder == path.parent]
            if same:  # several notebooks of one folder, named one by one: one learner
                same[0].notebooks.update(learner.notebooks)
            else:
                learner.only_these = True
                learners.append(learner)
            continue
        own = _notebooks_in(path) or _notebooks_in(path / "notebooks")  # or a course checkout
        if own:
            learners.append(_learner(given, own[0].parent, own))
            continue
        found = []
        for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            inside = _notebooks_in(sub) or _notebooks_in(sub / "notebooks")
            if inside:
                found.append(_learner(sub.name, sub, inside))
        if not found:
            raise UsageError(
                f"expected {expected}; {given} is a folder with no NN_name.ipynb notebook in "
                "it or in its subfolders"
            )
        learners += found
    return learners


# ------------------------------------------------------------- running ----------


@dataclass
class Verdict:
    status: str  # passed | not yet | failed | missing | not judged
    message: str


@dataclass
class NotebookRun:
    verdicts: dict[str, Verdict]
    error: str | None = None  # the first error: "cell 7: NameError: name 'x' is not defined"
    seconds: float = 0.0


SETUP = """\
def __course_progress_setup(names):
    import secrets, sys

    from IPython import get_ipython

    from course.check._framework import EXERCISES

    checkers = {name: EXERCISES[name] for name in names}  # kept before any learner code runs
    shell, out, answers = get_ipython(), sys.stdout, {}

    def watched():  # every function and class the checkers may reach, as loaded now
        import builtins, torch

        spaces = {n: vars(m) for n, m in list(sys.modules.items()) if n.split(".")[0] == "course"}
        spaces.update({"torch": vars(torch), "torch.nn.functional": vars(torch.nn.functional),
                       "torch.Tensor": vars(torch.Tensor), "torch.nn.Module": vars(torch.nn.Module),
                       "builtins": vars(builtins)})  # fmt: skip
        swapped = ("input", "getpass")  # the kernel swaps these itself, cell by cell
        return {(n, k): v for n, space in spaces.items() for k, v in list(space.items())
                if callable(v) and k not in swapped}  # fmt: skip

    kept = watched()

    def same(now, was):  # torch wraps some of its own functions when it loads a part
        while now is not None and now is not was:  # (torch._dynamo: torch.manual_seed)
            now = getattr(now, "__wrapped__", None)
        return now is was

    def replaced():
        now = watched()
        return sorted(f"{n}.{k}" for (n, k), v in kept.items() if not same(now.get((n, k)), v))

    def record(*_):
        for name in names:
            if name in shell.user_ns:
                obj = shell.user_ns[name]
                try:
                    module = str(getattr(obj, "__module__", None) or "")
                except Exception:
                    module = ""
                if module.split(".")[0] != "course":
                    answers[name] = obj

    shell.events.register("post_run_cell", record)

    def judge(name):
        import contextlib, io, json

        if record in shell.events.callbacks["post_run_cell"]:
            shell.events.unregister("post_run_cell", record)
        if name not in answers:
            why = (
                "only the course's reference is defined under this name, not yours"
                if name in shell.user_ns
                else "not defined in the notebook (was its cell deleted?)"
            )
            result = {"status": "missing", "message": why}
        elif replaced():
            result = {"status": "not judged", "message": "the notebook replaced code the "
                      f"checkers use ({', '.join(replaced()[:3])})"}  # fmt: skip
        else:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                ok = checkers[name](answers[name])
            lines = [
                line
                for line in printed.getvalue().splitlines()
                if line[:2] in ("✅ ", "⏳ ", "❌ ") and line[2:].startswith(name + ": ")
            ]
            said = lines[-1][len(name) + 4 :] if lines else "the checker printed no verdict"
            stub = lines[-1:] and lines[-1][0] == "⏳"
            status = "passed" if bool(ok) else "not yet" if stub else "failed"
            result = {"status": status, "message": said}
            if replaced():  # while being checked
                which = ", ".join(replaced()[:3])
                result = {"status": "not judged", "message": "the notebook replaced code the "
                          f"checkers use while being checked ({which})"}  # fmt: skip
        out.write(marker + json.dumps({"name": name, **result}) + "\\n")
        out.flush()

    # The run's marker, made here and said once, before any learner code: the grader reads
    # it from this cell's output; no later cell's source holds it.
    marker = "@course.progress:" + secrets.token_hex(16) + "@"
    out.write(marker + "\\n")
    out.flush()
    return judge


__course_progress_judge = __course_progress_setup(%s)
del __course_progress_setup
"""


def _first_line(source: str) -> str:
    line = next((s.strip() for s in source.splitlines() if s.strip()), "")
    return line if len(line) <= 50 else line[:47] + "..."


def _error_of(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            # IPython names a cell's code after a hash: "(2893443731.py, line 3)"
            where = re.sub(
                r"\(\d+\.py, line (\d+)\)", r"(line \1 of the cell)", output.get("evalue", "")
            )
            # The first public class's name: Python 3.13+ names an unfinished cell's error
            # `_IncompleteInputError`, a private SyntaxError (course.utils.error_name)
            return f"{error_name(output.get('ename') or '')}: {where}".strip()
    return None


def last_needed(cells, exercises: list[str]) -> int:
    """The position of the last code cell that names one of `exercises` (-1: none does).
    The cells after it cannot rebind those names, so they cannot change a verdict."""
    named = re.compile(r"\b(?:" + "|".join(map(re.escape, exercises)) + r")\b")
    found = [i for i, c in enumerate(cells) if c.cell_type == "code" and named.search(c.source)]
    return found[-1] if found else -1


def _kill(client) -> None:
    """Stop the kernel now: with a sandbox, the sandbox and everything in it."""
    process = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
    if process is not None:
        process.kill()


class _Watchdog:
    """Kills the kernel when a cell runs `GRACE` seconds past its limit: a cell that catches
    the interrupt nbclient sends at the limit would otherwise run on. Real time, not `time`."""

    GRACE = 10.0

    def __init__(self, client):
        self.client, self.deadline, self.fired = client, None, False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def arm(self, seconds: float) -> None:
        self.deadline = real_clock() + seconds + self.GRACE

    def _watch(self) -> None:
        while not self.done.wait(0.5):
            if self.deadline is not None and real_clock() > self.deadline:
                self.fired = True
                _kill(self.client)
                return

    def close(self) -> None:
        self.done.set()


def _cap_output(client, limit_mb: int) -> dict:
    """Keep at most `limit_mb` of the notebook's outputs; past it, stop the kernel. Returns
    what happened: {"flooded": cell index or None}."""
    state, seen, limit = {"flooded": None}, [0], limit_mb * 1024 * 1024
    keep = getattr(client, "output", None)
    if keep is None:  # a client without nbclient's output hook
        return state

    def output(outs, msg, display_id, cell_index):
        seen[0] += len(json.dumps(msg.get("content", {})))
        if seen[0] <= limit:
            return keep(outs, msg, display_id, cell_index)
        if state["flooded"] is None:
            state["flooded"] = cell_index
            _kill(client)  # the sandbox (or the kernel) and everything in it
        return None

    client.output = output
    return state


def run_notebook(
    path: Path,
    exercises: list[str],
    timeout: float = 600,
    threads: int = 0,
    all_cells: bool = False,
    sandbox: Limits | None = None,
) -> NotebookRun:
    """Execute a copy of `path` and judge `exercises` in its kernel (see the module's doc):
    up to the last cell that names an exercise, or every cell with `all_cells`. With
    `sandbox`, the kernel runs in a bwrap sandbox under those limits (course.sandbox)."""
    started = time.monotonic()
    not_judged = {name: Verdict("not judged", "") for name in exercises}
    with tempfile.TemporaryDirectory(prefix="course-progress-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)  # the learner's file is only read
        try:
            nb = nbformat.read(copy, as_version=4)
        except Exception as error:
            for verdict in not_judged.values():
                verdict.message = "the notebook could not be read"
            return NotebookRun(not_judged, f"unreadable notebook: {error}")
        learner_cells = len(nb.cells)
        run_cells = learner_cells if all_cells else last_needed(nb.cells, exercises) + 1
        nb.cells = [nbformat.v4.new_code_cell(SETUP % json.dumps(exercises))] + nb.cells
        nb.cells += [
            nbformat.v4.new_code_cell(f"__course_progress_judge({name!r})") for name in exercises
        ]
        for cell in nb.cells:  # run every cell: no tag of the learner's may skip one
            cell.metadata.pop("tags", None)
        deadline = started + timeout
        extra = {}
        if sandbox is not None:  # its own folder for the sockets: the notebook copy stays out
            (Path(tmp) / "sandbox").mkdir()
            extra["km"] = SandboxedKernelManager(Path(tmp) / "sandbox", sandbox)
        client = NotebookClient(
            nb,
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            timeout=int(timeout),
            record_timing=False,
            resources={"metadata": {"path": tmp}},
            **extra,
        )
        output_mb = (sandbox or Limits()).output_mb
        flood = _cap_output(client, output_mb)
        watchdog = _Watchdog(client)
        env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
        if threads:  # unless the caller chose (OMP_NUM_THREADS=1 make progress)
            env.setdefault("OMP_NUM_THREADS", str(threads))
            env.setdefault("MKL_NUM_THREADS", str(threads))
        error: str | None = None
        error_cell = current = 0
        try:
            # The kernel's own stdout and stderr (start-up chatter) are not the learner's:
            # outputs come through the notebook protocol.
            with client.setup_kernel(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
                client.execute_cell(nb.cells[0], 0)
                if _error_of(nb.cells[0]):
                    raise RuntimeError(f"the course package did not load: {_error_of(nb.cells[0])}")
                marker = _stdout(nb.cells[0]).strip()
                if not MARKER.fullmatch(marker):
                    raise RuntimeError(f"the setup cell printed no marker: {marker[:60]!r}")
                for index in range(1, run_cells + 1):
                    cell = nb.cells[index]
                    if cell.cell_type != "code":
                        continue
                    left = deadline - time.monotonic()
                    if left <= 1:
                        error = error or (
                            f"timed out after {timeout:g} s, before cell {index} "
                            f"(`{_first_line(cell.source)}`); later cells did not run"
                        )
                        break
                    client.timeout = limit = max(1, int(left))
                    current, begun = index, time.monotonic()
                    watchdog.arm(limit)
                    client.execute_cell(cell, index)
                    if flood["flooded"] is not None:
                        raise RuntimeError("output limit")
                    if time.monotonic() - begun >= limit:  # stopped by the deadline
                        error = error or (
                            f"cell {index} (`{_first_line(cell.source)}`) was still running "
                            f"after {timeout:g} s and was stopped; later cells did not run"
                        )
                        break
                    if error is None and _error_of(cell):
                        error = f"cell {index} (`{_first_line(cell.source)}`): {_error_of(cell)}"
                        error_cell = index
                verdicts = {}
                for offset, name in enumerate(exercises):
                    index = learner_cells + 1 + offset
                    client.timeout = int(timeout)
                    current, begun = index, time.monotonic()
                    watchdog.arm(int(timeout))
                    client.execute_cell(nb.cells[index], index)
                    verdicts[name] = _verdict(nb.cells[index], marker, name, timeout, begun)
                    if error_cell and verdicts[name].message.startswith("not defined"):
                        verdicts[name].message = (
                            "not defined in the notebook (its cell deleted, or failed: the first "
                            f"error was in cell {error_cell})"
                        )
        except Exception as failure:  # a kernel that died or never started: report, go on
            reason = f"{error_name(failure)}: {failure}".strip()
            if flood["flooded"] is not None:
                reason = f"printed more than {output_mb} MB of output and was stopped"
            elif watchdog.fired:
                reason = (
                    f"was still running after {timeout:g} s, ignored the interrupt and was stopped"
                )
            if current > learner_cells:
                reason = f"checking stopped the kernel ({reason})"
            elif current:
                reason = f"cell {current} (`{_first_line(nb.cells[current].source)}`): {reason}"
            for verdict in not_judged.values():
                verdict.message = "the notebook's kernel stopped before this was checked"
            return NotebookRun(not_judged, error or reason, time.monotonic() - started)
        finally:
            watchdog.close()
            if sandbox is not None:
                extra["km"].remove_cgroup()  # whatever cleanup was missed: gone now
    return NotebookRun(verdicts, error, time.monotonic() - started)


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def _verdict(cell, marker: str, name: str, timeout: float, begun: float) -> Verdict:
    for line in _stdout(cell).splitlines():
        if line.startswith(marker):
            result = json.loads(line[len(marker) :])
            if result.get("name") == name:
                return Verdict(result["status"], result["message"])
    if time.monotonic() - begun >= timeout:
        return Verdict("not judged", f"checking did not finish within {timeout:g} s")
    return Verdict("not judged", f"checking stopped: {_error_of(cell) or 'no verdict came back'}")


# ------------------------------------------------------------- report ----------


@dataclass
class Row:
    learner: str
    lesson: str
    notebook: str
    exercise: str
    verdict: Verdict
    notebook_error: str
    who: int = 0  # the learner's position in the list graded (two may share a folder name)


def grade(
    learners: list[Learner],
    lessons: dict[str, list[str]],
    timeout: float = 600,
    jobs: int = 1,
    all_cells: bool = False,
    sandbox: Limits | None = None,
) -> list[Row]:
    """Run every learner's notebooks of `lessons` (jobs at a time) and judge each exercise,
    each notebook in a sandbox of its own under `sandbox`'s limits (None: no sandbox)."""
    tasks = [
        (learner, lesson, learner.notebooks[lesson])
        for learner in learners
        for lesson in lessons
        if lesson in learner.notebooks
    ]
    threads = max(1, (os.cpu_count() or 1) // jobs)  # each kernel its share of the cores
    bar = tqdm(total=len(tasks), desc="running notebooks", unit="notebook", file=sys.stderr)

    def run(task):
        learner, lesson, path = task
        result = run_notebook(path, lessons[lesson], timeout, threads, all_cells, sandbox=sandbox)
        bar.set_postfix_str(f"{learner.name}/{path.name}"[-40:], refresh=False)
        bar.update()
        return result

    with bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = list(pool.map(run, tasks))
    results = {
        (id(learner), lesson): result
        for (learner, lesson, _), result in zip(tasks, done, strict=True)
    }

    rows = []
    for who, learner in enumerate(learners):
        for lesson, names in lessons.items():
            path = learner.notebooks.get(lesson)
            if learner.only_these and path is None:
                continue
            run_ = results.get((id(learner), lesson))
            for name in names:
                if run_ is None:
                    verdict = Verdict(
                        "missing", f"no {lesson}_*.ipynb notebook in {learner.folder}"
                    )
                else:
                    verdict = run_.verdicts[name]
                rows.append(
                    Row(
                        learner.name,
                        lesson,
                        path.name if path else "",
                        name,
                        verdict,
                        (run_.error or "") if run_ else "",
                        who,
                    )
                )
    return rows


def _short(verdict: Verdict) -> str:
    """The table's words: ❌ keeps its whole one-line diagnosis, others their first clause."""
    message = verdict.message
    if verdict.status == "passed":
        message = "passed"
    elif verdict.status == "not yet":
        message = message.split(". ")[0]
    elif verdict.status in ("missing", "not judged"):
        message = f"{verdict.status}: {message}"
    return f"{SYMBOL[verdict.status]} {message}".strip()


def summary(rows: list[Row]) -> str:
    passed = sum(row.verdict.status == "passed" for row in rows)
    return f"{passed} of {len(rows)} exercises passed"


def report(rows: list[Row], learners: list[Learner], out=None) -> None:
    out = out or sys.stdout
    width_lesson = max([len(r.notebook or r.lesson) for r in rows] + [len("notebook")])
    width_name = max([len(r.exercise) for r in rows] + [len("exercise")])
    for who, learner in enumerate(learners):
        mine = [row for row in rows if row.who == who]
        print(f"{learner.name}: {summary(mine)}", file=out)
        print(f"  {'notebook':<{width_lesson}}  {'exercise':<{width_name}}  verdict", file=out)
        errors_said = set()
        for row in mine:
            notebook = row.notebook or f"{row.lesson}_*.ipynb"
            line = f"  {notebook:<{width_lesson}}  {row.exercise:<{width_name}}"
            print(f"{line}  {_short(row.verdict)}", file=out)
        for row in mine:
            if row.notebook_error and row.notebook not in errors_said:
                errors_said.add(row.notebook)
                print(f"  ! {row.notebook}: {row.notebook_error}", file=out)
        for path in learner.ignored:
            print(
                f"  ! {path.name} ignored: another notebook of lesson {path.name[:2]} was run",
                file=out,
            )
        print(file=out)


def write_csv(rows: list[Row], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow(
                [
                    row.learner,
                    row.lesson,
                    row.notebook,
                    row.exercise,
                    row.verdict.status,
                    row.verdict.message,
                    row.notebook_error,
                ]
            )


# ---------------------------------------------------------------- CLI ----------

LIMIT_HELP = {
    "cpu_seconds": ("CPU time of each process", "SECONDS"),
    "memory_mb": ("address space of each process", "MB"),
    "processes": ("processes and threads", "N"),
    "file_mb": ("the largest file it may write", "MB"),
    "disk_mb": ("all it writes, home and /tmp included (held in memory)", "MB"),
    "output_mb": ("the notebook's printed output; past it the kernel is stopped", "MB"),
}


def choose_sandbox(no_sandbox: bool, limits: Limits) -> Limits | None:
    """The limits to sandbox every notebook under, or None; says so once on stderr when the
    notebooks will run unsandboxed, and why."""
    if no_sandbox:
        print(
            "note: --no-sandbox: every notebook runs as your user, with your files in reach",
            file=sys.stderr,
        )
        return None
    missing = sandbox_problem()
    if missing:
        print(
            f"WARNING: grading WITHOUT a sandbox: {missing}. Every notebook runs as your user, "
            "with your files and the network in reach (pass --no-sandbox to say you mean it).",
            file=sys.stderr,
        )
        return None
    return limits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.progress",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        default=["notebooks"],
        help="a learner's folder of notebooks, or a folder of learner folders (default: notebooks)",
    )
    parser.add_argument("--csv", metavar="FILE", help="also write one row per learner x exercise")
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        metavar="SECONDS",
        help="the longest one notebook may run (default 600); checking each "
        "exercise afterwards gets as long again",
    )
    parser.add_argument("--lessons", metavar="NN,NN", help="only these lessons (e.g. 02,03)")
    parser.add_argument(
        "--all-cells",
        action="store_true",
        help="run every cell, reporting errors anywhere (default: stop after the last cell "
        "that names one of the lesson's exercises; later cells cannot change a verdict)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        metavar="N",
        help="notebooks run at once (default: 2, or 1 on a 1-core machine)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the notebooks as your own user, with your files in reach (default on Linux: "
        "each in a bubblewrap sandbox; see docs/grading.md)",
    )
    for name, default in vars(Limits()).items():
        what, unit = LIMIT_HELP[name]
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=default,
            metavar=unit,
            help=f"sandbox limit per notebook: {what} (default {default})",
        )
    args = parser.parse_args(argv)
    try:
        if args.timeout <= 0:
            raise UsageError(f"--timeout expects a number of seconds above 0, got {args.timeout:g}")
        if args.jobs < 1:
            raise UsageError(f"--jobs expects 1 or more, got {args.jobs}")
        for name in vars(Limits()):
            if getattr(args, name) < 1:
                option = f"--{name.replace('_', '-')}"
                raise UsageError(f"{option} expects 1 or more, got {getattr(args, name)}")
        lessons = lesson_exercises()
        if args.lessons:
            wanted = [w.strip().zfill(2) for w in args.lessons.split(",") if w.strip()]
            unknown = [w for w in wanted if w not in lessons]
            if unknown or not wanted:
                raise UsageError(
                    f"--lessons expects lesson numbers with exercises ({', '.join(lessons)}), "
                    f"got {args.lessons}"
                )
            lessons = {lesson: lessons[lesson] for lesson in wanted}
        learners = find_learners(args.paths)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    limits = Limits(**{name: getattr(args, name) for name in vars(Limits())})
    sandbox = choose_sandbox(args.no_sandbox, limits)
    started = time.monotonic()
    rows = grade(
        learners, dict(sorted(lessons.items())), args.timeout, args.jobs, args.all_cells, sandbox
    )
    report(rows, learners)
    who = f"{len(learners)} learners, " if len(learners) > 1 else ""
    print(f"{summary(rows)} ({who}{time.monotonic() - started:.0f} s)")
    if args.csv:
        write_csv(rows, Path(args.csv))
        print(f"wrote {args.csv}: {len(rows)} rows, one per learner x exercise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
