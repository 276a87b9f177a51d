"""`make bench`: how fast the course's own Transformer is, measured side by side.

    python -m course.bench [--quick] [--threads N] [--compile]

One run prints one table, each row a ratio of two things measured in the same run, their
repeats interleaved (one of each, then again, so both see the same load), after a warm-up,
as the median of several repeats:

1. a training step (forward, label-smoothed loss, backward, Adam step) of
   course.transformer.Transformer, explicit attention (fused=False) and fused
   (fused=True), against the same sizes assembled from torch.nn.Transformer with the
   same embeddings, positional encoding and output layer, on the same batch;
   goal: ours <= 0.75 x its time;
2. the FLOP/s that step achieves, as a fraction of a large square matmul's FLOP/s, same
   machine, same threads; the step's FLOPs are counted by
   torch.utils.flop_counter.FlopCounterMode (every matmul of forward and backward:
   linear layers, q k^T and weights v; not the element-wise work, softmax, LayerNorm,
   the loss or Adam); goal >= 60 %;
3. course.attention.scaled_dot_product_attention against PyTorch's fused
   F.scaled_dot_product_attention (course.efficient.sdpa), forward + backward, as T
   grows (course.efficient.attention_cost): information, no goal;
4. greedy decoding of 128 tokens with a KV cache ("ours") against recomputing the prefix
   at every step ("theirs"), course.efficient.speedup; goal: the cache >= 3 x faster,
   a ratio <= 1/3;
5. the operators one training step issues (forward with the loss, backward, Adam's step
   as course.train builds it), as torch.profiler records them: every aten operator called
   from Python, from an autograd node (backward) or from the optimizer, views included,
   each counted once and the operators it calls inside not again (`step_operators`);
   goal ours <= torch.nn's, at the OPS sizes (d_model 64, 2 + 2 layers, B 8, T 16; the
   count depends on the layers, not on their width). Ours has more parameter tensors
   (w_q, w_k, w_v where torch packs one in_proj): with Adam's for-each step they cost two
   operators each, with the per-tensor loop (foreach=False) about nine;
6. the training step of row 1 at the course's own small sizes (COURSE: d_model 128,
   3 + 3 layers, B 64, T 24; lessons 11 and 12 train at d_model 128): goal ours <= 1.0 x torch.nn.

Every ratio is ours / theirs (time / time, or FLOP/s / FLOP/s for row 2): the median of
the per-repeat ratios, so that a slow moment of a shared machine hits both sides of one
ratio alike. Timings depend on the machine, its load and the threads (--threads, default
every core: on a machine that other work shares, fewer threads wait less for each other):
the lines around the table say all three.
`--quick` runs tiny sizes in seconds (a smoke test, tests/test_bench.py): its numbers mean
nothing. `--compile` adds a row with torch.compile(ours, fused): it compiles C++ on the
first call (minutes on a small CPU) and needs a C++ compiler. `--device cuda` (or `mps`, or
`auto`: CUDA, then Apple's MPS, then the CPU) runs every training row on the GPU (each timed
call ends with course.utils.synchronize), `--bf16` runs
their forward passes and losses under bf16 autocast (torch.autocast); the attention and
decoding rows run on the same device.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from course.efficient import attention_cost, sdpa, speedup
from course.masking import causal_mask, to_torch_attn_mask
from course.positional import PositionalEncoding, TokenEmbedding
from course.train import ADAM_BETAS, ADAM_EPS, ADAM_FOREACH
from course.transformer import Transformer, load_transformer
from course.utils import device as pick_device
from course.utils import synchronize

PAD, BOS = 0, 1
# Sizes that represent real use: the paper's base layer (d_model 512, 8 heads, d_ff 2048),
# 2 + 2 layers, a batch of 32 sentence pairs of up to 64 tokens, 1000-token vocabularies;
# decoding one sentence at a time (B = 1), as generation usually does.
FULL = dict(d_model=512, n_heads=8, n_layers=2, d_ff=2048, vocab=1000, batch=32, T=64,
            repeats=5, warmup=1, matmul_n=2048, attention_T=(64, 128, 256, 512, 1024),
            attention_repeats=5, decode_batch=1, decode_tokens=128, decode_repeats=3)  # fmt: skip
QUICK = dict(d_model=32, n_heads=4, n_layers=1, d_ff=64, vocab=50, batch=4, T=8,
             repeats=3, warmup=1, matmul_n=128, attention_T=(8, 16),
             attention_repeats=3, decode_batch=2, decode_tokens=8, decode_repeats=2)  # fmt: skip
# Operators are counted at small sizes (the count depends on the layers, not their width).
OPS = dict(QUICK, d_model=64, n_layers=2, d_ff=128, batch=8, T=16)
# Sizes near the course's own models: d_model 128 as lessons 11 and 12 train at (fra-eng, lm-en),
# 3 + 3 layers, between fra-eng's 2 + 2 and lm-en's 4; batches of 64 as every task.
COURSE = dict(FULL, d_model=128, n_heads=4, n_layers=3, d_ff=512, batch=64, T=24, repeats=9)
LABEL_SMOOTHING = 0.1


@dataclass
class Row:
    """One line of the table: ratio = ours / theirs (median of the per-repeat ratios).
    goal, e.g. ("<=", 0.75), or None for a row that only informs."""

    what: str
    ours: float
    theirs: float
    unit: str
    ratio: float
    goal: tuple[str, float] | None = None

    @property
    def met(self) -> bool | None:
        if self.goal is None:
            return None
        sign, bound = self.goal
        return self.ratio <= bound if sign == "<=" else self.ratio >= bound


# ------------------------------------------------------------------- the two models ----


class TorchTransformerSeq2Seq(nn.Module):
    """torch.nn.Transformer with our embeddings, positional encoding and output layer:
    logits = out(nn.Transformer(pos(src_embed(src)), pos(tgt_embed(tgt)), masks)).

    The paper's post-LN has no final LayerNorms (ours neither), so torch's are removed.
    Masks in torch's convention (True = may NOT attend), built from the padding as ours
    builds them: the source's padding for the encoder and the cross-attention, causal and
    the target's padding for the decoder.
    """

    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, n_layers, d_ff, dropout, pad_id):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = TokenEmbedding(src_vocab, d_model, name="src")
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model, name="tgt")
        self.pos = PositionalEncoding(d_model, 5000, dropout)
        self.transformer = nn.Transformer(
            d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True
        )
        self.transformer.encoder.norm = self.transformer.decoder.norm = None
        self.out = nn.Linear(d_model, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_padding = src == self.pad_id  # (B, T_src), True = padding
        hidden = self.transformer(
            self.pos(self.src_embed(src)),  # (B, T_src, d_model)
            self.pos(self.tgt_embed(tgt)),  # (B, T_tgt, d_model)
            tgt_mask=to_torch_attn_mask(causal_mask(tgt.shape[1], tgt.device)),  # (T_tgt, T_tgt)
            src_key_padding_mask=src_padding,
            tgt_key_padding_mask=tgt == self.pad_id,  # (B, T_tgt)
            memory_key_padding_mask=src_padding,
        )
        return self.out(hidden)  # (B, T_tgt, tgt_vocab)


def build_models(sizes: dict, seed: int = 0, device: str = "cpu") -> dict[str, nn.Module]:
    """theirs (torch.nn.Transformer), ours explicit and ours fused, all with theirs' weights,
    on `device`."""
    torch.manual_seed(seed)
    V, d = sizes["vocab"], sizes["d_model"]
    layers = (sizes["n_heads"], sizes["n_layers"], sizes["d_ff"])
    theirs = TorchTransformerSeq2Seq(V, V, d, *layers, dropout=0.1, pad_id=PAD)
    models = {"theirs": theirs}
    for name, fused in (("ours", False), ("ours_fused", True)):
        ours = Transformer(V, V, d, *layers, dropout=0.1, pad_id=PAD, fused=fused)
        models[name] = load_transformer(
            ours, theirs.transformer, theirs.src_embed.embedding, theirs.tgt_embed.embedding,
            theirs.out,
        )  # fmt: skip
    return {name: model.to(device) for name, model in models.items()}


def make_batch(
    sizes: dict, seed: int = 0, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src, tgt_in, tgt_out (B, T) token ids: lengths from T / 2 to T, padded with PAD
    (drawn on the CPU, then moved to `device`: the same batch everywhere)."""
    gen = torch.Generator().manual_seed(seed)
    B, T, V = sizes["batch"], sizes["T"], sizes["vocab"]
    tokens = torch.randint(2, V, (3, B, T), generator=gen)  # (3, B, T): no PAD, no BOS
    lengths = torch.randint(T // 2, T + 1, (2, B), generator=gen)  # (2, B): source, target
    is_real = torch.arange(T)[None, None, :] < lengths[:, :, None]  # (2, B, T)
    src = tokens[0].masked_fill(~is_real[0], PAD)  # (B, T)
    tgt_out = tokens[1].masked_fill(~is_real[1], PAD)  # (B, T): what the decoder must write
    tgt_in = torch.cat([torch.full((B, 1), BOS), tgt_out[:, :-1]], dim=1)  # (B, T): shifted
    return src.to(device), tgt_in.to(device), tgt_out.to(device)


def make_optimizer(model: nn.Module) -> torch.optim.Adam:
    """Adam as course.train.build_optimizer builds it (the paper's betas and eps, the
    for-each step), at a fixed rate."""
    return torch.optim.Adam(
        model.parameters(), lr=1e-4, betas=ADAM_BETAS, eps=ADAM_EPS, foreach=ADAM_FOREACH
    )


def make_step(model: nn.Module, batch, bf16: bool = False) -> Callable[[], None]:
    """One training step of `model` on `batch`, as course.train takes it: forward, the
    label-smoothed cross-entropy (both under bf16 autocast when bf16), backward, Adam.
    On a GPU the step waits for the device to finish (course.utils.synchronize), so that a
    clock around it measures the work, not the launch."""
    src, tgt_in, tgt_out = batch
    on_gpu = src.device.type != "cpu"
    model.train()
    optimizer = make_optimizer(model)
    criterion = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING, ignore_index=PAD)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(src, tgt_in)  # (B, T, V)
            loss = criterion(logits.flatten(0, 1), tgt_out.flatten())  # (B * T, V) vs (B * T,)
        loss.backward()
        optimizer.step()
        if on_gpu:
            synchronize(src.device)

    return step


def step_flops(model: nn.Module, batch) -> int:
    """The FLOPs of one training step's matmuls, forward and backward, as FlopCounterMode
    counts them (one multiply-add = 2 FLOPs)."""
    step = make_step(model, batch)
    with FlopCounterMode(display=False) as counter:
        step()
    return counter.get_total_flops()


# ------------------------------------------------------------------------- timing ----


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, warmup: int) -> dict:
    """Time every fn once per round, `repeats` rounds, after `warmup` untimed rounds; the
    order turns each round so that none always runs first. Returns {name: [seconds, ...]}."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(_seconds(fns[name]))
    return times


def _median_ratio(mine: list[float], others: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(mine, others, strict=True))


def training_rows(
    sizes: dict, compile_model: bool = False, device: str = "cpu", bf16: bool = False
) -> list[Row]:
    """Rows 1 and 2: the training step (ours explicit, ours fused[, compiled]) against
    torch.nn.Transformer's, and its achieved FLOP/s against a large matmul's."""
    models = build_models(sizes, device=device)
    batch = make_batch(sizes, device=device)
    flops = step_flops(models["ours"], batch)
    fns = {name: make_step(model, batch, bf16) for name, model in models.items()}
    if compile_model:  # its graph breaks (the models' input checks) are expected: not shown
        logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
        compiled = build_models(sizes, device=device)["ours_fused"]
        fns["ours_compiled"] = make_step(torch.compile(compiled), batch, bf16)
    n = sizes["matmul_n"]
    gen = torch.Generator().manual_seed(1)
    a, b = (torch.randn(n, n, generator=gen).to(device) for _ in range(2))  # (n, n) each
    dtype = torch.bfloat16 if bf16 else a.dtype  # the matmul at the rate the step runs at
    a, b = a.to(dtype), b.to(dtype)
    if torch.device(device).type != "cpu":
        fns["matmul"] = lambda: (a @ b, synchronize(device))  # 2 n^3 FLOPs
    else:
        fns["matmul"] = lambda: a @ b  # (n, n) @ (n, n): 2 n^3 FLOPs
    times = interleaved(fns, sizes["repeats"], sizes["warmup"])
    theirs = times["theirs"]
    labels = {
        "ours": "train step: ours (explicit) / torch.nn.Transformer",
        "ours_fused": "train step: ours (fused=True) / torch.nn.Transformer",
        "ours_compiled": "train step: torch.compile(ours, fused) / torch.nn.Transformer",
    }
    rows = [Row(labels[name], statistics.median(times[name]) * 1e3,
                statistics.median(theirs) * 1e3, "ms", _median_ratio(times[name], theirs),
                ("<=", 0.75))
            for name in labels if name in times]  # fmt: skip
    matmul_flops = 2 * n**3
    achieved = [flops / t for t in times["ours_fused"]]  # FLOP/s, per repeat
    peak = [matmul_flops / t for t in times["matmul"]]
    rows.append(
        Row(f"step FLOP/s ({flops / 1e9:.3g} GFLOP): ours (fused=True) / {n}x{n} matmul",
            statistics.median(achieved) / 1e9, statistics.median(peak) / 1e9, "GFLOP/s",
            statistics.median(x / y for x, y in zip(achieved, peak, strict=True)), (">=", 0.60))
    )  # fmt: skip
    return rows


class _CountOperators(TorchDispatchMode):
    """Counts every aten operator that reaches a kernel while it is active."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def count_operators(model: nn.Module, batch) -> Counter:
    """The aten operators of one training step's model path, forward (with the loss) and
    backward, by name, as they reach a kernel (a TorchDispatchMode: a composite operator
    such as linear is seen as the operators it is made of, t and addmm; Adam not
    included); the step is taken once untimed first (lazy setup not counted). Row 5
    counts with the profiler instead (step_operators)."""
    src, tgt_in, tgt_out = batch
    model.train()
    criterion = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING, ignore_index=PAD)

    def forward_backward() -> None:
        logits = model(src, tgt_in)  # (B, T, V)
        criterion(logits.flatten(0, 1), tgt_out.flatten()).backward()

    forward_backward()
    with _CountOperators() as counter:
        forward_backward()
    model.zero_grad(set_to_none=True)
    return counter.counts


# Reading a tensor's value on the host: on a GPU each waits for the device (a host
# synchronisation); on the CPU the same calls are recorded, so a CPU run counts them.
HOST_READS = ("aten::item", "aten::_local_scalar_dense")
PHASES = ("forward", "backward", "optimizer")


def _phase(event, phases: dict) -> str:
    """The phase of the step an event belongs to: the record_function around it, else
    backward (autograd runs the backward nodes on a thread of its own)."""
    while event is not None:
        if event.name in phases:
            return phases[event.name]
        event = event.cpu_parent
    return "backward"


def step_operators(model: nn.Module, batch, optimizer: torch.optim.Optimizer | None = None):
    """The top-level aten operators of one training step, by phase and name, as
    torch.profiler records them: {"forward": Counter, "backward": Counter, "optimizer":
    Counter}, and the host reads (HOST_READS, at any depth) by phase: (operators, reads).

    Top-level: an aten operator not called by another aten operator, i.e. called from
    Python (the forward and the loss), from an autograd node (backward) or from the
    optimizer; a composite operator counts once, not with the operators it calls. The
    step (forward with the label-smoothed loss, backward, optimizer.step; default Adam
    as course.train builds it) is taken twice untimed first, so that lazy setup (Adam's
    state) is not counted."""
    src, tgt_in, tgt_out = batch
    model.train()
    optimizer = make_optimizer(model) if optimizer is None else optimizer
    criterion = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING, ignore_index=PAD)
    record = torch.profiler.record_function
    names = {"phase: forward": "forward", "phase: optimizer": "optimizer"}

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with record("phase: forward"):
            logits = model(src, tgt_in)  # (B, T, V)
            loss = criterion(logits.flatten(0, 1), tgt_out.flatten())  # (B * T, V) vs (B * T,)
        loss.backward()
        with record("phase: optimizer"):
            optimizer.step()

    step()
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        step()
    optimizer.zero_grad(set_to_none=True)
    operators = {phase: Counter() for phase in PHASES}
    reads = {phase: 0 for phase in PHASES}
    for event in profile.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        if parent is None or not parent.name.startswith("aten::"):
            operators[_phase(event, names)][event.name] += 1
        if event.name in HOST_READS:
            reads[_phase(event, names)] += 1
    return operators, reads


def operator_rows(sizes: dict, device: str = "cpu") -> list[Row]:
    """Row 5: operators per training step (forward, backward, Adam's step; step_operators),
    ours explicit and fused / torch.nn."""
    models = build_models(sizes, device=device)
    batch = make_batch(sizes, device=device)
    counts = {name: float(sum(sum(c.values()) for c in step_operators(model, batch)[0].values()))
              for name, model in models.items()}  # fmt: skip
    labels = {"ours": "operators per step: ours (explicit) / torch.nn.Transformer",
              "ours_fused": "operators per step: ours (fused=True) / torch.nn.Transformer",
              }  # fmt: skip
    return [Row(labels[name], counts[name], counts["theirs"], "ops",
                counts[name] / counts["theirs"], ("<=", 1.0))
            for name in labels]  # fmt: skip


def course_size_rows(sizes: dict, device: str = "cpu", bf16: bool = False) -> list[Row]:
    """Row 6: the training step at the course's own sizes, ours explicit and fused /
    torch.nn.Transformer (interleaved, median of the per-repeat ratios); goal <= 1.0."""
    models = build_models(sizes, device=device)
    batch = make_batch(sizes, device=device)
    fns = {name: make_step(model, batch, bf16) for name, model in models.items()}
    times = interleaved(fns, sizes["repeats"], sizes["warmup"])
    layers = f"{sizes['n_layers']}+{sizes['n_layers']}"
    what = f"d_model {sizes['d_model']}, {layers}, B {sizes['batch']}"
    labels = {"ours": f"train step ({what}): ours (explicit) / torch.nn",
              "ours_fused": f"train step ({what}): ours (fused=True) / torch.nn"}  # fmt: skip
    return [Row(labels[name], statistics.median(times[name]) * 1e3,
                statistics.median(times["theirs"]) * 1e3, "ms",
                _median_ratio(times[name], times["theirs"]), ("<=", 1.0))
            for name in labels]  # fmt: skip


def attention_rows(sizes: dict, device: str = "cpu") -> list[Row]:
    """Row 3: course attention vs F.scaled_dot_product_attention, forward + backward, per T
    (batch 1, h heads of d_k = d_model / h, as in the model)."""
    h = sizes["n_heads"]
    shape = dict(d_k=sizes["d_model"] // h, batch=1, n_heads=h, device=device)
    rows = []
    functions = {"ours": None, "theirs": sdpa}  # None: course.attention's
    for T in sizes["attention_T"]:
        times = {name: [] for name in functions}
        for r in range(sizes["attention_repeats"]):
            for name in ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours"):
                # one warm-up pass, then one timed forward + backward
                cost = attention_cost(functions[name], [T], repeats=1, **shape)
                times[name].append(cost[0]["seconds"])
        rows.append(
            Row(f"attention fwd+bwd T={T}: course / F.scaled_dot_product_attention",
                statistics.median(times["ours"]) * 1e3, statistics.median(times["theirs"]) * 1e3,
                "ms", _median_ratio(times["ours"], times["theirs"]))
        )  # fmt: skip
    return rows


def decoding_row(sizes: dict, device: str = "cpu") -> Row:
    """Row 4: greedy decoding with the KV cache vs recomputing, course.efficient.speedup,
    one repeat of each per round (speedup checks that both give the same tokens)."""
    torch.manual_seed(0)
    V, n = sizes["vocab"], sizes["decode_tokens"]
    model = Transformer(V, V, sizes["d_model"], sizes["n_heads"], sizes["n_layers"],
                        sizes["d_ff"], pad_id=PAD).eval().to(device)  # fmt: skip
    src = make_batch(dict(sizes, batch=sizes["decode_batch"]), device=device)[0]  # (B, T_src)
    results = [speedup(model, src, n, BOS, repeats=1) for _ in range(sizes["decode_repeats"])]
    cached = [r["cached_s"] for r in results]
    recompute = [r["recompute_s"] for r in results]
    return Row(
        f"greedy decoding, {n} tokens: KV cache / recomputing",
        statistics.median(cached) * 1e3, statistics.median(recompute) * 1e3, "ms",
        _median_ratio(cached, recompute), ("<=", 1 / 3),
    )  # fmt: skip


# ------------------------------------------------------------------------- report ----


def machine() -> dict:
    """What the numbers depend on: the CPU, its cores, torch and its threads, the load."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return dict(cpu=cpu, cores=os.cpu_count(), torch=torch.__version__,
                threads=torch.get_num_threads(), load=_load())  # fmt: skip


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def describe_sizes(sizes: dict) -> str:
    """The sizes every row ran at, for the lines under the table."""
    d, h, layers = sizes["d_model"], sizes["n_heads"], sizes["n_layers"]
    return "\n".join([
        f"train step: d_model={d}, h={h}, d_ff={sizes['d_ff']}, {layers}+{layers} layers, "
        f"B={sizes['batch']}, T_src=T_tgt={sizes['T']} (lengths T/2..T, padded), "
        f"vocabularies {sizes['vocab']}, dropout 0.1, label smoothing {LABEL_SMOOTHING}, Adam; "
        "FLOPs: every matmul of forward and backward, by torch.utils.flop_counter",
        f"attention: B=1, h={h}, d_k={d // h}, no mask, forward + backward "
        "(course.efficient.attention_cost)",
        f"decoding: a model of the same sizes (explicit), eval mode, B={sizes['decode_batch']}, "
        "greedy, no early stop (course.efficient.speedup)",
        f"operators: one training step (forward with the loss, backward, Adam's for-each "
        f"step), d_model={OPS['d_model']}, {OPS['n_layers']}+{OPS['n_layers']} layers, "
        f"B={OPS['batch']}, T={OPS['T']}; the top-level aten operators torch.profiler records "
        "(each called from Python, autograd or Adam, counted once)",
        "course's sizes: d_model=128, h=4, d_ff=512, 3+3 layers, B=64, T=24 (quick: the sizes "
        "above)",
    ])  # fmt: skip


def format_table(rows: list[Row]) -> str:
    header = ("what", "ours", "theirs", "ratio", "goal", "met")
    lines = []
    for row in rows:
        goal = "-" if row.goal is None else f"{row.goal[0]} {row.goal[1]:.2f}"
        met = "-" if row.met is None else ("yes" if row.met else "no")
        lines.append((row.what, f"{row.ours:.4g} {row.unit}", f"{row.theirs:.4g} {row.unit}",
                      f"{row.ratio:.3f}", goal, met))  # fmt: skip
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    out = []
    for i, line in enumerate([header, *lines]):
        cells = [cell.ljust(w) if j == 0 else cell.rjust(w)  # text left, numbers right
                 for j, (cell, w) in enumerate(zip(line, widths, strict=True))]  # fmt: skip
        out.append(" | ".join(cells))
        if i == 0:  # under the header
            out.append("-+-".join("-" * w for w in widths))
    return "\n".join(out)


def run(quick: bool = False, threads: int | None = None, compile_model: bool = False,
        print_fn: Callable[[str], object] = print, device: str = "cpu",
        bf16: bool = False) -> list[Row]:  # fmt: skip
    """Measure every row and print the table with the machine; returns the rows."""
    sizes = QUICK if quick else FULL
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    try:
        return _measure_and_print(sizes, quick, compile_model, print_fn, device, bf16)
    finally:
        torch.set_num_threads(threads_before)  # the caller's setting, as it was


def _measure_and_print(sizes: dict, quick: bool, compile_model: bool, print_fn,
                       device: str = "cpu", bf16: bool = False) -> list[Row]:  # fmt: skip
    start = machine()
    if quick:
        print_fn("course.bench --quick: tiny sizes, a smoke test; the numbers mean nothing")
    print_fn(f"machine: {start['cpu']}, {start['cores']} cores; torch {start['torch']}, "
             f"{start['threads']} threads; load average at start {start['load']}")  # fmt: skip
    if torch.device(device).type != "cpu" or bf16:
        gpu = torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else ""
        print_fn(f"device: {device} {gpu}".rstrip() + ("; bf16 autocast" if bf16 else ""))
    began = time.perf_counter()
    rows = (training_rows(sizes, compile_model, device, bf16) + attention_rows(sizes, device)
            + [decoding_row(sizes, device)] + operator_rows(OPS, device)
            + course_size_rows(QUICK if quick else COURSE, device, bf16))  # fmt: skip
    print_fn(format_table(rows))
    print_fn(describe_sizes(sizes))
    print_fn(f"load average at end {_load()}; {time.perf_counter() - began:.0f} s")
    print_fn("ratio = ours / theirs, the median of the per-repeat ratios (repeats interleaved)")
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="python -m course.bench", description="make bench")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test in seconds")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: every core, os.cpu_count())")  # fmt: skip
    parser.add_argument("--compile", action="store_true",
                        help="add a torch.compile row (compiles C++ first: minutes)")  # fmt: skip
    parser.add_argument("--device", default="cpu",
                        help="cpu (default), auto (CUDA, else Apple's MPS), cuda, mps")  # fmt: skip
    parser.add_argument("--bf16", action="store_true",
                        help="training steps under bf16 autocast (torch.autocast)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be a positive int, got {args.threads}")
    try:
        device = pick_device(args.device)  # auto: CUDA, then Apple's MPS, then the CPU
    except ValueError as error:
        parser.error(f"--device {error}")
    rows = run(args.quick, args.threads, args.compile, device=str(device), bf16=args.bf16)
    if not all(math.isfinite(row.ratio) and row.ratio > 0 for row in rows):
        raise SystemExit("a ratio is not a positive finite number: see the table")
    return rows


if __name__ == "__main__":
    main()
