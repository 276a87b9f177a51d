"""course/memo.py: under `make test`, the learner and the solution notebook of a lesson run the
same training; the second takes the first's end state. A reused run must be the run itself
(every weight, the optimizer, the scheduler, torch's random state, the log and where the
batches stopped), and any input that differs must train afresh."""

import itertools
import math
import time

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
    folder = tmp_path / "not" / "made" / "yet"  # made when the first run is kept
    monkeypatch.setenv(memo.ENV, str(folder))
    return folder


def test_a_second_identical_run_is_reused_and_ends_exactly_where_training_ends(
    folder, capsys, monkeypatch
):
    first = run(setup())
    assert len(list(folder.glob("*.pt"))) == 1
    assert "reused" not in capsys.readouterr().err
    calls = []
    monkeypatch.setattr(train, "_train_loop", lambda *a, **k: calls.append(1))  # must not run
    second = run(setup())
    err = capsys.readouterr().err
    assert calls == [] and "reused" in err and memo.ENV in err  # says why, and what did it
    same(first, second)


def test_a_run_that_started_in_eval_mode_ends_in_train_mode_reused_or_not(folder):
    def started_in_eval():
        parts = setup()
        parts[0].eval()
        return run(parts)

    first, second = started_in_eval(), started_in_eval()
    assert first["training"] and second["training"]
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


def test_a_run_with_a_callback_always_trains(folder, capsys):
    run(setup(), on_step=lambda log: None)
    run(setup(), on_step=lambda log: None)
    assert "reused" not in capsys.readouterr().err and not folder.exists()


def ticking():
    """A clock that moves one second each time it is read: a step takes 1 s."""
    ticks = itertools.count()
    return lambda: float(next(ticks))


def test_a_run_with_a_time_budget_is_reused_with_the_steps_the_first_took(
    folder, capsys, monkeypatch
):
    first = run(setup(), steps=100, time_budget=3.5, clock=ticking())
    assert first["log"].step == 4 and "reused" not in capsys.readouterr().err
    calls = []
    monkeypatch.setattr(train, "_train_loop", lambda *a, **k: calls.append(1))  # must not run
    second = run(setup(), steps=100, time_budget=3.5, clock=ticking())
    assert calls == [] and "reused" in capsys.readouterr().err
    same(first, second)  # the batches stop after the 4th, as training left them


def test_a_run_with_another_time_budget_trains(folder, capsys):
    run(setup(), steps=100, time_budget=3.5, clock=ticking())
    other = run(setup(), steps=100, time_budget=2.5, clock=ticking())
    assert "reused" not in capsys.readouterr().err and other["log"].step == 3


def test_a_budgeted_run_on_other_batches_trains_on_them_as_without_the_memo(
    folder, capsys, monkeypatch
):
    """The second run draws the first's count of batches to compare them; they differ, so it
    must train on exactly those and the ones after, as if nothing had been drawn."""
    run(setup(), steps=100, time_budget=3.5, clock=ticking())

    def changed_batches():
        model, optimizer, scheduler, criterion, batches = setup()
        src, tgt_in, tgt_out = next(batches)
        tgt_out = tgt_out.clone()
        tgt_out[0, 0] = (tgt_out[0, 0] + 1) % 5 + 3
        return model, optimizer, scheduler, criterion, itertools.chain([(src, tgt_in, tgt_out)],
                                                                       batches)  # fmt: skip

    capsys.readouterr()
    memoed = run(changed_batches(), steps=100, time_budget=5.5, clock=ticking())
    memoed_again = run(changed_batches(), steps=100, time_budget=3.5, clock=ticking())
    assert "reused" not in capsys.readouterr().err
    monkeypatch.delenv(memo.ENV)
    same(memoed_again, run(changed_batches(), steps=100, time_budget=3.5, clock=ticking()))
    assert memoed["log"].step == 6


def test_a_run_continuing_a_log_takes_the_steps_of_one_run(folder, monkeypatch):
    """Lesson 09 trains 50 steps at a time into one log; 2 + 2 + 2 steps must be 6 steps,
    trained or reused."""

    def in_parts():
        model, optimizer, scheduler, criterion, batches = parts = setup()
        log = train.TrainingLog(step=0)
        for end in (2, 4, 6):
            returned = train.train_steps(model, batches, optimizer, criterion, end, log=log,
                                         scheduler=scheduler, clip_norm=1.0,
                                         progress=False)  # fmt: skip
            assert returned is log and log.step == end
        return dict(run(parts, steps=6, log=log), log=log)

    trained = in_parts()
    reused = in_parts()
    assert len(reused["log"].step_seconds) == 6
    monkeypatch.delenv(memo.ENV)
    whole = run(setup(), steps=6)
    same(trained, whole)
    same(reused, whole)


def test_an_rnn_is_read_by_value_its_weights_held_weakly_too():
    """nn.GRU keeps weak references to its weights: lesson 09's RNN baselines must be
    readable, and a change of weight must change the key."""
    from course.rnn import Seq2SeqRNN

    def rnn(bump=0.0):
        torch.manual_seed(0)
        model = Seq2SeqRNN(10, 10, d_embed=8, d_hidden=16, attention=True, pad_id=0)
        with torch.no_grad():
            model.decoder.weight_hh_l0[0, 0] += bump
        return model

    assert memo.fingerprint(rnn()) is not None
    assert memo.fingerprint(rnn()) == memo.fingerprint(rnn())
    assert memo.fingerprint(rnn()) != memo.fingerprint(rnn(1e-6))


def test_a_log_is_continued_only_from_its_own_step():
    log = train.TrainingLog(step=4)
    with pytest.raises(ValueError, match="from step 2 cannot continue a log at step 4"):
        log.extend(train.TrainingLog(step=3, step_seconds=[1.0]))
    model, optimizer, scheduler, criterion, batches = setup()
    with pytest.raises(ValueError, match="start_step 2 and a log at step 4"):
        train.train_steps(model, batches, optimizer, criterion, 6, start_step=2, log=log)


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


RATE = 3  # a global a schedule reads (below)


def _schedule_reading_a_global(step):
    return RATE * step


def test_what_a_function_reads_counts_closures_globals_and_inner_code():
    before = memo.fingerprint(_schedule_reading_a_global)
    global RATE
    RATE = 4
    try:
        assert memo.fingerprint(_schedule_reading_a_global) != before
    finally:
        RATE = 3

    def outer_a():
        return lambda step: step + 1

    def outer_b():
        return lambda step: step + 2  # differs only inside the inner function

    assert memo.fingerprint(outer_a) != memo.fingerprint(outer_b)


def test_a_schedule_that_differs_only_later_or_only_in_its_step_counts():
    """The first rate can agree while the schedule does not: a step function that drops at
    step 3 or at step 4; or the same function one step further on."""

    def scheduler(drop_at, steps_taken=0):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: 1.0 if s < drop_at else 0.5)  # fmt: skip
        for _ in range(steps_taken):
            optimizer.step()
            schedule.step()
        return optimizer, schedule

    (o3, s3), (o4, s4) = scheduler(3), scheduler(4)
    assert memo.fingerprint(o3) == memo.fingerprint(o4)  # the same rate so far
    assert memo.fingerprint(o3, s3) != memo.fingerprint(o4, s4)
    (o0, s0), (o1, s1) = scheduler(3), scheduler(3, steps_taken=1)
    assert o0.param_groups[0]["lr"] == o1.param_groups[0]["lr"]
    assert memo.fingerprint(s0) != memo.fingerprint(s1)


def test_a_subclass_with_its_own_step_is_another_optimizer_or_scheduler():
    class SlowAdam(torch.optim.Adam):
        def step(self, closure=None):  # another update, the same state_dict
            return super().step(closure)

    class OtherLambda(torch.optim.lr_scheduler.LambdaLR):
        pass

    weights = [torch.nn.Parameter(torch.zeros(3))]
    plain, sub = torch.optim.Adam(weights, lr=0.1), SlowAdam(weights, lr=0.1)
    assert plain.state_dict() == sub.state_dict()
    assert memo.fingerprint(plain) != memo.fingerprint(sub)
    one = torch.optim.lr_scheduler.LambdaLR(plain, lambda s: 1.0)
    other = OtherLambda(torch.optim.Adam(weights, lr=0.1), lambda s: 1.0)
    assert memo.fingerprint(one) != memo.fingerprint(other)


def test_tied_weights_are_not_equal_weights():
    """Two models with the same numbers, in one the output layer *is* the embedding (tied:
    its gradient adds both uses), in the other a copy: they train differently."""

    def model(tied):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 5, bias=False))
        if tied:
            net[1].weight = net[0].weight
        else:
            net[1].weight = torch.nn.Parameter(net[0].weight.detach().clone())
        return net

    tied, copied = model(True), model(False)
    pairs = zip(tied.state_dict().values(), copied.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    assert memo.fingerprint(tied) != memo.fingerprint(copied)


def test_lesson_10s_sparse_patterns_count_though_state_dict_leaves_them_out():
    """sparse_encoder keeps its pattern as a non-persistent buffer (not in state_dict): a
    window and a BigBird model of equal weights once shared a fingerprint, and BigBird took
    the window's run (found by lesson 10's compared check, fixed, kept here)."""
    from course.efficient import bigbird_mask, sliding_window_mask, sparse_encoder

    def model(pattern):
        torch.manual_seed(0)
        small = {**CONFIGS["reverse"], "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32}
        base = train.build_model(load_task("reverse"), small)
        return sparse_encoder(base, pattern(base.max_len))

    window = model(lambda T: sliding_window_mask(T, 2))
    bigbird = model(lambda T: bigbird_mask(T, window=1, n_global=1, n_random=2,
                                           generator=torch.Generator().manual_seed(0)))  # fmt: skip
    assert window.state_dict().keys() == bigbird.state_dict().keys()
    assert memo.fingerprint(window) != memo.fingerprint(bigbird)

    class Hidden(torch.nn.Linear):  # state kept in a private attribute counts too
        def __init__(self, scale):
            super().__init__(2, 2)
            self._scale = scale

    torch.manual_seed(0)
    a = Hidden(1.0)
    torch.manual_seed(0)
    assert memo.fingerprint(a) != memo.fingerprint(Hidden(2.0))


def test_which_weight_is_tied_to_which_counts():
    class FourSlots(torch.nn.Module):  # two weights of equal values in four slots
        def __init__(self, third, fourth):
            super().__init__()
            weights = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))]
            self.a, self.b, self.c, self.d = weights[0], weights[1], weights[third], weights[fourth]

    assert memo.fingerprint(FourSlots(0, 1)) != memo.fingerprint(FourSlots(1, 0))


@pytest.mark.parametrize(
    "a, b",
    [
        ([[1], 2], [[1, 2]]),  # how items nest
        ([1, 2], (1, 2)),  # a list is not a tuple
        ({"warmup": 4}, {"steps": 4}),  # the names of settings count
        ({"a": {"b": 1}, "c": 2}, {"a": {"b": 1, "c": 2}}),
        (torch.tensor([1.0]), torch.tensor([1065353216], dtype=torch.int32)),  # same bytes
        ((torch.zeros(2), 1), (torch.zeros(2), 1.0)),
        (torch.tensor(1.0), torch.tensor(2.0)),  # 0-d, as Adam counts its steps
        (torch.float32, torch.float64),  # a dtype or a device among the settings
        (torch.device("cpu"), torch.device("meta")),
        (time.perf_counter, time.process_time),  # train_steps' clock
        (torch.optim.Adam, torch.optim.AdamW),  # a class
        (math, torch),  # a module a function reads
    ],
)
def test_different_inputs_have_different_fingerprints(a, b):
    assert memo.fingerprint(a) != memo.fingerprint(b)


def test_a_shared_object_is_told_from_two_equal_ones_in_place():
    x, y = [1], [2]
    assert memo.fingerprint([x, y, x]) != memo.fingerprint([x, y, y])


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
    passes = (lm.lm_batches(data.train, 16, shuffle=True, generator=generator)
              for _ in itertools.count())  # fmt: skip
    batches = (tokens for one_pass in passes for tokens in one_pass)
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
