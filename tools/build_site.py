"""Build the course's website from the committed, executed solution notebooks, without
running them again (what `make site` runs; issue 34).

    python tools/build_site.py                      # -> build/site/index.html
    python tools/build_site.py --out /tmp/site      # elsewhere
    python tools/build_site.py --repository https://github.com/OWNER/NAME   # a preview with
                                                    # "Open in Colab" links (pyproject unset)

What goes in, from this repository:
  docs/*.md             the site's pages (MyST Markdown; docs/index.md is the home page);
  README.md             the front door, as the "Quick start" page;
  tools/READING.md      how a lesson is read against its outputs (instructors);
  solutions/NN_*.ipynb  one page per lesson with every output nbval checked, the answers
                        behind a "Show the answer" toggle (see `lesson_page`);
  solutions/NN_*.py     each lesson's source: the learner notebook for the download link is
                        generated from it (`learner_notebook`), never read from notebooks/,
                        where a learner's work may be.
  README.ko.md, docs/ko/*.md, solutions/ko/, notebooks/ko/
                        the Korean edition (course/i18n.py), built by a second sphinx-build
                        with language="ko" into <out>/ko/; a lesson with a Korean page links
                        it from its English one, and back (see `stage_ko`).

It stages those files in a folder laid out like the repository (so a relative link in
docs/*.md reads the same on GitHub and on the site), writes Sphinx's conf.py there and runs
sphinx-build (myst-nb, sphinx-book-theme), quietly, with every warning an error. MathJax is
served from the site itself (the sphinx-mathjax-offline package's copy): no page loads a
script, style or font from another host. The output is the same files for the same inputs.
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # this checkout's `course`, also from a copy of the repository
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SHOW_ANSWER, HIDE_ANSWER = "Show the answer", "Hide the answer"
SHOW_ANSWER_KO, HIDE_ANSWER_KO = "답 보기", "답 숨기기"  # the Korean pages' toggle
ANSWER_TAG = "course-answer"  # the answer cell's tag on the site (tests find it by this)
# Pages besides the lessons, in the order of the site's menu (docs/index.md is the home page).
GUIDES = [
    ("Start here", ["../README", "exercises", "progress", "platforms", "troubleshooting"]),
    ("Results", ["training", "translation", "gpt", "benchmarks"]),
    ("For instructors", ["grading", "authoring", "../tools/READING"]),
]
TITLES = {"../README": "Quick start"}

CONF = """\
# Written by tools/build_site.py for one build; edit that file, not this one.
import shutil
from importlib.metadata import distribution
from pathlib import Path

project = "Attention, step by step"
copyright = ""
html_title = project
root_doc = "docs/index"
include_patterns = ["README.md", "docs/*.md", "tools/READING.md", "solutions/*.ipynb"]
extensions = ["myst_nb"]
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 4
html_theme = "sphinx_book_theme"
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {theme_options!r}
html_context = {{"default_mode": "light"}}
html_static_path = ["_static"]
html_css_files = ["course.css"]
# MathJax from the site itself, never a CDN: the copy in the sphinx-mathjax-offline package.
mathjax_path = "mathjax/tex-chtml.js"


def _copy_mathjax(app, exc):
    if exc is None:
        source = distribution("sphinx-mathjax-offline").locate_file(
            "sphinx-mathjax-offline/static/mathjax"
        )
        shutil.copytree(source, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def setup(app):
    app.connect("build-finished", _copy_mathjax)
"""

# The site's own style, after the theme's: room for the course map, a wide table.
CSS = """\
.bd-main .bd-content .bd-article-container { max-width: 72em; }
.bd-article table.table { font-size: 0.9em; }
"""

REDIRECT = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Attention, step by step</title>
<meta http-equiv="refresh" content="0; url=docs/index.html">
<link rel="canonical" href="docs/index.html">
</head>
<body><p><a href="docs/index.html">Attention, step by step: the course map</a></p></body>
</html>
"""


class SiteError(RuntimeError):
    """The site could not be built, and why."""


def lessons(root: Path) -> list[Path]:
    """solutions/NN_name.ipynb, in lesson order."""
    return sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb"))


def strip_markers(source: str) -> str:
    """An answer cell's code without its BEGIN/END SOLUTION marker lines."""
    return "\n".join(line for line in source.split("\n") if line.strip() not in (BEGIN, END))


def lesson_page(solution, learner, links: str, toggle=(SHOW_ANSWER, HIDE_ANSWER)):
    """The solution notebook as the site shows it: `links` (markdown) under the title, and
    every exercise cell twice: as the learner notebook has it (the stub, visible), then the
    answer with its outputs, the code folded behind a "Show the answer" toggle."""
    nb = copy.deepcopy(solution)
    stubs = {cell.get("id"): cell for cell in learner.cells}
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code" and BEGIN in cell.source:
            stub = stubs.get(cell.get("id"))
            if stub is None or BEGIN in stub.source:
                raise SiteError(f"no learner cell {cell.get('id')} to show before its answer")
            cells.append(nbformat.v4.new_code_cell(stub.source, id=f"{cell.id}-exercise"))
            cell.source = strip_markers(cell.source)
            cell.metadata.setdefault("tags", []).extend(["hide-input", ANSWER_TAG])
            cell.metadata["mystnb"] = {
                "code_prompt_show": toggle[0],
                "code_prompt_hide": toggle[1],
            }
        cells.append(cell)
    title = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"), -1)
    cells.insert(title + 1, nbformat.v4.new_markdown_cell(links, id="course-site-links"))
    nb.cells = cells
    return nb


def learner_notebook(root: Path, solution_path: Path, address_root: Path | None = None):
    """The learner notebook of a lesson, always generated afresh from its source
    (solutions/NN_name.py, with the prose values solutions/NN_name.ipynb recorded), as
    `make notebooks` writes it: never the file in notebooks/, where a learner's answers, or
    the outputs of a run that changed no cell, may be. Where notebooks/ is as committed and
    current (tests/test_pipeline.py), the two are the same bytes. Its Colab link and install
    cell come from `address_root`'s pyproject.toml (default: `root`'s)."""
    from course import authoring

    lesson = authoring.read_lesson(root / "solutions" / f"{solution_path.stem}.py")
    values = authoring.recorded_values(solution_path)
    try:
        return authoring.learner_notebook(lesson, values, root=address_root or root)
    except authoring.AuthoringError as error:  # a source newer than its solution notebook
        raise SiteError(f"no learner notebook for {solution_path.stem}: {error}") from None


def page_links(root: Path, stem: str, repository: str | None) -> str:
    """The line under a lesson's title: download the learner notebook, and open it in Colab
    where the repository's address is known."""
    from course import links

    parts = [
        f"{{download}}`Download the learner notebook <../notebooks/{stem}.ipynb>` "
        "(the exercises without their answers, to run in Jupyter)"
    ]
    if repository:
        url = links.colab_url(f"notebooks/{stem}.ipynb", root=_with_repository(repository))
    else:
        url = links.colab_url(f"notebooks/{stem}.ipynb", root=root)
    if url:
        parts.append(f"[Open in Colab]({url})")
    if (root / "solutions" / KO / f"{stem}.ipynb").exists():
        parts.append(f'<a href="../{KO}/solutions/{stem}.html" hreflang="ko">한국어</a>')
    return " · ".join(parts)


_repositories: dict[str, Path] = {}


def _with_repository(url: str) -> Path:
    """A folder whose pyproject.toml names `url` as the Repository (for --repository)."""
    if url not in _repositories:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="course-site-repo-"))
        (folder / "pyproject.toml").write_text(f'[project.urls]\nRepository = "{url}"\n')
        _repositories[url] = folder
    return _repositories[url]


# A Markdown link to a learner notebook (`](notebooks/NN_name.ipynb)` in README.md,
# `](../notebooks/NN_name.ipynb)` in docs/): on GitHub it opens the notebook; on the site,
# where notebooks/ holds files that are no pages, MyST's `path:` makes it a download.
LEARNER_LINK = re.compile(r"\]\(((?:\.\./)*notebooks/\d\d_[A-Za-z0-9_]+\.ipynb)\)")


def learner_links(markdown: str) -> str:
    """`markdown` with every link to a learner notebook made a download for the site."""
    return LEARNER_LINK.sub(r"](path:\1)", markdown)


def toctrees(stems: list[str]) -> str:
    """The site's menu, appended to the staged home page (docs/index.md stays plain Markdown
    on GitHub)."""
    out = ["\n\n```{toctree}\n:hidden:\n:caption: Lessons\n\n"]
    out += [f"../solutions/{stem}\n" for stem in stems]
    out.append("```\n")
    for caption, pages in GUIDES:
        out.append(f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n")
        out += [f"{TITLES[page]} <{page}>\n" if page in TITLES else f"{page}\n" for page in pages]
        out.append("```\n")
    return "".join(out)


def stage(root: Path, staging: Path, repository: str | None = None) -> list[str]:
    """Lay out the site's sources in `staging`; returns the lessons' names."""
    if staging.exists():
        shutil.rmtree(staging)
    (staging / "solutions").mkdir(parents=True)
    (staging / "notebooks").mkdir()
    (staging / "tools").mkdir()
    shutil.copytree(root / "docs", staging / "docs", ignore=shutil.ignore_patterns("_build", "ko"))
    shutil.copy2(root / "README.md", staging / "README.md")
    shutil.copy2(root / "NOTICE", staging / "NOTICE")
    shutil.copy2(root / "tools" / "READING.md", staging / "tools" / "READING.md")
    stems = []
    address_root = _with_repository(repository) if repository else root
    for path in lessons(root):
        solution = nbformat.read(path, as_version=4)
        learner = learner_notebook(root, path, address_root)
        (staging / "notebooks" / path.name).write_text(
            nbformat.writes(learner) + "\n", encoding="utf-8"
        )
        page = lesson_page(solution, learner, page_links(root, path.stem, repository))
        (staging / "solutions" / path.name).write_text(nbformat.writes(page), encoding="utf-8")
        stems.append(path.stem)
    if not stems:
        raise SiteError(f"no solutions/NN_*.ipynb in {root}")
    for page in [staging / "README.md", *sorted((staging / "docs").glob("*.md"))]:
        page.write_text(learner_links(page.read_text(encoding="utf-8")), encoding="utf-8")
    index = staging / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + toctrees(stems), encoding="utf-8")
    for page in [staging / "README.md", *sorted((staging / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        up = "../" * (len(page.relative_to(staging).parts) - 1)
        text = KO_LINK.sub(lambda m, up=up: _html_link(m, f"{up}{KO}/"), text)
        page.write_text(text, encoding="utf-8")
    (staging / "_static").mkdir()
    (staging / "_static" / "course.css").write_text(CSS, encoding="utf-8")
    conf = CONF.format(theme_options=_theme(repository))
    (staging / "conf.py").write_text(conf, encoding="utf-8")
    return stems


def _theme(repository: str | None) -> dict:
    theme = {
        "home_page_in_toc": True,
        "show_toc_level": 2,
        "use_download_button": False,
        "use_fullscreen_button": False,
        # the home page's course map is a wide table: no "Contents" column beside it
        "secondary_sidebar_items": {"**": ["page-toc"], "docs/index": []},
    }
    if repository:
        theme |= {"repository_url": repository, "use_repository_button": True}
    return theme


# ------------------------------------------------------ the Korean edition ----------
# Built by a second sphinx-build with language="ko" into <out>/ko/, laid out like the
# repository from README.ko.md (its home page), docs/ko/*.md and solutions/ko/*.ipynb. A link
# between the two editions is plain HTML (each build knows only its own pages): the English
# lesson pages link their Korean page and back, README.md links README.ko.md and back.
KO = "ko"
# [text](README.ko.md) or [text](ko/glossary.md#x) in the English pages; in the Korean ones
# [text](README.md) or [text](docs/authoring.md#x)
KO_LINK = re.compile(r"\[([^\]]+)\]\((README\.ko\.md|(?:docs/)?ko/[\w.-]+\.md)(#[^)]*)?\)")
EN_LINK = re.compile(r"\[([^\]]+)\]\((README\.md|docs/[\w.-]+\.md)(#[^)]*)?\)")
KO_CONF = """
language = "ko"
root_doc = "README.ko"
include_patterns = ["README.ko.md", "docs/ko/*.md", "solutions/*.ipynb"]
html_title = "어텐션, 한 걸음씩"
"""


KO_REDIRECT = """\
<!DOCTYPE html>
<html lang="ko">
<head>
<meta charset="utf-8">
<title>어텐션, 한 걸음씩</title>
<meta http-equiv="refresh" content="0; url=README.ko.html">
<link rel="canonical" href="README.ko.html">
</head>
<body><p><a href="README.ko.html">어텐션, 한 걸음씩: 한국어판</a></p></body>
</html>
"""


def _html_link(match, prefix: str) -> str:
    """A markdown link as an <a> to the other edition's page (prefix: the way there)."""
    text, target, fragment = match.group(1), match.group(2), match.group(3) or ""
    target = re.sub(r"^(docs/)?ko/", "docs/ko/", target) if prefix.endswith(f"{KO}/") else target
    return f'<a href="{prefix}{target[:-3]}.html{fragment}">{text}</a>'


def ko_page_links(stem: str) -> str:
    return (
        f"{{download}}`학습용 노트북 내려받기 <../notebooks/{stem}.ipynb>` "
        "(답이 빠진 연습 문제, Jupyter에서 실행합니다) · "
        f'<a href="../../solutions/{stem}.html" hreflang="en">English</a>'
    )


def stage_ko(root: Path, staging: Path, theme: dict) -> list[str]:
    """Lay out the Korean edition's sources in `staging`; returns its lessons' names."""
    from course import authoring

    if staging.exists():
        shutil.rmtree(staging)
    (staging / "solutions").mkdir(parents=True)
    (staging / "notebooks").mkdir()
    shutil.copytree(root / "docs" / KO, staging / "docs" / KO)
    shutil.copy2(root / "README.ko.md", staging / "README.ko.md")
    stems = []
    for path in sorted((root / "solutions" / KO).glob("[0-9][0-9]_*.ipynb")):
        solution = nbformat.read(path, as_version=4)
        # generated afresh, never read from notebooks/ko/, where a learner's work may be
        source = root / "solutions" / f"{path.stem}.py"
        learner = authoring.edition_notebooks(source, KO, root)[0]
        (staging / "notebooks" / path.name).write_text(
            nbformat.writes(learner) + "\n", encoding="utf-8"
        )
        toggle = (SHOW_ANSWER_KO, HIDE_ANSWER_KO)
        page = lesson_page(solution, learner, ko_page_links(path.stem), toggle)
        (staging / "solutions" / path.name).write_text(nbformat.writes(page), encoding="utf-8")
        stems.append(path.stem)
    for page in [staging / "README.ko.md", *sorted((staging / "docs" / KO).glob("*.md"))]:
        up = "../" * (len(page.relative_to(staging).parts) - 1)
        text = EN_LINK.sub(
            lambda m, up=up: _html_link(m, f"../{up}"), page.read_text(encoding="utf-8")
        )
        if page.name == "glossary.md":  # no English twin: the switch leads to the English home
            text += '\n\n<a href="../../../docs/index.html" hreflang="en">English</a>\n'
        page.write_text(text, encoding="utf-8")
    menu = ["\n\n```{toctree}\n:hidden:\n:caption: 레슨\n\n"]
    menu += [f"solutions/{stem}\n" for stem in stems] + ["```\n"]
    menu += ["\n```{toctree}\n:hidden:\n:caption: 안내\n\n용어집 <docs/ko/glossary>\n```\n"]
    readme = staging / "README.ko.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "".join(menu), encoding="utf-8")
    (staging / "_static").mkdir()
    (staging / "_static" / "course.css").write_text(CSS, encoding="utf-8")
    conf = CONF.format(theme_options=theme) + KO_CONF
    (staging / "conf.py").write_text(conf, encoding="utf-8")
    return stems


def build(
    root: Path = ROOT, out: Path | None = None, repository: str | None = None, say=print
) -> Path:
    """Stage and build the site into `out` (default build/site); returns `out`."""
    out = Path(out or root / "build" / "site").resolve()
    staging = out.parent / f"{out.name}-src"
    start = time.perf_counter()
    stems = stage(root, staging, repository)
    if out.exists():
        shutil.rmtree(out)
    builds = [(staging, out)]
    ko_stems = []
    if (root / "README.ko.md").exists():
        ko_staging = out.parent / f"{out.name}-src-{KO}"
        ko_stems = stage_ko(root, ko_staging, _theme(repository))
        builds.append((ko_staging, out / KO))
    # the two editions build side by side (each sphinx-build is one process)
    runs = [(_sphinx_start(src), src, dest) for src, dest in builds]
    try:
        for run, src, dest in runs:
            _sphinx_finish(run, src, dest)
    finally:
        for run, _, _ in runs:
            if run.poll() is None:  # the other edition's build, when one failed
                run.kill()
                run.wait()
    if len(builds) > 1:  # build/site/ko/ opens on the Korean home page
        (out / KO / "index.html").write_text(KO_REDIRECT, encoding="utf-8")
    (out / "index.html").write_text(REDIRECT, encoding="utf-8")
    (out / ".nojekyll").write_text("", encoding="utf-8")
    seconds = time.perf_counter() - start
    say(
        f"wrote {_shown(out, root)}/index.html: {len(stems)} lessons, "
        f"{len(ko_stems)} of them in Korean ({KO}/), built in {seconds:.0f} s"
    )
    return out


def _sphinx_start(staging: Path) -> subprocess.Popen:
    """sphinx-build `staging` into staging/_build/html, started (`_sphinx_finish` waits)."""
    # Sphinx writes into the staging folder (myst-nb keeps its copies of the figures beside
    # the output, in ../jupyter_execute); the finished pages then move to `out`.
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-q",  # warnings only
        "-W",  # ... and each one is an error
        "--keep-going",
        "-E",
        "-d",
        str(staging / "_build" / "doctrees"),
        str(staging),
        str(staging / "_build" / "html"),
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _sphinx_finish(run: subprocess.Popen, staging: Path, out: Path) -> None:
    """Wait for the build of `staging`, then move its pages to `out`."""
    stdout, stderr = run.communicate()
    if run.returncode != 0:
        raise SiteError(f"sphinx-build failed (exit {run.returncode}):\n{stdout}{stderr}".rstrip())
    shutil.move(staging / "_build" / "html", out)
    # Leftovers that are no page: Sphinx's build record, the themes' Jinja macro files that
    # they copy into _static unrendered, and the empty _sources (html_copy_source is off).
    for leftover in [out / ".buildinfo", out / ".buildinfo.bak", *(out / "_static").glob("*.html")]:
        leftover.unlink(missing_ok=True)
    if (out / "_sources").is_dir() and not any((out / "_sources").iterdir()):
        (out / "_sources").rmdir()


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="output folder (default: build/site)")
    parser.add_argument(
        "--repository",
        metavar="URL",
        help="a GitHub address for this build's Colab links (default: pyproject's)",
    )
    args = parser.parse_args(argv)
    try:
        build(ROOT, args.out, args.repository)
    except SiteError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
