"""course.progress in-process, without a kernel: what its mutation run found unpinned.

tests/test_progress.py grades real notebooks in real kernels, which a mutation run cannot
afford once per mutant (and whose kernel-side lines it cannot see). Here a stand-in for
nbclient's NotebookClient "runs" each cell as its source says (`#! error Name: text`,
`#! sleep 3`, `#! die`) and answers each judge cell with the verdict the test chose, on a
clock the test moves; so every branch of run_notebook (errors, both time-outs, a kernel
that dies, an unreadable notebook) and of the report is checked exactly.
"""

import ast
import builtins
import contextlib
import csv
import io
import json
import secrets
import subprocess
import types
from pathlib import Path

import nbformat
import pytest

from course import progress
from course.progress import Learner, NotebookRun, Row, Verdict


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class _PrivateDeath(RuntimeError):
    """A private class under a public error, as a kernel's client might raise."""


class FakeClient:
    """nbclient.NotebookClient's part that run_notebook uses, scripted by the cells."""

    def __init__(self, nb, clock: Clock, answers: dict, **kwargs):
        self.nb, self.clock, self.answers, self.kwargs = nb, clock, answers, kwargs
        self.timeout = kwargs["timeout"]
        self.ran: list[int] = []  # the index of every cell executed, in order
        self.limits: list[int] = []  # client.timeout at each
        self.kernel: dict = {}

    @contextlib.contextmanager
    def setup_kernel(self, **kwargs):
        self.kernel = kwargs
        yield

    def execute_cell(self, cell, index):
        self.ran.append(index)
        self.limits.append(self.timeout)
        cell.outputs = []
        for line in cell.source.splitlines():
            if line.startswith("#! sleep "):
                self.clock.now += float(line.split()[-1])
            elif line.startswith("#! error "):
                ename, evalue = line[len("#! error ") :].split(": ", 1)
                cell.outputs.append({"output_type": "error", "ename": ename, "evalue": evalue})
            elif line.startswith("#! die"):
                kind = {"private": _PrivateDeath}.get(line[len("#! die ") :], RuntimeError)
                raise kind("Kernel died before replying")
        if cell.source.startswith("def __course_progress_setup("):  # the kernel's marker
            self.marker = "@course.progress:" + secrets.token_hex(16) + "@"
            cell.outputs.append({"output_type": "stream", "name": "stdout", "text": self.marker})
        if cell.source.startswith("__course_progress_judge("):
            name = ast.literal_eval(cell.source[len("__course_progress_judge") :])
            for text in self.answers.get(name, []):
                text = text.replace("MARKER", self.marker)
                cell.outputs.append({"output_type": "stream", "name": "stdout", "text": text})


@pytest.fixture
def kernel(monkeypatch):
    """Replaces the kernel: returns (clock, answers, clients); answers[name] is the list of
    stdout texts that name's judge cell prints ("MARKER" stands for the run's marker)."""
    clock, answers, clients = Clock(), {}, []

    def make(nb, **kwargs):
        clients.append(FakeClient(nb, clock, answers, **kwargs))
        return clients[-1]

    monkeypatch.setattr(progress, "NotebookClient", make)
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=clock))
    return clock, answers, clients


def said(name: str, status: str, message: str) -> str:
    return "MARKER" + json.dumps({"name": name, "status": status, "message": message}) + "\n"


def write(path: Path, *cells) -> Path:
    """A notebook of code cells (str) and markdown cells (("md", text))."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        if isinstance(cell, tuple):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell[1]))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(cell))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------------ run_notebook ----------


def test_the_kernel_runs_a_copy_with_the_setup_first_and_a_judge_cell_per_exercise(
    tmp_path, kernel, monkeypatch
):
    clock, answers, clients = kernel
    path = write(tmp_path / "me" / "02_x.ipynb", "a = 1", ("md", "# prose"), "f = 2  # f",
                 "g = 3  # g", "later = 4")  # fmt: skip
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].metadata["tags"] = ["skip-execution"]
    nbformat.write(nb, path)
    before = path.read_bytes()
    answers["f"] = ["noise\n", said("g", "failed", "not f's"), said("f", "passed", "passed (ok)")]
    answers["g"] = [said("g", "not yet", "not implemented yet. Write it")]
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    run = progress.run_notebook(path, ["f", "g"], timeout=30.5, threads=3)
    (client,) = clients
    assert run.error is None
    assert run.verdicts == {"f": Verdict("passed", "passed (ok)"),
                            "g": Verdict("not yet", "not implemented yet. Write it")}  # fmt: skip
    assert client.ran == [0, 1, 3, 4, 6, 7]  # setup, code cells up to g's, then two judges
    assert client.limits[-2:] == [30, 30]  # each check gets int(timeout) seconds
    cells = client.nb.cells
    assert len(cells) == 1 + 5 + 2
    assert cells[0].source.startswith("def __course_progress_setup(names):")
    assert cells[0].source.endswith(
        '__course_progress_setup(["f", "g"])\ndel __course_progress_setup\n'
    )
    judges = [ast.literal_eval(c.source[len("__course_progress_judge") :]) for c in cells[6:]]
    assert judges == ["f", "g"]
    assert not any(client.marker in c.source for c in cells)  # only the kernel knows it
    assert all("tags" not in c.metadata for c in cells)  # no learner's tag skips a cell
    kwargs = client.kwargs
    assert kwargs["kernel_name"] == "python3" and kwargs["timeout"] == 30
    assert kwargs["allow_errors"] is True and kwargs["interrupt_on_timeout"] is True
    assert kwargs["record_timing"] is False
    folder = Path(kwargs["resources"]["metadata"]["path"])
    assert folder != path.parent and folder.name.startswith("course-progress-")
    assert not folder.exists()  # the temporary copy is gone
    assert client.kernel["stderr"] == subprocess.DEVNULL
    env = client.kernel["env"]
    assert env["PYDEVD_DISABLE_FILE_VALIDATION"] == "1"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "3"
    assert path.read_bytes() == before


def test_a_second_run_gets_a_new_marker_and_threads_only_when_asked(tmp_path, kernel, monkeypatch):
    _, _, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "1")  # the caller's choice stands
    progress.run_notebook(path, ["f"], threads=4)
    progress.run_notebook(path, ["f"])
    first, second = clients
    assert first.kernel["env"]["OMP_NUM_THREADS"] == "4"
    assert first.kernel["env"]["MKL_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in second.kernel["env"]  # threads=0: the default
    assert second.kwargs["timeout"] == 600  # the default


def test_all_cells_runs_every_cell_and_none_names_an_exercise(tmp_path, kernel):
    _, answers, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1", "x = 2", ("md", "f"), "y = 3")
    answers["f"] = [said("f", "passed", "passed")]
    progress.run_notebook(path, ["f"], all_cells=True)
    progress.run_notebook(path, ["g"])  # no cell names g: only the setup and the judge
    assert clients[0].ran == [0, 1, 2, 4, 5]
    assert clients[1].ran == [0, 5]


def test_the_first_error_is_reported_with_its_cell_and_line(tmp_path, kernel):
    _, answers, _ = kernel
    path = write(
        tmp_path / "02_x.ipynb",
        "import torch",
        "#! error SyntaxError: incomplete input (2893443731.py, line 3)",
        "#! error NameError: name 'y' is not defined",
        "g = 1",
    )
    answers["g"] = [said("g", "passed", "passed")]
    answers["f"] = [said("f", "missing", "not defined in the notebook (was its cell deleted?)")]
    run = progress.run_notebook(path, ["f", "g"], all_cells=True)
    assert run.error == (
        "cell 2 (`#! error SyntaxError: incomplete input (2893443...`): "
        "SyntaxError: incomplete input (line 3 of the cell)"
    )
    assert run.verdicts["f"] == Verdict(
        "missing",
        "not defined in the notebook (its cell deleted, or failed: the first error was in cell 2)",
    )
    assert run.verdicts["g"] == Verdict("passed", "passed")


def test_a_private_error_class_is_reported_by_its_public_name(tmp_path, kernel, monkeypatch):
    # Python 3.13+ names an unfinished cell's error `_IncompleteInputError`, a private
    # SyntaxError; an instructor reads "SyntaxError". Before 3.13 the builtins get a stand-in.
    incomplete = type("_IncompleteInputError", (SyntaxError,), {})
    monkeypatch.setattr(builtins, "_IncompleteInputError", incomplete, raising=False)
    _, answers, _ = kernel
    path = write(
        tmp_path / "02_x.ipynb",
        "#! error _IncompleteInputError: incomplete input (2893443731.py, line 1)",
        "g = 1",
    )
    answers["g"] = [said("g", "passed", "passed")]
    run = progress.run_notebook(path, ["g"])
    assert run.error == (
        "cell 1 (`#! error _IncompleteInputError: incomplete inpu...`): "
        "SyntaxError: incomplete input (line 1 of the cell)"
    )
    # a client that stops on a private class: its public one is named too
    path = write(tmp_path / "02_y.ipynb", "#! die private", "g = 1")
    assert progress.run_notebook(path, ["g"]).error == (
        "cell 1 (`#! die private`): RuntimeError: Kernel died before replying"
    )


def test_a_missing_answer_without_an_error_keeps_its_message(tmp_path, kernel):
    _, answers, _ = kernel
    path = write(tmp_path / "02_x.ipynb", "g = 1")
    why = "only the course's reference is defined under this name, not yours"
    answers["f"] = [said("f", "missing", "not defined in the notebook (was its cell deleted?)")]
    answers["g"] = [said("g", "missing", why)]
    run = progress.run_notebook(path, ["f", "g"])
    assert run.error is None
    assert run.verdicts["f"].message == "not defined in the notebook (was its cell deleted?)"
    assert run.verdicts["g"].message == why


def test_no_time_left_before_a_cell_stops_the_run(tmp_path, kernel):
    clock, _, clients = kernel
    long = "x = 1  # " + "a" * 60
    path = write(tmp_path / "02_x.ipynb", "#! sleep 9", long, "f = 1")
    run = progress.run_notebook(path, ["f"], timeout=10)
    assert run.error == (
        f"timed out after 10 s, before cell 2 (`{long[:47]}...`); later cells did not run"
    )
    assert clients[0].ran == [0, 1, 4]  # cell 2 never ran; f is still checked
    assert clients[0].limits == [10, 10, 10]
    assert run.verdicts["f"].status == "not judged"
    assert run.seconds == 9.0


def test_a_cell_still_running_at_the_deadline_is_stopped(tmp_path, kernel):
    clock, _, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "#! sleep 8.5", "#! sleep 1\nwhile True: pass",
                 "f = 1")  # fmt: skip
    run = progress.run_notebook(path, ["f"], timeout=10)
    assert run.error == (
        "cell 2 (`#! sleep 1`) was still running after 10 s and was stopped; "
        "later cells did not run"
    )
    assert clients[0].ran == [0, 1, 2, 4]
    assert clients[0].limits[:3] == [10, 10, 1]  # what was left, whole seconds, at least 1


def test_a_cell_that_ends_in_time_does_not_stop_the_run(tmp_path, kernel):
    _, answers, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "#! sleep 5", "#! sleep 3.5", "f = 1")
    answers["f"] = [said("f", "passed", "passed")]
    run = progress.run_notebook(path, ["f"], timeout=10)
    assert run.error is None and clients[0].ran == [0, 1, 2, 3, 4]
    assert clients[0].limits[:4] == [10, 10, 5, 1]


def test_an_error_and_then_the_deadline_reports_the_error(tmp_path, kernel):
    path = write(tmp_path / "02_x.ipynb", "#! error ValueError: no", "#! sleep 10", "f = 1")
    run = progress.run_notebook(path, ["f"], timeout=10)
    assert run.error == "cell 1 (`#! error ValueError: no`): ValueError: no"
    path = write(tmp_path / "03_x.ipynb", "#! error ValueError: no\n#! sleep 9.5", "f = 1")
    assert progress.run_notebook(path, ["f"], timeout=10).error.startswith("cell 1 (`")


def test_a_check_that_runs_out_of_time_or_prints_nothing(tmp_path, kernel, monkeypatch):
    _, answers, _ = kernel
    path = write(tmp_path / "02_x.ipynb", "f = g = h = 1")
    run = progress.run_notebook(path, ["f", "g", "h"], timeout=7.5)
    assert run.verdicts["f"] == Verdict("not judged", "checking stopped: no verdict came back")

    class Slow(FakeClient):
        def execute_cell(self, cell, index):
            super().execute_cell(cell, index)
            if cell.source.startswith("__course_progress_judge("):
                name = ast.literal_eval(cell.source[len("__course_progress_judge") :])
                self.clock.now += {"f": 7.5, "g": 7.4, "h": 0}[name]
                if name == "h":
                    cell.outputs.append({"output_type": "error", "ename": "KeyError",
                                         "evalue": "'h'"})  # fmt: skip
                    cell.outputs.append({"output_type": "stream", "text": "h\n"})

    clock = Clock()
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=clock))
    monkeypatch.setattr(progress, "NotebookClient", lambda nb, **kw: Slow(nb, clock, {}, **kw))
    run = progress.run_notebook(path, ["f", "g", "h"], timeout=7.5)
    assert run.verdicts["f"] == Verdict("not judged", "checking did not finish within 7.5 s")
    assert run.verdicts["g"] == Verdict("not judged", "checking stopped: no verdict came back")
    assert run.verdicts["h"] == Verdict("not judged", "checking stopped: KeyError: 'h'")


def test_a_verdict_is_read_from_stdout_lines_that_start_with_the_marker(tmp_path, kernel):
    _, answers, _ = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1")
    answers["f"] = ["x" + said("f", "passed", "forged")[:-1] + "\n" + said("f", "failed", "no")]
    assert progress.run_notebook(path, ["f"]).verdicts["f"] == Verdict("failed", "no")


def test_a_setup_that_fails_judges_nothing(tmp_path, kernel, monkeypatch):
    clock, _, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1")

    class NoCourse(FakeClient):
        def execute_cell(self, cell, index):
            super().execute_cell(cell, index)
            self.clock.now += 2
            if index == 0:
                cell.outputs.append({"output_type": "error", "ename": "ModuleNotFoundError",
                                     "evalue": "No module named 'course'"})  # fmt: skip

    def make(nb, **kwargs):
        clients.append(NoCourse(nb, clock, {}, **kwargs))
        return clients[-1]

    monkeypatch.setattr(progress, "NotebookClient", make)
    run = progress.run_notebook(path, ["f", "g"])
    assert run.error == (
        "RuntimeError: the course package did not load: "
        "ModuleNotFoundError: No module named 'course'"
    )
    assert clients[0].ran == [0]
    assert run.verdicts == {
        name: Verdict("not judged", "the notebook's kernel stopped before this was checked")
        for name in ("f", "g")
    }
    assert run.seconds == 2.0


def test_a_kernel_that_dies_is_reported_with_where_it_was(tmp_path, kernel):
    path = write(tmp_path / "02_x.ipynb", "x = 1", "#! die\nimport os", "f = 1")
    run = progress.run_notebook(path, ["f"])
    assert run.error == "cell 2 (`#! die`): RuntimeError: Kernel died before replying"
    assert run.verdicts["f"] == Verdict(
        "not judged", "the notebook's kernel stopped before this was checked"
    )
    path = write(tmp_path / "04_x.ipynb", "x = 1", "#! die")  # the last learner cell
    run = progress.run_notebook(path, ["f"], all_cells=True)
    assert run.error == "cell 2 (`#! die`): RuntimeError: Kernel died before replying"
    path = write(tmp_path / "03_x.ipynb", "#! error NameError: x", "#! die", "f = 1")
    assert (
        progress.run_notebook(path, ["f"]).error == "cell 1 (`#! error NameError: x`): NameError: x"
    )


def test_a_kernel_that_dies_while_checking_or_at_setup(tmp_path, kernel, monkeypatch):
    clock, answers, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1")

    class DiesAt(FakeClient):
        at = 0

        def execute_cell(self, cell, index):
            if index == self.at:
                raise RuntimeError("Kernel died")
            super().execute_cell(cell, index)

    monkeypatch.setattr(progress, "NotebookClient", lambda nb, **kw: DiesAt(nb, clock, {}, **kw))
    DiesAt.at = 2  # the judge cell of a notebook with one learner cell
    run = progress.run_notebook(path, ["f"])
    assert run.error == "checking stopped the kernel (RuntimeError: Kernel died)"
    DiesAt.at = 0  # the setup: no cell of the learner's to name
    assert progress.run_notebook(path, ["f"]).error == "RuntimeError: Kernel died"


def test_an_unreadable_notebook_is_reported(tmp_path, kernel):
    _, _, clients = kernel
    path = tmp_path / "02_x.ipynb"
    path.write_text("{not json", encoding="utf-8")
    run = progress.run_notebook(path, ["f", "g"])
    assert run.error.startswith("unreadable notebook: ") and len(run.error) > 25
    assert run.verdicts == {
        name: Verdict("not judged", "the notebook could not be read") for name in ("f", "g")
    }
    assert clients == [] and run.seconds == 0.0  # no time measured: nothing ran


# ------------------------------------------------------------ helpers ----------


def test_first_line_is_the_first_non_blank_one_cut_at_fifty():
    assert progress._first_line("\n  \n  x = 1  \ny = 2") == "x = 1"
    assert progress._first_line("") == ""
    assert progress._first_line("a" * 50) == "a" * 50
    assert progress._first_line("a" * 51) == "a" * 47 + "..."


def test_error_of_reads_the_first_error_output_only():
    first = {"output_type": "error", "ename": "KeyError", "evalue": "(12.py, line 4) x"}
    second = {"output_type": "error", "ename": "Other", "evalue": ""}
    cell = {"outputs": [{"output_type": "stream", "text": "hi"}, first, second]}
    assert progress._error_of(cell) == "KeyError: (line 4 of the cell) x"
    assert progress._error_of({"outputs": [{"output_type": "error", "ename": "E"}]}) == "E:"
    assert progress._error_of({}) is None
    assert progress._error_of({"outputs": [{"output_type": "stream"}]}) is None


def test_last_needed_matches_whole_names_in_code_cells():
    code, markdown = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell
    cells = [code("f(1)"), code("g = 2"), markdown("f and g"), code("ff = gg = 3")]
    assert progress.last_needed(cells, ["f", "g"]) == 1
    assert progress.last_needed(cells, ["g"]) == 1
    assert progress.last_needed(cells, ["f"]) == 0
    assert progress.last_needed(cells, ["h"]) == -1


def test_an_exercise_of_no_lesson_is_noted_and_skipped(monkeypatch, capsys):
    import course.check
    from course.check import _framework

    names = list(_framework.EXERCISES)
    exercises = {"orphan": print, **_framework.EXERCISES}  # print's module: builtins, no lesson
    monkeypatch.setattr(course.check, "EXERCISES", exercises)
    monkeypatch.setattr(_framework, "EXERCISES", exercises)
    lessons = progress.lesson_exercises()
    err = capsys.readouterr().err
    assert err == (
        "note: exercise orphan belongs to no lesson: add its checker module to "
        "LESSON_OF_MODULE in course/check/_framework.py\n"
    )
    assert sorted(name for group in lessons.values() for name in group) == sorted(names)
    assert list(lessons) == sorted(lessons)
    for lesson, group in lessons.items():  # each lesson's in registration order
        assert group == [name for name in names if _framework.lesson_of(name) == lesson]


# --------------------------------------------------------- discovery ----------


def test_find_learners_edges(tmp_path):
    a = write(tmp_path / "solo" / "02_a.ipynb", "x = 1")
    b = write(tmp_path / "solo" / "03_b.ipynb", "x = 1")
    (one,) = progress.find_learners([str(a), str(b)])  # one folder's files: one learner
    assert one.only_these and sorted(one.notebooks) == ["02", "03"]
    assert one.name == str(a.parent) and one.folder == a.parent
    write(tmp_path / "class" / ".hidden" / "02_a.ipynb", "x = 1")
    write(tmp_path / "class" / "ana" / "02_a.ipynb", "x = 1")
    write(tmp_path / "class" / "ana" / "02_a copy.ipynb", "x = 1")
    write(tmp_path / "class" / "ben" / "notebooks" / "02_a.ipynb", "x = 1")
    (tmp_path / "class" / "ana" / "04_dir.ipynb").mkdir()  # a folder named like a notebook
    (tmp_path / "class" / "ana" / "notes.ipynb").write_text("{}")
    (tmp_path / "class" / "loose.txt").write_text("hi")
    learners = progress.find_learners([str(tmp_path / "class")])
    assert [(x.name, x.folder, sorted(x.notebooks)) for x in learners] == [
        ("ana", tmp_path / "class" / "ana", ["02"]),
        ("ben", tmp_path / "class" / "ben", ["02"]),
    ]
    assert [p.name for p in learners[0].ignored] == ["02_a copy.ipynb"]  # the course's name won
    assert not learners[0].only_these
    both = progress.find_learners([str(tmp_path / "class" / "ana"), str(a)])
    assert [x.name for x in both] == [str(tmp_path / "class" / "ana"), str(a.parent)]
    # a folder, then a file in it: two learners (the file's is reported alone)
    folder, alone = progress.find_learners([str(a.parent), str(a)])
    assert not folder.only_these and alone.only_these and list(alone.notebooks) == ["02"]
    with pytest.raises(progress.UsageError, match=r"; .*notes.ipynb is a file, not a lesson"):
        progress.find_learners([str(tmp_path / "class" / "ana" / "notes.ipynb")])


# ------------------------------------------------------------ grading ----------


def test_grade_runs_each_present_notebook_and_marks_absent_ones_missing(tmp_path, monkeypatch):
    calls = []

    def fake_run(path, exercises, timeout, threads, all_cells, sandbox=None):
        calls.append((path.name, exercises, timeout, threads, all_cells))
        error = "cell 3 (`x`): E" if path.name.startswith("02") else None
        return NotebookRun({name: Verdict("passed", "ok") for name in exercises}, error)

    monkeypatch.setattr(progress, "run_notebook", fake_run)
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 5)
    ana = Learner("ana", tmp_path / "ana", {"02": tmp_path / "02_a.ipynb"})
    ben = Learner("ben", tmp_path / "ben", {"03": tmp_path / "03_b.ipynb"}, only_these=True)
    lessons = {"02": ["f"], "03": ["g", "h"]}
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    rows = progress.grade([ana, ben], lessons, timeout=12, jobs=2, all_cells=True)
    absent = Verdict("missing", f"no 03_*.ipynb notebook in {ana.folder}")
    assert sorted(calls) == [
        ("02_a.ipynb", ["f"], 12, 2, True),
        ("03_b.ipynb", ["g", "h"], 12, 2, True),
    ]
    assert [(r.learner, r.lesson, r.notebook, r.exercise, r.verdict, r.notebook_error, r.who)
            for r in rows] == [
        ("ana", "02", "02_a.ipynb", "f", Verdict("passed", "ok"), "cell 3 (`x`): E", 0),
        ("ana", "03", "", "g", absent, "", 0),
        ("ana", "03", "", "h", absent, "", 0),
        ("ben", "03", "03_b.ipynb", "g", Verdict("passed", "ok"), "", 1),
        ("ben", "03", "03_b.ipynb", "h", Verdict("passed", "ok"), "", 1),
    ]  # fmt: skip
    assert "running notebooks" in err.getvalue() and "2/2" in err.getvalue()
    calls.clear()
    progress.grade([ana], lessons)  # defaults: 600 s, one job with every core, stop early
    assert calls == [("02_a.ipynb", ["f"], 600, 5, False)]
    calls.clear()
    monkeypatch.setattr(progress.os, "cpu_count", lambda: None)
    progress.grade([ana], lessons, jobs=3)
    progress.grade([ana], lessons, jobs=1)
    assert [call[3] for call in calls] == [1, 1]  # cores unknown: one thread each


# ------------------------------------------------------------ the report ----------


def rows_for_report(tmp_path):
    verdicts = [
        Verdict("passed", "passed (values and gradients matched)."),
        Verdict("not yet", "not implemented yet. Fill in the cell. Then run it"),
        Verdict("failed", "the softmax runs over the queries. Use dim=-1"),
        Verdict("missing", "not defined in the notebook"),
        Verdict("not judged", "checking stopped"),
    ]
    names = ["dot", "scaled", "mha", "encoding", "layer"]
    rows = [Row("ana", "02", "02_dot.ipynb", names[0], verdicts[0], "", 0),
            Row("ana", "02", "02_dot.ipynb", names[1], verdicts[1], "", 0),
            Row("ana", "04", "04_mha.ipynb", names[2], verdicts[2], "cell 2 (`x`): E", 0),
            Row("ana", "04", "04_mha.ipynb", names[3], verdicts[3], "cell 2 (`x`): E", 0),
            Row("ana", "07", "", names[4], verdicts[4], "", 0),
            Row("ana", "02", "02_dot.ipynb", names[0], verdicts[0], "", 1)]  # fmt: skip
    ana = Learner("ana", tmp_path, {}, ignored=[tmp_path / "02_dot-Copy1.ipynb"])
    return rows, [ana, Learner("ana", tmp_path / "b", {})]


def test_the_report_lists_each_learner_with_one_line_per_exercise(tmp_path):
    rows, learners = rows_for_report(tmp_path)
    out = io.StringIO()
    progress.report(rows, learners, out)
    assert out.getvalue().splitlines() == [
        "ana: 1 of 5 exercises passed",
        "  notebook      exercise  verdict",
        "  02_dot.ipynb  dot       ✅ passed",
        "  02_dot.ipynb  scaled    ⏳ not implemented yet",
        "  04_mha.ipynb  mha       ❌ the softmax runs over the queries. Use dim=-1",
        "  04_mha.ipynb  encoding  ∅ missing: not defined in the notebook",
        "  07_*.ipynb    layer     ⚠ not judged: checking stopped",
        "  ! 04_mha.ipynb: cell 2 (`x`): E",
        "  ! 02_dot-Copy1.ipynb ignored: another notebook of lesson 02 was run",
        "",
        "ana: 1 of 1 exercises passed",
        "  notebook      exercise  verdict",
        "  02_dot.ipynb  dot       ✅ passed",
        "",
    ]


def test_the_report_goes_to_stdout_and_its_columns_fit_the_headers(tmp_path, capsys):
    row = Row("x", "02", "", "f", Verdict("passed", ""), "", 0)
    progress.report([row], [Learner("x", tmp_path, {})])
    assert capsys.readouterr().out.splitlines()[1:3] == [
        "  notebook  exercise  verdict",
        "  02_*.ipynb  f         ✅ passed",
    ]


def test_the_csv_has_one_row_per_learner_and_exercise(tmp_path):
    rows, _ = rows_for_report(tmp_path)
    path = tmp_path / "grades.csv"
    progress.write_csv(rows[2:4], path)
    with open(path, newline="", encoding="utf-8") as f:
        assert list(csv.reader(f)) == [
            progress.CSV_COLUMNS,
            ["ana", "04", "04_mha.ipynb", "mha", "failed",
             "the softmax runs over the queries. Use dim=-1", "cell 2 (`x`): E"],
            ["ana", "04", "04_mha.ipynb", "encoding", "missing", "not defined in the notebook",
             "cell 2 (`x`): E"],
        ]  # fmt: skip
    assert progress.CSV_COLUMNS == ["learner", "lesson", "notebook", "exercise", "verdict",
                                    "message", "notebook_error"]  # fmt: skip
    assert progress.SYMBOL == {"passed": "✅", "not yet": "⏳", "failed": "❌", "missing": "∅",
                               "not judged": "⚠"}  # fmt: skip


# ------------------------------------------------------------- the CLI ----------


@pytest.fixture
def fake_grade(monkeypatch):
    """main() with grading replaced: records its arguments, passes every exercise."""
    seen = {}

    def grade(learners, lessons, timeout, jobs, all_cells, sandbox=None):
        seen.update(learners=learners, lessons=lessons, timeout=timeout, jobs=jobs,
                    all_cells=all_cells)  # fmt: skip
        return [Row(x.name, lesson, "", name, Verdict("passed", ""), "", who)
                for who, x in enumerate(learners)
                for lesson, names in lessons.items() for name in names]  # fmt: skip

    monkeypatch.setattr(progress, "grade", grade)
    return seen


def test_main_grades_the_lessons_asked_and_writes_the_csv(tmp_path, fake_grade, capsys):
    write(tmp_path / "class" / "ana" / "02_a.ipynb", "x = 1")
    write(tmp_path / "class" / "ben" / "02_a.ipynb", "x = 1")
    table = tmp_path / "out.csv"
    status = progress.main([str(tmp_path / "class"), "--lessons", " 2, 3,", "--csv", str(table),
                            "--timeout", "7.5", "--jobs", "1", "--all-cells"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    lessons = progress.lesson_exercises()
    assert fake_grade["lessons"] == {"02": lessons["02"], "03": lessons["03"]}
    assert fake_grade["timeout"] == 7.5 and fake_grade["jobs"] == 1
    assert fake_grade["all_cells"] is True
    n = 2 * (len(lessons["02"]) + len(lessons["03"]))
    assert f"\n{n} of {n} exercises passed (2 learners, 0 s)\n" in out
    assert out.endswith(f"wrote {table}: {n} rows, one per learner x exercise\n")
    assert len(table.read_text(encoding="utf-8").splitlines()) == 1 + n


def test_main_defaults(tmp_path, fake_grade, capsys, monkeypatch):
    write(tmp_path / "notebooks" / "02_a.ipynb", "x = 1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress.os, "cpu_count", lambda: 8)
    assert progress.main([]) == 0  # the default PATH: notebooks
    assert fake_grade["timeout"] == 600 and fake_grade["jobs"] == 2
    assert fake_grade["all_cells"] is False
    assert list(fake_grade["lessons"]) == list(progress.lesson_exercises())
    assert [x.name for x in fake_grade["learners"]] == ["notebooks"]
    out = capsys.readouterr().out
    assert out.splitlines()[-1].endswith(" exercises passed (0 s)")  # one learner: no count
    assert "wrote" not in out
    monkeypatch.setattr(progress.os, "cpu_count", lambda: None)
    progress.main([])
    assert fake_grade["jobs"] == 1


@pytest.mark.parametrize(
    "args, said",
    [
        (["--timeout", "-1"], "error: --timeout expects a number of seconds above 0, got -1\n"),
        (["--jobs", "0"], "error: --jobs expects 1 or more, got 0\n"),
        (["--lessons", ","], "error: --lessons expects lesson numbers with exercises (01, 02, "),
        (["--lessons", "02,99"], "), got 02,99\n"),
    ],
)
def test_main_misuse_exits_2_saying_what_came(args, said, capsys, fake_grade):
    assert progress.main(["notebooks", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.startswith("error: ")
    assert fake_grade == {}


def test_main_accepts_one_job_and_a_timeout_just_above_zero(tmp_path, fake_grade):
    write(tmp_path / "02_a.ipynb", "x = 1")
    assert progress.main([str(tmp_path), "--jobs", "1", "--timeout", "0.5"]) == 0
    assert fake_grade["jobs"] == 1 and fake_grade["timeout"] == 0.5


def test_the_help_says_the_options_and_their_defaults(capsys):
    with pytest.raises(SystemExit):
        progress.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: python -m course.progress [-h] [--csv FILE] [--timeout SECONDS]")
    assert (
        "[--lessons NN,NN] [--all-cells] [--jobs N] [--no-sandbox] [--cpu-seconds SECONDS]" in text
    )
    assert "[--memory-mb MB] [--processes N] [--file-mb MB] [--disk-mb MB] [--output-mb MB]" in text
    for words in (
        "a learner's folder of notebooks, or a folder of learner folders (default: notebooks)",
        "also write one row per learner x exercise",
        "the longest one notebook may run (default 600); checking each exercise afterwards",
        "only these lessons (e.g. 02,03)",
        "run every cell, reporting errors anywhere (default: stop after the last cell",
        "notebooks run at once (default: 2, or 1 on a 1-core machine)",
        "run the notebooks as your own user, with your files in reach (default on Linux",
        "sandbox limit per notebook: CPU time of each process (default 1800)",
        "address space of each process (default 8192)",
        "processes and threads (default 256)",
        "the largest file it may write (default 512)",
        "(held in memory) (default 1024)",
        "past it the kernel is stopped (default 16)",
        "Where a learner stands",
    ):
        assert words in text, words


def test_one_job_runs_one_notebook_at_a_time_and_the_bar_names_the_last(tmp_path, monkeypatch):
    import threading
    import time

    running, most, lock = [0], [0], threading.Lock()

    def fake_run(path, exercises, timeout, threads, all_cells, sandbox=None):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return NotebookRun({name: Verdict("passed", "") for name in exercises})

    monkeypatch.setattr(progress, "run_notebook", fake_run)
    err = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", err)
    name = "a" * 30  # name/notebook: 41 characters, the bar shows the last 40
    notebooks = {"02": tmp_path / "02_b.ipynb", "03": tmp_path / "03_b.ipynb"}
    progress.grade([Learner(name, tmp_path, notebooks)], {"02": ["f"], "03": ["g"]})
    assert most[0] == 1
    final = err.getvalue().split("\r")[-1]
    assert "2/2" in final and final.rstrip().endswith(f", {name[1:]}/03_b.ipynb]"), final
    assert final.startswith("running notebooks: 100%"), final
    assert "notebook/s" in final or "s/notebook" in final, final  # the unit, in the rate
    most[0] = 0
    learners = [Learner(str(i), tmp_path, notebooks) for i in range(3)]
    progress.grade(learners, {"02": ["f"], "03": ["g"]}, jobs=2)
    assert most[0] == 2


def test_a_row_belongs_to_the_first_learner_unless_told():
    assert Row("ana", "02", "", "f", Verdict("passed", ""), "").who == 0


# ------------------------------------------------- the kernel's side, in-process ----------


class Events:
    """IPython's shell.events, the part the setup cell uses."""

    def __init__(self):
        self.callbacks = {"post_run_cell": []}

    def register(self, event, callback):
        self.callbacks[event].append(callback)

    def unregister(self, event, callback):
        self.callbacks[event].remove(callback)


def test_the_setup_cell_keeps_the_learners_answers_and_judges_them(monkeypatch, capsys):
    """SETUP runs in the kernel; here it runs in-process against a stand-in shell."""
    import IPython
    import torch

    from course.attention import scaled_dot_product_attention as reference

    shell = types.SimpleNamespace(user_ns={}, events=Events())
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    names = ["dot_product_attention", "scaled_dot_product_attention", "causal_mask"]
    namespace = {}
    exec(progress.SETUP % json.dumps(names), namespace)
    judge = namespace["__course_progress_judge"]
    assert "__course_progress_setup" not in namespace
    (record,) = shell.events.callbacks["post_run_cell"]

    def dot_product_attention(q, k, v):  # the softmax over the queries: wrong
        weights = (q @ k.transpose(-2, -1)).softmax(dim=-2)
        return weights @ v, weights

    shell.user_ns.update(dot_product_attention=dot_product_attention, torch=torch)
    record()
    shell.user_ns["scaled_dot_product_attention"] = reference  # the course's, not kept
    record()
    judge("dot_product_attention")
    judge("scaled_dot_product_attention")
    judge("causal_mask")
    assert shell.events.callbacks["post_run_cell"] == []  # judging stops the recording
    marker, *lines = capsys.readouterr().out.splitlines()
    assert progress.MARKER.fullmatch(marker)  # said by the setup, before any learner code
    assert [line[: len(marker)] for line in lines] == [marker] * 3  # nothing but the verdicts
    verdicts = [json.loads(line[len(marker) :]) for line in lines]
    assert verdicts[0]["name"] == "dot_product_attention"
    assert verdicts[0]["status"] == "failed"
    assert verdicts[0]["message"].startswith("the softmax runs over the queries")
    assert verdicts[1] == {
        "name": "scaled_dot_product_attention",
        "status": "missing",
        "message": "only the course's reference is defined under this name, not yours",
    }
    assert verdicts[2] == {
        "name": "causal_mask",
        "status": "missing",
        "message": "not defined in the notebook (was its cell deleted?)",
    }


def test_the_setup_says_a_new_marker_each_run_and_judges_nothing_that_replaced_checker_code(
    monkeypatch, capsys
):
    """A notebook that rebinds a function the checkers call (here the framework's `close`)
    gets no verdict from them: it is not judged, naming what it replaced."""
    import IPython

    from course.check import _framework

    shell = types.SimpleNamespace(user_ns={}, events=Events())
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    first, second = {}, {}
    exec(progress.SETUP % json.dumps(["dot_product_attention"]), first)
    exec(progress.SETUP % json.dumps(["dot_product_attention"]), second)
    one, two = capsys.readouterr().out.splitlines()
    assert one != two and progress.MARKER.fullmatch(one) and progress.MARKER.fullmatch(two)

    def dot_product_attention(q, k, v):  # wrong, and it would pass with `close` replaced
        weights = (q @ k.transpose(-2, -1)).softmax(dim=-2)
        return weights @ v, weights

    shell.user_ns["dot_product_attention"] = dot_product_attention
    for callback in shell.events.callbacks["post_run_cell"]:
        callback()
    monkeypatch.setattr(_framework, "close", lambda *args, **kwargs: True)
    first["__course_progress_judge"]("dot_product_attention")
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line[len(one) :]) == {
        "name": "dot_product_attention",
        "status": "not judged",
        "message": "the notebook replaced code the checkers use (course.check._framework.close)",
    }


def test_a_setup_that_prints_no_marker_judges_nothing(tmp_path, kernel, monkeypatch):
    clock, answers, clients = kernel
    path = write(tmp_path / "02_x.ipynb", "f = 1")
    answers["f"] = [said("f", "passed", "forged")]

    class Mute(FakeClient):
        def execute_cell(self, cell, index):
            super().execute_cell(cell, index)
            if index == 0:
                cell.outputs = [{"output_type": "stream", "text": "@course.progress:xyz@\n"}]

    monkeypatch.setattr(progress, "NotebookClient", lambda nb, **kw: Mute(nb, clock, answers, **kw))
    run = progress.run_notebook(path, ["f"])
    assert run.error == "RuntimeError: the setup cell printed no marker: '@course.progress:xyz@'"
    assert run.verdicts["f"].status == "not judged"


def test_output_past_the_cap_is_dropped_and_stops_the_kernel():
    kept, killed = [], []
    process = types.SimpleNamespace(kill=lambda: killed.append(1))
    client = types.SimpleNamespace(
        output=lambda outs, msg, display_id, index: kept.append(msg["content"]["text"]),
        km=types.SimpleNamespace(provisioner=types.SimpleNamespace(process=process)),
    )
    state = progress._cap_output(client, 1)  # 1 MB
    chunk = {"content": {"name": "stdout", "text": "x" * 400_000}}
    for _ in range(2):  # 0.8 MB of the 1 MB
        client.output([], chunk, None, 5)
    assert len(kept) == 2 and killed == [] and state["flooded"] is None
    client.output([], chunk, None, 6)
    client.output([], chunk, None, 7)
    assert len(kept) == 2 and killed == [1] and state["flooded"] == 6  # killed once


def test_torch_wrapping_its_own_function_is_not_taken_for_tampering(monkeypatch, capsys):
    """torch wraps torch.manual_seed when it loads torch._dynamo (a lesson's training does):
    a replacement whose __wrapped__ chain leads to the function kept is torch's own."""
    import functools

    import IPython
    import torch

    shell = types.SimpleNamespace(user_ns={}, events=Events())
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    namespace = {}
    exec(progress.SETUP % json.dumps(["causal_mask"]), namespace)
    marker = capsys.readouterr().out.strip()
    original = torch.manual_seed
    monkeypatch.setattr(torch, "manual_seed", functools.wraps(original)(lambda *a: original(*a)))

    def causal_mask(T):
        return torch.ones(T, T).tril().bool()

    shell.user_ns["causal_mask"] = causal_mask
    for callback in shell.events.callbacks["post_run_cell"]:
        callback()
    namespace["__course_progress_judge"]("causal_mask")
    verdict = json.loads(capsys.readouterr().out.strip()[len(marker) :])
    assert verdict["status"] in ("passed", "failed"), verdict  # judged, not refused
    monkeypatch.setattr(torch, "manual_seed", lambda *a: original(*a))  # no __wrapped__
    namespace["__course_progress_judge"]("causal_mask")
    verdict = json.loads(capsys.readouterr().out.strip()[len(marker) :])
    said = "the notebook replaced code the checkers use (torch.manual_seed)"
    assert verdict == {"name": "causal_mask", "status": "not judged", "message": said}
