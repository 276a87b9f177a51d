"""course.train on the real task (fra-eng): time budgets, text scores, beam beside greedy,
the tutorial's GRU as --model. The data is tests/_tatoeba_sample.py's generated file."""

from __future__ import annotations

import json

import pytest
import torch

from course import train
from course.data import BOS_ID, EOS_ID, load_task
from course.train import main, text_scores


def _run(capsys, *argv):
    status = main(["--task", "fra-eng", "--device", "cpu", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_text_scores_compare_detokenized_text_with_sacrebleus_13a():
    # 13a splits "tired." into "tired ." on both sides, so BLEU and chrF do not care how the
    # text was tokenized; exact match compares the strings themselves.
    scores = text_scores(["i m tired.", "he is late!"], ["i m tired .", "he is late!"])
    assert scores == {"exact_match": 0.5, "bleu": 100.0, "chrf": 100.0}
    worse = text_scores(["i m tired.", "he is tall!"], ["i m tired.", "he is late!"])
    assert worse["exact_match"] == 0.5 and worse["bleu"] < 100 and worse["chrf"] < 100
    with pytest.raises(ValueError, match="as many hypotheses as references"):
        text_scores(["a"], [])


def test_evaluate_scores_the_real_task_against_its_reference_text():
    task = load_task("fra-eng", seed=0)
    answers = {source: target for source, target in task.test}

    def oracle(model, src, max_len, bos_id, eos_id):  # writes each reference's words
        rows = []
        for row in src.tolist():
            words = [task.src_vocab.itos[i] for i in row if i not in (0, EOS_ID)]
            rows.append(task.tgt_vocab.encode(answers[tuple(words)]) + [EOS_ID])
        longest = max(map(len, rows))
        return torch.tensor([r + [0] * (longest - len(r)) for r in rows])

    results = train.evaluate(torch.nn.Linear(1, 1), task, "cpu", 16, decode=oracle)
    assert results["n_test"] == len(task.test)
    assert results["exact_match"] == 1.0 and results["bleu"] == 100.0 and results["chrf"] == 100.0
    assert results["examples"][0]["reference"] == task.references[0]  # text, not words
    assert results["examples"][0]["output"] == task.references[0]
    assert BOS_ID not in task.tgt_vocab.encode(task.test[0][1])


def test_the_real_task_trains_for_its_time_budget_and_reports_beam_and_greedy(capsys, tmp_path):
    status, out, _ = _run(capsys, "--out", str(tmp_path), "--set", "time_budget=1.5",
                          "--set", "beam_size=2", "--set", "eval_batch_size=64")  # fmt: skip
    metrics = json.loads(out.splitlines()[-1])
    assert status == 0
    assert metrics["train_seconds"] >= 1.5  # it stopped after the step that crossed the budget,
    assert 1 <= metrics["steps"] < train.CONFIGS["fra-eng"]["steps"]  # not at the step ceiling
    assert metrics["decoding"] == "beam 2" and metrics["architecture"] == "transformer"
    assert metrics["bleu_tokenize"] == "13a" and 0 <= metrics["chrf"] <= 100
    assert set(metrics["greedy"]) == {"exact_match", "bleu", "chrf"}
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics


def test_a_resumed_run_whose_budget_is_spent_takes_no_step(capsys, tmp_path):
    argv = ("--out", str(tmp_path), "--set", "time_budget=1", "--set", "beam_size=1")
    _run(capsys, *argv)
    first = json.loads((tmp_path / "metrics.json").read_text())
    status, out, err = _run(capsys, *argv, "--resume")
    again = json.loads(out.splitlines()[-1])
    assert status == 0 and again["steps"] == first["steps"]
    assert "evaluating" in err


def test_the_tutorial_gru_trains_with_its_own_recipe(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, _ = _run(capsys, "--model", "tutorial-gru", "--set", "time_budget=1")
    metrics = json.loads(out.splitlines()[-1])
    assert status == 0 and metrics["architecture"] == "tutorial-gru"
    assert metrics["decoding"] == "greedy"
    config = json.loads((tmp_path / "runs" / "fra-eng-tutorial-gru" / "config.json").read_text())
    assert {k: config[k] for k in train.MODELS["tutorial-gru"]} == train.MODELS["tutorial-gru"]
    task = load_task("fra-eng")
    gru = train.build_model(task, config)
    assert type(gru).__name__ == "TutorialSeq2Seq" and gru.d_hidden == 128


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("time_budget=-1", "time_budget must be at least 0 seconds (0: no limit), got -1.0"),
        ("schedule=cosine", "schedule must be 'noam' or 'constant', got 'cosine'"),
        ("lr=0", "lr must be greater than 0, got 0.0"),
        ("beam_size=0", "beam_size must be at least 1 (1: greedy decoding), got 0"),
        ("architecture=lstm", "architecture must be 'transformer' or 'tutorial-gru'"),
    ],
)
def test_bad_real_task_settings_are_usage_errors(capsys, tmp_path, setting, message):
    status, _, err = _run(capsys, "--out", str(tmp_path), "--set", setting)
    assert status == 2 and message in err


def test_the_constant_schedule_keeps_its_rate():
    task = load_task("fra-eng")
    config = {**train.CONFIGS["fra-eng"], **train.MODELS["tutorial-gru"]}
    optimizer, scheduler = train.build_optimizer(train.build_model(task, config), config)
    rates = []
    for _ in range(3):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == [1e-3, 1e-3, 1e-3]


def test_a_time_budget_is_refused_under_torchrun(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    status, _, err = _run(capsys, "--out", str(tmp_path))
    assert status == 2 and "pass --set time_budget=0 and --steps N" in err
    assert not (tmp_path / "config.json").exists()
