"""The quadratic wall and ways around it (lesson 10).

Self-attention compares every query with every key: for T positions that is a (T, T)
matrix of scores per head, O(T^2 d) time and O(T^2) memory. This module holds the
lesson's tools, one idea per section:

1. KV cache. Greedy decoding (lesson 09) runs the decoder over the whole prefix at every
   step, although under the causal mask the earlier positions' keys and values never
   change. `kv_cache_attention` is one decoding step that keeps them instead;
   `cached_greedy_decode` decodes a course.transformer.Transformer with it, token for
   token what course.decoding.greedy_decode gives, and `cached_beam_search` what
   course.decoding.beam_search gives; `speedup` measures the gain (greedy).
2. Measuring attention's cost: `attention_cost` times forward + backward as T grows and
   says how much memory the (T, T) weights take; `sdpa` wraps PyTorch's fused kernel.
3. Cheaper attention: `LinformerSelfAttention` (project keys and values along the
   sequence to k rows, Wang et al. 2020); `sliding_window_mask` and `bigbird_mask`
   (sparse patterns, Zaheer et al. 2020), boolean with True = may attend.
4. Plugging a variant into course.transformer.Transformer without changing it:
   `sparse_encoder` (PatternAttention) and `linformer_encoder` (SelfAttentionCall) replace
   the encoder layers' self-attention (`replace_encoder_attention`).
"""

from __future__ import annotations

import functools
import math
import numbers
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course.attention import scaled_dot_product_attention
from course.decoding import _check_args, _check_beam, beam_loop, greedy_decode, greedy_loop
from course.masking import padding_mask
from course.multihead import _check_divisible, merge_heads, split_heads
from course.positional import apply_rotary
from course.utils import describe, synchronize

__all__ = [
    "kv_cache_attention",
    "KVCache",
    "decode_step",
    "cached_greedy_decode",
    "cached_beam_search",
    "speedup",
    "attention_cost",
    "sdpa",
    "LinformerSelfAttention",
    "sliding_window_mask",
    "bigbird_mask",
    "PatternAttention",
    "SelfAttentionCall",
    "replace_encoder_attention",
    "sparse_encoder",
    "linformer_encoder",
]


# ------------------------------------------------------------------ 1. KV cache --------


def _check_step(q_new, k_new, v_new, k_cache, v_cache) -> None:
    """Raise a ValueError naming what kv_cache_attention expects and what came."""
    for name, x in (("q_new", q_new), ("k_new", k_new), ("v_new", v_new)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[2] != 1:
            raise ValueError(f"{name} must be (B, h, 1, d_k), one new position, got {describe(x)}")
    if q_new.shape[:2] != k_new.shape[:2] or k_new.shape != v_new.shape[:3] + k_new.shape[3:]:
        raise ValueError(
            f"q_new, k_new, v_new must share (B, h, 1): got {tuple(q_new.shape)}, "
            f"{tuple(k_new.shape)}, {tuple(v_new.shape)}"
        )
    if (k_cache is None) != (v_cache is None):
        raise ValueError(
            "k_cache and v_cache are both None (the first step) or both tensors, got "
            f"k_cache {describe(k_cache)} and v_cache {describe(v_cache)}"
        )
    if k_cache is None:
        return
    for name, cache, new in (("k_cache", k_cache, k_new), ("v_cache", v_cache, v_new)):
        if (
            not isinstance(cache, torch.Tensor)
            or cache.dim() != 4
            or (cache.shape[:2] != new.shape[:2] or cache.shape[3] != new.shape[3])
        ):
            want = (*new.shape[:2], "t", new.shape[3])
            raise ValueError(f"{name} must be {want} like the new position, got {describe(cache)}")
    if k_cache.shape[2] != v_cache.shape[2]:
        raise ValueError(
            f"k_cache and v_cache must hold the same t positions, got {tuple(k_cache.shape)} and "
            f"{tuple(v_cache.shape)}"
        )


def kv_cache_attention(
    q_new: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    k_cache: torch.Tensor | None,
    v_cache: torch.Tensor | None,
    mask: torch.Tensor | None = None,
    rotary_base: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoding step of self-attention that reuses the past keys and values.

    q_new, k_new, v_new (B, h, 1, d_k): the newest position's query, key and value, as
    the layer's projections and split_heads made them. k_cache, v_cache (B, h, t, d_k):
    the keys and values of the t positions before it, or both None at the first step.
    Returns (output (B, h, 1, d_k), k_cache (B, h, t + 1, d_k), v_cache (B, h, t + 1, d_k)):
    the new caches are the old ones with the new key and value appended along the time
    axis (dim -2), as new tensors: the caches passed in are left as they were.

    The new query attends to every cached position and to itself. No causal mask: the
    only query is the last position, and every key it sees is in its past or itself.
    mask (optional, bool, True = may attend) broadcasts to (B, h, 1, t + 1), e.g. a
    padding mask (B, 1, 1, t + 1) over the keys.

    Positions. With the sinusoidal table the positions are in the embedding, added before
    the layers (cached_greedy_decode adds the table's row t for the token at position t,
    not row 0). With rotary positions (rotary_base, e.g. 10000.0) they enter here: the new
    query and key are rotated by their position, t = the number of cached positions, and
    the cache holds keys already rotated (each by its own position), so only the new key
    is rotated. Rotating by 0 at every step ("positions restarting at 0") loses the order.
    """
    _check_step(q_new, k_new, v_new, k_cache, v_cache)
    t = 0 if k_cache is None else k_cache.shape[-2]
    if rotary_base is not None:
        position = torch.tensor([t])  # (1,): the new token's position
        q_new = apply_rotary(q_new, rotary_base, position)  # (B, h, 1, d_k), rotated by t
        k_new = apply_rotary(k_new, rotary_base, position)  # (B, h, 1, d_k), rotated by t
    if k_cache is None:  # the first step: nothing cached yet
        k_all, v_all = k_new, v_new  # (B, h, 1, d_k) each
    else:
        # along time: (B, h, t, d_k) + (B, h, 1, d_k) -> (B, h, t + 1, d_k)
        k_all = torch.cat([k_cache, k_new], dim=-2)  # (B, h, t + 1, d_k)
        v_all = torch.cat([v_cache, v_new], dim=-2)  # (B, h, t + 1, d_k)
    output, _ = scaled_dot_product_attention(q_new, k_all, v_all, mask)  # (B, h, 1, d_k)
    return output, k_all, v_all


@dataclass
class KVCache:
    """What incremental decoding keeps between steps, for a batch of B sentences.

    self_kv      per decoder layer, the self-attention's (k, v), each (B, h, t, d_k)
                 (None before the first step);
    cross_kv     per decoder layer, the cross-attention's (k, v) of the encoder's memory,
                 each (B, h, T_src, d_k): computed once, they never change;
    src_mask     (B, 1, 1, T_src), the source's padding, for the cross-attention;
    key_is_real  (B, t), True where the token fed at that position is not padding: the
                 self-attention hides padded keys, as decoder_mask does on the whole prefix.
    """

    self_kv: list[tuple[torch.Tensor | None, torch.Tensor | None]]
    cross_kv: list[tuple[torch.Tensor, torch.Tensor]]
    src_mask: torch.Tensor
    key_is_real: torch.Tensor
    rotary: bool = False  # rotary positions: no table, the self-attentions rotate

    @property
    def length(self) -> int:
        """t, the number of positions decoded so far: the next token's position."""
        return self.key_is_real.shape[1]

    @classmethod
    def start(cls, model, memory: torch.Tensor, src_mask: torch.Tensor) -> KVCache:
        """An empty cache for `model`, holding memory's keys and values for every layer."""
        cross_kv = []
        for layer in model.decoder_layers:
            attn = layer.cross_attn
            # (B, T_src, d_model) -> (B, h, T_src, d_k), each
            k = split_heads(attn.w_k(memory), attn.n_heads)
            v = split_heads(attn.w_v(memory), attn.n_heads)
            cross_kv.append((k, v))
        B = memory.shape[0]
        key_is_real = torch.zeros(B, 0, dtype=torch.bool, device=memory.device)  # (B, 0)
        rotary = getattr(model, "positions", "sinusoidal") == "rotary"
        return cls([(None, None)] * len(cross_kv), cross_kv, src_mask, key_is_real, rotary)

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep, in place, row rows[i] of every per-row past as the new row i, rows (B,) long.

        Beam search's hypotheses change places: new hypothesis i continues old one rows[i]
        (one old hypothesis may have several continuations, another none), so its past
        keys and values must be those of rows[i]. Only what grows with the output moves
        (self_kv, key_is_real); cross_kv and src_mask hold the same source in every row a
        beam search's parent can come from (its own sentence's), so they stay.
        """
        self.self_kv = [
            (k.index_select(0, rows), v.index_select(0, rows))  # (B, h, t, d_k) each
            for k, v in self.self_kv
        ]
        self.key_is_real = self.key_is_real.index_select(0, rows)  # (B, t)


def _check_model(model) -> None:
    for name in ("decoder_layers", "tgt_embed", "pos", "out", "pad_id", "encode"):
        if not hasattr(model, name):
            raise ValueError(
                "cached decoding needs a course.transformer.Transformer (decoder_layers, "
                f"tgt_embed, pos, out, pad_id), got {type(model).__name__} without {name}"
            )
    positions = getattr(model, "positions", "sinusoidal")
    if positions not in ("sinusoidal", "rotary"):
        raise ValueError(
            f"cached decoding knows sinusoidal and rotary positions, got {positions!r}"
        )
    if model.training:
        raise ValueError(
            "cached decoding runs the model in eval mode (no dropout): call model.eval() first"
        )


def _self_attend_step(layer, x: torch.Tensor, cache: KVCache, i: int, mask: torch.Tensor):
    """Layer i's masked self-attention for the newest position x (B, 1, d_model)."""
    attn = layer.self_attn
    q = split_heads(attn.w_q(x), attn.n_heads)  # (B, 1, d_model) -> (B, h, 1, d_k)
    k = split_heads(attn.w_k(x), attn.n_heads)  # (B, 1, d_model) -> (B, h, 1, d_k)
    v = split_heads(attn.w_v(x), attn.n_heads)  # (B, 1, d_model) -> (B, h, 1, d_k)
    k_cache, v_cache = cache.self_kv[i]
    heads, k_cache, v_cache = kv_cache_attention(q, k, v, k_cache, v_cache, mask, attn.rotary_base)
    cache.self_kv[i] = (k_cache, v_cache)  # (B, h, t + 1, d_k) each
    return layer.dropout1(attn.w_o(merge_heads(heads)))  # (B, h, 1, d_k) -> (B, 1, d_model)


def _cross_attend_step(layer, x: torch.Tensor, cache: KVCache, i: int) -> torch.Tensor:
    """Layer i's cross-attention: the newest position's query against memory's cached k, v."""
    attn = layer.cross_attn
    q = split_heads(attn.w_q(x), attn.n_heads)  # (B, 1, d_model) -> (B, h, 1, d_k)
    k, v = cache.cross_kv[i]  # (B, h, T_src, d_k) each
    heads, _ = scaled_dot_product_attention(q, k, v, cache.src_mask)  # (B, h, 1, d_k)
    return layer.dropout2(attn.w_o(merge_heads(heads)))  # (B, h, 1, d_k) -> (B, 1, d_model)


def decode_step(model, token: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Feed the token at position t = cache.length, token (B,) ids; returns its logits (B, V).

    The same computation as model.decode(prefix)[:, -1] for the prefix decoded so far plus
    this token, using the model's own layers and weights, but on one position: every
    layer's keys and values of the earlier positions come from the cache (which this call
    extends by one position).
    """
    t = cache.length
    if t >= model.max_len:
        raise ValueError(
            f"position {t} is past the model's max_len={model.max_len}: build the Transformer "
            "with a larger max_len, or decode fewer tokens"
        )
    token = token[:, None]  # (B,) -> (B, 1)
    cache.key_is_real = torch.cat([cache.key_is_real, token != model.pad_id], dim=1)  # (B, t+1)
    self_mask = cache.key_is_real[:, None, None, :]  # (B, t+1) -> (B, 1, 1, t+1)
    x = model.tgt_embed(token)  # (B, 1) -> (B, 1, d_model)
    if cache.rotary:  # no table: the self-attentions rotate by position t
        x = model.pos(x)  # dropout only
    else:  # the table's row t, not row 0: this token stands at position t
        x = model.pos.dropout(x + model.pos.pe[t].to(x.dtype))  # (B, 1, d_model)
    for i, layer in enumerate(model.decoder_layers):
        if layer.norm_first:  # pre-LN
            x = x + _self_attend_step(layer, layer.norm1(x), cache, i, self_mask)
            x = x + _cross_attend_step(layer, layer.norm2(x), cache, i)
            x = x + layer.dropout3(layer.ff(layer.norm3(x)))
        else:  # post-LN, the paper's
            x = layer.norm1(x + _self_attend_step(layer, x, cache, i, self_mask))
            x = layer.norm2(x + _cross_attend_step(layer, x, cache, i))
            x = layer.norm3(x + layer.dropout3(layer.ff(x)))
    if getattr(model, "decoder_norm", None) is not None:
        x = model.decoder_norm(x)
    return model.out(x)[:, 0]  # (B, 1, d_model) -> (B, 1, V) -> (B, V)


@torch.no_grad()
def cached_greedy_decode(
    model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int
) -> torch.Tensor:
    """course.decoding.greedy_decode with a KV cache: the same (B, T_out) ids, faster.

    Step t feeds only the token chosen at step t - 1 (position t); each decoder layer
    appends its key and value to its cache and attends over the cache. The cross-
    attention's keys and values of memory are computed once. The model must be in eval
    mode; sinusoidal and rotary positions are both supported.
    """
    _check_args(model, src, max_len, bos_id, eos_id)
    _check_model(model)
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model): the encoder runs once
    cache = KVCache.start(model, memory, src_mask)

    def newest_position_logits(tokens: torch.Tensor) -> torch.Tensor:  # (B, t) -> (B, V)
        return decode_step(model, tokens[:, -1], cache)  # only the newest token is fed

    return greedy_loop(newest_position_logits, B, max_len, bos_id, eos_id, model.pad_id, src.device)


@torch.no_grad()
def cached_beam_search(
    model,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
) -> torch.Tensor:
    """course.decoding.beam_search with a KV cache: the same (B, T_out) ids, faster.

    The cache holds one row per hypothesis, B * K rows (K = beam_size). Step t feeds only
    each hypothesis's newest token; after the step's top-k the cache is reordered
    (KVCache.reorder) so that row i holds the past of the hypothesis new row i continues.
    The encoder and the cross-attention's keys and values of memory run once. The model
    must be in eval mode; sinusoidal and rotary positions are both supported.
    """
    _check_args(model, src, max_len, bos_id, eos_id)
    _check_beam(beam_size, alpha)
    _check_model(model)
    B, K, device = src.shape[0], int(beam_size), src.device
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model): the encoder runs once
    # One memory row per hypothesis, as beam_search: the cross-attention's keys and values
    # are then projected once for B*K rows (K times the work of B rows, but paid once, not
    # per step), and every tensor of the cache has the B*K rows decode_step expects.
    memory = memory.repeat_interleave(K, dim=0)  # (B*K, T_src, d_model)
    src_mask = src_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, T_src)
    cache = KVCache.start(model, memory, src_mask)  # cross_kv (B*K, h, T_src, d_k) each

    def next_log_probs(hypotheses: torch.Tensor) -> torch.Tensor:  # (B*K, t) -> (B*K, V)
        newest = hypotheses[:, -1]  # (B*K, t) -> (B*K,): only the newest token is fed
        logits = decode_step(model, newest, cache)  # (B*K,) -> (B*K, V), the cache grows by 1
        return logits.float().log_softmax(dim=-1)  # (B*K, V): the next token

    # after each top-k the cache's rows follow their hypotheses: cache.reorder(parent rows)
    return beam_loop(
        next_log_probs, cache.reorder, B, K, max_len, bos_id, eos_id, alpha, model.pad_id, device
    )


def _median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speedup(
    model, src: torch.Tensor, n_tokens: int = 128, bos_id: int = 1, repeats: int = 3
) -> dict:
    """Time greedy decoding of exactly n_tokens tokens, recomputing vs cached, side by side.

    No sentence may stop early, so <eos> is an id the model cannot write (tgt_vocab, one
    past the vocabulary). The two decoders must agree (checked). Returns a dict:
    recompute_s, cached_s (median seconds of `repeats` runs each, after one warm-up),
    speedup = recompute_s / cached_s, n_tokens, batch.
    """
    if model.training:
        raise ValueError("speedup times decoding in eval mode: call model.eval() first")
    no_eos = model.tgt_vocab  # an id no logit stands for: every sentence runs n_tokens

    def recompute():
        return greedy_decode(model, src, n_tokens, bos_id, no_eos)

    def cached():
        return cached_greedy_decode(model, src, n_tokens, bos_id, no_eos)

    if not torch.equal(recompute(), cached()):  # also the warm-up
        raise RuntimeError("cached and recomputed greedy decoding disagree on these inputs")
    recompute_s = _median_seconds(recompute, repeats)
    cached_s = _median_seconds(cached, repeats)
    return dict(
        recompute_s=recompute_s,
        cached_s=cached_s,
        speedup=recompute_s / cached_s,
        n_tokens=n_tokens,
        batch=src.shape[0],
    )


# ------------------------------------------------------- 2. measuring the cost --------


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None) -> torch.Tensor:
    """PyTorch's fused attention, F.scaled_dot_product_attention: the same result as
    course.attention.scaled_dot_product_attention's output (its boolean attn_mask also
    means True = may attend), without materialising the (T, T) weights where a fused
    kernel (flash / memory-efficient) applies."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (..., T_q, d_v)


def _course_attention(q, k, v, mask=None) -> torch.Tensor:
    return scaled_dot_product_attention(q, k, v, mask)[0]  # (..., T_q, d_v)


def _forward_backward(fn, q, k, v, device: torch.device) -> None:
    out = fn(q, k, v)
    out = out[0] if isinstance(out, tuple) else out  # (batch, h, T, d_k)
    out.sum().backward()
    q.grad = k.grad = v.grad = None
    synchronize(device)  # a GPU (CUDA or MPS) runs it later: wait before reading the clock


def attention_cost(
    fn: Callable[..., torch.Tensor] | None,
    T_values: Sequence[int],
    d_k: int = 64,
    batch: int = 1,
    n_heads: int = 4,
    repeats: int = 3,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> list[dict]:
    """Time forward + backward of attention fn(q, k, v) as the length T grows.

    fn takes q, k, v (batch, n_heads, T, d_k) and returns the output (or (output,
    weights)); None means course.attention.scaled_dot_product_attention. For each T one
    row: T, seconds (median of `repeats` forward + backward passes after one warm-up),
    weights_bytes (the (batch, h, T, T) weights' size, batch * h * T^2 * bytes per
    element, computed: what a non-fused attention must store for backward), and
    peak_bytes: on a GPU, torch.cuda.max_memory_allocated during one pass above what
    was allocated before; on the CPU None, because no honest allocator-level figure
    exists there (tracemalloc does not see torch's allocations, and a process's RSS moves
    with the allocator's caching), so the analytic weights_bytes stands in.
    """
    fn = _course_attention if fn is None else fn
    T_values = list(T_values)  # read twice below: a generator would be empty the second time
    for T in T_values:
        _check_T(T, "every T in T_values")
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for T in T_values:
        shape = (batch, n_heads, T, d_k)
        q, k, v = (torch.randn(shape, generator=gen, dtype=dtype).to(device) for _ in range(3))
        for t in (q, k, v):
            t.requires_grad_()

        one_pass = functools.partial(_forward_backward, fn, q, k, v, device)
        one_pass()  # warm-up
        peak = None
        if device.type == "cuda":
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            one_pass()
            peak = torch.cuda.max_memory_allocated(device) - before
        seconds = _median_seconds(one_pass, repeats)
        element = torch.empty((), dtype=dtype).element_size()
        rows.append(
            dict(T=T, seconds=seconds, weights_bytes=batch * n_heads * T * T * element,
                 peak_bytes=peak)
        )  # fmt: skip
    return rows


# ----------------------------------------------------------- 3. cheaper attention -----


class LinformerSelfAttention(nn.Module):
    """Multi-head self-attention with keys and values projected along the sequence axis
    to k rows (Linformer, Wang et al. 2020):

        head_i = softmax(Q_i (E K_i)^T / sqrt(d_k)) (F V_i),   E, F: (k, seq_len)

    The scores are (T, k) instead of (T, T): time and memory linear in T for a fixed k.
    E and F are learned and shared by the heads (the paper's "headwise sharing"); a
    sequence shorter than seq_len uses their first T columns. Every position is mixed into
    the k projected rows, so there is no causal version: this is encoder attention.

    forward(x (B, T, d_model), mask=None) -> (B, T, d_model), T <= seq_len. mask is a
    padding mask (B, 1, 1, T) (True = a real token): padded keys and values are zeroed
    before the projection, so they contribute nothing to the k rows.
    """

    def __init__(self, d_model: int, n_heads: int, seq_len: int, k: int, dropout: float = 0.0):
        super().__init__()
        _check_divisible(d_model, n_heads)
        for name, value in (("seq_len", seq_len), ("k", k)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.seq_len, self.k, self.dropout = seq_len, k, dropout
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        # entries N(0, 1/k), the paper's random-projection scale
        self.E = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))  # (k, seq_len), for keys
        self.F = nn.Parameter(torch.randn(k, seq_len) / math.sqrt(k))  # (k, seq_len), for values
        self.attn: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {describe(x)}")
        B, T, _ = x.shape
        if T > self.seq_len:
            raise ValueError(f"x has T={T} positions, more than seq_len={self.seq_len}")
        q = split_heads(self.w_q(x), self.n_heads)  # (B, T, d_model) -> (B, h, T, d_k)
        k = split_heads(self.w_k(x), self.n_heads)  # (B, T, d_model) -> (B, h, T, d_k)
        v = split_heads(self.w_v(x), self.n_heads)  # (B, T, d_model) -> (B, h, T, d_k)
        if mask is not None:
            if mask.dtype != torch.bool or mask.shape != (B, 1, 1, T):
                raise ValueError(
                    f"mask must be a bool padding mask (B, 1, 1, T) = {(B, 1, 1, T)}, "
                    f"got {describe(mask)}"
                )
            is_real = mask[:, :, 0, :, None]  # (B, 1, 1, T) -> (B, 1, T, 1)
            k, v = k * is_real, v * is_real  # padded rows zeroed, (B, h, T, d_k)
        E, F_ = self.E[:, :T].to(x.dtype), self.F[:, :T].to(x.dtype)  # (k, T) each
        k = E @ k  # (k, T) @ (B, h, T, d_k) -> (B, h, k, d_k)
        v = F_ @ v  # (k, T) @ (B, h, T, d_k) -> (B, h, k, d_k)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        self.attn = weights.detach()  # heads (B, h, T, d_k), weights (B, h, T, k)
        return self.w_o(merge_heads(heads))  # (B, h, T, d_k) -> (B, T, d_model)


def _check_T(T: object, name: str = "T") -> int:
    if isinstance(T, bool) or not isinstance(T, numbers.Integral) or T < 1:
        raise ValueError(f"{name} must be a positive int, got {describe(T)}")
    return int(T)


def _check_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {describe(value)}")
    return int(value)


def sliding_window_mask(T: int, window: int) -> torch.Tensor:
    """Bool (T, T): query i may attend to key j when |i - j| <= window (a band).

    Each query sees 2 * window + 1 keys (fewer at the edges): O(T * window) scores instead
    of O(T^2). Both directions, as in an encoder; & causal_mask(T) keeps the past side.
    """
    T, window = _check_T(T), _check_count(window, "window")
    positions = torch.arange(T)  # (T,)
    offset = positions[None, :] - positions[:, None]  # key j - query i, (1, T) - (T, 1) -> (T, T)
    return offset.abs() <= window  # (T, T)


def bigbird_mask(
    T: int,
    window: int,
    n_global: int,
    n_random: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Bool (T, T), True = may attend: BigBird's three parts (Zaheer et al. 2020), united.

    - a sliding window: |i - j| <= window (sliding_window_mask);
    - global tokens: the first n_global positions attend to everything and everything
      attends to them (their rows and columns all True);
    - random keys: every other query also sees n_random keys drawn uniformly from those
      the first two parts leave hidden (all of them if fewer are left), drawn from
      `generator` (the same generator state gives the same mask).
    """
    T, window = _check_T(T), _check_count(window, "window")
    n_global, n_random = _check_count(n_global, "n_global"), _check_count(n_random, "n_random")
    if n_global > T:
        raise ValueError(f"n_global must be at most T={T}, got {n_global}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {describe(generator)}")
    mask = sliding_window_mask(T, window)  # (T, T)
    mask[:n_global, :] = True  # global queries see every key
    mask[:, :n_global] = True  # every query sees the global keys
    n_pick = min(n_random, T)
    if n_pick:
        draw = torch.rand(T, T, generator=generator)  # (T, T), uniform in [0, 1)
        draw = draw.masked_fill(mask, -1.0)  # keys already visible can't be drawn
        value, key = draw.topk(n_pick, dim=-1)  # (T, n_pick): the largest draws per query
        random = torch.zeros(T, T, dtype=torch.bool)  # (T, T)
        random.scatter_(1, key, value >= 0)  # only keys that were hidden
        mask = mask | random  # (T, T)
    return mask


# ------------------------------------------- 4. plugging a variant into the model -----


def _check_pattern(pattern: object) -> torch.Tensor:
    if (
        not isinstance(pattern, torch.Tensor)
        or pattern.dtype != torch.bool
        or pattern.dim() != 2
        or pattern.shape[0] != pattern.shape[1]
        or pattern.shape[0] == 0
    ):
        raise ValueError(
            "pattern must be a square bool (T, T) mask, True = may attend (e.g. "
            f"sliding_window_mask(T, window)), got {describe(pattern)}"
        )
    return pattern


class PatternAttention(nn.Module):
    """A self-attention that may only use the scores a fixed sparse pattern allows.

    PatternAttention(attention, pattern) wraps a course.multihead.MultiHeadAttention
    (kept as `.attention`, its weights and `.attn` unchanged) and a bool (T_max, T_max)
    pattern, True = may attend (sliding_window_mask, bigbird_mask). forward(query, key,
    value, mask=None) is MultiHeadAttention's call, as EncoderLayer makes it: for T
    positions the pattern's top-left (T, T) corner is combined with `mask` (a padding mask
    (B, 1, 1, T), say) by "and", and the wrapped attention runs with it.

    This computes every score and then hides the ones outside the pattern: the same
    result as a sparse kernel, not its saving (a real sparse kernel computes only the
    pattern's scores, O(T * keys per query) of them).
    """

    def __init__(self, attention: nn.Module, pattern: torch.Tensor):
        super().__init__()
        self.attention = attention
        self.register_buffer("pattern", _check_pattern(pattern).clone(), persistent=False)

    @property
    def attn(self) -> torch.Tensor | None:
        """The wrapped attention's last weights (B, h, T, T), zero outside the pattern."""
        return self.attention.attn

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        T_q, T_k = query.shape[-2], key.shape[-2]
        if max(T_q, T_k) > self.pattern.shape[0]:
            raise ValueError(
                f"the pattern covers {self.pattern.shape[0]} positions, the input has "
                f"T_q={T_q}, T_k={T_k}: build the pattern for the longest sequence"
            )
        pattern = self.pattern[:T_q, :T_k]  # (T_q, T_k)
        if mask is not None:  # e.g. (B, 1, 1, T_k) & (T_q, T_k) -> (B, 1, T_q, T_k)
            pattern = mask & pattern
        return self.attention(query, key, value, pattern)  # (B, T_q, d_model)

    def extra_repr(self) -> str:
        allowed = self.pattern.float().mean().item()
        return f"pattern={tuple(self.pattern.shape)}, {allowed:.0%} of the scores allowed"


class SelfAttentionCall(nn.Module):
    """Gives a self-attention module with forward(x, mask=None), such as
    LinformerSelfAttention, the call EncoderLayer makes: forward(query, key, value,
    mask=None), where query, key and value are the same x. The wrapped module is
    `.attention`; `.attn` is its last weights."""

    def __init__(self, attention: nn.Module):
        super().__init__()
        self.attention = attention

    @property
    def attn(self) -> torch.Tensor | None:
        return getattr(self.attention, "attn", None)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if key is not query or value is not query:
            raise ValueError(
                f"{type(self.attention).__name__} is self-attention: query, key and value must "
                "be the same tensor x (as EncoderLayer passes them), got different tensors"
            )
        return self.attention(query, mask)  # (B, T, d_model)


def replace_encoder_attention(model, build: Callable[[nn.Module], nn.Module]):
    """Replace each encoder layer's self-attention by build(that layer's self_attn); returns
    the model (changed in place). The decoder is left alone: its self-attention is causal
    and its cross-attention reads the whole source, as before.

    Works on a course.transformer.Transformer (its `encoder_layers`), without changing
    course.layers or course.transformer: EncoderLayer calls self.self_attn(x, x, x, mask)
    with the source's padding mask (B, 1, 1, T_src), whatever module self_attn is.
    """
    layers = getattr(model, "encoder_layers", None)
    if layers is None or not all(hasattr(layer, "self_attn") for layer in layers):
        raise ValueError(
            "replace_encoder_attention needs a course.transformer.Transformer (encoder_layers, "
            f"each with a self_attn), got {type(model).__name__}"
        )
    for layer in layers:
        layer.self_attn = build(layer.self_attn)
    return model


def sparse_encoder(model, pattern: torch.Tensor):
    """The model's encoder self-attentions restricted to `pattern` (bool (T, T), True = may
    attend, covering the longest source): each becomes PatternAttention(its own
    MultiHeadAttention, pattern), the same weights. Returns the model, changed in place."""
    pattern = _check_pattern(pattern)
    return replace_encoder_attention(model, lambda attention: PatternAttention(attention, pattern))


def linformer_encoder(model, k: int, seq_len: int | None = None):
    """The model's encoder self-attentions replaced by fresh LinformerSelfAttention modules
    (keys and values projected along the sequence to k rows; d_model, heads and dropout
    taken from the attention each replaces; seq_len defaults to the model's max_len), each
    in a SelfAttentionCall. Their weights are new (the projections Xavier-initialised, as
    the Transformer's): train the model after. Returns the model, changed in place."""
    seq_len = model.max_len if seq_len is None else seq_len

    def build(attention: nn.Module) -> nn.Module:
        linformer = LinformerSelfAttention(
            attention.d_model, attention.n_heads, seq_len, k, attention.dropout
        )
        for projection in (linformer.w_q, linformer.w_k, linformer.w_v, linformer.w_o):
            nn.init.xavier_uniform_(projection.weight)  # as the Transformer's own matrices
        return SelfAttentionCall(linformer)

    return replace_encoder_attention(model, build)
