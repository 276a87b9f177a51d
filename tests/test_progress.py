"""`python -m course.progress`: every exercise's verdict from a learner's own notebooks.

One class folder of four made-up learners is graded once (lessons 02 and 03 only, the
course's own notebooks of lesson 02 only, tiny made-up ones otherwise: this file must stay
well under a minute); each test reads one thing from that run:
  stub     lesson 02's learner notebook as `make notebooks` generates it (not the one in
           notebooks/, where a learner may have answered it)      -> ⏳; no 03 notebook: missing
  solved   lesson 02's executed solution notebook                 -> ✅; no 03 notebook: missing
  wrong    02: softmax over the queries, then the lesson's re-import of the course's
           reference under the same name (as lessons 05 and 06 do)  -> ❌ with its diagnosis
           03: a syntax error in an early cell, then a right answer  -> reported; ✅
  cheat    02: a stub whose checker cell prints a forged ✅; 03: the exercise cell deleted
                                                                  -> ⏳; missing
"""

import contextlib
import csv
import io
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from course import authoring, progress
from course.check import EXERCISES
from course.check._framework import lesson_of

ROOT = authoring.ROOT
LESSON_02 = "02_dot_product_attention.ipynb"
LESSON_03 = "03_scaling.ipynb"

IMPORTS = "import torch\nfrom course import check"
RIGHT_02 = """\
def dot_product_attention(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights"""
WRONG_02 = RIGHT_02.replace("softmax(dim=-1)", "softmax(dim=-2)")
STUB_02 = "def dot_product_attention(q, k, v):\n    # YOUR CODE HERE\n    raise NotImplementedError"
CHECK_02 = "check.dot_product_attention(dot_product_attention)"
RIGHT_03 = """\
from course import attention as reference


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    return reference.scaled_dot_product_attention(q, k, v, mask, dropout_p)"""
CHECK_03 = "check.scaled_dot_product_attention(scaled_dot_product_attention)"


def notebook(path: Path, *sources: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A lesson")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nb.metadata["kernelspec"] = dict(authoring.KERNELSPEC)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class folder, its files before, the CLI's exit status, stdout and CSV rows."""
    tmp = tmp_path_factory.mktemp("progress")
    folder = tmp / "class"
    solution = ROOT / "solutions" / LESSON_02
    lesson = authoring.read_lesson(solution.with_suffix(".py"))
    stub = authoring.learner_notebook(lesson, authoring.recorded_values(solution))
    authoring.write(stub, folder / "stub" / LESSON_02)
    (folder / "solved").mkdir(parents=True)
    shutil.copyfile(solution, folder / "solved" / LESSON_02)
    reimport = "from course.attention import dot_product_attention  # the reference, from here on"
    notebook(folder / "wrong" / LESSON_02, IMPORTS, WRONG_02, CHECK_02, reimport)
    notebook(folder / "wrong" / LESSON_03, IMPORTS, "x = (1,", RIGHT_03, CHECK_03)
    forged = 'print("✅ dot_product_attention: passed (values and gradients matched).")\nTrue'
    notebook(folder / "cheat" / LESSON_02, IMPORTS, STUB_02, forged)
    notebook(folder / "cheat" / LESSON_03, IMPORTS, 'print("✅ scaled_dot_product_attention")')
    before = snapshot(folder)
    table = tmp / "grades.csv"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = progress.main(
            [str(folder), "--lessons", "02,03", "--csv", str(table), "--timeout", "240"]
        )
    with open(table, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return {"folder": folder, "before": before, "status": status, "out": printed.getvalue(),
            "header": rows[0], "rows": rows[1:]}  # fmt: skip


def verdict(graded, learner: str, exercise: str) -> tuple[str, str]:
    header, rows = graded["header"], graded["rows"]
    for row in rows:
        record = dict(zip(header, row, strict=True))
        if record["learner"] == learner and record["exercise"] == exercise:
            return record["verdict"], record["message"]
    raise AssertionError(f"no row for {learner} x {exercise}")


def test_a_report_exits_0_and_counts_what_passed(graded):
    assert graded["status"] == 0
    out = graded["out"]
    assert "stub: 0 of 2 exercises passed" in out
    assert "solved: 1 of 2 exercises passed" in out
    assert re.search(r"^2 of 8 exercises passed \(4 learners, \d+ s\)$", out, re.MULTILINE), out


def test_a_generated_learner_notebook_is_not_yet(graded):
    status, message = verdict(graded, "stub", "dot_product_attention")
    assert status == "not yet" and message.startswith("not implemented yet"), message
    assert f"{LESSON_02}  dot_product_attention         ⏳ not implemented yet" in graded["out"]


def test_a_solution_notebook_passes(graded):
    status, message = verdict(graded, "solved", "dot_product_attention")
    assert status == "passed" and message.startswith("passed ("), message


def test_a_wrong_answer_fails_with_its_diagnosis_though_the_reference_is_imported_later(graded):
    status, message = verdict(graded, "wrong", "dot_product_attention")
    assert status == "failed"
    assert message.startswith("the softmax runs over the queries (dim=-2)"), message
    row = next(line for line in graded["out"].splitlines() if "❌ the softmax runs" in line)
    assert LESSON_02 in row and "dot_product_attention" in row


def test_a_syntax_error_is_reported_with_its_cell_and_the_rest_still_runs(graded):
    header, rows = graded["header"], graded["rows"]
    error = {r[header.index("notebook_error")] for r in rows if r[0] == "wrong" and r[1] == "03"}
    assert len(error) == 1
    (error,) = error
    # Python 3.10-3.11 say "'(' was never closed", later ones "incomplete input"; 3.13+
    # raise it as _IncompleteInputError, a private SyntaxError, reported as SyntaxError
    assert error.startswith("cell 3 (`x = (1,`): SyntaxError: "), error
    assert error.endswith(" (line 1 of the cell)"), error
    assert f"! {LESSON_03}: cell 3 (`x = (1,`): SyntaxError" in graded["out"]
    # the cells after it ran: the answer defined below the error is judged, and passes
    assert verdict(graded, "wrong", "scaled_dot_product_attention")[0] == "passed"


def test_a_forged_checker_cell_is_judged_by_the_real_checker(graded):
    status, message = verdict(graded, "cheat", "dot_product_attention")
    assert status == "not yet", message


def test_a_deleted_exercise_cell_is_missing(graded):
    status, message = verdict(graded, "cheat", "scaled_dot_product_attention")
    assert status == "missing" and "not defined in the notebook" in message


def test_a_lesson_without_its_notebook_is_missing(graded):
    for learner in ("stub", "solved"):
        status, message = verdict(graded, learner, "scaled_dot_product_attention")
        assert status == "missing" and message.startswith("no 03_*.ipynb notebook in"), message


def test_learner_files_are_byte_for_byte_unchanged(graded):
    assert snapshot(graded["folder"]) == graded["before"]


def test_csv_has_a_header_and_one_row_per_learner_and_exercise(graded):
    assert graded["header"] == progress.CSV_COLUMNS
    pairs = [(row[0], row[3]) for row in graded["rows"]]
    learners = ["cheat", "solved", "stub", "wrong"]
    exercises = ["dot_product_attention", "scaled_dot_product_attention"]
    assert pairs == [(who, what) for who in learners for what in exercises]


# ------------------------------------------------------------ misuse ----------


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda tmp: tmp / "nowhere", "does not exist"),
        (lambda tmp: tmp, "no NN_name.ipynb notebook in it or in its subfolders"),
        (lambda tmp: (tmp / "notes.txt").write_text("hi") and tmp / "notes.txt", "is a file"),
    ],
    ids=["absent", "empty-folder", "a-file"],
)
def test_a_bad_path_exits_2_naming_what_was_expected(tmp_path, capsys, make, said):
    path = make(tmp_path)
    assert progress.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "expected a folder holding NN_name.ipynb notebooks" in err and said in err, err
    assert str(path) in err


@pytest.mark.parametrize(
    "args, said",
    [(["--lessons", "42"], "--lessons expects"), (["--timeout", "0"], "--timeout expects")],
)
def test_bad_options_exit_2(args, said, capsys):
    assert progress.main([str(ROOT / "notebooks"), *args]) == 2
    assert said in capsys.readouterr().err


def test_discovery_of_a_learner_and_of_a_class(tmp_path):
    notebook(tmp_path / "ana" / LESSON_02, IMPORTS)
    notebook(tmp_path / "ana" / "02_dot_product_attention-Copy1.ipynb", IMPORTS)
    notebook(tmp_path / "ben" / "notebooks" / LESSON_03, IMPORTS)
    (tmp_path / "not-a-learner").mkdir()
    learners = progress.find_learners([str(tmp_path)])
    assert [(x.name, sorted(x.notebooks)) for x in learners] == [("ana", ["02"]), ("ben", ["03"])]
    assert learners[0].notebooks["02"].name == LESSON_02  # the course's name, not the copy
    assert [p.name for p in learners[0].ignored] == ["02_dot_product_attention-Copy1.ipynb"]
    (single,) = progress.find_learners([str(tmp_path / "ana")])
    assert single.name == str(tmp_path / "ana") and not single.only_these
    (ben,) = progress.find_learners([str(tmp_path / "ben")])  # a course checkout: notebooks/
    assert ben.name == str(tmp_path / "ben") and list(ben.notebooks) == ["03"]
    (one,) = progress.find_learners([str(tmp_path / "ana" / LESSON_02)])
    assert one.only_these and list(one.notebooks) == ["02"]  # reported: that lesson alone


# ------------------------------------------------------------ lessons ----------


def test_every_exercise_belongs_to_the_lesson_whose_source_calls_its_checker():
    called = re.compile(r"^(?:\w+ = )?check\.(\w+)\(", re.MULTILINE)
    for source in authoring.lesson_sources(ROOT / "solutions"):
        for name in called.findall(source.read_text(encoding="utf-8")):
            assert lesson_of(name) == source.name[:2], (name, source.name)
    assert all(lesson_of(name) for name in EXERCISES), "an exercise belongs to no lesson"
    lessons = progress.lesson_exercises()
    assert [name for names in lessons.values() for name in names] == list(EXERCISES)


def test_a_notebook_runs_up_to_the_last_cell_that_names_an_exercise():
    cells = [
        nbformat.v4.new_code_cell(IMPORTS),
        nbformat.v4.new_markdown_cell("dot_product_attention, in prose: not run"),
        nbformat.v4.new_code_cell(STUB_02),
        nbformat.v4.new_code_cell(CHECK_02),
        nbformat.v4.new_code_cell("dot_product_attention_ok = True  # another name"),
        nbformat.v4.new_code_cell("print('a long training')"),
    ]
    assert progress.last_needed(cells, ["dot_product_attention"]) == 3
    assert progress.last_needed(cells, ["scaled_dot_product_attention"]) == -1
