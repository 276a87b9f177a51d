"""The translators' command: keep the catalogues in translations/<lang>/ in step with the
English lessons (course/i18n.py says what a unit is and how entries are merged).

    python -m course.translations update [NN ...]      # what `make translations` runs
    python -m course.translations update --new 03      # start the catalogue of lesson 03
    python -m course.translations update --prune       # also drop the obsolete entries
    python -m course.translations check                # exit 1 if any catalogue is not current

`update` merges every lesson's current units into its catalogue, as GNU msgmerge does: an
unchanged unit keeps its translation; a changed one keeps the old translation, marked fuzzy,
with the old English beside it; a new one is added untranslated; a removed one becomes
obsolete. `check` prints one line per stale, missing or obsolete entry (naming the catalogue,
the source line and the paragraph) and the lessons that have no catalogue yet.
"""

from __future__ import annotations

import argparse
import sys

from course import i18n
from course.authoring import ROOT, AuthoringError, lesson_sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.translations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lang", default="ko", choices=i18n.LANGUAGES)
    sub = parser.add_subparsers(dest="command", required=True)
    u = sub.add_parser("update", help="merge the English units into the catalogues")
    u.add_argument("lessons", nargs="*", help="lesson numbers or names (default: all)")
    u.add_argument("--new", action="store_true", help="create the catalogue where none exists")
    u.add_argument("--prune", action="store_true", help="drop obsolete entries")
    sub.add_parser("check", help="exit 1 if any catalogue is not current")
    args = parser.parse_args(argv)
    only = getattr(args, "lessons", None) or None
    try:
        sources = lesson_sources(ROOT / "solutions", only)
    except AuthoringError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "update":
        if args.new and not only:
            print("error: --new needs the lesson(s) to start, e.g. `--new 03`", file=sys.stderr)
            return 2
        for source in sources:
            path = i18n.update(source, args.lang, new=args.new, prune=args.prune)
            if path is not None:
                counts = i18n.counts(i18n.load(path))
                print(f"updated {path.relative_to(ROOT).as_posix()}: {counts}")
        return 0
    found, without = [], []
    for source in sources:
        if i18n.catalogue_path(source, args.lang).exists():
            found += i18n.problems(source, args.lang)
        else:
            without.append(source.stem)
    for problem in found:
        print(problem)
    if without:
        print(f"not yet translated into {args.lang} (no catalogue): {', '.join(without)}")
    print(f"{len(found)} problem(s)" if found else f"every {args.lang} catalogue is current")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
