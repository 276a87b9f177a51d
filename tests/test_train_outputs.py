"""What course.train writes for a person to read: loss.png's curves and labels, and the
metrics (the JSON object and the line before it)."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest

import course.train as train
from course.data import load_task
from course.train import CONFIGS, noam_lr, plot_losses, smoothed_loss_floor

CONFIG = {**CONFIGS["reverse"], "d_model": 16, "warmup": 4, "lr_factor": 0.5}


@pytest.fixture
def drawn(monkeypatch, tmp_path):
    """plot_losses(...) -> (its figure, kept open for the test, and the file it wrote)."""
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)

    def draw(losses, config=CONFIG, vocab=12):
        path = tmp_path / "loss.png"
        plot_losses(path, losses, config, "reverse", vocab)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert [p.name for p in tmp_path.iterdir()] == ["loss.png"]  # no temporary left
        (figure,) = figures
        figures.clear()
        monkeypatch.undo()  # close for real once the test has looked
        return figure

    yield draw
    plt.close("all")


def _running_mean(values, window):
    """Each step's mean over the last `window` steps (fewer at the start), by cumulative sums."""
    sums = np.cumsum([0.0, *values])
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


@pytest.mark.parametrize(("n_steps", "window"), [(230, 4), (30, 1), (100, 2)])
def test_the_loss_plot_draws_each_loss_its_running_mean_and_the_floor(drawn, n_steps, window):
    losses = list(np.random.default_rng(n_steps).uniform(0.5, 3.0, n_steps))
    loss_ax, lr_ax = drawn(losses).axes
    steps = np.arange(1, n_steps + 1)
    per_batch, running, floor = loss_ax.get_lines()
    assert np.array_equal(per_batch.get_xdata(), steps)
    assert np.array_equal(per_batch.get_ydata(), losses)
    assert np.array_equal(running.get_xdata(), steps)
    assert np.allclose(running.get_ydata(), _running_mean(losses, window), rtol=1e-12)
    assert list(floor.get_ydata()) == pytest.approx([smoothed_loss_floor(0.1, 12)] * 2)
    labels = [text.get_text() for text in loss_ax.get_legend().get_texts()]
    assert labels == [
        "per batch",
        f"running mean of {window}",
        f"floor of label smoothing: {smoothed_loss_floor(0.1, 12):.3f}",
    ]
    assert loss_ax.get_title() == "reverse: training loss (label-smoothed cross-entropy)"
    assert (loss_ax.get_xlabel(), loss_ax.get_ylabel()) == ("step", "loss per target token (nats)")

    (rate,) = lr_ax.get_lines()
    assert np.array_equal(rate.get_xdata(), steps)
    assert np.allclose(
        rate.get_ydata(), [noam_lr(s, 16, 4, 0.5) for s in range(1, n_steps + 1)], rtol=1e-12
    )
    assert lr_ax.get_title() == "learning rate: warm-up 4 steps, then 1/sqrt(step)"
    assert (lr_ax.get_xlabel(), lr_ax.get_ylabel()) == ("step", "learning rate")


def test_without_label_smoothing_the_floor_is_zero(drawn):
    loss_ax, _ = drawn([2.0, 1.0, 0.5], config={**CONFIG, "label_smoothing": 0.0}).axes
    assert list(loss_ax.get_lines()[2].get_ydata()) == [0.0, 0.0]


# -------------------------------------------------------------------- the metrics ------

TINY = ["--task", "reverse", "--device", "cpu", "--set", "d_model=16", "--set", "n_heads=2",
        "--set", "n_layers=1", "--set", "d_ff=32", "--set", "warmup=4",
        "--set", "eval_batch_size=2048"]  # fmt: skip


def test_the_metrics_say_how_the_run_went(capsys, tmp_path, one_thread):
    assert train.main([*TINY, "--steps", "6", "--seed", "2", "--out", str(tmp_path)]) == 0
    summary, last = capsys.readouterr().out.strip().splitlines()[-2:]
    metrics = json.loads(last)
    checkpoint = train.torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    losses = checkpoint["losses"]
    task = load_task("reverse", seed=2)
    assert metrics["seed"] == 2 and metrics["steps"] == 6 and metrics["processes"] == 1
    assert metrics["final_loss"] == round(sum(losses) / len(losses), 4)  # fewer than 100 steps
    assert metrics["train_seconds"] == round(checkpoint["train_seconds"], 2)
    assert metrics["n_test"] == len(task.test) and metrics["threads"] == 1
    assert metrics["decoding"] == "greedy" and metrics["bleu_tokenize"] == "none"
    assert metrics["eval_seconds"] >= 0 and len(metrics["examples"]) == 3
    assert all(set(example) == {"output", "reference"} for example in metrics["examples"])
    assert summary == (
        f"reverse: exact match {100 * metrics['exact_match']:.1f}%, BLEU {metrics['bleu']:.2f} "
        f"on {metrics['n_test']} held-out sentences; 6 steps in "
        f"{metrics['train_seconds']:.0f} s on cpu"
    )


def test_the_final_loss_is_the_mean_of_the_last_100_steps(capsys, tmp_path, one_thread):
    assert train.main([*TINY, "--steps", "101", "--out", str(tmp_path)]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    losses = train.torch.load(tmp_path / "checkpoint.pt", weights_only=True)["losses"]
    assert len(losses) == 101
    assert metrics["final_loss"] == round(sum(losses[-100:]) / 100, 4)
