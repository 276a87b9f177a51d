"""The authoring pipeline: one source per lesson -> learner + solution notebooks.

What an instructor and a learner rely on:
- every generated notebook is current with its source (else this file fails);
- learner notebooks hold stubs, no answers and no outputs, and run top to bottom with
  the exercises unfinished, each checker saying "not implemented yet";
- solution notebooks were executed and every checker in them passed;
- `build` never silently destroys a learner's edits.

The tests of the learner notebooks in notebooks/ as committed are marked `learner_notebooks`:
a learner who works there makes them fail, so `make test-fast` leaves them out
(tests/test_learner_safe.py); `make test` runs them.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jupytext
import nbformat
import pytest

from course import authoring, check

ROOT = authoring.ROOT
SOURCES = authoring.lesson_sources(ROOT / "solutions")
IDS = [s.stem for s in SOURCES]
# `check.name(answer)`, or `name_ok = check.name(answer)` when later cells use the verdict
CHECK_CALL = re.compile(r"^(?:\w+ = )?check\.(\w+)\(", re.MULTILINE)


def test_there_are_lessons():
    assert SOURCES, "no solutions/NN_name.py lesson sources found"
    assert any(s.stem == "02_dot_product_attention" for s in SOURCES)


# ------------------------------------------------------------ stubbing ----------


def test_stub_replaces_each_solution_region_at_its_indent():
    source = textwrap.dedent("""\
        def f(x):
            y = 1
            ### BEGIN SOLUTION
            return x + y
            ### END SOLUTION

        ### BEGIN SOLUTION
        z = 3
        ### END SOLUTION
        print("kept")""")
    assert authoring.stub_solutions(source) == textwrap.dedent("""\
        def f(x):
            y = 1
            # YOUR CODE HERE
            raise NotImplementedError

        # YOUR CODE HERE
        raise NotImplementedError
        print("kept")""")


@pytest.mark.parametrize(
    "source, complaint",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another"),
    ],
)
def test_broken_markers_are_named(source, complaint):
    with pytest.raises(authoring.AuthoringError, match=complaint):
        authoring.stub_solutions(source, where="lesson.py, cell 3")


# ----------------------------------------------- the committed notebooks ----------


def _stale(source: Path, learner: bool) -> list[str]:
    """authoring.staleness's problems with the learner notebook (notebooks/...), or the others
    (solutions/...)."""
    return [p for p in authoring.staleness(source) if p.startswith("notebooks/") == learner]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_solution_notebooks_are_current(source):
    problems = _stale(source, learner=False)
    assert not problems, "stale notebooks, run `make notebooks`:\n" + "\n".join(problems)


@pytest.mark.learner_notebooks
@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_learner_notebooks_are_current(source):
    problems = _stale(source, learner=True)
    assert not problems, "stale notebooks, run `make notebooks`:\n" + "\n".join(problems)


@pytest.mark.learner_notebooks
@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_learner_notebook_has_stubs_and_no_answers_or_outputs(source):
    nb = nbformat.read(ROOT / "notebooks" / f"{source.stem}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    text = "\n".join(c.source for c in code)
    assert authoring.BEGIN not in text and authoring.END not in text
    answers = source.read_text(encoding="utf-8").count(authoring.BEGIN)
    assert text.count("raise NotImplementedError") == answers


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_solution_notebook_checkers_all_passed(source):
    nb = nbformat.read(ROOT / "solutions" / f"{source.stem}.ipynb", as_version=4)
    checked = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and CHECK_CALL.search(cell.source):
            printed = "".join(o.get("text", "") for o in cell.outputs)
            for name in CHECK_CALL.findall(cell.source):
                assert f"✅ {name}: passed" in printed, f"{name}'s checker did not pass: {printed}"
                checked += 1
    if authoring.BEGIN in source.read_text(encoding="utf-8"):
        assert checked, "a lesson with an exercise must call its checker"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_checker_a_lesson_calls_is_registered(source):
    for name in CHECK_CALL.findall(source.read_text(encoding="utf-8")):
        assert name in check.EXERCISES, f"{source.name} calls check.{name}, which is not registered"
        assert getattr(check, name) is check.EXERCISES[name]


@pytest.mark.learner_notebooks
@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_learner_notebook_calls_its_checkers(source):
    """Each exercise's checker cell is in the learner notebook. That they say "not
    implemented yet" there is checked during nbval's own run of the notebook in `make test`
    (the hook in the repository's conftest.py, tested below), not by a second run."""
    nb = nbformat.read(ROOT / "notebooks" / f"{source.stem}.ipynb", as_version=4)
    called = [n for c in nb.cells if c.cell_type == "code" for n in CHECK_CALL.findall(c.source)]
    if authoring.BEGIN in source.read_text(encoding="utf-8"):
        assert called, "a lesson with an exercise must call its checker"
    lesson_calls = CHECK_CALL.findall(source.read_text(encoding="utf-8"))
    assert sorted(called) == sorted(lesson_calls)


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_learner_hook_names_a_checker_that_did_not_say_not_implemented():
    missing = _root_conftest().unfinished_verdicts_missing
    source = "mask_ok = check.causal_mask(causal_mask)\ncheck.padding_mask(padding_mask)\n"
    both = "⏳ causal_mask: not implemented yet\n⏳ padding_mask: not implemented yet\n"
    assert missing(source, both) == []
    assert missing(source, "✅ causal_mask: passed\n⏳ padding_mask: not implemented yet\n") == [
        "causal_mask"
    ]
    assert missing(source, "") == ["causal_mask", "padding_mask"]
    assert missing("print(check)\n", "") == []  # no checker called, nothing to say


UNFINISHED = """\
# %%
import torch
from course import check


def causal_mask(T):
    {body}

# %%
check.causal_mask(causal_mask)
"""


def test_nbval_fails_a_learner_notebook_whose_checker_does_not_say_not_implemented(tmp_path):
    """The hook at work under nbval: a learner notebook with its stub passes; one whose answer
    was left in (the checker passes) fails, naming the checker."""
    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    bodies = {
        "stubbed": "raise NotImplementedError",
        "answered": "return torch.ones(T, T).tril() > 0",
    }
    for name, body in bodies.items():
        nb = jupytext.reads(UNFINISHED.format(body=body), fmt="py:percent")
        nb.metadata["kernelspec"] = authoring.KERNELSPEC
        nbformat.write(nb, tmp_path / "notebooks" / f"{name}.ipynb")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            "notebooks",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 failed, 3 passed" in run.stdout, run.stdout
    assert "FAILED notebooks/answered.ipynb::Cell 1" in run.stdout, run.stdout
    assert "check.causal_mask must print '⏳ causal_mask: not implemented yet'" in run.stdout


# ---------------------------------------------------- building in a sandbox ----------

LESSON = """\
# %% [markdown]
# # 99 · A tiny lesson

# %%
def double(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION

# %%
print(double(21))
"""


@pytest.fixture
def course_root(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "99_tiny.py").write_text(LESSON, encoding="utf-8")
    return tmp_path


def _learner(root):
    return root / "notebooks" / "99_tiny.ipynb"


# A learner notebook's cells: the title, Colab's install cell (course.colab), then the
# lesson's first code cell, where the answer goes.
ANSWER = 2


def _edit(path: Path, text: str) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells[ANSWER].source = text
    nbformat.write(nb, path)


def test_build_writes_both_notebooks_and_they_are_current(course_root):
    said = []
    authoring.build(course_root, say=said.append)
    source = course_root / "solutions" / "99_tiny.py"
    assert authoring.staleness(source, course_root) == []
    solution = nbformat.read(course_root / "solutions" / "99_tiny.ipynb", as_version=4)
    assert solution.cells[2].outputs[0]["text"] == "42\n"
    learner = nbformat.read(_learner(course_root), as_version=4)
    assert "raise NotImplementedError" in learner.cells[ANSWER].source
    assert "return 2 * x" not in learner.cells[ANSWER].source
    assert any("wrote notebooks/99_tiny.ipynb" in s for s in said)


def test_staleness_is_detected(course_root):
    authoring.build(course_root, say=lambda _: None)
    source = course_root / "solutions" / "99_tiny.py"
    source.write_text(LESSON.replace("print(double(21))", "print(double(4))"), encoding="utf-8")
    problems = authoring.staleness(source, course_root)
    assert any("notebooks/99_tiny.ipynb differs" in p for p in problems)
    assert any("solutions/99_tiny.ipynb was built from another version" in p for p in problems)


def test_unedited_learner_notebook_is_simply_regenerated(course_root):
    authoring.build(course_root, execute=False, say=lambda _: None)
    authoring.build(course_root, execute=False, say=lambda _: None)
    assert not (course_root / "notebooks" / "backups").exists()


def test_learner_edits_stay_in_place_when_the_lesson_did_not_change(course_root):
    authoring.build(course_root, execute=False, say=lambda _: None)
    _edit(_learner(course_root), "def double(x):\n    return x + x  # my answer")
    said = []
    authoring.build(course_root, execute=False, say=said.append)
    assert "my answer" in nbformat.read(_learner(course_root), as_version=4).cells[ANSWER].source
    assert any("has your edits" in s and "left as it is" in s for s in said)
    assert not (course_root / "notebooks" / "backups").exists()


def test_learner_edits_are_backed_up_before_a_changed_lesson_replaces_them(course_root):
    authoring.build(course_root, execute=False, say=lambda _: None)
    _edit(_learner(course_root), "def double(x):\n    return x + x  # my answer")
    source = course_root / "solutions" / "99_tiny.py"
    source.write_text(LESSON.replace("A tiny lesson", "A tiny lesson, revised"), encoding="utf-8")
    said = []
    authoring.build(course_root, execute=False, say=said.append)

    backups = list((course_root / "notebooks" / "backups").glob("99_tiny.*.ipynb"))
    assert len(backups) == 1
    kept = nbformat.read(backups[0], as_version=4)
    assert "my answer" in kept.cells[ANSWER].source
    assert any(str(backups[0].relative_to(course_root)) in s for s in said)
    fresh = nbformat.read(_learner(course_root), as_version=4)
    assert "revised" in fresh.cells[0].source and "my answer" not in fresh.cells[ANSWER].source


def test_unreadable_learner_notebook_is_kept_not_overwritten(course_root):
    authoring.build(course_root, execute=False, say=lambda _: None)
    _learner(course_root).write_text("{ half-saved", encoding="utf-8")
    authoring.build(course_root, execute=False, say=lambda _: None)
    backups = list((course_root / "notebooks" / "backups").glob("*.ipynb"))
    assert [b.read_text(encoding="utf-8") for b in backups] == ["{ half-saved"]


@pytest.mark.learner_notebooks
def test_cli_check_reports_current_notebooks(capsys):
    assert authoring.main(["check"]) == 0
    assert "all notebooks are current" in capsys.readouterr().out


def test_build_of_unknown_lesson_is_a_clear_error(capsys):
    assert authoring.main(["build", "77", "--no-execute"]) == 2
    assert "no lesson source" in capsys.readouterr().err
