"""The EncoderLayer checker's shared machinery (course/check/layers.py, the part the
DecoderLayer checker reuses), held to whole verdicts and exact helper results (issue 7:
mutation testing showed cases, dropout diagnoses and messages no test pinned down).

Each wrong answer below is one a learner writes; its whole verdict is compared, so a
message that loses a word, a number or the case it names fails. Where a diagnosis can
only be reached by calling the checker's own helpers (a check that an earlier check of
the full checker always pre-empts), the helper is called directly with the learner's
layer or with crafted tensors, and its exact result is asserted.
"""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from test_check_layers import Good, NoResiduals, RateAsKeepProbability
from test_check_transformer import Good as GoodDecoderLayer
from torch import nn

from course import check
from course import layers as reference
from course.check import layers
from course.check._framework import Mistake, NotImplementedYet, generator, randn
from course.layers import FeedForward
from course.multihead import MultiHeadAttention, merge_heads, split_heads

ENC = "EncoderLayer(12, 3, 20, 0.3, False)"  # the layer the dropout checks build
PASSED = (
    "✅ EncoderLayer: passed (8 cases, post-LN and pre-LN: no mask, padding, padding & "
    "causal, a batch of one in float64, non-contiguous; values and gradients of x and every "
    "parameter; the defaults; dropout only while training, on each sublayer's output, in the "
    "feed-forward and on the attention weights, at the rate asked).\n"
)


# ------------------------------------------------ more correct answers ----------


class MaskReshapedToTheBatch(Good):
    """Accepts a (B, T) padding mask too: reshapes any mask by x's batch size and length.
    Right for every mask the lesson uses, (B, 1, 1, T) and (B, 1, T, T); it relies on the
    mask having x's batch size, as the checker's batch of one does (padding[1:])."""

    def attend(self, x, mask):
        if mask is not None:
            mask = mask.reshape(x.shape[0], 1, -1, x.shape[1])
        return super().attend(x, mask)


class MatmulFeedForward(FeedForward):
    """linear2 applied by hand with its parameters: linear2 is never called."""

    def forward(self, x):
        hidden = self.dropout(F.relu(self.linear1(x)))
        return hidden @ self.linear2.weight.T + self.linear2.bias


class FeedForwardByHand(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = MatmulFeedForward(d_model, d_ff, dropout)


@pytest.mark.parametrize("answer", [Good, MaskReshapedToTheBatch, FeedForwardByHand])
def test_correct_encoder_layers_pass_with_the_whole_verdict(answer, verdict):
    assert verdict(check.EncoderLayer, answer) == (True, PASSED)


# ---------------------------------------- more wrong answers, each verdict in full ----------


class ZeroesPaddedPositions(Good):
    """Zeroes the output at the padded positions (the mask's last row): the checker compares
    every position, padded or not, with the reference."""

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        return out if mask is None else out * mask[:, 0, -1, :, None]


class PaddingRowOnly(Good):
    """ "An encoder attends both ways": keeps only the padding part of the mask, its last
    row, and so drops the causal part of a (B, 1, T, T) mask."""

    def attend(self, x, mask):
        return super().attend(x, None if mask is None else mask[..., -1:, :])


class ReturnsTheFirstToken(Good):
    """Returns the first position only, as a classifier reads a [CLS] token."""

    def forward(self, x, mask=None):
        return super().forward(x, mask)[:, 0]


class MaskFirst(Good):
    def forward(self, mask, x):
        return super().forward(x, mask)


class LayerNorm(nn.Module):  # the notebook's LayerNorm: __init__ written, forward still a stub
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        # YOUR CODE HERE
        raise NotImplementedError


class CallsUnfinishedLayerNormForward(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm1 = LayerNorm(d_model)


class AuxiliaryLossWhileTraining(Good):
    """Returns (output, an auxiliary loss) in training mode, as some MoE layers do."""

    def forward(self, x, mask=None):
        out = super().forward(x, mask)
        return (out, out.pow(2).mean()) if self.training else out


class HandWrittenDropout(Good):
    """Dropout written by hand on both sublayers' outputs (self.drop); the variants below
    each get one thing about it wrong."""

    def drop(self, h):
        return self.dropout1(h)

    def attend(self, x, mask):
        return self.drop(self.self_attn(x, x, x, mask))

    def feed(self, x):
        return self.drop(self.ff(x))


class KeepMaskDrawnWithTheRate(HandWrittenDropout):
    """torch.bernoulli(p) as the *keep* mask, p being the drop rate: keeps 30%, not 70%."""

    def drop(self, h):
        p = self.dropout1.p
        if not self.training or p == 0:
            return h
        return h * torch.bernoulli(torch.full_like(h, p)) / (1 - p)


class KeptValuesTimesOneMinusP(HandWrittenDropout):
    """Multiplies the kept values by (1 - p), as the original paper scales at test time,
    instead of dividing them by it."""

    def drop(self, h):
        if not self.training:
            return h
        p = self.dropout1.p
        return h * (torch.rand_like(h) >= p) * (1 - p)


class AttentionOutputDroppedTwice(Good):
    def attend(self, x, mask):
        return self.dropout1(super().attend(x, mask))


class InputDroppedFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(F.relu(self.linear1(self.dropout(x))))


class FeedForwardDropsItsInput(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = InputDroppedFeedForward(d_model, d_ff, dropout)


class DropoutAfterLinear2Too(Good):
    """Dropout after the ReLU and again after linear2, as in some MLP blocks."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
            nn.Dropout(dropout),
        )


class ScoresDroppedAttention(MultiHeadAttention):
    """Dropout on the scores, before the softmax, instead of on the weights after it."""

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.w_q(query), self.n_heads)
        k = split_heads(self.w_k(key), self.n_heads)
        v = split_heads(self.w_v(value), self.n_heads)
        scores = F.dropout(q @ k.transpose(-2, -1) / self.d_k**0.5, self.dropout, self.training)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        self.attn = weights.detach()
        return self.w_o(merge_heads(weights @ v))


class DropoutOnTheScores(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = ScoresDroppedAttention(d_model, n_heads, dropout)


class PreLNWithoutAttentionDropout(Good):
    """Two branches; the pre-LN one forgets dropout1 on the attention's output."""

    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, mask)
        return x + self.feed(self.norm2(x))


_BEFORE = (
    ". Dropout belongs on each sublayer's output, before it is added to x (and inside the "
    "attentions and the feed-forward), not on what a sublayer reads"
)

MESSAGES = {
    ZeroesPaddedPositions: (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, a padding mask (B, 1, "
        "1, T) is not right: at index (1, 3, 9) you have 0, expected 2.087 (largest difference "
        "2.09)"
    ),
    PaddingRowOnly: (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, padding & causal "
        "masks (B, 1, T, T) is not right: at index (0, 1, 3) you have -0.8682, expected 1.469 "
        "(largest difference 2.34)"
    ),
    ReturnsTheFirstToken: (
        "the output of EncoderLayer(12, 3, 20, 0.1, False) in eval mode, no mask has shape "
        "(2, 12), expected (2, 5, 12). It is (B, T, d_model)"
    ),
    MaskFirst: (
        "your parameters come in the order (mask, x); the lesson's signature is forward(x, "
        "mask=None), and the notebooks pass the arguments in that order"
    ),
    AuxiliaryLossWhileTraining: (
        "forward returned a tuple of 2 things on EncoderLayer(12, 3, 20, 0.0, False) in "
        "training mode: return only the output tensor"
    ),
    KeepMaskDrawnWithTheRate: (
        f"{ENC} (post-LN) in training mode: the attention sublayer's output: with dropout=0.3 "
        "you dropped 70% of the values; about 30% should go. Pass the constructor's rate on, "
        "not a fixed number"
    ),
    KeptValuesTimesOneMinusP: (
        f"{ENC} (post-LN) in training mode: the attention sublayer's output: the kept values "
        "are multiplied by 0.7, so they shrink; dropout divides them by 1 - p = 0.7, so that "
        "the expected value stays the same: multiply by 1 / (1 - p) (nn.Dropout and F.dropout "
        "do it for you)"
    ),
    AttentionOutputDroppedTwice: (
        f"{ENC} (post-LN) in training mode: the attention sublayer's output: the kept values "
        "are scaled by 2.04, which is dropout at p=0.51, but dropout=0.3 was asked: pass the "
        "constructor's rate on, not a fixed number"
    ),
    FeedForwardDropsItsInput: (
        f"{ENC}: self.ff's hidden layer (what linear2 receives): with dropout=0.3 each entry "
        "should be either 0 or value / (1 - p). Dropout in the feed-forward goes after the "
        "ReLU, before linear2"
    ),
    DropoutAfterLinear2Too: (
        f"{ENC}: self.ff changes linear2's output in training mode (a dropout after "
        "linear2?): inside the feed-forward, dropout goes after the ReLU only, "
        "linear2(dropout(relu(linear1(x)))); the layer drops the sublayer's output itself"
    ),
    DropoutOnTheScores: (
        f"{ENC}: self.self_attn.attn: nothing is dropped at p=0.3. Dropout belongs on these "
        "attention weights, after the softmax, and the dropped weights are the ones that "
        "multiply v"
    ),
    PreLNWithoutAttentionDropout: (
        "EncoderLayer(12, 3, 20, 0.3, True) (pre-LN) in training mode: the attention "
        "sublayer's output is not dropped: apply dropout to it before adding it to x, x + "
        "dropout1(sublayer(...))"
    ),
    RateAsKeepProbability: (
        "EncoderLayer(12, 3, 20, 0.0, False) in training mode changes the output although "
        "dropout=0.0, and identically on every call, so not at random: is the rate used as "
        "the probability of keeping? nn.Dropout(1 - dropout) drops everything at dropout=0.0; "
        "nn.Dropout(dropout) drops each value with probability dropout"
    ),
}


@pytest.mark.parametrize("answer", MESSAGES, ids=[a.__name__ for a in MESSAGES])
def test_more_encoder_layer_mistakes_are_named_in_full(answer, verdict):
    passed, printed = verdict(check.EncoderLayer, answer)
    assert passed is False
    assert printed == f"❌ EncoderLayer: {MESSAGES[answer]}\n"


def test_a_layer_norm_whose_forward_is_a_stub_is_named_with_its_method(verdict):
    passed, printed = verdict(check.EncoderLayer, CallsUnfinishedLayerNormForward)
    assert passed is False
    assert printed == (
        "⏳ EncoderLayer: your code calls LayerNorm.forward, which is not implemented yet (it "
        "still raises NotImplementedError). Finish LayerNorm.forward first, run its cell, then "
        "this one again.\n"
    )


def test_the_verdict_ignores_the_notebooks_random_state_and_leaves_it_alone(verdict):
    """Dropout draws inside the checker come from its own seed: whatever the notebook seeded,
    the same verdict (here a share of dropped values, drawn at random); and the notebook's
    random stream goes on as if the checker had not run."""
    expected = (False, f"❌ EncoderLayer: {MESSAGES[KeepMaskDrawnWithTheRate]}\n")
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        assert verdict(check.EncoderLayer, KeepMaskDrawnWithTheRate) == expected
        after_the_checker = torch.rand(3)
        torch.manual_seed(seed)
        assert torch.equal(after_the_checker, torch.rand(3))


class DropoutMovedOntoMemory(GoodDecoderLayer):
    """dropout1 taken off the self-attention's output and put on memory instead: the
    sublayers are measured in order, so the self-attention's undropped output is named
    first (the memory is looked at when the cross-attention is measured)."""

    def attend_self(self, h, tgt_mask):
        return self.self_attn(h, h, h, tgt_mask)

    def attend_memory(self, h, memory, memory_mask):
        kept = self.dropout1(memory)
        return self.dropout2(self.cross_attn(h, kept, kept, memory_mask))


def test_each_sublayer_is_measured_with_only_its_own_and_earlier_inputs_checked(verdict):
    passed, printed = verdict(check.DecoderLayer, DropoutMovedOntoMemory)
    assert passed is False
    assert printed == (
        "❌ DecoderLayer: DecoderLayer(12, 3, 20, 0.3, False) (post-LN) in training mode: the "
        "masked self-attention sublayer's output is not dropped: apply dropout to it before "
        "adding it to x, x + dropout1(sublayer(...))\n"
    )


# ------------------------------------------------- the helpers, called directly ----------


def test_a_part_that_cannot_run_alone_is_skipped_and_the_first_wrong_one_named():
    ref = reference.EncoderLayer(12, 3, 20, 0.0).eval()
    module = reference.EncoderLayer(12, 3, 20, 0.0).eval()
    module.load_state_dict(ref.state_dict())
    with torch.no_grad():
        module.ff.linear2.bias += 1.0  # the feed-forward is wrong, all else right
    z = torch.randn(2, 5, 12, generator=generator(0))
    parts = [
        ("norm1 cannot run alone", lambda m: m.norm1(z, z)),  # TypeError: skipped
        ("norm1 gives a tuple", lambda m: (m.norm1(z),)),  # not a tensor: nothing to say
        ("norm2 is right", lambda m: m.norm2(z)),
        ("ff is wrong", lambda m: m.ff(z)),
        ("self_attn is right, but comes after", lambda m: m.self_attn(z, z, z)),
    ]
    assert layers._first_wrong_part(module, ref, parts) == "ff is wrong"
    assert layers._first_wrong_part(ref, ref, parts) is None


def forward(x):  # a stub that is a function, not a method: there is no `self` to name it by
    # YOUR CODE HERE
    raise NotImplementedError


def test_a_stub_function_named_forward_keeps_its_own_name():
    with pytest.raises(NotImplementedYet) as raised:
        try:
            forward(torch.zeros(1))
        except NotImplementedError:
            raise NotImplementedYet("forward") from None
    stub = raised.value
    assert layers._named_stub(stub) is stub
    assert stub.culprit == "forward"


def _built_with_the_defaults(answer):
    gen = generator(0)
    module, ref, _, shown = layers._build(layers._ENCODER, answer, False, 0.1, gen, defaults=True)
    return module, ref, shown, randn(gen, 2, 5, 12)


def test_the_defaults_check_names_a_wrong_shape():
    module, ref, shown, x = _built_with_the_defaults(ReturnsTheFirstToken)
    with pytest.raises(Mistake) as mistake:
        layers._expect_defaults(layers._ENCODER, module, ref, shown, x)
    assert str(mistake.value) == (
        "the output of EncoderLayer(12, 3, 20) has shape (2, 12), expected (2, 5, 12)"
    )


def test_the_defaults_check_names_wrong_values_that_are_not_pre_ln():
    module, ref, shown, x = _built_with_the_defaults(NoResiduals)
    with pytest.raises(Mistake) as mistake:
        layers._expect_defaults(layers._ENCODER, module, ref, shown, x)
    assert str(mistake.value) == (
        "the output of EncoderLayer(12, 3, 20) (the default dropout and norm_first) is not "
        "right: at index (1, 0, 1) you have 1.231, expected -2.585 (largest difference 3.82)"
    )


def test_the_defaults_check_passes_the_paper_post_ln():
    module, ref, shown, x = _built_with_the_defaults(Good)
    assert layers._expect_defaults(layers._ENCODER, module, ref, shown, x) is None


def _seeded_call(function, *args):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return function(*args)


def test_every_run_of_the_dropout_check_is_named_by_its_layer_and_mode():
    """What a learner's forward returns on each run is judged under that run's name (a
    tuple returned in one mode is reported with it)."""
    names = []

    def named_run(module, x, mask, what):
        names.append(what)
        return layers._run(module, x, mask, what)

    layer = dataclasses.replace(layers._ENCODER, run=named_run)
    x = randn(generator(1), 4, 16, 12)
    _seeded_call(layers._expect_dropout_while_training, layer, Good, generator(0), False, 0.3, x)
    assert names == [
        "EncoderLayer(12, 3, 20, 0.0, False) in training mode",
        f"{ENC} in eval mode",
        f"{ENC} in eval mode",
        f"{ENC} in training mode",
        f"{ENC} in training mode",
    ]
    names.clear()  # a change at dropout=0.0: a second call tells a fixed mask from chance
    with pytest.raises(Mistake, match="identically on every call"):
        _seeded_call(
            layers._expect_dropout_while_training,
            layer,
            RateAsKeepProbability,
            generator(0),
            False,
            0.3,
            x,
        )
    assert names == ["EncoderLayer(12, 3, 20, 0.0, False) in training mode"] * 2


class SublayersScaledInEval(Good):
    """Scales each sublayer's output by (1 - p) in eval mode, as the original dropout paper
    does at test time, although nn.Dropout already rescales while training. (The full
    checker names it in its eval cases first, by the values.)"""

    def attend(self, x, mask):
        out = super().attend(x, mask)
        return out if self.training else out * (1 - self.dropout1.p)

    def feed(self, x):
        out = super().feed(x)
        return out if self.training else out * (1 - self.dropout2.p)


def test_an_eval_output_that_is_off_but_the_same_on_each_call_is_named():
    x = randn(generator(1), 4, 16, 12)
    with pytest.raises(Mistake) as mistake:
        _seeded_call(
            layers._expect_dropout_while_training,
            layers._ENCODER,
            SublayersScaledInEval,
            generator(0),
            False,
            0.3,
            x,
        )
    assert str(mistake.value) == (
        f"{ENC}: the output changes in eval mode. Dropout acts only while training: use "
        "nn.Dropout modules, or F.dropout(x, p, training=self.training)"
    )


# _expect_dropped(dropped, kept_all, p, what, where): each entry of `dropped` 0 or
# kept_all / (1 - p), about p of them 0; the entries where kept_all is 0 tell nothing.


def _dropped(kept_all, dropped_at, scale):
    dropped = kept_all * scale
    dropped[dropped_at] = 0.0
    return dropped


SMALL = torch.linspace(0.05, 0.95, 40, dtype=torch.float64)  # |values| < 1, e.g. after a ReLU
EVERY_THIRD = torch.arange(40) % 3 == 0  # 14 of 40 dropped: 35%, within 7% of p = 0.3
NOT_RESCALED = (
    "what: the values that survive dropout are not rescaled: multiply them by 1 / (1 - p) "
    "(nn.Dropout and F.dropout do it for you)"
)


def test_dropped_values_correctly_rescaled_pass():
    dropped = _dropped(SMALL, EVERY_THIRD, 1 / 0.7)
    assert layers._expect_dropped(dropped, SMALL, 0.3, "what", "where") is None


def test_small_values_that_survive_dropout_unrescaled_are_named():
    """Kept values below 1 differ from their rescaled selves by less than 1: the tolerance
    on 'value / (1 - p)' is absolute 1e-5, not a matter of magnitude."""
    with pytest.raises(Mistake) as mistake:
        layers._expect_dropped(_dropped(SMALL, EVERY_THIRD, 1.0), SMALL, 0.3, "what", "where")
    assert str(mistake.value) == NOT_RESCALED


def test_one_value_dropped_and_one_kept_unrescaled_is_named():
    """The smallest case: a single kept value is its own one scale, 1."""
    kept_all = torch.tensor([1.0, 2.0])
    with pytest.raises(Mistake) as mistake:
        layers._expect_dropped(torch.tensor([0.0, 2.0]), kept_all, 0.5, "what", "where")
    assert str(mistake.value) == NOT_RESCALED


def test_kept_values_some_rescaled_some_not_get_the_general_rule():
    """No one scale: neither 'not rescaled' nor 'scaled by ...' (the first kept value is
    the unrescaled one, the others are rescaled right)."""
    dropped = _dropped(SMALL, EVERY_THIRD, 1 / 0.7)
    dropped[1] = SMALL[1]
    with pytest.raises(Mistake) as mistake:
        layers._expect_dropped(dropped, SMALL, 0.3, "what", "where")
    assert str(mistake.value) == (
        "what: with dropout=0.3 each entry should be either 0 or value / (1 - p). where"
    )


def test_the_share_dropped_counts_only_the_values_that_tell():
    """Zeros before dropout (a ReLU's) tell nothing: one informative value, dropped, is
    100% dropped, not 1 in 3."""
    kept_all = torch.tensor([0.0, 0.0, 3.0])
    with pytest.raises(Mistake) as mistake:
        layers._expect_dropped(torch.zeros(3), kept_all, 0.3, "what", "where")
    assert str(mistake.value) == (
        "what: with dropout=0.3 you dropped 100% of the values; about 30% should go. Pass the "
        "constructor's rate on, not a fixed number"
    )


# _expect_inputs_kept: a tensor a sublayer was given that is the input with zeros in it and
# the rest scaled by one constant is the input dropped.

X = randn(generator(2), 4, 16, 12)
HOLES = torch.rand(4, 16, 12, generator=generator(3)) < 0.3


def test_the_input_dropped_before_the_attention_is_named():
    dropped_x = torch.where(HOLES, 0.0, X / 0.7)
    with pytest.raises(Mistake) as mistake:
        layers._expect_inputs_kept(layers._ENCODER, {"self_attn": [dropped_x] * 3}, 0, (X,), "what")
    assert str(mistake.value) == f"what: dropout is applied to x before the attention{_BEFORE}"


def test_an_input_with_zeros_but_no_one_scale_is_not_called_dropped():
    uneven = 1.0 + 0.5 * torch.rand(4, 16, 12, generator=generator(4))  # 1 to 1.5
    changed = torch.where(HOLES, 0.0, X * uneven)
    seen = {"self_attn": [changed] * 3}
    assert layers._expect_inputs_kept(layers._ENCODER, seen, 0, (X,), "what") is None


def test_only_the_sublayers_up_to_the_measured_one_are_looked_at():
    dropped_x = torch.where(HOLES, 0.0, X / 0.7)
    seen = {"self_attn": [X] * 3, "ff": [dropped_x]}
    assert layers._expect_inputs_kept(layers._ENCODER, seen, 0, (X,), "what") is None
    with pytest.raises(Mistake, match="dropout is applied to x before the feed-forward"):
        layers._expect_inputs_kept(layers._ENCODER, seen, 1, (X,), "what")


class SumRescaledNothingDropped(Good):
    """Post-LN with dropout's 1 / (1 - p) applied by hand to x + sublayer in training mode,
    but nothing zeroed: a constant scale alone is not 'dropout after the residual'."""

    def forward(self, x, mask=None):
        scale = 1 / (1 - self.dropout1.p) if self.training else 1.0
        x = self.norm1((x + self.self_attn(x, x, x, mask)) * scale)
        return self.norm2((x + self.ff(x)) * scale)


def test_a_rescaled_sum_with_nothing_zeroed_is_nothing_dropped():
    gen = generator(5)
    x, value = randn(gen, 4, 16, 12), randn(gen, 4, 16, 12)
    with pytest.raises(Mistake) as mistake:
        layers._expect_residual_dropout(
            layers._ENCODER, SumRescaledNothingDropped, gen, False, 0.3, value, x
        )
    assert str(mistake.value) == (
        f"{ENC} (post-LN) in training mode: the attention sublayer's output: nothing is dropped "
        "at dropout=0.3 in training mode. Drop it before adding it to x"
    )
