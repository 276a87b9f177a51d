"""course.train's GPU speed settings, tested on the CPU: the bf16 setting (autocast on a
CUDA device, float32 on the CPU) and --compile (torch.compile for the training steps, the
model itself for evaluation)."""

import json

import pytest
import test_train
import torch

import course.train as train
from course.train import CONFIGS, UsageError, _load_for_resume, main

TINY = test_train.TINY
pytestmark = pytest.mark.usefixtures("one_thread")


def _metrics(capsys, *argv: str) -> dict:
    assert main(["--task", "reverse", *TINY, *argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_every_task_trains_in_bf16_on_a_gpu_by_default():
    translation = [name for name in CONFIGS if name != "lm-en"]
    assert all(CONFIGS[name]["bf16"] is True for name in translation)


def test_train_steps_runs_forward_and_loss_under_bf16_autocast():
    task, model, optimizer, scheduler, criterion, batches = test_train._tiny_setup()
    dtypes = []
    model.out.register_forward_hook(lambda module, inputs, out: dtypes.append(out.dtype))
    log = train.train_steps(model, batches, optimizer, criterion, 2, bf16=True)
    assert dtypes == [torch.bfloat16, torch.bfloat16]  # the logits came out of a bf16 matmul
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights did not
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())
    assert log.step == 2 and all(torch.isfinite(torch.tensor(log.losses)))
    dtypes.clear()
    train.train_steps(model, batches, optimizer, criterion, 1)  # the default: float32
    assert dtypes == [torch.float32]


def test_the_cpu_trains_in_float32_whatever_bf16_says(capsys, tmp_path, monkeypatch):
    seen = []
    real = train.train_steps
    monkeypatch.setattr(
        train, "train_steps", lambda *a, **k: seen.append(k["bf16"]) or real(*a, **k)
    )
    metrics = _metrics(capsys, "--steps", "2", "--out", str(tmp_path))
    assert seen == [False] and metrics["bf16"] is False and metrics["compiled"] is False


def test_a_gpu_run_asks_for_bf16_and_bf16_false_turns_it_off(monkeypatch, tmp_path):
    """What _train_and_evaluate hands train_steps on a CUDA device (stopped right there)."""
    seen = []

    class Stop(Exception):
        pass

    def fake_train_steps(*args, **kwargs):
        seen.append(kwargs["bf16"])
        raise Stop

    monkeypatch.setattr(train, "train_steps", fake_train_steps)
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: self)  # no GPU to move to
    args = train.parse_args(["--task", "reverse", *TINY[:-2], "--out", str(tmp_path)])
    for overrides, want in (({}, True), ({"bf16": False}, False)):
        config = {**CONFIGS["reverse"], **overrides}
        with pytest.raises(Stop):
            train._train_and_evaluate(args, config, torch.device("cuda"), train.Processes())
        assert seen.pop() is want


def test_compile_trains_the_compiled_model_and_evaluates_the_model(capsys, tmp_path, monkeypatch):
    compiled = []

    class Compiled(torch.nn.Module):  # stands in for torch.compile's wrapper
        def __init__(self, model):
            super().__init__()
            self.model, self.calls = model, 0

        def forward(self, *args):
            self.calls += 1
            return self.model(*args)

    def fake_compile(model, mode):
        compiled.append(Compiled(model))
        modes.append(mode)
        return compiled[-1]

    modes = []
    monkeypatch.setattr(torch, "compile", fake_compile)
    metrics = _metrics(capsys, "--steps", "3", "--compile", "--out", str(tmp_path))
    (wrapper,) = compiled
    assert wrapper.calls == 3  # every training step, and nothing else
    assert metrics["compiled"] is True and metrics["steps"] == 3
    assert modes == ["default"] and metrics["compile_mode"] == "default"
    saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["model"]
    assert set(saved) == set(wrapper.model.state_dict())  # the model's own names, no prefix
    metrics = _metrics(capsys, "--steps", "1", "--compile", "reduce-overhead",
                       "--out", str(tmp_path / "graphs"))  # fmt: skip
    assert modes[-1] == "reduce-overhead" and metrics["compile_mode"] == "reduce-overhead"


def test_compile_modes_are_named_and_a_wrong_one_refused(capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--task", "reverse", "--compile", "fast"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err
    assert train.parse_args(["--task", "reverse", "--compile"]).compile == "default"
    assert train.parse_args(["--task", "reverse"]).compile is None


def test_compile_is_refused_for_the_language_model(capsys):
    assert main(["--task", "lm-en", "--compile", "--device", "cpu"]) == 2
    assert "--compile is for the translation tasks, not --task lm-en" in capsys.readouterr().err


def test_a_checkpoint_from_before_bf16_trained_in_float32(tmp_path):
    config = dict(CONFIGS["reverse"])
    old = {k: v for k, v in config.items() if k != "bf16"}
    path = tmp_path / "checkpoint.pt"
    needed = dict(task="reverse", seed=0, config=old, step=1, epoch=0, position=0, model={},
                  optimizer={}, scheduler={}, rng={}, losses=[], train_seconds=0.0)  # fmt: skip
    torch.save(needed, path)
    with pytest.raises(UsageError, match=r"bf16=False \(this run: True\)"):
        _load_for_resume(path, "reverse", 0, config, "cpu")
    assert _load_for_resume(path, "reverse", 0, {**config, "bf16": False}, "cpu")["step"] == 1
