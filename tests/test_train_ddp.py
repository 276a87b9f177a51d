"""course.train in more than one process: two CPU processes under torchrun (gloo) take the
same steps as one process with the same global batch, only rank 0 prints and writes, and
a checkpoint of one process resumes in two. How a batch is cut between the ranks, and the
checks made before any process group starts, are tested without starting processes.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import distributed as dist

from course.data import PAD_ID
from course.train import Processes, main

ROOT = Path(__file__).resolve().parents[1]
# The tiny model of test_train.py, without dropout: with dropout each rank draws its own
# masks, and two processes could only match one in expectation. batch_size=63 splits into
# 32 + 31 sentences, so the ranks hold different numbers of target tokens: the case where
# averaging each rank's own mean would give another update than one process.
TINY = ["--task", "reverse", "--device", "cpu", "--set", "d_model=16", "--set", "n_heads=2",
        "--set", "n_layers=1", "--set", "d_ff=32", "--set", "warmup=4", "--set", "dropout=0",
        "--set", "batch_size=63", "--set", "checkpoint_every=4",
        "--set", "eval_batch_size=2048"]  # fmt: skip
STEPS = 10
# Float32 sums taken in another order (two halves of the batch, then gloo's all_reduce)
# differ in the last bits; measured: 1.7e-7 relative at most over these 10 steps.
RELATIVE = 1e-5
# What torchrun tells its processes: not inherited from whatever runs the tests.
TORCHRUN_SETS = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT"}  # fmt: skip


def _loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
            server.bind(("127.0.0.1", 0))
        return True
    except OSError:
        return False


needs_processes = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available() and _loopback_works()),
    reason="needs torch.distributed with gloo and a loopback network interface "
    "(torchrun's processes meet at 127.0.0.1)",
)


def _torchrun(out: Path, *extra: str) -> subprocess.CompletedProcess:
    """python -m course.train in two processes. --standalone: torchrun starts its own
    rendezvous on localhost, on a free port it picks (so parallel test runs do not clash)."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_SETS}
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "-m", "course.train",
               *TINY, "--out", str(out), *extra]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _losses(out: Path) -> list[float]:
    return torch.load(out / "checkpoint.pt", weights_only=True)["losses"]


def _relative_gap(got: list[float], want: list[float]) -> float:
    assert len(got) == len(want)
    return max(abs(g - w) / abs(w) for g, w in zip(got, want, strict=True))


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> Path:
    """The reference: one process, the same global batches, one thread."""
    out = tmp_path_factory.mktemp("one")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main([*TINY, "--steps", str(STEPS), "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


@needs_processes
def test_two_processes_take_the_steps_of_one(one_process, tmp_path):
    result = _torchrun(tmp_path, "--steps", str(STEPS))
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("reverse: exact match")  # rank 0's alone
    assert sum(line.startswith("{") for line in lines) == 1
    metrics = json.loads(lines[-1])
    assert metrics["processes"] == 2 and metrics["steps"] == STEPS and metrics["device"] == "cpu"
    # one checkpoint, config, metrics and plot, and no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint.pt", "config.json", "loss.png", "metrics.json"]  # fmt: skip
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert len(checkpoint["rng_ranks"]) == 2 and checkpoint["step"] == STEPS

    assert _relative_gap(_losses(tmp_path), _losses(one_process)) < RELATIVE
    # The weights agree too, but for the keys' biases: they add q . b_k to every score of
    # a query, which the softmax ignores, so their true gradient is 0 and what backward
    # gives is rounding noise, which Adam divides by its own size into steps of +-lr.
    # They change no output (the losses above), and differ between 1 and 2 processes.
    reference = torch.load(one_process / "checkpoint.pt", weights_only=True)["model"]
    for name, tensor in checkpoint["model"].items():
        if not name.endswith("w_k.bias"):
            torch.testing.assert_close(tensor, reference[name], rtol=1e-4, atol=1e-5, msg=name)


@needs_processes
def test_two_processes_resume_a_checkpoint_of_one(one_process, tmp_path, capsys):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main([*TINY, "--steps", "4", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    capsys.readouterr()
    result = _torchrun(tmp_path, "--steps", str(STEPS), "--resume")
    assert result.stderr.count(f"resuming {tmp_path / 'checkpoint.pt'} at step 4") == 1
    losses, reference = _losses(tmp_path), _losses(one_process)
    assert losses[:4] == reference[:4]  # the first process's steps, kept
    assert _relative_gap(losses[4:], reference[4:]) < RELATIVE


# ------------------------------------------------------- without starting processes --


def _batch(rows: int, width: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src = torch.arange(rows * width).reshape(rows, width) + 10  # (B, T_src)
    tgt_in = src[:, :4] + 100  # (B, T_tgt)
    return src, tgt_in, tgt_in + 1


def test_one_process_takes_the_whole_batch():
    batch = _batch(7)
    assert Processes().shard(batch) is batch


def test_the_ranks_split_a_batch_into_contiguous_rows():
    src, tgt_in, tgt_out = _batch(7)
    shards = [Processes(rank=r, local_rank=r, world_size=3).shard((src, tgt_in, tgt_out))
              for r in range(3)]  # fmt: skip
    assert [len(s[0]) for s in shards] == [3, 2, 2]  # 7 rows: the first 7 % 3 ranks get one more
    for i, whole in enumerate((src, tgt_in, tgt_out)):
        assert torch.equal(torch.cat([s[i] for s in shards]), whole)  # every row once, in order


def test_a_rank_without_rows_gets_one_that_counts_for_nothing():
    src, tgt_in, tgt_out = _batch(2)  # an epoch's short last batch: 2 rows, 3 ranks
    empty = Processes(rank=2, local_rank=2, world_size=3).shard((src, tgt_in, tgt_out))
    assert torch.equal(empty[0], src[-1:]) and torch.equal(empty[1], tgt_in[-1:])
    assert empty[2].shape == (1, 4) and (empty[2] == PAD_ID).all()  # every target ignored


def test_the_place_comes_from_torchruns_environment(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert Processes.from_environment() == Processes(0, 0, 1, 1)
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # two machines of four processes
    assert Processes.from_environment() == Processes(5, 1, 8, local_world_size=4)
    assert not Processes.from_environment().main


def test_a_global_batch_smaller_than_the_processes_is_refused(monkeypatch, capsys, tmp_path):
    """Checked before any process group starts: nothing waits, nothing is written."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    status = main(["--task", "reverse", "--set", "batch_size=3", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert "batch_size is the global batch, split across the 4 processes: it must be at " \
           "least 4, got 3" in captured.err  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("RANK", "3")  # another rank stops too, and leaves the message to rank 0
    assert main(["--task", "reverse", "--set", "batch_size=3", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ""
