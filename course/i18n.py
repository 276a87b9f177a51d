"""Translated editions of the lessons: what a translation unit is, the catalogues that hold
them, and a lesson's prose rebuilt in another language.

A lesson's English prose is cut into translation units: each paragraph, heading, list item,
block quote and table row of its markdown cells, as written in the source (`{{ expr }}` fields
kept as they are, never the filled numbers), its lines joined by single spaces. Code cells,
fenced code and display math are never units: they stay shared with the English.

The units of lesson NN live in a gettext catalogue, `translations/<lang>/NN_name.po`: the
English as msgid, the translation as msgstr. `merge` brings a catalogue up to date as GNU
msgmerge does (`python -m course.translations update`, `make translations`): an unchanged unit
keeps its translation; a changed one keeps the old translation, marked fuzzy, with the old
English beside it (`#| msgid`); a new one is added untranslated; a removed one becomes
obsolete (`#~`). `problems` lists, naming the lesson and the paragraph, every entry that is
fuzzy, untranslated or obsolete, and every translation that lost a `{{ field }}`, a `$math$`,
a `code` span or a link's target of its English; `make test` fails on any.

`make notebooks` (course.authoring) then writes, for each lesson with a catalogue,
`solutions/<lang>/NN_name.ipynb` and `notebooks/<lang>/NN_name.ipynb`: the English notebooks
of the same build, code cells and outputs unchanged, each markdown cell rebuilt from its
translated units (`translate_lesson`) and filled with the same run's field values. An
untranslated or fuzzy unit is shown in English (and `problems` names it).

The learner's first pages, docs/index.md and docs/exercises.md, are translated the same way
(any page of docs/ that has a catalogue, `translations/<lang>/docs/NAME.po`): the same units,
with two differences that keep a re-timing from staling them. A table row is cut into its
cells, and a cell that holds no words (a number, a time, `code`, a link whose text is code) is
copied, never a unit. And a page's figures (a number, a duration `35 s`, a date, a version, a
machine `2-core AMD EPYC`: what tools/timings.py writes) are fields of its units, numbered
`{{ 1 }}`, `{{ 2 }}`, ... in the msgid and filled from the English page whenever the
translated page is written (`translate_page`, into docs/<lang>/NAME.md: `make translations`,
and `tools/timings.py --write-docs` after it rewrites the figures). The translated page's links
go to the translated twin where there is one (a lesson's notebooks, a translated page, the
README), else to the English page, marked as such.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import polib

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = ("ko",)
SIMILAR = 0.5  # difflib ratio above which a changed unit keeps its old translation, fuzzy

# ------------------------------------------------------------- units ----------

FENCE = re.compile(r"^\s*(```|~~~)")
LIST_ITEM = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)(.*)$")
HEADING = re.compile(r"^(#{1,6}\s+)(.*)$")
QUOTE = re.compile(r"^(\s*>\s?)(.*)$")
TABLE_ROW = re.compile(r"^\s*\|")
TABLE_RULE = re.compile(r"^\s*\|[\s:|-]+\|\s*$")
# what a translation must carry over unchanged, in any order
KEPT = {
    "field": re.compile(r"\{\{.*?\}\}"),
    "math": re.compile(r"\$\$.*?\$\$|\$[^$]+\$"),
    "code": re.compile(r"`[^`]+`"),
    "link": re.compile(r"\]\([^)\s]+\)"),  # a link's target (its text is translated)
}
# A figure on a docs page: a machine ("2-core AMD EPYC 7B13"), or a date, a duration, a number
# or a version ("0.2", "1,000", "2.13.0+cpu"), or a range of two ("0.2 to 1.0", "4 s to 2.1
# minutes"); never inside a word (float64) or a path. A range is one figure: a re-timing whose
# two ends meet writes one value there ("4 s"), and the unit stays the same.
_ONE = r"(?:\d{4}-\d\d-\d\d|\d+(?:[.,]\d+)*(?:\+\w+)?(?: (?:s|ms|minutes?)\b)?)"
FIGURE = re.compile(
    rf"(?<![\w.,/#$+-])(?:\d+-core(?: [A-Z0-9][\w-]*)+|{_ONE}(?: to {_ONE})?)(?!\w)"
)
NUMBERED = re.compile(r"\{\{ (\d+) \}\}")  # a figure's place in a page's unit
# A figure as each language writes it (the English stays as tools/timings.py wrote it): each
# end of a range, then the range's " to ".
FIGURE_WORDS = {
    "ko": [
        (re.compile(r"^(\d+)-core "), r"\1코어 "),
        (re.compile(r"^([\d.]+) minutes?$"), r"\1분"),
        (re.compile(r"^([\d.]+) s$"), r"\1초"),
    ],
}
RANGE = {"ko": "~"}


@dataclass
class Block:
    """One piece of a markdown cell: `text` is a unit to translate (None: `raw` is kept)."""

    prefix: str = ""  # written before the first line (a list marker, `## `, `> `, indent)
    follow: str = ""  # written before each further line of a translation
    text: str | None = None
    raw: str = ""
    at: int = 0  # the cell's line where it starts (0-based)
    figures: tuple[str, ...] = ()  # a page's unit: the figures its {{ 1 }}, {{ 2 }}, ... hold
    cells: list[Block] | None = None  # a page's table row: its cells, each a block

    def render(self, translated: str | None = None, lang: str | None = None) -> str:
        """The block's markdown: its unit, or `translated`, with the figures filled in (as
        `lang` writes them, for a translation)."""
        if self.text is None:
            return self.raw
        text = translated or self.text
        if self.figures:
            text = fill_figures(text, self.figures, lang if translated else None)
        first, *rest = text.split("\n")
        return "\n".join([self.prefix + first] + [self.follow + line for line in rest])


def _has_words(text: str) -> bool:
    for pattern in KEPT.values():
        text = pattern.sub("", text)
    return re.search(r"[^\W\d_]", text) is not None


def mask_figures(text: str) -> tuple[str, tuple[str, ...]]:
    """A page's unit with its figures as numbered fields, and the figures: `took 8.2 minutes
    on 2026-12-03` -> (`took {{ 1 }} on {{ 2 }}`, ("8.2 minutes", "2026-12-03")). Code, math,
    fields and link targets keep their digits."""
    kept = [m.span() for pattern in KEPT.values() for m in pattern.finditer(text)]
    figures: list[str] = []

    def number(match: re.Match) -> str:
        if any(start <= match.start() < end for start, end in kept):
            return match.group(0)
        figures.append(match.group(0))
        return f"{{{{ {len(figures)} }}}}"

    return FIGURE.sub(number, text), tuple(figures)


def fill_figures(text: str, figures: tuple[str, ...], lang: str | None = None) -> str:
    """`text` with each numbered field replaced by its figure, written as `lang` writes it."""

    def one(value: str) -> str:
        for pattern, words in FIGURE_WORDS.get(lang, []):
            value = pattern.sub(words, value)
        return value

    def figure(match: re.Match) -> str:
        value = figures[int(match.group(1)) - 1]
        if lang is None or " to " not in value:
            return one(value)
        return RANGE.get(lang, " to ").join(one(end) for end in value.split(" to "))

    return NUMBERED.sub(figure, text)


def _unit(text: str, page: bool, raw: str, at: int, **where) -> Block:
    """A unit of `text` (its figures masked, on a page) where it has words, else `raw` kept."""
    figures = ()
    if page:
        text, figures = mask_figures(text)
    if _has_words(text):
        return Block(text=text, figures=figures, at=at, **where)
    return Block(raw=raw, at=at)


def _cells(line: str, at: int) -> Block:
    """A page's table row, cut into its cells (at the pipes that are no `\\|`)."""
    indent = line[: len(line) - len(line.lstrip())]
    inner = line.strip().removeprefix("|").removesuffix("|")
    cells = [_unit(cell.strip(), True, cell.strip(), at) for cell in re.split(r"(?<!\\)\|", inner)]
    return Block(prefix=indent, cells=cells, at=at)


def split_markdown(source: str, page: bool = False) -> list[Block]:
    """The blocks of one markdown cell (or, `page`, of a docs page: its table rows cut into
    cells and its figures masked), in order; joining their renderings gives it back, each
    unit's lines joined by one space."""
    lines = source.split("\n")
    blocks: list[Block] = []
    i = 0

    def starts_block(line: str, in_item: bool = True) -> bool:
        marker = LIST_ITEM.match(line)
        # inside a paragraph only a list that starts at 1 begins (CommonMark): "2000) was"
        # on a wrapped line goes on with the paragraph
        bullet = marker.group(1).strip() if marker else ""
        starts_list = marker is not None and (
            in_item or not bullet[0].isdigit() or bullet in ("1.", "1)")
        )
        return (
            not line.strip()
            or FENCE.match(line) is not None
            or line.strip().startswith("$$")
            or starts_list
            or HEADING.match(line) is not None
            or TABLE_ROW.match(line) is not None
        )

    while i < len(lines):
        line = lines[i]
        if not line.strip() or TABLE_RULE.match(line):
            blocks.append(Block(raw=line, at=i))
            i += 1
        elif FENCE.match(line) or line.strip().startswith("$$"):
            fence = FENCE.match(line)
            if fence:  # up to the closing fence
                end = i + 1
                while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                    end += 1
            else:  # up to the line that ends in $$ (this one, for `$$ x $$`)
                end = i if len(line.strip()) > 2 and line.strip().endswith("$$") else i + 1
                while end < len(lines) and not lines[end].strip().endswith("$$"):
                    end += 1
            blocks.append(Block(raw="\n".join(lines[i : end + 1]), at=i))
            i = end + 1
        elif TABLE_ROW.match(line) and page:
            blocks.append(_cells(line, i))
            i += 1
        elif TABLE_ROW.match(line):
            text = line.strip()
            indent = line[: len(line) - len(line.lstrip())]
            blocks.append(_unit(text, page, line, i, prefix=indent))
            i += 1
        else:
            if m := HEADING.match(line):
                prefix, first, follow, more = m.group(1), m.group(2), "", False
            elif m := LIST_ITEM.match(line):
                prefix, first, more = m.group(1), m.group(2), True
                follow = " " * len(prefix)
            elif m := QUOTE.match(line):
                prefix, first, more = m.group(1), m.group(2), True
                follow = prefix
                if quoted := LIST_ITEM.match(first):  # a list in a block quote: item by item
                    prefix, first = prefix + quoted.group(1), quoted.group(2)
                    follow = follow + " " * len(quoted.group(1))
            else:
                prefix = line[: len(line) - len(line.lstrip())]
                first, follow, more = line.strip(), prefix, True
            parts, at = [first.strip()], i
            i += 1
            item = LIST_ITEM.match(line) is not None
            while more and i < len(lines) and not starts_block(lines[i], item):
                nxt = lines[i]
                if follow.strip().startswith(">"):
                    q = QUOTE.match(nxt)
                    if not q or (prefix.strip() != ">" and LIST_ITEM.match(q.group(2))):
                        break  # out of the quote, or its list's next item
                    nxt = q.group(2)
                parts.append(nxt.strip())
                i += 1
            raw = "\n".join(lines[at:i])
            blocks.append(_unit(" ".join(parts), page, raw, at, prefix=prefix, follow=follow))
    return blocks


def render(
    blocks: list[Block],
    translations: dict[str, str] | None = None,
    lang: str | None = None,
    relink=None,
) -> str:
    """A markdown cell from its blocks, each unit replaced by its translation where given;
    `relink(markdown)` rewrites the links of every block but fenced code and display math."""
    translations = translations or {}
    relink = relink or (lambda text: text)

    def one(block: Block) -> str:
        if block.cells is not None:
            return block.prefix + "| " + " | ".join(one(c) for c in block.cells) + " |"
        if block.text is None:
            fenced = FENCE.match(block.raw) or block.raw.strip().startswith("$$")
            return block.raw if fenced else relink(block.raw)
        return relink(block.render(translations.get(block.text), lang))

    return "\n".join(one(b) for b in blocks)


def unit_blocks(blocks: list[Block]):
    """The blocks that are units, a table row's cells included, in order."""
    for block in blocks:
        for one in block.cells if block.cells is not None else [block]:
            if one.text is not None:
                yield one


@dataclass
class Unit:
    text: str
    line: int  # the line of the lesson source where it starts (1-based)
    heading: bool = False


def units(source: Path) -> list[Unit]:
    """The translation units of a lesson source (or of a docs page, NAME.md), in order, each
    once."""
    text = source.read_text(encoding="utf-8")
    if is_page(source):
        cells = [(text, 1)]  # the page's line 1
    else:
        lesson = jupytext.reads(text, fmt="py:percent")
        starts = [n for n, line in enumerate(text.split("\n"), 1) if line.startswith("# %%")]
        cells = [
            (cell.source, start + 1)
            for cell, start in zip(lesson.cells, starts, strict=True)
            if cell.cell_type == "markdown"
        ]
    found: dict[str, Unit] = {}
    for markdown, first in cells:
        for block in unit_blocks(split_markdown(markdown, page=is_page(source))):
            if block.text not in found:
                heading = HEADING.match(block.prefix) is not None
                found[block.text] = Unit(block.text, first + block.at, heading)
    return list(found.values())


def is_page(source: Path) -> bool:
    """A docs page (docs/NAME.md), not a lesson source (solutions/NN_name.py)."""
    return source.suffix == ".md"


# ---------------------------------------------------------- catalogues ----------


def catalogue_path(source: Path, lang: str, root: Path = ROOT) -> Path:
    """translations/<lang>/NN_name.po for a lesson, translations/<lang>/docs/NAME.po for a
    docs page."""
    if is_page(source):
        return root / "translations" / lang / "docs" / f"{source.stem}.po"
    return root / "translations" / lang / f"{source.stem}.po"


def _new_catalogue(lang: str, source: Path) -> polib.POFile:
    po = polib.POFile(wrapwidth=100)
    po.metadata = {
        "Project-Id-Version": f"Attention, step by step: {source.stem}",
        "Language": lang,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return po


def load(path: Path) -> polib.POFile:
    po = polib.pofile(str(path), wrapwidth=100)
    return po


def merge(po: polib.POFile, found: list[Unit], source: Path, root: Path = ROOT) -> polib.POFile:
    """A new catalogue holding `found`'s units in order, translations taken from `po` as
    msgmerge takes them (see the module's docstring)."""
    where = source.relative_to(root).as_posix() if source.is_relative_to(root) else source.name
    old = {e.msgid: e for e in po if not e.obsolete}
    gone = {e.msgid: e for e in po if e.obsolete}
    wanted = {u.text for u in found}
    unused = [e for e in old.values() if e.msgid not in wanted]
    merged = _new_catalogue(po.metadata.get("Language", "ko"), source)
    merged.metadata.update(po.metadata)
    for unit in found:
        entry = polib.POEntry(msgid=unit.text, msgstr="", occurrences=[(where, str(unit.line))])
        entry.comment = "heading" if unit.heading else ""
        if unit.text in old:
            kept = old[unit.text]
            entry.msgstr, entry.flags = kept.msgstr, list(kept.flags)
            entry.previous_msgid, entry.tcomment = kept.previous_msgid, kept.tcomment
        elif unit.text in gone and gone[unit.text].msgstr:
            entry.msgstr, entry.tcomment = gone.pop(unit.text).msgstr, None
        else:
            best = max(
                unused,
                key=lambda e: difflib.SequenceMatcher(None, e.msgid, unit.text).ratio(),
                default=None,
            )
            if best and difflib.SequenceMatcher(None, best.msgid, unit.text).ratio() >= SIMILAR:
                unused.remove(best)
                entry.msgstr = best.msgstr
                if best.msgstr:
                    entry.flags = ["fuzzy"]
                    entry.previous_msgid = best.previous_msgid or best.msgid
        merged.append(entry)
    for entry in unused + list(gone.values()):
        if entry.msgstr:  # an obsolete entry without a translation holds nothing worth keeping
            ghost = polib.POEntry(msgid=entry.msgid, msgstr=entry.msgstr, obsolete=True)
            merged.append(ghost)
    return merged


def update(source: Path, lang: str, root: Path = ROOT, new: bool = False, prune: bool = False):
    """Merge the lesson's current units into its catalogue (created when `new`); returns
    its path, or None when the lesson has no catalogue and `new` is False."""
    path = catalogue_path(source, lang, root)
    if not path.exists() and not new:
        return None
    po = load(path) if path.exists() else _new_catalogue(lang, source)
    merged = merge(po, units(source), source, root)
    if prune:
        for entry in [e for e in merged if e.obsolete]:
            merged.remove(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged.save(str(path))
    return path


def _quote(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def problems(source: Path, lang: str, root: Path = ROOT) -> list[str]:
    """What keeps the lesson's catalogue from being current (empty: all translated)."""
    path = catalogue_path(source, lang, root)
    po = load(path)
    merged = merge(po, units(source), source, root)
    name = path.relative_to(root).as_posix()
    found = []
    for entry in merged:
        if entry.obsolete:
            found.append(
                f"{name}: obsolete: its English is no longer in {source.name}: "
                f"{_quote(entry.msgid)} (reuse what helps, then delete it, or run "
                "`make translations PRUNE=1`)"
            )
            continue
        at = ":".join(entry.occurrences[0])  # solutions/01_rnn_limits.py:42, docs/index.md:9
        if "fuzzy" in entry.flags:
            found.append(
                f"{name}: stale: the English at {at} changed since it was translated: "
                f"{_quote(entry.msgid)} (was {_quote(entry.previous_msgid or '')}); "
                "run `make translations`, update the translation, remove `#, fuzzy`"
            )
        elif not entry.msgstr.strip():
            found.append(f"{name}: missing: no translation of {at}: {_quote(entry.msgid)}")
        else:
            for kind, pattern in KEPT.items():
                want = sorted(pattern.findall(entry.msgid))
                have = sorted(pattern.findall(entry.msgstr))
                if want != have:
                    lost = sorted(set(want) ^ set(have)) or want
                    found.append(
                        f"{name}: the translation of {at} {_quote(entry.msgid, 40)} does not "
                        f"carry its {kind} spans unchanged: {lost}"
                    )
    return found


def translations(source: Path, lang: str, root: Path = ROOT) -> dict[str, str]:
    """{English unit: translation} for the usable entries (not fuzzy, not empty)."""
    path = catalogue_path(source, lang, root)
    return {
        e.msgid: e.msgstr
        for e in load(path)
        if not e.obsolete and e.msgstr.strip() and "fuzzy" not in e.flags
    }


# ------------------------------------------------------------- docs pages ----------

DOCS = "docs"  # the folder of the pages; a translated page goes to docs/<lang>/NAME.md
# The first lines of a translated page: where it comes from, then (under its title) the way
# to its English twin and to the glossary.
GENERATED = (
    "<!-- Generated from {english} and {catalogue} by `make translations` "
    "(course/i18n.py): edit those, never this file. -->"
)
SWITCH = {"ko": "[English]({english}) · **한국어** · [용어집](glossary.md)"}
ENGLISH_ONLY = {"ko": "(영어)"}  # after a link to a page that has no translated twin
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^)\s]+)\)")
LESSON_FILE = re.compile(r"(notebooks|solutions)/(\d\d_\w+)\.ipynb")


def pages(lang: str, root: Path = ROOT) -> list[Path]:
    """The docs pages translated into `lang`: those with a catalogue, docs/NAME.md."""
    folder = root / "translations" / lang / DOCS
    return [root / DOCS / f"{po.stem}.md" for po in sorted(folder.glob("*.po"))]


def edition_page(source: Path, lang: str, root: Path = ROOT) -> Path:
    return root / DOCS / lang / source.name


def twin(path: str, lang: str, root: Path = ROOT) -> str | None:
    """The translated twin of a file of the repository (a path from its root), or None: a
    lesson's notebooks where the lesson has a catalogue, a docs page with a catalogue (or a
    page of docs/<lang>/ of that name, the glossary), README.<lang>.md."""
    if lesson := LESSON_FILE.fullmatch(path):
        folder, stem = lesson.groups()
        source = root / "solutions" / f"{stem}.py"
        return f"{folder}/{lang}/{stem}.ipynb" if lang in editions(source, root) else None
    if path == "README.md":
        return f"README.{lang}.md" if (root / f"README.{lang}.md").exists() else None
    if page := re.fullmatch(rf"{DOCS}/([\w.-]+\.md)", path):
        name = page.group(1)
        if (
            catalogue_path(root / DOCS / name, lang, root).exists()
            or (root / DOCS / lang / name).exists()
        ):
            return f"{DOCS}/{lang}/{name}"
    return None


def lesson_title(stem: str, lang: str, root: Path = ROOT) -> str | None:
    """A lesson's translated title, its catalogue's first heading without the `NN · ` (None
    while it is untranslated or stale)."""
    path = catalogue_path(root / "solutions" / f"{stem}.py", lang, root)
    if path.exists():
        for entry in load(path):
            if not entry.obsolete and "heading" in (entry.comment or "").split():
                if entry.msgstr.strip() and "fuzzy" not in entry.flags:
                    return re.sub(r"^\d+\s*·\s*", "", entry.msgstr.strip())
                return None
    return None


def relink(markdown: str, source: Path, lang: str, root: Path = ROOT) -> str:
    """The links of a page's `markdown`, written from docs/<lang>/: to the translated twin of
    their target where it has one (a learner notebook's link, named by the file, then named by
    the lesson's translated title), else to the English file, followed by ENGLISH_ONLY. A
    link to the twin drops the English heading's #fragment: the twin's headings are its own."""
    base = source.parent.relative_to(root).as_posix()
    here = f"{DOCS}/{lang}"

    def link(match: re.Match) -> str:
        text, target = match.groups()
        if re.match(r"[a-z][\w+.-]*:", target) or target.startswith("#"):
            return match.group(0)  # another site, or this page
        path, mark, fragment = target.partition("#")
        repo = posixpath.normpath(posixpath.join(base, path))
        other = twin(repo, lang, root)
        if other is None:
            return f"[{text}]({posixpath.relpath(repo, here)}{mark}{fragment}){ENGLISH_ONLY[lang]}"
        lesson = LESSON_FILE.fullmatch(repo)
        if lesson and lesson.group(1) == "notebooks" and text == f"`{lesson.group(2)}`":
            text = lesson_title(lesson.group(2), lang, root) or text
        return f"[{text}]({posixpath.relpath(other, here)})"

    return LINK.sub(link, markdown)


def translate_page(source: Path, lang: str, root: Path = ROOT) -> str:
    """The translated page of docs/NAME.md: every unit from its catalogue (an untranslated or
    stale one in English), filled with the English page's figures as `lang` writes them,
    its links relinked; code, math and fenced blocks as in English."""
    blocks = split_markdown(source.read_text(encoding="utf-8"), page=True)
    table = translations(source, lang, root)
    body = render(blocks, table, lang, lambda text: relink(text, source, lang, root)).split("\n")
    title = next((n for n, line in enumerate(body) if HEADING.match(line)), -1)
    here = edition_page(source, lang, root).parent
    switch = SWITCH[lang].format(english=posixpath.relpath(source.as_posix(), here.as_posix()))
    body[title + 1 : title + 1] = ["", switch]
    english = source.relative_to(root).as_posix()
    catalogue = catalogue_path(source, lang, root).relative_to(root).as_posix()
    return GENERATED.format(english=english, catalogue=catalogue) + "\n\n" + "\n".join(body)


def write_page(source: Path, lang: str, root: Path = ROOT) -> bool:
    """Write docs/<lang>/NAME.md from the English page and its catalogue; True if it changed."""
    path, text = edition_page(source, lang, root), translate_page(source, lang, root)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def page_staleness(source: Path, lang: str, root: Path = ROOT) -> list[str]:
    """Why the translated page is not what its English page and catalogue make (empty: it is)."""
    path = edition_page(source, lang, root)
    name = path.relative_to(root).as_posix()
    if not path.exists():
        return [f"{name} is missing: run `make translations`"]
    if path.read_text(encoding="utf-8") != translate_page(source, lang, root):
        english = source.relative_to(root).as_posix()
        return [
            f"{name} is not what {english} and its catalogue make: run `make translations` "
            "(it is generated: never edit it by hand)"
        ]
    return []


# ------------------------------------------------------------- notebooks ----------


def editions(source: Path, root: Path = ROOT) -> list[str]:
    """The languages the lesson has a catalogue for."""
    return [lang for lang in LANGUAGES if catalogue_path(source, lang, root).exists()]


def translate_lesson(lesson, source: Path, lang: str, root: Path = ROOT):
    """A copy of the (unfilled) lesson notebook with every markdown cell translated, and
    metadata naming the catalogue it was made from."""
    table = translations(source, lang, root)
    nb = copy.deepcopy(lesson)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = render(split_markdown(cell.source), table)
    path = catalogue_path(source, lang, root)
    nb.metadata.course["language"] = lang
    nb.metadata.course["catalogue"] = path.relative_to(root).as_posix()
    nb.metadata.course["catalogue_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return nb


def solution_edition(english, filled):
    """The English solution notebook with its markdown cells replaced by those of `filled`
    (the translated lesson, filled with the same run's values): code, outputs and ids
    untouched. The caller records its fingerprint."""
    if [c.cell_type for c in english.cells] != [c.cell_type for c in filled.cells]:
        raise ValueError(
            f"{english.metadata.course.source}: its solution notebook's cells do not match the "
            "source (run `make notebooks`)"
        )
    nb = copy.deepcopy(english)
    for cell, ko in zip(nb.cells, filled.cells, strict=True):
        if cell.cell_type == "markdown":
            cell.source = ko.source
    for key in ("language", "catalogue", "catalogue_sha256"):
        nb.metadata.course[key] = filled.metadata.course[key]
    return nb


def built_from(path: Path):
    """(English source hash, catalogue hash) a translated notebook records (None: unreadable)."""
    try:
        course = nbformat.read(path, as_version=4).metadata.get("course", {})
    except Exception:
        return None
    return course.get("source_sha256"), course.get("catalogue_sha256")


def counts(po: polib.POFile) -> str:
    active = [e for e in po if not e.obsolete]
    fuzzy = sum("fuzzy" in e.flags for e in active)
    empty = sum(not e.msgstr.strip() for e in active)
    done = len(active) - fuzzy - empty
    return (
        f"{done} translated, {fuzzy} stale (fuzzy), {empty} untranslated, "
        f"{len(po) - len(active)} obsolete"
    )
