"""Prose that quotes a run takes its figures from the run (course.authoring's `{{ expr }}`).

An instructor writes `{{ expr }}` in a lesson's markdown; `make notebooks` executes the
lesson, evaluates each field in the kernel after the last cell, and both notebooks show
plain text with the number. These tests execute a real kernel on a tiny lesson: the prose
follows the outputs when the lesson changes, an expression that fails names itself, and
`check` notices prose that no longer matches its source or its outputs.
"""

import nbformat
import pytest

from course import authoring
from course.authoring import AuthoringError

LESSON = """\
# %% [markdown]
# # 99 · A lesson that measures

# %%
import random

random.seed(SEED)
draws = [random.randint(1, 6) for _ in range(5)]
print("draws:", draws)

# %% [markdown]
# The five draws add up to {{ sum(draws) }}, a mean of {{ sum(draws) / 5:.2f }};
# the largest is {{ max(draws) }}. The mean again: {{sum(draws) / 5:.2f}}.
# Quotes of both kinds: {{ {"Tom's": "x"}["Tom's"] + 'y' }}.
"""


def _lesson(root, seed=0):
    (root / "solutions").mkdir(exist_ok=True)
    source = root / "solutions" / "99_measure.py"
    source.write_text(LESSON.replace("SEED", str(seed)), encoding="utf-8")
    return source


def _markdown(path):
    """The lesson's second markdown cell (a learner notebook has Colab's cell before it)."""
    cells = nbformat.read(path, as_version=4).cells
    return [c for c in cells if c.cell_type == "markdown"][1].source


def _expected(seed):
    import random

    random.seed(seed)
    draws = [random.randint(1, 6) for _ in range(5)]
    return (
        f"The five draws add up to {sum(draws)}, a mean of {sum(draws) / 5:.2f};\n"
        f"the largest is {max(draws)}. The mean again: {sum(draws) / 5:.2f}.\n"
        "Quotes of both kinds: xy."
    ), draws


def _expected_learner(seed):
    """The same prose in the learner notebook: each figure marked as the course's run."""
    _, draws = _expected(seed)
    mark, mean = "\N{DAGGER}", f"{sum(draws) / 5:.2f}"
    return (
        f"The five draws add up to {sum(draws)}{mark}, a mean of {mean}{mark};\n"
        f"the largest is {max(draws)}{mark}. The mean again: {mean}{mark}.\n"
        f"Quotes of both kinds: xy{mark}.\n\n"
        "*\N{DAGGER}: a figure from the course's stored run, `solutions/99_measure.ipynb`; "
        "your own run prints its own in the code cells.*"
    )


def test_fields_are_found_once_each_in_markdown_only():
    lesson = nbformat.v4.new_notebook()
    lesson.metadata = {"course": {"source": "solutions/99_x.py"}}
    lesson.cells = [
        nbformat.v4.new_markdown_cell("a {{ x }} b {{x}} c {{ f'{y:.1f}' }}"),
        nbformat.v4.new_code_cell('print(f"{{literal}}")'),
    ]
    assert authoring.fields(lesson) == ["x", "f'{y:.1f}'"]
    filled = authoring.fill(lesson, {"x": "1", "f'{y:.1f}'": "2.0"})
    assert filled.cells[0].source == "a 1 b 1 c 2.0"
    assert filled.cells[1].source == 'print(f"{{literal}}")'  # code is never filled
    assert lesson.cells[0].source.startswith("a {{ x }}")  # the lesson itself is untouched


def test_a_field_without_a_value_is_named():
    lesson = nbformat.v4.new_notebook()
    lesson.metadata = {"course": {"source": "solutions/99_x.py"}}
    lesson.cells = [nbformat.v4.new_markdown_cell("{{ bleu:.1f }} and {{ steps }}")]
    with pytest.raises(AuthoringError) as error:
        authoring.fill(lesson, {"steps": "600"})
    assert "solutions/99_x.py: no value for {{ bleu:.1f }}" in str(error.value)


def test_an_empty_field_is_an_error():
    lesson = nbformat.v4.new_notebook()
    lesson.metadata = {"course": {"source": "solutions/99_x.py"}}
    lesson.cells = [nbformat.v4.new_markdown_cell("a {{ }} b")]
    with pytest.raises(AuthoringError, match="empty"):
        authoring.fields(lesson)


def test_build_fills_both_notebooks_from_the_run_and_they_are_current(tmp_path):
    source = _lesson(tmp_path, seed=0)
    authoring.build(tmp_path, say=lambda _: None)
    text, draws = _expected(0)
    solution = tmp_path / "solutions" / "99_measure.ipynb"
    learner = tmp_path / "notebooks" / "99_measure.ipynb"
    assert _markdown(solution) == text  # the solution shows its own run's figures plainly
    assert _markdown(learner) == _expected_learner(0)
    assert f"draws: {draws}" in nbformat.read(solution, as_version=4).cells[1].outputs[0]["text"]
    assert len(nbformat.read(solution, as_version=4).cells) == 3  # the fill cell is gone
    assert authoring.staleness(source, tmp_path) == []
    # the learner notebook can be rebuilt without executing: it takes the recorded values
    learner.unlink()
    authoring.build(tmp_path, execute=False, say=lambda _: None)
    assert _markdown(learner) == _expected_learner(0)
    assert authoring.staleness(source, tmp_path) == []


def test_the_prose_follows_the_run_when_the_lesson_changes(tmp_path):
    source = _lesson(tmp_path, seed=0)
    authoring.build(tmp_path, say=lambda _: None)
    before = _markdown(tmp_path / "solutions" / "99_measure.ipynb")
    _lesson(tmp_path, seed=4)
    assert authoring.staleness(source, tmp_path)  # the seed changed: stale until rebuilt
    authoring.build(tmp_path, say=lambda _: None)
    after = _markdown(tmp_path / "solutions" / "99_measure.ipynb")
    assert after == _expected(4)[0] != before
    assert authoring.staleness(source, tmp_path) == []


def test_a_field_that_fails_names_itself_and_its_error(tmp_path):
    source = _lesson(tmp_path)
    source.write_text(
        source.read_text(encoding="utf-8") + "# And {{ mean_draw }}.\n", encoding="utf-8"
    )
    with pytest.raises(AuthoringError) as error:
        authoring.build(tmp_path, say=lambda _: None)
    assert "{{ mean_draw }}: NameError: name 'mean_draw' is not defined" in str(error.value)
    assert not (tmp_path / "notebooks" / "99_measure.ipynb").exists()


def test_check_notices_outputs_changed_after_the_prose_was_filled(tmp_path):
    source = _lesson(tmp_path)
    authoring.build(tmp_path, say=lambda _: None)
    solution = tmp_path / "solutions" / "99_measure.ipynb"
    nb = nbformat.read(solution, as_version=4)
    nb.cells[1].outputs[0]["text"] = "draws: [6, 6, 6, 6, 6]\n"  # executed again by hand
    nbformat.write(nb, solution)
    (problem,) = authoring.staleness(source, tmp_path)
    assert "outputs are not the ones its prose was filled beside" in problem


def test_check_notices_prose_edited_in_a_generated_notebook(tmp_path):
    source = _lesson(tmp_path)
    authoring.build(tmp_path, say=lambda _: None)
    solution = tmp_path / "solutions" / "99_measure.ipynb"
    nb = nbformat.read(solution, as_version=4)
    nb.cells[2].source = nb.cells[2].source.replace("add up to", "add up to about")
    nbformat.write(nb, solution)
    assert any("cells differ" in p for p in authoring.staleness(source, tmp_path))


def test_check_notices_a_new_field_that_was_never_evaluated(tmp_path):
    source = _lesson(tmp_path)
    authoring.build(tmp_path, say=lambda _: None)
    source.write_text(source.read_text(encoding="utf-8") + "# First: {{ draws[0] }}.\n")
    (problem,) = authoring.staleness(source, tmp_path)
    assert "has no value for the prose field(s) {{ draws[0] }}" in problem
