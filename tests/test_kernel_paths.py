"""tools/kernel_paths.py: does `make test-portable` reach other kernels on this CPU?"""

import os
import subprocess
import sys

from course.authoring import ROOT

SCRIPT = ROOT / "tools" / "kernel_paths.py"
SETTINGS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")


def _run(**settings):
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS} | settings
    return subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, check=True
    ).stdout


def test_without_settings_it_says_there_is_nothing_to_compare():
    assert "is set: nothing to compare" in _run()


def test_torchs_scalar_kernels_are_named_and_every_op_is_judged():
    printed = _run(ATEN_CPU_CAPABILITY="default")
    assert "ATEN_CPU_CAPABILITY=default against this CPU's own kernels" in printed
    assert "-> DEFAULT" in printed  # torch took the setting
    ops = [
        line for line in printed.splitlines() if line.endswith(("rounds differently", "same bits"))
    ]
    assert len(ops) == 8, printed
    # the warning says the second path repeats the first exactly when no op changed
    if any(line.endswith("rounds differently") for line in ops):
        assert "WARNING" not in printed
    else:
        assert "WARNING: these settings change no op on this CPU" in printed
