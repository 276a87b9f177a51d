"""The translated editions (course/i18n.py): what a translator and a Korean learner rely on.

- every lesson with a catalogue in translations/ko/ has no stale, missing or obsolete entry,
  and a changed English sentence makes its entry stale, named, until it is translated again;
- lessons without a catalogue are listed (skipped, with the reason), not failed;
- the Korean notebooks are the English ones with Korean prose: code cells and outputs equal
  cell for cell, the prose filled with the same run's values, current with their catalogue;
- a learner's edits in notebooks/ko/ are protected exactly as in notebooks/;
- nbval does not run solutions/ko/ or notebooks/ko/ (the English run proves them).
"""

import re
import shutil

import nbformat
import polib
import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from course import authoring, i18n

ROOT = authoring.ROOT
SOURCES = authoring.lesson_sources(ROOT / "solutions")
KO = [s for s in SOURCES if i18n.catalogue_path(s, "ko").exists()]
HANGUL = re.compile("[가-힣]")


def test_lessons_01_and_02_have_korean_catalogues():
    assert {s.stem[:2] for s in KO} >= {"01", "02"}


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_korean_catalogue_is_current(source):
    """Skipped, with the reason in the summary (`pytest -rs`), for a lesson not yet translated."""
    if source not in KO:
        pytest.skip(f"{source.stem}: no Korean catalogue yet (translations/ko/{source.stem}.po)")
    assert i18n.problems(source, "ko") == []


# ------------------------------------------------------------ units ----------

_MD = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


def _html(markdown: str) -> str:
    return re.sub(r"\s+", " ", _MD.render(markdown))


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_units_put_back_render_every_markdown_cell_as_before(source):
    """Cutting a cell into units and joining them again changes nothing a reader sees: the
    same HTML (the units' lines joined by one space), so no paragraph is lost or split."""
    for cell in authoring.read_lesson(source).cells:
        if cell.cell_type == "markdown":
            assert _html(i18n.render(i18n.split_markdown(cell.source))) == _html(cell.source)


def test_units_are_template_paragraphs_items_headings_rows_not_code_or_math():
    cell = (
        "## 3. A heading\n\nThe loop took {{ ms:.1f }} ms,\nwrapped over two lines;\n"
        "a paper from 2017 and\n2000) wrapped too.\n\n- an item\n  continued\n1. a step\n\n"
        "$$\nx = y\n$$\n\n```python\ncode()\n```\n\n| a | b |\n|---|---|\n| $x$ | the x |\n"
        "| $y$ | $z$ |\n\n> a quote\n> goes on"
    )
    texts = [b.text for b in i18n.split_markdown(cell) if b.text is not None]
    assert texts == [
        "3. A heading",
        "The loop took {{ ms:.1f }} ms, wrapped over two lines; a paper from 2017 and 2000) "
        "wrapped too.",
        "an item continued",
        "a step",
        "| a | b |",
        "| $x$ | the x |",
        "a quote goes on",
    ]


def test_a_translation_goes_back_in_the_units_place():
    blocks = i18n.split_markdown("Intro:\n- first item,\n  wrapped\n\n## Title")
    out = i18n.render(blocks, {"first item, wrapped": "첫 항목\n둘째 줄", "Title": "제목"})
    assert out == "Intro:\n- 첫 항목\n  둘째 줄\n\n## 제목"


# ---------------------------------------------------- staleness, shown ----------


@pytest.fixture
def lesson01(tmp_path):
    """A copy of lesson 01's source and its Korean catalogue, to change."""
    (tmp_path / "solutions").mkdir()
    (tmp_path / "translations" / "ko").mkdir(parents=True)
    source = tmp_path / "solutions" / "01_rnn_limits.py"
    shutil.copy(ROOT / "solutions" / source.name, source)
    shutil.copy(i18n.catalogue_path(source, "ko"), i18n.catalogue_path(source, "ko", tmp_path))
    return source


OLD = "A vanilla RNN keeps a hidden state $h_t$, a vector of $d_h$ numbers."
NEW = "A vanilla RNN keeps one hidden state $h_t$, a vector of $d_h$ numbers."


def test_a_changed_english_sentence_fails_the_check_until_it_is_translated(lesson01):
    root = lesson01.parents[1]
    assert i18n.problems(lesson01, "ko", root) == []
    text = lesson01.read_text(encoding="utf-8")
    lesson01.write_text(text.replace("# " + OLD, "# " + NEW), encoding="utf-8")

    found = i18n.problems(lesson01, "ko", root)  # before `make translations` too
    assert len(found) == 1, found
    assert "translations/ko/01_rnn_limits.po: stale" in found[0]
    assert "01_rnn_limits.py:42" in found[0] and "A vanilla RNN keeps one hidden" in found[0]

    i18n.update(lesson01, "ko", root)  # `make translations`
    po = polib.pofile(str(i18n.catalogue_path(lesson01, "ko", root)))
    entry = next(e for e in po if e.msgid.startswith(NEW[:30]))
    assert "fuzzy" in entry.flags and entry.previous_msgid.startswith(OLD)
    assert entry.msgstr.startswith("바닐라 RNN은")  # the old Korean kept beside, to edit
    assert len(i18n.problems(lesson01, "ko", root)) == 1

    entry.msgstr = entry.msgstr.replace("은닉 상태(hidden state)", "은닉 상태(hidden state) 하나")
    entry.flags.remove("fuzzy")
    po.save()
    assert i18n.problems(lesson01, "ko", root) == []


def test_new_paragraphs_are_missing_and_removed_ones_obsolete_until_pruned(lesson01):
    root = lesson01.parents[1]
    text = lesson01.read_text(encoding="utf-8")
    text = text.replace("# One step by hand:", "# Something entirely different, new here.")
    lesson01.write_text(text, encoding="utf-8")
    i18n.update(lesson01, "ko", root)
    found = i18n.problems(lesson01, "ko", root)
    assert any(": missing: " in p and "Something entirely different" in p for p in found)
    assert any(": obsolete: " in p and "One step by hand" in p for p in found)
    i18n.update(lesson01, "ko", root, prune=True)
    assert [p for p in i18n.problems(lesson01, "ko", root) if "obsolete" in p] == []


def test_a_translation_that_drops_a_field_or_math_is_named(lesson01):
    root = lesson01.parents[1]
    path = i18n.catalogue_path(lesson01, "ko", root)
    po = polib.pofile(str(path))
    entry = next(e for e in po if "{{ " in e.msgid and e.msgstr and not e.obsolete)
    field = re.search(r"\{\{ (.+?) \}\}", entry.msgid).group(0)  # the entry's first field
    assert field in entry.msgstr
    entry.msgstr = entry.msgstr.replace(field, "85%")  # the translator typed the figure
    po.save()
    found = i18n.problems(lesson01, "ko", root)
    assert len(found) == 1 and "field spans" in found[0] and field[3:-3] in found[0]


# ----------------------------------------------------------- notebooks ----------


def _pairs(source):
    for folder in ("solutions", "notebooks"):
        english = nbformat.read(ROOT / folder / f"{source.stem}.ipynb", as_version=4)
        korean = nbformat.read(ROOT / folder / "ko" / f"{source.stem}.ipynb", as_version=4)
        yield folder, english, korean


@pytest.mark.learner_notebooks
@pytest.mark.parametrize("source", KO, ids=[s.stem for s in KO])
def test_korean_code_cells_and_outputs_equal_the_english_cell_for_cell(source):
    for folder, english, korean in _pairs(source):
        assert [c.cell_type for c in korean.cells] == [c.cell_type for c in english.cells]
        for en, ko in zip(english.cells, korean.cells, strict=True):
            if en.cell_type == "code":
                assert ko == en, f"{folder}/ko/{source.stem}.ipynb, cell {en.id}"
            else:
                assert ko.id == en.id
                if i18n._has_words(en.source):
                    assert HANGUL.search(ko.source), f"{folder}/ko: cell {en.id} not in Korean"


@pytest.mark.parametrize("source", KO, ids=[s.stem for s in KO])
def test_korean_prose_is_filled_with_the_same_runs_values(source):
    english = nbformat.read(ROOT / "solutions" / f"{source.stem}.ipynb", as_version=4)
    korean = nbformat.read(ROOT / "solutions" / "ko" / f"{source.stem}.ipynb", as_version=4)
    assert korean.metadata.course.filled == english.metadata.course.filled
    prose = "\n".join(c.source for c in korean.cells if c.cell_type == "markdown")
    assert "{{" not in prose
    for value in english.metadata.course.filled.values():
        assert value in prose


@pytest.mark.learner_notebooks
@pytest.mark.parametrize("source", KO, ids=[s.stem for s in KO])
def test_korean_notebooks_are_current(source):
    assert authoring.edition_staleness(source) == []


def test_nbval_does_not_collect_the_korean_notebooks(request):
    """What this very run collected (`make test` collects notebooks/ and solutions/ too; the
    root conftest.py leaves their ko/ folders out)."""
    paths = {item.path for item in request.session.items}
    if not any(p.suffix == ".ipynb" for p in paths):
        pytest.skip("this run collected no notebook: `make test` (or pytest notebooks) does")
    assert not [p for p in paths if p.suffix == ".ipynb" and p.parent.name == "ko"]


# ---------------------------------------- learner's edits, in a sandbox ----------

LESSON = """\
# %% [markdown]
# # 99 · A tiny lesson
#
# It doubles {{ n }} numbers.

# %%
n = 2
def double(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION
"""
CATALOGUE = """\
msgid ""
msgstr ""
"Language: ko\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

#. heading
msgid "99 · A tiny lesson"
msgstr "99 · 작은 레슨"

msgid "It doubles {{ n }} numbers."
msgstr "수 {{ n }}개를 두 배로 만듭니다."
"""


@pytest.fixture
def course_root(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "99_tiny.py").write_text(LESSON, encoding="utf-8")
    (tmp_path / "translations" / "ko").mkdir(parents=True)
    (tmp_path / "translations" / "ko" / "99_tiny.po").write_text(CATALOGUE, encoding="utf-8")
    return tmp_path


def _edit(path, text, cell=2):
    nb = nbformat.read(path, as_version=4)
    nb.cells[cell].source = text  # learner: title, Colab's install cell, the answer's cell
    nbformat.write(nb, path)


def test_build_writes_korean_notebooks_from_the_same_run(course_root):
    said = []
    authoring.build(course_root, say=said.append)
    source = course_root / "solutions" / "99_tiny.py"
    assert "wrote notebooks/ko/99_tiny.ipynb" in said and "wrote solutions/ko/99_tiny.ipynb" in said
    korean = nbformat.read(course_root / "solutions" / "ko" / "99_tiny.ipynb", as_version=4)
    assert korean.cells[0].source == "# 99 · 작은 레슨\n\n수 2개를 두 배로 만듭니다."
    learner = nbformat.read(course_root / "notebooks" / "ko" / "99_tiny.ipynb", as_version=4)
    assert "raise NotImplementedError" in learner.cells[2].source
    assert authoring.edition_staleness(source, course_root) == []
    _edit(course_root / "solutions" / "ko" / "99_tiny.ipynb", "n = 3", cell=1)
    stale = authoring.edition_staleness(source, course_root)
    assert "solutions/ko/99_tiny.ipynb differs" in stale[0]


def test_korean_learner_edits_stay_or_are_backed_up_as_in_english(course_root):
    source = course_root / "solutions" / "99_tiny.py"  # without its field: nothing executes
    source.write_text(LESSON.replace("#\n# It doubles {{ n }} numbers.\n", ""), encoding="utf-8")
    authoring.build(course_root, execute=False, say=lambda _: None)
    learner = course_root / "notebooks" / "ko" / "99_tiny.ipynb"
    _edit(learner, "def double(x):\n    return x + x  # 내 답")
    said = []
    authoring.build(course_root, execute=False, say=said.append)
    assert "내 답" in nbformat.read(learner, as_version=4).cells[2].source
    assert any("notebooks/ko/99_tiny.ipynb has your edits" in s for s in said)

    po = course_root / "translations" / "ko" / "99_tiny.po"  # a new translation arrives
    po.write_text(CATALOGUE.replace("작은 레슨", "아주 작은 레슨"), encoding="utf-8")
    said = []
    authoring.build(course_root, execute=False, say=said.append)
    backups = list((course_root / "notebooks" / "backups" / "ko").glob("99_tiny.*.ipynb"))
    assert len(backups) == 1 and "내 답" in backups[0].read_text(encoding="utf-8")
    assert "아주 작은 레슨" in nbformat.read(learner, as_version=4).cells[0].source
    assert any("backups/ko/99_tiny." in s for s in said)
