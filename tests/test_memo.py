"""course/memo.py: under `make test`, the learner and the solution notebook of a lesson run the
same training; the second takes the first's end state. A reused run must be the run itself
(every weight, the optimizer, the scheduler, torch's random state, the log and where the
batches stopped), and any input that differs must train afresh."""

import itertools

import pytest
import torch

from course import lm, memo, train
from course.data import PAD_ID, load_task
from course.train import CONFIGS, build_optimizer, training_batches

pytestmark = pytest.mark.usefixtures("one_thread")


def setup(seed=0, warmup=4, smoothing=0.1):
    """What lesson 11's training cell builds, small: model, optimizer, scheduler, loss, batches."""
    torch.manual_seed(seed)
    task = load_task("reverse")
    config = {**CONFIGS["reverse"], "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32,
              "dropout": 0.1, "warmup": warmup}  # fmt: skip
    model = train.build_model(task, config)
    optimizer, scheduler = build_optimizer(model, config)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=PAD_ID)
    batches = (batch for _, _, batch in training_batches(task, 16, seed, 0, 0))
    return model, optimizer, scheduler, criterion, batches


def run(parts, steps=6, **kwargs):
    model, optimizer, scheduler, criterion, batches = parts
    log = train.train_steps(model, batches, optimizer, criterion, steps, scheduler=scheduler,
                            clip_norm=1.0, progress=False, **kwargs)  # fmt: skip
    return dict(
        log=log,
        weights={k: v.clone() for k, v in model.state_dict().items()},
        adam=optimizer.state_dict(),
        lr=optimizer.param_groups[0]["lr"],
        scheduler_step=scheduler.last_epoch,
        rng=torch.get_rng_state(),
        next_batch=next(batches),  # where the batches stopped
        training=model.training,
    )


def same(a, b):
    assert a["log"].losses == b["log"].losses and a["log"].step == b["log"].step
    assert a["weights"].keys() == b["weights"].keys()
    assert all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
    for pa, pb in zip(a["adam"]["state"].values(), b["adam"]["state"].values(), strict=True):
        assert all(torch.equal(pa[k], pb[k]) for k in ("exp_avg", "exp_avg_sq", "step"))
    assert (a["lr"], a["scheduler_step"], a["training"]) == (b["lr"], b["scheduler_step"],
                                                              b["training"])  # fmt: skip
    assert torch.equal(a["rng"], b["rng"])
    assert all(torch.equal(x, y) for x, y in zip(a["next_batch"], b["next_batch"], strict=True))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(memo.ENV, str(tmp_path / "memo"))
    return tmp_path / "memo"


def test_a_second_identical_run_is_reused_and_ends_exactly_where_training_ends(
    folder, capsys, monkeypatch
):
    first = run(setup())
    assert len(list(folder.glob("*.pt"))) == 1
    assert "reused" not in capsys.readouterr().err
    calls = []
    monkeypatch.setattr(train, "_train_loop", lambda *a, **k: calls.append(1))  # must not run
    second = run(setup())
    assert calls == [] and "reused" in capsys.readouterr().err
    same(first, second)


def test_a_reused_run_equals_a_run_without_the_memo(folder, monkeypatch):
    run(setup())
    reused = run(setup())
    monkeypatch.delenv(memo.ENV)
    same(reused, run(setup()))


@pytest.mark.parametrize(
    "change",
    [
        "one weight",
        "a batch",
        "the warm-up (a value the schedule closes over)",
        "the label smoothing",
        "the random state (dropout)",
        "the number of steps",
        "the model's mode",
        "the optimizer's state",
    ],
)
def test_any_input_that_differs_trains_afresh(folder, capsys, change):
    run(setup())
    capsys.readouterr()
    parts = setup(warmup=5) if change.startswith("the warm-up") else setup(
        smoothing=0.2) if change == "the label smoothing" else setup()  # fmt: skip
    model, optimizer, scheduler, criterion, batches = parts
    steps = 6
    if change == "one weight":
        with torch.no_grad():
            next(model.parameters()).view(-1)[0] += 1e-6
    elif change == "a batch":
        first, *rest = list(itertools.islice(batches, 6))
        src, tgt_in, tgt_out = first
        tgt_out = tgt_out.clone()
        tgt_out[0, 0] = (tgt_out[0, 0] + 1) % 5 + 3
        parts = (model, optimizer, scheduler, criterion, iter([(src, tgt_in, tgt_out), *rest,
                                                               *rest[:1]]))  # fmt: skip
    elif change == "the random state (dropout)":
        torch.manual_seed(1)
    elif change == "the number of steps":
        steps = 5
    elif change == "the model's mode":
        model.eval()  # train_steps trains in train mode anyway, but the key must see it
    elif change == "the optimizer's state":
        optimizer.param_groups[0]["eps"] = 1e-7
    run(parts, steps=steps)
    assert "reused" not in capsys.readouterr().err
    assert len(list(folder.glob("*.pt"))) == 2


def test_nothing_is_kept_or_reused_without_the_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(memo.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    run(setup())
    run(setup())
    assert "reused" not in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_a_run_with_a_time_budget_or_a_callback_always_trains(folder, capsys):
    run(setup(), time_budget=60.0)
    run(setup(), time_budget=60.0)
    run(setup(), on_step=lambda log: None)
    run(setup(), on_step=lambda log: None)
    assert "reused" not in capsys.readouterr().err and not folder.exists()


def test_an_input_it_cannot_read_by_value_means_training(folder, capsys):
    class Opaque:
        pass

    model, optimizer, scheduler, criterion, batches = setup()
    criterion.extra = Opaque()  # a setting the fingerprint does not know
    assert memo.fingerprint(criterion) is None
    run((model, optimizer, scheduler, criterion, batches))
    assert not folder.exists()


def test_fingerprints_read_values_not_identities():
    a, b = torch.arange(6.0), torch.arange(6.0)
    assert memo.fingerprint(a, {"x": 1}) == memo.fingerprint(b, {"x": 1})
    assert memo.fingerprint(a) != memo.fingerprint(a.double())  # the dtype counts
    assert memo.fingerprint(a) != memo.fingerprint(a.view(2, 3))  # and the shape
    assert memo.fingerprint(1) != memo.fingerprint(1.0) != memo.fingerprint(True)
    rate = 3

    def schedule(step):
        return rate * step

    before = memo.fingerprint(schedule)
    rate = 4
    assert memo.fingerprint(schedule) != before  # a value a function closes over counts


# ------------------------------------------------ lesson 12's loop is train_steps -------


def test_train_steps_with_a_loss_fn_takes_the_steps_of_lesson_12s_own_loop():
    """Lesson 12 trains through train_steps(loss_fn=lm.lm_loss); its run must be the one
    the lesson's earlier hand-written loop took, step for step."""
    data = lm.load_lm_data(seed=0, vocab_size=300, test_fraction=0.1)

    def start():
        torch.manual_seed(0)
        model = lm.LanguageModel(len(data.vocab), d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                 dropout=0.1, max_len=40)  # fmt: skip
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98))
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
        return model, optimizer, warmup, torch.Generator().manual_seed(0)

    model, optimizer, warmup, generator = start()  # the loop as lesson 12 wrote it
    by_hand = []
    model.train()
    while len(by_hand) < 7:
        for tokens in lm.lm_batches(data.train, 16, shuffle=True, generator=generator):
            loss = lm.lm_loss(model, tokens)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            warmup.step()
            by_hand.append(loss.item())
            if len(by_hand) == 7:
                break
    weights = [p.detach().clone() for p in model.parameters()]

    model, optimizer, warmup, generator = start()
    batches = (t for _ in itertools.count() for t in lm.lm_batches(data.train, 16, shuffle=True,
                                                                   generator=generator))  # fmt: skip
    log = train.train_steps(model, batches, optimizer, None, 7, loss_fn=lm.lm_loss,
                            scheduler=warmup, clip_norm=1.0, progress=False)  # fmt: skip
    assert log.losses == by_hand
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))


def test_train_steps_wants_a_criterion_or_a_loss_fn_not_both():
    model, optimizer, _, criterion, batches = setup()
    with pytest.raises(ValueError, match="exactly one"):
        train.train_steps(model, batches, optimizer, None, 2)
    with pytest.raises(ValueError, match="exactly one"):
        train.train_steps(model, batches, optimizer, criterion, 2, loss_fn=lm.lm_loss)
