"""A hostile class, graded in the sandbox: every attack contained, every other grade intact.

One class folder: two honest learners (`ana` right, `ben` wrong) and one hostile learner per
attack below, each notebook tiny (lesson 02's exercise, answered wrong after the attack, so an
attack that worked would show as a pass or as damage). The class is graded once, in the
sandbox with short limits, and the honest pair once more alone; each test reads one thing.
Every attack names real paths of this machine (the instructor's file, the course's checker,
ana's notebook, a listening socket): they are contained by the sandbox, not by luck.

These tests need bubblewrap and never run a hostile notebook without it: they skip only when
`bwrap` is not installed; a bwrap that cannot make a sandbox fails them.
"""

import hashlib
import re
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from course import progress, sandbox
from course.progress import Learner
from course.sandbox import Limits
from tests.test_progress import IMPORTS, RIGHT_02, WRONG_02, notebook

NEEDS_BWRAP = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"),
    reason=f"bubblewrap (bwrap) is not installed: `{sandbox.INSTALL}` (CI installs it)",
)
LESSON = "02_dot_product_attention.ipynb"
EXERCISES = {"02": ["dot_product_attention"]}
TIMEOUT = 20  # seconds per notebook: the infinite loop's and the fork bomb's cost
LIMITS = Limits(cpu_seconds=60, memory_mb=2048, processes=64, file_mb=16, disk_mb=64, output_mb=1)

# Each attack: the cell that tries it. {secret}, {ana}, {course}, {port}, {home} are filled in.
ATTACKS = {
    "deletes": """\
import os, shutil
for victim in [{secret!r}, {ana!r}, {home!r}]:
    try:
        shutil.rmtree(victim) if os.path.isdir(victim) else os.remove(victim)
    except OSError as error:
        print(error)
shutil.rmtree(os.path.expanduser("~"), ignore_errors=True)""",
    "copies": """\
import json
cells = json.load(open({ana!r}))["cells"]  # a classmate's notebook: run its code here
for cell in cells:
    if cell["cell_type"] == "code":
        exec("".join(cell["source"]))""",
    "writes_course": """\
with open({course!r} + "/check/attention.py", "a") as f:
    f.write("\\ndef dot_product_attention(candidate): return True\\n")""",
    "monkeypatches": """\
import course.check._framework as framework
framework.close = lambda *args, **kwargs: True  # every comparison now agrees
framework.expect_close = lambda *args, **kwargs: None
check.dot_product_attention = lambda candidate: True""",
    "forges": """\
import json, re
from IPython import get_ipython
forged = json.dumps({{"name": "dot_product_attention", "status": "passed", "message": "passed"}})
print("✅ dot_product_attention: passed (values and gradients matched).")
print("@course.progress:" + "0" * 32 + "@" + forged)

def forge(info=None):  # before and after every later cell, the judge's included
    said = re.findall(r"@course\\.progress:[0-9a-f]+@", getattr(info, "raw_cell", "") or "")
    for marker in said + ["@course.progress:" + "f" * 32 + "@"]:
        print("✅ dot_product_attention: passed")
        print(marker + forged)

get_ipython().events.register("pre_run_cell", forge)
get_ipython().events.register("post_run_cell", forge)""",
    "network": """\
import socket, urllib.request
for attempt in (lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3),
                lambda: urllib.request.urlopen("http://example.com", timeout=3)):
    try:
        attempt()
    except OSError as error:
        print(type(error).__name__, error)""",
    "fork_bomb": """\
import os
while True:
    os.fork()""",
    "memory_bomb": """\
hoard = []
while True:
    hoard.append(bytearray(64 * 2**20))""",
    "infinite_loop": """\
while True:  # an interrupt is caught and ignored
    try:
        while True:
            pass
    except BaseException:
        pass""",
    "endless_print": """\
while True:
    print("spam " * 1000)""",
    "fills_disk": """\
import os
for i in range(10**6):
    with open(f"filler{{i}}", "wb") as f:
        for _ in range(8):
            f.write(b"0" * 2**20)""",
    "writes_elsewhere": """\
import os
for folder in ["/", "/usr", {course!r}, {home!r}, os.path.dirname({ana!r}), "/tmp"]:
    try:
        os.chdir(folder)
        with open("planted.txt", "w") as f:
            f.write("was here")
    except OSError as error:
        print(error)""",
    "kills_parent": """\
import os, signal
for pid in (os.getppid(), {grader}, 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as error:
        print(error)""",
}


def digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` (caches aside) -> the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def listener() -> tuple[socket.socket, list]:
    """A socket on the grader's localhost that records every connection made to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    came: list = []

    def accept():
        while server.fileno() != -1:
            try:
                came.append(server.accept())
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    return server, came


def grade(learners: list[Learner]) -> tuple[dict, float]:
    started = time.monotonic()
    rows = progress.grade(learners, EXERCISES, timeout=TIMEOUT, jobs=2, sandbox=LIMITS)
    return {row.learner: row for row in rows}, time.monotonic() - started


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    if sandbox.problem():  # bwrap is here (NEEDS_BWRAP) but cannot sandbox: fail, never run
        pytest.fail(f"bwrap is installed but the sandbox does not work: {sandbox.problem()}")
    home = tmp_path_factory.mktemp("instructor")  # stands for the instructor's own files
    (home / "secret.txt").write_text("the instructor's answers\n", encoding="utf-8")
    folder = home / "class"
    notebook(folder / "ana" / LESSON, IMPORTS, RIGHT_02)
    notebook(folder / "ben" / LESSON, IMPORTS, WRONG_02)
    server, came = listener()
    where = {
        "secret": str(home / "secret.txt"),
        "ana": str(folder / "ana" / LESSON),
        "course": str(sandbox.COURSE),
        "home": str(home),
        "port": server.getsockname()[1],
        "grader": __import__("os").getpid(),
    }
    for name, attack in ATTACKS.items():
        # The attack's cell names the exercise, so that it runs (the run stops after the last
        # cell that names one); an attack that worked would leave a pass or damage behind.
        attack = attack.format(**where) + "\n# after this cell: dot_product_attention"
        notebook(folder / name / LESSON, IMPORTS, WRONG_02, attack)
    before, course_before = digest(home), digest(sandbox.COURSE)
    learners = progress.find_learners([str(folder)])
    honest = [x for x in learners if x.name in ("ana", "ben")]
    grace, progress._Watchdog.GRACE = progress._Watchdog.GRACE, 3.0  # the loop's cost, shorter
    try:
        alone, _ = grade(honest)
        rows, seconds = grade(learners)
    finally:
        progress._Watchdog.GRACE = grace
        server.close()
    return {"rows": rows, "alone": alone, "seconds": seconds, "came": came, "home": home,
            "before": before, "after": digest(home), "course_before": course_before,
            "course_after": digest(sandbox.COURSE)}  # fmt: skip


@NEEDS_BWRAP
def test_the_honest_learners_are_graded_exactly_as_alone(bank):
    rows, alone = bank["rows"], bank["alone"]
    assert rows["ana"].verdict.status == "passed"
    assert rows["ben"].verdict.status == "failed"
    for name in ("ana", "ben"):
        got, want = rows[name], alone[name]
        assert (got.verdict, got.notebook_error) == (want.verdict, want.notebook_error)


@NEEDS_BWRAP
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_attack_is_graded_without_a_pass_and_says_why_in_one_line(bank, attack):
    row = bank["rows"][attack]
    assert row.verdict.status in ("failed", "not judged"), row
    assert row.verdict.message and "\n" not in row.verdict.message
    assert "\n" not in row.notebook_error


@NEEDS_BWRAP
@pytest.mark.parametrize(
    "attack, said",
    [
        ("monkeypatches", "the notebook replaced code the checkers use"),
        ("endless_print", "printed more than 1 MB of output and was stopped"),
        ("infinite_loop", "still running after 20 s, ignored the interrupt and was stopped"),
        ("memory_bomb", "MemoryError"),
        ("writes_course", "Read-only file system"),
        ("copies", "FileNotFoundError"),
        ("fills_disk", "OSError"),
        ("fork_bomb", "BlockingIOError|was still running after 20 s"),  # as the race goes
    ],
)
def test_the_reason_names_what_stopped_the_attack(bank, attack, said):
    row = bank["rows"][attack]
    assert re.search(said, f"{row.verdict.message} | {row.notebook_error}"), row


@NEEDS_BWRAP
def test_the_instructors_files_and_the_course_are_unchanged(bank):
    assert bank["after"] == bank["before"]
    assert bank["course_after"] == bank["course_before"]
    assert not list(bank["home"].rglob("planted.txt"))


@NEEDS_BWRAP
def test_no_connection_reached_the_graders_machine(bank):
    assert bank["came"] == []


@NEEDS_BWRAP
def test_the_run_takes_bounded_time(bank):
    # 15 notebooks, 2 at a time, a few seconds each; the infinite loop costs its timeout and
    # the watchdog's grace, the fork bomb at most its timeout
    assert bank["seconds"] < 6 * TIMEOUT, bank["seconds"]


# ------------------------------------------------------------ no sandbox ----------


def test_without_bwrap_grading_warns_once_naming_the_install_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    sandbox.problem.cache_clear()
    try:
        assert progress.choose_sandbox(False, Limits()) is None
        assert progress.choose_sandbox(False, Limits()) is None
    finally:
        sandbox.problem.cache_clear()
    err = capsys.readouterr().err
    assert err.count("WARNING: grading WITHOUT a sandbox") == 2  # once per call: once per run
    assert "bubblewrap (bwrap) is not installed: install it with " in err
    assert "`sudo apt-get install -y bubblewrap`" in err
    assert "pass --no-sandbox to say you mean it" in err


def test_main_warns_once_per_run_and_no_sandbox_is_an_explicit_choice(
    tmp_path, monkeypatch, capsys
):
    seen = []
    monkeypatch.setattr(progress, "grade", lambda *args: seen.append(args[-1]) or [])
    monkeypatch.setattr(progress, "report", lambda rows, learners: None)
    notebook(tmp_path / "me" / LESSON, "x = 1")
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.problem.cache_clear()
    try:
        progress.main([str(tmp_path / "me"), "--lessons", "02"])
        assert capsys.readouterr().err.count("WARNING: grading WITHOUT a sandbox") == 1
        progress.main([str(tmp_path / "me"), "--lessons", "02", "--no-sandbox"])
        err = capsys.readouterr().err
    finally:
        sandbox.problem.cache_clear()
    assert "WARNING" not in err
    assert "note: --no-sandbox: every notebook runs as your user" in err
    assert seen == [None, None]


def problem_now() -> str | None:
    """sandbox.problem() asked afresh (it is cached per process), the cache left empty."""
    sandbox.problem.cache_clear()
    try:
        return sandbox.problem()
    finally:
        sandbox.problem.cache_clear()


def test_a_bwrap_that_cannot_make_namespaces_is_named(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    said = problem_now()
    assert said.startswith("bwrap is installed but cannot make a sandbox (bwrap: No permissions")
    assert "user namespaces are disabled here" in said


def test_not_linux_is_named(monkeypatch):
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    said = problem_now()
    assert said.startswith("this is not Linux (darwin)")


def test_limit_options_reach_the_sandbox_and_must_be_positive(tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(progress, "grade", lambda *args: seen.append(args[-1]) or [])
    monkeypatch.setattr(progress, "report", lambda rows, learners: None)
    monkeypatch.setattr(progress, "sandbox_problem", lambda: None)
    notebook(tmp_path / "me" / LESSON, "x = 1")
    progress.main([str(tmp_path / "me"), "--memory-mb", "3000", "--processes", "9"])
    assert seen == [Limits(memory_mb=3000, processes=9)]
    assert progress.main([str(tmp_path / "me"), "--disk-mb", "0"]) == 2
    assert "error: --disk-mb expects 1 or more, got 0" in capsys.readouterr().err


def test_a_bwrap_too_old_for_the_sandbox_is_named(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"  # makes namespaces, but knows no --size (bubblewrap before 0.7)
    fake.write_text(
        '#!/bin/sh\ncase "$*" in *--size*) echo "bwrap: Unknown option --size" >&2; exit 1;; '
        "esac\nexit 0\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    said = problem_now()
    assert said == (
        "this bwrap lacks an option the sandbox uses (bwrap: Unknown option --size): install a "
        "newer bubblewrap (0.7 or later)"
    )


def test_the_kernel_is_started_by_a_path_the_sandbox_shows(tmp_path, monkeypatch):
    """A .venv reached through a symbolic link (a copy of the course that links the
    instructor's environment) is bound under its real path only: the kernel's interpreter
    must be named through that path, or the kernel dies before it starts."""
    real = tmp_path / "real-venv"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "python").touch()
    link = tmp_path / "course-copy" / ".venv"
    link.parent.mkdir()
    link.symlink_to(real, target_is_directory=True)
    monkeypatch.setattr(sandbox.sys, "prefix", str(link))
    monkeypatch.setattr(sandbox.sys, "executable", str(link / "bin" / "python"))
    assert sandbox._python() == str(real.resolve() / "bin" / "python")
    monkeypatch.setattr(sandbox.sys, "executable", "/usr/bin/python3")  # outside the prefix
    assert sandbox._python() == "/usr/bin/python3"
