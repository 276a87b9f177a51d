"""Which torch build `make install` installs, and from which index: the Makefile asks this.

    python tools/torch_index.py [--torch cpu|cuda] [--index URL] [--timeout SECONDS]

It prints the extra index to hand pip (`--extra-index-url`) on stdout, or nothing, and one line
saying which build and why on stderr. PyPI's Linux wheel of torch is the CUDA build (several GB
with NVIDIA's libraries); the course runs on a CPU. So on Linux, when `nvidia-smi -L` lists no
NVIDIA GPU and the learner has set neither PIP_EXTRA_INDEX_URL nor PIP_INDEX_URL, the answer is
PyTorch's CPU index (pip then takes `torch==2.13.0+cpu`, which satisfies the pin and sorts above
PyPI's 2.13.0). `--torch cpu` or `--torch cuda` (the Makefile's TORCH=) chooses either build
whatever the machine. The CPU index is asked first, with a time limit: if it does not answer,
pip never sees it (pip would retry it for minutes) and installs PyPI's torch, which runs on a
CPU too. On macOS and Windows PyPI's wheels have no CUDA: nothing is printed and nothing changes.
An invalid --torch exits 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import NamedTuple

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TIMEOUT = 5.0  # seconds for the CPU index to answer, name lookup included
REDO = "make clean-venv install TORCH={}"  # how to install the other build afterwards


class Decision(NamedTuple):
    index: str | None  # the extra index for pip, or None: pip's own indexes only
    message: str | None  # one line for the learner, or None: say nothing


def nvidia_gpu(timeout: float = 10.0) -> bool:
    """Does `nvidia-smi -L` (installed with NVIDIA's driver) list a GPU? Found on PATH."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and "GPU" in done.stdout


def unreachable(
    index: str, timeout: float = TIMEOUT, opener: Callable = urllib.request.urlopen
) -> str | None:
    """Why `index` cannot serve torch, or None when its torch page answers within `timeout`.

    The request runs in a thread that is given up after `timeout` (plus a second): urllib's
    own timeout does not cover the name lookup. Only the response's headers are read."""
    answer: list[str | None] = []

    def ask() -> None:
        try:
            with opener(index.rstrip("/") + "/torch/", timeout=timeout):
                answer.append(None)
        except urllib.error.HTTPError as e:  # an answer, but not a page: 404, 403, 503
            answer.append(f"HTTP {e.code}")
        except Exception as e:  # URLError, timeouts, TLS, a bad URL
            answer.append(str(getattr(e, "reason", None) or e))

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout + 1)
    return answer[0] if answer else f"no answer within {timeout:g} s"


def _names_index(setting: str, index: str) -> bool:
    return index.rstrip("/") in (url.rstrip("/") for url in setting.split())


def decide(
    platform: str,
    env: Mapping[str, str],
    torch: str = "",
    index: str = CPU_INDEX,
    gpu: Callable[[], bool] = nvidia_gpu,
    probe: Callable[[str], str | None] = unreachable,
) -> Decision:
    """The extra index and the message for pip's `install -r requirements.txt`.

    `platform` is sys.platform, `env` the environment (PIP_EXTRA_INDEX_URL, PIP_INDEX_URL),
    `torch` the learner's TORCH= ("", "cpu" or "cuda"); `gpu` and `probe` are asked only
    when the answer depends on them."""
    torch = torch.strip().lower()
    if torch not in ("", "cpu", "cuda"):
        raise ValueError(f"TORCH={torch}: choose TORCH=cpu or TORCH=cuda, or leave TORCH unset.")
    if not platform.startswith("linux"):
        if not torch:
            return Decision(None, None)
        name = {"darwin": "macOS", "win32": "Windows"}.get(platform, platform)
        return Decision(
            None,
            f"torch: PyPI's build for {name}, which has no CUDA (TORCH={torch} changes nothing).",
        )
    own = {k: env[k] for k in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL") if env.get(k, "").strip()}
    if any(_names_index(setting, index) for setting in own.values()):
        names = " and ".join(own)
        if torch == "cuda":
            return Decision(
                None, f"torch: the CPU build, despite TORCH=cuda: your {names} names {index}."
            )
        return Decision(None, f"torch: the CPU build, from {index}, which your {names} names.")
    if torch == "cuda":
        return Decision(None, "torch: the CUDA build from PyPI, as TORCH=cuda asks.")
    if own and not torch:
        names = " and ".join(own)
        return Decision(
            None,
            f"torch: from the indexes your {names} names, left as they are "
            f"(TORCH=cpu adds PyTorch's CPU index, {index}).",
        )
    if not torch and gpu():
        return Decision(
            None,
            "torch: the CUDA build from PyPI, as `nvidia-smi -L` lists an NVIDIA GPU here "
            f"(the CPU build, a few hundred MB: {REDO.format('cpu')}).",
        )
    wanted = "TORCH=cpu asks" if torch else "`nvidia-smi -L` lists no NVIDIA GPU here"
    trouble = probe(index)
    if trouble is None:
        other = "" if torch else f"; PyPI's CUDA build: {REDO.format('cuda')}"
        return Decision(index, f"torch: the CPU build from {index}, as {wanted}{other}.")
    return Decision(
        None,
        f"torch: {wanted}, but {index} did not answer ({trouble}): pip installs PyPI's torch, "
        "the CUDA build (several GB; it runs on the CPU too).",
    )


def main(
    argv: list[str] | None = None,
    platform: str = sys.platform,
    env: Mapping[str, str] = os.environ,
    gpu: Callable[[], bool] = nvidia_gpu,
    probe: Callable[..., str | None] = unreachable,
) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch", default="", help="cpu or cuda: that build; empty: decide")
    parser.add_argument("--index", default=CPU_INDEX, help="PyTorch's CPU index")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds for the index")
    args = parser.parse_args(argv)
    try:
        decision = decide(
            platform, env, args.torch, args.index, gpu, lambda url: probe(url, args.timeout)
        )
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if decision.message:
        print(decision.message, file=sys.stderr)
    if decision.index:
        print(decision.index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
