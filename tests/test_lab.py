"""`make lab` serves the course: the server answers and lists the learner notebooks."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from course.authoring import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_serves_the_learner_notebooks():
    port, token = _free_port(), "course-test"
    args = f"--no-browser --port={port} --ServerApp.token={token} --ServerApp.ip=127.0.0.1"
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so the whole make -> jupyter group can be stopped
    )
    url = f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}"
    try:
        deadline, listing = time.monotonic() + 90, None
        while listing is None and time.monotonic() < deadline:
            assert server.poll() is None, server.stdout.read().decode(errors="replace")
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    listing = json.load(reply)
            except OSError:
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 90 s"
        served = {item["name"] for item in listing["content"]}
        expected = {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
        assert expected and expected <= served
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
