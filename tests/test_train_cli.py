"""course.train's command line and its guards, in detail: the task defaults the docs'
measurements were made with, `--help`, `--set` parsing, which changes a resumed run may
make, what every refused --resume says (and that it names the file), the boundaries of
the settings run() accepts, and the model's positions.

Training here is a tiny model for a few steps; the checks of settings that need no
training replace the training itself with a stand-in.
"""

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from test_train import TINY  # the tiny model: milliseconds a step, a checkpoint every 4

from course import train
from course.data import TASKS, load_task, make_batches
from course.train import (
    CONFIGS,
    UsageError,
    _load_for_resume,
    _parse_override,
    main,
    noam_lr,
    parse_args,
)


def _run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    """main(argv) in process: (exit status, the last stdout line as JSON, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, (json.loads(out.strip().splitlines()[-1]) if status == 0 else None), err


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A real checkpoint: the tiny model on reverse, 4 steps, seed 0. Tests copy it."""
    out = tmp_path_factory.mktemp("trained")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the one_thread fixture, for a module-wide fixture
    try:
        assert main(["--task", "reverse", "--steps", "4", "--out", str(out), *TINY]) == 0
    finally:
        torch.set_num_threads(threads)
    return out / "checkpoint.pt"


def _copy(checkpoint: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(checkpoint, folder / "checkpoint.pt"))


def _config_of(checkpoint: Path) -> dict:
    """The configuration the checkpoint was written with: a run that resumes it as is."""
    return dict(torch.load(checkpoint, weights_only=True)["config"])


# ------------------------------------------------------------- the task defaults --


def test_the_task_defaults_are_the_measured_ones():
    """The comments above CONFIGS, docs/training.md and lesson 09 report
    measurements made with exactly these settings: 600 steps on toy-translation with
    lr_factor 0.5, 6,000 steps of the same small model on SCAN. Changing a default
    invalidates them: rerun the measurements, update docs/training.md's tables and regenerate
    lesson 09, then update this test."""
    common = dict(
        d_model=64,
        n_heads=4,
        n_layers=2,
        d_ff=256,
        dropout=0.1,
        norm_first=False,
        positions="sinusoidal",
        steps=600,
        batch_size=64,
        warmup=200,
        lr_factor=0.5,
        label_smoothing=0.1,
        clip_norm=1.0,
        checkpoint_every=200,
        eval_batch_size=500,
        bf16=True,
        threads=0,  # the course's policy: one thread unless COURSE_THREADS says otherwise
    )
    scan = {**common, "steps": 6000, "checkpoint_every": 500}
    assert CONFIGS == {
        "toy-translation": common,
        "reverse": {**common, "steps": 2000},
        "scan-simple": {**scan, "steps": 8000},
        "scan-length": scan,
        "scan-addjump": scan,
        "fra-eng": {
            **common,
            "architecture": "transformer",
            "time_budget": 600.0,
            "schedule": "noam",
            "lr": 1e-3,
            "beam_size": 4,
            "d_model": 128,
            "n_heads": 4,
            "n_layers": 2,
            "d_ff": 512,
            "dropout": 0.1,
            "steps": 100_000,
            "batch_size": 64,
            "warmup": 400,
            "lr_factor": 1.0,
            "checkpoint_every": 500,
            "tie_embeddings": False,
        },
        "fra-eng-full": {
            **common,
            "architecture": "transformer",
            "time_budget": 1200.0,
            "schedule": "noam",
            "lr": 1e-3,
            "beam_size": 4,
            "tie_embeddings": True,
            "d_model": 192,
            "n_heads": 4,
            "n_layers": 2,
            "d_ff": 768,
            "dropout": 0.1,
            "steps": 100_000,
            "batch_size": 64,
            "warmup": 800,
            "lr_factor": 1.0,
            "checkpoint_every": 500,
            "eval_batch_size": 250,
        },
        "lm-en": {
            "d_model": 128,
            "n_heads": 4,
            "n_layers": 4,
            "d_ff": 512,
            "dropout": 0.0,
            "vocab_size": 4000,
            "max_len": 64,
            "steps": 100_000,
            "time_budget": 600.0,
            "batch_size": 64,
            "lr": 2e-3,
            "warmup": 100,
            "clip_norm": 1.0,
            "eval_batch_size": 256,
            "threads": 0,
        },
    }
    # each task its own dict: editing one task's settings changes no other task's
    assert len({id(config) for config in CONFIGS.values()}) == len(CONFIGS)


@pytest.mark.parametrize("name", TASKS)
def test_the_model_has_exactly_the_positions_the_longest_batch_needs(name):
    """max_len = the longest source + <eos> or <bos> + the longest target, over train and
    test: every batch fits, and the positional table is no larger than that."""
    task = load_task(name)
    model = train.build_model(task, CONFIGS[name])
    pairs = [*task.train, *task.test]
    src, tgt_in, _ = next(make_batches(pairs, task, len(pairs), shuffle=False))
    assert max(src.shape[1], tgt_in.shape[1]) == model.max_len


# ------------------------------------------------------------- the command line --


def test_help_describes_every_option(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one option a line; whitespace normalised anyway
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("usage: python -m course.train")
    text = " ".join(printed.split())
    for words in (
        "Train the course's Transformer on a task, evaluate it on the held-out split, and "
        "write a checkpoint, config.json, metrics.json and loss.png to --out. The last line "
        "on stdout is the metrics as one JSON object.",
        "which task to learn",
        "optimizer steps (default: the task's)",
        "seeds data order, init, dropout",
        "auto (CUDA, else Apple's MPS, else the CPU), cpu, cuda, mps",
        "output folder (default: runs/<task>)",
        "continue from the checkpoint in --out",
        "--set KEY=VALUE override one entry of the task's configuration, e.g. --set d_model=128",
    ):
        assert words in text, words
    for option in ("--task", "--steps", "--seed", "--device", "--out", "--resume", "--set"):
        assert option in text, option


def test_the_task_is_required(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "the following arguments are required: --task" in capsys.readouterr().err


def test_the_command_line_defaults():
    """Without options: the task's steps, seed 0, the best device, runs/<task>, afresh."""
    args = parse_args(["--task", "reverse"])
    assert args.task == "reverse"
    assert args.steps is None and args.seed == 0 and args.device == "auto"
    assert args.out is None and args.resume is False and args.set == []
    args = parse_args(["--task", "reverse", "--resume", "--out", "r1", "--set", "a=1",
                       "--set", "b=2", "--seed", "3", "--steps", "7"])  # fmt: skip
    assert args.resume is True and args.out == Path("r1") and args.set == ["a=1", "b=2"]
    assert args.seed == 3 and args.steps == 7


def test_an_unknown_setting_is_quoted_back():
    with pytest.raises(UsageError) as error:
        _parse_override("depth=3", dict(CONFIGS["reverse"]))
    message = str(error.value)
    assert "KEY one of: batch_size, bf16, checkpoint_every, clip_norm, d_ff" in message
    assert message.endswith("got 'depth=3'")


@pytest.mark.parametrize(
    "value, expected",
    [("true", True), ("TRUE", True), ("True", True), ("1", True), ("false", False),
     ("False", False), ("0", False)],
)  # fmt: skip
def test_a_boolean_setting_takes_true_false_1_0_in_any_case(value, expected):
    key, parsed = _parse_override(f"norm_first={value}", dict(CONFIGS["reverse"]))
    assert key == "norm_first" and parsed is expected


@pytest.mark.parametrize("value", ["maybe", "yes", "2", ""])
def test_a_boolean_setting_refuses_anything_else(value):
    # bool("maybe") would be True: a typo must not switch the setting on
    with pytest.raises(UsageError, match="--set norm_first= expects true or false"):
        _parse_override(f"norm_first={value}", dict(CONFIGS["reverse"]))


def test_noam_lr_names_the_bad_d_model():
    with pytest.raises(ValueError) as error:
        noam_lr(1, 0, 4)
    assert str(error.value) == "d_model must be a positive int, got 0"


# ------------------------------------------------------------------- resuming ------


@pytest.mark.usefixtures("one_thread")
def test_a_resume_may_change_steps_checkpoints_and_eval_batches_only(capsys, tmp_path, trained):
    """How far to train, how often to save and how many sentences to decode at once change
    nothing in the steps both runs take: a resume may change them. Anything else (here
    warmup) would give other steps than the checkpoint's: refused."""
    out = _copy(trained, tmp_path).parent
    before = out.joinpath("checkpoint.pt").read_bytes()
    status, _, err = _run(
        capsys, "--task", "reverse", "--steps", "6", "--out", str(out), "--resume", *TINY,
        "--set", "warmup=5",
    )  # fmt: skip
    assert status == 2 and "warmup=4 (this run: 5)" in err
    assert out.joinpath("checkpoint.pt").read_bytes() == before
    status, metrics, err = _run(
        capsys, "--task", "reverse", "--steps", "6", "--out", str(out), "--resume", *TINY,
        "--set", "checkpoint_every=3", "--set", "eval_batch_size=1000",
    )  # fmt: skip
    assert status == 0, err
    assert "resuming" in err and metrics["steps"] == 6
    config = torch.load(out / "checkpoint.pt", weights_only=True)["config"]
    assert config["checkpoint_every"] == 3 and config["eval_batch_size"] == 1000


def test_a_missing_checkpoint_is_named(tmp_path):
    path = tmp_path / "checkpoint.pt"
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "reverse", 0, dict(CONFIGS["reverse"]), "cpu")
    assert str(error.value) == (
        f"--resume: there is no checkpoint at {path} (run without --resume)"
    )


def test_an_unreadable_checkpoint_is_named_with_the_reason(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "reverse", 0, dict(CONFIGS["reverse"]), "cpu")
    message = str(error.value)
    assert message.startswith(f"--resume: cannot read {path} as a checkpoint (")
    assert message.endswith("); it was left untouched")
    with pytest.raises(Exception) as reason:  # what torch.load itself says about the file
        torch.load(path, weights_only=True)
    assert f"as a checkpoint ({reason.value}); it was left" in message
    assert path.read_bytes() == b"not a checkpoint"


RAN = []  # what a file's pickled code did when it was loaded


def _record(what):
    RAN.append(what)
    return what


class _RunsCodeWhenLoaded:
    """A pickled object whose loading calls a function: what a malicious file would do."""

    def __reduce__(self):
        return _record, ("code from the file ran",)


def test_resuming_never_runs_code_from_the_file(tmp_path, trained):
    """torch.load(weights_only=True): a checkpoint holding anything but tensors and plain
    containers is refused, unloaded, even when it is otherwise complete and matching."""
    checkpoint = torch.load(trained, weights_only=True)
    checkpoint["losses"] = _RunsCodeWhenLoaded()
    path = tmp_path / "checkpoint.pt"
    torch.save(checkpoint, path)
    RAN.clear()
    with pytest.raises(UsageError, match=f"cannot read {path} as a checkpoint"):
        _load_for_resume(path, "reverse", 0, _config_of(trained), "cpu")
    assert RAN == []


def test_a_foreign_file_is_named_with_what_it_lacks(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 3, "model": {}}, path)
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "reverse", 0, dict(CONFIGS["reverse"]), "cpu")
    assert str(error.value) == (
        f"--resume: {path} is not a checkpoint of course.train (it lacks config, epoch, "
        "losses, optimizer, position, rng, scheduler, seed, task, train_seconds); it was "
        "left untouched"
    )


def test_another_runs_checkpoint_is_named_with_every_difference(tmp_path, trained):
    path = _copy(trained, tmp_path)
    config = {**_config_of(trained), "d_model": 32, "warmup": 9}
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "toy-translation", 2, config, "cpu")
    assert str(error.value) == (
        f"--resume: {path} was written by another run: task 'reverse' (this run: "
        "'toy-translation'); seed 0 (this run: 2); d_model=16 (this run: 32); warmup=4 "
        "(this run: 9). Resume with the same task, seed and configuration, or train afresh "
        "in another --out folder. The checkpoint was left untouched."
    )


def test_a_checkpoint_from_before_a_setting_existed_is_refused(tmp_path, trained):
    """A checkpoint saved before `positions` existed lacks it: that run was not this one
    (its default may have been another), so resuming it is refused, naming the key."""
    ours = _config_of(trained)
    checkpoint = torch.load(trained, weights_only=True)
    del checkpoint["config"]["positions"]
    path = tmp_path / "checkpoint.pt"
    torch.save(checkpoint, path)
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "reverse", 0, ours, "cpu")
    assert "positions=None (this run: 'sinusoidal')" in str(error.value)
    assert str(error.value).startswith(f"--resume: {path} was written by another run: ")


def test_a_checkpoint_past_the_steps_asked_is_named(tmp_path, trained):
    path = _copy(trained, tmp_path)
    config = {**_config_of(trained), "steps": 3}
    with pytest.raises(UsageError) as error:
        _load_for_resume(path, "reverse", 0, config, "cpu")
    assert str(error.value) == (
        f"--resume: {path} is at step 4, past --steps 3. The checkpoint was left untouched."
    )
    # at exactly its step: accepted (the run only evaluates)
    assert _load_for_resume(path, "reverse", 0, {**config, "steps": 4}, "cpu")["step"] == 4


# ------------------------------------------------------- the settings run() takes --


@pytest.fixture
def accepted(monkeypatch):
    """accepted(*argv) -> the configuration run() would train with, training nothing.

    run() checks the settings, then starts the process group and trains: both replaced.
    """
    seen = {}

    def stand_in(args, config, device, processes):
        seen["config"] = config
        return "trained"

    monkeypatch.setattr(train, "_train_and_evaluate", stand_in)
    monkeypatch.setattr(train.Processes, "group", lambda self, device: contextlib.nullcontext())

    def call(*argv: str) -> dict:
        assert train.run(parse_args(["--task", "reverse", "--device", "cpu", *argv])) == "trained"
        return seen["config"]

    return call


@pytest.mark.parametrize("key", ["batch_size", "warmup", "checkpoint_every", "eval_batch_size"])
def test_counts_of_1_are_accepted(accepted, key):
    assert accepted("--set", f"{key}=1")[key] == 1


def test_one_step_is_accepted(accepted):
    assert accepted("--steps", "1")["steps"] == 1


@pytest.mark.parametrize(
    "setting, key, value",
    [("label_smoothing=0", "label_smoothing", 0.0),  # plain cross-entropy
     ("clip_norm=0", "clip_norm", 0.0),  # no clipping
     ("clip_norm=0.5", "clip_norm", 0.5),
     ("lr_factor=1e-9", "lr_factor", 1e-9)],  # tiny, but a rate
)  # fmt: skip
def test_the_edges_of_the_allowed_ranges_are_accepted(accepted, setting, key, value):
    assert accepted("--set", setting)[key] == value


def test_label_smoothing_of_1_is_refused(accepted):
    # 1.0 would spread all the target mass uniformly: nothing left to learn
    with pytest.raises(UsageError) as error:
        accepted("--set", "label_smoothing=1")
    assert str(error.value) == "label_smoothing must be in [0, 1), got 1.0"


def test_under_torchrun_the_batch_needs_a_row_per_process(accepted, monkeypatch):
    """batch_size is the global batch, split across the processes: at least one row each."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert accepted("--set", "batch_size=2")["batch_size"] == 2
    with pytest.raises(UsageError) as error:
        accepted("--set", "batch_size=1")
    assert str(error.value) == (
        "batch_size is the global batch, split across the 2 processes: it must be at least 2, got 1"
    )
