"""--device auto (CUDA, then Apple's MPS, then the CPU) and the check of MPS's first loss
against the CPU's, tested without either GPU: torch's answers about them are stood in for
(as test_train_places.py does for CUDA), and "MPS" is the CPU with its loss perturbed, the
way MPS has been seen to fail (LLMs-from-scratch #791: 19.9 where the CPU gave 3.8). What
this cannot show: that the course trains correctly on a real Mac (docs/platforms.md says so).
"""

import json

import pytest
import test_train
import torch
from torch import nn

import course.train as train
from course import utils
from course.train import Processes, UsageError, _resolve_device

MPS, CPU, CUDA = torch.device("mps"), torch.device("cpu"), torch.device("cuda")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def machine(monkeypatch):
    """Pretend this machine has a CUDA GPU, Apple's MPS, both or neither."""

    def pretend(cuda: bool = False, mps: bool = False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: int(cuda))
        monkeypatch.setattr(utils, "mps_available", lambda: mps)

    return pretend


@pytest.fixture
def mps_off_by(monkeypatch):
    """Make "MPS" the CPU with its loss multiplied by `factor` (NaN: a broken kernel)."""
    real = utils._loss_on
    asked = []

    def pretend(factor: float):
        def loss_on(model, loss_fn, batch, where):
            asked.append(where.type)
            loss = real(model, loss_fn, batch, CPU)
            return loss * factor if where.type == "mps" else loss

        monkeypatch.setattr(utils, "_loss_on", loss_on)
        return asked

    return pretend


# ------------------------------------------------------------------- --device auto --


@pytest.mark.parametrize(
    "cuda, mps, want",
    [(True, True, CUDA), (True, False, CUDA), (False, True, MPS), (False, False, CPU)],
)
def test_auto_takes_cuda_then_mps_then_the_cpu(machine, cuda, mps, want):
    machine(cuda=cuda, mps=mps)
    assert utils.device() == want
    assert utils.device("auto") == want
    assert _resolve_device("auto", Processes()) == want


def test_a_named_device_must_be_here(machine):
    machine(cuda=False, mps=False)
    assert utils.device("cpu") == CPU
    for name, message in [
        ("mps", "mps: Apple's MPS is not available here (use auto or cpu)"),
        ("cuda", "cuda: no CUDA GPU is available here (use auto or cpu)"),
        ("tpu9", "tpu9: unknown device (try auto, cpu, cuda, mps)"),
    ]:
        with pytest.raises(ValueError) as error:
            utils.device(name)
        assert str(error.value) == message
    machine(mps=True)
    assert utils.device("mps") == MPS


def test_mps_is_one_process_only(machine):
    machine(mps=True)
    with pytest.raises(UsageError, match="torchrun's processes cannot share Apple's GPU"):
        _resolve_device("mps", Processes(rank=0, world_size=2, local_world_size=2))


def test_mps_available_asks_torch(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert utils.mps_available() is True
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert utils.mps_available() is False


# ---------------------------------------------------------- MPS's first loss, checked --


def _setup():
    task, model, optimizer, scheduler, criterion, batches = test_train._tiny_setup()
    return model, criterion, next(batches)


@pytest.mark.parametrize("device", [CPU, CUDA, "cpu"])
def test_other_devices_are_not_checked_and_nothing_is_computed(device):
    def never(*_):
        raise AssertionError("computed a loss")

    assert train.checked_device(device, nn.Linear(1, 1), never, (torch.zeros(1),)) == (
        torch.device(device)
    )


@pytest.mark.parametrize("factor", [1.0, 1 + 5e-4, 1 - 5e-4])
def test_mps_is_kept_when_its_loss_is_the_cpus(mps_off_by, factor):
    asked = mps_off_by(factor)
    said = []
    model, criterion, batch = _setup()
    loss_fn = lambda m, b: train.translation_loss(m, b, criterion)  # noqa: E731
    assert utils.mps_checked(MPS, model, loss_fn, batch, say=said.append) == MPS
    assert sorted(asked) == ["cpu", "mps"] and said == []


@pytest.mark.parametrize("factor", [19.9 / 3.8, 1 + 2e-3, 0.5, float("nan"), float("inf")])
def test_mps_falls_back_to_the_cpu_when_its_loss_differs_and_says_so(mps_off_by, factor):
    mps_off_by(factor)
    said = []
    model, criterion, batch = _setup()
    loss_fn = lambda m, b: train.translation_loss(m, b, criterion)  # noqa: E731
    assert utils.mps_checked(MPS, model, loss_fn, batch, say=said.append) == CPU
    (line,) = said
    cpu = utils._loss_on(model, loss_fn, batch, CPU)
    assert line == (
        f"mps gave a loss of {cpu * factor:.4f} on the first batch where the CPU gives "
        f"{cpu:.4f} (same weights, same batch): using the CPU instead"
    )


def test_the_tolerance_is_relative_and_one_in_a_thousand(mps_off_by):
    assert utils.MPS_RTOL == 1e-3
    model, criterion, batch = _setup()
    loss_fn = lambda m, b: train.translation_loss(m, b, criterion)  # noqa: E731
    mps_off_by(1 + 0.9e-3)
    assert utils.mps_checked(MPS, model, loss_fn, batch, say=print) == MPS
    mps_off_by(1 + 1.1e-3)
    assert utils.mps_checked(MPS, model, loss_fn, batch, say=lambda _: None) == CPU


def test_the_check_leaves_the_model_as_it_was_and_compares_without_dropout():
    model, criterion, batch = _setup()  # dropout 0.1, in train mode
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loss_fn = lambda m, b: train.translation_loss(m, b, criterion)  # noqa: E731
    losses = {utils._loss_on(model, loss_fn, batch, CPU) for _ in range(3)}
    assert len(losses) == 1  # eval mode: no dropout mask drawn, the same loss each time
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    model.eval()
    with torch.no_grad():
        assert losses == {float(loss_fn(model, batch))}


def test_the_default_says_it_on_stderr(mps_off_by, capsys):
    mps_off_by(5.0)
    model, criterion, batch = _setup()
    assert train.checked_device(MPS, model, criterion, batch) == CPU
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "using the CPU instead" in err


def test_train_on_mps_whose_loss_is_wrong_trains_on_the_cpu(machine, mps_off_by, capsys, tmp_path):
    machine(mps=True)
    asked = mps_off_by(19.9 / 3.8)
    argv = ["--task", "reverse", *test_train.TINY[:-2], "--device", "mps", "--steps", "2"]
    assert train.main([*argv, "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["device"] == "cpu" and sorted(asked) == ["cpu", "mps"]
    assert "mps gave a loss of" in err and "using the CPU instead" in err
    # the same run as --device cpu from then on: the check drew nothing from the random state
    assert (
        train.main([*argv[:-4], "--device", "cpu", "--steps", "2", "--out", str(tmp_path / "c")])
        == 0
    )
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["final_loss"] == metrics["final_loss"]


def test_lm_on_mps_whose_loss_is_wrong_trains_on_the_cpu(machine, mps_off_by, capsys, tmp_path):
    machine(mps=True)
    mps_off_by(float("nan"))
    tiny = ["d_model=16", "n_heads=2", "n_layers=1", "d_ff=32", "vocab_size=300", "time_budget=0"]
    argv = ["--task", "lm-en", "--device", "mps", "--steps", "2", "--out", str(tmp_path)]
    argv += [arg for setting in tiny for arg in ("--set", setting)]
    assert train.main(argv) == 0
    out, err = capsys.readouterr()
    assert json.loads(out.strip().splitlines()[-1])["device"] == "cpu"
    assert "mps gave a loss of nan" in err
