"""Masks: padding and looking ahead (lesson 06).

Attention lets every query look at every key. Two kinds of key must be hidden:

- **padding**: sentences of different lengths are padded to one length T so that they
  fit in one (B, T) tensor; the pad tokens are not words, and a real token must not
  attend to them (else its output changes with how much padding the batch needed);
- **the future**: a decoder predicts token t+1 from tokens 0..t, so while training on
  a whole sentence at once, position t must not see positions after t.

Every mask in the course is boolean with **True = may attend**, the convention of
torch.nn.functional.scaled_dot_product_attention and course.attention, and broadcasts
against attention scores of shape (B, h, T_q, T_k):

    causal_mask(T)                  (T, T)         True on and below the diagonal
    padding_mask(tokens, pad_id)    (B, 1, 1, T)   True where the key is a real token
    decoder_mask(tokens, pad_id)    (B, 1, T, T)   both: a real key, not in the future

torch.nn.MultiheadAttention reads its masks the other way round: in `attn_mask` and
`key_padding_mask`, True = masked out (may *not* attend). The converters translate:

    to_torch_attn_mask(mask, n_heads=None)   ours (T_q, T_k) or (B, h|1, T_q, T_k)
                                             -> attn_mask (T_q, T_k) or (B*h, T_q, T_k)
    to_torch_key_padding_mask(mask)          ours (B, 1, 1, T_k) -> key_padding_mask (B, T_k)
    from_torch_attn_mask(attn_mask)          their bool attn_mask -> ours (same shape)
    from_torch_key_padding_mask(kpm)         their key_padding_mask (B, T_k) -> ours (B, 1, 1, T_k)

A query that may attend to nothing (a row of the mask all False) gets zero weights in
course.attention.scaled_dot_product_attention (lesson 03's rule); torch gives NaN there.
"""

from __future__ import annotations

import torch

from course.utils import describe

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool (T, T): row t (a query) is True at columns 0..t (the keys it may see).

    True on and below the diagonal: position t sees itself and the past, never the
    future. Broadcasts against scores (B, h, T, T) as it is.
    """
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ValueError(f"causal_mask expects a positive int length T, got {describe(T)}")
    positions = torch.arange(T, device=device)  # (T,)
    return positions[None, :] <= positions[:, None]  # key s <= query t: (1, T) vs (T, 1) -> (T, T)


def _check_tokens(tokens: object, pad_id: object, name: str = "tokens") -> None:
    if (
        not isinstance(tokens, torch.Tensor)
        or tokens.dim() != 2
        or tokens.dtype not in _INTEGER_DTYPES
    ):
        raise ValueError(
            f"{name} must be a 2-D integer tensor (B, T) of token ids, got {describe(tokens)}"
        )
    if isinstance(pad_id, bool) or not isinstance(pad_id, int):
        raise ValueError(f"pad_id must be an int token id, got {describe(pad_id)}")


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool (B, 1, 1, T): True where tokens[b, s] is a real token (not pad_id).

    Padding is found by value, wherever it is. The two unit axes are the heads h and the
    queries T_q: the same keys are hidden from every head and every query, so the mask
    broadcasts against scores (B, h, T_q, T_k) with B against B and T against T_k.
    """
    _check_tokens(tokens, pad_id)
    is_real = tokens != pad_id  # (B, T)
    return is_real[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool (B, 1, T, T) for a decoder's self-attention: a real key, and not in the future.

    padding (B, 1, 1, T) & causal (T, T) broadcast to (B, 1, T, T): query t of sentence
    b may attend to key s when s <= t and tokens[b, s] is not padding.
    """
    _check_tokens(tokens, pad_id)
    T = tokens.shape[1]
    return padding_mask(tokens, pad_id) & causal_mask(T, device=tokens.device)  # (B, 1, T, T)


def _check_bool(mask: object, name: str) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"{name} must be a bool tensor, got {describe(mask)}")


def to_torch_attn_mask(mask: torch.Tensor, n_heads: int | None = None) -> torch.Tensor:
    """Our mask (True = may attend) as nn.MultiheadAttention's `attn_mask` (True = masked out).

    (T_q, T_k) -> (T_q, T_k). A batched mask (B, h, T_q, T_k) or (B, 1, T_q, T_k) needs
    n_heads, because torch wants one (T_q, T_k) slice per sentence and head, stacked as
    (B * n_heads, T_q, T_k) with sentence b's heads at rows b*n_heads ... (b+1)*n_heads - 1.
    """
    _check_bool(mask, "mask")
    if mask.dim() == 2:
        return ~mask  # (T_q, T_k): the same shape, read the other way round
    if mask.dim() != 4:
        raise ValueError(f"mask must be (T_q, T_k) or (B, h, T_q, T_k), got {describe(mask)}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"a 4-D mask needs n_heads, a positive int; got {describe(n_heads)}")
    B, h, T_q, T_k = mask.shape
    if h not in (1, n_heads):
        raise ValueError(f"the mask has {h} heads on dim 1, expected 1 or n_heads={n_heads}")
    per_head = mask.expand(B, n_heads, T_q, T_k)  # (B, 1|h, T_q, T_k) -> (B, h, T_q, T_k)
    return ~per_head.reshape(B * n_heads, T_q, T_k)  # (B, h, T_q, T_k) -> (B*h, T_q, T_k)


def to_torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our padding mask (B, 1, 1, T_k) as nn.MultiheadAttention's `key_padding_mask` (B, T_k).

    True there means "this key is padding, ignore it": the inverse of ours.
    """
    _check_bool(mask, "mask")
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != 1:
        raise ValueError(f"mask must be a padding mask (B, 1, 1, T_k), got {describe(mask)}")
    return ~mask[:, 0, 0, :]  # (B, 1, 1, T_k) -> (B, T_k)


def from_torch_attn_mask(attn_mask: torch.Tensor) -> torch.Tensor:
    """nn.MultiheadAttention's boolean `attn_mask` (True = masked out) in our convention.

    The shape is kept: (T_q, T_k) stays (T_q, T_k); (B*h, T_q, T_k) stays as it is
    (reshape it to (B, h, T_q, T_k) if you know h).
    """
    _check_bool(attn_mask, "attn_mask")
    return ~attn_mask


def from_torch_key_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """nn.MultiheadAttention's `key_padding_mask` (B, T_k), True = padding, as ours (B, 1, 1, T_k).

    The inverse of `to_torch_key_padding_mask`.
    """
    _check_bool(key_padding_mask, "key_padding_mask")
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask must be (B, T_k), got {describe(key_padding_mask)}")
    return ~key_padding_mask[:, None, None, :]  # (B, T_k) -> (B, 1, 1, T_k)
