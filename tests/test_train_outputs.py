"""What course.train writes for a person to read: loss.png's curves and labels, and the
metrics (the JSON object and the line before it)."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
import test_train

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
    assert per_batch.get_linewidth() == 0.8  # thin and grey: the running mean stands out
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

TINY = ["--task", "reverse", *test_train.TINY]  # the tiny model of tests/test_train.py


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


def test_the_plot_is_drawn_without_a_display_1100_by_400_pixels(drawn, tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # any other backend: plot_losses must switch to Agg itself
    try:
        figure = drawn([2.0, 1.5, 1.0])
        assert matplotlib.get_backend().lower() == "agg"
    finally:
        matplotlib.use(before)
    png = (tmp_path / "loss.png").read_bytes()
    assert int.from_bytes(png[16:20], "big") == 1100  # 11 x 4 inches at 100 dpi
    assert int.from_bytes(png[20:24], "big") == 400
    assert figure.axes[0].get_position().x0 != plt.rcParams["figure.subplot.left"]  # tight


# ------------------------------------------------------------------- the run itself ------


def _main(*argv):
    assert train.main([*TINY, *argv]) == 0


def test_by_default_a_run_writes_to_runs_task_creating_the_folders(
    capsys, tmp_path, monkeypatch, one_thread
):
    monkeypatch.chdir(tmp_path)
    _main("--steps", "1")
    assert (tmp_path / "runs" / "reverse" / "metrics.json").is_file()
    _main("--steps", "1", "--out", str(tmp_path / "deep" / "er"))  # parents created too
    config = json.loads((tmp_path / "deep" / "er" / "config.json").read_text())
    assert config["task"] == "reverse" and config["seed"] == 0  # what the run was


def test_a_checkpoint_is_saved_every_checkpoint_every_steps_and_at_the_end(
    capsys, tmp_path, monkeypatch, one_thread
):
    saved = []
    real = train.save_checkpoint

    def save(path, state):
        saved.append(state["step"])
        real(path, state)

    monkeypatch.setattr(train, "save_checkpoint", save)
    _main("--steps", "7", "--set", "checkpoint_every=3", "--out", str(tmp_path))
    assert saved == [3, 6, 7]


def test_the_checkpoint_records_where_in_the_data_the_run_stopped(capsys, tmp_path, one_thread):
    """With batches of 2,048 sentences an epoch of the reverse task's training split is a
    few batches: 9 steps cross an epoch boundary, and the checkpoint must say which epoch
    and which batch of it come next, as training_batches counts them."""
    task = load_task("reverse")
    _main("--steps", "9", "--set", "batch_size=2048", "--out", str(tmp_path))
    checkpoint = train.torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    batches = train.training_batches(task, 2048, 0, 0, 0)
    epoch, position, _ = [next(batches) for _ in range(9)][-1]
    assert epoch >= 1  # the boundary was crossed
    assert (checkpoint["epoch"], checkpoint["position"]) == (epoch, position)


def test_each_rank_seeds_its_own_stream_after_the_init(capsys, tmp_path, monkeypatch, one_thread):
    seeds = []
    monkeypatch.setattr(
        train.Processes, "seed_own_stream", lambda self, seed, step=0: seeds.append((seed, step))
    )
    _main("--steps", "1", "--seed", "3", "--out", str(tmp_path))
    assert seeds == [(3, 0)]


def test_times_are_counted_from_zero(capsys, tmp_path, one_thread):
    started = train.time.perf_counter()
    _main("--steps", "1", "--out", str(tmp_path))
    elapsed = train.time.perf_counter() - started
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics["train_seconds"] < elapsed and metrics["eval_seconds"] <= elapsed
    # one step: its own time is all the training time (rounded to 0.1 ms and to 10 ms)
    assert metrics["median_step_seconds"] == pytest.approx(metrics["train_seconds"], abs=0.005)
    assert metrics["eval_seconds"] == round(metrics["eval_seconds"], 2)
    (loss,) = train.torch.load(tmp_path / "checkpoint.pt", weights_only=True)["losses"]
    assert metrics["final_loss"] == round(loss, 4)  # one step: the mean of one loss


def test_a_resume_at_its_last_step_says_so_naming_the_checkpoint(capsys, tmp_path, one_thread):
    _main("--steps", "2", "--out", str(tmp_path))
    _main("--steps", "2", "--out", str(tmp_path), "--resume")
    path = tmp_path / "checkpoint.pt"
    out, err = capsys.readouterr()
    assert f"{path} is at step 2 already: evaluating" in err
    assert json.loads(out.strip().splitlines()[-1])["median_step_seconds"] is None  # no step
