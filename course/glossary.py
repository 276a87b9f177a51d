"""The Korean edition's lint: one Korean term per concept, as docs/ko/glossary.md lists them,
and emphasis that renders.

    python -m course.glossary        # exit 1 and one line per problem, else "no problems"

For every lesson catalogue translations/ko/NN_name.po (each translated entry, in order):
  - no forbidden variant of a term (변압기 for 트랜스포머, 잔여 연결 for 잔차 연결, ...);
  - an English paragraph that uses a term (`attention`, `keys`) has its Korean form in the
    translation (not for a term that is also an everyday word, *value*: italics in the table);
  - the first translation, outside headings, of an English paragraph that uses a term carries
    the term's English in parentheses at its first Korean use there:
    `어텐션(attention)`, `인코더-디코더(encoder-decoder)`, `**인코더**(encoder)`;
  - the translation renders no literal `*` that its English does not: CommonMark does not close
    `**잔차 연결(residual connection)**은` (emphasis ending in punctuation right before a
    letter, commonmark-spec#650), so the asterisks would show; write `**잔차 연결**(residual
    connection)은`.
README.ko.md and docs/ko/*.md (not the glossary itself) are held to the forbidden variants and
the emphasis rule too.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

ROOT = Path(__file__).resolve().parents[1]
HANGUL = "가-힣"


@dataclass
class Term:
    english: str
    korean: str
    forbidden: list[str]
    common: bool = False  # also an everyday word (value): only its variants are checked

    def korean_at(self, text: str) -> list[int]:
        """Where the Korean form starts in `text` as a word of its own (not inside a longer
        Korean word: 키 in 일으키다 is not the term)."""
        pattern = f"(?<![{HANGUL}]){re.escape(self.korean)}"
        return [m.start() for m in re.finditer(pattern, text)]

    def english_in(self, text: str) -> bool:
        word = re.escape(self.english)
        consonant_y = re.search(r"[^aeiou]y$", self.english) is not None  # query, not key
        plural = word[:-1] + "(?:y|ies)" if consonant_y else word + "(?:s|es)?"
        pattern = rf"(?<![\w-]){plural}(?![\w-])"
        return re.search(pattern, text, re.IGNORECASE) is not None


def load_terms(path: Path = ROOT / "docs" / "ko" / "glossary.md") -> list[Term]:
    """The glossary table's rows: | English | 한국어 | forbidden, comma-separated |."""
    terms = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("English", "") or set(cells[0]) <= set("-: "):
            continue
        forbidden = [f.strip() for f in cells[2].split(",") if f.strip()]
        common = cells[0].startswith("*") and cells[0].endswith("*")
        terms.append(Term(cells[0].strip("*"), cells[1], forbidden, common))
    if not terms:
        raise ValueError(f"{path}: no glossary rows (| English | 한국어 | forbidden |) found")
    return terms


_MD = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)


def literal_asterisks(markdown: str) -> int:
    """How many `*` a CommonMark renderer shows as text (not emphasis, code or math)."""
    count = 0
    for token in _MD.parse(markdown):
        for child in token.children or []:
            if child.type == "text":
                count += child.content.count("*")
    return count


def _forbidden(text: str, terms: list[Term]) -> list[str]:
    return [
        f"{variant!r} (write {t.korean!r})"
        for t in terms
        for variant in t.forbidden
        if variant in text
    ]


def lint_catalogue(path: Path, terms: list[Term]) -> list[str]:
    """The problems of one lesson catalogue, each naming the catalogue and the paragraph."""
    import polib

    problems, introduced = [], set()
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    longer = sorted(terms, key=lambda t: -len(t.korean))
    for entry in polib.pofile(str(path)):
        if entry.obsolete or not entry.msgstr.strip():
            continue
        line = entry.occurrences[0][1] if entry.occurrences else "?"
        where = f"{name} (line {line}: {entry.msgid[:50]!r})"
        text = entry.msgstr
        english = _prose(entry.msgid)
        for variant in _forbidden(text, terms):
            problems.append(f"{where}: forbidden variant {variant}")
        for term in terms:
            if not term.common and term.english_in(english) and not term.korean_at(text):
                problems.append(
                    f"{where}: the English says {term.english!r}, the translation lacks "
                    f"{term.korean!r}"
                )
        if literal_asterisks(text) > literal_asterisks(entry.msgid):
            problems.append(
                f"{where}: emphasis that does not render (its `*` would show): end `**` before "
                f"the parentheses or outside the punctuation, e.g. `**잔차 연결**(residual "
                f"connection)은`, not `**잔차 연결(residual connection)**은`: {text[:80]!r}"
            )
        if _is_heading(entry):
            continue
        covered: set[int] = set()
        for term in longer:  # a longer term's use (셀프 어텐션) is not a use of 어텐션
            for start in term.korean_at(text):
                if start in covered:
                    continue
                covered.update(range(start, start + len(term.korean)))
                if term.english in introduced or term.common or not term.english_in(english):
                    continue
                introduced.add(term.english)
                after = text[start + len(term.korean) :]
                glossed = re.match(r"[^\s(]*\(([^)]*)\)", after)
                if not (glossed and term.english.lower() in glossed.group(1).lower()):
                    problems.append(
                        f"{where}: the lesson's first {term.korean!r} needs its English in "
                        f"parentheses: {term.korean}({term.english})"
                    )
    return problems


def _prose(text: str) -> str:
    """`text` without its code, math and fields (where English words are names, not prose)."""
    from course.i18n import KEPT

    for pattern in KEPT.values():
        text = pattern.sub(" ", text)
    return text


def _is_heading(entry) -> bool:
    return any(c.startswith("heading") for c in (entry.comment or "").split())


def lint_page(path: Path, terms: list[Term]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    problems = [f"{name}: forbidden variant {v}" for v in _forbidden(text, terms)]
    if literal_asterisks(text):
        problems.append(f"{name}: emphasis that does not render (its `*` would show)")
    return problems


def lint(root: Path = ROOT) -> list[str]:
    terms = load_terms(root / "docs" / "ko" / "glossary.md")
    problems = []
    for path in sorted((root / "translations" / "ko").glob("*.po")):
        problems += lint_catalogue(path, terms)
    pages = [root / "README.ko.md", *sorted((root / "docs" / "ko").glob("*.md"))]
    for page in pages:
        if page.exists() and page.name != "glossary.md":
            problems += lint_page(page, terms)
    return problems


def main() -> int:
    problems = lint()
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s)" if problems else "no problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
