"""What nbval checks in a learner notebook, beyond running it (tests/conftest.py holds the
fixtures of the test files).

nbval runs each learner notebook in notebooks/ top to bottom, its exercises unfinished (each
answer is a stub that raises NotImplementedError), in `make test`. The notebooks hold no
outputs, so nbval compares nothing there. This hook adds what a learner relies on, in the
same run: every checker cell (`check.name(...)`, or `name_ok = check.name(...)`) prints
"⏳ name: not implemented yet", not a pass and not a crash. (tests/test_pipeline.py used to
run every learner notebook a second time to see it; this reads nbval's own run.)

It also orders and groups the notebooks for pytest-xdist, and lets a lesson's second notebook
reuse the first's training runs (course/memo.py), below.
"""

import os
import re
import shutil
import tempfile

import pytest

from course import memo

MEMO_FOLDER = "COURSE_TEST_SESSION_MEMO"  # the run's folder for course/memo.py

CHECK_CALL = re.compile(r"^(?:\w+ = )?check\.(\w+)\(", re.MULTILINE)


def unfinished_verdicts_missing(source: str, printed: str) -> list[str]:
    """The checkers that `source` calls whose "not implemented yet" line is not in `printed`."""
    return [
        name
        for name in CHECK_CALL.findall(source)
        if f"⏳ {name}: not implemented yet" not in printed
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield  # nbval ran the cell (and raised if it failed)
    if type(item).__name__ == "IPyNbCell" and item.path.parent.name == "notebooks":
        printed = "".join(out.get("text", "") for out in item.test_outputs or [])
        missing = unfinished_verdicts_missing(item.cell.source, printed)
        assert not missing, (
            f"{item.path.name}: with the exercise unfinished, check.{missing[0]} must print "
            f"'⏳ {missing[0]}: not implemented yet'; it printed: {printed!r}"
        )
    return result


LESSON_NOTEBOOK = re.compile(r"^(?:notebooks|solutions)/(\d\d)_[^/:]*\.ipynb::")


def _lesson(nodeid: str) -> str | None:
    """The lesson ("11") of a cell of notebooks/11_*.ipynb or solutions/11_*.ipynb, or None."""
    found = LESSON_NOTEBOOK.match(nodeid)
    return found.group(1) if found else None


# Roughly how many seconds each of the longest units of `make test` takes on a 2-core machine
# (a lesson: both its notebooks; a file: all its tests), from `pytest --durations` (see
# docs/timings.json for the machine). Used only to order the work: a stale number costs time,
# never a result. Everything not named here takes under 20 s.
LONGEST = {
    "lesson 11": 130, "lesson 12": 100, "lesson 09": 90, "lesson 10": 75, "lesson 01": 70,
    "tests/test_sandbox.py": 55, "tests/test_gpu_check.py": 50,
    "tests/test_learner_safe.py": 46, "lesson 03": 40, "lesson 04": 40, "lesson 07": 35,
    "tests/test_site.py": 35, "tests/test_train_ddp.py": 30, "tests/test_pipeline.py": 30,
    "tests/test_progress.py": 25, "tests/test_train_outputs.py": 24, "tests/test_train.py": 22,
    "tests/test_check_assembly_mutation.py": 22,
}  # fmt: skip


def _unit(nodeid: str) -> str:
    """The unit of work `make test` hands to one process: "lesson 11" (both its notebooks) or
    a file's path."""
    lesson = _lesson(nodeid)
    return f"lesson {lesson}" if lesson else nodeid.split("::")[0]


def pytest_collection_modifyitems(items):
    """The longest units first (LONGEST), the rest after them in the order collected.

    `make test` spreads whole units over two processes (pytest-xdist, --dist loadfile), handed
    out in this order as each process frees up (LessonScheduling below keeps it): a long unit
    handed out last would run alone at the end while the other process waits, and the short
    ones at the end fill the gaps. The order of the cells inside a notebook, and of the tests
    inside a file, is kept (a stable sort), and a lesson's learner notebook comes before its
    solution notebook.
    """
    items.sort(key=lambda item: -LONGEST.get(_unit(item.nodeid), 0))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, but a lesson's learner and solution notebooks are one "file": one
    process runs the one, then the other, so that the second's training runs find the first's
    (course/memo.py, `pytest_runtest_setup` below) instead of training in parallel with it."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    # xdist would hand out the files with the most tests first; keep the order above instead
    config.option.loadscopereorder = False

    class LessonScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid) if _lesson(nodeid) else super()._split_scope(nodeid)

    return LessonScheduling(config, log)


def pytest_configure(config):
    """One folder for the whole run (the main process makes it; pytest-xdist's workers
    inherit the variable) where the notebooks' training runs are kept."""
    if not hasattr(config, "workerinput") and MEMO_FOLDER not in os.environ:
        os.environ[MEMO_FOLDER] = tempfile.mkdtemp(prefix="course-training-memo-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(MEMO_FOLDER), True))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """nbval starts a notebook's kernel while its first cell is set up: that kernel, and only
    that kind (never a learner's, never another test's), gets COURSE_TRAINING_MEMO, so that a
    training run the same as one already run in this session takes its end state instead of
    training again (course/memo.py says what "the same" is). Training cells are
    `nbval-ignore-output`; their stderr says "(reused: ...)" when it happens."""
    if type(item).__name__ != "IPyNbCell" or MEMO_FOLDER not in os.environ:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(memo.ENV, os.environ[MEMO_FOLDER])
        return (yield)


# The translated notebooks (solutions/ko/, notebooks/ko/) are the English ones with other prose:
# their code cells equal the English cell for cell (tests/test_translations.py), so nbval's run
# of the English proves them and `make test` does not run them a second time.
collect_ignore = ["solutions/ko", "notebooks/ko"]
