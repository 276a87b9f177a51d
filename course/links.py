"""Where the course lives online, and the links made from it.

The repository's address is written in one place, pyproject.toml's `[project.urls]`
(`Repository = "https://github.com/OWNER/NAME"`). Everything that points at the repository
is made from it here: the "Open in Colab" links of the website and of the learner
notebooks, and what Colab installs. An instructor's fork sets its own address; with none
set, every function here returns None and no link is shown.

A notebook and the package it runs on must be the same version, so the links name the
release tag `v<version>` (`course.__version__`), never a moving branch.
"""

from __future__ import annotations

import re
from pathlib import Path

from course import __version__

ROOT = Path(__file__).resolve().parents[1]
COLAB = "https://colab.research.google.com/github"
_GITHUB = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def repository_url(root: Path = ROOT) -> str | None:
    """`Repository` from pyproject.toml's `[project.urls]`, or None where it is not set.

    Read line by line (Python 3.10 has no tomllib): the table runs from its header to the
    next `[`; a value is a double-quoted string."""
    pyproject = Path(root) / "pyproject.toml"
    if not pyproject.is_file():
        return None
    in_urls = False
    for line in pyproject.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_urls = stripped == "[project.urls]"
            continue
        match = re.match(r'^(\w[\w -]*?)\s*=\s*"([^"]*)"', stripped) if in_urls else None
        if match and match.group(1).lower() == "repository":
            return match.group(2).strip() or None
    return None


def github_slug(url: str | None) -> str | None:
    """'OWNER/NAME' for a github.com repository address; None for anything else (Colab opens
    notebooks from GitHub only)."""
    match = _GITHUB.match(url or "")
    return f"{match.group(1)}/{match.group(2)}" if match else None


def release_ref(version: str = __version__) -> str:
    """The git tag of this version of the course: links and installs name it, not `main`."""
    return f"v{version}"


def colab_url(notebook: str, root: Path = ROOT, ref: str | None = None) -> str | None:
    """'Open in Colab' address of `notebook` (a path from the repository root, such as
    'notebooks/02_dot_product_attention.ipynb'), or None where no GitHub address is set."""
    slug = github_slug(repository_url(root))
    if slug is None:
        return None
    return f"{COLAB}/{slug}/blob/{ref or release_ref()}/{Path(notebook).as_posix()}"


def install_spec(root: Path = ROOT, ref: str | None = None) -> str | None:
    """What `pip install` takes to get this version of the course from its repository."""
    url = repository_url(root)
    if github_slug(url) is None:
        return None
    return f"course @ git+{url.rstrip('/')}@{ref or release_ref()}"
