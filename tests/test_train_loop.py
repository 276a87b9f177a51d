"""course.train's loop against one written out by hand, its progress bars, its scores and
its file writes: the pieces under `python -m course.train` that lesson 09 uses directly."""

import json
import math
import os
import re

import pytest
import sacrebleu
import torch
import torch.nn.functional as F
from torch import nn

import course.train as train
from course.data import EOS_ID, PAD_ID, load_task

V = 5  # a vocabulary of five tokens


class Bigram(nn.Module):
    """The smallest model with train_steps' interface: logits for each target position
    from the token fed at that position (src is ignored)."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.embed = nn.Parameter(4 * torch.randn(V, 3, generator=gen))
        self.out = nn.Parameter(4 * torch.randn(3, V, generator=gen))

    def forward(self, src, tgt_in):
        return self.embed[tgt_in] @ self.out  # (B, T, V)


def _batches(n: int):
    gen = torch.Generator().manual_seed(1)
    return [
        (torch.zeros(2, 1, dtype=torch.long), torch.randint(V, (2, 3), generator=gen),
         torch.randint(V, (2, 3), generator=gen))
        for _ in range(n)
    ]  # fmt: skip


def _by_hand(batches, lr: float, clip_norm: float):
    """The steps written out: mean cross-entropy, its gradient, the gradient's global norm
    scaled down to clip_norm when above it (as torch's clip_grad_norm_: by
    clip_norm / (norm + 1e-6)), then plain gradient descent."""
    model = Bigram()
    params = [model.embed, model.out]
    norms = []
    for _, tgt_in, tgt_out in batches:
        loss = F.cross_entropy(model(None, tgt_in).reshape(-1, V), tgt_out.reshape(-1))
        grads = torch.autograd.grad(loss, params)
        norm = math.sqrt(sum((g**2).sum().item() for g in grads))
        norms.append(norm)
        scale = min(1.0, clip_norm / (norm + 1e-6)) if clip_norm > 0 else 1.0
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= lr * scale * g
    return model, norms


def _with_train_steps(batches, lr: float, **kwargs):
    model = Bigram()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    log = train.train_steps(model, iter(batches), optimizer, nn.CrossEntropyLoss(),
                            len(batches), progress=False, **kwargs)  # fmt: skip
    return model, log


@pytest.mark.parametrize("clip_norm", [0.0, 0.05, 100.0, None])
def test_train_steps_takes_the_steps_written_out_by_hand(clip_norm):
    batches = _batches(4)
    kwargs = {} if clip_norm is None else {"clip_norm": clip_norm}  # None: the default, 0
    got, log = _with_train_steps(batches, 2.0, **kwargs)
    want, norms = _by_hand(batches, 2.0, clip_norm or 0.0)
    assert min(norms) > 1.0  # every step's gradient is longer than 1: clipping would show
    torch.testing.assert_close(got.embed, want.embed, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got.out, want.out, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got.embed, Bigram().embed)  # it did learn
    assert log.step == 4 and len(log.losses) == 4


def test_train_steps_messages_name_the_value_that_came(capsys):
    model = Bigram()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=re.escape("got -1")):
        train.train_steps(model, iter([]), sgd, nn.CrossEntropyLoss(), -1)
    with pytest.raises(ValueError, match=re.escape("got 0")):
        train.train_steps(model, iter([]), sgd, nn.CrossEntropyLoss(), 3, time_budget=0)


def test_the_progress_bar_by_default(monkeypatch):
    """train_steps' bar: on stderr, called "train", counting up to `steps` from
    `start_step`, redrawn at most every 0.1 s, unless progress=False."""
    made = []

    def spy(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    real = train.tqdm
    monkeypatch.setattr(train, "tqdm", spy)
    model = Bigram()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    train.train_steps(model, iter(_batches(3)), sgd, nn.CrossEntropyLoss(), 3, start_step=1)
    (bar,) = made
    assert bar["desc"] == "train" and bar["total"] == 3 and bar["initial"] == 1
    assert bar["mininterval"] == 0.1 and bar["disable"] is False
    assert bar["file"] is train.sys.stderr


def test_the_bar_shows_the_last_loss_and_the_next_rate_and_no_more_redraws(capsys):
    model = Bigram()
    sgd = torch.optim.SGD(model.parameters(), lr=0.25)
    log = train.train_steps(model, iter(_batches(6)), sgd, nn.CrossEntropyLoss(), 6,
                            desc="bigram", progress_every=1e6)  # fmt: skip
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]  # the bar as it was left
    assert last.startswith("bigram: 100%") and "6/6" in last
    assert f"loss={log.losses[-1]:.3f}, lr={0.25:.2e}" in last
    # drawn when it starts and when it closes; no step forces a redraw inside 1e6 s
    assert err.count("\r") == 2 and err.endswith("\n")


# ----------------------------------------------------------------- evaluate ------


def _oracle_decoder(task, pairs):
    def decode(model, src, max_len, bos_id, eos_id):
        rows = [task.tgt_vocab.encode(target) + [EOS_ID] for _, target in pairs[: len(src)]]
        out = torch.full((len(rows), max_len), PAD_ID)
        for b, row in enumerate(rows):
            out[b, : len(row)] = torch.tensor(row)
        del pairs[: len(src)]
        return out

    return decode


def test_evaluate_puts_the_model_in_eval_mode_and_shows_a_bar_it_then_erases(capsys):
    task = load_task("reverse")
    pairs = task.test[:7]
    model = nn.Dropout(0.5)  # anything with a train mode
    modes = []

    def decode(model, src, max_len, bos_id, eos_id):
        modes.append(model.training)
        return _oracle_decoder(task, remaining)(model, src, max_len, bos_id, eos_id)

    remaining = list(pairs)
    results = train.evaluate(model, task, "cpu", 4, pairs=pairs, decode=decode)
    assert modes == [False, False] and not model.training
    assert results["exact_match"] == 1.0
    err = capsys.readouterr().err
    assert re.search(r"(^|\r)evaluate: .* 0/2 ", err)  # ceil(7 / 4) = 2 batches, known ahead
    assert err.split("\r")[-1].strip() == ""  # leave=False: the line is cleared at the end
    remaining = list(pairs)
    train.evaluate(model, task, "cpu", 4, pairs=pairs, decode=decode, progress=False)
    assert capsys.readouterr().err == ""


def test_corpus_scores_messages_and_rounding():
    with pytest.raises(ValueError, match=re.escape("got 1 and 2")):
        train.corpus_scores([["a"]], [["a"], ["b"]])
    hypotheses = [["a", "b", "c", "d", "e", "z", "g"]]
    references = [["a", "b", "c", "d", "e", "f", "g"]]
    joined = [" ".join(h) for h in hypotheses], [[" ".join(r) for r in references]]
    exact = sacrebleu.corpus_bleu(*joined, tokenize="none").score
    assert round(exact, 3) != round(exact, 2)  # 64.3459: the third decimal shows
    assert train.corpus_scores(hypotheses, references)["bleu"] == round(exact, 2)


# ------------------------------------------------------------- writing files ------


def test_a_file_is_written_whole_under_a_hidden_unique_name_then_renamed(monkeypatch, tmp_path):
    """The temporary file: beside the target (one file system, so the rename is atomic),
    hidden (a leading dot), named after the target, this process and a random token (two
    writers never share one), flushed and fsynced before the rename (after a crash the
    renamed file is complete)."""
    renamed, synced = [], []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(source, target):
        renamed.append(source)
        real_replace(source, target)

    def fsync(fd):
        synced.append(renamed[-1] if renamed else None)
        assert len(os.read(os.open(temporaries()[0], os.O_RDONLY), 100)) == 13  # flushed
        real_fsync(fd)

    def temporaries():
        return [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    monkeypatch.setattr(train.os, "replace", replace)
    monkeypatch.setattr(train.os, "fsync", fsync)
    target = tmp_path / "notes.txt"
    for _ in range(2):
        train._write_atomically(target, lambda file: file.write(b"hello, world\n"))
    assert target.read_bytes() == b"hello, world\n" and temporaries() == []
    assert len(synced) == 2  # one fsync per write, before its rename
    first, second = renamed
    assert first != second and first.parent == target.parent
    for name in (first.name, second.name):
        assert re.fullmatch(rf"\.notes\.txt\.{os.getpid()}\.[0-9a-f]{{8}}\.tmp", name), name


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_behind(tmp_path):
    """An error (or Ctrl-C) while writing: the old checkpoint is still whole and readable,
    and the half-written temporary file is removed, not left to fill the run's folder."""
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"the old checkpoint")

    def half_then_stop(file):
        file.write(b"half of a new one")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train._write_atomically(target, half_then_stop)
    assert target.read_bytes() == b"the old checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_json_files_are_indented_by_two_and_end_with_a_newline(tmp_path):
    data = {"task": "reverse", "sizes": [1, 2]}
    train._write_json(tmp_path / "config.json", data)
    assert (tmp_path / "config.json").read_text() == json.dumps(data, indent=2) + "\n"
    assert '\n  "task"' in (tmp_path / "config.json").read_text()


def test_each_epochs_shuffle_comes_from_the_documented_seed():
    """_epoch_generator(seed, epoch) seeds with seed * 1_000_003 + epoch: the data order of
    every recorded run (docs/training.md's tables, lesson 09's curves) depends on exactly this."""
    for seed, epoch in ((0, 0), (0, 1), (1, 0), (1, 3), (7, 2)):
        got = torch.randperm(50, generator=train._epoch_generator(seed, epoch))
        want = torch.randperm(50, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        assert torch.equal(got, want), (seed, epoch)
