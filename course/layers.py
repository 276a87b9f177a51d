"""Add & Norm and the position-wise feed-forward network (lesson 07).

"We employ a residual connection around each of the two sub-layers, followed by layer
normalization. That is, the output of each sub-layer is LayerNorm(x + Sublayer(x))."
(Vaswani et al. 2017, §3.1). An encoder layer is two such sub-layers:

    post-LN (the paper):  x = norm1(x + drop(attn(x)));    x = norm2(x + drop(ff(x)))
    pre-LN (norm_first):  x = x + drop(attn(norm1(x)));    x = x + drop(ff(norm2(x)))

Pre-LN keeps the residual path x -> x + ... free of any norm, so gradients reach the
first layers unchanged (Xiong et al. 2020); it is what most large models use today.
Names, dropout places and defaults follow torch.nn.TransformerEncoderLayer, so that
`EncoderLayer.from_torch` can load its weights; lesson 08's DecoderLayer reuses the parts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course.multihead import MultiHeadAttention, load_from_torch


def _check_rate(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


def _check_last_dim(x: object, d_model: int, who: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{who} expects x of shape (..., d_model={d_model}), got {got}")


class LayerNorm(nn.Module):
    """Normalise each position's feature vector, then scale and shift it (Ba et al. 2016).

        LayerNorm(x) = weight * (x - mean) / sqrt(var + eps) + bias

    mean and var over the last axis (d_model) only: each token is normalised on its own,
    whatever the batch, the other tokens or the padding. var is the *biased* variance
    (divide by d_model, as torch.nn.LayerNorm), eps sits inside the square root.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive int, got {d_model!r}")
        if not eps > 0:
            raise ValueError(f"eps must be positive, got {eps!r}")
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))  # the learned gain, gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # the learned shift, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim(x, self.d_model, "LayerNorm")
        # Written out, as lesson 07's exercise has it:
        #     mean = x.mean(dim=-1, keepdim=True)                       (..., 1)
        #     var = (x - mean).pow(2).mean(dim=-1, keepdim=True)        (..., 1), / d_model
        #     return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias
        # PyTorch's layer_norm computes exactly that in one operator, forward and backward,
        # where the lines above take ten (tests/test_layers.py compares the two).
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (§3.3): the same two layers at every position.

    "While the linear transformations are the same across different positions, they use
    different parameters from layer to layer." d_ff is wider than d_model (paper: 2048
    vs 512). Dropout sits after the ReLU, where torch.nn.TransformerEncoderLayer has it.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        _check_rate(dropout)
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_last_dim(x, self.linear1.in_features, "FeedForward")
        hidden = F.relu(self.linear1(x))  # (..., d_model) -> (..., d_ff)
        return self.linear2(self.dropout(hidden))  # (..., d_ff) -> (..., d_model)


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention, then the feed-forward network, each wrapped in
    Add & Norm. norm_first=False is the paper's post-LN, True is pre-LN.

    forward(x (B, T, d_model), mask=None) -> (B, T, d_model); mask is boolean, True = may
    attend, broadcastable to (B, h, T, T), e.g. a padding mask (B, 1, 1, T). "We apply
    dropout to the output of each sub-layer, before it is added to the sub-layer input"
    (§5.4): dropout1, dropout2; the attention weights and the FFN's hidden layer get the
    same rate, as in torch. rotary_base (default None) gives the self-attention rotary
    positions (MultiHeadAttention's rotary_base), for a model that adds no position table.
    fused=True runs the attention on PyTorch's fused kernel (MultiHeadAttention's fused).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        *,
        rotary_base: float | None = None,
        fused: bool = False,
    ):
        super().__init__()
        _check_rate(dropout)
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, dropout, rotary_base=rotary_base, fused=fused
        )
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def _attend(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.dropout1(self.self_attn(x, x, x, mask))  # (B, T, d_model)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout2(self.ff(x))  # (B, T, d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_last_dim(x, self.norm1.d_model, "EncoderLayer")
        if self.norm_first:  # pre-LN: the residual stream x is never normalised
            x = x + self._attend(self.norm1(x), mask)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, mask))  # post-LN: LayerNorm(x + Sublayer(x))
        return self.norm2(x + self._feed_forward(x))

    @classmethod
    def from_torch(cls, theirs: nn.TransformerEncoderLayer) -> EncoderLayer:
        """An EncoderLayer computing what `theirs` computes (batch_first, ReLU), same weights.

        torch's masks mean the opposite of ours (True = masked out): call it with
        src_key_padding_mask = course.masking.to_torch_key_padding_mask(mask).
        """
        ours = _sized_like(cls, theirs, nn.TransformerEncoderLayer)
        return load_encoder_layer(ours, theirs)


def load_encoder_layer(ours: nn.Module, theirs: nn.TransformerEncoderLayer) -> nn.Module:
    """Copy a torch.nn.TransformerEncoderLayer's weights into any layer with our names:
    self_attn (w_q, w_k, w_v, w_o), ff (linear1, linear2), norm1, norm2. torch keeps
    linear1 and linear2 on the layer itself; ours groups them in `ff`. Returns `ours`.
    """
    _check_torch_layer(theirs, nn.TransformerEncoderLayer)
    load_from_torch(ours.self_attn, theirs.self_attn)  # in_proj_weight -> w_q, w_k, w_v
    return _load_ff_and_norms(ours, theirs, ("norm1", "norm2"))


# ------------------------------------- shared by the encoder and decoder layers' loaders --


def _check_torch_layer(theirs: object, kind: type[nn.Module]) -> None:
    """Raise unless `theirs` is a `kind` (torch's encoder or decoder layer) ours can copy."""
    if not isinstance(theirs, kind):
        raise ValueError(f"expected a torch.nn.{kind.__name__}, got {type(theirs).__name__}")
    # the activation: "relu" or F.relu (stored as F.relu) or an nn.ReLU() module
    relu = theirs.activation is F.relu or isinstance(theirs.activation, nn.ReLU)
    if not theirs.self_attn.batch_first or not relu:
        raise ValueError("only batch_first=True layers with the ReLU activation are supported")
    if theirs.norm1.bias is None or theirs.linear1.bias is None:
        raise ValueError("only layers with bias=True are supported")


def _sized_like(cls: type[nn.Module], theirs: nn.Module, kind: type[nn.Module]) -> nn.Module:
    """A new `cls` with the sizes, dropout and norm_first of `theirs`, a torch `kind`."""
    _check_torch_layer(theirs, kind)
    attn = theirs.self_attn
    return cls(
        attn.embed_dim,
        attn.num_heads,
        theirs.linear1.out_features,
        dropout=theirs.dropout.p,
        norm_first=theirs.norm_first,
    )


def _load_ff_and_norms(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> nn.Module:
    """Copy torch's linear1, linear2 into ours.ff and each named LayerNorm (weight, bias,
    and eps where ours has one) from `theirs` into `ours`. Returns `ours`."""
    norm_pairs = [(getattr(ours, name), getattr(theirs, name)) for name in norms]
    pairs = [(ours.ff.linear1, theirs.linear1), (ours.ff.linear2, theirs.linear2), *norm_pairs]
    with torch.no_grad():
        for mine, torchs in pairs:
            if mine.weight.shape != torchs.weight.shape:
                raise ValueError(
                    f"shapes differ: ours {tuple(mine.weight.shape)}, torch's "
                    f"{tuple(torchs.weight.shape)}: build both with the same sizes"
                )
            mine.weight.copy_(torchs.weight)
            mine.bias.copy_(torchs.bias)
    for norm, torchs in norm_pairs:
        if hasattr(norm, "eps"):
            norm.eps = torchs.eps
    return ours


# ------------------------------------------------------------ DecoderLayer (lesson 08) --


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, cross-attention, feed-forward, each wrapped
    in Add & Norm (Vaswani et al. 2017, §3.1). norm_first=False is the paper's post-LN:

        x = norm1(x + drop1(self_attn(x, x, x, tgt_mask)))              q, k, v: the decoder
        x = norm2(x + drop2(cross_attn(x, memory, memory, memory_mask)))  q: decoder; k, v: memory
        x = norm3(x + drop3(ff(x)))

    and norm_first=True is pre-LN, x = x + drop(sublayer(norm(x))), where only the
    decoder's stream is normalised: memory goes into the cross-attention as it comes (as in
    torch.nn.TransformerDecoderLayer; a pre-LN encoder ends with its own LayerNorm).

    forward(x (B, T_tgt, d_model), memory (B, T_src, d_model), tgt_mask=None,
    memory_mask=None) -> (B, T_tgt, d_model). Masks are boolean, True = may attend:
    tgt_mask broadcastable to (B, h, T_tgt, T_tgt) (causal & padding:
    course.masking.decoder_mask), memory_mask to (B, h, T_tgt, T_src) (the source's
    padding: course.masking.padding_mask(src, pad_id)). Names, dropout places and defaults
    follow torch.nn.TransformerDecoderLayer, so that `from_torch` can load its weights.
    rotary_base (default None) gives the self-attention rotary positions, as in EncoderLayer;
    fused=True runs both attentions on PyTorch's fused kernel (MultiHeadAttention's fused).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        *,
        rotary_base: float | None = None,
        fused: bool = False,
    ):
        super().__init__()
        _check_rate(dropout)
        self.norm_first = norm_first
        # masked, on the decoder; rotary positions (if any) go here only
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, dropout, rotary_base=rotary_base, fused=fused
        )
        # decoder -> memory, never rotated: a target position m and a source position n lie
        # on two different axes, so the offset m - n that rotation encodes means nothing
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, fused=fused)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _self_attend(self, x: torch.Tensor, tgt_mask: torch.Tensor | None) -> torch.Tensor:
        return self.dropout1(self.self_attn(x, x, x, tgt_mask))  # (B, T_tgt, d_model)

    def _cross_attend(
        self, x: torch.Tensor, memory: torch.Tensor, memory_mask: torch.Tensor | None
    ) -> torch.Tensor:
        # queries from the decoder, keys and values from the encoder's output
        return self.dropout2(self.cross_attn(x, memory, memory, memory_mask))  # (B, T_tgt, d)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout3(self.ff(x))  # (B, T_tgt, d_model)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        d_model = self.norm1.d_model
        for name, t in (("x", x), ("memory", memory)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != d_model:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(
                    f"DecoderLayer expects {name} of shape (B, T, d_model={d_model}), got {got}"
                )
        if x.shape[0] != memory.shape[0]:
            raise ValueError(
                f"x and memory must hold the same batch: x has B={x.shape[0]} sentences, "
                f"memory B={memory.shape[0]}"
            )
        if self.norm_first:  # pre-LN: the residual stream x is never normalised
            x = x + self._self_attend(self.norm1(x), tgt_mask)
            x = x + self._cross_attend(self.norm2(x), memory, memory_mask)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._self_attend(x, tgt_mask))  # post-LN: LayerNorm(x + Sublayer(x))
        x = self.norm2(x + self._cross_attend(x, memory, memory_mask))
        return self.norm3(x + self._feed_forward(x))

    @classmethod
    def from_torch(cls, theirs: nn.TransformerDecoderLayer) -> DecoderLayer:
        """A DecoderLayer computing what `theirs` computes (batch_first, ReLU), same weights.

        torch's masks mean the opposite of ours (True = masked out): call it with
        tgt_mask=course.masking.to_torch_attn_mask(causal), tgt_key_padding_mask and
        memory_key_padding_mask = course.masking.to_torch_key_padding_mask(padding).
        """
        ours = _sized_like(cls, theirs, nn.TransformerDecoderLayer)
        return load_decoder_layer(ours, theirs)


def load_decoder_layer(ours: nn.Module, theirs: nn.TransformerDecoderLayer) -> nn.Module:
    """Copy a torch.nn.TransformerDecoderLayer's weights into any layer with our names:
    self_attn, cross_attn (torch's multihead_attn), ff (linear1, linear2), norm1 .. norm3.
    Returns `ours`, now computing what `theirs` computes (LayerNorm eps included).
    """
    _check_torch_layer(theirs, nn.TransformerDecoderLayer)
    load_from_torch(ours.self_attn, theirs.self_attn)  # in_proj_weight -> w_q, w_k, w_v
    load_from_torch(ours.cross_attn, theirs.multihead_attn)
    return _load_ff_and_norms(ours, theirs, ("norm1", "norm2", "norm3"))
