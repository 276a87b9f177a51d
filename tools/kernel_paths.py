"""Do the kernel settings of `make test-portable` change how this CPU rounds? Say which ops.

`make test-portable` runs the solution notebooks again under ATEN_CPU_CAPABILITY,
MKL_ENABLE_INSTRUCTIONS and ONEDNN_MAX_CPU_ISA, to catch a printed output that depends on
the CPU's rounding before another machine does. That proves something only if those settings
reach a different kernel here. This script computes a few float32 ops that the lessons use
(matmul, a Linear layer, softmax, exp, layer norm, a sum, a convolution) once with the
settings it was started with and once without them, each in a fresh process (torch reads
them when it loads), and prints, op by op, whether the bits changed:

    ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 python tools/kernel_paths.py

With none of the settings in the environment, or none that changes any op on this CPU (an
old CPU whose best kernels are the scalar ones), it warns and exits 0: the second path then
repeats the first. It never fails a run for that; nbval is what fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

SETTINGS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")


def fingerprints() -> dict[str, str]:
    """A short hash of the bits of each op's result, and the capability torch chose."""
    import torch

    def bits(tensor: torch.Tensor) -> str:
        return hashlib.sha1(tensor.detach().contiguous().numpy().tobytes()).hexdigest()[:12]

    torch.manual_seed(0)
    a, b = torch.randn(64, 300), torch.randn(300, 70)
    x = torch.randn(8, 50, 128)  # (B, T, d_model)
    linear = torch.nn.Linear(128, 128)
    conv = torch.nn.Conv1d(16, 32, 5)
    signal = torch.randn(4, 16, 100)
    with torch.no_grad():
        ops = {
            "matmul (MKL)": bits(a @ b),
            "Linear (MKL)": bits(linear(x)),
            "batched matmul (MKL)": bits(x @ x.transpose(1, 2)),
            "softmax (torch)": bits(x.softmax(dim=-1)),
            "exp (torch)": bits(x.exp()),
            "layer norm (torch)": bits(torch.nn.functional.layer_norm(x, (128,))),
            "sum (torch)": bits(x.sum(dim=-1)),
            "Conv1d (oneDNN)": bits(conv(signal)),
        }
    return {"capability": torch.backends.cpu.get_cpu_capability(), **ops}


def _run(env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, __file__, "--print"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> int:
    if sys.argv[1:] == ["--print"]:
        print(json.dumps(fingerprints()))
        return 0
    chosen = {name: os.environ[name] for name in SETTINGS if name in os.environ}
    if not chosen:
        print(f"kernel_paths: none of {', '.join(SETTINGS)} is set: nothing to compare.")
        return 0
    native_env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    native, second = _run(native_env), _run(dict(os.environ))
    said = " ".join(f"{k}={v}" for k, v in chosen.items())
    print(f"kernel_paths: {said} against this CPU's own kernels")
    print(f"  torch's CPU capability: {native['capability']} -> {second['capability']}")
    changed = [op for op in native if op != "capability" and native[op] != second[op]]
    for op in native:
        if op != "capability":
            print(f"  {op:<22} {'rounds differently' if op in changed else 'same bits'}")
    if not changed:
        print(
            "WARNING: these settings change no op on this CPU: the second path repeats the "
            "first, and a cell that depends on the CPU's rounding may pass here and fail on "
            "another machine."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
