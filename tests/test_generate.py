"""`python -m course.generate`: continuations from a tiny language model trained for a
few steps on the tests' sample of the Tatoeba file."""

import subprocess
import sys

import pytest
import torch

from course import lm
from course.generate import continuations, main


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    data = lm.load_lm_data(seed=0, vocab_size=300, test_fraction=0.1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = lm.LanguageModel(len(data.vocab), d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                 dropout=0.0, max_len=24)  # fmt: skip
        lm.train_lm(model, data.train, steps=40, batch_size=16, lr=1e-2)
    return lm.save_lm(tmp_path_factory.mktemp("lm") / "checkpoint.pt", model.eval(), data.vocab)


def run(capsys, checkpoint, *args):
    status = main(["--checkpoint", str(checkpoint), *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_it_prints_one_continuation_per_sample_starting_with_the_prompt(checkpoint, capsys):
    status, out, err = run(capsys, checkpoint, "--prompt", "I'm", "--samples", "3", "--seed", "1")
    lines = out.splitlines()
    assert status == 0 and len(lines) == 3, (out, err)
    assert all(line.startswith("I'm") for line in lines)


def test_the_same_seed_gives_the_same_text_and_greedy_ignores_it(checkpoint, capsys):
    args = ("--prompt", "She is", "--top-k", "5", "--top-p", "0.9", "--temperature", "0.8")
    first = run(capsys, checkpoint, *args, "--seed", "4", "--samples", "4")[1]
    assert run(capsys, checkpoint, *args, "--seed", "4", "--samples", "4")[1] == first
    greedy = [run(capsys, checkpoint, "--prompt", "She is", "--temperature", "0", "--seed", s)[1]
              for s in ("1", "2")]  # fmt: skip
    assert greedy[0] == greedy[1]


def test_the_prompt_is_normalized_like_the_training_sentences(checkpoint):
    model, vocab, _ = lm.load_lm(checkpoint)
    texts = continuations(model, vocab, "  I\u2019m  ", temperature=0.0, max_new_tokens=3)
    assert texts[0].startswith("I'm")


def test_max_new_tokens_bounds_the_continuation(checkpoint):
    model, vocab, _ = lm.load_lm(checkpoint)
    text = continuations(model, vocab, "I'm", temperature=1.0, max_new_tokens=1, seed=0)[0]
    assert len(vocab.encode(text)) <= len(vocab.encode("I'm")) + 1
    # more than the model's positions: cut to what fits, no error
    assert continuations(model, vocab, "I'm", temperature=1.0, max_new_tokens=500)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--prompt", ""), "give a prompt to continue"),
        (("--prompt", "   "), "give a prompt to continue"),
        (("--prompt", "I'm ☃"), "cannot encode (they would be <unk>): '☃'"),
        (("--prompt", "I'm", "--temperature", "-1"), "--temperature must be a number >= 0"),
        (("--prompt", "I'm", "--top-p", "0"), "--top-p must be in (0, 1]"),
        (("--prompt", "I'm", "--top-p", "1.5"), "--top-p must be in (0, 1]"),
        (("--prompt", "I'm", "--top-k", "0"), "--top-k must be an int >= 1"),
        (("--prompt", "I'm", "--max-new-tokens", "0"), "--max-new-tokens must be at least 1"),
        (("--prompt", "I'm " * 30), "shorten it"),
    ],
)
def test_bad_input_gets_a_message_and_status_2(checkpoint, capsys, args, message):
    status, out, err = run(capsys, checkpoint, *args)
    assert status == 2 and out == "", (out, err)
    assert message in err and err.startswith("python -m course.generate: error: "), err


def test_a_missing_or_foreign_checkpoint_gets_a_message(tmp_path, capsys):
    status, _, err = run(capsys, tmp_path / "none.pt", "--prompt", "I am")
    assert status == 2 and "there is no checkpoint at" in err and "--task lm-en" in err
    junk = tmp_path / "junk.pt"
    torch.save({"task": "reverse"}, junk)
    status, _, err = run(capsys, junk, "--prompt", "I am")
    assert status == 2 and "is not a language-model checkpoint" in err


def test_the_command_line_exits_2_without_a_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "course.generate", "--checkpoint", str(tmp_path / "no.pt"),
         "--prompt", "I am", "--top-p", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--top-p must be in (0, 1]" in result.stderr


def test_device_mps_whose_loss_is_wrong_generates_on_the_cpu(checkpoint, capsys, monkeypatch):
    """--device: a device that is not here is refused; on "MPS" (the CPU, its loss
    perturbed: tests/test_device.py) the model's loss on the prompt is compared with the
    CPU's, and a wrong one sends the generation to the CPU, said in one line."""
    from course import utils

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    status, out, err = run(capsys, checkpoint, "--prompt", "I am", "--device", "cuda")
    assert status == 2 and "--device cuda: no CUDA GPU is available here" in err
    status, on_cpu, _ = run(capsys, checkpoint, "--prompt", "I am", "--samples", "2")
    real = utils._loss_on

    def loss_on(model, loss_fn, batch, where):
        return real(model, loss_fn, batch, torch.device("cpu")) * (5 if where.type == "mps" else 1)

    monkeypatch.setattr(utils, "mps_available", lambda: True)
    monkeypatch.setattr(utils, "_loss_on", loss_on)
    status, out, err = run(capsys, checkpoint, "--prompt", "I am", "--samples", "2",
                           "--device", "auto")  # fmt: skip
    assert status == 0 and out == on_cpu
    assert "mps gave a loss of" in err and "using the CPU instead" in err
