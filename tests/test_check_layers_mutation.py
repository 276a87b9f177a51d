"""Every wrong LayerNorm and EncoderLayer answer of tests/test_check_layers.py, held to its
whole verdict (issue 7: mutation testing of course/check/layers.py showed words, values and
branches of the messages that the tests, matching a fragment each, did not pin down).

The answers are tests/test_check_layers.py's; here each verdict is compared in full, so a
message that loses a word, a number or the case it names fails.
"""

import pytest
from test_check_layers import ENC_WRONG, LN_WRONG

from course import check

LN_WRONG_MESSAGES = {
    "UnbiasedVariance": (
        "you divide by d_model - 1 (the unbiased variance, the default of torch.var and "
        "x.std()): LayerNorm uses the biased variance, divided by d_model: x.var(dim=-1, "
        "unbiased=False), or ((x - mean)**2).mean(dim=-1)"
    ),
    "EpsOutsideTheRoot": (
        "eps is added outside the square root, (x - mean) / (std + eps): it belongs inside, "
        "(x - mean) / sqrt(var + eps)"
    ),
    "OverTheBatch": (
        "you normalise over the batch axis (dim 0): LayerNorm normalises each position's "
        "vector on its own, over the last axis only, mean(dim=-1, keepdim=True)"
    ),
    "OverTime": (
        "you normalise over the time axis (dim 1): LayerNorm normalises each position's "
        "vector on its own, over the last axis only, mean(dim=-1, keepdim=True)"
    ),
    "OverTimeAndFeatures": (
        "you normalise over all of (T, d_model) together: LayerNorm normalises each "
        "position's vector on its own, over the last axis only, mean(dim=-1, keepdim=True)"
    ),
    "BatchNormLike": (
        "you normalise each feature over the batch (and time): that is BatchNorm. LayerNorm "
        "normalises each position's vector over its own d_model features: mean(dim=-1, "
        "keepdim=True)"
    ),
    "IgnoresGainAndBias": (
        "the gain and the shift are ignored: multiply by self.weight and add self.bias, "
        "weight * x_hat + bias (that is what lets the layer learn any scale and offset)"
    ),
    "NoShift": ("the shift is missing: add self.bias after multiplying by self.weight"),
    "GainAndShiftSwapped": (
        "the gain and the shift are swapped: weight multiplies, bias is added (weight * "
        "x_hat + bias)"
    ),
    "NoParameters": (
        "your module has no parameter `weight` (the learned gain): LayerNorm learns a gain "
        "and a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
        "nn.Parameter(torch.zeros(d_model)) (parameters found: none)"
    ),
    "GammaBeta": (
        "your module has no parameter `weight` (the learned gain): LayerNorm learns a gain "
        "and a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
        "nn.Parameter(torch.zeros(d_model)) (parameters found: gamma, beta)"
    ),
    "PlainTensorWeight": (
        "self.weight of your module is a Tensor, not a registered nn.Parameter: wrap it, "
        "self.weight = nn.Parameter(...), so that the optimizer sees it and it learns (and "
        ".double() or .to(device) move it)"
    ),
    "RandomStart": (
        "self.weight does not start at ones: a new LayerNorm must change nothing but the "
        "normalisation, so the gain starts at 1, nn.Parameter(torch.ones(d_model))"
    ),
    "WeightShapedLikeX": (
        "self.weight of your module has shape (1, 1, 8) for d_model=8, expected (8,): one "
        "gain per feature"
    ),
    "EpsIgnored": (
        "eps is missing: divide by sqrt(var + eps), so that a vector with (almost) no "
        "variance does not blow up"
    ),
    "EpsHardCoded": (
        "eps is fixed at 1e-5 whatever eps is asked: use the constructor's argument (store "
        "it, self.eps = eps)"
    ),
    "OtherDefaultEps": (
        "your eps is 1e-06, but eps=1e-05 was asked: use the constructor's argument, inside "
        "the square root, sqrt(var + eps)"
    ),
    "EpsAThousandth": (
        "your eps is 0.001, but eps=1e-05 was asked: use the constructor's argument, inside "
        "the square root, sqrt(var + eps)"
    ),
    "RMSNorm": (
        "you divide by the root mean square of x without subtracting the mean: that is "
        "RMSNorm, not LayerNorm. Subtract the mean first and divide by the standard "
        "deviation, sqrt(var + eps)"
    ),
    "NotCentred": ("the mean is not subtracted from x: x_hat = (x - mean) / sqrt(var + eps)"),
    "DividesByTheVariance": (
        "you divide by the variance; divide by its square root, the standard deviation: "
        "sqrt(var + eps)"
    ),
    "MeanDetached": (
        "the output of LayerNorm(8) on x of shape (3, 5, 8) (the default eps): the values "
        "are right, but the mean is detached (.detach(), .data or .item()), so no gradient "
        "flows through it; the mean depends on x and must stay in the graph"
    ),
    "VarianceDetached": (
        "the output of LayerNorm(8) on x of shape (3, 5, 8) (the default eps): the values "
        "are right, but the variance is detached (.detach(), .data or .item()), so no "
        "gradient flows through it; it depends on x and must stay in the graph"
    ),
    "StdPlusEps": (
        "you divide by d_model - 1 (the unbiased variance, the default of torch.var and "
        "x.std()): LayerNorm uses the biased variance, divided by d_model: x.var(dim=-1, "
        "unbiased=False), or ((x - mean)**2).mean(dim=-1)"
    ),
    "AlwaysFloat32": (
        "the output of LayerNorm(12, 0.001) on x of shape (2, 4, 12), float64, "
        "non-contiguous is float32, but the inputs were float64: "
        "keep the inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; "
        "no .float() or .double())"
    ),
    "CentresInPlace": (
        "your code changed one of its input tensors in place; compute new tensors instead "
        "(e.g. x = x * 2, not x *= 2)"
    ),
    "NoKeepdim": (
        "on inputs x (3, 5, 8) your code raised RuntimeError: The size of tensor a (8) must "
        "match the size of tensor b (5) at non-singleton dimension 2. The mean and the "
        "variance lose the last axis unless you keep it: x.mean(dim=-1, keepdim=True), so "
        "that they broadcast against x (..., d_model)"
    ),
    "FlattensWithView": (
        "on inputs x (2, 4, 12) your code raised RuntimeError: view size is not compatible "
        "with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead. The tensor is not contiguous in "
        "memory (a transpose or a slice made it so): use .reshape(...) instead of "
        ".view(...), or .contiguous().view(...)"
    ),
    "LastAxisHardCoded": (
        "on inputs x (6, 9) your code raised IndexError: Dimension out of range (expected "
        "to be in range of [-2, 1], but got 2). Normalise over the last axis, dim=-1: x may "
        "have any number of leading axes, (..., d_model), not always three"
    ),
    "ArgumentsSwapped": (
        "your parameters come in the order (eps, d_model); the lesson's signature is "
        "LayerNorm(d_model, eps=1e-5), and the notebooks pass the arguments in that order"
    ),
    "ReturnsStats": (
        "forward returned a tuple of 2 things on the output of LayerNorm(8) on x of shape "
        "(3, 5, 8) (the default eps): return only the output tensor"
    ),
}

ENC_WRONG_MESSAGES = {
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
        "EncoderLayer(12, 3, 20), built with the defaults, computes pre-LN: the default is "
        "norm_first=False, the paper's post-LN"
    ),
    "NoResidualAroundAttention": (
        "the attention sublayer has no residual connection: add its output to its input, x "
        "+ dropout1(self_attn(...))"
    ),
    "NoResidualAroundFeedForward": (
        "the feed-forward sublayer has no residual connection: add its output to its input, "
        "x + dropout2(ff(...))"
    ),
    "NoResiduals": (
        "there is no residual connection at all: each sublayer's output must be added to "
        "its input, x + sublayer(...)"
    ),
    "NormsInsideTheResidual": (
        "you normalise each sublayer's output before adding it, x + norm(sublayer(x)); the "
        "paper's Add & Norm normalises the sum: norm(x + sublayer(x))"
    ),
    "PreLNResidualFromNormed": (
        "the residual adds the normalised x: x = norm(x) replaced the residual stream. "
        "Pre-LN keeps x as it is and adds the sublayer's output to it, x = x + "
        "sublayer(norm(x)) (use another name for the normalised x)"
    ),
    "PreLNAttentionOnRawX": (
        "the attention reads x, not norm1(x): in pre-LN the sublayer works on the "
        "normalised x, h = norm1(x); x = x + self_attn(h, h, h, mask)"
    ),
    "PreLNKeysFromRawX": (
        "the attention's keys and values come from x; all three (query, key, value) come "
        "from the normalised h = norm1(x): self_attn(h, h, h, mask)"
    ),
    "FeedForwardReadsTheInput": (
        "the feed-forward reads the layer's input x instead of the attention sublayer's "
        "output: h = norm1(x + attn); out = norm2(h + ff(h))"
    ),
    "MaskDropped": (
        "the mask is ignored: pass it on to the attention, self.self_attn(x, x, x, mask). "
        "Without it the real tokens attend to the padding"
    ),
    "MaskInverted": (
        "the mask is inverted: it is True where a token may attend; pass it on as it is"
    ),
    "NoReLU": (
        "the feed-forward has no ReLU: without it linear2(linear1(x)) is one linear map. "
        "FFN(x) = linear2(relu(linear1(x)))"
    ),
    "ReLUAfterLinear2Too": (
        "the feed-forward applies a ReLU after linear2 too: its output must be able to be "
        "negative. FFN(x) = linear2(relu(linear1(x)))"
    ),
    "GELU": (
        "the feed-forward uses GELU; the paper's (and torch's default) activation is ReLU, "
        "FFN(x) = linear2(relu(linear1(x)))"
    ),
    "SharedNorm": (
        "norm1 and norm2 are the same module: each sublayer has its own LayerNorm, with its "
        "own gain and bias: self.norm1 = LayerNorm(d_model); self.norm2 = "
        "LayerNorm(d_model)"
    ),
    "Norm1Twice": (
        "norm1 is used for both sublayers: the feed-forward sublayer has its own, norm2"
    ),
    "NormsSwapped": (
        "norm1 and norm2 are swapped: norm1 belongs to the attention sublayer, norm2 to the "
        "feed-forward"
    ),
    "UnbiasedNorms": (
        "self.norm1 does not compute LayerNorm: fix your LayerNorm first (check.LayerNorm)"
    ),
    "DropoutInEval": (
        "EncoderLayer(12, 3, 20, 0.1, False) in eval mode, no mask: two calls give "
        "different outputs, so something is dropped in eval mode. Dropout acts only while "
        "training: use nn.Dropout modules, or F.dropout(x, p, training=self.training)"
    ),
    "DropoutIgnored": (
        "EncoderLayer(12, 3, 20, 0.3, False) in training mode drops nothing: the dropout "
        "argument is not used. Apply nn.Dropout(dropout) to each sublayer's output, and "
        "pass dropout on to MultiHeadAttention and FeedForward"
    ),
    "DropoutHardCoded": (
        "EncoderLayer(12, 3, 20, 0.0, False) in training mode changes the output although "
        "dropout=0.0: pass the constructor's dropout on to every nn.Dropout, "
        "MultiHeadAttention and FeedForward, not a fixed rate"
    ),
    "FeedForwardWithoutDropout": (
        "EncoderLayer(12, 3, 20, 0.3, False): self.ff drops nothing in training mode: build "
        "it with the rate, FeedForward(d_model, d_ff, dropout) (dropout after the ReLU)"
    ),
    "AttentionWithoutDropout": (
        "EncoderLayer(12, 3, 20, 0.3, False): self.self_attn drops nothing in training "
        "mode: build it with the rate, MultiHeadAttention(d_model, n_heads, dropout)"
    ),
    "NoDropoutOnTheAttentionOutput": (
        "EncoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the attention "
        "sublayer's output is not dropped: apply dropout to it before adding it to x, x + "
        "dropout1(sublayer(...))"
    ),
    "NoDropoutOnTheFeedForwardOutput": (
        "EncoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the feed-forward "
        "sublayer's output is not dropped: apply dropout to it before adding it to x, x + "
        "dropout2(sublayer(...))"
    ),
    "DropoutAfterTheResidual": (
        "EncoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the attention "
        "sublayer's output: dropout is applied after the residual addition, to x + "
        "sublayer: that drops parts of x itself. Drop only the sublayer's output, then add"
    ),
    "DropoutNotRescaled": (
        "EncoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the attention "
        "sublayer's output: the values that survive dropout are not rescaled: multiply them "
        "by 1 / (1 - p) (nn.Dropout and F.dropout do it for you)"
    ),
    "DropoutSameMaskEveryCall": (
        "EncoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the attention "
        "sublayer's output: two calls dropped exactly the same entries. Dropout must draw a "
        "new random mask on every call: don't seed inside your function (torch.manual_seed) "
        "or keep one mask"
    ),
    "SeedsInForward": (
        "EncoderLayer(12, 3, 20, 0.3, False) in training mode: two calls give the same "
        "output, so dropout draws the same mask every time. Don't seed inside forward and "
        "don't keep one mask"
    ),
    "FeedForwardDropoutAfterLinear2": (
        "EncoderLayer(12, 3, 20, 0.3, False): self.ff's hidden layer (what linear2 "
        "receives): nothing is dropped at dropout=0.3 in training mode. Dropout in the "
        "feed-forward goes after the ReLU, before linear2"
    ),
    "ResidualInPlace": (
        "your code changed one of its input tensors in place; compute new tensors instead "
        "(e.g. x = x * 2, not x *= 2)"
    ),
    "ReturnsAttention": (
        "forward returned a tuple of 2 things on EncoderLayer(12, 3, 20, 0.1, False) in "
        "eval mode, no mask: return only the output tensor"
    ),
    "TorchsAttention": (
        "self.self_attn is torch's nn.MultiheadAttention: use the course's "
        "MultiHeadAttention(d_model, n_heads, dropout) from lesson 04 (course.multihead). "
        "torch's keeps its weights in one in_proj_weight and reads masks the other way "
        "round"
    ),
    "FeedForwardNamedFFN": (
        "your layer has no submodule `ff`: self.ff = FeedForward(d_model, d_ff, dropout). "
        "The names matter: the checker copies its weights into them, and lesson 08 reuses "
        "them"
    ),
    "FourTimesDModel": (
        "self.ff.linear1 maps 12 -> 48 features; expected nn.Linear(12, 20) with a bias"
    ),
    "SublayerDetached": (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, no mask: no "
        "gradient reaches ff.linear1.weight, so it could not learn: something between "
        "ff.linear1.weight and the result is cut from the graph (.detach(), "
        "torch.no_grad(), values copied with torch.tensor(...) or .item())"
    ),
    "ForwardUnderNoGrad": (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, no mask: the "
        "result carries no gradient, so nothing before it could learn. Something cut it "
        "from the computation graph: .detach(), a `with torch.no_grad():` block, or a new "
        "tensor made from values (torch.tensor(...), .item(), .numpy())"
    ),
    "AlwaysFloat32Layer": (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, a batch of one, "
        "float64, non-contiguous, a padding mask is float32, but the inputs were float64: "
        "keep the inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; "
        "no .float() or .double())"
    ),
    "InitArgumentsInAnotherOrder": (
        "your parameters come in the order (d_model, d_ff, n_heads, dropout, norm_first); "
        "the lesson's signature is EncoderLayer(d_model, n_heads, d_ff, dropout=0.1, "
        "norm_first=False), and the notebooks pass the arguments in that order"
    ),
    "NoNormFirstArgument": (
        "on inputs d_model=12, n_heads=3, d_ff=20, dropout=0.1, norm_first=False your code "
        "raised TypeError: NoNormFirstArgument.__init__() takes from 4 to 5 positional "
        "arguments but 6 were given. The constructor's signature is __init__(self, d_model, "
        "n_heads, d_ff, dropout=0.1, norm_first=False), in that order"
    ),
}


@pytest.mark.parametrize("name", LN_WRONG_MESSAGES)
def test_the_whole_layer_norm_verdict(name, verdict):
    answer = next(a for a, _ in LN_WRONG if a.__name__ == name)
    passed, printed = verdict(check.LayerNorm, answer)
    assert passed is False
    assert printed == f"❌ LayerNorm: {LN_WRONG_MESSAGES[name]}\n"


@pytest.mark.parametrize("name", ENC_WRONG_MESSAGES)
def test_the_whole_encoder_layer_verdict(name, verdict):
    answer = next(a for a, _ in ENC_WRONG if a.__name__ == name)
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is False
    assert printed == f"❌ EncoderLayer: {ENC_WRONG_MESSAGES[name]}\n"


def test_a_stub_met_inside_another_class_is_named_by_its_class(verdict):
    answer = next(a for a, _ in ENC_WRONG if a.__name__ == "CallsUnfinishedLayerNorm")
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is False
    assert printed == (
        "⏳ EncoderLayer: your code calls LayerNorm, which is not implemented yet (it still "
        "raises NotImplementedError). Finish LayerNorm first, run its cell, then this one "
        "again.\n"
    )
