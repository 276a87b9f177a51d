"""Issue 24: the model path is as lean as torch.nn's. One matmul projects q, k and v in
self-attention (k and v in cross-attention), the norms are one operator each, and a
training step of ours issues no more operators than torch.nn.Transformer's; `make bench`
prints that count and runs on a chosen device, with bf16 autocast on request."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course import bench, utils
from course.layers import LayerNorm
from course.multihead import MultiHeadAttention


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _matmuls(fn) -> int:
    """How many matrix products (addmm, mm, bmm, matmul kernels) fn() runs."""
    with bench._CountOperators() as counter:
        fn()
    return sum(n for name, n in counter.counts.items() if name in ("aten.addmm", "aten.mm"))


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_projects_q_k_v_in_one_matmul(bias):
    mha = MultiHeadAttention(16, 4, bias=bias)
    x = torch.randn(2, 5, 16, generator=_gen())
    memory = torch.randn(2, 7, 16, generator=_gen(1))
    assert _matmuls(lambda: mha(x, x, x)) == 2  # [q | k | v], then w_o
    assert _matmuls(lambda: mha(x, memory, memory)) == 3  # q; [k | v]; w_o
    assert _matmuls(lambda: mha(x, memory, memory.clone())) == 4  # three projections, w_o


@pytest.mark.parametrize("bias", [True, False])
def test_the_stacked_projection_computes_the_three_products(bias):
    """Same tensor (one stacked matmul) or equal copies (three matmuls): same output, same
    gradients for every weight, in float64."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3, bias=bias).double()
    x = torch.randn(3, 4, 12, generator=_gen(), dtype=torch.float64)
    memory = torch.randn(3, 6, 12, generator=_gen(1), dtype=torch.float64)
    mask = torch.rand(3, 1, 4, 6, generator=_gen(2)) > 0.3
    for stacked, separate, m in [
        ((x, x, x), (x, x.clone(), x.clone()), None),
        ((x, memory, memory), (x, memory, memory.clone()), mask),
    ]:
        results = []
        for args in (stacked, separate):
            mha.zero_grad()
            out = mha(*args, m)
            (out * torch.linspace(-1, 1, 12, dtype=torch.float64)).sum().backward()
            results.append((out.detach(), {n: p.grad.clone() for n, p in mha.named_parameters()}))
        (out_a, grads_a), (out_b, grads_b) = results
        torch.testing.assert_close(out_a, out_b, rtol=1e-12, atol=1e-12)
        assert grads_a.keys() == grads_b.keys()
        for name in grads_a:
            torch.testing.assert_close(grads_a[name], grads_b[name], rtol=1e-12, atol=1e-12)


def test_layer_norm_is_the_formula_written_out():
    """One operator, the lesson-07 formula's numbers and gradients (float64)."""
    norm = LayerNorm(10, eps=1e-3).double()
    with torch.no_grad():
        norm.weight.copy_(torch.randn(10, generator=_gen(), dtype=torch.float64))
        norm.bias.copy_(torch.randn(10, generator=_gen(1), dtype=torch.float64))
    x = torch.randn(2, 3, 10, generator=_gen(2), dtype=torch.float64, requires_grad=True)
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    by_hand = norm.weight * (x - mean) / torch.sqrt(var + 1e-3) + norm.bias
    ours = norm(x)
    torch.testing.assert_close(ours, by_hand, rtol=1e-12, atol=1e-12)
    upstream = torch.randn(2, 3, 10, generator=_gen(3), dtype=torch.float64)
    grads_hand = torch.autograd.grad(by_hand, (x, norm.weight, norm.bias), upstream)
    grads_ours = torch.autograd.grad(ours, (x, norm.weight, norm.bias), upstream)
    for a, b in zip(grads_ours, grads_hand, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    with bench._CountOperators() as counter:
        norm(x)
    assert sum(counter.counts.values()) == 1, counter.counts


def test_a_training_step_issues_no_more_operators_than_torch_nn():
    models = bench.build_models(bench.OPS)
    batch = bench.make_batch(bench.OPS)
    # the model path alone, as operators reach a kernel (forward and backward, no Adam)
    kernels = {name: sum(bench.count_operators(m, batch).values()) for name, m in models.items()}
    assert kernels["ours"] <= kernels["theirs"], kernels
    assert kernels["ours_fused"] <= kernels["theirs"], kernels
    # make bench's row 5: the profiler's top-level operators of the whole step, Adam included
    counts = {
        name: sum(sum(c.values()) for c in bench.step_operators(m, batch)[0].values())
        for name, m in models.items()
    }
    rows = bench.operator_rows(bench.OPS)
    assert [row.what for row in rows] == [
        "operators per step: ours (explicit) / torch.nn.Transformer",
        "operators per step: ours (fused=True) / torch.nn.Transformer",
    ]
    for row, name in zip(rows, ("ours", "ours_fused"), strict=True):
        assert (row.ours, row.theirs) == (counts[name], counts["theirs"])
        assert row.ratio == pytest.approx(counts[name] / counts["theirs"])
        assert row.unit == "ops" and row.goal == ("<=", 1.0)
    assert rows[1].met  # the fused model: no more operators than torch.nn's


def test_count_operators_counts_the_model_path_only_and_leaves_no_gradient():
    models = bench.build_models(bench.QUICK)
    batch = bench.make_batch(bench.QUICK)
    counts = bench.count_operators(models["ours"], batch)
    assert counts["aten.native_layer_norm"] >= 1 and counts["aten.native_layer_norm_backward"] >= 1
    assert not any(name.startswith("aten._foreach") or "adam" in name for name in counts)
    assert all(p.grad is None for p in models["ours"].parameters())


def test_a_bf16_step_trains_under_autocast():
    sizes = bench.QUICK
    model = bench.build_models(sizes)["ours"]
    before = [p.detach().clone() for p in model.parameters()]
    seen = []
    handle = model.out.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    bench.make_step(model, bench.make_batch(sizes), bf16=True)()
    handle.remove()
    assert seen == [torch.bfloat16]  # the output layer ran in bf16
    assert all(p.dtype == torch.float32 for p in model.parameters())  # weights stay fp32
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))


def test_course_size_rows_time_both_models_against_torch(monkeypatch):
    calls = {}

    def fake_interleaved(fns, repeats, warmup):
        calls.update(names=list(fns), repeats=repeats, warmup=warmup)
        return {"theirs": [2.0, 2.0, 2.0], "ours": [1.0, 3.0, 2.0], "ours_fused": [1.0, 1.0, 4.0]}

    monkeypatch.setattr(bench, "interleaved", fake_interleaved)
    rows = bench.course_size_rows(bench.QUICK)
    assert calls == dict(names=["theirs", "ours", "ours_fused"], repeats=3, warmup=1)
    assert [row.what for row in rows] == [
        "train step (d_model 32, 1+1, B 4): ours (explicit) / torch.nn",
        "train step (d_model 32, 1+1, B 4): ours (fused=True) / torch.nn",
    ]
    assert [row.ratio for row in rows] == [1.0, 0.5]
    assert [row.ours for row in rows] == [2000.0, 1000.0] and rows[0].theirs == 2000.0
    assert all(row.goal == ("<=", 1.0) for row in rows)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device", "nonsense"], "--device nonsense: unknown device (try auto, cpu, cuda, mps)"),
        (["--device", "cuda"], "--device cuda: no CUDA GPU is available here (use auto or cpu)"),
        (["--device", "mps"], "--device mps: Apple's MPS is not available here (use auto or cpu)"),
    ],
)
def test_bench_refuses_a_device_it_cannot_use(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(utils, "mps_available", lambda: False)
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(SystemExit) as exit_:
        bench.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m course.bench: error: {message}"


@pytest.mark.parametrize("cuda, mps, want", [(True, True, "cuda"), (False, True, "mps"),
                                             (False, False, "cpu")])  # fmt: skip
def test_bench_device_auto_takes_cuda_then_mps_then_the_cpu(monkeypatch, cuda, mps, want):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(utils, "mps_available", lambda: mps)
    monkeypatch.setattr(bench, "run", lambda *a, **k: calls.append(k["device"]) or [])
    bench.main(["--quick", "--device", "auto"])
    assert calls == [want]


def test_bench_passes_device_and_bf16_on(monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "run", lambda *a, **k: calls.append((a, k)) or [])
    bench.main(["--quick", "--bf16", "--device", "cpu"])
    assert calls == [((True, None, False), {"device": "cpu", "bf16": True})]


def test_the_device_line_says_bf16(monkeypatch):
    for name in ("training_rows", "attention_rows", "operator_rows", "course_size_rows"):
        monkeypatch.setattr(bench, name, lambda *a, **k: [])
    monkeypatch.setattr(bench, "decoding_row", lambda *a, **k: bench.Row("d", 1.0, 1.0, "ms", 1.0))
    printed = []
    bench.run(quick=True, threads=1, print_fn=printed.append, bf16=True)
    assert "device: cpu; bf16 autocast" in printed
    printed.clear()
    bench.run(quick=True, threads=1, print_fn=printed.append)
    assert not any(line.startswith("device:") for line in printed)


def test_torch_nn_transformer_is_what_the_count_compares_with():
    assert isinstance(bench.build_models(bench.OPS)["theirs"].transformer, nn.Transformer)
