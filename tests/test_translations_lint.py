"""The Korean edition's lint (course/glossary.py): one term per concept, the English beside a
term's first use in each lesson, and emphasis that CommonMark renders before a particle."""

import polib
import pytest

from course import glossary

TERMS = glossary.load_terms()


def test_the_korean_catalogues_and_pages_pass_the_lint():
    assert glossary.lint() == []


def test_the_glossary_has_the_issues_terms_once_each():
    korean = {t.english: t.korean for t in TERMS}
    assert korean["residual connection"] == "잔차 연결"
    assert korean["Transformer"] == "트랜스포머"
    assert korean["look-ahead mask"] == "룩-어헤드 마스크"
    assert len(korean) == len(TERMS)  # one row per English term
    assert len({t.korean for t in TERMS}) == len(TERMS)


@pytest.mark.parametrize(
    "markdown, shows",
    [
        ("**잔차 연결(residual connection)**은 입력을 더합니다.", True),  # `)` then 은: no close
        ("**잔차 연결**(residual connection)은 입력을 더합니다.", False),
        ("**핵심 아이디어.** 어텐션은", False),  # punctuation, then a space: closes
        ("대략 *무엇인가?*입니다.", True),
        ("모든 **값**을 더합니다.", False),
    ],
)
def test_emphasis_before_a_korean_particle(markdown, shows):
    assert (glossary.literal_asterisks(markdown) > 0) is shows


def _catalogue(tmp_path, entries):
    po = polib.POFile()
    po.metadata = {"Language": "ko", "Content-Type": "text/plain; charset=UTF-8"}
    for line, (msgid, msgstr) in enumerate(entries, 1):
        po.append(polib.POEntry(msgid=msgid, msgstr=msgstr, occurrences=[("x.py", str(line))]))
    path = tmp_path / "03_x.po"
    po.save(str(path))
    return path


def test_a_forbidden_variant_is_named_with_its_paragraph(tmp_path):
    path = _catalogue(tmp_path, [("The Transformer (Vaswani).", "변압기(Transformer)는 좋습니다.")])
    found = glossary.lint_catalogue(path, TERMS)
    assert any("line 1" in p and "'변압기' (write '트랜스포머')" in p for p in found)


def test_a_term_left_out_or_not_glossed_at_its_first_use_fails(tmp_path):
    path = _catalogue(
        tmp_path,
        [
            ("A residual connection adds the input.", "잔차 연결은 입력을 더합니다."),
            ("The residual connection again.", "다시 그 연결입니다."),
            ("A residual connection once more.", "**잔차 연결(residual connection)**은 또."),
        ],
    )
    found = glossary.lint_catalogue(path, TERMS)
    assert any("line 1" in p and "잔차 연결(residual connection)" in p for p in found)
    assert any("line 2" in p and "lacks '잔차 연결'" in p for p in found)
    assert any("line 3" in p and "does not render" in p for p in found)
    assert len(found) == 3


def test_a_term_inside_a_longer_one_and_code_names_do_not_count(tmp_path):
    path = _catalogue(
        tmp_path,
        [
            ("Self-attention, in `course.attention`.", "셀프 어텐션(self-attention)입니다."),
            ("Plain attention.", "어텐션(attention)입니다. 일으키는 값입니다."),
        ],
    )
    assert glossary.lint_catalogue(path, TERMS) == []
