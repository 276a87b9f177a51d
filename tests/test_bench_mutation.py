"""course.bench (`make bench`), the behaviour its mutation run found unpinned, with nothing
timed for real: the clock, the timing helpers (interleaved, attention_cost, speedup) and
the FLOP count are replaced by scripted stand-ins, so that every number is known.

Pinned: the sizes (FULL as documented, QUICK, PAD/BOS, label smoothing); the batch (the
documented draw, padding as a suffix, <bos> then the shifted target, seeded); the models
(torch's with our positional table and no final norms, ours explicit and fused, seeded);
the training step (course.train's Adam and loss, grads reset every step, train mode); the
FLOP count (6 B T d V for one Linear, counted silently); interleaved (untimed warm-up,
the order turned each round, seconds from the clock); every row's label, medians in ms or
GFLOP/s, median of the per-repeat ratios and goal; the compile row; the table's exact
text; the machine and load lines; run's output, sizes and threads; main's arguments, its
usage error and its refusal of a ratio that is not positive and finite.
"""

import copy
import io
import logging
import math
import os
import platform
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from course import bench
from course.data import BOS_ID, PAD_ID
from course.efficient import sdpa
from course.train import ADAM_BETAS, ADAM_EPS, CONFIGS
from course.transformer import Transformer

pytestmark = pytest.mark.usefixtures("one_thread")

# Tinier than QUICK, every size distinct where it is printed.
TINY = dict(d_model=8, n_heads=2, n_layers=1, d_ff=16, vocab=11, batch=3, T=6,
            repeats=3, warmup=2, matmul_n=4, attention_T=(4, 8),
            attention_repeats=3, decode_batch=2, decode_tokens=5, decode_repeats=3)  # fmt: skip


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def _assert_row(row, what, ours, theirs, unit, ratio, goal):
    assert isinstance(row, bench.Row)
    assert row.what == what
    assert row.ours == pytest.approx(ours, rel=1e-12)
    assert row.theirs == pytest.approx(theirs, rel=1e-12)
    assert row.unit == unit
    assert row.ratio == pytest.approx(ratio, rel=1e-12)
    assert row.goal == goal


class Clock:
    """A stand-in for bench's `time` module: perf_counter reads `now`, which only the
    stand-in functions move."""

    def __init__(self, now=1000.0):
        self.now, self.reads = now, 0

    def perf_counter(self):
        self.reads += 1
        return self.now


# ---------------------------------------------------------------- sizes and constants ----


def test_full_sizes_are_the_documented_real_use():
    """The paper's base layer, 2 + 2 layers, 32 pairs of up to 64 tokens, 1000-token
    vocabularies, a 2048 matmul, T up to 1024, 128 tokens decoded one sentence at a time."""
    assert bench.FULL == dict(
        d_model=512, n_heads=8, n_layers=2, d_ff=2048, vocab=1000, batch=32, T=64,
        repeats=5, warmup=1, matmul_n=2048, attention_T=(64, 128, 256, 512, 1024),
        attention_repeats=5, decode_batch=1, decode_tokens=128, decode_repeats=3,
    )  # fmt: skip


def test_quick_sizes_are_tiny():
    assert bench.QUICK == dict(
        d_model=32, n_heads=4, n_layers=1, d_ff=64, vocab=50, batch=4, T=8,
        repeats=3, warmup=1, matmul_n=128, attention_T=(8, 16),
        attention_repeats=3, decode_batch=2, decode_tokens=8, decode_repeats=2,
    )  # fmt: skip


def test_special_ids_and_label_smoothing_are_the_courses():
    assert (bench.PAD, bench.BOS) == (PAD_ID, BOS_ID) == (0, 1)
    assert bench.LABEL_SMOOTHING == CONFIGS["toy-translation"]["label_smoothing"] == 0.1


# ------------------------------------------------------------------------------ Row ----


def test_met_is_inclusive_at_the_bound_and_none_without_a_goal():
    assert bench.Row("x", 1.0, 1.0, "ms", 0.75, ("<=", 0.75)).met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 0.76, ("<=", 0.75)).met is False
    assert bench.Row("x", 1.0, 1.0, "ms", 0.60, (">=", 0.60)).met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 0.59, (">=", 0.60)).met is False
    assert bench.Row("x", 1.0, 1.0, "ms", 5.0, (">=", 0.60)).met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 0.1, ("<=", 0.75)).met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 0.1).met is None


# ------------------------------------------------------------------------- the batch ----


def test_the_batch_is_the_documented_draw():
    """tokens uniform in [2, V) for (src, tgt_out, unused), then lengths uniform in
    [T // 2, T] for (src, tgt), from one generator seeded with `seed`."""
    B, T, V = TINY["batch"], TINY["T"], TINY["vocab"]
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(2, V, (3, B, T), generator=gen)
    lengths = torch.randint(T // 2, T + 1, (2, B), generator=gen)
    real = torch.arange(T)[None, None, :] < lengths[:, :, None]
    src = torch.where(real[0], tokens[0], PAD_ID)
    tgt_out = torch.where(real[1], tokens[1], PAD_ID)
    tgt_in = torch.cat([torch.full((B, 1), BOS_ID), tgt_out[:, :-1]], dim=1)
    got = bench.make_batch(TINY, seed=5)
    assert len(got) == 3
    for g, want in zip(got, (src, tgt_in, tgt_out), strict=True):
        assert g.shape == (B, T) and torch.equal(g, want)


def test_batch_lengths_tokens_padding_and_shift():
    sizes = dict(batch=400, T=6, vocab=5)
    src, tgt_in, tgt_out = bench.make_batch(sizes)
    assert src.shape == tgt_in.shape == tgt_out.shape == (400, 6)
    for tokens in (src, tgt_out):
        real = tokens != PAD_ID
        lengths = real.sum(1)
        assert set(lengths.tolist()) == {3, 4, 5, 6}  # T // 2 .. T, both ends drawn
        positions = torch.arange(6)[None, :]
        assert torch.equal(real, positions < lengths[:, None])  # the padding is a suffix
        assert set(tokens[real].tolist()) == {2, 3, 4}  # no <pad>, no <bos>, up to V - 1
    assert (tgt_in[:, 0] == BOS_ID).all()
    assert torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])


def test_the_batch_depends_on_its_seed_only():
    torch.manual_seed(1)
    first = bench.make_batch(TINY)
    torch.manual_seed(2)
    again = bench.make_batch(TINY)
    zero = bench.make_batch(TINY, seed=0)
    other = bench.make_batch(TINY, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(first, zero, strict=True))  # default 0
    assert not torch.equal(first[0], other[0])


# ------------------------------------------------------------------------ the models ----


def test_models_are_theirs_ours_and_ours_fused_seeded():
    torch.manual_seed(7)
    models = bench.build_models(TINY)
    assert list(models) == ["theirs", "ours", "ours_fused"]
    theirs = models["theirs"]
    assert isinstance(theirs, bench.TorchTransformerSeq2Seq)
    assert isinstance(models["ours"], Transformer) and models["ours"].fused is False
    assert isinstance(models["ours_fused"], Transformer) and models["ours_fused"].fused is True
    torch.manual_seed(8)
    again = bench.build_models(TINY, seed=0)  # the default seed is 0, the global one unused
    assert all(_same_weights(models[k], again[k]) for k in models)
    other = bench.build_models(TINY, seed=1)
    assert not _same_weights(models["theirs"], other["theirs"])


def test_torchs_model_has_our_positional_table_sizes_and_dropout():
    models = bench.build_models(TINY)
    theirs, ours = models["theirs"], models["ours"]
    assert theirs.pad_id == PAD_ID
    assert torch.equal(theirs.pos.pe, ours.pos.pe)  # the same table, 5000 positions
    assert theirs.transformer.encoder.norm is None and theirs.transformer.decoder.norm is None
    layer = theirs.transformer.encoder.layers[0]
    assert layer.self_attn.batch_first and layer.self_attn.num_heads == TINY["n_heads"]
    assert layer.linear1.weight.shape == (TINY["d_ff"], TINY["d_model"])
    assert len(theirs.transformer.encoder.layers) == len(theirs.transformer.decoder.layers) == 1
    assert theirs.out.weight.shape == (TINY["vocab"], TINY["d_model"])
    for model in models.values():
        ps = {m.p for m in model.modules() if isinstance(m, nn.Dropout)}
        assert ps == {0.1}, type(model).__name__
    # ours hold theirs' weights: embeddings and output layer
    assert torch.equal(ours.src_embed.embedding.weight, theirs.src_embed.embedding.weight)
    assert torch.equal(ours.out.bias, theirs.out.bias)


# --------------------------------------------------------------- the training step ----


class Tiny(nn.Module):
    """A deterministic stand-in for a seq2seq model: (src, tgt) -> (B, T, V) logits, one
    Linear the only matmul."""

    def __init__(self, V=7, d=3):
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.embed = nn.Embedding(V, d)
        self.out = nn.Linear(d, V)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))

    def forward(self, src, tgt):
        return self.out(self.embed(tgt) + self.embed(src).mean(1, keepdim=True))


TINY_BATCH = dict(batch=2, T=5, vocab=7)


def test_a_step_is_course_trains_adam_and_loss_with_fresh_grads():
    """Three steps equal three steps of Adam(lr 1e-4, the paper's betas and eps) on the
    label-smoothed cross-entropy that ignores <pad>, the grads reset before each."""
    batch = bench.make_batch(TINY_BATCH)
    src, tgt_in, tgt_out = batch
    model = Tiny().eval()
    reference = copy.deepcopy(model)
    step = bench.make_step(model, batch)
    assert model.training  # the step trains: dropout on
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-4, betas=ADAM_BETAS, eps=ADAM_EPS)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD_ID)
    for _ in range(3):
        assert step() is None
        optimizer.zero_grad()
        criterion(reference(src, tgt_in).flatten(0, 1), tgt_out.flatten()).backward()
        optimizer.step()
        for mine, want in zip(model.parameters(), reference.parameters(), strict=True):
            assert torch.allclose(mine, want, rtol=0, atol=1e-7)
    assert not _same_weights(model, Tiny())  # it did move


def test_step_flops_counts_forward_and_backward_matmuls_silently(capsys):
    """One Linear (d -> V) on B x T tokens: 2 B T d V forward, twice that backward (the
    input's and the weight's gradients); the embedding and the loss count nothing."""
    B, T, V, d = 2, 5, 7, 3
    flops = bench.step_flops(Tiny(V, d), bench.make_batch(TINY_BATCH))
    assert flops == 6 * B * T * d * V == 1260
    assert capsys.readouterr().out == ""


# -------------------------------------------------------------------------- timing ----


def test_interleaved_warms_up_untimed_then_turns_the_order(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(bench, "time", clock)
    calls = []
    costs = {"a": [50, 60, 1, 2, 3], "b": [70, 80, 10, 20, 30], "c": [90, 99, 0.25, 0.5, 0.75]}

    def fn(name):
        def run():
            calls.append(name)
            clock.now += costs[name][calls.count(name) - 1]

        return run

    times = bench.interleaved({name: fn(name) for name in "abc"}, repeats=3, warmup=2)
    assert "".join(calls) == "abcabc" + "abcbcacab"
    assert times == {"a": [1, 2, 3], "b": [10, 20, 30], "c": [0.25, 0.5, 0.75]}
    assert list(times) == ["a", "b", "c"]
    assert clock.reads == 2 * 9  # the warm-up is not timed


def test_median_ratio_is_the_median_of_per_repeat_ratios():
    # per repeat: 1, 0.1, 10 -> 1; the ratio of the medians would be 2 / 3
    assert bench._median_ratio([1.0, 2.0, 30.0], [1.0, 20.0, 3.0]) == 1.0
    assert bench._median_ratio([1.0, 4.0, 9.0], [1.0, 2.0, 3.0]) == 2.0
    with pytest.raises(ValueError):  # repeats that do not pair up are refused
        bench._median_ratio([1.0, 2.0], [1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------- rows ----

TRAIN_TIMES = {  # seconds per repeat
    "theirs": [2.0, 4.0, 3.0],
    "ours": [1.0, 1.0, 6.0],  # ratios 0.5, 0.25, 2 -> 0.5 (medians: 1 / 3)
    "ours_fused": [0.5, 3.2, 2.7],  # ratios 0.25, 0.8, 0.9 -> 0.8 (medians: 0.9)
    "ours_compiled": [1.5, 1.0, 3.0],  # ratios 0.75, 0.25, 1 -> 0.75
    "matmul": [128 / 2e9, 128 / 4e9, 128 / 1e9],  # 4 x 4: 128 FLOPs; 2, 4, 1 GFLOP/s
}
FLOPS = 1.5e9


@pytest.fixture
def scripted_training(monkeypatch):
    """training_rows with real tiny models, a scripted interleaved and step_flops."""
    seen: dict = {"built": [], "compiled": []}
    real_build = bench.build_models

    def build(*args, **kwargs):
        models = real_build(*args, **kwargs)
        seen["built"].append(models)
        return models

    def fake_interleaved(fns, repeats, warmup):
        seen.update(fns=fns, repeats=repeats, warmup=warmup)
        return {name: TRAIN_TIMES[name] for name in fns}

    def fake_flops(model, batch):
        seen.update(flops_model=model, flops_batch=batch)
        return FLOPS

    def fake_compile(model):
        seen["compiled"].append(model)
        return model

    monkeypatch.setattr(bench, "build_models", build)
    monkeypatch.setattr(bench, "interleaved", fake_interleaved)
    monkeypatch.setattr(bench, "step_flops", fake_flops)
    monkeypatch.setattr(torch, "compile", fake_compile)
    dynamo = logging.getLogger("torch._dynamo")
    level = dynamo.level
    dynamo.setLevel(logging.NOTSET)
    yield seen
    dynamo.setLevel(level)


def test_training_rows_medians_ratios_goals_and_flops(scripted_training):
    seen = scripted_training
    rows = bench.training_rows(TINY)
    assert len(rows) == 3
    _assert_row(rows[0], "train step: ours (explicit) / torch.nn.Transformer",
                1000.0, 3000.0, "ms", 0.5, ("<=", 0.75))  # fmt: skip
    _assert_row(rows[1], "train step: ours (fused=True) / torch.nn.Transformer",
                2700.0, 3000.0, "ms", 0.8, ("<=", 0.75))  # fmt: skip
    # achieved 3, 0.46875, 0.5556 GFLOP/s; the matmul 2, 4, 1: per repeat 1.5, 0.117, 0.556
    _assert_row(rows[2], "step FLOP/s (1.5 GFLOP): ours (fused=True) / 4x4 matmul",
                1.5 / 2.7, 2.0, "GFLOP/s", 1.5 / 2.7, (">=", 0.60))  # fmt: skip
    assert logging.getLogger("torch._dynamo").level == logging.NOTSET  # not compiling
    assert seen["compiled"] == []
    # what was timed: the three models' steps and the matmul, in that order
    assert list(seen["fns"]) == ["theirs", "ours", "ours_fused", "matmul"]
    assert (seen["repeats"], seen["warmup"]) == (TINY["repeats"], TINY["warmup"])
    models = seen["built"][0]
    assert seen["flops_model"] is models["ours"]  # the FLOPs of the explicit model
    batch = bench.make_batch(TINY)
    assert all(torch.equal(a, b) for a, b in zip(seen["flops_batch"], batch, strict=True))
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen)
    assert torch.equal(seen["fns"]["matmul"](), a @ b)
    for name in ("theirs", "ours", "ours_fused"):  # each step trains its own model
        before = {k: copy.deepcopy(m.state_dict()) for k, m in models.items()}
        seen["fns"][name]()
        for k, m in models.items():
            changed = not all(torch.equal(v, m.state_dict()[p]) for p, v in before[k].items())
            assert changed == (k == name), (name, k)


def test_the_compile_row_times_a_compiled_fused_copy(scripted_training):
    seen = scripted_training
    rows = bench.training_rows(TINY, compile_model=True)
    assert [row.what for row in rows][:3] == [
        "train step: ours (explicit) / torch.nn.Transformer",
        "train step: ours (fused=True) / torch.nn.Transformer",
        "train step: torch.compile(ours, fused) / torch.nn.Transformer",
    ]
    _assert_row(rows[2], "train step: torch.compile(ours, fused) / torch.nn.Transformer",
                1500.0, 3000.0, "ms", 0.75, ("<=", 0.75))  # fmt: skip
    assert rows[3].what.startswith("step FLOP/s") and len(rows) == 4
    assert list(seen["fns"]) == ["theirs", "ours", "ours_fused", "ours_compiled", "matmul"]
    assert logging.getLogger("torch._dynamo").level == logging.ERROR  # graph breaks hidden
    (compiled,) = seen["compiled"]
    fused = seen["built"][0]["ours_fused"]
    assert isinstance(compiled, Transformer) and compiled.fused and compiled is not fused
    assert _same_weights(compiled, fused)
    seen["fns"]["ours_compiled"]()  # the step trains the compiled copy
    assert not _same_weights(compiled, fused)


def test_flop_ratios_pair_repeats(scripted_training, monkeypatch):
    monkeypatch.setitem(TRAIN_TIMES, "matmul", TRAIN_TIMES["matmul"][:2])
    with pytest.raises(ValueError):
        bench.training_rows(TINY)


def test_attention_rows_alternate_who_goes_first_and_take_medians(monkeypatch):
    script = {  # seconds, per T, per repeat
        ("ours", 4): [1e-3, 2e-3, 9e-3],  # ratios 0.5, 2, 3 -> 2 (medians: 1)
        ("theirs", 4): [2e-3, 1e-3, 3e-3],
        ("ours", 8): [4e-3, 6e-3, 4e-3],  # ratios 4, 3, 0.5 -> 3 (medians: 2)
        ("theirs", 8): [1e-3, 2e-3, 8e-3],
    }
    calls = []

    def fake_cost(fn, T_values, **kwargs):
        name = "ours" if fn is None else "theirs" if fn is sdpa else fn
        calls.append((name, list(T_values), kwargs))
        (T,) = T_values
        return [dict(T=T, seconds=script[name, T].pop(0), weights_bytes=0, peak_bytes=None)]

    monkeypatch.setattr(bench, "attention_cost", fake_cost)
    rows = bench.attention_rows(TINY)
    order = ["ours", "theirs", "theirs", "ours", "ours", "theirs"]
    assert [(name, T) for name, (T,), _ in calls] == [(n, 4) for n in order] + [
        (n, 8) for n in order
    ]
    for _, _, kwargs in calls:
        assert kwargs == dict(repeats=1, d_k=4, batch=1, n_heads=2, device="cpu")
        assert type(kwargs["d_k"]) is int
    assert len(rows) == 2
    what = "attention fwd+bwd T={}: course / F.scaled_dot_product_attention"
    _assert_row(rows[0], what.format(4), 2.0, 2.0, "ms", 2.0, None)
    _assert_row(rows[1], what.format(8), 4.0, 2.0, "ms", 3.0, None)


def test_the_decoding_row_times_a_seeded_eval_model(monkeypatch):
    results = [
        dict(cached_s=1e-3, recompute_s=4e-3),  # ratios 0.25, 1, 0.2 -> 0.25 (medians: 0.4)
        dict(cached_s=5e-3, recompute_s=5e-3),
        dict(cached_s=2e-3, recompute_s=10e-3),
    ]
    calls = []

    def fake_speedup(model, src, n_tokens, bos_id, **kwargs):
        calls.append((model, src, n_tokens, bos_id, kwargs, model.training))
        return dict(results[len(calls) - 1], speedup=0.0, n_tokens=n_tokens, batch=len(src))

    monkeypatch.setattr(bench, "speedup", fake_speedup)
    torch.manual_seed(99)
    row = bench.decoding_row(TINY)
    _assert_row(row, "greedy decoding, 5 tokens: KV cache / recomputing",
                2.0, 5.0, "ms", 0.25, ("<=", 1 / 3))  # fmt: skip
    assert len(calls) == TINY["decode_repeats"]
    model = calls[0][0]
    torch.manual_seed(0)
    want = Transformer(11, 11, 8, 2, 1, 16, pad_id=PAD_ID)
    assert isinstance(model, Transformer) and not model.fused and model.pad_id == PAD_ID
    assert _same_weights(model, want)
    src = bench.make_batch(dict(TINY, batch=2))[0]
    for got_model, got_src, n, bos, kwargs, training in calls:
        assert got_model is model and not training
        assert torch.equal(got_src, src)
        assert (n, bos, kwargs) == (5, BOS_ID, dict(repeats=1))


# -------------------------------------------------------------------------- report ----


def test_the_table_text():
    rows = [
        bench.Row("train step", 1234.5678, 0.000123456, "ms", 0.12345, ("<=", 0.75)),
        bench.Row("FLOP/s", 123456.0, 3.5, "GFLOP/s", 4.0, (">=", 0.6)),
        bench.Row("attention T=8", 2.0, 2.0, "ms", 1.0),
        bench.Row("decoding", 1.0, 2.0, "ms", 0.5, ("<=", 1 / 3)),
    ]
    assert bench.format_table(rows) == "\n".join([
        "what          |              ours |       theirs | ratio |    goal | met",
        "--------------+-------------------+--------------+-------+---------+----",
        "train step    |           1235 ms | 0.0001235 ms | 0.123 | <= 0.75 | yes",
        "FLOP/s        | 1.235e+05 GFLOP/s |  3.5 GFLOP/s | 4.000 | >= 0.60 | yes",
        "attention T=8 |              2 ms |         2 ms | 1.000 |       - |   -",
        "decoding      |              1 ms |         2 ms | 0.500 | <= 0.33 |  no",
    ])  # fmt: skip


def test_describe_sizes_names_every_size():
    assert bench.describe_sizes(TINY) == (
        "train step: d_model=8, h=2, d_ff=16, 1+1 layers, B=3, T_src=T_tgt=6 (lengths T/2..T, "
        "padded), vocabularies 11, dropout 0.1, label smoothing 0.1, Adam; FLOPs: every matmul "
        "of forward and backward, by torch.utils.flop_counter\n"
        "attention: B=1, h=2, d_k=4, no mask, forward + backward "
        "(course.efficient.attention_cost)\n"
        "decoding: a model of the same sizes (explicit), eval mode, B=2, greedy, no early stop "
        "(course.efficient.speedup)\n"
        "operators: one training step (forward with the loss, backward, Adam's for-each step), "
        "d_model=64, 2+2 layers, B=8, T=16; the top-level aten operators torch.profiler "
        "records (each called from Python, autograd or Adam, counted once)\n"
        "course's sizes: d_model=128, h=4, d_ff=512, 3+3 layers, B=64, T=24 (quick: the sizes "
        "above)"
    )


def _fake_open(text, opened):
    def open_(path, *args, **kwargs):
        opened.append(path)
        if text is None:
            raise FileNotFoundError(path)
        return io.StringIO(text)

    return open_


CPUINFO = (
    "processor\t: 0\nvendor_id\t: TestVendor\n"
    "model name\t: Test CPU: 3 GHz \nmodel name\t: the second core\n"
)


def test_machine_reads_the_first_model_name(monkeypatch):
    opened = []
    monkeypatch.setattr(bench, "open", _fake_open(CPUINFO, opened), raising=False)
    monkeypatch.setattr(platform, "processor", lambda: "plat-proc")
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 1.2345678, 10.0))
    assert bench.machine() == dict(cpu="Test CPU: 3 GHz", cores=6, torch=torch.__version__,
                                   threads=1, load="0.50 1.23 10.00")  # fmt: skip
    assert opened == ["/proc/cpuinfo"]


@pytest.mark.parametrize(
    "text, processor, want",
    [
        (None, "plat-proc", "plat-proc"),  # no /proc/cpuinfo
        (None, "", "plat-machine"),  # nor a processor name
        ("processor\t: 0\n", "plat-proc", "plat-proc"),  # no model name in it
        ("processor\t: 0\n", "", "plat-machine"),
    ],
)
def test_machine_falls_back_to_platform(monkeypatch, text, processor, want):
    monkeypatch.setattr(bench, "open", _fake_open(text, []), raising=False)
    monkeypatch.setattr(platform, "processor", lambda: processor)
    monkeypatch.setattr(platform, "machine", lambda: "plat-machine")
    assert bench.machine()["cpu"] == want


def test_load_is_three_averages_or_unknown(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 1.2345678, 10.0))
    assert bench._load() == "0.50 1.23 10.00"

    def no_load():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert bench._load() == "unknown"


ROWS = [
    bench.Row("a", 1.0, 2.0, "ms", 0.5, ("<=", 0.75)),
    bench.Row("b", 3.0, 2.0, "ms", 1.5),
    bench.Row("c", 1.0, 4.0, "ms", 0.25, ("<=", 1 / 3)),
]


@pytest.fixture
def scripted_run(monkeypatch):
    """run() with the rows scripted, the machine's lines and the clock known."""
    seen: dict = {}

    def training(sizes, compile_model, device, bf16):
        seen.update(sizes=sizes, compile_model=compile_model, threads=torch.get_num_threads())
        assert (device, bf16) == ("cpu", False)
        return [ROWS[0]]

    def attention(sizes, device):
        assert sizes is seen["sizes"] and device == "cpu"
        return [ROWS[1]]

    def decoding(sizes, device):
        assert sizes is seen["sizes"] and device == "cpu"
        return ROWS[2]

    def operators(sizes, device):
        assert sizes is bench.OPS and device == "cpu"
        return []

    def course_sizes(sizes, device, bf16):
        assert sizes is (bench.QUICK if seen["sizes"] is bench.QUICK else bench.COURSE)
        assert (device, bf16) == ("cpu", False)
        return []

    loads = iter([(0.5, 0.25, 1.0), (2.0, 1.5, 1.0)])
    monkeypatch.setattr(bench, "training_rows", training)
    monkeypatch.setattr(bench, "attention_rows", attention)
    monkeypatch.setattr(bench, "decoding_row", decoding)
    monkeypatch.setattr(bench, "operator_rows", operators)
    monkeypatch.setattr(bench, "course_size_rows", course_sizes)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=iter([100.0, 142.6]).__next__))
    monkeypatch.setattr(bench, "open", _fake_open(CPUINFO, []), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.setattr(os, "getloadavg", lambda: next(loads))
    return seen


def test_run_quick_prints_every_line(scripted_run):
    printed = []
    rows = bench.run(quick=True, threads=3, print_fn=printed.append)
    assert rows == ROWS
    assert scripted_run == dict(sizes=bench.QUICK, compile_model=False, threads=3)
    assert printed == [
        "course.bench --quick: tiny sizes, a smoke test; the numbers mean nothing",
        f"machine: Test CPU: 3 GHz, 6 cores; torch {torch.__version__}, 3 threads; "
        "load average at start 0.50 0.25 1.00",
        bench.format_table(ROWS),
        bench.describe_sizes(bench.QUICK),
        "load average at end 2.00 1.50 1.00; 43 s",
        "ratio = ours / theirs, the median of the per-repeat ratios (repeats interleaved)",
    ]


def test_run_defaults_to_full_sizes_every_core_and_no_compile(scripted_run):
    printed = []
    bench.run(print_fn=printed.append)
    assert scripted_run["sizes"] is bench.FULL and scripted_run["compile_model"] is False
    assert scripted_run["threads"] == 6  # os.cpu_count()
    assert not printed[0].startswith("course.bench --quick")
    assert printed[0].startswith("machine: ") and ", 6 threads;" in printed[0]
    assert printed[2] == bench.describe_sizes(bench.FULL)


def test_run_threads_fall_back_to_one_and_compile_is_passed_on(scripted_run, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    bench.run(quick=True, compile_model=True, print_fn=lambda line: None)
    assert scripted_run["threads"] == 1 and scripted_run["compile_model"] is True


def test_run_restores_the_callers_thread_count(scripted_run, monkeypatch):
    before = torch.get_num_threads()
    target = 2 if before != 2 else 3
    bench.run(quick=True, threads=target, print_fn=lambda line: None)
    assert scripted_run["threads"] == target and torch.get_num_threads() == before

    def fails(sizes, compile_model, device, bf16):
        assert torch.get_num_threads() == target
        raise RuntimeError("a measurement failed")

    monkeypatch.setattr(bench, "training_rows", fails)
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    with pytest.raises(RuntimeError, match="a measurement failed"):
        bench.run(quick=True, threads=target, print_fn=lambda line: None)
    assert torch.get_num_threads() == before


# ---------------------------------------------------------------------------- main ----


@pytest.fixture
def scripted_main(monkeypatch):
    calls = []
    returned = {"rows": ROWS}

    def fake_run(*args, **kwargs):
        calls.append((args, kwargs))
        return returned["rows"]

    monkeypatch.setattr(bench, "run", fake_run)
    return calls, returned


@pytest.mark.parametrize(
    "argv, want",
    [
        ([], (False, None, False)),
        (["--quick"], (True, None, False)),
        (["--threads", "1"], (False, 1, False)),
        (["--quick", "--threads", "3", "--compile"], (True, 3, True)),
    ],
)
def test_main_passes_its_arguments_on(scripted_main, argv, want):
    calls, _ = scripted_main
    assert bench.main(argv) is ROWS
    assert calls == [(want, {"device": "cpu", "bf16": False})]


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_main_refuses_threads_below_one(scripted_main, capsys, threads):
    calls, _ = scripted_main
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--threads", threads])
    assert exit_.value.code == 2 and calls == []
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"python -m course.bench: error: --threads must be a positive int, got {threads}"
    )


def test_main_help_names_every_option(scripted_main, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "usage: python -m course.bench [-h] [--quick] [--threads THREADS] [--compile] "
        "[--device DEVICE] [--bf16]\n\nmake bench\n"
    )
    for help_text in (
        "tiny sizes: a smoke test in seconds",
        "torch threads (default: every core, os.cpu_count())",
        "add a torch.compile row (compiles C++ first: minutes)",
        "cpu (default), auto (CUDA, else Apple's MPS), cuda, mps",
        "training steps under bf16 autocast (torch.autocast)",
    ):
        assert help_text in out


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_main_refuses_a_ratio_that_is_not_positive_and_finite(scripted_main, bad):
    _, returned = scripted_main
    returned["rows"] = [*ROWS, bench.Row("bad", 1.0, 1.0, "ms", bad)]
    with pytest.raises(SystemExit) as exit_:
        bench.main([])
    assert exit_.value.code == "a ratio is not a positive finite number: see the table"


def test_small_positive_ratios_pass(scripted_main):
    _, returned = scripted_main
    returned["rows"] = [bench.Row("small", 1.0, 1.0, "ms", 0.01)]
    assert bench.main([]) is returned["rows"]
