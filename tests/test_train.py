"""course.train, end to end on a tiny budget: the command line's JSON contract, the files
it writes, the atomic checkpoint (a crash while saving leaves the old one intact), a
resumed run that ends exactly where an uninterrupted one does, refused resumes, the
paper's learning-rate schedule by hand, and bad input as a clear message and exit 2.
"""

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from course import train
from course.data import BOS_ID, EOS_ID, GENERATED_TASKS, PAD_ID, REAL_TASKS, load_task
from course.train import (
    CONFIGS,
    build_optimizer,
    main,
    noam_lr,
    output_words,
    save_checkpoint,
    smoothed_loss_floor,
    training_batches,
)

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"task", "exact_match", "bleu", "train_seconds", "params", "steps", "device"}
# A model that trains in milliseconds a step; a checkpoint every 4 steps; one evaluation batch.
TINY = ["--set", "d_model=16", "--set", "n_heads=2", "--set", "n_layers=1", "--set", "d_ff=32",
        "--set", "warmup=4", "--set", "checkpoint_every=4", "--set", "eval_batch_size=2048",
        "--device", "cpu"]  # fmt: skip


# Tiny models are all overhead: one thread is faster, and deaf to a loaded machine.
pytestmark = pytest.mark.usefixtures("one_thread")


def _run(capsys, *argv: str) -> tuple[int, dict | None, str, str]:
    """main(argv) in process: (exit status, the last stdout line as JSON, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    return status, (json.loads(lines[-1]) if status == 0 else None), out, err


def _train(capsys, out: Path, steps: int, *extra: str) -> dict:
    status, metrics, _, err = _run(
        capsys, "--task", "reverse", "--steps", str(steps), "--out", str(out), *TINY, *extra
    )
    assert status == 0, err
    return metrics


def _checkpoint(out: Path) -> dict:
    return torch.load(out / "checkpoint.pt", weights_only=True)


# ----------------------------------------------------------------- the schedule --


def test_noam_lr_by_hand():
    d_model, warmup = 64, 100
    peak = d_model**-0.5 * warmup**-0.5  # both terms equal at step = warmup
    assert noam_lr(warmup, d_model, warmup) == pytest.approx(peak)
    assert noam_lr(1, d_model, warmup) == pytest.approx(d_model**-0.5 * warmup**-1.5)
    assert noam_lr(50, d_model, warmup) == pytest.approx(peak / 2)  # linear ramp
    assert noam_lr(400, d_model, warmup) == pytest.approx(peak / 2)  # 1/sqrt(step) decay
    assert noam_lr(100, 512, 4000) == pytest.approx(512**-0.5 * 100 * 4000**-1.5)
    assert noam_lr(warmup, d_model, warmup, factor=2.0) == pytest.approx(2 * peak)
    rates = [noam_lr(s, d_model, warmup) for s in range(1, 1001)]
    assert max(range(1000), key=rates.__getitem__) + 1 == warmup  # the peak is at warmup


@pytest.mark.parametrize("eps, vocab", [(0.1, 37), (0.1, 5), (0.3, 12), (0.0, 9)])
def test_the_label_smoothing_floor_is_the_lowest_loss(eps, vocab):
    """The floor drawn in loss.png: torch's label-smoothed loss of a model that predicts
    the smoothed target distribution exactly, and no prediction does better."""
    target = torch.tensor([3])
    smoothed = torch.full((vocab,), eps / vocab)
    smoothed[3] += 1 - eps
    best = F.cross_entropy(smoothed.log()[None], target, label_smoothing=eps).item()
    assert smoothed_loss_floor(eps, vocab) == pytest.approx(best, abs=1e-6)
    for seed in range(5):
        logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(seed)) * 3
        assert F.cross_entropy(logits, target, label_smoothing=eps).item() >= best - 1e-6


def test_output_words_are_strict():
    vocab = load_task("reverse").tgt_vocab
    ids = vocab.encode(["3", "1"])
    assert output_words(ids + [EOS_ID, PAD_ID, PAD_ID], vocab) == ["3", "1"]
    assert output_words(ids, vocab) == ["3", "1"]  # ran to max_len without <eos>
    assert output_words([ids[0], PAD_ID, ids[1], EOS_ID], vocab) == ["3", "<pad>", "1"]
    assert output_words([BOS_ID, *ids, EOS_ID], vocab) == ["<bos>", "3", "1"]
    assert output_words([EOS_ID, *ids], vocab) == []


def test_noam_lr_bad_input():
    with pytest.raises(ValueError, match=r"step must be a positive int \(steps count from 1\)"):
        noam_lr(0, 64, 100)
    with pytest.raises(ValueError, match="warmup must be a positive int, got 2.5"):
        noam_lr(1, 64, 2.5)


def test_the_optimizer_follows_the_schedule():
    config = {**CONFIGS["reverse"], "d_model": 64, "warmup": 10, "lr_factor": 0.5}
    optimizer, scheduler = build_optimizer(torch.nn.Linear(2, 2), config)
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    for step in range(1, 31):  # the rate used by optimizer step number `step`
        assert group["lr"] == pytest.approx(noam_lr(step, 64, 10, 0.5))
        optimizer.step()
        scheduler.step()


# ---------------------------------------------------------------- end to end ------


def test_end_to_end_writes_everything(capsys, tmp_path):
    status, metrics, out, err = _run(
        capsys, "--task", "reverse", "--steps", "8", "--out", str(tmp_path), *TINY
    )
    assert status == 0
    assert KEYS <= set(metrics)
    assert metrics["task"] == "reverse" and metrics["steps"] == 8 and metrics["device"] == "cpu"
    assert 0.0 <= metrics["exact_match"] <= 1.0 and 0.0 <= metrics["bleu"] <= 100.0
    assert metrics["params"] > 0 and metrics["train_seconds"] > 0
    assert "train reverse" in err and "8/8" in err  # the progress bar, on stderr
    assert "train reverse" not in out
    for name in ("checkpoint.pt", "config.json", "metrics.json", "loss.png"):
        assert (tmp_path / name).is_file(), name
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["task"] == "reverse" and config["d_model"] == 16 and config["steps"] == 8
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    checkpoint = _checkpoint(tmp_path)
    assert checkpoint["step"] == 8 and checkpoint["task"] == "reverse"
    assert {"model", "optimizer", "scheduler", "rng", "config"} <= set(checkpoint)
    assert checkpoint["scheduler"]["last_epoch"] == 8
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp
    umask = os.umask(0)
    os.umask(umask)
    for path in tmp_path.iterdir():  # the umask's permissions, as any new file gets
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path.name


def test_the_command_line_prints_json_last(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "course.train", "--task", "reverse", "--steps", "2",
         "--out", str(tmp_path), *TINY],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert KEYS <= set(metrics) and metrics["steps"] == 2
    assert "train reverse" in result.stderr


def test_resume_ends_where_an_uninterrupted_run_ends(capsys, tmp_path):
    straight = _train(capsys, tmp_path / "straight", 12)
    half = tmp_path / "half"
    _train(capsys, half, 6)  # stops between checkpoints (every 4 steps)
    resumed = _train(capsys, half, 12, "--resume")
    for key in ("exact_match", "bleu", "final_loss", "params", "steps"):
        assert resumed[key] == straight[key], key
    a, b = _checkpoint(tmp_path / "straight"), _checkpoint(half)
    assert a["losses"] == b["losses"]  # the same batches, the same dropout, step by step
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    assert a["step"] == b["step"] == 12
    _train(capsys, tmp_path / "seed1", 2, "--seed", "1")  # the seed is what decides
    assert _checkpoint(tmp_path / "seed1")["losses"] != a["losses"][:2]


def test_the_batches_resume_where_they_stopped_across_epochs():
    task = load_task("reverse")
    task = dataclasses.replace(task, train=task.train[:100])  # 4 batches of 32 an epoch
    straight = list(itertools.islice(training_batches(task, 32, 0, 0, 0), 11))
    assert [(e, p) for e, p, _ in straight[:6]] == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]
    assert not torch.equal(straight[0][2][0], straight[4][2][0])  # each epoch reshuffled
    for stop in (3, 4, 6):  # mid-epoch, at an epoch's end, in the next epoch
        epoch, position, _ = straight[stop - 1]
        resumed = list(itertools.islice(training_batches(task, 32, 0, epoch, position), 11 - stop))
        for (e1, p1, one), (e2, p2, other) in zip(straight[stop:], resumed, strict=True):
            assert (e1, p1) == (e2, p2)
            assert all(torch.equal(x, y) for x, y in zip(one, other, strict=True))


# ----------------------------------------------------------- atomic checkpoints --


def test_a_crash_while_saving_leaves_the_old_checkpoint(capsys, tmp_path, monkeypatch):
    _train(capsys, tmp_path, 4)
    path = tmp_path / "checkpoint.pt"
    old = path.read_bytes()

    def crash(obj, file, *args, **kwargs):
        file.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"step": 99})
    # and inside a run: training on from step 4 crashes at its first save (step 8)
    with pytest.raises(OSError, match="disk full"):
        main(["--task", "reverse", "--steps", "12", "--out", str(tmp_path), "--resume", *TINY])
    assert path.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "config.json",
                                                          "loss.png", "metrics.json"]  # fmt: skip
    monkeypatch.undo()
    resumed = _train(capsys, tmp_path, 8, "--resume")  # and it resumes from step 4
    assert resumed["steps"] == 8 and len(_checkpoint(tmp_path)["losses"]) == 8
    status, again, _, err = _run(  # at its last step already: it only evaluates
        capsys, "--task", "reverse", "--steps", "8", "--out", str(tmp_path), "--resume", *TINY
    )
    assert status == 0 and "at step 8 already" in err
    assert again["exact_match"] == resumed["exact_match"] and again["steps"] == 8


# ------------------------------------------------------------------ refusals -------


def _files(out: Path) -> dict | None:
    if not out.exists():
        return None
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}


def _refused(capsys, out: Path, *argv: str) -> str:
    """A --resume that must stop with exit 2, writing nothing at all."""
    files = _files(out)
    status, _, stdout, err = _run(capsys, "--out", str(out), "--resume", *argv)
    assert status == 2 and stdout == ""
    assert _files(out) == files
    assert "left untouched" in err or "no checkpoint" in err
    return err


def test_a_resume_from_another_task_or_config_is_refused(capsys, tmp_path):
    _train(capsys, tmp_path, 4)
    tiny = [*TINY, "--steps", "8"]
    err = _refused(capsys, tmp_path, "--task", "toy-translation", *tiny)
    assert "task 'reverse' (this run: 'toy-translation')" in err
    err = _refused(capsys, tmp_path, "--task", "reverse", *tiny, "--set", "d_model=32")
    assert "d_model=16 (this run: 32)" in err
    err = _refused(capsys, tmp_path, "--task", "reverse", *tiny, "--seed", "3")
    assert "seed 0 (this run: 3)" in err
    err = _refused(capsys, tmp_path, "--task", "reverse", *TINY, "--steps", "2")
    assert "at step 4, past --steps 2" in err
    err = _refused(capsys, tmp_path / "nowhere", "--task", "reverse", *tiny)
    assert "there is no checkpoint at" in err
    _train(capsys, tmp_path, 2)  # without --resume: a fresh run, over the old one
    assert _checkpoint(tmp_path)["step"] == 2
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    err = _refused(capsys, tmp_path, "--task", "reverse", *tiny)
    assert "cannot read" in err
    torch.save({"step": 3}, tmp_path / "checkpoint.pt")
    err = _refused(capsys, tmp_path, "--task", "reverse", *tiny)
    assert "is not a checkpoint of course.train (it lacks config, epoch" in err


# ---------------------------------------------------------------- bad input --------


def test_an_unknown_task_lists_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--task", "french"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'french'" in err
    for name in ("toy-translation", "reverse", "scan-simple", "scan-length", "scan-addjump"):
        assert name in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "depth=3"], "--set expects KEY=VALUE with KEY one of: batch_size"),
        (["--set", "d_model"], "--set expects KEY=VALUE"),
        (["--set", "d_model=big"], "--set d_model= expects an int (default 64), got 'big'"),
        (["--set", "norm_first=maybe"], "--set norm_first= expects true or false"),
        (["--set", "dropout=lots"], "--set dropout= expects a number (default 0.1)"),
        (["--steps", "0"], "steps must be at least 1, got 0"),
        (["--device", "tpu9"], "--device tpu9: unknown device (try auto, cpu, cuda, mps)"),
        (
            ["--set", "positions=foo"],  # a traceback, before: the model's ValueError
            "the configuration cannot build a model: positions must be one of 'sinusoidal', "
            "'rotary', got 'foo'",
        ),
        (["--set", "d_model=30"], "d_model must be divisible by n_heads: d_model=30, n_heads=4"),
        (["--set", "dropout=1.5"], "dropout must be in [0, 1), got 1.5"),
        (["--set", "label_smoothing=2"], "label_smoothing must be in [0, 1), got 2.0"),
        (["--set", "label_smoothing=-0.1"], "label_smoothing must be in [0, 1), got -0.1"),
        (["--set", "lr_factor=0"], "lr_factor must be greater than 0, got 0.0"),
        (["--set", "lr_factor=nan"], "lr_factor must be greater than 0, got nan"),
        (["--set", "clip_norm=-1"], "clip_norm must be at least 0 (0: no clipping), got -1.0"),
    ],
)
def test_bad_settings_exit_2_with_a_message(capsys, tmp_path, argv, message):
    status, _, stdout, err = _run(capsys, "--task", "reverse", "--out", str(tmp_path), *argv)
    assert status == 2 and stdout == ""
    assert message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_asking_for_a_missing_gpu(capsys, tmp_path):
    status, _, _, err = _run(
        capsys, "--task", "reverse", "--device", "cuda", "--out", str(tmp_path)
    )
    assert status == 2 and "no CUDA GPU is available here" in err


def test_every_task_has_a_complete_config():
    keys = set(CONFIGS["toy-translation"])
    assert set(CONFIGS) == set(train.TASKS)
    real = keys | set(train.REAL_DEFAULTS)  # the real task's settings, time_budget, ...
    assert all(set(CONFIGS[name]) == keys for name in GENERATED_TASKS)
    assert all(set(CONFIGS[name]) == real for name in REAL_TASKS)


def test_rotary_positions_from_the_command_line(capsys, tmp_path):
    # the translation tasks' (lm-en's LanguageModel is always rotary: course.lm)
    assert all(
        CONFIGS[name]["positions"] == "sinusoidal" for name in (*GENERATED_TASKS, *REAL_TASKS)
    )
    task = load_task("reverse")
    model = train.build_model(task, {**CONFIGS["reverse"], "positions": "rotary"})
    assert model.positions == "rotary"
    metrics = _train(capsys, tmp_path, 4, "--set", "positions=rotary")
    assert metrics["steps"] == 4
    assert _checkpoint(tmp_path)["config"]["positions"] == "rotary"
    assert json.loads((tmp_path / "config.json").read_text())["positions"] == "rotary"
    err = _refused(capsys, tmp_path, "--task", "reverse", *TINY, "--steps", "8")
    assert "positions='rotary' (this run: 'sinusoidal')" in err


# ------------------------------------------------- the loop and the scores (lesson 09) --


def _tiny_setup(seed=0):
    torch.manual_seed(seed)
    task = load_task("reverse")
    config = {**CONFIGS["reverse"], "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32}
    model = train.build_model(task, config)
    optimizer, scheduler = build_optimizer(model, {**config, "warmup": 4})
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    batches = (batch for _, _, batch in training_batches(task, 32, seed, 0, 0))
    return task, model, optimizer, scheduler, criterion, batches


def test_train_steps_counts_steps_calls_back_and_restores_train_mode():
    task, model, optimizer, scheduler, criterion, batches = _tiny_setup()
    seen = []

    def on_step(log):
        seen.append((log.step, len(log.losses), model.training))
        model.eval()  # as an evaluation would leave it

    log = train.train_steps(model, batches, optimizer, criterion, 5, scheduler=scheduler,
                            clip_norm=1.0, on_step=on_step)  # fmt: skip
    assert log.step == 5 and len(log.losses) == 5 and log.seconds > 0
    assert seen == [(s, s, True) for s in range(1, 6)]  # back in train mode at every step
    assert scheduler.last_epoch == 5


def test_train_steps_is_the_loop_of_the_cli(capsys, tmp_path):
    """The same seed, the same losses: the function and `python -m course.train` agree."""
    _train(capsys, tmp_path, 4)
    metrics_losses = _checkpoint(tmp_path)["losses"]
    torch.manual_seed(0)
    task = load_task("reverse")
    config = {**CONFIGS["reverse"], "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32,
              "warmup": 4}  # fmt: skip
    model = train.build_model(task, config)
    optimizer, scheduler = build_optimizer(model, config)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    batches = (batch for _, _, batch in training_batches(task, config["batch_size"], 0, 0, 0))
    log = train.train_steps(model, batches, optimizer, criterion, 4, scheduler=scheduler,
                            clip_norm=config["clip_norm"])  # fmt: skip
    assert log.losses == metrics_losses


def test_train_steps_stops_at_its_time_budget():
    _, model, optimizer, _, criterion, batches = _tiny_setup()
    log = train.train_steps(model, batches, optimizer, criterion, 10_000, time_budget=0.05)
    assert 1 <= log.step < 10_000 and log.seconds >= 0.05


def test_train_steps_times_with_the_clock_it_is_given():
    _, model, optimizer, _, criterion, batches = _tiny_setup()
    ticks = iter(range(100))  # a clock that advances 1 s each time it is read
    log = train.train_steps(model, batches, optimizer, criterion, 100, time_budget=3.0,
                            clock=lambda: float(next(ticks)))  # fmt: skip
    assert log.step == 3 and log.seconds == 3.0  # each step read the clock twice: 1 s a step
    assert log.step_seconds == [1.0, 1.0, 1.0]


def test_train_steps_keeps_each_steps_seconds():
    """A compiled run's first steps wait for the compiler: each step's own time lets the
    metrics give a typical step (the median) beside the total."""
    _, model, optimizer, _, criterion, batches = _tiny_setup()
    times = iter([0.0, 30.0, 30.0, 30.5, 30.5, 31.0, 31.0, 31.25])  # 30 s, then 0.5 s, ...
    log = train.train_steps(model, batches, optimizer, criterion, 4,
                            clock=lambda: next(times))  # fmt: skip
    assert log.step_seconds == [30.0, 0.5, 0.5, 0.25] and log.seconds == 31.25
    assert train._median(log.step_seconds) == 0.5
    assert train._median([]) is None


@pytest.mark.parametrize(
    "kwargs, message",
    [({"steps": -1}, "steps must be an int >= start_step"),
     ({"steps": 2.5}, "steps must be an int"),
     ({"steps": 3, "start_step": 5}, "steps must be an int >= start_step (5)"),
     ({"steps": 3, "time_budget": 0}, "time_budget must be a positive number")],
)  # fmt: skip
def test_train_steps_bad_input(kwargs, message):
    _, model, optimizer, _, criterion, batches = _tiny_setup()
    with pytest.raises(ValueError, match=re.escape(message)):
        train.train_steps(model, batches, optimizer, criterion, **kwargs)


def test_corpus_scores():
    same = [["a", "b", "c", "d"], ["e", "f", "g", "h"]]
    assert train.corpus_scores(same, same) == {"exact_match": 1.0, "bleu": 100.0}
    scores = train.corpus_scores([["a", "b", "c", "x"], same[1]], same)
    assert scores["exact_match"] == 0.5 and 0 < scores["bleu"] < 100
    with pytest.raises(ValueError, match="as many hypotheses as references"):
        train.corpus_scores([["a"]], same)
    with pytest.raises(ValueError, match="at least one"):
        train.corpus_scores([], [])


def test_evaluate_takes_any_pairs_and_any_decoder():
    task, model, *_ = _tiny_setup()
    pairs = task.test[:7]

    def oracle(model, src, max_len, bos_id, eos_id):  # writes each reference, by lookup
        rows = [task.tgt_vocab.encode(target) + [EOS_ID] for _, target in pairs]
        out = torch.full((len(rows), max_len), PAD_ID)
        for b, row in enumerate(rows):
            out[b, : len(row)] = torch.tensor(row)
        return out

    results = train.evaluate(model, task, "cpu", 100, pairs=pairs, decode=oracle, progress=False)
    assert results["exact_match"] == 1.0 and results["bleu"] == 100.0 and results["n_test"] == 7
    greedy = train.evaluate(model, task, "cpu", 3, pairs=pairs, progress=False)
    assert greedy["n_test"] == 7 and greedy["exact_match"] < 1.0  # untrained


def test_the_toy_tasks_decode_with_the_kv_cache_and_the_tutorial_gru_without():
    """Evaluation decodes every Transformer with lesson 10's cache (several times faster);
    the tutorial's GRU has no cache and generates one GRU step a token."""
    from course.efficient import cached_greedy_decode

    assert train._decoder(train.CONFIGS["reverse"]) is cached_greedy_decode
    assert train._decoder(train.CONFIGS["fra-eng"], beam=False) is cached_greedy_decode
    gru = train._decoder({**train.CONFIGS["fra-eng"], **train.MODELS["tutorial-gru"]})
    assert gru is not cached_greedy_decode and gru is not train.greedy_decode
