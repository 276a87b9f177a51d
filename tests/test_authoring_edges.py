"""course.authoring at its edges, in a sandbox course: every message an instructor reads,
the notebook metadata, the fingerprint rules, the command line.

Written against the mutants that tools/mutation.py found alive. The tests that read the
committed notebooks live in test_pipeline.py; these never touch them. Executing a lesson
is replaced by a stand-in for nbclient's NotebookClient (what is passed to it is checked
here; test_pipeline.py executes a real kernel), so the whole file runs in seconds.
"""

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path

import nbformat
import pytest

from course import authoring
from course.authoring import AuthoringError

LESSON = """\
# %% [markdown]
# # 99 · A tiny lesson, with a non-ASCII title

# %%
def double(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION

# %% tags=["nbval-ignore-output"] other="dropped"
print(double(21))
"""


class FakeClient:
    """Stands in for NotebookClient: records its arguments, "executes" every code cell."""

    made: list["FakeClient"] = []

    def __init__(self, nb, **kwargs):
        self.nb, self.kwargs, self.executed = nb, kwargs, False
        FakeClient.made.append(self)

    def execute(self):
        code = [c for c in self.nb.cells if c.cell_type == "code"]
        for count, cell in enumerate(code, 1):
            cell.execution_count = count
            cell.outputs = [nbformat.v4.new_output("stream", text=f"ran {count}\n")]
        self.executed = True


@pytest.fixture
def fake_client(monkeypatch):
    FakeClient.made = []
    monkeypatch.setattr(authoring, "NotebookClient", FakeClient)
    return FakeClient


@pytest.fixture
def root(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "99_tiny.py").write_text(LESSON, encoding="utf-8")
    return tmp_path


def _source(root: Path) -> Path:
    return root / "solutions" / "99_tiny.py"


def _learner(root: Path) -> Path:
    return root / "notebooks" / "99_tiny.ipynb"


def _solution(root: Path) -> Path:
    return root / "solutions" / "99_tiny.ipynb"


def _built(root: Path) -> Path:
    authoring.build(root, say=lambda _: None)
    return root


class FixedTime(datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 2, 3, 4, 5, 6)


class LaterTime(datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 2, 3, 4, 5, 7)


# ------------------------------------------------------------- sources ----------


def test_root_is_the_repository():
    assert (authoring.ROOT / "pyproject.toml").is_file()
    assert (authoring.ROOT / "course" / "authoring.py").is_file()


def test_lesson_sources_are_the_numbered_python_files_in_lesson_order(tmp_path):
    for name in ("02_b.py", "01_a.py", "10_j.py", "helper.py", "1_x.py", "100_z.py", "03_c.ipynb"):
        (tmp_path / name).write_text("", encoding="utf-8")
    names = lambda paths: [p.name for p in paths]  # noqa: E731
    assert names(authoring.lesson_sources(tmp_path)) == ["01_a.py", "02_b.py", "10_j.py"]
    assert names(authoring.lesson_sources(tmp_path, [])) == ["01_a.py", "02_b.py", "10_j.py"]
    assert names(authoring.lesson_sources(tmp_path, ["02"])) == ["02_b.py"]
    assert names(authoring.lesson_sources(tmp_path, ["10", "01_a"])) == ["01_a.py", "10_j.py"]
    with pytest.raises(AuthoringError) as error:
        authoring.lesson_sources(tmp_path, ["7"])
    assert str(error.value) == f"no lesson source in {tmp_path} starts with ['7']"


@pytest.mark.parametrize(
    "source, where, message",
    [
        (
            "x = 1\n### BEGIN SOLUTION\n### BEGIN SOLUTION\n",
            "lesson.py, cell 3",
            "lesson.py, cell 3, line 3: ### BEGIN SOLUTION inside another solution",
        ),
        (
            "x = 1\n\n    ### END SOLUTION\n",
            None,
            "cell, line 3: ### END SOLUTION without ### BEGIN SOLUTION",
        ),
        (
            "### BEGIN SOLUTION\n### END SOLUTION\n### END SOLUTION",
            "a.py, cell 0",
            "a.py, cell 0, line 3: ### END SOLUTION without ### BEGIN SOLUTION",
        ),
        (
            "x = 1\n  ### BEGIN SOLUTION  \ny = 2",
            "lesson.py, cell 5",
            "lesson.py, cell 5: ### BEGIN SOLUTION is never closed by ### END SOLUTION",
        ),
    ],
    ids=["nested", "end first (default where)", "end twice", "never closed"],
)
def test_broken_markers_say_where_with_the_line_number(source, where, message):
    with pytest.raises(AuthoringError) as error:
        if where is None:
            authoring.stub_solutions(source)
        else:
            authoring.stub_solutions(source, where=where)
    assert str(error.value) == message


def test_stub_keeps_everything_outside_the_markers_and_the_code_after_them():
    source = "a = 1\n    ### BEGIN SOLUTION  \n    secret = 2\n    ### END SOLUTION\nb = 3\n"
    assert authoring.stub_solutions(source) == (
        "a = 1\n    # YOUR CODE HERE\n    raise NotImplementedError\nb = 3"
    )
    assert authoring.stub_solutions("no answers here") == "no answers here"


# ------------------------------------------------------------ notebooks ----------


def test_fingerprint_follows_cell_kinds_and_sources_only():
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# hi"), nbformat.v4.new_code_cell("x = 1")]
    )
    first = authoring.fingerprint(nb)
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nb.cells[1].execution_count = 4
    nb.cells[1].metadata["tags"] = ["x"]
    nb.metadata["anything"] = 1
    assert authoring.fingerprint(nb) == first  # running or tagging is not editing
    nb.cells[1].source = "x = 2"
    assert authoring.fingerprint(nb) != first
    nb.cells[1].source = "x = 1"
    nb.cells[0] = nbformat.v4.new_raw_cell("# hi")
    assert authoring.fingerprint(nb) != first


def test_read_lesson_gives_clean_cells_and_records_its_source(root):
    lesson = authoring.read_lesson(_source(root))
    assert [c.cell_type for c in lesson.cells] == ["markdown", "code", "code"]
    assert [c.id for c in lesson.cells] == ["cell-00", "cell-01", "cell-02"]
    assert lesson.cells[0].source == "# 99 · A tiny lesson, with a non-ASCII title"
    assert [dict(c.metadata) for c in lesson.cells] == [{}, {}, {"tags": ["nbval-ignore-output"]}]
    assert dict(lesson.metadata) == {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
        "course": {
            "source": "solutions/99_tiny.py",
            "source_sha256": hashlib.sha256(LESSON.encode()).hexdigest(),
        },
    }
    nbformat.validate(lesson)


def test_learner_notebook_stubs_code_only_and_leaves_the_lesson_alone(root):
    lesson = authoring.read_lesson(_source(root))
    lesson.cells[0].source += "\n\n### BEGIN SOLUTION (markdown may show the marker)"
    lesson.cells[2].outputs = [nbformat.v4.new_output("stream", text="42\n")]
    lesson.cells[2].execution_count = 3
    before = nbformat.writes(lesson)
    learner = authoring.learner_notebook(lesson)
    assert nbformat.writes(lesson) == before
    assert learner.cells[0].source == lesson.cells[0].source
    assert learner.cells[1].id == "colab-install"  # before the first code cell (test_colab.py)
    assert learner.cells[2].source == (
        "def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError\n"
    ).rstrip("\n")
    assert learner.cells[3].outputs == [] and learner.cells[3].execution_count is None
    assert learner.metadata.course.fingerprint == authoring.fingerprint(learner)


def test_learner_notebook_names_the_cell_with_a_broken_marker(root):
    lesson = authoring.read_lesson(_source(root))
    lesson.cells[2].source = "### BEGIN SOLUTION\nx = 1"
    with pytest.raises(AuthoringError) as error:
        authoring.learner_notebook(lesson)
    assert str(error.value) == (
        "solutions/99_tiny.py, cell 2: ### BEGIN SOLUTION is never closed by ### END SOLUTION"
    )


# ------------------------------------------- figures of the stored run ----------

NOTE = (
    "*\N{DAGGER}: a figure from the course's stored run, `solutions/99_tiny.ipynb`; "
    "your own run prints its own in the code cells.*"
)
NOTE_THIS_RUN = (
    '*\N{DAGGER} and "this run" in this cell: the course\'s stored run, '
    "`solutions/99_tiny.ipynb`; your own run prints its own figures in the code cells.*"
)


def _with_prose(root, *markdown):
    """The tiny lesson with markdown cells added after its code."""
    lesson = authoring.read_lesson(_source(root))
    lesson.cells += [nbformat.v4.new_markdown_cell(text) for text in markdown]
    return lesson


@pytest.mark.parametrize(
    "text, marked",
    [
        ("took {{ s }} seconds", "took 13\N{DAGGER} seconds"),
        ("at $T = {{ T }}$, here", "at $T = 12$\N{DAGGER}, here"),  # after the maths
        ("$$\nT = {{ T }}\n$$ next", "$$\nT = 12\n$$\N{DAGGER} next"),
        ("reads `{{ r }}`.", "reads `a <- b`\N{DAGGER}."),  # after the inline code
        ("a ``x ` {{ T }}`` b", "a ``x ` 12``\N{DAGGER} b"),
        ("{{ p }}% of it", "80%\N{DAGGER} of it"),
        ('on "{{ w }}", the verb', 'on "chases"\N{DAGGER}, the verb'),
        ("{{ s }}{{ T }} and {{ s }} + {{ s }}", "1312\N{DAGGER} and 13\N{DAGGER} + 13\N{DAGGER}"),
        ("costs \\$5, {{ s }} s", "costs \\$5, 13\N{DAGGER} s"),  # an escaped $ opens no maths
        ("ends with {{ s }}", "ends with 13\N{DAGGER}"),
    ],
)
def test_mark_figures_puts_the_mark_where_markdown_shows_it(text, marked):
    values = {"s": "13", "T": "12", "r": "a <- b", "p": "80", "w": "chases"}
    assert authoring.mark_figures(text, values) == marked


def test_a_filled_learner_notebook_marks_its_figures_and_says_whose_run(root):
    lesson = _with_prose(
        root,
        "Training took {{ s }} to {{ t }} s.\n\nThe loss fell as expected.",
        "No figure here, a $T$ and `code`.",
        "It took {{ s }} s in this\nnotebook's run.",
    )
    before = nbformat.writes(lesson)
    learner = authoring.learner_notebook(lesson, {"s": "13", "t": "18"})
    assert nbformat.writes(lesson) == before  # the lesson itself is untouched
    marked, plain, this_run = [c.source for c in learner.cells if c.cell_type == "markdown"][1:]
    # the note follows the paragraph of the last field, before the rest of the cell
    assert marked == (
        f"Training took 13\N{DAGGER} to 18\N{DAGGER} s.\n\n{NOTE}\n\nThe loss fell as expected."
    )
    assert plain == "No figure here, a $T$ and `code`."  # a cell without fields: untouched
    assert this_run == f"It took 13\N{DAGGER} s in this\nnotebook's run.\n\n{NOTE_THIS_RUN}"
    assert learner.cells[0].source == lesson.cells[0].source  # the title has no field
    assert learner.metadata.course.fingerprint == authoring.fingerprint(learner)


def test_a_field_without_a_value_is_named_for_the_learner_notebook_too(root):
    lesson = _with_prose(root, "{{ bleu:.1f }} and {{ steps }}")
    with pytest.raises(AuthoringError, match=r"no value for \{\{ bleu:\.1f \}\}"):
        authoring.learner_notebook(lesson, {"steps": "600"})


def test_the_solution_notebook_keeps_the_figures_unmarked(root, fake_client, monkeypatch):
    source = _source(root)
    source.write_text(LESSON + "\n# %% [markdown]\n# Took {{ s }} s in this run.\n")
    monkeypatch.setattr(authoring, "_read_values", lambda cell, wanted, where: {"s": "13"})
    authoring.build(root, say=lambda _: None)
    solution = nbformat.read(_solution(root), as_version=4)
    learner = nbformat.read(_learner(root), as_version=4)
    assert solution.cells[-1].source == "Took 13 s in this run."
    assert learner.cells[-1].source == "Took 13\N{DAGGER} s in this run.\n\n" + NOTE_THIS_RUN
    assert "\N{DAGGER}" not in nbformat.writes(solution)
    assert authoring.staleness(source, root) == []  # check expects the marked notebook
    assert authoring.edited_by_hand(_learner(root)) is False
    # a learner who edits the marked prose keeps their notebook, as with any edit
    learner.cells[-1].source = "Took 13 s on my laptop."
    nbformat.write(learner, _learner(root))
    authoring.build(root, execute=False, say=lambda _: None)
    assert nbformat.read(_learner(root), as_version=4).cells[-1].source == "Took 13 s on my laptop."


def test_solution_notebook_runs_a_fresh_kernel_in_the_given_folder(root, fake_client):
    lesson = authoring.read_lesson(_source(root))
    before = nbformat.writes(lesson)
    solution = authoring.solution_notebook(lesson, root / "solutions")
    (client,) = fake_client.made
    assert client.executed and client.kwargs == {
        "timeout": 600,
        "kernel_name": "python3",
        "record_timing": False,  # no timestamps in the committed notebook
        "resources": {"metadata": {"path": str(root / "solutions")}},
    }
    assert nbformat.writes(lesson) == before  # the lesson itself is not executed
    assert solution.cells[2].outputs[0]["text"] == "ran 2\n"
    assert "return 2 * x" in solution.cells[1].source  # the answers stay in
    assert solution.metadata.course.fingerprint == authoring.fingerprint(solution)
    authoring.solution_notebook(lesson, root, timeout=5)
    assert fake_client.made[-1].kwargs["timeout"] == 5


def test_solution_notebook_checks_markers_before_starting_a_kernel(root, fake_client):
    lesson = authoring.read_lesson(_source(root))
    lesson.cells[1].source = "### END SOLUTION"
    with pytest.raises(AuthoringError) as error:
        authoring.solution_notebook(lesson, root)
    assert str(error.value) == (
        "solutions/99_tiny.py, cell 1, line 1: ### END SOLUTION without ### BEGIN SOLUTION"
    )
    assert fake_client.made == []


def test_write_makes_the_folders_and_ends_the_file_with_a_newline(root):
    nb = authoring.read_lesson(_source(root))
    path = root / "deep" / "er" / "x.ipynb"
    authoring.write(nb, path)
    authoring.write(nb, path.with_name("y.ipynb"))  # the folder exists now: still fine
    text = path.read_bytes().decode("utf-8")
    assert text == nbformat.writes(nb) + "\n"
    assert json.loads(text)["cells"][0]["source"] == [
        "# 99 · A tiny lesson, with a non-ASCII title"
    ]
    assert "99 · A tiny lesson" in text  # written as UTF-8, not escaped


# ------------------------------------------------------ a learner's edits ----------


def test_edited_by_hand_tells_generated_from_edited_notebooks(root):
    path = _learner(root)
    assert authoring.edited_by_hand(path) is False  # missing: nothing to keep
    authoring.build(root, execute=False, say=lambda _: None)
    assert authoring.edited_by_hand(path) is False
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source += "\n# mine"
    nbformat.write(nb, path)
    assert authoring.edited_by_hand(path) is True
    del nb.metadata["course"]
    nb.cells[1].source = (
        authoring.learner_notebook(authoring.read_lesson(_source(root))).cells[1].source
    )
    nbformat.write(nb, path)
    assert authoring.edited_by_hand(path) is True  # no fingerprint: not ours to overwrite
    path.write_text("{ half-saved", encoding="utf-8")
    assert authoring.edited_by_hand(path) is True


def test_built_from_reads_the_recorded_source_hash(root):
    assert authoring.built_from(_learner(root)) is None  # missing
    authoring.build(root, execute=False, say=lambda _: None)
    sha = hashlib.sha256(LESSON.encode()).hexdigest()
    assert authoring.built_from(_learner(root)) == sha
    nbformat.write(nbformat.v4.new_notebook(), _learner(root))
    assert authoring.built_from(_learner(root)) is None  # not one of ours
    _learner(root).write_text("not json", encoding="utf-8")
    assert authoring.built_from(_learner(root)) is None


def test_back_up_moves_the_notebook_to_a_timestamped_name(root, monkeypatch):
    monkeypatch.setattr(authoring, "datetime", FixedTime)
    path = root / "notebooks" / "99_tiny.ipynb"
    path.parent.mkdir()
    path.write_text("my work", encoding="utf-8")
    backups = root / "notebooks" / "old" / "backups"  # made, parents and all
    kept = authoring.back_up(path, backups)
    assert kept == backups / "99_tiny.20260102-030405-000006.ipynb"
    assert kept.read_text(encoding="utf-8") == "my work" and not path.exists()
    path.write_text("my next work", encoding="utf-8")  # a second backup, same folder
    monkeypatch.setattr(authoring, "datetime", LaterTime)
    again = authoring.back_up(path, backups)
    assert again == backups / "99_tiny.20260102-030405-000007.ipynb"
    assert sorted(p.read_text(encoding="utf-8") for p in backups.iterdir()) == [
        "my next work",
        "my work",
    ]


# ----------------------------------------------------------------- build ----------


def test_build_says_what_it_writes_and_executes(root, fake_client):
    said = []
    authoring.build(root, say=said.append)
    assert said == [
        "executing solutions/99_tiny.py ...",
        "wrote notebooks/99_tiny.ipynb",
        "wrote solutions/99_tiny.ipynb",
    ]
    assert authoring.staleness(_source(root), root) == []
    (client,) = fake_client.made
    assert client.kwargs["resources"] == {"metadata": {"path": str(root / "solutions")}}


def test_build_without_executing_writes_only_the_learner_notebook(root, fake_client):
    said = []
    authoring.build(root, execute=False, say=said.append)
    assert said == ["wrote notebooks/99_tiny.ipynb"]
    assert _learner(root).exists() and not _solution(root).exists()
    assert fake_client.made == []


def test_build_without_executing_skips_a_lesson_without_its_values_and_says_why(root):
    (root / "solutions" / "98_first.py").write_text(
        LESSON + "\n# %% [markdown]\n# Took {{ s }} s.\n", encoding="utf-8"
    )
    said = []
    with pytest.raises(AuthoringError) as error:
        authoring.build(root, execute=False, say=said.append)
    reason = "solutions/98_first.py: no value for {{ s }}"
    assert reason in str(error.value)
    assert not (root / "notebooks" / "98_first.ipynb").exists()
    assert _learner(root).exists()  # the next lesson is still written
    assert said[0].startswith("! skipped notebooks/98_first.ipynb: " + reason)
    assert said[1:] == ["wrote notebooks/99_tiny.ipynb"]


def test_build_only_the_lessons_asked_for(root, fake_client):
    (root / "solutions" / "98_other.py").write_text(LESSON, encoding="utf-8")
    authoring.build(root, only=["98"], say=lambda _: None)
    assert (root / "notebooks" / "98_other.ipynb").exists()
    assert (root / "solutions" / "98_other.ipynb").exists()
    assert not _learner(root).exists() and not _solution(root).exists()


def _edit_learner(root: Path) -> None:
    nb = nbformat.read(_learner(root), as_version=4)
    nb.cells[1].source = "def double(x):\n    return x + x  # my answer"
    nbformat.write(nb, _learner(root))


def test_build_leaves_an_edited_notebook_of_an_unchanged_lesson_and_says_so(root):
    authoring.build(root, execute=False, say=lambda _: None)
    _edit_learner(root)
    said = []
    authoring.build(root, execute=False, say=said.append)
    assert said == [
        "! notebooks/99_tiny.ipynb has your edits and its lesson has not changed: left as it is"
    ]
    assert "my answer" in _learner(root).read_text(encoding="utf-8")


def test_build_backs_up_an_edited_notebook_of_a_changed_lesson_and_says_where(root, monkeypatch):
    monkeypatch.setattr(authoring, "datetime", FixedTime)
    authoring.build(root, execute=False, say=lambda _: None)
    _edit_learner(root)
    _source(root).write_text(LESSON.replace("tiny lesson", "tiny lesson, revised"), "utf-8")
    said = []
    authoring.build(root, execute=False, say=said.append)
    kept = "notebooks/backups/99_tiny.20260102-030405-000006.ipynb"
    assert said == [
        f"! notebooks/99_tiny.ipynb had your edits and its lesson changed: your version is kept "
        f"in {kept}, the new lesson is in its place"
    ]
    assert "my answer" in (root / kept).read_text(encoding="utf-8")
    fresh = nbformat.read(_learner(root), as_version=4)
    assert "revised" in fresh.cells[0].source and "my answer" not in fresh.cells[1].source


# ------------------------------------------------------------- staleness ----------


def test_staleness_names_each_missing_notebook(root):
    assert authoring.staleness(_source(root), root) == [
        "notebooks/99_tiny.ipynb is missing",
        "solutions/99_tiny.ipynb is missing",
    ]


def test_staleness_of_a_changed_lesson_names_both_notebooks(root, fake_client):
    _built(root)
    _source(root).write_text(LESSON.replace("21", "4"), encoding="utf-8")
    assert authoring.staleness(_source(root), root) == [
        "notebooks/99_tiny.ipynb differs from what 99_tiny.py generates",
        "solutions/99_tiny.ipynb was built from another version of 99_tiny.py",
    ]


def _change_solution(root: Path, change) -> list[str]:
    nb = nbformat.read(_solution(root), as_version=4)
    change(nb)
    authoring.write(nb, _solution(root))
    return authoring.staleness(_source(root), root)


def test_staleness_sees_a_solution_edited_or_never_executed(root, fake_client):
    _built(root)
    differ = ["solutions/99_tiny.ipynb's cells differ from 99_tiny.py"]
    assert _change_solution(root, lambda nb: setattr(nb.cells[1], "source", "x = 1")) == differ
    _built(root)
    assert _change_solution(root, lambda nb: nb.cells[2].metadata.pop("tags")) == differ
    _built(root)
    assert _change_solution(root, lambda nb: setattr(nb.cells[2], "execution_count", None)) == [
        "solutions/99_tiny.ipynb has cells that were never executed"
    ]


def test_staleness_sees_a_learner_notebook_that_differs_by_a_byte(root, fake_client):
    _built(root)
    text = _learner(root).read_text(encoding="utf-8")
    _learner(root).write_text(text.rstrip("\n"), encoding="utf-8")  # the final newline
    assert authoring.staleness(_source(root), root) == [
        "notebooks/99_tiny.ipynb differs from what 99_tiny.py generates"
    ]


# --------------------------------------------------------- the command line ----------


def test_cli_build_passes_the_lessons_and_the_execute_choice(monkeypatch):
    calls = []
    monkeypatch.setattr(authoring, "build", lambda **kwargs: calls.append(kwargs))
    assert authoring.main(["build"]) == 0
    assert authoring.main(["build", "02", "03_scaling", "--no-execute"]) == 0
    assert calls == [
        {"only": None, "execute": True},
        {"only": ["02", "03_scaling"], "execute": False},
    ]


def test_cli_reports_an_authoring_error_on_stderr(monkeypatch, capsys):
    def broken(**kwargs):
        raise AuthoringError("no lesson source in solutions starts with ['77']")

    monkeypatch.setattr(authoring, "build", broken)
    assert authoring.main(["build", "77"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "error: no lesson source in solutions starts with ['77']\n")


@pytest.fixture
def cli_root(root, fake_client, monkeypatch):
    """`python -m course.authoring check` run on the sandbox course."""
    _built(root)
    staleness = authoring.staleness
    monkeypatch.setattr(authoring, "ROOT", root)
    monkeypatch.setattr(authoring, "staleness", lambda source: staleness(source, root))
    return root


def test_cli_check_exits_zero_when_all_is_current(cli_root, capsys):
    assert authoring.main(["check"]) == 0
    assert capsys.readouterr().out == "all notebooks are current\n"


def test_cli_check_lists_each_stale_notebook_and_exits_one(cli_root, capsys):
    _learner(cli_root).unlink()
    assert authoring.main(["check"]) == 1
    assert capsys.readouterr().out == (
        "stale: notebooks/99_tiny.ipynb is missing (run `make notebooks`)\n1 stale\n"
    )
    _solution(cli_root).unlink()
    assert authoring.main(["check"]) == 1
    assert capsys.readouterr().out.endswith("is missing (run `make notebooks`)\n2 stale\n")


def test_cli_needs_a_command_and_explains_itself(capsys):
    with pytest.raises(SystemExit) as stop:
        authoring.main([])
    assert stop.value.code == 2
    assert "required: command" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        authoring.main(["--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: python -m course.authoring")
    assert "regenerate learner and solution notebooks" in help_text
    assert "exit 1 if any generated notebook is stale" in help_text
    assert "One source per lesson -> a learner notebook" in help_text  # the module's docstring
    with pytest.raises(SystemExit):
        authoring.main(["build", "--help"])
    build_help = capsys.readouterr().out
    assert "lesson numbers or names (default: all)" in build_help
    assert "--no-execute  learner notebooks only" in build_help
