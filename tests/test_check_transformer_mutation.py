"""Every wrong DecoderLayer answer of tests/test_check_transformer.py, held to its whole
verdict (issue 7: mutation testing of course/check/transformer.py showed words, values and
branches of the messages that the tests, matching a fragment each, did not pin down).

The answers are tests/test_check_transformer.py's; here each verdict is compared in full,
so a message that loses a word, a number or the case it names fails.
"""

import pytest
from test_check_transformer import WRONG

from course import check

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
        "subspaces). Use .reshape(...) instead.. The tensor is not contiguous in memory (a "
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
        "your pre-LN layer normalises its output: a pre-LN layer returns the residual "
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
