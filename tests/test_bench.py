"""`make bench` (course.bench) runs, in quick mode, and prints its table: every row named,
with its two measurements, a positive finite ratio, a goal and whether it is met. Timing
is not tested (a shared CPU's timings are noise at these tiny sizes): only the structure.
"""

import math

import pytest
import torch

from course import bench


@pytest.fixture(scope="module")
def quick_run():
    printed: list[str] = []
    threads = torch.get_num_threads()
    try:
        rows = bench.run(quick=True, threads=1, print_fn=printed.append)
    finally:
        torch.set_num_threads(threads)
    return rows, "\n".join(printed)


def test_quick_mode_gives_every_row_with_positive_finite_ratios(quick_run):
    rows, _ = quick_run
    whats = [row.what for row in rows]
    assert sum(w.startswith("train step: ours (explicit)") for w in whats) == 1
    assert sum(w.startswith("train step: ours (fused=True)") for w in whats) == 1
    assert sum(w.startswith("step FLOP/s") for w in whats) == 1
    assert sum(w.startswith("attention fwd+bwd") for w in whats) == len(bench.QUICK["attention_T"])
    assert sum(w.startswith("greedy decoding") for w in whats) == 1
    for row in rows:
        assert isinstance(row, bench.Row)
        for value in (row.ours, row.theirs, row.ratio):
            assert isinstance(value, float) and math.isfinite(value) and value > 0, row
        assert row.goal is None or (row.goal[0] in ("<=", ">=") and row.goal[1] > 0)
        assert row.met is None if row.goal is None else isinstance(row.met, bool)


def test_the_table_shows_the_machine_and_a_line_per_row(quick_run):
    rows, printed = quick_run
    assert "torch " + torch.__version__ in printed and "1 threads" in printed
    assert "load average at start" in printed and "load average at end" in printed
    assert "train step: d_model=32, h=4, d_ff=64, 1+1 layers, B=4" in printed
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("what "))
    assert [c.strip() for c in lines[header].split("|")] == [
        "what", "ours", "theirs", "ratio", "goal", "met"
    ]  # fmt: skip
    table = lines[header + 2 : header + 2 + len(rows)]
    for line, row in zip(table, rows, strict=True):
        cells = [c.strip() for c in line.split("|")]
        assert cells[0] == row.what and float(cells[3]) == pytest.approx(row.ratio, abs=1e-3)
        assert cells[5] in ("yes", "no", "-")


def test_met_follows_the_goal():
    row = bench.Row("x", 1.0, 2.0, "ms", 0.5, ("<=", 0.75))
    assert row.met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 1.0, ("<=", 0.75)).met is False
    assert bench.Row("x", 1.0, 1.0, "ms", 0.7, (">=", 0.60)).met is True
    assert bench.Row("x", 1.0, 1.0, "ms", 0.5, (">=", 0.60)).met is False
    assert bench.Row("x", 1.0, 1.0, "ms", 0.5).met is None


def test_the_torch_model_computes_what_ours_computes_with_its_weights():
    """The bench compares like with like: theirs and ours hold the same weights and, in
    eval mode, give the same logits (fused or not). torch's fast path is turned off here:
    its nested tensors warn once a process, and tests/test_layers.py expects that warning."""
    models = bench.build_models(bench.QUICK)
    src, tgt_in, _ = bench.make_batch(bench.QUICK)
    fast_path = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            want = models["theirs"].eval()(src, tgt_in)
            for name in ("ours", "ours_fused"):
                got = models[name].eval()(src, tgt_in)
                assert (got - want).abs().max() < 1e-5, name
    finally:
        torch.backends.mha.set_fastpath_enabled(fast_path)


def test_bad_threads_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--threads", "0"])
    assert "--threads must be a positive int, got 0" in capsys.readouterr().err
