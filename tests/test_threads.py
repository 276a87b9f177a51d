"""The thread policy (course.utils.course_threads): one CPU thread unless $COURSE_THREADS or
$OMP_NUM_THREADS says otherwise, applied by `import course`, by every checker (one thread,
the caller's count restored) and by course.train (its `threads` setting, 0 for the policy).
"""

import os
import subprocess
import sys

import pytest
import torch

from course import check, masking
from course.utils import THREADS_VARIABLES, course_threads, use_threads
from tests.test_train import TINY, _run, _train


@pytest.fixture
def no_thread_variables(monkeypatch):
    for variable in THREADS_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_one_thread_unless_a_variable_says_otherwise(no_thread_variables):
    assert course_threads() == 1
    no_thread_variables.setenv("OMP_NUM_THREADS", "2")
    assert course_threads() == 2
    no_thread_variables.setenv("COURSE_THREADS", " 3 ")  # the course's own variable first
    assert course_threads() == 3
    no_thread_variables.setenv("COURSE_THREADS", "")  # set but empty: as if unset
    assert course_threads() == 2
    no_thread_variables.setenv("COURSE_THREADS", "1")  # make test's own setting, as OMP's
    assert course_threads() == 1


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
@pytest.mark.parametrize("variable", THREADS_VARIABLES)
def test_a_bad_thread_count_names_the_variable_and_the_value(no_thread_variables, variable,
                                                             value):  # fmt: skip
    no_thread_variables.setenv(variable, value)
    with pytest.raises(ValueError) as error:
        course_threads()
    assert str(error.value) == (
        f"{variable} must be a whole number of threads, at least 1, got {value!r}"
    )


@pytest.mark.parametrize(
    ("variables", "threads"),
    [({}, 1), ({"OMP_NUM_THREADS": "2"}, 2), ({"COURSE_THREADS": "3", "OMP_NUM_THREADS": "2"}, 3)],
)
def test_importing_the_course_applies_the_policy(variables, threads):
    """A fresh interpreter, as a notebook's kernel or python -m course.train starts."""
    env = {k: v for k, v in os.environ.items() if k not in THREADS_VARIABLES}
    env.update(variables)
    shown = subprocess.run(
        [sys.executable, "-c", "import course, torch; print(torch.get_num_threads())"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown.strip() == str(threads)


def test_use_threads_restores_the_count_even_when_the_block_raises(restore_threads):
    torch.set_num_threads(3)
    with use_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 3
    with pytest.raises(KeyError), use_threads(2):
        assert torch.get_num_threads() == 2
        raise KeyError("inside")
    assert torch.get_num_threads() == 3


@pytest.mark.parametrize("threads", [0, -1, True, 1.0, "2", None])
def test_use_threads_refuses_what_is_not_a_count(threads):
    before = torch.get_num_threads()
    with pytest.raises(ValueError) as error:
        with use_threads(threads):
            pass
    assert str(error.value) == f"threads must be an int, at least 1, got {threads!r}"
    assert torch.get_num_threads() == before


def test_every_checker_runs_on_one_thread_and_restores_the_count(restore_threads, capsys):
    seen = []

    def causal_mask(T):  # correct, and it writes down the threads it ran on
        seen.append(torch.get_num_threads())
        return masking.causal_mask(T)

    torch.set_num_threads(3)
    assert check.causal_mask(causal_mask)
    assert torch.get_num_threads() == 3
    assert seen and set(seen) == {1}
    assert "✅ causal_mask: passed" in capsys.readouterr().out


def test_a_failing_checker_restores_the_count_too(restore_threads, capsys):
    def causal_mask(T):
        return ~masking.causal_mask(T)  # the mask the wrong way round

    torch.set_num_threads(3)
    assert not check.causal_mask(causal_mask)
    assert torch.get_num_threads() == 3
    assert "❌ causal_mask" in capsys.readouterr().out


def test_a_run_trains_on_the_policy_and_restores_the_count(capsys, tmp_path, restore_threads,
                                                           no_thread_variables):  # fmt: skip
    torch.set_num_threads(3)
    assert _train(capsys, tmp_path / "a", 2)["threads"] == 1  # the policy: one thread
    assert torch.get_num_threads() == 3
    no_thread_variables.setenv("COURSE_THREADS", "2")
    assert _train(capsys, tmp_path / "b", 2)["threads"] == 2
    assert _train(capsys, tmp_path / "c", 2, "--set", "threads=1")["threads"] == 1  # the setting
    assert torch.get_num_threads() == 3


def test_a_negative_threads_setting_is_a_usage_error(capsys, tmp_path):
    status, _, _, err = _run(capsys, "--task", "reverse", "--steps", "2", "--out",
                             str(tmp_path), *TINY, "--set", "threads=-1")  # fmt: skip
    assert status == 2
    assert "threads must be an int, at least 0 (0: the course's), got -1" in err
    assert not (tmp_path / "checkpoint.pt").exists()


def test_a_run_resumes_on_another_thread_count(capsys, tmp_path, restore_threads):
    _train(capsys, tmp_path, 4, "--set", "threads=1")
    resumed = _train(capsys, tmp_path, 8, "--resume", "--set", "threads=2")
    assert resumed["steps"] == 8 and resumed["threads"] == 2


def test_every_task_follows_the_policy_unless_told():
    """No task keeps a thread count of its own (fra-eng and fra-eng-full kept two until
    their results were measured again on one): COURSE_THREADS or --set threads=N decide."""
    from course.train import CONFIGS

    assert {task: c["threads"] for task, c in CONFIGS.items() if c["threads"]} == {}
