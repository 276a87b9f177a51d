"""Every wrong DecoderLayer answer of tests/test_check_transformer.py, held to its whole
verdict (issue 7: mutation testing of course/check/transformer.py showed words, values and
branches of the messages that the tests, matching a fragment each, did not pin down).

The answers are tests/test_check_transformer.py's; here each verdict is compared in full,
so a message that loses a word, a number or the case it names fails.
"""

import pytest
import torch
import torch.nn.functional as F
from test_check_transformer import WRONG, Good, OwnFeedForward
from torch import nn

from course import check
from course.check import transformer
from course.layers import DecoderLayer, FeedForward, LayerNorm
from course.multihead import MultiHeadAttention, merge_heads, split_heads

MESSAGES = {
    "CausalMaskMissing": (
        "tgt_mask is ignored: the masked self-attention must use it, self.self_attn(x, x, "
        "x, tgt_mask). Without it every position sees the words after it, the very words it "
        "is trained to predict"
    ),
    "TgtMaskInverted": (
        "tgt_mask is inverted: it is True where a position may attend; pass it on as it is"
    ),
    "OwnCausalMask": (
        "you build a causal mask of your own and ignore tgt_mask: use the tgt_mask you are "
        "given (it may hide padding too, and it already holds the causal part)"
    ),
    "CrossKeysFromDecoder": (
        "the cross-attention's keys and values come from the decoder, cross_attn(x, x, x): "
        "that is a second self-attention. Queries come from the decoder, keys and values "
        "from the encoder's output: self.cross_attn(x, memory, memory, memory_mask)"
    ),
    "CrossOnlyKeysFromDecoder": (
        "the cross-attention's keys come from the decoder: queries from the decoder, keys "
        "*and* values from memory, self.cross_attn(x, memory, memory, memory_mask)"
    ),
    "CrossQueriesFromMemory": (
        "the cross-attention's queries come from memory and its keys and values from the "
        "decoder: the other way round. The decoder asks (queries), the source answers (keys "
        "and values): self.cross_attn(x, memory, memory, memory_mask)"
    ),
    "CrossQueriesAndKeysFromMemory": (
        "the cross-attention's queries and keys come from memory and its values from the "
        "decoder: queries come from the decoder, keys and values from memory, "
        "self.cross_attn(x, memory, memory, memory_mask)"
    ),
    "MemoryMaskIgnored": (
        "memory_mask is ignored: the cross-attention must use it, self.cross_attn(x, "
        "memory, memory, memory_mask), so that no position attends to the source's padding"
    ),
    "MemoryMaskInverted": (
        "memory_mask is inverted: it is True where a source position may be attended to; "
        "pass it on as it is"
    ),
    "MasksSwapped": (
        "the two masks are swapped: tgt_mask goes to the masked self-attention, memory_mask "
        "to the cross-attention"
    ),
    "MaskArgumentsInAnotherOrder": (
        "your parameters come in the order (x, memory, memory_mask, tgt_mask); the lesson's "
        "signature is forward(x, memory, tgt_mask=None, memory_mask=None), and the "
        "notebooks pass the arguments in that order"
    ),
    "CrossBeforeSelf": (
        "the sublayers run in the order cross-attention, masked self-attention, "
        "feed-forward: a decoder layer first attends to the target so far (masked "
        "self-attention), then to the source (cross-attention), then applies the "
        "feed-forward network"
    ),
    "FeedForwardBeforeCross": (
        "the sublayers run in the order masked self-attention, feed-forward, "
        "cross-attention (norm1, norm2, norm3 in the order they run): a decoder layer first "
        "attends to the target so far (masked self-attention), then to the source "
        "(cross-attention), then applies the feed-forward network"
    ),
    "NoResidualAroundSelf": (
        "the masked self-attention sublayer has no residual connection: add its output to "
        "its input, x + dropout1(...)"
    ),
    "NoResidualAroundCross": (
        "the cross-attention sublayer has no residual connection: add its output to its "
        "input, x + dropout2(...)"
    ),
    "NoResidualAroundFeedForward": (
        "the feed-forward sublayer has no residual connection: add its output to its input, "
        "x + dropout3(...)"
    ),
    "AlwaysPostLN": (
        "with norm_first=True your layer computes post-LN, norm(x + sublayer(x)), the "
        "paper's arrangement: pre-LN normalises each sublayer's *input* and adds its output "
        "to x untouched, x = x + sublayer(norm(x)). Is norm_first ignored?"
    ),
    "AlwaysPreLN": (
        "with norm_first=False your layer computes pre-LN, x + sublayer(norm(x)): the "
        "default is the paper's post-LN, Add & Norm after each sublayer, x = norm(x + "
        "sublayer(x)). Is norm_first ignored, or its meaning reversed?"
    ),
    "PreLNByDefault": (
        "DecoderLayer(12, 3, 20), built with the defaults, computes pre-LN: the default is "
        "norm_first=False, the paper's post-LN"
    ),
    "NormsInsideTheResidual": (
        "you normalise each sublayer's output before adding it, x + norm(sublayer(x)); the "
        "paper's Add & Norm normalises the sum: norm(x + sublayer(x))"
    ),
    "PreLNResidualFromNormed": (
        "the residual adds the normalised x: x = norm(x) replaced the residual stream. "
        "Pre-LN keeps x as it is and adds each sublayer's output to it, x = x + "
        "sublayer(norm(x)) (use another name for the normalised x)"
    ),
    "PreLNNormalisesMemory": (
        "memory is normalised (with norm2) before the cross-attention: memory goes in as it "
        "comes from the encoder (which normalises its own output); only the decoder's "
        "stream x is normalised, as torch.nn.TransformerDecoderLayer does"
    ),
    "PreLNCrossOnRawX": (
        "the cross-attention's queries are x, not norm2(x): in pre-LN the sublayer reads "
        "the normalised stream, self.cross_attn(norm2(x), memory, memory, memory_mask)"
    ),
    "PreLNFeedForwardOnRawX": ("the feed-forward reads x, not norm3(x): x = x + ff(norm3(x))"),
    "CrossReadsTheLayerInput": (
        "the cross-attention reads the layer's input x instead of the self-attention "
        "sublayer's output: each sublayer works on what the one before it returned"
    ),
    "NormsTwoAndThreeSwapped": (
        "the LayerNorms are in the wrong places (you use masked self-attention: norm1, "
        "cross-attention: norm3, feed-forward: norm2): norm1 belongs to the masked "
        "self-attention, norm2 to the cross-attention, norm3 to the feed-forward, each its "
        "own"
    ),
    "Norm3NeverUsed": (
        "norm3 is never used (you use masked self-attention: norm1, cross-attention: norm2, "
        "feed-forward: norm2): norm1 belongs to the masked self-attention, norm2 to the "
        "cross-attention, norm3 to the feed-forward, each its own"
    ),
    "SharedNorm": (
        "norm3 and norm1 are the same module: each of the three sublayers has its own "
        "LayerNorm, with its own gain and bias: self.norm1, self.norm2, self.norm3 = "
        "LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)"
    ),
    "OneAttentionForBoth": (
        "cross_attn and self_attn are the same module: the cross-attention has its own "
        "projections, self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)"
    ),
    "CrossWithSelfAttnsWeights": (
        "the cross-attention uses self_attn's weights: call self.cross_attn for it, the "
        "second MultiHeadAttention with its own projections"
    ),
    "SelfAttentionReadsMemory": (
        "the self-attention reads memory: the masked self-attention takes query, key and "
        "value all from the decoder, self.self_attn(x, x, x, tgt_mask); memory is for the "
        "cross-attention only"
    ),
    "NoReLU": (
        "the feed-forward has no ReLU: without it linear2(linear1(x)) is one linear map. "
        "FFN(x) = linear2(relu(linear1(x)))"
    ),
    "MemoryDetached": (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = T_src = 5, "
        "a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding memory_mask (B, 1, "
        "1, T_src): no gradient reaches memory, so it could not learn: something between "
        "memory and the result is cut from the graph (.detach(), torch.no_grad(), values "
        "copied with torch.tensor(...) or .item())"
    ),
    "ForwardUnderNoGrad": (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = T_src = 5, "
        "a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding memory_mask (B, 1, "
        "1, T_src): the result carries no gradient, so nothing before it could learn. "
        "Something cut it from the computation graph: .detach(), a `with torch.no_grad():` "
        "block, or a new tensor made from values (torch.tensor(...), .item(), .numpy())"
    ),
    "AlwaysFloat32": (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, a batch of one, "
        "float64, non-contiguous x and memory, a causal tgt_mask and a padding memory_mask "
        "is float32, but the inputs were float64: keep the inputs' dtype (make new tensors "
        "with x.new_zeros(...) or dtype=x.dtype; no .float() or .double())"
    ),
    "ResidualInPlace": (
        "your code changed one of its input tensors in place; compute new tensors instead "
        "(e.g. x = x * 2, not x *= 2)"
    ),
    "FlattensWithView": (
        "on inputs x (2, 5, 12), memory (2, 7, 12), tgt_mask (2, 1, 5, 5), memory_mask (2, "
        "1, 1, 7) your code raised RuntimeError: view size is not compatible with input "
        "tensor's size and stride (at least one dimension spans across two contiguous "
        "subspaces). Use .reshape(...) instead. The tensor is not contiguous in memory (a "
        "transpose or a slice made it so): use .reshape(...) instead of .view(...), or "
        ".contiguous().view(...)"
    ),
    "DropoutIgnored": (
        "DecoderLayer(12, 3, 20, 0.3, False) in training mode drops nothing: the dropout "
        "argument is not used. Apply nn.Dropout(dropout) to each sublayer's output, and "
        "pass dropout on to both MultiHeadAttentions and the FeedForward"
    ),
    "DropoutInEval": (
        "DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = T_src = 5, a causal & "
        "padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding memory_mask (B, 1, 1, T_src): "
        "two calls give different outputs, so something is dropped in eval mode. Dropout "
        "acts only while training: use nn.Dropout modules, or F.dropout(x, p, "
        "training=self.training)"
    ),
    "NoDropoutOnTheCrossAttentionOutput": (
        "DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the "
        "cross-attention sublayer's output is not dropped: apply dropout to it before "
        "adding it to x, x + dropout2(sublayer(...))"
    ),
    "CrossAttentionWithoutDropout": (
        "DecoderLayer(12, 3, 20, 0.3, False): self.cross_attn drops nothing in training "
        "mode: build it with the rate, MultiHeadAttention(d_model, n_heads, dropout)"
    ),
    "SeedsInForward": (
        "DecoderLayer(12, 3, 20, 0.3, False) in training mode: two calls give the same "
        "output, so dropout draws the same mask every time. Don't seed inside forward and "
        "don't keep one mask"
    ),
    "MemoryDropped": (
        "DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: dropout is applied "
        "to memory before the cross-attention. Dropout belongs on each sublayer's output, "
        "before it is added to x (and inside the attentions and the feed-forward), not on "
        "what a sublayer reads"
    ),
    "InputDropped": (
        "DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: dropout is applied "
        "to x before the masked self-attention. Dropout belongs on each sublayer's output, "
        "before it is added to x (and inside the attentions and the feed-forward), not on "
        "what a sublayer reads"
    ),
    "PreLNNormalisesItsOutput": (
        "your pre-LN layer normalises its output (with a LayerNorm of its own): a pre-LN "
        "layer returns the residual "
        "stream as it is, x + ff(norm3(x)); the one final LayerNorm belongs after the last "
        "layer of the whole stack (Transformer.decoder_norm), not in every layer"
    ),
    "CausalAlwaysAdded": (
        "a causal mask is applied although tgt_mask is None: the layer applies the masks it "
        "is given and nothing else (the model builds them, course.masking.decoder_mask)"
    ),
    "DropoutAfterTheResidual": (
        "DecoderLayer(12, 3, 20, 0.3, True) (pre-LN) in training mode: the masked "
        "self-attention sublayer's output: dropout is applied after the residual addition, "
        "to x + sublayer: that drops parts of x itself. Drop only the sublayer's output, "
        "then add"
    ),
    "NoNorm3": (
        "your layer has no submodule `norm3`: self.norm3 = LayerNorm(d_model). The names "
        "matter: the checker copies its weights into them, and lesson 08 reuses them"
    ),
    "TorchsCrossAttention": (
        "self.cross_attn is torch's nn.MultiheadAttention: use the course's "
        "MultiHeadAttention(d_model, n_heads, dropout) from lesson 04 (course.multihead)"
    ),
    "MemoryFirst": (
        "your parameters come in the order (memory, x, tgt_mask, memory_mask); the lesson's "
        "signature is forward(x, memory, tgt_mask=None, memory_mask=None), and the "
        "notebooks pass the arguments in that order"
    ),
    "ReturnsAttention": (
        "forward returned a tuple of 2 things on DecoderLayer(12, 3, 20, 0.1, False) in "
        "eval mode, T_tgt = T_src = 5, a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and "
        "a padding memory_mask (B, 1, 1, T_src): return only the output tensor"
    ),
}


@pytest.mark.parametrize("name", MESSAGES)
def test_the_whole_decoder_layer_verdict(name, verdict):
    answer = next(a for a, _ in WRONG if a.__name__ == name)
    passed, printed = verdict(check.DecoderLayer, answer)
    assert passed is False
    assert printed == f"❌ DecoderLayer: {MESSAGES[name]}\n"


# ----------------------- more wrong answers, each diagnosis and hint in full ----------
# (issue 7, second round: mutation testing showed diagnoses no answer reached, the hints for
# a layer that cannot be called, and the parts' own diagnoses, never triggered)


class CrossValuesFromDecoder(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, memory, h, memory_mask))


class CrossAllFromMemory(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(memory, memory, memory, memory_mask))


class NoResidualAtAll(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.norm1(self.attend_self(x, tgt_mask))
        x = self.norm2(self.attend_memory(x, memory, memory_mask))
        return self.norm3(self.feed(x))


class PreLNNoResidualAroundFeedForward(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        x = x + self.attend_self(self.norm1(x), tgt_mask)
        x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
        return self.feed(self.norm3(x))


class PreLNSelfOnRawX(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        x = x + self.attend_self(x, tgt_mask)
        x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
        return x + self.feed(self.norm3(x))


class PreLNSelfKeysFromRawX(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, x, x, tgt_mask))
        x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
        return x + self.feed(self.norm3(x))


class FeedForwardReadsTheLayerInput(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        h = self.norm1(x + self.attend_self(x, tgt_mask))
        h = self.norm2(h + self.attend_memory(h, memory, memory_mask))
        return self.norm3(h + self.feed(x))


class ReLUAfterLinear2(Good):
    def feed(self, h):
        return self.dropout3(F.relu(self.ff(h)))


class GELU(Good):
    def feed(self, h):
        ff = self.ff
        return self.dropout3(ff.linear2(ff.dropout(F.gelu(ff.linear1(h)))))


class CausalFromMemoryLength(Good):
    """ANDs a causal mask into tgt_mask, sized by memory's length, not x's."""

    def attend_self(self, h, tgt_mask):
        T = self._memory.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        return super().attend_self(h, None if tgt_mask is None else tgt_mask & causal)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        self._memory = memory
        return super().forward(x, memory, tgt_mask, memory_mask)


class OneMaskParameter(Good):
    def forward(self, x, memory, mask=None):
        return super().forward(x, memory, mask, None)


class MasksWithoutDefaults(Good):
    def forward(self, x, memory, tgt_mask, memory_mask):
        return super().forward(x, memory, tgt_mask, memory_mask)


class UnbiasedLayerNorm(LayerNorm):
    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True)  # unbiased: divides by d_model - 1
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class OwnNormsUnbiased(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1, self.norm2, self.norm3 = (UnbiasedLayerNorm(d_model) for _ in range(3))


class ReLUFirstFeedForward(OwnFeedForward):
    def forward(self, x):
        return self.linear2(self.drop(self.linear1(F.relu(x))))


class OwnFeedForwardReLUFirst(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = ReLUFirstFeedForward(d_model, d_ff, dropout)


class UnscaledAttention(MultiHeadAttention):
    """Forgets to divide the scores by sqrt(d_k)."""

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return self.w_o(merge_heads(weights @ v))


class OwnAttentionsUnscaled(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = UnscaledAttention(d_model, n_heads, dropout)
        self.cross_attn = UnscaledAttention(d_model, n_heads, dropout)


class OwnCrossAttentionUnscaled(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = UnscaledAttention(d_model, n_heads, dropout)


class MemoryKeysDropped(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, self.dropout2(memory), memory, memory_mask))


class MemoryValuesDropped(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, memory, self.dropout2(memory), memory_mask))


class NoDropoutOnTheFeedForwardOutput(Good):
    def feed(self, h):
        return self.ff(h)


class FeedForwardWithoutDropout(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = FeedForward(d_model, d_ff)


class ReturnsTheLastPosition(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask)[:, -1]


class NoCrossAttention(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        del self.cross_attn


class Norm3SharedWithNorm2(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm3 = self.norm2


class CrossAttentionWithoutBias(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, bias=False)


class Norm3WithoutAffine(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm3 = nn.LayerNorm(d_model, elementwise_affine=False)


class MemoryTruncated(Good):
    """Cuts memory to the target's length: right only when T_src = T_tgt."""

    def attend_memory(self, h, memory, memory_mask):
        return super().attend_memory(h, memory[:, : h.shape[1]], memory_mask)


class ZeroesPaddedPositions(Good):
    """Zeroes the output at the padded target positions (read from tgt_mask's last row):
    the checker compares every position, padded or not, with the reference."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        out = super().forward(x, memory, tgt_mask, memory_mask)
        if tgt_mask is None or tgt_mask.dim() < 4:
            return out
        return out * tgt_mask[:, 0, -1, :, None]


_NO_MATCH = (
    "x has T_tgt=5 positions and memory T_src=7. Cross-attention takes its queries from the "
    "decoder and its keys and values from memory, self.cross_attn(x, memory, memory, "
    "memory_mask), so its output has T_tgt positions; and tgt_mask (B, 1, T_tgt, T_tgt) "
    "belongs to the self-attention, memory_mask (B, 1, 1, T_src) to the cross-attention"
)
_CALLED_AS = (
    "The layer is called as layer(x, memory, tgt_mask=None, memory_mask=None): x is the "
    "decoder's input, memory the encoder's output"
)
_MEMORY_DROPPED = (
    "DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: dropout is applied to "
    "memory before the cross-attention. Dropout belongs on each sublayer's output, before "
    "it is added to x (and inside the attentions and the feed-forward), not on what a "
    "sublayer reads"
)
_ATTENTION = (
    "does not compute multi-head attention: build it with MultiHeadAttention(d_model, "
    "n_heads, dropout) (lesson 04)"
)

MORE = {
    CrossValuesFromDecoder: (
        "the cross-attention's values come from the decoder: queries from the decoder, keys "
        "and values from memory, self.cross_attn(x, memory, memory, memory_mask)"
    ),
    CrossAllFromMemory: (
        "the cross-attention's queries come from memory: the queries come from the decoder, "
        "self.cross_attn(x, memory, memory, memory_mask)"
    ),
    NoResidualAtAll: (
        "there is no residual connection at all: each sublayer's output must be added to its "
        "input, x + sublayer(...)"
    ),
    PreLNNoResidualAroundFeedForward: (
        "the feed-forward sublayer has no residual connection: add its output to its input, "
        "x + dropout3(...)"
    ),
    PreLNSelfOnRawX: (
        "the masked self-attention reads x, not norm1(x): in pre-LN each sublayer works on "
        "the normalised stream, h = norm1(x); x = x + self_attn(h, h, h, tgt_mask)"
    ),
    PreLNSelfKeysFromRawX: (
        "the self-attention's keys and values come from x; all three (query, key, value) "
        "come from h = norm1(x): self_attn(h, h, h, tgt_mask)"
    ),
    FeedForwardReadsTheLayerInput: (
        "the feed-forward reads the layer's input x instead of the cross-attention "
        "sublayer's output: each sublayer works on what the one before it returned"
    ),
    ReLUAfterLinear2: (
        "the feed-forward applies a ReLU after linear2 too: its output must be able to be "
        "negative. FFN(x) = linear2(relu(linear1(x)))"
    ),
    GELU: (
        "the feed-forward uses GELU; the paper's (and torch's default) activation is ReLU, "
        "FFN(x) = linear2(relu(linear1(x)))"
    ),
    CausalFromMemoryLength: (
        "on inputs x (2, 5, 12), memory (2, 7, 12), tgt_mask (5, 5), memory_mask=None your "
        "code raised RuntimeError: The size of tensor a (5) must match the size of tensor b "
        f"(7) at non-singleton dimension 1. {_NO_MATCH}"
    ),
    OneMaskParameter: (
        "on inputs x (2, 5, 12), memory (2, 5, 12), tgt_mask (2, 1, 5, 5), memory_mask (2, 1, "
        "1, 5) your code raised TypeError: OneMaskParameter.forward() takes from 3 to 4 "
        f"positional arguments but 5 were given. {_CALLED_AS}"
    ),
    MasksWithoutDefaults: (
        "on inputs x (2, 5, 12), memory (2, 7, 12) your code raised TypeError: "
        "MasksWithoutDefaults.forward() missing 2 required positional arguments: 'tgt_mask' "
        f"and 'memory_mask'. {_CALLED_AS}"
    ),
    OwnNormsUnbiased: "self.norm1 does not compute LayerNorm: fix your LayerNorm (lesson 07)",
    OwnFeedForwardReLUFirst: (
        "self.ff does not compute linear2(relu(linear1(x))): build it with FeedForward("
        "d_model, d_ff, dropout)"
    ),
    OwnAttentionsUnscaled: f"self.self_attn {_ATTENTION}",
    OwnCrossAttentionUnscaled: f"self.cross_attn {_ATTENTION}",
    MemoryKeysDropped: _MEMORY_DROPPED,
    MemoryValuesDropped: _MEMORY_DROPPED,
    NoDropoutOnTheFeedForwardOutput: (
        "DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the feed-forward "
        "sublayer's output is not dropped: apply dropout to it before adding it to x, x + "
        "dropout3(sublayer(...))"
    ),
    FeedForwardWithoutDropout: (
        "DecoderLayer(12, 3, 20, 0.3, False): self.ff drops nothing in training mode: build "
        "it with the rate, FeedForward(d_model, d_ff, dropout) (dropout after the ReLU)"
    ),
    ReturnsTheLastPosition: (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = T_src = 5, "
        "a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding memory_mask (B, 1, "
        "1, T_src) has shape (2, 12), expected (2, 5, 12). It is (B, T_tgt, d_model), like x"
    ),
    NoCrossAttention: (
        "your layer has no submodule `cross_attn`: self.cross_attn = MultiHeadAttention("
        "d_model, n_heads, dropout). The names matter: the checker copies its weights into "
        "them, and lesson 08 reuses them"
    ),
    Norm3SharedWithNorm2: (
        "norm3 and norm2 are the same module: each of the three sublayers has its own "
        "LayerNorm, with its own gain and bias: self.norm1, self.norm2, self.norm3 = "
        "LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)"
    ),
    CrossAttentionWithoutBias: (
        "self.cross_attn.w_q maps 12 -> 12 features without a bias; expected "
        "nn.Linear(12, 12) with a bias"
    ),
    Norm3WithoutAffine: (
        "self.norm3 has no parameter `weight` (the learned gain): LayerNorm learns a gain "
        "and a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
        "nn.Parameter(torch.zeros(d_model)) (parameters found: none)"
    ),
    MemoryTruncated: (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = 5, T_src = "
        "7, no masks is not right: at index (1, 4, 0) you have -0.8913, expected -0.3188 "
        "(largest difference 0.573)"
    ),
    ZeroesPaddedPositions: (
        "the output of DecoderLayer(12, 3, 20, 0.1, False) in eval mode, T_tgt = T_src = 5, "
        "a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding memory_mask (B, 1, "
        "1, T_src) is not right: at index (1, 3, 2) you have 0, expected 2.64 (largest "
        "difference 2.64)"
    ),
}


@pytest.mark.parametrize("answer", MORE, ids=[a.__name__ for a in MORE])
def test_more_decoder_layer_mistakes_are_named_in_full(answer, verdict):
    passed, printed = verdict(check.DecoderLayer, answer)
    assert passed is False
    assert printed == f"❌ DecoderLayer: {MORE[answer]}\n"


# --------------------------------------------------- more correct answers ----------


class MemoryMaskReshapedToTheBatch(Good):
    """Accepts a (B, T_src) padding mask too: reshapes memory_mask by x's batch size."""

    def attend_memory(self, h, memory, memory_mask):
        if memory_mask is not None:
            memory_mask = memory_mask.reshape(h.shape[0], 1, 1, memory.shape[1])
        return super().attend_memory(h, memory, memory_mask)


class CrossAttentionMaskByKeywordFirst(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(mask=memory_mask, query=h, key=memory, value=memory))


class FunctionalLayerNorm(Good):
    """Its LayerNorms' parameters used through F.layer_norm, not by calling the modules."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        def ln(norm, h):
            return F.layer_norm(h, h.shape[-1:], norm.weight, norm.bias, 1e-5)

        if self.norm_first:
            x = x + self.attend_self(ln(self.norm1, x), tgt_mask)
            x = x + self.attend_memory(ln(self.norm2, x), memory, memory_mask)
            return x + self.feed(ln(self.norm3, x))
        x = ln(self.norm1, x + self.attend_self(x, tgt_mask))
        x = ln(self.norm2, x + self.attend_memory(x, memory, memory_mask))
        return ln(self.norm3, x + self.feed(x))


class RecordsItsThreads(Good):
    seen: list[int] = []

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        RecordsItsThreads.seen.append(torch.get_num_threads())
        return super().forward(x, memory, tgt_mask, memory_mask)


PASSED = (
    "✅ DecoderLayer: passed (10 cases, post-LN and pre-LN: T_tgt = T_src and T_tgt != T_src, "
    "no masks, causal, causal & padding with source padding, non-contiguous, a batch of one "
    "in float64; values and gradients of x, memory and every parameter; the defaults; dropout "
    "only while training, on each sublayer's output, in the feed-forward and on both "
    "attentions' weights, at the rate asked).\n"
)
MORE_RIGHT = [MemoryMaskReshapedToTheBatch, CrossAttentionMaskByKeywordFirst, FunctionalLayerNorm]


@pytest.mark.parametrize("answer", MORE_RIGHT, ids=[a.__name__ for a in MORE_RIGHT])
def test_more_correct_decoder_layers_pass_with_the_whole_verdict(answer, verdict):
    assert verdict(check.DecoderLayer, answer) == (True, PASSED)


def test_the_layer_runs_on_one_thread_and_the_count_is_restored(verdict):
    threads = torch.get_num_threads()
    RecordsItsThreads.seen.clear()
    torch.set_num_threads(3)
    try:
        assert verdict(check.DecoderLayer, RecordsItsThreads) == (True, PASSED)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads)
    assert RecordsItsThreads.seen and set(RecordsItsThreads.seen) == {1}


def test_a_mistake_that_cannot_run_leaves_the_later_ones_named():
    """T_src != T_tgt: keys from the decoder with values from memory cannot run; the
    mistakes listed after it are still computed."""
    ref = DecoderLayer(12, 3, 20, 0.0).eval()
    x, memory = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    with torch.no_grad():
        wrong = transformer._dec_mistakes(ref, x, memory, None, None, False)
    assert not any(d.startswith("the cross-attention's keys come from the decoder") for d in wrong)
    assert any(d.startswith("the feed-forward has no ReLU") for d in wrong)
    assert any(d.startswith("the sublayers run in the order cross-attention") for d in wrong)
