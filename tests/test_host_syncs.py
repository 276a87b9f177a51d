"""No host synchronisation in the hot path (docs/benchmarks.md, "Host synchronisations").

Reading a tensor's value on the host (.item(), int(), float(), bool(), .tolist()) makes the
CPU wait until a GPU has finished all the work queued before it. On the CPU nothing waits,
but the profiler records the same calls (aten::item, aten::_local_scalar_dense) that a GPU
would wait on, so a CPU run counts them: one training step's forward and backward, and one
step of cached decoding and generation, must have none. Adam's own step counters are CPU
scalars by design and are read on the host in its step: the optimizer is not counted here.

And the operators of a training step (course.bench.step_operators: the top-level aten
operators torch.profiler records in forward, backward and Adam's step): the fused model
issues no more than the same sizes assembled from torch.nn.Transformer (`make bench`'s
row 5).
"""

import copy

import pytest
import torch
from torch import nn

from course import bench, lm
from course.efficient import KVCache, decode_step
from course.masking import padding_mask
from course.train import ADAM_BETAS, ADAM_EPS, ADAM_FOREACH, TrainingLog, train_steps
from course.transformer import Transformer

SIZES = bench.OPS  # d_model 64, 2 + 2 layers, B 8, T 16


def host_reads(run) -> int:
    """How many times run() reads a tensor's value on the host, by the profiler's record."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        run()
    return sum(event.name in bench.HOST_READS for event in profile.events())


@pytest.fixture(scope="module")
def models():
    return bench.build_models(SIZES)


@pytest.fixture(scope="module")
def batch():
    return bench.make_batch(SIZES)


@pytest.mark.parametrize("name", ["ours", "ours_fused", "theirs"])
def test_a_training_step_reads_nothing_back_in_forward_and_backward(models, batch, name):
    _, reads = bench.step_operators(models[name], batch)
    if name == "theirs":  # torch.nn.Transformer reads one flag in its forward (is_nonzero)
        assert reads["backward"] == 0
        return
    assert (reads["forward"], reads["backward"]) == (0, 0)


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("fused", [False, True])
def test_decoding_steps_read_nothing_back(positions, fused):
    torch.manual_seed(0)
    model = Transformer(20, 20, 32, 4, 2, 64, positions=positions, fused=fused).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])  # (B=2, T_src=4)
    prefix = torch.tensor([[1, 4], [1, 3]])  # (B, 2): <bos>, then one token
    with torch.no_grad():
        src_mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, src_mask)
        cache = KVCache.start(model, memory, src_mask)
        decode_step(model, prefix[:, 0], cache)  # the first step, not counted
        # greedy_decode's and beam_search's per-step call, and the cached one
        assert host_reads(lambda: model.decode(prefix, memory, src_mask)) == 0
        assert host_reads(lambda: decode_step(model, prefix[:, 1], cache)) == 0
        assert host_reads(lambda: model(src, prefix)) == 0


def test_the_language_model_reads_nothing_back():
    torch.manual_seed(0)
    model = lm.LanguageModel(30, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16)
    tokens = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])  # (B=2, T=5)
    assert host_reads(lambda: lm.lm_loss(model, tokens).backward()) == 0
    model.eval()
    with torch.no_grad():
        cache = lm.LMCache.start(model, 2)
        lm.lm_step(model, tokens[:, 0], cache)
        assert host_reads(lambda: lm.lm_step(model, tokens[:, 1], cache)) == 0


class _ReadSpy(torch.Tensor):
    """A loss that counts how often its value, or a value computed from it, is read back."""

    reads: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("item", "tolist", "__float__", "__int__", "__bool__", "numpy"):
            cls.reads.append(name)
        return super().__torch_function__(func, types, args, kwargs or {})


class _SpiedLoss(nn.Module):
    def forward(self, logits, targets):
        return nn.functional.cross_entropy(logits, targets).as_subclass(_ReadSpy)


class _Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(5, 5)

    def forward(self, src, tgt_in):
        return self.table(tgt_in)  # (B, T, V)


def _batches():
    while True:
        tokens = torch.randint(0, 5, (4, 3))
        yield tokens, tokens, tokens


@pytest.mark.parametrize("steps, log_every, reads", [(20, 10, 2), (25, 10, 3), (7, 1, 7)])
def test_the_loop_reads_the_losses_back_once_per_interval(steps, log_every, reads):
    """train_steps keeps each loss on the device and reads them back together, every
    log_every steps and at the end: never one .item() per step."""
    torch.manual_seed(0)
    model = _Bigram()
    _ReadSpy.reads = []
    unread = []
    log = train_steps(
        model, _batches(), torch.optim.SGD(model.parameters(), lr=0.1), _SpiedLoss(), steps,
        log_every=log_every, progress=False, on_step=lambda log: unread.append(len(log._unread)),
    )  # fmt: skip
    assert _ReadSpy.reads == ["tolist"] * reads  # one transfer per interval (and the rest)
    assert unread == [step % log_every for step in range(1, steps + 1)]  # losses still unread
    assert len(log.losses) == steps and all(isinstance(x, float) for x in log.losses)
    assert _ReadSpy.reads == ["tolist"] * reads  # all read already: reading again reads nothing


def test_the_log_reads_its_losses_when_asked():
    log = TrainingLog(step=0)
    for value in (3.0, 2.0):
        log.record(torch.tensor(value, requires_grad=True) * 1)
    assert log.losses == [3.0, 2.0] and log._unread == []
    log.record(torch.tensor(1.0))
    assert log.losses == [3.0, 2.0, 1.0]


def test_the_for_each_adam_step_gives_the_same_numbers_bit_for_bit(models, batch):
    """course.train's Adam (foreach=True, fewer operators) against the per-tensor loop,
    ten steps of the fused model with dropout: the same parameters to the last bit."""
    assert ADAM_FOREACH is True
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=bench.PAD)
    src, tgt_in, tgt_out = batch
    results = []
    for foreach in (False, True):
        torch.manual_seed(0)
        model = copy.deepcopy(models["ours_fused"]).train()
        optimizer = torch.optim.Adam(
            model.parameters(), lr=1e-3, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=foreach
        )
        for _ in range(10):
            optimizer.zero_grad(set_to_none=True)
            criterion(model(src, tgt_in).flatten(0, 1), tgt_out.flatten()).backward()
            optimizer.step()
        results.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_a_fused_training_step_issues_no_more_operators_than_torch_nn():
    rows = {row.what: row for row in bench.operator_rows(SIZES)}
    fused = rows["operators per step: ours (fused=True) / torch.nn.Transformer"]
    assert fused.met and fused.ours <= fused.theirs, (fused.ours, fused.theirs)
