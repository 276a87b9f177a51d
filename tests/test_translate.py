"""python -m course.translate: a checkpoint of the real task, your own sentence, clear errors.
The model is trained for a moment on tests/_tatoeba_sample.py's generated pairs."""

from __future__ import annotations

import json

import pytest
import torch

from course import translate as translating
from course.train import main as train_main
from course.translate import TranslateError, load, main, translate


@pytest.fixture(scope="module", params=["transformer", "tutorial-gru"])
def checkpoint(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    argv = ["--task", "fra-eng", "--device", "cpu", "--out", str(out), "--model", request.param,
            "--set", "time_budget=0", "--steps", "60", "--set", "beam_size=1"]  # fmt: skip
    assert train_main(argv) == 0
    return out / "checkpoint.pt"


def test_a_sentence_is_normalized_like_the_training_pairs(checkpoint):
    model, task = load(checkpoint)
    raw = translate(model, task, "Vous êtes très fatigué!")
    assert raw.source_words == ["vous", "etes", "tres", "fatigue", "!", "<eos>"]
    assert raw.unknown == []
    again = translate(model, task, "vous etes tres fatigue !")
    assert again.text == raw.text and again.output_words == raw.output_words
    assert raw.text == task.detokenize([w for w in raw.output_words if w != "<eos>"])


def test_the_attention_has_a_row_per_output_word_and_a_column_per_source_word(checkpoint):
    model, task = load(checkpoint)
    result = translate(model, task, "nous sommes en retard .", beam=2)
    assert result.attention.shape == (len(result.output_words), len(result.source_words))
    assert torch.allclose(result.attention.sum(dim=-1), torch.ones(len(result.output_words)))


def test_the_command_prints_the_translation_and_saves_the_map(checkpoint, tmp_path, capsys):
    png = tmp_path / "map.png"
    status = main(["--checkpoint", str(checkpoint), "--attention", str(png), "je suis prêt ."])
    out, err = capsys.readouterr()
    model, task = load(checkpoint)
    assert status == 0 and out == translate(model, task, "je suis prêt .").text + "\n"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "saved to" in err


def test_an_unknown_word_is_read_as_unk_and_said(checkpoint, capsys):
    assert main(["--checkpoint", str(checkpoint), "je suis xylophone ."]) == 0
    out, err = capsys.readouterr()
    model, task = load(checkpoint)
    assert out == translate(model, task, "je suis <unk> .").text + "\n"
    assert "read as <unk>: xylophone" in err


@pytest.mark.parametrize(
    ("sentence", "message"),
    [
        ("", "give a sentence to translate"),
        ("   ", "give a sentence to translate"),
        ("123 ,,,", "nothing is left of '123 ,,,' once normalized"),
        ("je suis " + "tres " * 20 + "fatigue .", "24 words is too long for this model"),
    ],
)
def test_a_bad_sentence_gets_a_message_not_a_traceback(checkpoint, capsys, sentence, message):
    assert main(["--checkpoint", str(checkpoint), sentence]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_beam_or_checkpoint_gets_a_message(checkpoint, tmp_path, capsys):
    assert main(["--checkpoint", str(checkpoint), "--beam", "0", "je suis prêt ."]) == 2
    assert "--beam must be a positive int" in capsys.readouterr().err
    assert main(["--checkpoint", str(tmp_path / "none.pt"), "je suis ."]) == 2
    assert "there is no checkpoint at" in capsys.readouterr().err
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    assert main(["--checkpoint", str(junk), "je suis ."]) == 2
    assert "cannot read" in capsys.readouterr().err
    other = tmp_path / "other.pt"
    torch.save({"task": "reverse", "seed": 0, "config": {}, "model": {}}, other)
    with pytest.raises(TranslateError, match="not on real sentences"):
        translating.load(other)
    metrics = json.loads((checkpoint.parent / "metrics.json").read_text())
    assert metrics["task"] == "fra-eng"


def test_device_mps_whose_loss_is_wrong_translates_on_the_cpu(checkpoint, capsys, monkeypatch):
    """--device: a device that is not here is refused; on "MPS" (the CPU, its loss
    perturbed: tests/test_device.py) the loss on the first held-out pairs is compared with
    the CPU's, and a wrong one sends the sentence to the CPU, said in one line."""
    from course import utils

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--checkpoint", str(checkpoint), "--device", "cuda", "je suis prêt ."]) == 2
    assert "--device cuda: no CUDA GPU is available here" in capsys.readouterr().err
    real = utils._loss_on

    def loss_on(model, loss_fn, batch, where):
        return real(model, loss_fn, batch, torch.device("cpu")) * (5 if where.type == "mps" else 1)

    monkeypatch.setattr(utils, "mps_available", lambda: True)
    monkeypatch.setattr(utils, "_loss_on", loss_on)
    assert main(["--checkpoint", str(checkpoint), "--device", "auto", "je suis prêt ."]) == 0
    out, err = capsys.readouterr()
    model, task = load(checkpoint)
    assert out == translate(model, task, "je suis prêt .").text + "\n"
    assert "mps gave a loss of" in err and "using the CPU instead" in err
