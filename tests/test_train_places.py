"""course.train's decisions about devices and ranks, tested without a GPU and without a
second process: what the GPU branches ask of torch (recorded by stand-ins for torch.cuda
and torch.distributed), and what a checkpoint gathers from every rank. The real runs, and
the ranks' slices of a batch, are in test_train_ddp.py (two CPU processes); the NCCL path
itself needs GPUs, which CI never has.
"""

import contextlib
import json

import pytest
import test_train
import torch
from torch import distributed as dist
from torch import nn

import course.train as train
from course.data import PAD_ID
from course.train import (
    Processes,
    UsageError,
    _resolve_device,
    _rng_state,
    _set_rng_state,
    main,
)

CPU = torch.device("cpu")
GPU1 = torch.device("cuda", 1)  # a name only: building a torch.device needs no GPU


@pytest.fixture
def gpus(monkeypatch):
    """Pretend this machine has `count` CUDA GPUs (torch.cuda's answers only)."""

    def pretend(count: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)

    return pretend


# ------------------------------------------------------------------ --device ------


def test_auto_takes_the_gpu_when_there_is_one(gpus):
    gpus(1)
    assert _resolve_device("auto", Processes()) == torch.device("cuda")
    gpus(0)
    assert _resolve_device("auto", Processes()) == CPU


def test_one_process_keeps_the_gpu_it_names(gpus):
    gpus(2)
    assert _resolve_device("cuda:1", Processes()) == GPU1
    assert _resolve_device("cpu", Processes(rank=1, local_rank=1, world_size=2)) == CPU


def test_cuda_without_a_gpu_is_a_usage_error(gpus):
    gpus(0)
    with pytest.raises(UsageError) as error:
        _resolve_device("cuda", Processes())
    assert str(error.value) == "--device cuda: no CUDA GPU is available here (use auto or cpu)"


@pytest.mark.parametrize("name", ["cuda", "auto"])
def test_each_process_takes_the_gpu_of_its_local_rank(gpus, name):
    gpus(4)
    place = Processes(rank=5, local_rank=1, world_size=8, local_world_size=4)
    assert _resolve_device(name, place) == GPU1  # LOCAL_RANK, not RANK


def test_processes_may_not_share_one_named_gpu(gpus):
    gpus(2)
    with pytest.raises(UsageError) as error:
        _resolve_device("cuda:0", Processes(rank=1, local_rank=1, world_size=2))
    assert str(error.value) == (
        "--device cuda:0: with 2 processes each takes its own GPU, cuda:LOCAL_RANK; "
        "pass --device cuda (or auto)"
    )


def test_more_processes_on_a_machine_than_gpus_is_a_usage_error(gpus):
    gpus(2)
    place = Processes(rank=0, world_size=6, local_world_size=3)
    with pytest.raises(UsageError) as error:
        _resolve_device("cuda", place)
    assert str(error.value) == (
        "3 processes on this machine and 2 GPUs: each process needs a GPU of its own; "
        "start at most one per GPU (--nproc_per_node), or use --device cpu"
    )
    # as many processes on this machine as GPUs is fine, however many machines there are
    other_machine = Processes(rank=3, local_rank=1, world_size=6, local_world_size=2)
    assert _resolve_device("cuda", other_machine) == GPU1


# ------------------------------------------------------- the random state on a GPU ------


def test_a_gpu_run_checkpoints_and_restores_the_gpus_random_state_too(monkeypatch):
    calls = []

    def get_rng_state(device):
        calls.append(("get", device))
        return "gpu state"

    def set_rng_state(state, device):
        calls.append(("set", state, device))

    monkeypatch.setattr(torch.cuda, "get_rng_state", get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
    state = _rng_state(GPU1)
    assert list(state) == ["torch", "cuda"] and state["cuda"] == "gpu state"
    assert torch.equal(state["torch"], torch.get_rng_state())
    _set_rng_state(state, GPU1)
    assert calls == [("get", GPU1), ("set", "gpu state", GPU1)]

    calls.clear()
    assert list(_rng_state(CPU)) == ["torch"]  # a CPU run has no GPU state
    _set_rng_state(state, CPU)  # a GPU checkpoint resumed on a CPU: the CPU state only
    _set_rng_state({"torch": state["torch"]}, GPU1)  # a CPU checkpoint resumed on a GPU
    assert calls == []


def test_a_checkpoint_read_for_resume_keeps_its_random_state_on_the_cpu(capsys, tmp_path):
    """The bug of a GPU resume: the checkpoint was read with map_location=device, which moved
    the CPU generator's state to the GPU, and torch.set_rng_state refused it ("RNG state must
    be a torch.ByteTensor"). The "meta" device stands in for a GPU here: whatever device the
    run is on, the state comes back a CPU ByteTensor, and resuming restores it."""
    test_train._train(capsys, tmp_path, 4)
    config = test_train._checkpoint(tmp_path)["config"]
    checkpoint = train._load_for_resume(
        tmp_path / "checkpoint.pt", "reverse", 0, config, torch.device("meta")
    )
    state = checkpoint["rng"]["torch"]
    assert state.device == CPU and state.dtype == torch.uint8
    assert all(t.device == CPU for t in checkpoint["model"].values())
    before = torch.get_rng_state()
    torch.manual_seed(123)
    Processes().restore_rng(checkpoint, torch.device("meta"), seed=0)
    assert torch.equal(torch.get_rng_state(), state)
    torch.set_rng_state(before)


def test_the_torch_state_is_handed_over_as_a_cpu_tensor(monkeypatch):
    handed = []
    monkeypatch.setattr(torch, "set_rng_state", handed.append)

    class MovedState:  # what a state read to another device looks like: .cpu() brings it back
        def cpu(self):
            return "the CPU copy"

    _set_rng_state({"torch": MovedState()}, CPU)
    assert handed == ["the CPU copy"]


# ----------------------------------------------------------- the process group ------


@pytest.fixture
def recorded_group(monkeypatch):
    """Stand-ins for the process group's calls, each recorded in order."""
    calls = []

    def record(name):
        return lambda *args, **kwargs: calls.append((name, args, kwargs))

    for name in ("init_process_group", "barrier", "destroy_process_group"):
        monkeypatch.setattr(dist, name, record(name))
    monkeypatch.setattr(torch.cuda, "set_device", record("set_device"))
    return calls


def test_cpu_processes_meet_in_a_gloo_group_and_wait_for_rank_0_at_the_end(recorded_group):
    with Processes(rank=1, local_rank=1, world_size=2).group(CPU):
        assert [name for name, _, _ in recorded_group] == ["init_process_group"]
    assert recorded_group == [
        ("init_process_group", ("gloo",), {}),
        ("barrier", (), {}),
        ("destroy_process_group", (), {}),
    ]


def test_gpu_processes_take_their_gpu_then_meet_in_an_nccl_group(recorded_group):
    with Processes(rank=1, local_rank=1, world_size=2).group(GPU1):
        pass
    assert recorded_group == [
        ("set_device", (GPU1,), {}),
        ("init_process_group", ("nccl",), {"device_id": GPU1}),
        ("barrier", (), {}),
        ("destroy_process_group", (), {}),
    ]


def test_an_error_inside_the_group_still_destroys_it_without_waiting(recorded_group):
    with pytest.raises(KeyError), Processes(rank=0, world_size=2).group(CPU):
        raise KeyError("a failure on this rank")
    assert [name for name, _, _ in recorded_group] == [
        "init_process_group",
        "destroy_process_group",  # no barrier: the other ranks are not waited for
    ]


def test_one_process_starts_no_group_on_a_gpu_either(recorded_group):
    with Processes().group(GPU1):
        pass
    assert recorded_group == []


def test_on_gpus_ddp_is_given_the_processs_own_gpu(monkeypatch):
    made = []

    def ddp(model, device_ids):
        made.append(device_ids)
        return model

    monkeypatch.setattr(train, "DistributedDataParallel", ddp)
    model, criterion = nn.Linear(2, 2), nn.CrossEntropyLoss(ignore_index=PAD_ID)
    Processes(rank=1, local_rank=1, world_size=2).wrap(model, criterion, GPU1)
    Processes(rank=1, local_rank=1, world_size=2).wrap(model, criterion, CPU)
    assert made == [[1], None]


# ------------------------------------------------------ every rank's random state ------


def test_a_checkpoint_of_n_processes_holds_every_ranks_random_state(monkeypatch):
    """all_gather_object fills one slot per rank; rank 0's state is also "rng", which a
    single process resuming the run restores."""
    torch.manual_seed(4)
    own = torch.get_rng_state()
    seen = []

    def gather(slots, state):  # stands in for the collective: ranks 1, 2 send theirs
        seen.append((len(slots), state))
        slots[:] = [state, {"torch": "rank 1"}, {"torch": "rank 2"}]

    monkeypatch.setattr(dist, "all_gather_object", gather)
    states = Processes(rank=0, world_size=3).rng_states(CPU)
    assert [n for n, _ in seen] == [3] and torch.equal(seen[0][1]["torch"], own)
    assert list(states) == ["rng", "rng_ranks"]
    assert states["rng"] is states["rng_ranks"][0]
    assert [s["torch"] for s in states["rng_ranks"][1:]] == ["rank 1", "rank 2"]


# ------------------------------------------------- a rank other than 0, in process ------

# the tiny model of tests/test_train.py, saving every 2 steps (the last --set wins)
TINY = ["--task", "reverse", *test_train.TINY, "--set", "checkpoint_every=2"]


@pytest.fixture
def as_rank(monkeypatch, one_thread):
    """Run main() as rank `rank` of two, torchrun's environment set, with the process group
    and DDP left out (each needs the other process): what is left is the rank's own logic,
    which the two-process runs of test_train_ddp.py execute where no tracer sees it."""
    gathered = []

    def gather(slots, state):  # the checkpoint's collective: both ranks' states
        gathered.append(state)
        slots[:] = [state, state]

    monkeypatch.setattr(dist, "all_gather_object", gather)
    monkeypatch.setattr(Processes, "group", lambda self, device: contextlib.nullcontext())
    monkeypatch.setattr(Processes, "wrap", lambda self, model, loss, device: (model, loss))

    def place(rank: int):
        for name, value in (("RANK", rank), ("LOCAL_RANK", rank), ("WORLD_SIZE", 2)):
            monkeypatch.setenv(name, str(value))
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        return gathered

    return place


def test_a_rank_other_than_0_trains_but_prints_writes_and_evaluates_nothing(
    as_rank, tmp_path, capsys
):
    gathered = as_rank(1)
    assert main([*TINY, "--steps", "4", "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr() == ("", "")  # no metrics, no progress bar, no message
    assert not (tmp_path / "run").exists()  # no folder, no checkpoint, no config
    assert len(gathered) == 2  # but it took part in both saves' collective (steps 2, 4)


def test_rank_0_of_two_saves_every_ranks_state_and_reports(as_rank, tmp_path, capsys):
    gathered = as_rank(0)
    out = tmp_path / "run"
    assert main([*TINY, "--steps", "4", "--out", str(out)]) == 0
    stdout, _ = capsys.readouterr()
    metrics = json.loads(stdout.splitlines()[-1])
    assert metrics["processes"] == 2 and metrics["steps"] == 4 and len(gathered) == 2
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert len(checkpoint["rng_ranks"]) == 2
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoint.pt", "config.json", "loss.png", "metrics.json"]  # fmt: skip

    as_rank(1)  # rank 1 resumes the same run quietly: rank 0 says "resuming"
    assert main([*TINY, "--steps", "6", "--out", str(out), "--resume"]) == 0
    assert capsys.readouterr() == ("", "")
    as_rank(0)
    assert main([*TINY, "--steps", "6", "--out", str(out), "--resume"]) == 0
    assert f"resuming {out / 'checkpoint.pt'} at step 4" in capsys.readouterr().err


def test_a_usage_error_is_told_by_rank_0_alone(as_rank, tmp_path, capsys):
    for rank, told in ((1, ""), (0, "python -m course.train: error: steps must be at least 1")):
        as_rank(rank)
        assert main([*TINY, "--steps", "0", "--out", str(tmp_path)]) == 2
        assert capsys.readouterr().err.startswith(told)


# ------------------------------------------------------- the ranks' slices and streams ------


def test_a_rank_left_without_rows_takes_exactly_one_row():
    src, tgt_in, tgt_out = (torch.arange(3 * w).reshape(3, w) + 1 for w in (5, 4, 4))
    spare = Processes(rank=3, local_rank=3, world_size=4).shard((src, tgt_in, tgt_out))
    assert [t.shape[0] for t in spare] == [1, 1, 1]  # 3 rows, 4 ranks: rank 3 has none
    assert torch.equal(spare[0], src[2:]) and torch.equal(spare[1], tgt_in[2:])


def test_a_ranks_own_stream_starts_at_step_0_and_takes_any_seed():
    def draws(seed, *step):
        Processes(rank=1, local_rank=1, world_size=2).seed_own_stream(seed, *step)
        return torch.rand(3)

    assert torch.equal(draws(7), draws(7, 0))
    big = 2**62 + 12345  # far past 2**64 before the documented reduction modulo 2**63
    got = draws(big, 3)
    torch.manual_seed(((big * 1_000_003 + 1) * 1_000_003 + 3) % 2**63)
    assert torch.equal(got, torch.rand(3))
