"""`python -m course.train --task lm-en` (lesson 12) on the tests' sample of the Tatoeba
file: a tiny language model trained for a few steps, its perplexity beside the baselines',
and a checkpoint that `python -m course.generate` reads."""

import json

import pytest
import torch

from course import lm, train
from course.generate import main as generate_main

TINY = ("--set", "d_model=16", "--set", "n_heads=2", "--set", "n_layers=1", "--set", "d_ff=32",
        "--set", "vocab_size=300", "--set", "time_budget=0", "--set", "warmup=5",
        "--set", "lr=0.01")  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm-en")
    return out, ["--task", "lm-en", "--steps", "25", "--out", str(out), *TINY]


def test_it_trains_and_prints_perplexities_as_the_last_json_line(run, capsys, one_thread):
    out, argv = run
    assert train.main(argv) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    metrics = json.loads(printed[-1])
    assert printed[-2].startswith("lm-en: perplexity ")
    assert metrics["task"] == "lm-en" and metrics["steps"] == 25
    for key in ("perplexity", "bigram_perplexity", "unigram_perplexity"):
        assert 1 < metrics[key] < metrics["vocab_size"] * 2, (key, metrics)
    assert metrics["bigram_perplexity"] < metrics["unigram_perplexity"]
    assert set(metrics["examples"]) == set(train.LM_PROMPTS)
    assert json.loads((out / "metrics.json").read_text()) == metrics
    assert json.loads((out / "config.json").read_text())["d_model"] == 16
    model, vocab, extra = lm.load_lm(out / "checkpoint.pt")
    assert extra["task"] == "lm-en" and extra["steps"] == 25 and len(vocab) <= 300
    data = lm.load_lm_data(seed=0, vocab_size=300)
    assert lm.perplexity(model, data.test) == pytest.approx(metrics["perplexity"], abs=1e-3)


def test_generate_reads_its_checkpoint(run, capsys):
    out, argv = run
    if not (out / "checkpoint.pt").exists():  # run alone (pytest -k): train it here
        assert train.main(argv) == 0
        capsys.readouterr()
    assert generate_main(["--checkpoint", str(out / "checkpoint.pt"), "--prompt", "I'm"]) == 0
    assert capsys.readouterr().out.startswith("I'm")


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--resume",), "--resume is not supported for lm-en"),
        (("--model", "tutorial-gru"), "is for the translation tasks"),
        (("--set", "depth=3"), "--set expects KEY=VALUE"),
        (("--set", "n_heads=3"), "the configuration cannot build a model"),
        (("--set", "threads=-1"), "threads must be an int, at least 0 (0: the course's), got -1"),
    ],
)
def test_bad_settings_get_a_message(tmp_path, capsys, extra, message):
    argv = ["--task", "lm-en", "--steps", "1", "--out", str(tmp_path), *TINY, *extra]
    assert train.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_task_is_a_choice_of_the_command_line_and_has_a_config():
    assert "lm-en" in train.TASKS and "lm-en" in train.CONFIGS
    assert train.CONFIGS["lm-en"]["time_budget"] <= 600


def test_its_torch_threads_are_its_own(tmp_path, capsys):
    """CONFIGS["lm-en"]["threads"] sets torch's threads for the run, and the caller gets
    its own number back afterwards."""
    before = torch.get_num_threads()
    argv = ["--task", "lm-en", "--steps", "2", "--out", str(tmp_path), *TINY, "--set", "threads=3"]
    assert train.main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["threads"] == 3
    assert torch.get_num_threads() == before
