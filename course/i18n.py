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
fuzzy, untranslated or obsolete, and every translation that lost a `{{ field }}`, a `$math$`
or a `code` span of its English; `make test` fails on any.

`make notebooks` (course.authoring) then writes, for each lesson with a catalogue,
`solutions/<lang>/NN_name.ipynb` and `notebooks/<lang>/NN_name.ipynb`: the English notebooks
of the same build, code cells and outputs unchanged, each markdown cell rebuilt from its
translated units (`translate_lesson`) and filled with the same run's field values. An
untranslated or fuzzy unit is shown in English (and `problems` names it).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
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
}


@dataclass
class Block:
    """One piece of a markdown cell: `text` is a unit to translate (None: `raw` is kept)."""

    prefix: str = ""  # written before the first line (a list marker, `## `, `> `, indent)
    follow: str = ""  # written before each further line of a translation
    text: str | None = None
    raw: str = ""
    at: int = 0  # the cell's line where it starts (0-based)

    def render(self, translated: str | None = None) -> str:
        if self.text is None:
            return self.raw
        first, *rest = (translated or self.text).split("\n")
        return "\n".join([self.prefix + first] + [self.follow + line for line in rest])


def _has_words(text: str) -> bool:
    for pattern in KEPT.values():
        text = pattern.sub("", text)
    return re.search(r"[^\W\d_]", text) is not None


def split_markdown(source: str) -> list[Block]:
    """The blocks of one markdown cell, in order; joining their renderings gives it back,
    each unit's lines joined by one space."""
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
        elif TABLE_ROW.match(line):
            text = line.strip()
            indent = line[: len(line) - len(line.lstrip())]
            if _has_words(text):
                blocks.append(Block(prefix=indent, text=text, at=i))
            else:
                blocks.append(Block(raw=line, at=i))
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
            else:
                prefix = line[: len(line) - len(line.lstrip())]
                first, follow, more = line.strip(), prefix, True
            parts, at = [first.strip()], i
            i += 1
            item = LIST_ITEM.match(line) is not None
            while more and i < len(lines) and not starts_block(lines[i], item):
                nxt = lines[i]
                if follow.strip() == ">" or follow.startswith(">"):
                    q = QUOTE.match(nxt)
                    if not q:
                        break
                    nxt = q.group(2)
                parts.append(nxt.strip())
                i += 1
            text = " ".join(parts)
            if _has_words(text):
                blocks.append(Block(prefix=prefix, follow=follow, text=text, at=at))
            else:
                blocks.append(Block(raw="\n".join(lines[at:i]), at=at))
    return blocks


def render(blocks: list[Block], translations: dict[str, str] | None = None) -> str:
    """A markdown cell from its blocks, each unit replaced by its translation where given."""
    translations = translations or {}
    return "\n".join(b.render(translations.get(b.text) if b.text else None) for b in blocks)


@dataclass
class Unit:
    text: str
    line: int  # the line of the lesson source where it starts (1-based)
    heading: bool = False


def units(source: Path) -> list[Unit]:
    """The translation units of a lesson source, in order, each once."""
    lesson = jupytext.reads(source.read_text(encoding="utf-8"), fmt="py:percent")
    starts = [
        n
        for n, line in enumerate(source.read_text("utf-8").split("\n"), 1)
        if line.startswith("# %%")
    ]
    found: dict[str, Unit] = {}
    for cell, start in zip(lesson.cells, starts, strict=True):
        if cell.cell_type != "markdown":
            continue
        for block in split_markdown(cell.source):
            if block.text is not None and block.text not in found:
                heading = HEADING.match(block.prefix) is not None
                found[block.text] = Unit(block.text, start + 1 + block.at, heading)
    return list(found.values())


# ---------------------------------------------------------- catalogues ----------


def catalogue_path(source: Path, lang: str, root: Path = ROOT) -> Path:
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
        at = f"{source.name}:{entry.occurrences[0][1]}"
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
