"""Multi-head attention (lesson 04).

One attention head computes one weighted average per query: one distribution over the
keys, so one relation at a time. Multi-head attention runs h heads side by side, each
on its own d_k = d_model / h slice of learned projections, and mixes their answers:

    head_i        = Attention(Q W_Q^i, K W_K^i, V W_V^i)          each (B, T_q, d_k)
    MultiHead     = Concat(head_1, ..., head_h) W_O                (B, T_q, d_model)

The h projections W_Q^1 ... W_Q^h are stored side by side as one (d_model, d_model)
nn.Linear, so all heads are projected in one matmul; `split_heads` then cuts the
result's feature axis into h slices and moves the head axis in front of time, so the
attention of lesson 03 runs on all heads at once as a batch. `merge_heads` undoes it.

fused=True (lesson 10, `make bench`) computes the same heads with PyTorch's fused kernel,
torch.nn.functional.scaled_dot_product_attention, which never stores the (T_q, T_k)
weights: faster, but there are then no weights to keep in `.attn`.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch import nn

from course.attention import check_mask, scaled_dot_product_attention
from course.positional import apply_rotary


def _check_divisible(d_model: int, n_heads: int) -> None:
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model must be divisible by n_heads: d_model={d_model}, n_heads={n_heads} "
            f"(d_model / n_heads = {d_model / n_heads:g} is not a whole head size d_k)"
        )


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, h, T, d_k): head j gets features j*d_k : (j+1)*d_k.

    First cut the feature axis into (h, d_k), *then* move the head axis in front of
    time. Reshaping straight to (B, h, T, d_k) would keep the memory order and give
    head 0 the first positions' whole vectors instead of every position's first slice.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"split_heads expects x of shape (B, T, d_model), got {got}")
    B, T, d_model = x.shape
    _check_divisible(d_model, n_heads)
    d_k = d_model // n_heads
    x = x.reshape(B, T, n_heads, d_k)  # (B, T, d_model) -> (B, T, h, d_k): cut the features
    return x.transpose(1, 2)  # (B, T, h, d_k) -> (B, h, T, d_k): heads in front of time


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k): the heads' answers side by side, head 0 first.

    The exact inverse of `split_heads`: move time back in front of the heads, then glue
    each position's h slices into one vector. After the transpose the tensor is not
    contiguous in memory, so `.view` would fail: `.reshape` copies when it must.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"merge_heads expects x of shape (B, h, T, d_k), got {got}")
    B, h, T, d_k = x.shape
    x = x.transpose(1, 2)  # (B, h, T, d_k) -> (B, T, h, d_k)
    return x.reshape(B, T, h * d_k)  # (B, T, h, d_k) -> (B, T, d_model)


class MultiHeadAttention(nn.Module):
    """h scaled dot-product attention heads in parallel, concatenated, then mixed by W_O.

    forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k, d_model),
    mask=None) -> (B, T_q, d_model). `mask` is boolean, True = may attend, broadcastable
    to (B, h, T_q, T_k): e.g. (T_q, T_k) causal, (B, 1, 1, T_k) padding. The last
    attention weights, (B, h, T_q, T_k), are kept (detached) in `self.attn` for plotting.

    rotary_base=None (the default) is the paper's attention, which knows nothing of
    positions. A number (e.g. 10000.0) turns on rotary positions (lesson 05, RoFormer):
    after the head split, each head's queries and keys are rotated by their own positions
    0, 1, ... (`apply_rotary` with that base), so every score q_m . k_n depends on the
    offset m - n and not on m and n themselves. Only for self-attention, where the queries
    and the keys are positions of one sequence; d_k must be even (features rotate in pairs).

    fused=False (the default) runs lesson 03's scaled_dot_product_attention, which builds
    the (T_q, T_k) weights and keeps them in `.attn`. fused=True runs PyTorch's
    F.scaled_dot_product_attention on the same q, k, v instead: the same output (to
    rounding) and gradients, its boolean mask meaning True = may attend too, fully masked
    rows giving a zero output as ours (PyTorch does so since 2.5), dropout on the weights
    at the same rate in training mode only. A fused kernel never materialises the weights,
    so `.attn` stays None: plotting or reading the weights needs fused=False.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        rotary_base: float | None = None,
        fused: bool = False,
    ):
        super().__init__()
        _check_divisible(d_model, n_heads)
        if not isinstance(fused, bool):
            raise ValueError(f"fused must be True or False, got {fused!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        if rotary_base is not None and (
            isinstance(rotary_base, bool)
            or not isinstance(rotary_base, numbers.Real)
            or not rotary_base > 1
            or self.d_k % 2
        ):
            raise ValueError(
                "rotary_base needs an even head size d_k and a base greater than 1 (e.g. "
                f"10000.0), got d_k={self.d_k}, rotary_base={rotary_base!r}"
            )
        self.dropout, self.rotary_base, self.fused = dropout, rotary_base, fused
        # Each is the h per-head projections (d_model -> d_k) stacked into one matrix.
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)  # mixes the concatenated heads
        self.attn: torch.Tensor | None = None  # the last weights; None when fused

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(
                    f"{name} must have shape (B, T, d_model={self.d_model}), got {got}"
                )
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same (B, T_k): key {tuple(key.shape)}, "
                f"value {tuple(value.shape)}"
            )
        if query.shape[0] != key.shape[0]:  # else a key batch of 1 would broadcast unseen
            raise ValueError(
                f"query and key must have the same batch size B: query {tuple(query.shape)}, "
                f"key {tuple(key.shape)}"
            )
        q, k, v = self._project(query, key, value)  # (B, T_q | T_k | T_k, d_model) each
        q = split_heads(q, self.n_heads)  # (B, T_q, d_model) -> (B, h, T_q, d_k)
        k = split_heads(k, self.n_heads)  # (B, T_k, d_model) -> (B, h, T_k, d_k)
        v = split_heads(v, self.n_heads)  # (B, T_k, d_model) -> (B, h, T_k, d_k)
        if self.rotary_base is not None:  # rotary positions: query m and key n by m, n steps
            q = apply_rotary(q, self.rotary_base)  # (B, h, T_q, d_k), same shape
            k = apply_rotary(k, self.rotary_base)  # (B, h, T_k, d_k), same shape
        dropout_p = self.dropout if self.training else 0.0
        if self.fused:  # PyTorch's kernel: the same heads, the (T_q, T_k) weights never stored
            # F's kernel would read a float mask as numbers to add: check it is ours
            check_mask(mask, (*q.shape[:-1], k.shape[-2]), "(B, h, T_q, T_k)")
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
            self.attn = None  # heads (B, h, T_q, d_k), and no weights to keep
        else:
            heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)
            # heads (B, h, T_q, d_k), weights (B, h, T_q, T_k): every head attends on its own
            self.attn = weights.detach()
        return self.w_o(merge_heads(heads))  # (B, h, T_q, d_k) -> (B, T_q, d_model)

    def _project(self, query, key, value) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q = query W_Q, K = key W_K, V = value W_V, each (B, T, d_model).

        When the same tensor is projected twice or three times (self-attention: query, key
        and value are x; cross-attention: key and value are the memory), the matrices are
        stacked and multiplied once: [Q | K | V] = x [W_Q | W_K | W_V]. The same numbers as
        three products, in one larger matmul that a GPU runs far better (and one operator
        instead of three: torch.nn.MultiheadAttention does the same with its in_proj).
        """
        if key is value:
            stacked = (self.w_q, self.w_k, self.w_v) if query is key else (self.w_k, self.w_v)
            weight = torch.cat([m.weight for m in stacked])  # (2 or 3 d_model, d_model)
            bias = None if self.w_q.bias is None else torch.cat([m.bias for m in stacked])
            if query is key:  # self-attention: (B, T, d_model) -> 3 x (B, T, d_model)
                return F.linear(query, weight, bias).chunk(3, dim=-1)
            k, v = F.linear(key, weight, bias).chunk(2, dim=-1)  # 2 x (B, T_k, d_model)
            return self.w_q(query), k, v
        return self.w_q(query), self.w_k(key), self.w_v(value)

    @classmethod
    def from_torch(cls, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
        """A MultiHeadAttention computing exactly what `theirs` computes (same weights)."""
        ours = cls(
            theirs.embed_dim,
            theirs.num_heads,
            dropout=theirs.dropout,
            bias=theirs.in_proj_bias is not None,
        )
        return load_from_torch(ours, theirs)


def load_from_torch(ours: nn.Module, theirs: nn.MultiheadAttention) -> nn.Module:
    """Copy a torch.nn.MultiheadAttention's weights into any module with w_q, w_k, w_v, w_o.

    torch packs the three input projections into one in_proj_weight (3 d_model, d_model)
    = [W_q; W_k; W_v] (and in_proj_bias likewise); its out_proj is an nn.Linear like w_o.
    Returns `ours`, now computing what `theirs` computes (its batch_first=True layout).
    """
    if not isinstance(theirs, nn.MultiheadAttention):
        raise ValueError(f"expected a torch.nn.MultiheadAttention, got {type(theirs).__name__}")
    if not theirs._qkv_same_embed_dim or theirs.bias_k is not None or theirs.add_zero_attn:
        raise ValueError(
            "only the plain torch.nn.MultiheadAttention is supported: kdim = vdim = embed_dim, "
            "add_bias_kv=False, add_zero_attn=False"
        )
    d_model = theirs.embed_dim
    w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)  # (3 d_model, d_model) -> 3 x (d_model, d_model)
    b_q = b_k = b_v = None
    if theirs.in_proj_bias is not None:
        b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)  # (3 d_model,) -> 3 x (d_model,)
    pairs = [
        ("w_q", w_q, b_q),
        ("w_k", w_k, b_k),
        ("w_v", w_v, b_v),
        ("w_o", theirs.out_proj.weight, theirs.out_proj.bias),
    ]
    with torch.no_grad():
        for name, weight, bias in pairs:
            linear = getattr(ours, name, None)
            if not isinstance(linear, nn.Linear) or linear.weight.shape != (d_model, d_model):
                raise ValueError(
                    f"ours.{name} must be an nn.Linear({d_model}, {d_model}), got {linear!r}"
                )
            if (linear.bias is None) != (bias is None):
                raise ValueError(
                    f"ours.{name} has {'no ' if linear.bias is None else 'a '}bias but theirs "
                    f"{'has one' if bias is not None else 'has none'}: build both with the same "
                    "bias= setting"
                )
            linear.weight.copy_(weight)
            if bias is not None:
                linear.bias.copy_(bias)
    return ours
