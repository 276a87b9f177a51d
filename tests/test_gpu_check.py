"""tools/gpu_check.py, the GPU check prepared for a session with a GPU, run here as its dry
run on the CPU: what it reports must be true of what it ran, so that its one call on a
GPU machine is not wasted on a broken script."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_resume_part_finds_a_resumed_cpu_run_equal_to_an_uninterrupted_one(
    gpu_check, tmp_path, capsys
):
    gpu_check.main(["--device", "cpu", "--quick", "--parts", "resume", "--out", str(tmp_path)])
    resume = json.loads((tmp_path / "results.json").read_text())["resume"]
    assert resume["whole"] and resume["again"] and resume["resumed"]
    # on a CPU, resuming is exact (tests/test_train.py proves it another way)
    exact = {"same_step_epoch_position": True, "loss_difference": 0.0, "weight_difference": 0.0}
    assert resume["resumed_vs_whole"] == exact
    assert resume["again_vs_whole"] == exact
    assert resume["gpu_checkpoint_resumed_on_cpu"] is True
    log = (tmp_path / "log.md").read_text()
    assert log.count("-m course.train") == 5 and "--resume" in log and "exit 0" in log
    assert json.loads(capsys.readouterr().out)["resume"] == resume  # printed at the end too


def test_a_run_that_differs_is_measured_not_hidden(gpu_check):
    assert gpu_check.largest_difference([1.0, 2.0, 3.0], [1.0, 2.5, 3.0]) == 0.5
    assert gpu_check.largest_difference([1.0, 2.0], [1.0, 2.0, 3.0]) is None  # not the same steps


def test_a_command_past_its_time_is_stopped_and_recorded(gpu_check, tmp_path):
    check = gpu_check.Check(tmp_path, budget=60, least=1)
    status, _ = check.run([sys.executable, "-c", "import time; time.sleep(30)"], limit=2)
    assert status == 124
    assert "exit 124" in (tmp_path / "log.md").read_text()


def test_a_spent_budget_skips_the_rest_and_says_so(gpu_check, tmp_path):
    check = gpu_check.Check(tmp_path, budget=5)
    status, output = check.run([sys.executable, "-c", "print('ran')"], limit=60)
    assert (status, output) == (124, "")
    assert "skipped (budget spent)" in (tmp_path / "log.md").read_text()
