"""The LayerNorm and EncoderLayer checkers (course/check/layers.py, up to the sublayer
culprits): more wrong answers, each held to its whole verdict, and the checker's helpers
held to what they compute (issue 7: mutation testing of the module showed messages,
case sizes, hints and branches that no test pinned down).

Each wrong answer is one a learner writes; the verdict is compared in full, so a message
that loses a word, a number, the case it names or the values it quotes fails. The helper
tests pin what a verdict is built from: which mistakes an input can tell apart, when an
answer is "LayerNorm with another eps", which parameters are paired with the reference's.
"""

import pytest
import torch
import torch.nn.functional as F
from test_check_layers import Good, GoodNorm, SequentialFeedForward, StdPlusEps, VarMean
from torch import nn

from course import check
from course import layers as reference
from course.check.layers import (
    _enc_variant,
    _eps_used,
    _ln_mistakes,
    _pairs,
    _random_reference,
)
from course.multihead import MultiHeadAttention, merge_heads, split_heads

# --------------------------------------------------------------- LayerNorm ----------


class NotAModule:
    """`class LayerNorm:` without nn.Module: it builds and runs, but is no module."""

    def __init__(self, d_model, eps=1e-5):
        self.eps = eps
        self.weight = torch.ones(d_model)
        self.bias = torch.zeros(d_model)

    def __call__(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class ForgetsToReturn(GoodNorm):
    def forward(self, x):
        out = super().forward(x)  # noqa: F841 - the learner's missing `return out`


class NoEpsArgument(GoodNorm):
    def __init__(self, d_model):
        super().__init__(d_model)


class KerasEpsilon(nn.LayerNorm):
    """Keras spells it `epsilon`; torch's nn.LayerNorm does not."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, epsilon=eps)


class ForwardTakesAMask(GoodNorm):
    def forward(self, x, mask):
        return super().forward(x)


class NoDivision(GoodNorm):
    """Centred, scaled and shifted, but never divided by the standard deviation."""

    def forward(self, x):
        mean, _ = self.stats(x)
        return self.weight * (x - mean) + self.bias


class VarianceClampedAtEps(GoodNorm):
    """max(var, eps) instead of var + eps: the same on the first input, not when eps matters."""

    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / var.clamp(min=self.eps).sqrt() + self.bias


class SqueezesTheOutput(GoodNorm):
    def forward(self, x):
        return super().forward(x).squeeze()


class FlattensBatchAndTime(GoodNorm):
    """Rows as x.flatten(0, 1), which assumes x is (B, T, d_model): a 2-D x becomes 1-D."""

    def forward(self, x):
        rows = x.flatten(0, 1)
        mean, var = self.stats(rows)
        x_hat = ((rows - mean) / torch.sqrt(var + self.eps)).reshape(x.shape)
        return self.weight * x_hat + self.bias


class DenominatorGuard(GoodNorm):
    """A guard against division by zero on top of eps: it shows once the variance is tiny."""

    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / (torch.sqrt(var + self.eps) + 1e-6) + self.bias


class NoGain(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return (x - mean) / torch.sqrt(var + self.eps) + self.bias


class OverEveryAxis(GoodNorm):
    """x.mean() and the variance without dim=: one mean for the whole tensor."""

    def forward(self, x):
        mean = x.mean()
        var = ((x - mean) ** 2).mean()
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class DModelAsEps(GoodNorm):
    """The attributes swapped: self.eps holds d_model."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.eps = d_model


class BiasStartsAtOnes(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.bias = nn.Parameter(torch.ones(d_model))


class NoBias(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        del self.bias

    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps)


class BiasShapedLikeX(GoodNorm):
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.bias = nn.Parameter(torch.zeros(1, d_model))


class ParametersInAList(nn.Module):
    """Parameters kept in a plain Python list (not nn.ParameterList): never registered."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.params = [nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))]

    @property
    def weight(self):
        return self.params[0]

    @property
    def bias(self):
        return self.params[1]

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class NumpyMean(GoodNorm):
    """The mean taken in NumPy: fine without gradients, an error with them."""

    def stats(self, x):
        mean = torch.from_numpy(x.numpy().mean(axis=-1, keepdims=True))
        return mean, ((x - mean) ** 2).mean(dim=-1, keepdim=True)


class StatisticsUnderNoGrad(GoodNorm):
    """The mean and the variance under torch.no_grad(), as if statistics needed no gradient."""

    def stats(self, x):
        with torch.no_grad():
            return super().stats(x)


class WeightData(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight.data * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class BiasData(GoodNorm):
    def forward(self, x):
        mean, var = self.stats(x)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias.data


_CASE_0 = "the output of LayerNorm(8) on x of shape (3, 5, 8) (the default eps)"

LN_MESSAGES = [
    (
        NotAModule,
        "LayerNorm(8) gave a NotAModule, not an nn.Module: write `class LayerNorm(nn.Module)` "
        "and call super().__init__() first in __init__",
    ),
    (
        ForgetsToReturn,
        f"{_CASE_0} should be a torch.Tensor, got a NoneType",
    ),
    (
        NoEpsArgument,
        "on inputs d_model=6, eps=0.1 your code raised TypeError: NoEpsArgument.__init__() "
        "takes 2 positional arguments but 3 were given. The constructor's signature is "
        "__init__(self, d_model, eps=1e-5), in that order",
    ),
    (
        KerasEpsilon,
        "on inputs d_model=8 your code raised TypeError: LayerNorm.__init__() got an "
        "unexpected keyword argument 'epsilon'. Your constructor's own signature is right; "
        "the error is in a call inside it: LayerNorm(...) does not take those arguments. "
        "Check the signature of LayerNorm",
    ),
    (
        ForwardTakesAMask,
        "on inputs x (3, 5, 8) your code raised TypeError: ForwardTakesAMask.forward() "
        "missing 1 required positional argument: 'mask'. The module is called as norm(x)",
    ),
    (
        NoDivision,
        f"{_CASE_0} is not right: at index (1, 2, 4) you have -2.015, expected -2.889 "
        "(largest difference 0.873)",
    ),
    (
        VarianceClampedAtEps,
        "the output of LayerNorm(6, 0.1) on x of shape (4, 3, 6) (eps=0.1 and a small "
        "variance, so eps matters) is not right: at index (3, 1, 0) you have -2.266, "
        "expected -1.62 (largest difference 0.645)",
    ),
    (
        SqueezesTheOutput,
        "the output of LayerNorm(10) on x of shape (1, 7, 10) (a batch of one) has shape "
        "(7, 10), expected (1, 7, 10). LayerNorm keeps the shape of x",
    ),
    (
        FlattensBatchAndTime,
        "the output of LayerNorm(9, 1e-05) on x of shape (6, 9) (a 2-D input (N, d_model)) "
        "is not right: at index (4, 1) you have -0.4938, expected 3.498 (largest "
        "difference 3.99)",
    ),
    (
        DenominatorGuard,
        "the output of LayerNorm(16) on x of shape (2, 3, 16) (the default eps and a tiny "
        "variance) is not right: at index (0, 0, 9) you have -1.285, expected -1.286 "
        "(largest difference 0.000518)",
    ),
    (
        NoGain,
        "the gain is missing: multiply the normalised x by self.weight, then add self.bias",
    ),
    (
        OverEveryAxis,
        "you normalise over every axis at once: LayerNorm normalises each position's vector "
        "on its own, over the last axis only, mean(dim=-1, keepdim=True)",
    ),
    (
        DModelAsEps,
        "your eps is 8, but eps=1e-05 was asked: use the constructor's argument, inside the "
        "square root, sqrt(var + eps)",
    ),
    (
        BiasStartsAtOnes,
        "self.bias does not start at zeros: the shift starts at 0, "
        "nn.Parameter(torch.zeros(d_model))",
    ),
    (
        NoBias,
        "your module has no parameter `bias` (the learned shift): LayerNorm learns a gain and "
        "a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
        "nn.Parameter(torch.zeros(d_model)) (parameters found: weight)",
    ),
    (
        BiasShapedLikeX,
        "self.bias of your module has shape (1, 8) for d_model=8, expected (8,): one shift "
        "per feature",
    ),
    (
        ParametersInAList,
        "self.weight of your module is a Parameter, not a registered nn.Parameter: wrap it, "
        "self.weight = nn.Parameter(...), so that the optimizer sees it and it learns (and "
        ".double() or .to(device) move it)",
    ),
    (
        NumpyMean,
        "on inputs x (3, 5, 8) your code raised RuntimeError: Can't call numpy() on Tensor "
        "that requires grad. Use tensor.detach().numpy() instead.",
    ),
    (
        StatisticsUnderNoGrad,
        f"{_CASE_0}: your values are right, but the gradient with respect to x is not, so "
        "training would follow the wrong slope. Something on the way is cut from the graph or "
        "rebuilt from values (.detach(), .data, torch.tensor(...)), or a step is computed "
        "without autograd",
    ),
    (
        WeightData,
        f"{_CASE_0}: no gradient reaches weight, so it could not learn: something between "
        "weight and the result is cut from the graph (.detach(), torch.no_grad(), values "
        "copied with torch.tensor(...) or .item())",
    ),
    (
        BiasData,
        f"{_CASE_0}: no gradient reaches bias, so it could not learn: something between bias "
        "and the result is cut from the graph (.detach(), torch.no_grad(), values copied "
        "with torch.tensor(...) or .item())",
    ),
]


@pytest.mark.parametrize(
    "answer, message", LN_MESSAGES, ids=[answer.__name__ for answer, _ in LN_MESSAGES]
)
def test_the_whole_layer_norm_verdict(answer, message, verdict):
    passed, printed = verdict(check.LayerNorm, answer)
    assert passed is False
    assert printed == f"❌ LayerNorm: {message}\n"


def test_a_right_layer_norm_is_told_what_was_checked(verdict):
    passed, printed = verdict(check.LayerNorm, GoodNorm)
    assert passed is True
    assert printed == (
        "✅ LayerNorm: passed (6 inputs: 2-D and 3-D, a batch of one, float64 and "
        "non-contiguous, variances small next to eps; values and gradients of x, weight "
        "and bias).\n"
    )


@pytest.mark.parametrize(
    "checker, instance",
    [(check.LayerNorm, GoodNorm(8)), (check.EncoderLayer, Good(12, 3, 20))],
    ids=["LayerNorm", "EncoderLayer"],
)
def test_an_instance_is_answered_with_the_call_to_write(checker, instance, verdict):
    name = checker.__name__
    passed, printed = verdict(checker, instance)
    assert passed is False
    assert printed == (
        f"❌ {name}: pass the class itself, not an instance: check.{name}({name}) (the "
        "checker builds its own modules)\n"
    )


# ------------------------------------------------- LayerNorm: the checker's helpers ----------


def _inputs(*shape, scale=1.0, seed=0):
    """x with each row its own mean, a gain away from 1 and a shift away from 0 (as the
    checker draws them), in float64 so that the helpers' arithmetic is exact enough."""
    gen = torch.Generator().manual_seed(seed)
    d = shape[-1]
    x = torch.randn(*shape, generator=gen, dtype=torch.float64)
    x = (x + torch.randn(*shape[:-1], 1, generator=gen, dtype=torch.float64)) * scale
    weight = 1 + 0.5 * torch.randn(d, generator=gen, dtype=torch.float64)
    bias = 0.5 * torch.randn(d, generator=gen, dtype=torch.float64)
    return x, weight, bias


def _over(x, dims, weight, bias, eps):
    """LayerNorm's formula, but normalising over `dims`."""
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return weight * (x - mean) / torch.sqrt(var + eps) + bias


_BATCH_NORM = "you normalise each feature over the batch (and time): that is BatchNorm."
_EPS_FIXED = "eps is fixed at 1e-5 whatever eps is asked"


def _axes(wrong: dict) -> list[str]:
    """The axes the diagnoses say the answer normalised over, in the order they are tried."""
    prefix, end = "you normalise over ", ": LayerNorm normalises each position's vector"
    return [d[len(prefix) : d.index(end)] for d in wrong if d.startswith(prefix) and end in d]


@pytest.mark.parametrize(
    "shape, axes, batch_norm",
    [
        ((3, 5, 8), ["the batch axis (dim 0)", "the time axis (dim 1)",
                     "all of (T, d_model) together", "every axis at once"], True),
        ((2, 3, 16), ["the batch axis (dim 0)", "the time axis (dim 1)",
                      "all of (T, d_model) together", "every axis at once"], True),
        ((1, 7, 10), ["the time axis (dim 1)", "all of (T, d_model) together"], True),
        ((6, 9), ["the batch axis (dim 0)"], True),
        ((2, 9), ["the batch axis (dim 0)"], True),
        ((1, 9), [], False),
    ],
    ids=["3-D", "3-D, a batch of two", "3-D, a batch of one", "2-D", "2-D, two rows",
         "2-D, one row"],
)  # fmt: skip
def test_only_the_axis_mistakes_an_input_can_show_are_named(shape, axes, batch_norm):
    """Over a batch of one, the batch axis holds one value: "over the batch" and "every
    axis" are not offered, and a single 2-D row cannot show BatchNorm."""
    x, weight, bias = _inputs(*shape)
    wrong = _ln_mistakes(x, weight, bias, 1e-5)
    assert _axes(wrong) == axes
    assert any(d.startswith(_BATCH_NORM) for d in wrong) is batch_norm
    if batch_norm:  # tried first: BatchNorm's per-feature statistics explain the most
        assert next(iter(wrong)).startswith(_BATCH_NORM)


def test_the_axis_mistakes_compute_what_they_name():
    x, weight, bias = _inputs(3, 5, 8)
    wrong = _ln_mistakes(x, weight, bias, 1e-5)
    named = {name: d for d in wrong for name in _axes({d: None})}
    for name, dims in [
        ("the batch axis (dim 0)", (0,)),
        ("the time axis (dim 1)", (1,)),
        ("all of (T, d_model) together", (1, 2)),
        ("every axis at once", (0, 1, 2)),
    ]:
        torch.testing.assert_close(wrong[named[name]], _over(x, dims, weight, bias, 1e-5))


@pytest.mark.parametrize("shape", [(3, 5, 8), (6, 9)], ids=["3-D", "2-D"])
def test_the_batch_norm_mistake_is_torchs_batch_norm(shape):
    """One mean and variance per feature, over every other axis: what F.batch_norm
    computes in training mode on the (N, d_model) rows."""
    x, weight, bias = _inputs(*shape)
    wrong = _ln_mistakes(x, weight, bias, 1e-5)
    batch_norm = next(alt for d, alt in wrong.items() if d.startswith(_BATCH_NORM))
    rows = x.reshape(-1, shape[-1])
    want = F.batch_norm(rows, None, None, weight, bias, training=True, eps=1e-5)
    torch.testing.assert_close(batch_norm, want.reshape(shape))


def test_the_rms_norm_mistake_keeps_eps_inside_the_root():
    x, weight, bias = _inputs(4, 3, 6, scale=0.2)
    wrong = _ln_mistakes(x, weight, bias, 0.1)
    rms = next(alt for d, alt in wrong.items() if "that is RMSNorm" in d)
    want = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 0.1) * weight + bias
    torch.testing.assert_close(rms, want)


@pytest.mark.parametrize("eps, offered", [(1e-5, False), (1e-3, True), (0.1, True)])
def test_eps_fixed_at_the_default_is_offered_only_when_another_eps_is_asked(eps, offered):
    x, weight, bias = _inputs(4, 3, 6, scale=0.2)
    wrong = _ln_mistakes(x, weight, bias, eps)
    fixed = [alt for d, alt in wrong.items() if d.startswith(_EPS_FIXED)]
    assert len(fixed) == offered
    if offered:
        torch.testing.assert_close(fixed[0], _over(x, (-1,), weight, bias, 1e-5))


def _layer_norm(x, weight, bias, eps):
    """What an answer that is LayerNorm with this eps (one per row, or one for all) gives."""
    return _over(x, (-1,), weight, bias, eps)


@pytest.mark.parametrize(
    "scale, used, asked, shown",
    [(1.0, 1e-3, 1e-5, "0.001"), (1.0, 0.5, 0.1, "0.5"), (0.01, 1e-6, 1e-4, "1e-06")],
)
def test_another_eps_is_measured_and_named(scale, used, asked, shown):
    x, weight, bias = _inputs(4, 6, 8, scale=scale)
    got = _layer_norm(x, weight, bias, used)
    assert _eps_used(got, x, weight, bias, asked) == (
        f"your eps is {shown}, but eps={asked:g} was asked: use the constructor's argument, "
        "inside the square root, sqrt(var + eps)"
    )


def test_an_eps_within_a_tenth_of_the_one_asked_is_not_named():
    """1.05e-3 for 1e-3 is not reported as another eps: the values are reported instead."""
    x, weight, bias = _inputs(4, 6, 8, scale=0.03)
    got = _layer_norm(x, weight, bias, 1.05e-3)
    assert _eps_used(got, x, weight, bias, 1e-3) is None


@pytest.mark.parametrize("spread, named", [(0.2, False), (0.01, True)])
def test_an_eps_is_named_only_when_every_row_agrees_on_it(spread, named):
    """Rows normalised with eps 0.01 * (1 +- spread): 20% apart is no single eps; 1% is."""
    x, weight, bias = _inputs(4, 6, 8, scale=0.1)
    wobble = torch.linspace(-1, 1, 24, dtype=torch.float64).reshape(4, 6, 1)
    got = _layer_norm(x, weight, bias, 0.01 * (1 + spread * wobble))
    said = _eps_used(got, x, weight, bias, 1e-5)
    assert (said is not None) is named
    if named:
        assert said.startswith("your eps is 0.01, but eps=1e-05 was asked")


@pytest.mark.parametrize("scale, used", [(1.0, 1.0), (0.01, 1e-4)], ids=["unit", "tiny"])
def test_an_output_off_a_layer_norm_is_not_explained_as_another_eps(scale, used):
    """LayerNorm with another eps, then 0.2% noise: not a LayerNorm, whatever eps, and the
    tolerance follows the size of x (a tiny x is held to the same relative standard)."""
    x, weight, bias = _inputs(4, 6, 8, scale=scale)
    exact = _layer_norm(x, weight, bias, used)
    assert _eps_used(exact, x, weight, bias, 1e-5) is not None
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype)
    assert _eps_used(exact + 2e-3 * noise, x, weight, bias, 1e-5) is None


# ------------------------------------------------------------ EncoderLayer ----------


class ForwardArgumentsSwapped(Good):
    def forward(self, mask, x):
        return super().forward(x, mask)


class SequenceFirst(Good):
    """Follows torch's default (T, B, d_model) layout: x is transposed, never back."""

    def forward(self, x, mask=None):
        return super().forward(x.transpose(0, 1), mask)


class TorchStyleAttentionArguments(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, batch_first=True)


class AttentionGivenXOnce(Good):
    def attend(self, x, mask):
        return self.dropout1(self.self_attn(x, mask))


class MaskMultipliesX(Good):
    """The mask applied to x itself, to "zero the padding"."""

    def forward(self, x, mask=None):
        return super().forward(x if mask is None else x * mask, mask)


class FinalNormInPreLN(Good):
    """A stack's final LayerNorm written into the pre-LN layer."""

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        return self.norm2(out) if self.norm_first else out


class PreLNWithoutAttentionResidual(Good):
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = self.attend(self.norm1(x), mask)
        return x + self.feed(self.norm2(x))


class PreLNWithoutFeedForwardResidual(Good):
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = x + self.attend(self.norm1(x), mask)
        return self.feed(self.norm2(x))


class Norm2Twice(Good):
    def forward(self, x, mask=None):
        self.norm1, saved = self.norm2, self.norm1
        try:
            return super().forward(x, mask)
        finally:
            self.norm1 = saved


class _OwnFeedForward(nn.Module):
    """A learner's own feed-forward: linear1 -> activation -> dropout -> `second`."""

    activation = staticmethod(F.relu)

    def __init__(self, d_model, d_ff, dropout, first="linear1", second="linear2"):
        super().__init__()
        self.names = first, second
        setattr(self, first, nn.Linear(d_model, d_ff))
        setattr(self, second, nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        first, second = (getattr(self, name) for name in self.names)
        return second(self.dropout(self.activation(first(x))))


class _SiLUFeedForward(_OwnFeedForward):
    activation = staticmethod(F.silu)


def _with_ff(name, make_ff):
    """Good, with self.ff = make_ff(d_model, d_ff, dropout)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        Good.__init__(self, d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = make_ff(d_model, d_ff, dropout)

    return type(name, (Good,), {"__init__": __init__})


SecondLinearNamedOut = _with_ff(
    "SecondLinearNamedOut", lambda d, f, p: _OwnFeedForward(d, f, p, second="out")
)
FirstLinearNamedLinear = _with_ff(
    "FirstLinearNamedLinear", lambda d, f, p: _OwnFeedForward(d, f, p, first="linear")
)
SiLUFeedForward = _with_ff("SiLUFeedForward", _SiLUFeedForward)
SequentialFourTimesDModel = _with_ff(
    "SequentialFourTimesDModel",
    lambda d, f, p: nn.Sequential(
        nn.Linear(d, 4 * d), nn.ReLU(), nn.Dropout(p), nn.Linear(4 * d, d)
    ),
)
SequentialWithoutBias = _with_ff(  # linear2 without its bias
    "SequentialWithoutBias",
    lambda d, f, p: nn.Sequential(
        nn.Linear(d, f), nn.ReLU(), nn.Dropout(p), nn.Linear(f, d, bias=False)
    ),
)


class AttentionWithoutBias(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, bias=False)


class AttentionNamedAttention(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.attention = self.self_attn
        del self.self_attn

    def attend(self, x, mask):
        return self.dropout1(self.attention(x, x, x, mask))


class NormsNamedLn(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ln1, self.ln2 = self.norm1, self.norm2
        del self.norm1, self.norm2

    def forward(self, x, mask=None):
        self.norm1, self.norm2 = self.ln1, self.ln2
        return super().forward(x, mask)


class NormsWithoutAffine(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1 = nn.LayerNorm(d_model, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(d_model, elementwise_affine=False)


class TutorialNorm2(Good):
    """torch's LayerNorm for norm1, a tutorial's (x.std() + eps) for norm2."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), StdPlusEps(d_model)


class UnscaledAttention(MultiHeadAttention):
    """A learner's own attention that forgets to divide the scores by sqrt(d_k)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            split_heads(w(t), self.n_heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(-1), self.dropout, self.training)
        self.attn = weights.detach()
        return self.w_o(merge_heads(weights @ v))


class OwnUnscaledAttention(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = UnscaledAttention(d_model, n_heads, dropout)


_NAMES_MATTER = (
    "The names matter: the checker copies its weights into them, and lesson 08 reuses them"
)

ENC_MESSAGES = [
    (
        ForwardArgumentsSwapped,
        "your parameters come in the order (mask, x); the lesson's signature is "
        "forward(x, mask=None), and the notebooks pass the arguments in that order",
    ),
    (
        SequenceFirst,
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, no mask has shape "
        "(5, 2, 12), expected (2, 5, 12). It is (B, T, d_model)",
    ),
    (
        TorchStyleAttentionArguments,
        "on inputs d_model=12, n_heads=3, d_ff=20, dropout=0.1, norm_first=False your code "
        "raised TypeError: MultiHeadAttention.__init__() got an unexpected keyword argument "
        "'batch_first'. Your constructor's own signature is right; the error is in a call "
        "inside it: MultiHeadAttention(...) does not take those arguments. Check the "
        "signature of MultiHeadAttention",
    ),
    (
        AttentionGivenXOnce,
        "on inputs x (2, 5, 12) your code raised TypeError: MultiHeadAttention.forward() "
        "missing 1 required positional argument: 'value'. The layer is called as layer(x, "
        "mask=None): self-attention takes x as query, key and value, self.self_attn(x, x, "
        "x, mask)",
    ),
    (
        MaskMultipliesX,
        "on inputs x (2, 5, 12), mask (2, 1, 1, 5) your code raised RuntimeError: The size "
        "of tensor a (12) must match the size of tensor b (5) at non-singleton dimension 3. "
        "Check the shapes: x is (B, T, d_model); the mask arrives broadcastable to (B, h, "
        "T, T): pass it on to self.self_attn unchanged",
    ),
    (
        FinalNormInPreLN,
        "your pre-LN layer normalises its output (with norm2 again): a pre-LN layer returns the "
        "residual "
        "stream as it is, x + ff(norm2(x)); the one final LayerNorm belongs after the last "
        "layer of the whole stack (Transformer.encoder_norm), not in every layer",
    ),
    (
        PreLNWithoutAttentionResidual,
        "the attention sublayer has no residual connection: add its output to its input, "
        "x + dropout1(self_attn(...))",
    ),
    (
        PreLNWithoutFeedForwardResidual,
        "the feed-forward sublayer has no residual connection: add its output to its input, "
        "x + dropout2(ff(...))",
    ),
    (
        Norm2Twice,
        "norm2 is used for both sublayers: the attention sublayer has its own, norm1",
    ),
    (
        SecondLinearNamedOut,
        "self.ff.linear2 is missing: expected an nn.Linear(20, 12)",
    ),
    (
        FirstLinearNamedLinear,
        "self.ff.linear1 is missing: expected an nn.Linear(12, 20)",
    ),
    (
        SequentialFourTimesDModel,
        "self.ff should hold two linear layers, linear1 = nn.Linear(d_model, d_ff) and "
        "linear2 = nn.Linear(d_ff, d_model) (d_model=12, d_ff=20); found: Linear(12, 48), "
        "Linear(48, 12). Use FeedForward(d_model, d_ff, dropout)",
    ),
    (
        SequentialWithoutBias,
        "self.ff should hold two linear layers, linear1 = nn.Linear(d_model, d_ff) and "
        "linear2 = nn.Linear(d_ff, d_model) (d_model=12, d_ff=20); found: Linear(12, 20), "
        "Linear(20, 12). Use FeedForward(d_model, d_ff, dropout)",
    ),
    (
        AttentionWithoutBias,
        "self.self_attn.w_q maps 12 -> 12 features without a bias; expected "
        "nn.Linear(12, 12) with a bias",
    ),
    (
        AttentionNamedAttention,
        "your layer has no submodule `self_attn`: self.self_attn = MultiHeadAttention("
        f"d_model, n_heads, dropout). {_NAMES_MATTER}",
    ),
    (
        NormsNamedLn,
        f"your layer has no submodule `norm1`: self.norm1 = LayerNorm(d_model). {_NAMES_MATTER}",
    ),
    (
        NormsWithoutAffine,
        "self.norm1 has no parameter `weight` (the learned gain): LayerNorm learns a gain "
        "and a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
        "nn.Parameter(torch.zeros(d_model)) (parameters found: none)",
    ),
    (
        TutorialNorm2,
        "self.norm2 does not compute LayerNorm: fix your LayerNorm first (check.LayerNorm)",
    ),
    (
        SiLUFeedForward,
        "self.ff does not compute linear2(relu(linear1(x))): build it with "
        "FeedForward(d_model, d_ff, dropout)",
    ),
    (
        OwnUnscaledAttention,
        "self.self_attn does not compute multi-head attention: build it with "
        "MultiHeadAttention(d_model, n_heads, dropout) (lesson 04)",
    ),
]


@pytest.mark.parametrize(
    "answer, message", ENC_MESSAGES, ids=[answer.__name__ for answer, _ in ENC_MESSAGES]
)
def test_the_whole_encoder_layer_verdict(answer, message, verdict):
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is False
    assert printed == f"❌ EncoderLayer: {message}\n"


# ---------------------------------------------- EncoderLayer: the checker's helpers ----------


def _reference(norm_first: bool):
    return _random_reference(
        reference.EncoderLayer, torch.Generator().manual_seed(3), norm_first, 0.1
    )


_PARAMETERS = [
    *(f"self_attn.{w}.{kind}" for w in ("w_q", "w_k", "w_v", "w_o") for kind in ("weight", "bias")),
    "ff.linear1.weight", "ff.linear1.bias", "ff.linear2.weight", "ff.linear2.bias",
    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
]  # fmt: skip


def test_every_parameter_is_paired_with_the_references_by_the_courses_name():
    module, ref = Good(12, 3, 20), _reference(False)
    pairs = _pairs(module, ref)
    assert list(pairs) == _PARAMETERS
    mine, theirs = dict(module.named_parameters()), dict(ref.named_parameters())
    for name, (a, b) in pairs.items():
        assert a is mine[name] and b is theirs[name], name


def test_a_sequential_feed_forwards_linears_are_paired_by_their_shapes():
    """nn.Sequential(Linear(d_model, d_ff), ReLU, Dropout, Linear(d_ff, d_model)): its
    layers 0 and 3 are the reference's linear1 and linear2."""
    module = SequentialFeedForward(12, 3, 20)
    ref = _reference(False)
    pairs = _pairs(module, ref)
    assert list(pairs) == _PARAMETERS
    for i, name in ((0, "linear1"), (3, "linear2")):
        for kind in ("weight", "bias"):
            mine, theirs = pairs[f"ff.{name}.{kind}"]
            assert mine is getattr(module.ff[i], kind)
            assert theirs is getattr(getattr(ref.ff, name), kind)


@pytest.mark.parametrize("norm_first, arrangement", [(False, "post"), (True, "pre")])
def test_with_no_mistake_switched_on_the_variant_is_the_reference(norm_first, arrangement):
    """And the mask is passed on as it is, inverted or dropped, as asked."""
    ref = _reference(norm_first)
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 12, generator=gen)
    mask = (torch.arange(5) < torch.tensor([5, 3])[:, None])[:, None, None, :]
    with torch.no_grad():
        got = _enc_variant(ref, x, mask, arrangement)
        torch.testing.assert_close(got, ref(x, mask))
        assert not torch.allclose(got, ref(x))  # the mask changes sentence 1's tokens
        inverted = _enc_variant(ref, x, mask, arrangement, mask_mode="inverted")
        torch.testing.assert_close(inverted, ref(x, ~mask), equal_nan=True)
        dropped = _enc_variant(ref, x, mask, arrangement, mask_mode="dropped")
        torch.testing.assert_close(dropped, ref(x))


def test_own_parts_with_the_courses_names_pass(verdict):
    """A learner's own feed-forward and LayerNorm, named as the course names them."""
    own_ff = _with_ff("OwnFeedForward", _OwnFeedForward)

    class OwnParts(own_ff):
        def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
            super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
            self.norm1, self.norm2 = VarMean(d_model), VarMean(d_model)

    passed, printed = verdict(check.EncoderLayer, OwnParts)
    assert passed is True, printed
