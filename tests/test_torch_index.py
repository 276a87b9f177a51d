"""tools/torch_index.py: which torch build `make install` installs, and from which index.

The decision is tested with stand-ins for the GPU and for the CPU index (no network); the
GPU check with a stand-in `nvidia-smi` on PATH; and the Makefile's use of it through
`make torch-index` (a local HTTP server or a closed port as the CPU index) and `make -n install`.
"""

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
from pathlib import Path

import pytest
from _tools import load

ROOT = Path(__file__).resolve().parents[1]

ti = load("torch_index")

CPU = ti.CPU_INDEX


def never(*args):
    raise AssertionError("asked, though the answer does not depend on it")


def decide(platform="linux", env=None, torch="", gpu=False, probe=None):
    """ti.decide with a GPU (or none) and a CPU index that answers (probe None) or not."""
    return ti.decide(
        platform,
        {} if env is None else env,
        torch,
        gpu=gpu if callable(gpu) else (lambda: gpu),
        probe=probe or (lambda url: None),
    )


# --- the decision -------------------------------------------------------------------------


def test_linux_without_a_gpu_gets_the_cpu_index():
    index, message = decide()
    assert index == CPU
    assert message.startswith(f"torch: the CPU build from {CPU}")
    assert "no NVIDIA GPU" in message and "TORCH=cuda" in message  # why, and the other choice


def test_linux_with_a_gpu_gets_pypis_cuda_build_without_asking_the_index():
    index, message = decide(gpu=True, probe=never)
    assert index is None
    assert "CUDA build from PyPI" in message and "NVIDIA GPU" in message
    assert "TORCH=cpu" in message


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_macos_and_windows_change_nothing(platform):
    assert decide(platform, gpu=never, probe=never) == (None, None)
    env = {"PIP_EXTRA_INDEX_URL": "https://example.org/simple"}
    assert decide(platform, env, gpu=never, probe=never) == (None, None)


@pytest.mark.parametrize("platform, name", [("darwin", "macOS"), ("win32", "Windows")])
@pytest.mark.parametrize("torch", ["cpu", "cuda"])
def test_torch_on_macos_or_windows_says_it_changes_nothing(platform, name, torch):
    index, message = decide(platform, torch=torch, gpu=never, probe=never)
    assert index is None
    assert name in message and f"TORCH={torch} changes nothing" in message


@pytest.mark.parametrize("variable", ["PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"])
def test_the_learners_own_index_is_left_alone(variable):
    env = {variable: "https://mirror.example.org/simple"}
    before = dict(env)
    index, message = decide(env=env, gpu=never, probe=never)
    assert index is None  # nothing added to pip's command
    assert env == before
    assert variable in message and "left as they are" in message and "TORCH=cpu" in message


def test_blank_index_variables_count_as_unset():
    env = {"PIP_EXTRA_INDEX_URL": " ", "PIP_INDEX_URL": ""}
    assert decide(env=env)[0] == CPU


@pytest.mark.parametrize("setting", [CPU, CPU + "/", f"https://mirror.example.org/simple {CPU}"])
def test_the_learners_index_naming_the_cpu_index_is_not_added_again(setting):
    for torch in ("", "cpu"):
        index, message = decide(env={"PIP_EXTRA_INDEX_URL": setting}, torch=torch, probe=never)
        assert index is None
        assert message.startswith("torch: the CPU build") and "PIP_EXTRA_INDEX_URL" in message


def test_torch_cuda_says_when_the_learners_index_makes_it_the_cpu_build():
    index, message = decide(env={"PIP_EXTRA_INDEX_URL": CPU}, torch="cuda", probe=never)
    assert index is None
    assert "CPU build, despite TORCH=cuda" in message


@pytest.mark.parametrize("gpu", [False, True])
def test_torch_cpu_gets_the_cpu_index_with_or_without_a_gpu(gpu):
    index, message = decide(torch="cpu", gpu=gpu)
    assert index == CPU
    assert "TORCH=cpu asks" in message


def test_torch_cpu_adds_the_cpu_index_to_the_learners_own():
    env = {"PIP_INDEX_URL": "https://mirror.example.org/simple"}
    assert decide(env=env, torch="cpu")[0] == CPU


@pytest.mark.parametrize("torch", ["cuda", "CUDA", " cuda "])
@pytest.mark.parametrize("gpu", [False, True])
def test_torch_cuda_gets_pypis_build_with_or_without_a_gpu(torch, gpu):
    index, message = decide(torch=torch, gpu=lambda: gpu, probe=never)
    assert index is None
    assert message == "torch: the CUDA build from PyPI, as TORCH=cuda asks."


@pytest.mark.parametrize("torch", ["gpu", "cu130", "yes"])
def test_another_torch_value_is_refused(torch):
    with pytest.raises(ValueError, match=f"TORCH={torch}: choose TORCH=cpu or TORCH=cuda"):
        decide(torch=torch, gpu=never, probe=never)


@pytest.mark.parametrize("torch", ["", "cpu"])
def test_an_unreachable_cpu_index_is_not_handed_to_pip(torch):
    asked = []

    def probe(url):
        asked.append(url)
        return "[Errno -2] Name or service not known"

    index, message = decide(torch=torch, probe=probe)
    assert index is None and asked == [CPU]
    assert "\n" not in message
    assert f"{CPU} did not answer ([Errno -2] Name or service not known)" in message
    assert "PyPI's torch, the CUDA build" in message


# --- asking the CPU index -----------------------------------------------------------------


class Answer:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_probe_asks_for_the_torch_page_with_the_timeout():
    calls = []

    def opener(url, timeout):
        calls.append((url, timeout))
        return Answer()

    assert ti.unreachable("https://example.org/whl/cpu/", timeout=3, opener=opener) is None
    assert calls == [("https://example.org/whl/cpu/torch/", 3)]


@pytest.mark.parametrize(
    "error, reason",
    [
        (urllib.error.URLError(OSError(-2, "Name or service not known")), "Name or service"),
        (urllib.error.HTTPError("u", 403, "Forbidden", {}, None), "HTTP 403"),
        (TimeoutError("timed out"), "timed out"),
        (ConnectionRefusedError(111, "Connection refused"), "Connection refused"),
    ],
)
def test_the_probe_says_why_the_index_did_not_answer(error, reason):
    def opener(url, timeout):
        raise error

    assert reason in ti.unreachable(CPU, timeout=1, opener=opener)


def test_the_probe_gives_up_on_an_index_that_hangs():
    release = threading.Event()

    def opener(url, timeout):  # a name lookup that ignores urllib's timeout
        release.wait(30)
        return Answer()

    start = time.monotonic()
    try:
        assert ti.unreachable(CPU, timeout=0.2, opener=opener) == "no answer within 0.2 s"
    finally:
        release.set()
    assert time.monotonic() - start < 5


def test_main_prints_the_index_on_stdout_and_the_reason_on_stderr(capsys):
    asked = []

    def probe(url, timeout):
        asked.append((url, timeout))
        return None

    status = ti.main(["--timeout", "2"], "linux", {}, lambda: False, probe)
    out, err = capsys.readouterr()
    assert status == 0 and asked == [(CPU, 2.0)]
    assert out == CPU + "\n"
    assert err.startswith("torch: the CPU build") and err.count("\n") == 1


def test_main_prints_nothing_on_stdout_without_an_index(capsys):
    assert ti.main(["--torch", "cuda"], "linux", {}, never, never) == 0
    out, err = capsys.readouterr()
    assert out == "" and "TORCH=cuda" in err
    assert ti.main([], "darwin", {}, never, never) == 0
    assert capsys.readouterr() == ("", "")


def test_main_refuses_another_torch_with_status_2(capsys):
    assert ti.main(["--torch", "rocm"], "linux", {}, never, never) == 2
    out, err = capsys.readouterr()
    assert out == "" and "TORCH=rocm: choose TORCH=cpu or TORCH=cuda" in err


# --- the GPU: `nvidia-smi -L` on PATH -------------------------------------------------------

GPU_LINE = "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"


def stand_in(folder: Path, status: int, output: str) -> Path:
    """A stand-in `nvidia-smi` in `folder` that prints `output` and exits with `status`."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\necho '{output}'\nexit {status}\n")
    exe.chmod(0o755)
    return folder


posix_only = pytest.mark.skipif(os.name != "posix", reason="the stand-in is a shell script")


@posix_only
@pytest.mark.parametrize(
    "status, output, found",
    [
        (0, GPU_LINE, True),
        (6, "No devices were found", False),
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", False),
        (0, "", False),
    ],
)
def test_nvidia_smi_decides_whether_there_is_a_gpu(tmp_path, monkeypatch, status, output, found):
    monkeypatch.setenv("PATH", str(stand_in(tmp_path / "bin", status, output)))
    assert ti.nvidia_gpu() is found


def test_no_nvidia_smi_on_path_means_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ti.nvidia_gpu() is False


# --- the Makefile uses it -----------------------------------------------------------------

needs_make = pytest.mark.skipif(
    shutil.which("make") is None or os.name != "posix", reason="needs make and a POSIX shell"
)


def make(tmp_path, *args, gpu=False, env=None):
    """`make -s ARGS` in the repository, with a fresh VENV (so it runs on this Python), a
    stand-in nvidia-smi that lists a GPU or none, and none of the learner's pip settings."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "TORCH", "MAKEFLAGS", "MAKELEVEL")
        and not k.lower().endswith("_proxy")
    }
    bin_ = stand_in(tmp_path / "bin", 0 if gpu else 6, GPU_LINE if gpu else "No devices were found")
    clean["PATH"] = f"{bin_}{os.pathsep}{clean.get('PATH', '')}"
    clean.update(env or {})
    venv = f"VENV={tmp_path / 'venv'}"
    command = ["make", "-s", "-C", str(ROOT), *args, venv, f"PYTHON={sys.executable}"]
    return subprocess.run(command, env=clean, capture_output=True, text=True, timeout=60)


class Index(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self):
        Index.asked.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html></html>")

    def log_message(self, *args):
        pass


@pytest.fixture
def local_index():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Index.asked = []
    yield f"http://127.0.0.1:{server.server_port}/whl/cpu"
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/whl/cpu"


@needs_make
def test_make_torch_index_picks_the_cpu_index_without_a_gpu(tmp_path, local_index):
    done = make(tmp_path, "torch-index", f"TORCH_CPU_INDEX={local_index}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pip's extra index for torch: {local_index}\n"
    assert done.stderr.startswith(f"torch: the CPU build from {local_index}, as `nvidia-smi -L`")
    assert Index.asked == ["/whl/cpu/torch/"]


@needs_make
def test_make_torch_index_leaves_an_unreachable_index_out(tmp_path, closed_port):
    done = make(tmp_path, "torch-index", f"TORCH_CPU_INDEX={closed_port}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pip's extra index for torch: none\n"
    assert f"{closed_port} did not answer" in done.stderr and done.stderr.count("\n") == 1


@needs_make
def test_make_torch_index_with_a_gpu_takes_pypis_build(tmp_path, closed_port):
    done = make(tmp_path, "torch-index", f"TORCH_CPU_INDEX={closed_port}", gpu=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pip's extra index for torch: none\n"
    assert done.stderr.startswith("torch: the CUDA build from PyPI, as `nvidia-smi -L` lists")


@needs_make
def test_make_passes_torch_and_keeps_the_learners_index(tmp_path, local_index):
    done = make(tmp_path, "torch-index", "TORCH=cpu", f"TORCH_CPU_INDEX={local_index}", gpu=True)
    assert done.stdout == f"pip's extra index for torch: {local_index}\n", done.stderr
    done = make(tmp_path, "torch-index", "TORCH=cuda", f"TORCH_CPU_INDEX={local_index}")
    assert done.stdout == "pip's extra index for torch: none\n", done.stderr
    own = {"PIP_EXTRA_INDEX_URL": "https://mirror.example.org/simple"}
    done = make(tmp_path, "torch-index", f"TORCH_CPU_INDEX={local_index}", env=own)
    assert done.stdout == "pip's extra index for torch: none\n", done.stderr
    assert "PIP_EXTRA_INDEX_URL" in done.stderr
    done = make(tmp_path, "torch-index", "TORCH=gpu")
    assert done.returncode != 0 and "TORCH=gpu: choose TORCH=cpu or TORCH=cuda" in done.stderr
    assert Index.asked == ["/whl/cpu/torch/"]  # only TORCH=cpu asked it


@needs_make
def test_make_install_hands_the_decision_to_pip(tmp_path):
    done = make(tmp_path, "-n", "install", "TORCH=cpu", "TORCH_CPU_INDEX=http://127.0.0.1:9/x")
    assert done.returncode == 0, done.stderr
    python = tmp_path / "venv" / "bin" / "python"
    call = f'idx=$({python} tools/torch_index.py --torch "cpu" --index "http://127.0.0.1:9/x")'
    assert call in done.stdout
    after = done.stdout[done.stdout.index(call) :]
    assert "pip install --quiet -r requirements.txt${idx:+ --extra-index-url $idx}" in after
    assert not (tmp_path / "venv").exists()  # -n: nothing ran
