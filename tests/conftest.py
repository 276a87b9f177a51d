"""Fixtures the test files share."""

import pytest
import torch


@pytest.fixture
def verdict(capsys):
    """verdict(checker, answer) -> (passed, printed): run a checker as a notebook cell would.

    Every checker prints exactly one verdict line, starting ✅, ⏳ or ❌, and returns a
    Verdict (true or false, shown as nothing in a notebook); `passed` is its bool.
    """
    from course.check._framework import Verdict

    def run(checker, answer):
        result = checker(answer)
        printed = capsys.readouterr().out
        assert printed.count("\n") == 1, f"a checker prints exactly one verdict line: {printed!r}"
        assert printed.startswith(("✅", "⏳", "❌")), printed
        assert isinstance(result, Verdict), type(result)
        assert bool(result) is printed.startswith("✅"), (result, printed)
        return bool(result), printed

    return run


@pytest.fixture
def one_thread():
    """torch on one thread for the test (tiny models: two threads only wait for each other)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory):
    """A data directory holding a generated eng-fra.txt (tests/_tatoeba_sample.py)."""
    from _tatoeba_sample import write_sample

    directory = tmp_path_factory.mktemp("course-data")
    write_sample(directory / "eng-fra.txt")
    return directory


@pytest.fixture(scope="module", autouse=True)
def _no_real_data(sample_data_dir):
    """Every test reads the generated sample, never the real Tatoeba file, never the network
    (module-wide, so that module-scoped fixtures see it too; undone after each module, so
    that the notebooks nbval runs afterwards read the real data)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_DATA_DIR", str(sample_data_dir))
        yield
