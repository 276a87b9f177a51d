"""What nbval checks in a learner notebook, beyond running it (tests/conftest.py holds the
fixtures of the test files).

nbval runs each learner notebook in notebooks/ top to bottom, its exercises unfinished (each
answer is a stub that raises NotImplementedError), in `make test`. The notebooks hold no
outputs, so nbval compares nothing there. This hook adds what a learner relies on, in the
same run: every checker cell (`check.name(...)`, or `name_ok = check.name(...)`) prints
"⏳ name: not implemented yet", not a pass and not a crash. (tests/test_pipeline.py used to
run every learner notebook a second time to see it; this reads nbval's own run.)
"""

import re

import pytest

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


def pytest_collection_modifyitems(items):
    """The notebooks first, the later lessons (which train longest) first among them.

    `make test` spreads whole files over two processes (pytest-xdist, --dist loadfile), handed
    out in this order as each process frees up: a long notebook handed out last would run
    alone at the end while the other process waits. The order of the cells inside a notebook,
    and of the tests inside a file, is kept (a stable sort on the file alone).
    """

    def weight(item):
        if item.path.suffix != ".ipynb":
            return (1, 0)
        number = item.path.name[:2]
        return (0, -int(number) if number.isdigit() else 0)

    items.sort(key=weight)


# The translated notebooks (solutions/ko/, notebooks/ko/) are the English ones with other prose:
# their code cells equal the English cell for cell (tests/test_translations.py), so nbval's run
# of the English proves them and `make test` does not run them a second time.
collect_ignore = ["solutions/ko", "notebooks/ko"]
