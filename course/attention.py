"""Dot-product attention (lesson 02), its scaled, masked form and one learned head (03).

Attention is a soft dictionary lookup. Each query is compared with every key; the
comparison scores become weights by a softmax over the keys; the answer is the
weighted average of the values:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Shapes, everywhere in the course: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v).
The leading `...` is any batch shape, e.g. (B,) or (B, h). Masks are boolean with
True = may attend, the convention of torch.nn.functional.scaled_dot_product_attention.
"""

import math

import torch


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise a ValueError that names what was expected and what came."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share d_k (last dim): q is {tuple(q.shape)}, k is {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "k and v must have the same length T_k (dim -2): "
            f"k is {tuple(k.shape)}, v is {tuple(v.shape)}"
        )


def dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unscaled dot-product attention, as first met in lesson 02.

    Returns (output, weights): output (..., T_q, d_v), weights (..., T_q, T_k), and
    each row of weights sums to 1 over the keys.
    """
    _check_qkv(q, k, v)
    scores = q @ k.transpose(-2, -1)  # (..., T_q, d_k) @ (..., d_k, T_k) -> (..., T_q, T_k)
    weights = scores.softmax(dim=-1)  # a distribution over the keys, for every query
    output = weights @ v  # (..., T_q, T_k) @ (..., T_k, d_v) -> (..., T_q, d_v)
    return output, weights


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis where only positions with mask == True take part.

    A row whose mask is all False (a query that may attend to nothing, e.g. a padding
    query) gets all-zero weights instead of the NaN that softmax of all -inf gives:
    such a query then contributes nothing, and no NaN leaks into the loss.
    """
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # all -inf rows give NaN here ...
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # ... zeroed here


def check_mask(mask: object, scores_shape: tuple[int, ...], axes: str = "(..., T_q, T_k)") -> None:
    """Raise unless mask is None or a bool tensor (True = may attend) that broadcasts to
    the scores' shape; `axes` names that shape's axes in the message."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"mask must be a bool tensor (True = may attend), got {got}")
    try:
        torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{axes} = {tuple(scores_shape)}"
        ) from None


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask (True = may attend).

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); mask broadcastable to
    (..., T_q, T_k). Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    dropout_p > 0 drops weights at random (and rescales the rest by 1 / (1 - p)), as
    torch.nn.functional.scaled_dot_product_attention does; the weights returned are
    the ones used. Fully masked rows give zero weights and a zero output.
    """
    _check_qkv(q, k, v)
    T_q, T_k = q.shape[-2], k.shape[-2]
    check_mask(mask, (*q.shape[:-2], T_q, T_k))
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")

    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    weights = masked_softmax(scores, mask)  # (..., T_q, T_k), rows sum to 1 (or 0 if fully masked)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    output = weights @ v  # (..., T_q, d_v)
    return output, weights


def _check_x(x: torch.Tensor, d_model: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must have shape (B, T, d_model={d_model}), got {got}")


class AttentionHead(torch.nn.Module):
    """One self-attention head with learned projections (lesson 03).

    Lesson 02 compared the embeddings themselves, so a word could only ask "who
    resembles me?". Three learned matrices let it ask something else:

        Q = X W_Q   what each position is looking for     (B, T, d_k)
        K = X W_K   what each position offers to be found (B, T, d_k)
        V = X W_V   what each position hands over         (B, T, d_v)

    forward(x (B, T, d_model), mask=None) -> (B, T, d_v); the last weights (B, T, T)
    are kept, detached, in `self.attn` for plotting.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False):
        super().__init__()
        self.w_q = torch.nn.Linear(d_model, d_k, bias=bias)
        self.w_k = torch.nn.Linear(d_model, d_k, bias=bias)
        self.w_v = torch.nn.Linear(d_model, d_v or d_k, bias=bias)
        self.attn: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_x(x, d_model=self.w_q.in_features)
        q = self.w_q(x)  # (B, T, d_model) -> (B, T, d_k)
        k = self.w_k(x)  # (B, T, d_model) -> (B, T, d_k)
        v = self.w_v(x)  # (B, T, d_model) -> (B, T, d_v)
        output, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, T, d_v), (B, T, T)
        self.attn = weights.detach()
        return output
