"""`make test-fast` passes for a learner who has worked in notebooks/ (issue 43).

Some tests judge the learner notebooks in notebooks/ as committed: current with their sources,
the exercises stubbed, no outputs, every checker called (tests/test_pipeline.py), Colab's cell
first (tests/test_colab.py). A learner who answers the exercises there makes them fail though
nothing is wrong. They are marked `learner_notebooks` (registered in pyproject.toml):
`make test-fast` leaves them out, `make test` (and so CI) runs every test.

The proof, on a copy of this working tree whose learner notebooks a learner has worked in:
every exercise answered (the solution notebook's cell, its BEGIN/END SOLUTION lines removed),
every cell run with its outputs saved (the solution notebook's), one notebook duplicated as
JupyterLab names a duplicate, a checkpoint saved. There the test files that read notebooks/
pass with the selection `make test-fast` makes, and the marked tests fail: the marker is
needed, and it is enough.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import _tools
import nbformat

from course import authoring

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKER = "learner_notebooks"
# The tests that read this checkout's notebooks/, run in the copy (pytest's node ids).
READERS = [
    "tests/test_pipeline.py",
    "tests/test_colab.py",
    "tests/test_site.py",  # the site offers each lesson's learner notebook
    "tests/test_progress.py::test_bad_options_exit_2",  # the rest grades made-up notebooks
]
# Tests of those files that work in a folder of their own, never reading notebooks/, and take
# longest (each starts kernels): not run in the copy, where they have nothing to show.
OWN_FOLDER = [
    "tests/test_pipeline.py::test_nbval_fails_a_learner_notebook_",
    "tests/test_pipeline.py::test_build_writes_both_notebooks_",
    "tests/test_pipeline.py::test_staleness_is_detected",
]
# Files not run there, and why they need not be.
NOT_RUN = {
    "test_lab.py": "lists notebooks/ by name in a JupyterLab it starts; a learner's are all there",
    "test_timings.py": "names the lessons by the names of the files in notebooks/ only",
    "test_scheduling.py": "asks only whether each lesson has a file in notebooks/",
}


def _recipe(target: str) -> str:
    """The command lines of a Makefile target."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert found, f"Makefile: no target {target}"
    return found.group(1)


def _fast_selection() -> str:
    """The marker expression `make test-fast` selects its tests with."""
    found = re.search(r'\s-m "([^"]+)"', _recipe("test-fast"))
    assert found, "make test-fast selects no tests by marker"
    return found.group(1)


def test_make_test_fast_leaves_out_the_marked_tests_and_make_test_runs_every_test():
    assert _fast_selection() == f"not {MARKER}"
    pytest_args = _recipe("test").partition("-m pytest")[2]
    assert pytest_args and not re.search(r"\s(-m|-k|--deselect|--ignore)[\s=]", pytest_args)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(rf'^markers = \[\n\s+"{MARKER}: ', pyproject, re.M), "marker not registered"


def test_every_test_file_that_reads_notebooks_is_run_on_a_learners_copy():
    reading = re.compile(r'ROOT\s*/\s*"notebooks"|learner_notebooks\(\)')
    readers = {
        path.name
        for path in (ROOT / "tests").glob("test_*.py")
        if path.name != Path(__file__).name and reading.search(path.read_text(encoding="utf-8"))
    }
    run = {Path(node.split("::")[0]).name for node in READERS}
    assert readers <= run | set(NOT_RUN), f"read notebooks/, not run here: {readers - run}"


# --- the proof ---------------------------------------------------------------------------


def _strip_markers(source: str) -> str:
    return "\n".join(line for line in source.split("\n") if line.strip() not in (BEGIN, END))


def work_in_the_notebooks(root: Path) -> int:
    """Do in root/notebooks/ what a learner does; returns how many answers were written (all
    of them: the 17 exercises have that many BEGIN/END SOLUTION regions in their sources)."""
    answered = 0
    notebooks = root / "notebooks"
    for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        learner = nbformat.read(path, as_version=4)
        solution = nbformat.read(root / "solutions" / path.name, as_version=4)
        ran = {c.id: c for c in solution.cells if c.cell_type == "code"}
        for count, cell in enumerate((c for c in learner.cells if c.cell_type == "code"), 1):
            answer = ran.get(cell.id)
            if answer is not None and BEGIN in answer.source:
                assert cell.source == authoring.stub_solutions(answer.source), (path, cell.id)
                cell.source = _strip_markers(answer.source)
                answered += answer.source.count(BEGIN)
            cell.outputs = answer.outputs if answer is not None else []
            cell.execution_count = count
        nbformat.write(learner, path)
    worked = notebooks / "02_dot_product_attention.ipynb"
    shutil.copyfile(worked, notebooks / "02_dot_product_attention-Copy1.ipynb")
    (notebooks / ".ipynb_checkpoints").mkdir()
    shutil.copyfile(worked, notebooks / ".ipynb_checkpoints" / f"{worked.stem}-checkpoint.ipynb")
    return answered


def _pytest(root: Path, xml: Path, selection: str) -> tuple[int, str, dict[str, str]]:
    """pytest on READERS (less OWN_FOLDER) in `root`, as `make test-fast` runs it but with
    `-m selection`: (exit status, output, {node id: passed/failed/skipped})."""
    timings = _tools.load("timings")
    command = [sys.executable, "-m", "pytest", *READERS, "-q", "-m", selection]
    command += ["-p", "no:nbval", "-o", "addopts=", "-p", "no:cacheprovider", f"--junitxml={xml}"]
    command += [f"--deselect={node}" for node in OWN_FOLDER]
    run = subprocess.run(
        command,
        cwd=root,
        env=timings.copy_env(root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    outcomes = {}
    for case in ET.parse(xml).iter("testcase"):
        node = case.get("classname").replace(".", "/") + ".py::" + case.get("name")
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[node] = "failed"
        else:
            outcomes[node] = "skipped" if case.find("skipped") is not None else "passed"
    return run.returncode, run.stdout + run.stderr, outcomes


def test_make_test_fast_passes_after_a_learner_worked_in_every_notebook(tmp_path):
    timings = _tools.load("timings")
    copy = timings.copy_of_the_tree(tmp_path / "course")
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)  # test_site asks git for files
    sources = authoring.lesson_sources(copy / "solutions")
    answers = sum(s.read_text(encoding="utf-8").count(BEGIN) for s in sources)
    assert work_in_the_notebooks(copy) == answers
    assert all(authoring.edited_by_hand(copy / "notebooks" / f"{s.stem}.ipynb") for s in sources)

    status, output, fast = _pytest(copy, tmp_path / "fast.xml", _fast_selection())
    assert status == 0, output
    assert fast and set(fast.values()) <= {"passed", "skipped"}, output
    stems = [s.stem for s in sources]
    solutions = {f"tests/test_pipeline.py::test_solution_notebooks_are_current[{s}]" for s in stems}
    assert solutions <= set(fast)
    assert sum(n.startswith("tests/test_site.py::test_every_lesson") for n in fast) == len(stems)

    status, output, marked = _pytest(copy, tmp_path / "marked.xml", MARKER)
    assert status == 1, output
    assert not set(marked) & set(fast)
    failed = {node for node, outcome in marked.items() if outcome == "failed"}
    pipeline = "tests/test_pipeline.py::"
    expected = {f"{pipeline}test_learner_notebooks_are_current[{s}]" for s in stems}
    expected |= {f"{pipeline}test_learner_notebook_has_stubs_and_no_answers_or_outputs[{s}]"
                 for s in stems}  # fmt: skip
    expected.add(f"{pipeline}test_cli_check_reports_current_notebooks")
    assert expected <= failed, sorted(expected - failed)
    colab = "tests/test_colab.py::test_each_committed_notebook_begins_with_the_install_cell["
    assert any(node.startswith(colab) for node in failed), "the duplicate was not noticed"
