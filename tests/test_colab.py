"""course.colab and the Colab additions to the learner notebooks, without Colab.

Colab is stood in for by a module in sys.modules under the name "google.colab" (the cell
asks for nothing more), and pip by a stand-in for subprocess.run that records the command
and installs nothing. What this cannot show: that Colab's pip installs the course from
GitHub at the tag, and that the lessons then run there (docs/platforms.md says so).
"""

import ast
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from course import __version__, authoring, colab, links

SPEC = f"course @ git+https://github.com/someone/attention-course@v{__version__}"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def pip(monkeypatch):
    """Stands in for subprocess.run: records each command, installs nothing."""
    calls = []

    def run(command, **kwargs):
        calls.append((command, kwargs))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


@pytest.fixture
def in_colab(monkeypatch):
    """What the cell sees in Colab: google.colab among the loaded modules."""
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))


@pytest.fixture
def no_data_dir(monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", "set before the test")  # restored afterwards
    monkeypatch.delenv("COURSE_DATA_DIR")


def _run_cell(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<first code cell>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("spec", [SPEC, None])
def test_outside_colab_the_cell_does_nothing_and_prints_nothing(pip, capsys, spec):
    assert "google.colab" not in sys.modules
    _run_cell(colab.install_cell(spec))
    assert pip == []
    assert capsys.readouterr() == ("", "")


def test_in_colab_the_cell_installs_this_version_then_sets_up(pip, in_colab, no_data_dir, capsys):
    import os

    _run_cell(colab.install_cell(SPEC))
    assert pip == [([sys.executable, "-m", "pip", "install", "--quiet", SPEC], {"check": True})]
    assert os.environ["COURSE_DATA_DIR"] == colab.COLAB_DATA_DIR
    out = capsys.readouterr().out
    assert out.startswith(f"course {__version__} installed; torch ")
    assert out.count("\n") == 1 and colab.COLAB_DATA_DIR in out


def test_in_colab_a_data_folder_already_set_is_kept(pip, in_colab, monkeypatch, capsys):
    import os

    monkeypatch.setenv("COURSE_DATA_DIR", "/content/drive/MyDrive/data")
    _run_cell(colab.install_cell(SPEC))
    assert os.environ["COURSE_DATA_DIR"] == "/content/drive/MyDrive/data"
    assert "/content/drive/MyDrive/data" in capsys.readouterr().out


def test_the_cell_imports_course_only_after_pip_has_run():
    # In Colab the package is not there before pip: nothing may import it earlier.
    tree = ast.parse(colab.install_cell(SPEC))
    lines = {
        type(node).__name__ + ":" + ast.unparse(node).split("(")[0]: node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Call)
    }
    pip_line = lines["Call:subprocess.run"]
    course_imports = [line for what, line in lines.items() if "course" in what]
    assert course_imports and min(course_imports) > pip_line


def test_without_a_repository_address_colab_is_told_so(pip, in_colab):
    with pytest.raises(RuntimeError) as error:
        _run_cell(colab.install_cell(None))
    assert "no repository address" in str(error.value)
    assert "[project.urls] Repository" in str(error.value)
    assert pip == []


def test_setup_refuses_another_version_of_the_course(no_data_dir):
    with pytest.raises(RuntimeError) as error:
        colab.setup("0.0.1", say=lambda _: None)
    assert str(error.value).startswith(
        f"this notebook belongs to version 0.0.1 of the course, but version {__version__} "
        "is loaded: restart the session"
    )


# ------------------------------------------------------------ the learner notebooks --

LESSON = """\
# %% [markdown]
# # 99 · A tiny lesson
#
# Its idea.

# %%
x = 1
"""


def _course(tmp_path: Path, urls: str) -> Path:
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "99_tiny.py").write_text(LESSON, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "course"\n\n{urls}\n')
    return tmp_path


def test_with_an_address_the_notebook_links_to_colab_and_installs_the_tag(tmp_path):
    root = _course(tmp_path, '[project.urls]\nRepository = "https://github.com/someone/course"\n')
    nb = authoring.learner_notebook(authoring.read_lesson(root / "solutions/99_tiny.py"), root=root)
    url = links.colab_url("notebooks/99_tiny.ipynb", root)
    assert url == (
        f"https://colab.research.google.com/github/someone/course/blob/v{__version__}/"
        "notebooks/99_tiny.ipynb"
    )
    assert nb.cells[0].source == (
        f"# 99 · A tiny lesson\n\n[![Open In Colab]({authoring.COLAB_BADGE})]({url})\n\nIts idea."
    )
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[1].source == colab.install_cell(
        f"course @ git+https://github.com/someone/course@v{__version__}"
    )
    assert nb.cells[2].source == "x = 1"


def test_without_an_address_there_is_no_link_and_the_cell_says_why(tmp_path):
    root = _course(tmp_path, '# [project.urls]\n# Repository = "https://github.com/a/b"\n')
    nb = authoring.learner_notebook(authoring.read_lesson(root / "solutions/99_tiny.py"), root=root)
    assert "colab" not in nb.cells[0].source.lower()
    assert nb.cells[1].source == colab.install_cell(None)


def test_build_and_check_use_the_address_of_the_course_they_build(tmp_path):
    root = _course(tmp_path, '[project.urls]\nRepository = "https://github.com/someone/course"\n')
    authoring.build(root, execute=False, say=lambda _: None)
    assert authoring.staleness(root / "solutions/99_tiny.py", root)[-1:] == [
        "solutions/99_tiny.ipynb is missing"  # not executed here; the learner one is current
    ]
    (root / "pyproject.toml").write_text('[project]\nname = "course"\n')  # the address removed
    assert "notebooks/99_tiny.ipynb differs from what 99_tiny.py generates" in (
        authoring.staleness(root / "solutions/99_tiny.py", root)
    )


@pytest.mark.learner_notebooks  # reads notebooks/ as committed (make test-fast leaves it out)
@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
def test_each_committed_notebook_begins_with_the_install_cell(path):
    learner = nbformat.read(path, as_version=4)
    first_code = next(c for c in learner.cells if c.cell_type == "code")
    assert first_code.source == colab.install_cell(links.install_spec())
    url = links.colab_url(f"notebooks/{path.name}")
    assert (url is not None) == ("Open In Colab" in learner.cells[0].source)
    solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
    assert not any(c.get("id") == "colab-install" for c in solution.cells)  # nbval's reference
