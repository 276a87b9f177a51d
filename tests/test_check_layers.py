"""The lesson 07 checkers accept every correct answer and name each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.layers import FeedForward
from course.multihead import MultiHeadAttention

# --------------------------------------------------------------- LayerNorm ----------


class GoodNorm(nn.Module):
    """The lesson's answer; the mistakes below each change one thing."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def stats(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=-1, keepdim=True)

    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class VarCorrectionZeroRsqrt(GoodNorm):
    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias


class TorchVarUnbiasedFalse(GoodNorm):
    def forward(self, x):
        var = torch.var(x, dim=-1, unbiased=False, keepdim=True)
        std = (var + self.eps).sqrt()
        return torch.addcmul(self.bias, (x - x.mean(-1, keepdim=True)) / std, self.weight)


class FunctionalLayerNorm(GoodNorm):
    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class VarMean(GoodNorm):
    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
        return (x - mean) / (var + self.eps) ** 0.5 * self.weight + self.bias


class EinsumSums(GoodNorm):
    def forward(self, x):
        d = x.shape[-1]
        mean = torch.einsum("...d->...", x)[..., None] / d
        centred = x - mean
        var = torch.einsum("...d,...d->...", centred, centred)[..., None] / d
        return torch.einsum("...d,d->...d", centred / torch.sqrt(var + self.eps), self.weight) + (
            self.bias
        )


class SubclassOfTorchs(nn.LayerNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps=eps)


LN_RIGHT = [
    GoodNorm,
    VarCorrectionZeroRsqrt,
    TorchVarUnbiasedFalse,
    FunctionalLayerNorm,
    VarMean,
    EinsumSums,
    SubclassOfTorchs,
]


@pytest.mark.parametrize("answer", LN_RIGHT)
def test_layer_norm_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.LayerNorm, answer)
    assert passed is True and "✅ LayerNorm: passed" in printed, printed


class NormStub(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, x):
        # YOUR CODE HERE
        raise NotImplementedError


class UnbiasedVariance(GoodNorm):
    def stats(self, x):
        return x.mean(-1, keepdim=True), x.var(-1, keepdim=True)


class EpsOutsideTheRoot(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / (var.sqrt() + self.eps) + self.bias


class OverTheBatch(GoodNorm):
    def stats(self, x):
        mean = x.mean(dim=0, keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=0, keepdim=True)


class OverTime(GoodNorm):
    def stats(self, x):
        mean = x.mean(dim=1, keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=1, keepdim=True)


class OverTimeAndFeatures(GoodNorm):
    def stats(self, x):
        mean = x.mean(dim=(-2, -1), keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=(-2, -1), keepdim=True)


class BatchNormLike(GoodNorm):
    def stats(self, x):
        dims = tuple(range(x.dim() - 1))  # every axis but the features
        mean = x.mean(dim=dims, keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=dims, keepdim=True)


class IgnoresGainAndBias(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return (x - mean) / torch.sqrt(var + self.eps)


class NoShift(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps)


class GainAndShiftSwapped(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.bias * (x - mean) / torch.sqrt(var + self.eps) + self.weight


class NoParameters(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=self.eps)


class GammaBeta(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.gamma, self.beta, self.eps)


class PlainTensorWeight(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        del self.weight
        self.weight = torch.ones(d_model)


class RandomStart(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.randn(d_model))


class WeightShapedLikeX(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.ones(1, 1, d_model))


class EpsIgnored(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var) + self.bias


class EpsHardCoded(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var + 1e-5) + self.bias


class OtherDefaultEps(GoodNorm):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)


class EpsAThousandth(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, 1e-3)


class RMSNorm(GoodNorm):
    def forward(self, x):
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x / rms + self.bias


class NotCentred(GoodNorm):
    def forward(self, x):
        _, var = self.stats(x)
        return self.weight * x / torch.sqrt(var + self.eps) + self.bias


class DividesByTheVariance(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / (var + self.eps) + self.bias


class MeanDetached(GoodNorm):
    def stats(self, x):
        mean = x.mean(-1, keepdim=True).detach()
        return mean, ((x - mean) ** 2).mean(-1, keepdim=True)


class VarianceDetached(GoodNorm):
    def stats(self, x):
        mean, var = super().stats(x)
        return mean, var.detach()


class StdPlusEps(GoodNorm):
    """As in some well-known tutorials: x.std() is unbiased, and eps is outside the root.
    The first case's eps is negligible next to its variance: the variance is named first."""

    def forward(self, x):
        mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


class AlwaysFloat32(GoodNorm):
    def forward(self, x):
        return super().forward(x).float()


class CentresInPlace(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        x -= mean
        return self.weight * x / torch.sqrt(var + self.eps) + self.bias


class NoKeepdim(GoodNorm):
    def forward(self, x):
        mean = x.mean(-1)
        var = ((x - mean) ** 2).mean(-1)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class FlattensWithView(GoodNorm):
    def forward(self, x):
        rows = x.view(-1, x.shape[-1])
        return super().forward(rows).view(x.shape)


class LastAxisHardCoded(GoodNorm):
    def stats(self, x):
        mean = x.mean(dim=2, keepdim=True)
        return mean, ((x - mean) ** 2).mean(dim=2, keepdim=True)


class ArgumentsSwapped(GoodNorm):
    def __init__(self, eps, d_model):
        super().__init__(d_model, eps)


class ReturnsStats(GoodNorm):
    def forward(self, x):
        return super().forward(x), self.stats(x)


LN_WRONG = [
    (NormStub, "⏳ LayerNorm: not implemented yet"),
    (UnbiasedVariance, "the unbiased variance"),
    (EpsOutsideTheRoot, "eps is added outside the square root"),
    (OverTheBatch, "you normalise over the batch axis (dim 0)"),
    (OverTime, "you normalise over the time axis (dim 1)"),
    (OverTimeAndFeatures, "you normalise over all of (T, d_model) together"),
    (BatchNormLike, "that is BatchNorm"),
    (IgnoresGainAndBias, "the gain and the shift are ignored"),
    (NoShift, "the shift is missing"),
    (GainAndShiftSwapped, "the gain and the shift are swapped"),
    (NoParameters, "has no parameter `weight` (the learned gain)"),
    (GammaBeta, "(parameters found: gamma, beta)"),
    (PlainTensorWeight, "self.weight of your module is a Tensor, not a registered nn.Parameter"),
    (RandomStart, "self.weight does not start at ones"),
    (WeightShapedLikeX, "self.weight of your module has shape (1, 1, 8)"),
    (EpsIgnored, "eps is missing: divide by sqrt(var + eps)"),
    (EpsHardCoded, "eps is fixed at 1e-5 whatever eps is asked"),
    (OtherDefaultEps, "your eps is 1e-06, but eps=1e-05 was asked"),
    (EpsAThousandth, "your eps is 0.001, but eps=1e-05 was asked"),
    (RMSNorm, "that is RMSNorm"),
    (NotCentred, "the mean is not subtracted"),
    (DividesByTheVariance, "you divide by the variance"),
    (MeanDetached, "the mean is detached"),
    (VarianceDetached, "the variance is detached"),
    (StdPlusEps, "you divide by d_model - 1 (the unbiased variance"),
    (AlwaysFloat32, "is float32, but the inputs were float64"),
    (CentresInPlace, "changed one of its input tensors in place"),
    (NoKeepdim, "keepdim=True"),
    (FlattensWithView, "use .reshape(...) instead of .view(...)"),
    (LastAxisHardCoded, "Normalise over the last axis, dim=-1"),
    (ArgumentsSwapped, "the lesson's signature is LayerNorm(d_model, eps=1e-5)"),
    (ReturnsStats, "return only the output tensor"),
]


@pytest.mark.parametrize("answer, diagnosis", LN_WRONG, ids=[w[0].__name__ for w in LN_WRONG])
def test_layer_norm_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.LayerNorm, answer)
    assert passed is False and diagnosis in printed, printed


def test_layer_norm_instance_instead_of_the_class_is_explained(verdict):
    passed, printed = verdict(check.LayerNorm, GoodNorm(8))
    assert passed is False and "pass the class itself, not an instance" in printed


# ------------------------------------------------------------ EncoderLayer ----------


class Good(nn.Module):
    """A correct layer, written the lesson's way; the mistakes below each change one thing."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = GoodNorm(d_model)
        self.norm2 = GoodNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def attend(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask))

    def feed(self, x):
        return self.dropout2(self.ff(x))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attend(self.norm1(x), mask)
            return x + self.feed(self.norm2(x))
        x = self.norm1(x + self.attend(x, mask))
        return self.norm2(x + self.feed(x))


class SublayerHelper(Good):
    """One helper for both sublayers, as the Annotated Transformer's SublayerConnection."""

    def sublayer(self, x, norm, fn, drop):
        if self.norm_first:
            return x + drop(fn(norm(x)))
        return norm(x + drop(fn(x)))

    def forward(self, x, mask=None):
        x = self.sublayer(
            x, self.norm1, lambda h: self.self_attn(h, h, h, mask=mask), self.dropout1
        )
        return self.sublayer(x, self.norm2, self.ff, self.dropout2)


class FunctionalDropout(Good):
    """F.dropout with self.training, torch's nn.LayerNorm, a mask passed by keyword."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.p = dropout
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        del self.dropout1, self.dropout2

    def attend(self, x, mask):
        return F.dropout(self.self_attn(x, x, x, mask=mask), self.p, self.training)

    def feed(self, x):
        return F.dropout(self.ff(x), p=self.p, training=self.training)


class SequentialFeedForward(Good):
    """ff as an nn.Sequential; one shared nn.Dropout for both sublayers."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model)
        )
        self.drop = nn.Dropout(dropout)
        self.dropout1 = self.dropout2 = self.drop


class OwnFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.p = dropout

    def forward(self, x):
        return self.linear2(F.dropout(torch.clamp(self.linear1(x), min=0), self.p, self.training))


class OwnSublayersTwoBranches(nn.Module):
    """Written without any helper: two explicit branches, the learner's own parts."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.pre = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = OwnFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = VarMean(d_model), FunctionalLayerNorm(d_model)
        self.drop_attn, self.drop_ff = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.pre:
            h = self.norm1(x)
            x = x + self.drop_attn(self.self_attn(h, h, h, mask))
            h = self.norm2(x)
            return x + self.drop_ff(self.ff(h))
        a = self.self_attn(x, x, x, mask)
        x = self.norm1(x + self.drop_attn(a))
        return self.norm2(self.drop_ff(self.ff(x)) + x)


ENC_RIGHT = [
    Good,
    SublayerHelper,
    FunctionalDropout,
    SequentialFeedForward,
    OwnSublayersTwoBranches,
]


@pytest.mark.parametrize("answer", ENC_RIGHT)
def test_encoder_layer_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is True and "✅ EncoderLayer: passed" in printed, printed


class Stub(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, x, mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class ForwardStub(Good):
    def forward(self, x, mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class LayerNorm(nn.Module):  # the notebook's LayerNorm, still a stub
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError


class CallsUnfinishedLayerNorm(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1 = LayerNorm(d_model)


class EncoderWithCausalMask(Good):
    """The decoder's causal mask in the encoder: each source word sees only those before it."""

    def attend(self, x, mask):
        T = x.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()  # <-
        return super().attend(x, causal if mask is None else mask & causal)


class PreLNWithAFinalNorm(Good):
    """Pre-LN, then norm2 once more on the way out (the stack's final norm, in every layer)."""

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        return self.norm2(out) if self.norm_first else out  # <-


class PreLNWithItsOwnFinalNorm(Good):
    """Pre-LN with a third LayerNorm of its own at the end of the layer."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.final_norm = GoodNorm(d_model)

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        return self.final_norm(out) if self.norm_first else out  # <-


class AlwaysPostLN(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, False)


class AlwaysPreLN(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, True)


class PreLNByDefault(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)


class NoResidualAroundAttention(Good):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.attend(self.norm1(x), mask)
            return x + self.feed(self.norm2(x))
        x = self.norm1(self.attend(x, mask))
        return self.norm2(x + self.feed(x))


class NoResidualAroundFeedForward(Good):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attend(self.norm1(x), mask)
            return self.feed(self.norm2(x))
        x = self.norm1(x + self.attend(x, mask))
        return self.norm2(self.feed(x))


class NoResiduals(Good):
    def forward(self, x, mask=None):
        x = self.norm1(self.attend(x, mask))
        return self.norm2(self.feed(x))


class NormsInsideTheResidual(Good):
    def forward(self, x, mask=None):
        x = x + self.norm1(self.attend(x, mask))
        return x + self.norm2(self.feed(x))


class PreLNResidualFromNormed(Good):
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = self.norm1(x)
        x = x + self.attend(x, mask)
        x = self.norm2(x)
        return x + self.feed(x)


class PreLNAttentionOnRawX(Good):
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = x + self.attend(x, mask)
        return x + self.feed(self.norm2(x))


class PreLNKeysFromRawX(Good):
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        h = self.norm1(x)
        x = x + self.dropout1(self.self_attn(h, x, x, mask))
        return x + self.feed(self.norm2(x))


class FeedForwardReadsTheInput(Good):
    def forward(self, x, mask=None):
        h = self.norm1(x + self.attend(x, mask))
        return self.norm2(h + self.feed(x))


class MaskDropped(Good):
    def attend(self, x, mask):
        return super().attend(x, None)


class MaskInverted(Good):
    def attend(self, x, mask):
        return super().attend(x, None if mask is None else ~mask)


class NoReLU(Good):
    def feed(self, x):
        return self.dropout2(self.ff.linear2(self.ff.linear1(x)))


class ReLUAfterLinear2Too(Good):
    def feed(self, x):
        return self.dropout2(F.relu(self.ff(x)))


class GELU(Good):
    def feed(self, x):
        return self.dropout2(self.ff.linear2(F.gelu(self.ff.linear1(x))))


class SharedNorm(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm2 = self.norm1


class Norm1Twice(Good):
    def forward(self, x, mask=None):
        self.norm2, saved = self.norm1, self.norm2
        try:
            return super().forward(x, mask)
        finally:
            self.norm2 = saved


class NormsSwapped(Good):
    def forward(self, x, mask=None):
        self.norm1, self.norm2 = self.norm2, self.norm1
        try:
            return super().forward(x, mask)
        finally:
            self.norm1, self.norm2 = self.norm2, self.norm1


class UnbiasedNorms(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1, self.norm2 = UnbiasedVariance(d_model), UnbiasedVariance(d_model)


class DropoutInEval(Good):
    def attend(self, x, mask):
        return F.dropout(self.self_attn(x, x, x, mask), self.dropout1.p)  # training=True always


class DropoutIgnored(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, 0.0, norm_first)


class DropoutHardCoded(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, 0.1, norm_first)


class FeedForwardWithoutDropout(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = FeedForward(d_model, d_ff)


class AttentionWithoutDropout(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads)


class NoDropoutOnTheAttentionOutput(Good):
    def attend(self, x, mask):
        return self.self_attn(x, x, x, mask)


class NoDropoutOnTheFeedForwardOutput(Good):
    def feed(self, x):
        return self.ff(x)


class DropoutAfterTheResidual(Good):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.dropout1(x + self.self_attn(*[self.norm1(x)] * 3, mask))
            return self.dropout2(x + self.ff(self.norm2(x)))
        x = self.norm1(self.dropout1(x + self.self_attn(x, x, x, mask)))
        return self.norm2(self.dropout2(x + self.ff(x)))


class RateAsKeepProbability(Good):
    """nn.Dropout(1 - dropout) on the sublayers' outputs: at dropout=0.0 it drops them all."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.dropout1, self.dropout2 = nn.Dropout(1 - dropout), nn.Dropout(1 - dropout)


class InputDropped(Good):
    """Dropout on the layer's input, as if it were the embeddings' dropout."""

    def forward(self, x, mask=None):
        return super().forward(self.dropout1(x), mask)


class KeysAndValuesDropped(Good):
    def attend(self, x, mask):
        dropped = self.dropout1(x)
        return self.dropout1(self.self_attn(x, dropped, dropped, mask))


class ValueDroppedByKeyword(Good):
    """The dropped value passed first, by keyword."""

    def attend(self, x, mask):
        return self.dropout1(self.self_attn(value=self.dropout1(x), query=x, key=x, mask=mask))


class FeedForwardInputDropped(Good):
    """Dropout on what the feed-forward reads as well as on its output."""

    def feed(self, x):
        return self.dropout2(self.ff(self.dropout2(x)))


class DropoutBeforeAndAfterTheResidual(Good):
    """The sublayer's output dropped (right), then the sum dropped again (wrong)."""

    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.dropout1(x + self.attend(self.norm1(x), mask))
            return self.dropout2(x + self.feed(self.norm2(x)))
        x = self.norm1(self.dropout1(x + self.attend(x, mask)))
        return self.norm2(self.dropout2(x + self.feed(x)))


class DropoutNotRescaled(Good):
    def attend(self, x, mask):
        out = self.self_attn(x, x, x, mask)
        if self.training:
            out = out * (torch.rand_like(out) >= self.dropout1.p)
        return out


class DropoutSameMaskEveryCall(Good):
    def attend(self, x, mask):
        out = self.self_attn(x, x, x, mask)
        if self.training and self.dropout1.p > 0:
            keep = torch.rand(out.shape, generator=torch.Generator().manual_seed(0))
            out = out * (keep >= self.dropout1.p) / (1 - self.dropout1.p)
        return out


class SeedsInForward(Good):
    def forward(self, x, mask=None):
        torch.manual_seed(0)
        return super().forward(x, mask)


class FeedForwardDropoutAfterLinear2(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model), nn.Dropout(dropout)
        )


class ResidualInPlace(Good):
    def forward(self, x, mask=None):
        if self.norm_first:
            x += self.attend(self.norm1(x), mask)
            return x + self.feed(self.norm2(x))
        return super().forward(x, mask)


class ReturnsAttention(Good):
    def forward(self, x, mask=None):
        return super().forward(x, mask), self.self_attn.attn


class TorchsAttention(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout, batch_first=True)


class FeedForwardNamedFFN(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ffn = self.ff
        del self.ff


class FourTimesDModel(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, 4 * d_model, dropout, norm_first)


class SublayerDetached(Good):
    def feed(self, x):
        return super().feed(x).detach()


class ForwardUnderNoGrad(Good):
    def forward(self, x, mask=None):
        with torch.no_grad():
            return super().forward(x, mask)


class AlwaysFloat32Layer(Good):
    def forward(self, x, mask=None):
        return super().forward(x, mask).float()


class InitArgumentsInAnotherOrder(Good):
    def __init__(self, d_model, d_ff, n_heads, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)


class NoNormFirstArgument(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1):
        super().__init__(d_model, n_heads, d_ff, dropout)


ENC_WRONG = [
    (EncoderWithCausalMask, "your encoder layer adds a causal mask"),
    (PreLNWithAFinalNorm, "your pre-LN layer normalises its output (with norm2 again)"),
    (
        PreLNWithItsOwnFinalNorm,
        "your pre-LN layer normalises its output (with a LayerNorm of its own)",
    ),
    (Stub, "⏳ EncoderLayer: not implemented yet"),
    (ForwardStub, "⏳ EncoderLayer: not implemented yet"),
    (CallsUnfinishedLayerNorm, "⏳ EncoderLayer: your code calls LayerNorm"),
    (AlwaysPostLN, "with norm_first=True your layer computes post-LN"),
    (AlwaysPreLN, "with norm_first=False your layer computes pre-LN"),
    (PreLNByDefault, "built with the defaults, computes pre-LN"),
    (NoResidualAroundAttention, "the attention sublayer has no residual connection"),
    (NoResidualAroundFeedForward, "the feed-forward sublayer has no residual connection"),
    (NoResiduals, "there is no residual connection at all"),
    (NormsInsideTheResidual, "you normalise each sublayer's output before adding it"),
    (PreLNResidualFromNormed, "the residual adds the normalised x"),
    (PreLNAttentionOnRawX, "the attention reads x, not norm1(x)"),
    (PreLNKeysFromRawX, "the attention's keys and values come from x"),
    (FeedForwardReadsTheInput, "the feed-forward reads the layer's input x"),
    (MaskDropped, "the mask is ignored"),
    (MaskInverted, "the mask is inverted"),
    (NoReLU, "the feed-forward has no ReLU"),
    (ReLUAfterLinear2Too, "applies a ReLU after linear2 too"),
    (GELU, "the feed-forward uses GELU"),
    (SharedNorm, "norm1 and norm2 are the same module"),
    (Norm1Twice, "norm1 is used for both sublayers"),
    (NormsSwapped, "norm1 and norm2 are swapped"),
    (UnbiasedNorms, "self.norm1 does not compute LayerNorm"),
    (DropoutInEval, "two calls give different outputs, so something is dropped in eval mode"),
    (DropoutIgnored, "in training mode drops nothing: the dropout argument is not used"),
    (DropoutHardCoded, "changes the output although dropout=0.0"),
    (FeedForwardWithoutDropout, "self.ff drops nothing in training mode"),
    (AttentionWithoutDropout, "self.self_attn drops nothing in training mode"),
    (NoDropoutOnTheAttentionOutput, "the attention sublayer's output is not dropped"),
    (NoDropoutOnTheFeedForwardOutput, "the feed-forward sublayer's output is not dropped"),
    (DropoutAfterTheResidual, "dropout is applied after the residual addition"),
    (DropoutBeforeAndAfterTheResidual, "dropout is applied after the residual addition"),
    (InputDropped, "dropout is applied to x before the attention. Dropout belongs on each"),
    (
        RateAsKeepProbability,
        "identically on every call, so not at random: is the rate used "
        "as the probability of keeping? nn.Dropout(1 - dropout) drops everything",
    ),
    (KeysAndValuesDropped, "dropout is applied to x before the attention"),
    (ValueDroppedByKeyword, "dropout is applied to x before the attention"),
    (FeedForwardInputDropped, "dropout is applied to x before the feed-forward"),
    (DropoutNotRescaled, "the values that survive dropout are not rescaled"),
    (DropoutSameMaskEveryCall, "two calls dropped exactly the same entries"),
    (SeedsInForward, "two calls give the same output, so dropout draws the same mask"),
    (FeedForwardDropoutAfterLinear2, "self.ff's hidden layer (what linear2 receives): nothing"),
    (ResidualInPlace, "changed one of its input tensors in place"),
    (ReturnsAttention, "return only the output tensor"),
    (TorchsAttention, "self.self_attn is torch's nn.MultiheadAttention"),
    (FeedForwardNamedFFN, "your layer has no submodule `ff`"),
    (FourTimesDModel, "self.ff.linear1 maps 12 -> 48 features"),
    (SublayerDetached, "no gradient reaches ff.linear1.weight"),
    (ForwardUnderNoGrad, "carries no gradient"),
    (AlwaysFloat32Layer, "is float32, but the inputs were float64"),
    (InitArgumentsInAnotherOrder, "EncoderLayer(d_model, n_heads, d_ff, dropout=0.1, norm_first"),
    (NoNormFirstArgument, "takes from 4 to 5 positional arguments"),
]


@pytest.mark.parametrize("answer, diagnosis", ENC_WRONG, ids=[w[0].__name__ for w in ENC_WRONG])
def test_encoder_layer_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is False and diagnosis in printed, printed


def test_encoder_layer_instance_instead_of_the_class_is_explained(verdict):
    passed, printed = verdict(check.EncoderLayer, Good(12, 3, 20))
    assert passed is False and "pass the class itself, not an instance" in printed


def test_the_float32_message_names_the_case_once(verdict):
    passed, printed = verdict(check.LayerNorm, AlwaysFloat32)
    assert passed is False
    assert printed == (
        "❌ LayerNorm: the output of LayerNorm(12, 0.001) on x of shape (2, 4, 12), float64, "
        "non-contiguous is float32, but the inputs were float64: keep the inputs' dtype (make "
        "new tensors with x.new_zeros(...) or dtype=x.dtype; no .float() or .double())\n"
    )
