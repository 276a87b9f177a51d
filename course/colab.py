"""The course in Google Colab: the first code cell of every learner notebook.

Colab opens a notebook alone, without the course around it, so the notebook's first code
cell installs the course, at the release this notebook belongs to (course.links: the tag
v<version> of the repository set in pyproject.toml), and then the lesson runs as on a
laptop. Anywhere else the cell does nothing and prints nothing (nbval compares outputs).

That cell cannot import `course` first: in Colab it is not installed yet. So `install_cell`
writes the whole cell, with the address baked in when the notebooks are built
(course.authoring), and the cell imports `course.colab.setup` only after pip has run.

Colab's own torch is kept. The course's dependencies (pyproject.toml) are lower bounds,
not requirements.txt's exact pins, so pip adds only what Colab lacks: replacing Colab's
torch would download gigabytes, could miss the CUDA build Colab's GPU driver wants, and
needs the session restarted before the new one loads. The numbers a lesson prints may
therefore differ from the solution notebooks, built with the pinned torch on a CPU: computed
values in their last digits, the results of training sometimes by more.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable

from course import __version__

# Where lessons 11 and 12 download the Tatoeba pairs in Colab: its working folder, shown
# in its file browser (the installed package's own folder would hide the file).
COLAB_DATA_DIR = "/content/data"

NO_ADDRESS = (
    "This notebook comes from a copy of the course with no repository address (pyproject.toml, "
    "[project.urls] Repository), so Colab cannot install the course for it. Install it "
    'yourself (!pip install "course @ git+https://github.com/OWNER/NAME", with its '
    "repository's address), run %env COURSE_DATA_DIR=/content/data, and run on from the next "
    "cell; or run the course on your own machine (README, Quick start)."
)


def install_cell(spec: str | None, version: str = __version__) -> str:
    """The source of a learner notebook's first code cell: in Colab, pip installs `spec`
    (course.links.install_spec(), at the tag of `version`) and `setup(version)` runs; with
    no spec (no repository address set) it stops with NO_ADDRESS. Elsewhere: nothing."""
    anywhere_else = "# Anywhere else it does nothing.\nimport sys\n\n"
    in_colab = 'if "google.colab" in sys.modules:\n'
    if spec is None:
        lines = textwrap.wrap(NO_ADDRESS, 80, drop_whitespace=False)
        return (
            "# In Google Colab this cell stops with a message: this copy of the course has no\n"
            "# repository address to install it from.\n"
            + anywhere_else
            + in_colab
            + "    raise RuntimeError(\n"
            + "".join(f"        {json.dumps(line)}\n" for line in lines)
            + "    )"
        )
    return (
        "# In Google Colab this cell installs the course, the version this notebook belongs to.\n"
        + anywhere_else
        + in_colab
        + "    import subprocess\n\n"
        f"    spec = {json.dumps(spec)}\n"
        '    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", spec], '
        "check=True)\n"
        "    from course.colab import setup\n\n"
        f"    setup({json.dumps(version)})"
    )


def setup(version: str, say: Callable[[str], object] = print) -> None:
    """In Colab, once pip has installed the course: check that it is the notebook's version,
    keep the downloaded data in COLAB_DATA_DIR (unless COURSE_DATA_DIR says otherwise), and
    say so in one line."""
    if __version__ != version:
        raise RuntimeError(
            f"this notebook belongs to version {version} of the course, but version "
            f"{__version__} is loaded: restart the session (Runtime > Restart session) and run "
            "this cell again"
        )
    os.environ.setdefault("COURSE_DATA_DIR", COLAB_DATA_DIR)
    import torch

    say(
        f"course {__version__} installed; torch {torch.__version__} (Colab's own); "
        f"lessons 11 and 12 download their data into {os.environ['COURSE_DATA_DIR']}"
    )
