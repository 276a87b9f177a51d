"""The translated editions (course/i18n.py): what a translator and a Korean learner rely on.

- every lesson with a catalogue in translations/ko/ has no stale, missing or obsolete entry,
  and a changed English sentence makes its entry stale, named, until it is translated again;
- lessons without a catalogue are listed (skipped, with the reason), not failed;
- the Korean notebooks are the English ones with Korean prose: code cells and outputs equal
  cell for cell, the prose filled with the same run's values, current with their catalogue;
- a learner's edits in notebooks/ko/ are protected exactly as in notebooks/;
- nbval does not run solutions/ko/ or notebooks/ko/ (the English run proves them);
- the docs pages with a catalogue (the course map, the exercises page) are held to the same,
  and their Korean pages docs/ko/NAME.md are what `make translations` writes from them: a
  changed English sentence stales its entry, a changed figure does not (it is a field), the
  links lead to the Korean notebooks and pages, code and verdict lines stay English.
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


# --------------------------------------------- docs pages (issue 44) ----------
# docs/index.md (the course map) and docs/exercises.md have catalogues too,
# translations/ko/docs/NAME.po, and their Korean pages docs/ko/NAME.md are generated from the
# English page and the catalogue by `make translations` (course.i18n.translate_page).

PAGES = i18n.pages("ko")
FENCED = re.compile(r"^```.*?^```", re.S | re.M)


def test_the_course_map_and_the_exercises_page_have_korean_catalogues():
    assert {p.relative_to(ROOT).as_posix() for p in PAGES} >= {"docs/index.md", "docs/exercises.md"}


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_korean_page_catalogue_is_current(page):
    assert i18n.problems(page, "ko") == []


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_korean_page_is_what_make_translations_writes(page):
    """docs/ko/NAME.md is generated: regenerating it gives the same bytes."""
    assert i18n.page_staleness(page, "ko") == []


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_units_put_back_render_the_page_as_before(page):
    text = page.read_text(encoding="utf-8")
    assert _html(i18n.render(i18n.split_markdown(text, page=True))) == _html(text)


def test_a_pages_units_are_cells_and_its_figures_are_fields():
    page = (
        "# Title\n\n| # | notebook | Run All |\n|---|---|---|\n"
        "| 01 | [`01_x`](../notebooks/01_x.ipynb) | 35 s |\n| 02 | lesson 03's rule | — |\n\n"
        "> - **How long:** 4 s to\n>   2.1 minutes, on a 2-core AMD EPYC 7B13.\n> - **Run:** it\n\n"
        "Took 7.7 minutes, load average 0.2 to 1.0, 2026-12-03; float64, `3 s`, $x_1$."
    )
    blocks = i18n.split_markdown(page, page=True)
    assert [b.text for b in i18n.unit_blocks(blocks)] == [
        "Title",
        "notebook",
        "Run All",
        "lesson {{ 1 }}'s rule",
        "**How long:** {{ 1 }}, on a {{ 2 }}.",
        "**Run:** it",
        "Took {{ 1 }}, load average {{ 2 }}, {{ 3 }}; float64, `3 s`, $x_1$.",
    ]
    korean = {
        "**How long:** {{ 1 }}, on a {{ 2 }}.": "**시간:** {{ 2 }}에서 {{ 1 }}.",
        "Took {{ 1 }}, load average {{ 2 }}, {{ 3 }}; float64, `3 s`, $x_1$.": (
            "{{ 1 }} 걸림, 부하 평균 {{ 2 }}, {{ 3 }}. float64, `3 s`, $x_1$."
        ),
    }
    out = i18n.render(blocks, korean, "ko")
    assert "| 01 | [`01_x`](../notebooks/01_x.ipynb) | 35 s |" in out  # cells kept, not units
    assert "> - **시간:** 2코어 AMD EPYC 7B13에서 4초~2.1분.\n> - **Run:** it" in out
    assert "7.7분 걸림, 부하 평균 0.2~1.0, 2026-12-03. float64, `3 s`, $x_1$." in out


@pytest.fixture
def docs_root(tmp_path):
    """A copy of the docs pages, their catalogues (and the lessons'), README.ko.md."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "translations", tmp_path / "translations")
    shutil.copy(ROOT / "README.ko.md", tmp_path / "README.ko.md")
    return tmp_path


PAGE_OLD = "Replace the two lines with your code, run the cell, then run the checker cell below it:"
PAGE_NEW = "Replace the two lines with your answer, run the cell, then run the checker cell below:"


def test_a_changed_english_sentence_of_a_page_is_stale_until_translated(docs_root):
    page = docs_root / "docs" / "exercises.md"
    assert i18n.problems(page, "ko", docs_root) == []
    assert i18n.page_staleness(page, "ko", docs_root) == []
    text = page.read_text(encoding="utf-8")
    line = text[: text.index(PAGE_OLD)].count("\n") + 1
    page.write_text(text.replace(PAGE_OLD, PAGE_NEW), encoding="utf-8")

    found = i18n.problems(page, "ko", docs_root)
    assert len(found) == 1, found
    assert "translations/ko/docs/exercises.po: stale" in found[0]
    assert f"docs/exercises.md:{line}" in found[0] and "with your answer" in found[0]
    assert "docs/ko/exercises.md is not what" in i18n.page_staleness(page, "ko", docs_root)[0]

    i18n.update(page, "ko", docs_root)  # `make translations`
    i18n.write_page(page, "ko", docs_root)
    korean = (docs_root / "docs" / "ko" / "exercises.md").read_text(encoding="utf-8")
    assert PAGE_NEW in korean  # until translated, the page shows the English
    po = polib.pofile(str(i18n.catalogue_path(page, "ko", docs_root)))
    entry = next(e for e in po if e.msgid == PAGE_NEW)
    assert "fuzzy" in entry.flags and entry.previous_msgid == PAGE_OLD
    entry.msgstr = "두 줄을 여러분의 답으로 바꾸고 셀을 실행한 다음, 아래의 채점기 셀을 실행합니다:"
    entry.flags.remove("fuzzy")
    po.save()
    assert i18n.problems(page, "ko", docs_root) == []
    assert i18n.write_page(page, "ko", docs_root)
    assert "여러분의 답으로" in (docs_root / "docs" / "ko" / "exercises.md").read_text("utf-8")


def test_a_changed_figure_stales_nothing_and_reaches_the_korean_page(docs_root):
    page = docs_root / "docs" / "index.md"
    text = page.read_text(encoding="utf-8")
    assert "(about 2.9 MB)" in text
    page.write_text(text.replace("(about 2.9 MB)", "(about 3.1 MB)"), encoding="utf-8")
    assert i18n.problems(page, "ko", docs_root) == []
    assert i18n.write_page(page, "ko", docs_root)
    korean = (docs_root / "docs" / "ko" / "index.md").read_text(encoding="utf-8")
    assert "약 3.1 MB" in korean and "2.9 MB" not in korean


def test_the_korean_map_links_the_korean_notebooks_pages_and_glossary():
    text = (ROOT / "docs" / "ko" / "index.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d\d) \| \[([^\]]+)\]\(([^)]+)\) \|.*\| \[([^\]]+)\]\(([^)]+)\) \|$",
                      text, re.M)  # fmt: skip
    assert [r[0] for r in rows] == [s.stem[:2] for s in SOURCES]
    for (_, name, notebook, solution, answers), source in zip(rows, SOURCES, strict=True):
        title = i18n.lesson_title(source.stem, "ko")
        assert title and HANGUL.search(title) and name == title, (source.stem, name)
        assert notebook == f"../../notebooks/ko/{source.stem}.ipynb"
        assert answers == f"../../solutions/ko/{source.stem}.ipynb" and solution == "풀이"
    assert "[English](../index.md)" in text and "](glossary.md)" in text


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_a_korean_pages_links_resolve_and_english_only_ones_say_so(page):
    korean = i18n.edition_page(page, "ko")
    text = FENCED.sub("", korean.read_text(encoding="utf-8"))
    for match in i18n.LINK.finditer(text):
        target = match.group(2).partition("#")[0]
        if re.match(r"[a-z]+:", target):
            continue
        file = (korean.parent / target).resolve()
        assert file.is_file(), (korean.name, target)
        in_korean = "ko" in file.relative_to(ROOT).parts or file.name == "README.ko.md"
        marked = text[match.end() :].startswith(i18n.ENGLISH_ONLY["ko"])
        assert marked != in_korean or match.group(1) == "English", (korean.name, target)


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_a_korean_page_keeps_the_code_of_its_english_page(page):
    english = page.read_text(encoding="utf-8")
    korean = i18n.edition_page(page, "ko").read_text(encoding="utf-8")
    assert FENCED.findall(korean) == FENCED.findall(english)  # the verdict lines, in English
    assert HANGUL.search(FENCED.sub("", korean))


def test_the_korean_exercises_page_says_once_that_verdicts_stay_english():
    korean = (ROOT / "docs" / "ko" / "exercises.md").read_text(encoding="utf-8")
    assert korean.count("판정 메시지는 아직 영어입니다") == 1


def test_a_translation_that_changes_a_link_target_is_named(docs_root):
    page = docs_root / "docs" / "index.md"
    po = polib.pofile(str(i18n.catalogue_path(page, "ko", docs_root)))
    entry = next(e for e in po if e.msgid.startswith("[How exercises work]"))
    entry.msgstr = entry.msgstr.replace("](exercises.md)", "](ko/exercises.md)")
    po.save()
    found = i18n.problems(page, "ko", docs_root)
    assert len(found) == 1 and "link spans" in found[0] and "exercises.md" in found[0], found
