"""`make site` (tools/build_site.py): the course as a website, built from the committed,
executed solution notebooks without running them (issue 34).

The site is built once per test session, from a fresh copy of the repository's files (what a
clone of this working tree holds: tracked files and new ones git does not ignore, no build
output, no .venv) into a temporary folder, and timed. Then every page is parsed: its links and
images resolve inside the site, nothing is loaded from another host, every lesson is there
with its figures and math, and no exercise's answer shows unless its toggle is opened.

Nothing here depends on the learner notebooks in notebooks/ being as committed (a learner who
works there runs these tests with `make test-fast`): each lesson's learner notebook is the one
its source generates, which the site offers (tools/build_site.py) and tests/test_pipeline.py
checks notebooks/ against.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import _tools
import nbformat
import pytest

from course import authoring

ROOT = Path(__file__).resolve().parents[1]
BUILD_LIMIT_S = 120

_spec = importlib.util.spec_from_file_location("build_site", ROOT / "tools" / "build_site.py")
build_site = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_site)

ANSWER_TAG = build_site.ANSWER_TAG
LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))


# --- the build, once -----------------------------------------------------------------------


def _fresh_copy(target: Path) -> Path:
    """The files a clone of this working tree would hold, copied to `target`."""
    return _tools.load("timings").copy_of_the_tree(target, ROOT)


def _generated_learner(lesson: str):
    """The learner notebook of `lesson` as `make notebooks` generates it from its source."""
    solution = ROOT / "solutions" / f"{lesson}.ipynb"
    source = authoring.read_lesson(solution.with_suffix(".py"))
    return authoring.learner_notebook(source, authoring.recorded_values(solution))


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """(the built site's folder, seconds the build took, its stdout, its stderr)."""
    clone = _fresh_copy(tmp_path_factory.mktemp("site-clone"))
    out = clone / "build" / "site"
    start = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "tools/build_site.py", "--out", str(out)],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    assert run.returncode == 0, run.stdout + run.stderr
    return out, seconds, run.stdout, run.stderr


@pytest.fixture(scope="session")
def pages(site):
    """{path relative to the site: parsed page} for every HTML file of the site."""
    out = site[0]
    return {p.relative_to(out).as_posix(): _parse(p) for p in sorted(out.rglob("*.html"))}


# --- parsing -------------------------------------------------------------------------------


class Page(HTMLParser):
    """What the tests read from one HTML page: its ids, every URL it references (with the
    tag and rel), its inline styles, and its text inside and outside <details> elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str, str]] = []  # (tag, attribute, rel, url)
        self.styles: list[str] = []
        self.outside: list[str] = []  # text not inside any <details>
        self.inside: list[str] = []  # text inside a <details>
        self.details: list[dict] = []  # each <details>: its attributes and summary text
        self.images: list[str] = []
        self.math = 0
        # each answer cell's code (myst-nb's div.cell_input inside the div that carries the
        # answer's tag as a class): True where it sits inside a <details>
        self.answer_inputs: list[bool] = []
        self._divs: list[bool] = []  # open <div>s: does each carry the answer's tag?
        self._depth = 0  # <details> nesting
        self._in_style = False
        self._in_summary = False

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.ids.add(a["name"])
        for attribute in ("href", "src"):
            if attribute in a:
                self.refs.append((tag, attribute, a.get("rel", ""), a[attribute]))
        if "style" in a:
            self.styles.append(a["style"])
        if tag == "img":
            self.images.append(a.get("src", ""))
        classes = a.get("class", "").split()
        if "math" in classes:
            self.math += 1
        if tag == "div":
            self._divs.append(f"tag_{ANSWER_TAG}" in classes)
        if "cell_input" in classes and any(self._divs):
            self.answer_inputs.append(self._depth > 0)
        if tag == "style":
            self._in_style = True
        if tag == "details":
            self._depth += 1
            self.details.append({"attrs": a, "summary": ""})
        if tag == "summary":
            self._in_summary = True

    def handle_endtag(self, tag):
        if tag == "div" and self._divs:
            self._divs.pop()
        if tag == "style":
            self._in_style = False
        if tag == "details":
            self._depth -= 1
        if tag == "summary":
            self._in_summary = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)
            return
        if self._in_summary and self.details:
            self.details[-1]["summary"] += data
        (self.inside if self._depth else self.outside).append(data)


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _text(chunks: list[str]) -> str:
    """The chunks as one string, every run of white space one space."""
    return " ".join("".join(chunks).split())


def _is_external(url: str) -> bool:
    """Another host: a scheme other than data:, or a protocol-relative //host/ URL."""
    parts = urlsplit(url.strip())
    return bool(parts.netloc) or (parts.scheme not in ("", "data"))


CSS_URL = re.compile(r"""@import\s+(?:url\()?\s*['"]?([^'")\s;]+)|url\(\s*['"]?([^'")]+)""")


def _css_urls(css: str) -> list[str]:
    return [a or b for a, b in CSS_URL.findall(css)]


# --- the tests -----------------------------------------------------------------------------


def test_the_site_builds_quietly_from_a_fresh_copy_in_under_two_minutes(site):
    out, seconds, stdout, stderr = site
    assert seconds < BUILD_LIMIT_S, f"the site took {seconds:.0f} s to build"
    assert stderr == "", stderr
    korean = rf"{len(KO_LESSONS)} of them in Korean \(ko/\)"
    said = rf"wrote \S+index\.html: 12 lessons, {korean}, built in \d+ s\n"
    assert re.fullmatch(said, stdout), stdout
    assert (out / "index.html").is_file() and (out / "docs" / "index.html").is_file()


def test_every_internal_link_and_image_resolves(site, pages):
    out = site[0]
    broken = []
    for name, page in pages.items():
        for tag, attribute, _, url in page.refs:
            if _is_external(url) or url.startswith(("mailto:", "javascript:")):
                continue
            parts = urlsplit(url)
            target = (out / name).parent / unquote(parts.path) if parts.path else out / name
            target = target.resolve()
            if not target.is_file():
                broken.append(f"{name}: <{tag} {attribute}={url!r}>: no file")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target.relative_to(out.resolve()).as_posix()].ids
                if fragment not in ids:
                    broken.append(f"{name}: <{tag} {attribute}={url!r}>: no id {fragment!r}")
    assert not broken, "\n".join(broken)


def test_no_page_loads_a_script_style_or_font_from_another_host(site, pages):
    out = site[0]
    found = []
    for name, page in pages.items():
        for tag, attribute, rel, url in page.refs:
            if tag == "a":
                continue  # a link a reader follows, not something the page loads
            if _is_external(url):
                found.append(f"{name}: <{tag} {attribute}={url!r} rel={rel!r}>")
        for style in page.styles:
            found += [f"{name}: style url {u!r}" for u in _css_urls(style) if _is_external(u)]
    for css in sorted(out.rglob("*.css")):
        urls = _css_urls(css.read_text(encoding="utf-8", errors="replace"))
        found += [f"{css.relative_to(out)}: {u!r}" for u in urls if _is_external(u)]
    assert not found, "\n".join(found)
    mathjax = out / "_static" / "mathjax"
    assert (mathjax / "tex-chtml.js").is_file()
    assert (
        mathjax / "output" / "chtml" / "fonts" / "woff-v2" / "MathJax_Main-Regular.woff"
    ).is_file()


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_is_a_page_with_its_figures_math_and_learner_notebook(site, pages, lesson):
    out = site[0]
    name = f"solutions/{lesson}.html"
    assert name in pages, f"no page for lesson {lesson}"
    page = pages[name]
    nb = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
    assert title in "".join(page.outside), f"{name} lacks its title {title!r}"
    figures = sum(
        "image/png" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    shown = [src for src in page.images if "_images/" in src]
    assert len(shown) >= figures, f"{name}: {len(shown)} figures of the notebook's {figures}"
    assert all((out / "solutions" / unquote(src)).resolve().is_file() for src in shown)
    has_math = any(c.cell_type == "markdown" and "$" in c.source for c in nb.cells)
    if has_math:
        assert page.math > 0, f"{name}: no math elements"
        scripts = [url for tag, _, _, url in page.refs if tag == "script"]
        assert "../_static/mathjax/tex-chtml.js" in scripts
    downloads = [u for tag, _, _, u in page.refs if tag == "a" and u.endswith(f"{lesson}.ipynb")]
    assert len(downloads) == 1, f"{name}: links to its learner notebook {downloads}"
    learner = (out / "solutions" / unquote(downloads[0])).resolve()
    # the committed one, byte for byte, where notebooks/ is as committed (and current:
    # tests/test_pipeline.py); where a learner worked in it, the generated one: no answers
    served = learner.read_text(encoding="utf-8")
    assert served == nbformat.writes(_generated_learner(lesson)) + "\n"
    assert build_site.BEGIN not in served


def _answers(lesson: str) -> list[list[str]]:
    """Each exercise's answer lines (between the markers) in the solution notebook."""
    nb = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code" or build_site.BEGIN not in cell.source:
            continue
        inside, lines = False, []
        for line in cell.source.splitlines():
            if line.strip() == build_site.BEGIN:
                inside = True
            elif line.strip() == build_site.END:
                inside = False
            elif inside and line.strip():
                lines.append(line.strip())
        found.append(lines)
    return found


@pytest.mark.parametrize("lesson", LESSONS)
def test_each_answer_is_hidden_behind_a_closed_show_the_answer_toggle(pages, lesson):
    page = pages[f"solutions/{lesson}.html"]
    answers = _answers(lesson)
    assert answers, f"lesson {lesson} has no exercise"
    toggles = [d for d in page.details if build_site.SHOW_ANSWER in d["summary"]]
    assert len(toggles) == len(answers), (len(toggles), len(answers))
    assert all("open" not in d["attrs"] for d in toggles), "an answer's toggle starts open"
    assert page.answer_inputs == [True] * len(answers), "an answer's code outside <details>"
    outside, inside = _text(page.outside), _text(page.inside)
    # Lines that the learner notebook or the lesson's other cells show anyway are no secret.
    learner = _generated_learner(lesson)
    solution = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    others = [c.source for c in solution.cells if build_site.BEGIN not in c.source]
    exercise = _text([c.source + "\n" for c in learner.cells] + others)
    for lines in answers:
        secret = [" ".join(line.split()) for line in lines]
        secret = [line for line in secret if line not in exercise]
        assert secret, f"{lesson}: an answer whose every line the learner notebook shows"
        # (a short line such as `if mask is not None:` may be in the prose too)
        shown = [line for line in secret if len(line) >= 25 and line in outside]
        assert not shown, f"{lesson}: answer lines visible without the toggle: {shown}"
        missing = [line for line in secret if line not in inside]
        assert not missing, f"{lesson}: answer lines missing from the toggle: {missing}"


def test_no_colab_link_while_pyproject_names_no_repository(pages):
    from course import links

    if links.repository_url(ROOT) is not None:
        pytest.skip("pyproject.toml names a repository: the pages carry Colab links")
    for name, page in pages.items():
        assert not any("colab.research.google.com" in u for *_, u in page.refs), name


def test_a_named_repository_gives_each_lesson_an_open_in_colab_link():
    line = build_site.page_links(ROOT, "03_scaling", "https://github.com/someone/attention")
    assert "{download}`Download the learner notebook <../notebooks/03_scaling.ipynb>`" in line
    from course.links import release_ref

    want = (
        "[Open in Colab](https://colab.research.google.com/github/someone/attention/blob/"
        f"{release_ref()}/notebooks/03_scaling.ipynb)"
    )
    assert want in line


def test_staging_is_deterministic(tmp_path):
    """The same inputs give byte-identical sources for Sphinx (and so the same pages)."""
    first, second = tmp_path / "a", tmp_path / "b"
    build_site.stage(ROOT, first)
    build_site.stage(ROOT, second)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
    staged = nbformat.read(first / "solutions" / "03_scaling.ipynb", as_version=4)
    answers = [c for c in staged.cells if build_site.ANSWER_TAG in c.metadata.get("tags", [])]
    assert answers and all(build_site.BEGIN not in c.source for c in answers)


def _current_lesson() -> str:
    """A lesson whose solution notebook was built from its source as it is now (all of them
    in a commit, tests/test_pipeline.py; an author may be editing one)."""
    for lesson in LESSONS:
        solution = ROOT / "solutions" / f"{lesson}.ipynb"
        source = authoring.read_lesson(solution.with_suffix(".py"))
        if authoring.built_from(solution) == source.metadata.course.source_sha256:
            return lesson
    pytest.skip("every lesson's source is newer than its solution notebook: run make notebooks")


def _small_root(tmp_path: Path, lesson: str, address: str | None = None) -> Path:
    """A course folder holding what `stage` reads, with one lesson; its learner notebook in
    notebooks/ as a learner leaves it after Run All and save without editing a cell: the
    committed cells, each code cell with the solution notebook's outputs (the same ids)."""
    root = tmp_path / "course"
    (root / "solutions").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "tools").mkdir()
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("README.md", "NOTICE", "tools/READING.md"):
        shutil.copy2(ROOT / name, root / name)
    for suffix in (".py", ".ipynb"):
        shutil.copy2(ROOT / "solutions" / f"{lesson}{suffix}", root / "solutions")
    if address:
        (root / "pyproject.toml").write_text(f'[project.urls]\nRepository = "{address}"\n')
    learner = _generated_learner(lesson)
    solved = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    outputs = {c.get("id"): c for c in solved.cells if c.cell_type == "code"}
    ran = 0
    for n, cell in enumerate(c for c in learner.cells if c.cell_type == "code"):
        if cell.get("id") in outputs and outputs[cell.get("id")].outputs:
            cell.outputs = outputs[cell.get("id")].outputs
            cell.execution_count = n + 1
            ran += 1
    assert ran, "no output copied: the stand-in run ran nothing"
    path = root / "notebooks" / f"{lesson}.ipynb"
    path.write_text(nbformat.writes(learner) + "\n", encoding="utf-8")
    # what build_site read before: a notebook run but not edited keeps its fingerprint
    assert not authoring.edited_by_hand(path)
    return root


def test_the_site_serves_a_fresh_learner_notebook_not_a_run_one(tmp_path):
    """A learner who ran a lesson and saved it, changing no cell, must not have the site
    (built from their checkout) offer that notebook, outputs and all, for download."""
    lesson = _current_lesson()
    root = _small_root(tmp_path, lesson)
    staged = root / "staged"
    assert build_site.stage(root, staged) == [lesson]
    served = nbformat.read(staged / "notebooks" / f"{lesson}.ipynb", as_version=4)
    code = [c for c in served.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    want = nbformat.writes(_generated_learner(lesson)) + "\n"
    assert (staged / "notebooks" / f"{lesson}.ipynb").read_text(encoding="utf-8") == want


def test_the_served_learner_notebook_takes_the_built_folders_address(tmp_path):
    """Its Colab link and install cell come from the pyproject.toml of the folder the site is
    built from (or --repository), not from the checkout the `course` package was imported
    from."""
    address = "https://github.com/someone/attention"
    from course.links import release_ref

    lesson = _current_lesson()
    colab = (
        "https://colab.research.google.com/github/someone/attention/blob/"
        f"{release_ref()}/notebooks/{lesson}.ipynb"
    )
    root = _small_root(tmp_path, lesson, address=address)
    served = build_site.learner_notebook(root, root / "solutions" / f"{lesson}.ipynb")
    assert colab in served.cells[0].source
    assert f"course @ git+{address}@{release_ref()}" in "".join(c.source for c in served.cells)
    other = _small_root(tmp_path / "other", lesson)  # no address: --repository gives one
    build_site.stage(other, other / "staged", repository=address)
    staged = nbformat.read(other / "staged" / "notebooks" / f"{lesson}.ipynb", as_version=4)
    assert colab in staged.cells[0].source
    plain = build_site.learner_notebook(other, other / "solutions" / f"{lesson}.ipynb")
    assert "colab.research.google.com" not in plain.cells[0].source


def _map_rows(text: str) -> list[list[str]]:
    """The course map's rows, each cell with Markdown links reduced to their text."""
    rows = re.findall(r"^\| (\d\d) \|(.*)\|$", text, re.M)
    unlink = re.compile(r"\[([^\]]*)\]\([^)]*\)")
    return [[n] + [unlink.sub(r"\1", c).strip() for c in rest.split("|")] for n, rest in rows]


def test_the_home_page_and_the_readme_show_the_same_course_map():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert len(_map_rows(readme)) == len(LESSONS) == 12
    assert _map_rows(home) == _map_rows(readme)
    run_all = re.search(r'^"Run All" is how long.*?\n\n', readme, re.S | re.M)
    assert run_all and run_all.group(0) in home, "the Run All note differs"


@pytest.mark.parametrize("page, up", [("README.md", ""), ("docs/index.md", "../")])
def test_the_course_map_links_each_learner_notebook_and_its_solution_beside_it(page, up):
    """On GitHub a lesson's name opens the notebook a learner works in, never the answers; the
    solution is in the same row, labelled as such (issue 43)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d\d) \| ([^|\n]*) \|.*\| ([^|\n]*) \|$", text, re.M)
    assert [n for n, _, _ in rows] == [lesson[:2] for lesson in LESSONS], page
    for (_, name, solution), lesson in zip(rows, LESSONS, strict=True):
        assert name == f"[`{lesson}`]({up}notebooks/{lesson}.ipynb)", (page, name)
        assert solution == f"[solution]({up}solutions/{lesson}.ipynb)", (page, solution)


def test_the_sites_course_maps_download_the_learner_notebook_and_open_the_lesson(pages):
    """On the site the same links: the learner notebook downloads (the one the site generates,
    tools/build_site.py), "solution" opens the lesson's page, its answers folded."""
    for name, up in (("README.html", ""), ("docs/index.html", "../")):
        urls = [u for tag, _, _, u in pages[name].refs if tag == "a"]
        for lesson in LESSONS:
            downloads = [u for u in urls if u.endswith(f"/{lesson}.ipynb")]
            assert len(downloads) == 1 and downloads[0].startswith(f"{up}_downloads/"), (
                name,
                lesson,
                downloads,
            )
            assert f"{up}solutions/{lesson}.html" in urls, (name, lesson)


def test_learner_links_become_downloads_and_nothing_else_changes():
    text = (
        "[`01_rnn_limits`](notebooks/01_rnn_limits.ipynb) · "
        "[`02_x`](../notebooks/02_x.ipynb) · [solution](../solutions/01_rnn_limits.ipynb) · "
        "[a page](docs/notebooks.md) · `notebooks/03_scaling.ipynb`"
    )
    assert build_site.learner_links(text) == (
        "[`01_rnn_limits`](path:notebooks/01_rnn_limits.ipynb) · "
        "[`02_x`](path:../notebooks/02_x.ipynb) · [solution](../solutions/01_rnn_limits.ipynb) · "
        "[a page](docs/notebooks.md) · `notebooks/03_scaling.ipynb`"
    )


def test_the_readme_stays_a_front_door_that_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name}" in readme, f"README.md does not link docs/{page.name}"
    assert "make site" in readme


def test_the_build_output_is_ignored_and_never_collected():
    ignored = subprocess.run(
        ["git", "check-ignore", "build/site/index.html", "build/site-src/x.ipynb"],
        capture_output=True,
        cwd=ROOT,
    )
    assert ignored.returncode == 0, "build/ must be git-ignored"
    pyproject = (ROOT / "pyproject.toml").read_text()
    testpaths = json.loads(re.search(r"^testpaths\s*=\s*(\[.*\])", pyproject, re.M).group(1))
    assert not any(p.startswith("build") for p in testpaths)


def test_the_pages_workflow_publishes_what_make_site_builds():
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^site: .*## ", makefile, re.M), "Makefile: a `site` target with help"
    assert "tools/build_site.py" in makefile
    assert "run: make site" in workflow
    assert re.search(
        r"uses: actions/upload-pages-artifact@v\d+\s+with:\s+path: build/site\b", workflow
    )
    assert "uses: actions/deploy-pages@v" in workflow
    assert re.search(r"push:\s+branches: \[main\]", workflow)
    assert re.search(r"pages: write\s+id-token: write", workflow)


# --- the Korean edition (build/site/ko/, tools/build_site.py's second build) ----------------

KO_LESSONS = sorted(p.stem for p in (ROOT / "solutions" / "ko").glob("[0-9][0-9]_*.ipynb"))


def test_the_korean_edition_has_its_home_page_and_lessons_in_korean(site, pages):
    out = site[0]
    assert KO_LESSONS, "no solutions/ko/ notebooks"
    for name in ["ko/index.html", "ko/README.ko.html", "ko/docs/ko/glossary.html"] + [
        f"ko/solutions/{lesson}.html" for lesson in KO_LESSONS
    ]:
        assert name in pages, f"no Korean page {name}"
        assert '<html lang="ko"' in (out / name).read_text(encoding="utf-8"), name
    assert '<html lang="en"' in (out / "solutions" / f"{KO_LESSONS[0]}.html").read_text("utf-8")
    readme = [url for tag, _, _, url in pages["README.html"].refs if tag == "a"]
    assert "ko/README.ko.html" in readme
    assert "../README.html" in [url for _, _, _, url in pages["ko/README.ko.html"].refs]


@pytest.mark.parametrize("lesson", KO_LESSONS)
def test_every_korean_lesson_page_switches_language_and_has_math_figures_and_answers(
    site, pages, lesson
):
    out = site[0]
    name, english = f"ko/solutions/{lesson}.html", f"solutions/{lesson}.html"
    page = pages[name]
    assert f"../../{english}" in [u for tag, _, _, u in page.refs if tag == "a"]
    assert f"../ko/solutions/{lesson}.html" in [u for _, _, _, u in pages[english].refs]
    assert re.search("[가-힣]", "".join(page.outside))
    assert page.math == pages[english].math > 0
    assert len([s for s in page.images if "_images/" in s]) == len(
        [s for s in pages[english].images if "_images/" in s]
    )
    toggles = [d for d in page.details if build_site.SHOW_ANSWER_KO in d["summary"]]
    assert len(toggles) == len(_answers(lesson)) and all("open" not in d["attrs"] for d in toggles)
    assert build_site.SHOW_ANSWER not in "".join(page.outside + page.inside)
    assert page.answer_inputs == [True] * len(toggles)
    downloads = [u for tag, _, _, u in page.refs if tag == "a" and u.endswith(f"{lesson}.ipynb")]
    assert len(downloads) == 1, downloads
    served = (out / "ko" / "solutions" / unquote(downloads[0])).resolve().read_text("utf-8")
    assert served == (ROOT / "notebooks" / "ko" / f"{lesson}.ipynb").read_text("utf-8")


def test_no_korean_page_shows_a_literal_double_asterisk(pages):
    """`**` in a page's text is emphasis CommonMark did not render (the code shown is the
    English page's, so a Korean lesson may show as many as its English page, no more)."""
    for name, page in pages.items():
        if name.startswith("ko/"):
            english = pages.get(name.removeprefix("ko/"))
            allowed = "".join(english.outside + english.inside).count("**") if english else 0
            shown = "".join(page.outside + page.inside).count("**")
            assert shown <= allowed, f"{name} shows {shown} literal ** ({allowed} in English)"


KO_PAGES = sorted(p.stem for p in (ROOT / "docs" / "ko").glob("*.md") if p.stem != "glossary")


def test_the_korean_course_map_and_exercises_page_are_generated_pages():
    assert {"index", "exercises"} <= set(KO_PAGES)


@pytest.mark.parametrize("stem", KO_PAGES)
def test_every_translated_docs_page_is_in_the_korean_edition_and_switches_language(
    site, pages, stem
):
    """docs/ko/NAME.md (generated by `make translations`) is a page of the Korean edition, in
    its menu, linked from its English twin's page and linking it back, as the lessons are."""
    out = site[0]
    name, english = f"ko/docs/ko/{stem}.html", f"docs/{stem}.html"
    assert name in pages, f"no Korean page {name}"
    assert '<html lang="ko"' in (out / name).read_text(encoding="utf-8"), name
    korean_links = [u for tag, _, _, u in pages[name].refs if tag == "a"]
    assert f"../../../{english}" in korean_links, name
    assert f"../ko/docs/ko/{stem}.html" in [u for tag, _, _, u in pages[english].refs if tag == "a"]
    assert re.search("[가-힣]", _text(pages[name].outside))
    home = [u for tag, _, _, u in pages["ko/README.ko.html"].refs if tag == "a"]
    assert f"docs/ko/{stem}.html" in home, f"the Korean menu does not list {stem}"


def test_the_korean_course_map_opens_the_korean_lessons_and_downloads_their_notebooks(site, pages):
    out = site[0]
    page = pages["ko/docs/ko/index.html"]
    urls = [u for tag, _, _, u in page.refs if tag == "a"]
    for lesson in KO_LESSONS:
        downloads = [u for u in urls if u.endswith(f"/{lesson}.ipynb")]
        assert len(downloads) == 1 and downloads[0].startswith("../../_downloads/"), downloads
        served = (out / "ko" / "docs" / "ko" / unquote(downloads[0])).resolve()
        assert served.read_text("utf-8") == (
            ROOT / "notebooks" / "ko" / f"{lesson}.ipynb"
        ).read_text("utf-8")
        assert f"../../solutions/{lesson}.html" in urls, lesson
    # the guides without a Korean page: the English edition's, marked (영어)
    assert "../../../docs/progress.html" in urls and "(영어)" in _text(page.outside)
    assert "glossary.html" in urls and "../../README.ko.html" in urls
    readme = (ROOT / "README.ko.md").read_text(encoding="utf-8")
    assert "](docs/ko/index.md)" in readme, "README.ko.md does not link the Korean course map"
