"""One source per lesson -> a learner notebook and an executed solution notebook.

The source of lesson NN is `solutions/NN_name.py`, in jupytext's py:percent format.
Exercise answers sit between `### BEGIN SOLUTION` and `### END SOLUTION` lines.

Prose that quotes a run takes its figures from the run: in a markdown cell, `{{ expr }}`
names a value, written as the inside of an f-string field (`{{ bleu:.1f }}`,
`{{ len(pairs):, }}`). `build` executes the lesson, then evaluates every field in the
kernel after the last cell has run, and writes the result as plain text into the markdown
of both notebooks. The solution notebook records the values and a hash of its outputs, so
`check` notices prose that no longer matches its source or its outputs.

    python -m course.authoring build [02 ...]   # what `make notebooks` runs
    python -m course.authoring check            # exit 1 if a notebook is stale

`build` writes, for every source:
  solutions/NN_name.ipynb   executed, outputs kept (nbval's reference);
  notebooks/NN_name.ipynb   answers replaced by a stub, outputs cleared.

For a lesson with a translation catalogue (translations/ko/NN_name.po), `build` also writes
solutions/ko/NN_name.ipynb and notebooks/ko/NN_name.ipynb from the same run (course.i18n),
and `check` covers them.

A learner's edits are never lost: every generated notebook records a fingerprint of
its cells and the hash of the source it came from. If notebooks/NN_name.ipynb no
longer matches its fingerprint, somebody edited it:
  - its lesson source has not changed since  -> `build` leaves it exactly as it is;
  - its lesson source has changed            -> `build` first moves it to
    notebooks/backups/NN_name.<time>.ipynb, says where, then writes the new one.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from datetime import datetime
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from course import colab, i18n, links

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError")
FIELD = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class AuthoringError(ValueError):
    """A lesson source that cannot be turned into notebooks, and why."""


# ------------------------------------------------------------- sources ----------


def lesson_sources(solutions_dir: Path, only: list[str] | None = None) -> list[Path]:
    """solutions/NN_name.py files, in lesson order; `only` keeps those whose name starts so."""
    sources = sorted(p for p in solutions_dir.glob("[0-9][0-9]_*.py"))
    if only:
        sources = [p for p in sources if any(p.stem.startswith(o) for o in only)]
        if not sources:
            raise AuthoringError(f"no lesson source in {solutions_dir} starts with {only}")
    return sources


def stub_solutions(source: str, where: str = "cell") -> str:
    """Replace each BEGIN/END SOLUTION region by the stub, at the BEGIN line's indent."""
    lines, inside = [], False
    for number, line in enumerate(source.splitlines(), 1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise AuthoringError(f"{where}, line {number}: {BEGIN} inside another solution")
            indent = line[: len(line) - len(line.lstrip())]
            lines += [indent + stub_line for stub_line in STUB]
            inside = True
        elif marker == END:
            if not inside:
                raise AuthoringError(f"{where}, line {number}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            lines.append(line)
    if inside:
        raise AuthoringError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(lines)


def fingerprint(nb) -> str:
    """A hash of what a person writes in a notebook: cell kinds and sources."""
    cells = [[cell.cell_type, cell.source] for cell in nb.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def fields(nb) -> list[str]:
    """Every `{{ expr }}` in the notebook's markdown, stripped, in order, once each."""
    found: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for match in FIELD.finditer(cell.source):
                field = match.group(1).strip()
                if not field:
                    raise AuthoringError(f"{nb.metadata.course.source}: an empty {{{{ }}}} field")
                if field not in found:
                    found.append(field)
    return found


def fill(nb, values: dict[str, str]):
    """A copy of `nb` whose markdown has each `{{ expr }}` replaced by its value."""
    missing = [f for f in fields(nb) if f not in values]
    if missing:
        named = ", ".join("{{ " + f + " }}" for f in missing)
        raise AuthoringError(
            f"{nb.metadata.course.source}: no value for {named}"
            " (run `make notebooks` with execution, which evaluates them)"
        )
    filled = copy.deepcopy(nb)
    for cell in filled.cells:
        if cell.cell_type == "markdown":
            cell.source = FIELD.sub(lambda m: values[m.group(1).strip()], cell.source)
    return filled


# Run in the lesson's kernel after its last cell: each field as an f-string field, its text
# (or the error it raised) printed as one JSON line.
FILL_CELL = """\
def _course_fill(fields):
    import json
    values = {}
    for field in fields:
        try:  # quotes the field does not use (Python 3.11 allows no backslash in a field)
            quote = next(q for q in ("'", '"', "\'\'\'", '\"\"\"') if q not in field)
            values[field] = eval(f"f{quote}{{ {field}}}{quote}", globals())  # "{ " then a dict
        except Exception as error:
            values[field] = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps(values))
_course_fill(%r)
"""


def outputs_hash(nb) -> str:
    """A hash of every code cell's outputs: what the filled prose was computed beside."""
    outputs = [c.get("outputs", []) for c in nb.cells if c.cell_type == "code"]
    return hashlib.sha256(json.dumps(outputs, sort_keys=True).encode()).hexdigest()


def read_lesson(source: Path):
    """The lesson source as a clean nbformat-4.5 notebook with stable ids and metadata."""
    text = source.read_text(encoding="utf-8")
    parsed = jupytext.reads(text, fmt="py:percent")
    nb = nbformat.v4.new_notebook()
    for i, cell in enumerate(parsed.cells):
        metadata = {k: v for k, v in cell.metadata.items() if k == "tags"}
        make = (
            nbformat.v4.new_code_cell if cell.cell_type == "code" else nbformat.v4.new_markdown_cell
        )
        nb.cells.append(make(cell.source, metadata=metadata, id=f"cell-{i:02d}"))
    nb.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "course": {
            "source": f"solutions/{source.name}",
            "source_sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
    }
    return nb


COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"

# A learner runs the learner notebook on their own machine, so a figure filled from the
# course's run is somebody else's: it is marked, and its cell says whose run it is.
RUN_MARK = "\N{DAGGER}"
_SLOT = "\x00"  # stands for a field while the cell is scanned
_AFTER_FIGURE = '%"\N{RIGHT DOUBLE QUOTATION MARK}'
_THIS_RUN = re.compile(r"\bthis\s+(?:notebook's\s+)?run\b", re.IGNORECASE)


def run_note(source_name: str, says_this_run: bool = False, language: str = "en") -> str:
    """The line a learner notebook adds under a cell with marked figures."""
    if language == "ko":  # one line for every cell: "this run" has no one Korean wording
        stored = f"solutions/ko/{Path(source_name).stem}.ipynb"
        return (
            f"*{RUN_MARK}: 강좌에 저장된 실행(`{stored}`)의 수치입니다. 이 셀이 말하는 "
            "'이 실행'도 그 실행입니다. 여러분이 직접 실행하면 코드 셀이 여러분의 수치를 "
            "출력합니다.*"
        )
    stored = f"solutions/{Path(source_name).stem}.ipynb"
    if says_this_run:
        return (
            f'*{RUN_MARK} and "this run" in this cell: the course\'s stored run, `{stored}`; '
            "your own run prints its own figures in the code cells.*"
        )
    return (
        f"*{RUN_MARK}: a figure from the course's stored run, `{stored}`; your own run "
        "prints its own in the code cells.*"
    )


def mark_figures(text: str, values: dict[str, str]) -> str:
    """`text` with each `{{ expr }}` replaced by its value and followed by RUN_MARK.

    The mark goes where markdown still shows it as text: after the inline code or the
    maths that holds the field (`$T = {{ T }}$` -> `$T = 12$` + mark), after a `%` or a
    closing double quote that follows it, and once for fields that sit together."""
    slotted = FIELD.sub(_SLOT, text)
    out: list[str] = []
    closer, pending, i = None, False, 0
    while i < len(slotted):
        ch = slotted[i]
        if pending and closer is None and ch != _SLOT and ch not in _AFTER_FIGURE:
            out.append(RUN_MARK)
            pending = False
        if ch == _SLOT:
            out.append(ch)
            pending, i = True, i + 1
            continue
        if closer is None and ch == "\\":
            out.append(slotted[i : i + 2])
            i += 2
            continue
        if ch in "`$":
            run = len(slotted[i:]) - len(slotted[i:].lstrip(ch))
            if ch == "$":
                run = min(run, 2)
            if closer is None:
                closer = ch * run
            elif ch * run == closer:
                closer = None
            out.append(ch * run)
            i += run
            continue
        out.append(ch)
        i += 1
    if pending:
        out.append(RUN_MARK)
    filled = iter(values[m.group(1).strip()] for m in FIELD.finditer(text))
    return "".join(next(filled) if piece == _SLOT else piece for piece in out)


def mark_run_figures(lesson, values: dict[str, str]):
    """A copy of `lesson` filled with `values` for a learner: in every markdown cell that
    holds a field, each filled figure is marked, and one line (`run_note`), a paragraph
    of its own after the paragraph of the cell's last field, says that the marked figures
    are the course's stored run, not the learner's. Cells without a field are left as
    they are."""
    fill(lesson, values)  # the same complaint as `fill` about a field without a value
    marked = copy.deepcopy(lesson)
    source_name = marked.metadata.course.source
    language = marked.metadata.course.get("language", "en")
    for cell in marked.cells:
        if cell.cell_type == "markdown" and FIELD.search(cell.source):
            note = run_note(source_name, bool(_THIS_RUN.search(cell.source)), language)
            text = mark_figures(cell.source, values).rstrip("\n")
            end = text.find("\n\n", text.rfind(RUN_MARK))
            end = len(text) if end < 0 else end
            cell.source = text[:end] + "\n\n" + note + text[end:]
    return marked


def learner_notebook(
    lesson, values: dict[str, str] | None = None, root: Path = ROOT, notebook: str | None = None
):
    """Answers stubbed, outputs cleared, prose fields filled with `values` (from the run)
    and marked as the course's run (`mark_run_figures`), and Colab's two additions
    (`add_colab`, for `notebook`), made from `root`'s pyproject.toml."""
    nb = mark_run_figures(lesson, values or {})
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.source = stub_solutions(
                cell.source, where=f"{nb.metadata.course.source}, cell {i}"
            )
            cell.outputs, cell.execution_count = [], None
    add_colab(nb, root, notebook)
    nb.metadata.course["fingerprint"] = fingerprint(nb)
    return nb


def add_colab(nb, root: Path = ROOT, notebook: str | None = None) -> None:
    """What a learner notebook needs to open in Google Colab: an "Open in Colab" link under
    the first markdown cell's first line (only where pyproject.toml sets the repository's
    address, course.links), and before the first code cell the cell that installs the
    course there (course.colab.install_cell; it does nothing outside Colab). `notebook`: the
    path Colab opens (default notebooks/NN_name.ipynb; a translation's is in its folder)."""
    notebook = notebook or f"notebooks/{Path(nb.metadata.course.source).stem}.ipynb"
    url = links.colab_url(notebook, root)
    markdown = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if url is not None and markdown is not None:
        first, _, rest = markdown.source.partition("\n")
        badge = f"[![Open In Colab]({COLAB_BADGE})]({url})"
        markdown.source = f"{first}\n\n{badge}" + (f"\n{rest}" if rest else "")
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    install = colab.install_cell(links.install_spec(root))
    nb.cells.insert(first_code, nbformat.v4.new_code_cell(install, id="colab-install"))


def solution_notebook(lesson, workdir: Path, timeout: int = 600):
    """The lesson executed top to bottom in a fresh kernel, outputs kept, prose filled."""
    nb = copy.deepcopy(lesson)
    # Check the markers even here, so a broken source fails before a long execution.
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            stub_solutions(cell.source, where=f"{nb.metadata.course.source}, cell {i}")
    wanted = fields(nb)
    if wanted:
        nb.cells.append(nbformat.v4.new_code_cell(FILL_CELL % (wanted,), id="course-fill"))
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(workdir)}},
    ).execute()
    values = _read_values(nb.cells.pop(), wanted, nb.metadata.course.source) if wanted else {}
    nb = fill(nb, values)
    nb.metadata.course["filled"] = values
    nb.metadata.course["outputs_sha256"] = outputs_hash(nb)
    nb.metadata.course["fingerprint"] = fingerprint(nb)
    return nb


def _read_values(cell, wanted: list[str], where: str) -> dict[str, str]:
    """The fill cell's one JSON line -> {field: text}; a field that raised is an error."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")
    try:
        values = json.loads(text.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise AuthoringError(f"{where}: the prose fields {wanted} could not be evaluated") from None
    failed = [f"{{{{ {f} }}}}: {v['error']}" for f, v in values.items() if isinstance(v, dict)]
    if failed:
        raise AuthoringError(f"{where}: " + "; ".join(failed))
    return values


def write(nb, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


# --------------------------------------------------------------- build ----------


def edited_by_hand(path: Path) -> bool:
    """True when a notebook's cells no longer match the fingerprint it was written with."""
    if not path.exists():
        return False
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:
        return True  # unreadable: treat as somebody's work, keep it
    recorded = nb.metadata.get("course", {}).get("fingerprint")
    return recorded != fingerprint(nb)


def built_from(path: Path) -> str | None:
    """The source hash a generated notebook records (None if unreadable or absent)."""
    try:
        return nbformat.read(path, as_version=4).metadata.get("course", {}).get("source_sha256")
    except Exception:
        return None


def back_up(path: Path, backups: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    target = backups / f"{path.stem}.{stamp}.ipynb"
    backups.mkdir(parents=True, exist_ok=True)
    path.replace(target)
    return target


def build(
    root: Path = ROOT, only: list[str] | None = None, execute: bool = True, say=print
) -> None:
    """Write the notebooks of every lesson (or of `only`). Without `execute`, a lesson whose
    solution notebook lacks a prose value is skipped with its reason, the other lessons
    are still written, and the reasons are raised together at the end."""
    solutions_dir, notebooks_dir = root / "solutions", root / "notebooks"
    skipped: list[str] = []
    for source in lesson_sources(solutions_dir, only):
        lesson = read_lesson(source)
        solution = None
        if execute:
            say(f"executing {source.relative_to(root)} ...")
            solution = solution_notebook(lesson, solutions_dir)
            values = solution.metadata.course.filled
        else:
            values = recorded_values(solutions_dir / f"{source.stem}.ipynb")
            try:
                fill(lesson, values)
            except AuthoringError as error:
                skipped.append(str(error))
                say(f"! skipped notebooks/{source.stem}.ipynb: {error}")
                continue
        learner = learner_notebook(lesson, values, root)
        target = notebooks_dir / f"{source.stem}.ipynb"
        unchanged = built_from(target) == lesson.metadata.course.source_sha256
        place_learner(learner, target, unchanged, notebooks_dir / "backups", root, say)
        if solution is not None:
            write(solution, solutions_dir / f"{source.stem}.ipynb")
            say(f"wrote solutions/{source.stem}.ipynb")
        build_editions(source, root, say)  # the translated editions, from this same run
    if skipped:
        raise AuthoringError("; ".join(skipped))


def place_learner(learner, target: Path, unchanged: bool, backups: Path, root: Path, say) -> None:
    """Write a learner notebook at `target`, keeping a learner's edits there: left in place
    when the lesson is `unchanged` since, else moved into `backups` first."""
    if not edited_by_hand(target):
        write(learner, target)
        say(f"wrote {target.relative_to(root)}")
    elif unchanged:
        say(
            f"! {target.relative_to(root)} has your edits and its lesson has not changed: "
            "left as it is"
        )
    else:
        kept = back_up(target, backups)
        write(learner, target)
        say(
            f"! {target.relative_to(root)} had your edits and its lesson changed: your "
            f"version is kept in {kept.relative_to(root)}, the new lesson is in its place"
        )


def recorded_values(path: Path) -> dict[str, str]:
    """The prose values a solution notebook was built with ({} if it has none or is absent)."""
    try:
        return dict(nbformat.read(path, as_version=4).metadata.get("course", {}).get("filled", {}))
    except Exception:
        return {}


def staleness(source: Path, root: Path = ROOT) -> list[str]:
    """What is out of date in the two notebooks generated from `source` (empty: all current)."""
    problems = []
    lesson = read_lesson(source)
    learner_path = root / "notebooks" / f"{source.stem}.ipynb"
    solution_path = root / "solutions" / f"{source.stem}.ipynb"
    values = recorded_values(solution_path)
    missing = [f for f in fields(lesson) if f not in values]
    if missing:
        problems.append(
            f"{solution_path.relative_to(root)} has no value for the prose field(s) "
            + ", ".join("{{ " + f + " }}" for f in missing)
        )
        return problems
    learner = learner_notebook(lesson, values, root=root)
    lesson = fill(lesson, values)
    if not learner_path.exists():
        problems.append(f"{learner_path.relative_to(root)} is missing")
    elif learner_path.read_text(encoding="utf-8") != nbformat.writes(learner) + "\n":
        problems.append(
            f"{learner_path.relative_to(root)} differs from what {source.name} generates"
        )
    if not solution_path.exists():
        problems.append(f"{solution_path.relative_to(root)} is missing")
    else:
        solution = nbformat.read(solution_path, as_version=4)
        if (
            solution.metadata.get("course", {}).get("source_sha256")
            != lesson.metadata.course.source_sha256
        ):
            problems.append(
                f"{solution_path.relative_to(root)} was built from another version of {source.name}"
            )
        elif [(c.cell_type, c.source, c.metadata.get("tags")) for c in solution.cells] != [
            (c.cell_type, c.source, c.metadata.get("tags")) for c in lesson.cells
        ]:
            problems.append(f"{solution_path.relative_to(root)}'s cells differ from {source.name}")
        elif any(c.cell_type == "code" and c.execution_count is None for c in solution.cells):
            problems.append(f"{solution_path.relative_to(root)} has cells that were never executed")
        elif fields(read_lesson(source)) and solution.metadata.course.get(
            "outputs_sha256"
        ) != outputs_hash(solution):
            problems.append(
                f"{solution_path.relative_to(root)}'s outputs are not the ones its prose was "
                "filled beside (executed again outside `make notebooks`?)"
            )
    return problems


# ----------------------------------------------------- translated editions ----------


def edition_notebooks(source: Path, lang: str, root: Path = ROOT):
    """(learner, solution) notebooks of `lang` for the lesson (course.i18n), as `build`
    writes them from the English solution notebook on disk; solution is None without one."""
    translated = i18n.translate_lesson(read_lesson(source), source, lang, root)
    english_path = root / "solutions" / f"{source.stem}.ipynb"
    values = recorded_values(english_path)
    notebook = f"notebooks/{lang}/{source.stem}.ipynb"
    learner = learner_notebook(translated, values, root, notebook=notebook)
    solution = None
    if english_path.exists():
        english = nbformat.read(english_path, as_version=4)
        solution = i18n.solution_edition(english, fill(translated, values))
        solution.metadata.course["fingerprint"] = fingerprint(solution)
    return learner, solution


def build_editions(source: Path, root: Path = ROOT, say=print) -> None:
    """Write the lesson's translated notebooks, for each language it has a catalogue for,
    from the English solution notebook on disk (just written by the same build). A learner's
    edits are kept as in English; a changed catalogue counts as a changed lesson."""
    for lang in i18n.editions(source, root):
        learner, solution = edition_notebooks(source, lang, root)
        left = [p for p in i18n.problems(source, lang, root) if ": obsolete:" not in p]
        if left:
            say(
                f"! {len(left)} unit(s) of {source.stem} are not translated into {lang} "
                "(shown in English); `python -m course.translations check` lists them"
            )
        target = root / "notebooks" / lang / f"{source.stem}.ipynb"
        made = (learner.metadata.course.source_sha256, learner.metadata.course.catalogue_sha256)
        unchanged = i18n.built_from(target) == made
        place_learner(learner, target, unchanged, root / "notebooks" / "backups" / lang, root, say)
        if solution is None:
            say(f"! no solutions/{source.stem}.ipynb: solutions/{lang}/ not written")
        else:
            write(solution, root / "solutions" / lang / f"{source.stem}.ipynb")
            say(f"wrote solutions/{lang}/{source.stem}.ipynb")


def edition_staleness(source: Path, root: Path = ROOT) -> list[str]:
    """What is out of date in the translated notebooks of `source` (empty: all current)."""
    found = []
    for lang in i18n.editions(source, root):
        learner, solution = edition_notebooks(source, lang, root)
        for nb, folder in ((learner, "notebooks"), (solution, "solutions")):
            path = root / folder / lang / f"{source.stem}.ipynb"
            if nb is None:
                continue
            if not path.exists():
                found.append(f"{path.relative_to(root).as_posix()} is missing")
            elif path.read_text(encoding="utf-8") != nbformat.writes(nb) + "\n":
                catalogue = i18n.catalogue_path(source, lang, root).name
                found.append(
                    f"{path.relative_to(root).as_posix()} differs from what {source.name}, its "
                    f"solution notebook and {catalogue} generate (run `make notebooks`)"
                )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.authoring",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="regenerate learner and solution notebooks")
    b.add_argument("lessons", nargs="*", help="lesson numbers or names (default: all)")
    b.add_argument("--no-execute", action="store_true", help="learner notebooks only")
    sub.add_parser("check", help="exit 1 if any generated notebook is stale")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(only=args.lessons or None, execute=not args.no_execute)
            return 0
        sources = lesson_sources(ROOT / "solutions")
        problems = [p for s in sources for p in staleness(s) + edition_staleness(s)]
    except AuthoringError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"stale: {problem} (run `make notebooks`)")
    print("all notebooks are current" if not problems else f"{len(problems)} stale")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
