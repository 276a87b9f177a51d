"""The Korean edition's lint: one Korean term per concept, as docs/ko/glossary.md lists them,
and emphasis that renders.

    python -m course.glossary        # exit 1 and one line per problem, else "no problems"

For every lesson catalogue translations/ko/NN_name.po and docs page catalogue
translations/ko/docs/NAME.po (each translated entry, in order; "the lesson" below is the page):
  - no forbidden variant of a term (변압기 for 트랜스포머, 잔여 연결 for 잔차 연결, ...);
  - an English paragraph that uses a term (`attention`, `keys`, `layer normalisation`, the
    `encoder` of `encoder-decoder`) has its Korean form in the translation (not for a row in
    italics, *value*, *token*: only their variants are checked; not inside a quoted English
    title, "Attention Is All You Need"; not in a phrase of the glossary's not-the-term table,
    a dictionary's `group key`);
  - the first translation, outside headings, of an English paragraph that uses a term carries
    the term's English in parentheses at its first Korean use there:
    `어텐션(attention)`, `인코더-디코더(encoder-decoder)`, `**인코더**(encoder)`, under the
    name the English uses (`룩-어헤드 마스크(causal mask)` where it says causal mask); a longer
    term's gloss introduces the terms inside it (위치별 피드포워드 신경망(position-wise
    feed-forward network));
  - the translation renders no literal `*` that its English does not: CommonMark does not close
    `**잔차 연결(residual connection)**은` (emphasis ending in punctuation right before a
    letter, commonmark-spec#650), so the asterisks would show; write `**잔차 연결**(residual
    connection)은`.
README.ko.md and docs/ko/*.md (not the glossary itself; the pages generated from the docs
catalogues too) are held to the forbidden variants and the emphasis rule too.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
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
    aliases: list[str] = field(default_factory=list)  # other English names (causal mask)

    def korean_at(self, text: str) -> list[int]:
        """Where the Korean form starts in `text` as a word of its own (not inside a longer
        Korean word: 키 in 일으키다 is not the term)."""
        pattern = f"(?<![{HANGUL}]){re.escape(self.korean)}"
        return [m.start() for m in re.finditer(pattern, text)]

    def names_in(self, text: str) -> list[str]:
        """The term's English names that `text` uses: plurals, British -ise spellings
        (normalisation) and hyphenated compounds (encoder-decoder) count."""
        return [n for n in [self.english, *self.aliases] if _name_pattern(n).search(text)]

    def english_in(self, text: str) -> bool:
        return bool(self.names_in(text))


def _name_pattern(name: str) -> re.Pattern:
    word = re.escape(name).replace("iz", "i[sz]")  # layer normalisation, tokeniser
    consonant_y = re.search(r"[^aeiou]y$", name) is not None  # query, not key
    plural = word[:-1] + "(?:y|ies)" if consonant_y else word + "(?:s|es)?"
    return re.compile(rf"(?<![\w]){plural}(?!\w)", re.IGNORECASE)


def load_terms(path: Path = ROOT / "docs" / "ko" / "glossary.md") -> list[Term]:
    """The glossary table's rows: | English | 한국어 | forbidden, comma-separated |. Other English
    names of the same concept follow the first after ` / ` (look-ahead mask / causal mask)."""
    terms = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("English", "") or set(cells[0]) <= set("-: "):
            continue
        forbidden = [f.strip() for f in cells[2].split(",") if f.strip()]
        common = cells[0].startswith("*") and cells[0].endswith("*")
        english, *aliases = [n.strip() for n in cells[0].strip("*").split(" / ")]
        terms.append(Term(english, cells[1], forbidden, common, aliases))
    if not terms:
        raise ValueError(f"{path}: no glossary rows (| English | 한국어 | forbidden |) found")
    return terms


def load_not_terms(path: Path = ROOT / "docs" / "ko" / "glossary.md") -> list[str]:
    """English phrases that use a term's word for another thing (a dictionary's `group key`):
    the glossary's two-column table | not the term | English term |, first column."""
    rows = {n: t for t in load_terms(path) for n in [t.english, *t.aliases]}
    phrases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not line.lstrip().startswith("|") or set(cells[0]) <= set("-: "):
            continue
        if cells[0].startswith("Not the term"):
            continue
        term = rows.get(cells[1])
        if term is None or not term.english_in(cells[0]):
            raise ValueError(
                f"{path}: not-the-term row {cells[0]!r} | {cells[1]!r}: expected a glossary "
                f"row's English in the second column, used by the phrase in the first"
            )
        phrases.append(cells[0])
    return phrases


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


def lint_catalogue(path: Path, terms: list[Term], not_terms: list[str] | None = None) -> list[str]:
    """The problems of one lesson catalogue, each naming the catalogue and the paragraph;
    `not_terms`: English phrases that are not a term's use (the glossary's second table)."""
    import polib

    not_terms = load_not_terms() if not_terms is None else not_terms

    problems, introduced = [], set()
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    longer = sorted(terms, key=lambda t: -len(t.korean))
    for entry in polib.pofile(str(path)):
        if entry.obsolete or not entry.msgstr.strip():
            continue
        line = entry.occurrences[0][1] if entry.occurrences else "?"
        where = f"{name} (line {line}: {entry.msgid[:50]!r})"
        text = entry.msgstr
        english = _prose(entry.msgid, not_terms)
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
                used = term.names_in(english)  # causal mask, where the English says so
                if not (glossed and set(used) & set(term.names_in(glossed.group(1)))):
                    problems.append(
                        f"{where}: the lesson's first {term.korean!r} needs its English in "
                        f"parentheses: {term.korean}({used[0]})"
                    )
                    continue
                # 위치별 피드포워드 신경망(position-wise feed-forward network) glosses its parts
                introduced.update(
                    t.english
                    for t in terms
                    if t.korean in term.korean and t.names_in(glossed.group(1))
                )
    return problems


_QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”')


def _is_title(quoted: str) -> bool:
    """A quoted English title ("Attention Is All You Need"): two words or more, the first and
    three in four of those of four letters or more capitalised ("... Models without Positional
    Encodings ..."). A quoted phrase ("the key just before me") is prose."""
    words = re.findall(r"[A-Za-z][\w'-]*", quoted)
    long = [w for w in words if len(w) >= 4]  # not: a, the, of, in, on, is
    capitalised = sum(w[0].isupper() for w in long)
    return len(words) >= 2 and words[0][0].isupper() and capitalised >= 0.75 * len(long)


def _prose(text: str, not_terms: list[str] = ()) -> str:
    """`text` without its code, math, fields, quoted titles and the phrases that use a term's
    word for another thing (where English words are names, not the course's terms)."""
    from course.i18n import KEPT

    for pattern in KEPT.values():
        text = pattern.sub(" ", text)
    text = _QUOTED.sub(lambda m: " " if _is_title(m.group(1) or m.group(2)) else m.group(0), text)
    for phrase in not_terms:
        text = re.sub(rf"(?<!\w){re.escape(phrase)}(?:s|es)?(?!\w)", " ", text, flags=re.I)
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
    not_terms = load_not_terms(root / "docs" / "ko" / "glossary.md")
    problems = []
    catalogues = root / "translations" / "ko"
    for path in sorted(catalogues.glob("*.po")) + sorted(catalogues.glob("docs/*.po")):
        problems += lint_catalogue(path, terms, not_terms)
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
