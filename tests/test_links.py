"""course.links: every link to the repository comes from pyproject's [project.urls]."""

from pathlib import Path

import pytest

from course import __version__, links


def _project(tmp_path: Path, urls: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "course"\nversion = "0.1.0"\n\n'
        + urls
        + '\n[tool.setuptools.packages.find]\ninclude = ["course*"]\n'
    )
    return tmp_path


def test_no_address_set_means_no_link(tmp_path):
    root = _project(tmp_path, '# [project.urls]\n# Repository = "https://github.com/a/b"\n')
    assert links.repository_url(root) is None
    assert links.colab_url("notebooks/02_x.ipynb", root) is None
    assert links.install_spec(root) is None


def test_colab_link_and_install_name_this_version(tmp_path):
    root = _project(
        tmp_path,
        '[project.urls]\nHomepage = "https://example.org"\n'
        'Repository = "https://github.com/someone/attention-course"\n',
    )
    assert links.repository_url(root) == "https://github.com/someone/attention-course"
    assert links.colab_url("notebooks/02_x.ipynb", root) == (
        "https://colab.research.google.com/github/someone/attention-course/blob/"
        f"v{__version__}/notebooks/02_x.ipynb"
    )
    assert links.install_spec(root) == (
        f"course @ git+https://github.com/someone/attention-course@v{__version__}"
    )


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("https://github.com/o/n", "o/n"),
        ("https://github.com/o/n.git", "o/n"),
        ("https://github.com/o/n/", "o/n"),
        ("https://gitlab.com/o/n", None),  # Colab opens notebooks from GitHub only
        ("", None),
        (None, None),
    ],
)
def test_only_github_addresses_give_colab_links(url, slug):
    assert links.github_slug(url) == slug


def test_the_repository_pyproject_parses():
    # Set or not, the project's own pyproject is read without error and agrees with itself.
    url = links.repository_url()
    assert (links.colab_url("notebooks/x.ipynb") is None) == (links.github_slug(url) is None)
