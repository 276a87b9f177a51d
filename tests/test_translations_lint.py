"""The Korean edition's lint (course/glossary.py): one term per concept, the English beside a
term's first use in each lesson, and emphasis that CommonMark renders before a particle."""

import shutil

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


def test_the_korean_editions_term_decisions_are_rows():
    rows = {t.english: t for t in TERMS}
    decided = {
        "cross-attention": ("크로스 어텐션", "교차 어텐션"),
        "projection": ("사영", "투영"),
        "parameter": ("파라미터", "매개변수"),
        "sublayer": ("서브층", "하위 층"),
        "greedy decoding": ("그리디 디코딩", "탐욕 디코딩"),
        "label smoothing": ("레이블 스무딩", "라벨 스무딩"),
        "warm-up": ("웜업", "워밍업"),
        "residual stream": ("잔차 스트림", "잔여 스트림"),
        "look-ahead mask": ("룩-어헤드 마스크", "인과 마스크"),
    }
    for english, (korean, wrong) in decided.items():
        assert (rows[english].korean, wrong in rows[english].forbidden) == (korean, True)
    assert "프로젝션" in rows["projection"].forbidden
    assert "causal mask" in rows["look-ahead mask"].aliases
    # loanwords the lessons use unglossed only forbid variants, like *value*
    assert [rows[w].common for w in ("value", "token", "parameter", "memory")] == [True] * 4
    assert not rows["dropout"].common and not rows["sampling"].common


TITLE = '"Attention Is All You Need"'
LN_TITLE = '"On Layer Normalization in the Transformer Architecture"'
NOPE_TITLE = '"Transformer Language Models without Positional Encodings"'


def test_a_quoted_english_title_does_not_ask_for_the_korean_term(tmp_path):
    path = _catalogue(
        tmp_path,
        [
            (f"The paper ({TITLE}, 2017).", f"논문({TITLE}, 2017)."),
            (f"Xiong et al. ({LN_TITLE}).", f"트랜스포머(Transformer) 논문({LN_TITLE})."),
            (f"Haviv ({NOPE_TITLE}).", f"트랜스포머 논문({NOPE_TITLE})."),
            ('Call them "the attention weights".', '이것을 "가중치"라고 부릅니다.'),  # prose: fails
        ],
    )
    found = glossary.lint_catalogue(path, TERMS)
    assert len(found) == 1 and "line 4" in found[0] and "lacks '어텐션'" in found[0]


def test_british_spelling_is_the_rows_term(tmp_path):
    path = _catalogue(
        tmp_path,
        [
            ("Add a layer normalisation.", "층 정규화(layer normalization)를 더합니다."),
            ("The layer normalisation again.", "다시 정규화합니다."),  # the term left out: fails
            ("Tokenisers split words.", "토크나이저(tokenizer)는 단어를 나눕니다."),
        ],
    )
    found = glossary.lint_catalogue(path, TERMS)
    assert len(found) == 1 and "line 2" in found[0] and "lacks '층 정규화'" in found[0]


def test_a_dictionarys_group_key_is_not_the_attention_key(tmp_path):
    assert "group key" in glossary.load_not_terms()
    path = _catalogue(
        tmp_path,
        [
            ("`group(item)` gives the item's group key.", "`group(item)`은 그룹 식별값을 줍니다."),
            ("Each query meets every key.", "각 쿼리(query)가 모든 값을 만납니다."),  # fails
        ],
    )
    found = glossary.lint_catalogue(path, TERMS)
    assert len(found) == 1 and "line 2" in found[0] and "lacks '키'" in found[0]


def test_a_hyphenated_compound_uses_both_terms(tmp_path):
    english = "An encoder-decoder model."
    glossed = _catalogue(tmp_path, [(english, "인코더-디코더(encoder-decoder) 모델.")])
    assert glossary.lint_catalogue(glossed, TERMS) == []
    bare = _catalogue(tmp_path, [(english, "인코더-디코더 모델입니다.")])
    found = [p.split("parentheses: ")[1] for p in glossary.lint_catalogue(bare, TERMS)]
    assert sorted(found) == ["디코더(decoder)", "인코더(encoder)"]


def test_the_gloss_names_the_concept_as_the_english_does(tmp_path):
    path = _catalogue(
        tmp_path,
        [
            ("Apply a causal mask.", "룩-어헤드 마스크(look-ahead mask)를 씌웁니다."),  # fails
            ("A causal mask again.", "인과 마스크를 다시 씁니다."),  # forbidden, and lacks it
        ],
    )
    found = glossary.lint_catalogue(path, TERMS)
    assert any("line 1" in p and "룩-어헤드 마스크(causal mask)" in p for p in found)
    assert any("line 2" in p and "'인과 마스크' (write '룩-어헤드 마스크')" in p for p in found)
    ok = _catalogue(
        tmp_path, [("Apply a causal mask.", "룩-어헤드 마스크(causal mask)를 씌웁니다.")]
    )
    assert glossary.lint_catalogue(ok, TERMS) == []


def test_a_longer_terms_gloss_introduces_its_parts(tmp_path):
    first = (
        "The position-wise feed-forward network.",
        "위치별 피드포워드 신경망(position-wise feed-forward network).",
    )
    again = ("The feed-forward network is big.", "피드포워드 신경망은 큽니다.")
    assert glossary.lint_catalogue(_catalogue(tmp_path, [first, again]), TERMS) == []
    alone = glossary.lint_catalogue(_catalogue(tmp_path, [again]), TERMS)
    assert "피드포워드 신경망(feed-forward network)" in alone[0]


def test_a_not_the_term_row_must_name_a_term_its_phrase_uses(tmp_path):
    page = tmp_path / "glossary.md"
    rows = "| English | 한국어 | forbidden |\n|---|---|---|\n| key | 키 | 열쇠 |\n"
    page.write_text(rows + "\n| Not the term | Term |\n|---|---|\n| group key | key |\n")
    assert glossary.load_not_terms(page) == ["group key"]
    page.write_text(rows + "\n| Not the term | Term |\n|---|---|\n| group key | kye |\n")
    with pytest.raises(ValueError, match="'group key' \\| 'kye'"):
        glossary.load_not_terms(page)


def test_the_docs_pages_catalogues_are_linted_too(tmp_path):
    """translations/ko/docs/NAME.po (the course map, the exercises page): the same rules, the
    page's first use of a term glossed."""
    (tmp_path / "docs" / "ko").mkdir(parents=True)
    shutil.copy(glossary.ROOT / "docs" / "ko" / "glossary.md", tmp_path / "docs" / "ko")
    pages = tmp_path / "translations" / "ko" / "docs"
    pages.mkdir(parents=True)
    path = _catalogue(tmp_path, [("A residual connection adds.", "잔차 연결이 더합니다.")])
    path.rename(pages / "index.po")
    found = glossary.lint(tmp_path)
    assert len(found) == 1 and "translations/ko/docs/index.po (line 1" in found[0], found
    assert "잔차 연결(residual connection)" in found[0]
