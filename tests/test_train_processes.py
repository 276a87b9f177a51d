"""course.train's pieces for more than one process, tested inside this one process: the
global token mean (in a process group of one, where all_reduce changes nothing), the
process group's life, the model's wrapping, and each rank's random stream. The end-to-end
runs in two real processes are in test_train_ddp.py.
"""

import pytest
import torch
from torch import distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from course.data import PAD_ID
from course.train import GlobalTokenMean, Processes

CPU = torch.device("cpu")


@pytest.fixture
def group_of_one():
    """A gloo process group of this process alone (no network: an in-memory store)."""
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("needs torch.distributed with gloo")
    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _logits_and_targets():
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, 7, generator=gen, dtype=torch.float64).requires_grad_()
    targets = torch.randint(1, 7, (2, 5), generator=gen)  # (B, T): ids 1..6
    targets[0, 3:] = PAD_ID  # padding, ignored
    targets[1, 4:] = PAD_ID
    return logits, targets


def _loss_and_grad(criterion, logits, targets):
    logits.grad = None
    loss = criterion(logits.transpose(1, 2), targets)  # (B, V, T) against (B, T)
    loss.backward()
    return loss.detach(), logits.grad.clone()


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_the_global_token_mean_of_one_process_is_the_usual_mean(group_of_one, smoothing):
    logits, targets = _logits_and_targets()
    usual = nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=PAD_ID)
    want, want_grad = _loss_and_grad(usual, logits, targets)
    got, got_grad = _loss_and_grad(GlobalTokenMean(usual, world_size=1), logits, targets)
    assert torch.allclose(got, want, rtol=1e-12) and torch.allclose(got_grad, want_grad)


def test_the_gradient_is_scaled_by_the_processes_that_ddp_divides_by(group_of_one):
    """With world_size N, DDP divides the summed gradients by N: each rank's share is
    multiplied by N, while the value (what is logged) stays the global mean."""
    logits, targets = _logits_and_targets()
    usual = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    want, want_grad = _loss_and_grad(usual, logits, targets)
    got, got_grad = _loss_and_grad(GlobalTokenMean(usual, world_size=3), logits, targets)
    assert torch.allclose(got, want, rtol=1e-12)
    assert torch.allclose(got_grad, 3 * want_grad)


def test_the_global_token_mean_keeps_the_criterions_settings():
    mean = GlobalTokenMean(nn.CrossEntropyLoss(label_smoothing=0.25, ignore_index=4), 2)
    assert mean.summed.label_smoothing == 0.25 and mean.summed.ignore_index == 4
    assert mean.summed.reduction == "sum" and mean.world_size == 2


def test_one_process_starts_no_group_and_wraps_nothing():
    with Processes().group(CPU):
        assert not dist.is_initialized()
    model, criterion = nn.Linear(2, 2), nn.CrossEntropyLoss()
    assert Processes().wrap(model, criterion, CPU) == (model, criterion)


def test_more_processes_wrap_the_model_in_ddp_and_the_loss_in_the_global_mean(group_of_one):
    model, criterion = nn.Linear(2, 2), nn.CrossEntropyLoss(ignore_index=PAD_ID)
    wrapped, loss = Processes(rank=0, world_size=2).wrap(model, criterion, CPU)
    assert isinstance(wrapped, DistributedDataParallel) and wrapped.module is model
    assert wrapped.device_ids is None  # on CPUs DDP takes no device ids
    assert isinstance(loss, GlobalTokenMean) and loss.world_size == 2


def test_rank_0_keeps_the_single_process_stream():
    torch.manual_seed(11)
    want = torch.rand(3)
    torch.manual_seed(11)
    Processes().seed_own_stream(seed=5, step=7)
    assert torch.equal(torch.rand(3), want)


def test_other_ranks_draw_from_a_stream_of_seed_rank_and_step():
    def draws(rank, seed=5, step=0):
        torch.manual_seed(11)
        Processes(rank=rank, local_rank=rank, world_size=4).seed_own_stream(seed, step)
        return torch.rand(4)

    got = draws(2, step=9)
    torch.manual_seed(((5 * 1_000_003 + 2) * 1_000_003 + 9) % 2**63)
    assert torch.equal(got, torch.rand(4))  # the documented function
    streams = [draws(1), draws(2), draws(3), draws(1, seed=6), draws(1, step=1)]
    assert all(not torch.equal(a, b) for i, a in enumerate(streams) for b in streams[i + 1 :])
    assert torch.equal(draws(1), draws(1))  # the same place, the same stream


def test_one_process_checkpoints_only_its_own_state():
    torch.manual_seed(4)
    states = Processes().rng_states(CPU)
    assert list(states) == ["rng"] and list(states["rng"]) == ["torch"]
    assert torch.equal(states["rng"]["torch"], torch.get_rng_state())


def test_each_rank_takes_back_its_own_state_or_starts_its_own_stream():
    torch.manual_seed(1)
    first = torch.get_rng_state()
    torch.manual_seed(2)
    second = torch.get_rng_state()
    checkpoint = {"rng": {"torch": first}, "rng_ranks": [{"torch": first}, {"torch": second}],
                  "step": 30}  # fmt: skip
    Processes(rank=1, local_rank=1, world_size=3).restore_rng(checkpoint, CPU, seed=5)
    assert torch.equal(torch.get_rng_state(), second)
    Processes(rank=0, world_size=3).restore_rng(checkpoint, CPU, seed=5)
    assert torch.equal(torch.get_rng_state(), first)
    # rank 2: the checkpoint was saved by 2 processes; rank 2 seeds its own at step 30
    Processes(rank=2, local_rank=2, world_size=3).restore_rng(checkpoint, CPU, seed=5)
    got = torch.rand(3)
    Processes(rank=2, local_rank=2, world_size=3).seed_own_stream(5, 30)
    assert torch.equal(got, torch.rand(3))
    # a single process's checkpoint (no "rng_ranks") restores rank 0 from "rng"
    torch.manual_seed(9)
    Processes().restore_rng({"rng": {"torch": second}, "step": 3}, CPU, seed=5)
    assert torch.equal(torch.get_rng_state(), second)


def test_the_global_token_mean_adds_the_other_ranks_sums_and_counts(monkeypatch):
    """all_reduce stood in for by another rank's (sum, count): the value is the mean over
    both ranks' tokens, the gradient this rank's own sum over the global count, times
    world_size (DDP divides by it)."""
    logits, targets = _logits_and_targets()
    usual = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    summed = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID, reduction="sum")
    other_sum, other_count = 20.0, 9  # the other rank: 9 tokens, losses summing to 20

    def all_reduce(totals):  # this rank's (sum, count) plus the other rank's
        totals.add_(torch.tensor([other_sum, other_count], dtype=totals.dtype))

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    loss = GlobalTokenMean(usual, world_size=2)(logits.transpose(1, 2), targets)
    loss.backward()
    own_count = (targets != PAD_ID).sum().item()  # 7
    own_sum = summed(logits.detach().transpose(1, 2), targets)
    assert loss.item() == pytest.approx((own_sum.item() + other_sum) / (own_count + other_count))
    own = logits.detach().requires_grad_()
    (summed(own.transpose(1, 2), targets) * 2 / (own_count + other_count)).backward()
    torch.testing.assert_close(logits.grad, own.grad)
