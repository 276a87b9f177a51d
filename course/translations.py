"""The translators' command: keep the catalogues in translations/<lang>/ in step with the
English lessons and docs pages (course/i18n.py says what a unit is and how entries are merged),
and write the translated docs pages from them.

    python -m course.translations update [NN ...]      # what `make translations` runs
    python -m course.translations update --new 03      # start the catalogue of lesson 03
    python -m course.translations update --new docs/progress.md   # ... of a docs page
    python -m course.translations update docs/index.md # one page (a lesson number: one lesson)
    python -m course.translations update --prune       # also drop the obsolete entries
    python -m course.translations check                # exit 1 if anything is not current

`update` merges every lesson's and translated docs page's current units into its catalogue,
as GNU msgmerge does: an unchanged unit keeps its translation; a changed one keeps the old
translation, marked fuzzy, with the old English beside it; a new one is added untranslated; a
removed one becomes obsolete. It then writes each translated page, docs/<lang>/NAME.md, from
the English page and its catalogue (generated: never edit it by hand). `check` prints one line
per stale, missing or obsolete entry (naming the catalogue, the source or page line and the
paragraph), one per translated page that is not what `update` would write, and the lessons
that have no catalogue yet.
"""

from __future__ import annotations

import argparse
import sys

from course import i18n
from course.authoring import ROOT, AuthoringError, lesson_sources


def _sources(names: list[str], lang: str) -> tuple[list, list]:
    """(lesson sources, docs pages) that `names` ask for: lesson numbers or names, and pages
    (docs/NAME.md); none: every lesson and every translated page."""
    wanted = [n for n in names if not n.endswith(".md")]
    asked = [ROOT / n for n in names if n.endswith(".md")]
    missing = [p for p in asked if not p.is_file()]
    if missing:
        raise AuthoringError(f"no page {', '.join(str(p.relative_to(ROOT)) for p in missing)}")
    if not names:
        return lesson_sources(ROOT / "solutions"), i18n.pages(lang)
    return (lesson_sources(ROOT / "solutions", wanted) if wanted else []), asked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.translations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lang", default="ko", choices=i18n.LANGUAGES)
    sub = parser.add_subparsers(dest="command", required=True)
    u = sub.add_parser("update", help="merge the English units into the catalogues")
    u.add_argument("lessons", nargs="*", help="lesson numbers or names, docs pages (default: all)")
    u.add_argument("--new", action="store_true", help="create the catalogue where none exists")
    u.add_argument("--prune", action="store_true", help="drop obsolete entries")
    sub.add_parser("check", help="exit 1 if any catalogue or translated page is not current")
    args = parser.parse_args(argv)
    only = getattr(args, "lessons", None) or []
    try:
        sources, pages = _sources(only, args.lang)
    except AuthoringError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "update":
        if args.new and not only:
            print("error: --new needs the lesson(s) to start, e.g. `--new 03`", file=sys.stderr)
            return 2
        for source in sources + pages:
            path = i18n.update(source, args.lang, new=args.new, prune=args.prune)
            if path is not None:
                counts = i18n.counts(i18n.load(path))
                print(f"updated {path.relative_to(ROOT).as_posix()}: {counts}")
        # then the pages, every catalogue merged: a page links the twins that exist now
        for page in i18n.pages(args.lang):
            if i18n.write_page(page, args.lang):
                written = i18n.edition_page(page, args.lang).relative_to(ROOT).as_posix()
                print(f"wrote {written}")
        return 0
    found, without = [], []
    for source in sources + pages:
        if not i18n.catalogue_path(source, args.lang).exists():
            without.append(
                source.relative_to(ROOT).as_posix() if i18n.is_page(source) else source.stem
            )
            continue
        found += i18n.problems(source, args.lang)
        if i18n.is_page(source):
            found += i18n.page_staleness(source, args.lang)
    for problem in found:
        print(problem)
    if without:
        print(f"not yet translated into {args.lang} (no catalogue): {', '.join(without)}")
    print(f"{len(found)} problem(s)" if found else f"every {args.lang} catalogue is current")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
