"""Positional encoding (lesson 05).

Self-attention is order-blind: permute the tokens and its outputs come back permuted,
nothing else changes. The Transformer (Vaswani et al., 2017) therefore adds to each token
embedding a vector that depends only on the token's position, the sinusoidal encoding

    PE(pos, 2i)     = sin(pos * w_i)
    PE(pos, 2i + 1) = cos(pos * w_i),        w_i = 1 / 10000^(2i / d_model),

so pair i of dimensions (2i, 2i + 1) turns around a circle at its own frequency w_i,
from w_0 = 1 (wavelength 2 pi) down to nearly 1 / 10000 (wavelength nearly 10000 * 2 pi).
Because each pair is a point on a circle, moving k positions on is a rotation of every
pair by the angle k * w_i: PE(pos + k) = M_k PE(pos) for one fixed matrix M_k
(`shift_matrix`), whatever pos is.

Rotary position embeddings (RoFormer, Su et al., 2021) use the same rotations the other
way round: instead of adding positions to x, they rotate the queries and keys by their
own positions (`apply_rotary`), so that q . k depends only on the offset between them.

The full model (lesson 08) embeds tokens with `TokenEmbedding` (scaled by sqrt(d_model),
as the paper does) and adds positions with `PositionalEncoding` (then dropout).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn


def _positive_int(name: str, value) -> int:
    """`value` as an int, or a ValueError naming what was expected and what came."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The angular frequency of each pair of dimensions: w_i = base^(-2i / d_model).

    Returns a float64 tensor of shape (ceil(d_model / 2),): one frequency per even
    dimension 2i = 0, 2, 4, ... < d_model. Pair i's wavelength is 2 pi / w_i.
    """
    d_model = _positive_int("d_model", d_model)
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not base > 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    even_dims = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d/2),): the 2i
    return float(base) ** (-even_dims / d_model)  # (ceil(d/2),)


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's table: row pos is PE(pos), for pos = 0 .. max_len - 1.

    PE(pos, 2i) = sin(pos * w_i), PE(pos, 2i + 1) = cos(pos * w_i), w_i = 10000^(-2i/d_model).
    Returns (max_len, d_model) in torch's default dtype (float32 unless changed): sin on
    even dimensions, cos on odd ones. An odd d_model works: its last dimension is a sin
    (pair d_model // 2 has no cos partner). Computed in float64, then rounded once.
    """
    max_len = _positive_int("max_len", max_len)
    d_model = _positive_int("d_model", d_model)
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    angle = position * frequencies(d_model)  # (max_len, 1) * (ceil(d/2),) -> (max_len, ceil(d/2))
    pe = torch.empty(max_len, d_model, dtype=torch.float64)  # (max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)  # ceil(d/2) even dimensions
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # d // 2 odd dimensions
    return pe.to(torch.get_default_dtype())


def shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """The fixed linear map M_k with PE(pos + k) = M_k @ PE(pos) for every pos.

    Pair i holds (sin(pos w_i), cos(pos w_i)); by the angle-addition formulas
        sin((pos + k) w) =  cos(k w) sin(pos w) + sin(k w) cos(pos w)
        cos((pos + k) w) = -sin(k w) sin(pos w) + cos(k w) cos(pos w),
    so M_k is block diagonal, one 2 x 2 rotation [[cos kw, sin kw], [-sin kw, cos kw]] per
    pair, and does not depend on pos. Returns (d_model, d_model) in the default dtype; for
    a table of rows, `pe @ M_k.T` shifts every row at once. d_model must be even (an odd
    d_model's last sin has no cos partner to rotate with). k may be negative.
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"k must be an int (an offset in positions), got {k!r}")
    d_model = _positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            f"shift_matrix needs an even d_model, got {d_model}: the last dimension of an odd "
            "d_model is a sin with no cos partner, and no linear map shifts it alone"
        )
    angle = int(k) * frequencies(d_model)  # (d/2,): k * w_i
    cos, sin = torch.cos(angle), torch.sin(angle)  # (d/2,) each
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)
    # blocks: (d/2, 2, 2), one rotation per pair
    return torch.block_diag(*blocks).to(torch.get_default_dtype())  # (d_model, d_model)


class TokenEmbedding(nn.Module):
    """Token ids (B, T) -> vectors (B, T, d_model), multiplied by sqrt(d_model).

    The paper multiplies its embedding weights by sqrt(d_model) (section 3.4). The table is
    `self.embedding`, an nn.Embedding, so the full model can share its weight with the
    output layer (weight tying). `name` says what the ids are ("src", "tgt") in the error
    an id outside the vocabulary gets.

    The range of the ids is checked by the lookup itself, not before it: reading the ids'
    min and max back from a GPU would make the CPU wait for the GPU at every call (a host
    synchronisation). On the CPU the lookup raises for an id outside 0 .. vocab_size - 1,
    and this module turns that into a ValueError that says which ids came. On a GPU the
    same mistake is a device-side assert (a CUDA error, not this message): ids reach a GPU
    from a batch builder that only writes the ids of its vocabulary (course.data).
    """

    def __init__(self, vocab_size: int, d_model: int, *, name: str = "tokens"):
        super().__init__()
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        self.d_model = _positive_int("d_model", d_model)
        self.name = name
        self.embedding = nn.Embedding(self.vocab_size, self.d_model)
        self.scale = math.sqrt(self.d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a (B, T) tensor of token ids, got {got}")
        if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
            raise ValueError(f"tokens must hold integer token ids (torch.long), got {tokens.dtype}")
        try:
            vectors = self.embedding(tokens)  # (B, T) -> (B, T, d_model)
        except IndexError:  # an id outside the table: say which (the error path may read ids)
            raise ValueError(
                f"{self.name} holds token ids from {int(tokens.min())} to {int(tokens.max())}, "
                f"but its vocabulary has {self.vocab_size} tokens, ids 0 .. {self.vocab_size - 1}"
            ) from None
        return vectors * self.scale  # (B, T, d_model)


class PositionalEncoding(nn.Module):
    """x (B, T, d_model) -> dropout(x + PE[:T]): the paper's positions, then dropout.

    The sinusoidal table for positions 0 .. max_len - 1 is computed once and kept in the
    buffer `pe` (max_len, d_model): it moves with `.to(device)` but is no parameter, and it
    is left out of the state dict (it is recomputed from the formula). Dropout (the paper's
    P_drop = 0.1 in training) acts only in training mode.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model = _positive_int("d_model", d_model)
        self.max_len = _positive_int("max_len", max_len)
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
            raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = nn.Dropout(float(dropout))
        pe = sinusoidal_encoding(self.max_len, self.d_model)  # (max_len, d_model)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d_model:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, T, d_model={self.d_model}), got {got}")
        T = x.shape[1]
        if T > self.max_len:
            raise ValueError(
                f"the sequence has T={T} positions, longer than max_len={self.max_len}, the "
                "longest this PositionalEncoding's table holds: build it with a larger max_len"
            )
        pe = self.pe[:T].to(x.dtype)  # (T, d_model), in x's dtype
        return self.dropout(x + pe)  # (B, T, d_model) + (T, d_model) -> (B, T, d_model)


def apply_rotary(
    x: torch.Tensor, base: float = 10000.0, positions: torch.Tensor | None = None
) -> torch.Tensor:
    """Rotary position embedding (RoFormer): rotate each pair of x's features by pos * theta_i.

    x is (..., T, d) with d even: the queries or the keys of one or more heads. Pair i is
    the two adjacent features (2i, 2i + 1), the same layout as the sinusoidal table, and it
    is rotated by the angle pos * theta_i, theta_i = base^(-2i / d):

        x'_2i   = x_2i cos(pos theta_i) - x_2i+1 sin(pos theta_i)
        x'_2i+1 = x_2i sin(pos theta_i) + x_2i+1 cos(pos theta_i).

    (Some libraries pair feature j with feature j + d/2 instead: the same method on a
    fixed reordering of the features.) Rotations keep lengths, position 0 is left as it
    is, and a query rotated by m and a key rotated by n have a dot product that depends on
    m - n only. `positions` (T,) gives each row's position; default 0 .. T - 1. Returns a
    tensor of x's shape and dtype.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"apply_rotary expects x of shape (..., T, d), got {got}")
    T, d = x.shape[-2], x.shape[-1]
    if d == 0 or d % 2:
        raise ValueError(
            f"apply_rotary rotates pairs of features, so d = x.shape[-1] must be even, got {d}"
        )
    if positions is None:
        positions = torch.arange(T, dtype=torch.float64)  # (T,)
    else:
        positions = torch.as_tensor(positions)
        if positions.shape != (T,) or positions.dtype == torch.bool or positions.is_complex():
            raise ValueError(
                f"positions must be a (T,) = ({T},) tensor of numbers, one per row of x, got "
                f"shape {tuple(positions.shape)} and dtype {positions.dtype}"
            )
        positions = positions.to(torch.float64)
    angle = positions.cpu().unsqueeze(1) * frequencies(d, base)  # (T, 1) * (d/2,) -> (T, d/2)
    cos = torch.cos(angle).to(dtype=x.dtype, device=x.device)  # (T, d/2)
    sin = torch.sin(angle).to(dtype=x.dtype, device=x.device)  # (T, d/2)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each: pair i = (2i, 2i + 1)
    rotated = torch.stack([x_even * cos - x_odd * sin, x_even * sin + x_odd * cos], dim=-1)
    return rotated.flatten(-2)  # (..., T, d/2, 2) -> (..., T, d): pairs back side by side
