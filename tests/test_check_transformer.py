"""The lesson 08 checker accepts every correct DecoderLayer and names each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.layers import EncoderLayer, FeedForward, LayerNorm
from course.multihead import MultiHeadAttention


class Good(nn.Module):
    """A correct layer, written the lesson's way; the mistakes below each change one thing."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def attend_self(self, h, tgt_mask):
        return self.dropout1(self.self_attn(h, h, h, tgt_mask))

    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, memory, memory, memory_mask))

    def feed(self, h):
        return self.dropout3(self.ff(h))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self.attend_self(self.norm1(x), tgt_mask)
            x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
            return x + self.feed(self.norm3(x))
        x = self.norm1(x + self.attend_self(x, tgt_mask))
        x = self.norm2(x + self.attend_memory(x, memory, memory_mask))
        return self.norm3(x + self.feed(x))


# ------------------------------------------------------ correct alternatives ----------


class SublayerHelper(Good):
    """One helper for all three sublayers, lambdas for the attentions, masks by keyword."""

    def sublayer(self, x, norm, fn, drop):
        if self.norm_first:
            return x + drop(fn(norm(x)))
        return norm(x + drop(fn(x)))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.sublayer(
            x, self.norm1, lambda h: self.self_attn(h, h, h, mask=tgt_mask), self.dropout1
        )
        x = self.sublayer(
            x,
            self.norm2,
            lambda h: self.cross_attn(query=h, key=memory, value=memory, mask=memory_mask),
            self.dropout2,
        )
        return self.sublayer(x, self.norm3, self.ff, self.dropout3)


class KeywordsInAnyOrder(Good):
    """Every attention argument by keyword, none in the signature's order."""

    def attend_self(self, h, tgt_mask):
        return self.dropout1(self.self_attn(mask=tgt_mask, value=h, key=h, query=h))

    def attend_memory(self, h, memory, memory_mask):
        attended = self.cross_attn(value=memory, mask=memory_mask, query=h, key=memory)
        return self.dropout2(attended)


class LoopOverSublayers(nn.Module):
    """The three sublayers as a list walked in a loop; torch's nn.LayerNorm; F.dropout;
    the feed-forward an nn.Sequential; the masks named src_mask-style."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.pre, self.p = norm_first, dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model)
        )
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))

    def forward(self, y, enc_out, self_mask=None, cross_mask=None):
        steps = [
            (self.norm1, lambda h: self.self_attn(h, h, h, self_mask)),
            (self.norm2, lambda h: self.cross_attn(h, enc_out, enc_out, cross_mask)),
            (self.norm3, self.ff),
        ]
        for norm, fn in steps:
            if self.pre:
                y = y + F.dropout(fn(norm(y)), self.p, self.training)
            else:
                y = norm(y + F.dropout(fn(y), self.p, self.training))
        return y


class OwnFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.drop(torch.clamp(self.linear1(x), min=0)))


class TwoBranchesOwnParts(nn.Module):
    """Written out without helpers, both arrangements as two branches; the learner's own
    feed-forward; the residual added on the other side; one shared nn.Dropout."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = OwnFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (
            LayerNorm(d_model),
            LayerNorm(d_model),
            LayerNorm(d_model),
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = self.drop(self.self_attn(h, h, h, tgt_mask)) + x
            h = self.norm2(x)
            x = self.drop(self.cross_attn(h, memory, memory, memory_mask)) + x
            return self.drop(self.ff(self.norm3(x))) + x
        a = self.self_attn(x, x, x, tgt_mask)
        x = self.norm1(self.drop(a) + x)
        c = self.cross_attn(x, memory, memory, memory_mask)
        x = self.norm2(self.drop(c) + x)
        return self.norm3(self.drop(self.ff(x)) + x)


class BuiltOnTheEncoderLayer(EncoderLayer):
    """Lesson 07's EncoderLayer, extended: its self_attn, ff, norm1, norm2, dropout1 and
    dropout2 reused, the cross-attention added in between (norm2 and norm3 renamed)."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm3 = LayerNorm(d_model)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        def cross(h):
            return self.dropout3(self.cross_attn(h, memory, memory, memory_mask))

        if self.norm_first:
            x = x + self._attend(self.norm1(x), tgt_mask)
            x = x + cross(self.norm2(x))
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._attend(x, tgt_mask))
        x = self.norm2(x + cross(x))
        return self.norm3(x + self._feed_forward(x))


RIGHT = [
    Good,
    SublayerHelper,
    KeywordsInAnyOrder,
    LoopOverSublayers,
    TwoBranchesOwnParts,
    BuiltOnTheEncoderLayer,
]


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_decoder_layer_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.DecoderLayer, answer)
    assert passed is True and "✅ DecoderLayer: passed" in printed, printed


# ------------------------------------------------------------ wrong answers ----------


class Stub(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class ForwardStub(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class CausalMaskMissing(Good):
    def attend_self(self, h, tgt_mask):
        return super().attend_self(h, None)


class TgtMaskInverted(Good):
    def attend_self(self, h, tgt_mask):
        return super().attend_self(h, None if tgt_mask is None else ~tgt_mask)


class CrossAttentionGivenTgtMask(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, tgt_mask)  # <- tgt_mask as the memory mask


class PreLNWithAFinalNorm(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        out = super().forward(x, memory, tgt_mask, memory_mask)
        return self.norm3(out) if self.norm_first else out  # <- norm3 once more on the way out


class OwnCausalMask(Good):
    def attend_self(self, h, tgt_mask):
        T = h.shape[1]
        return super().attend_self(h, torch.ones(T, T, dtype=torch.bool).tril())


class CrossKeysFromDecoder(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, h, h, memory_mask))


class CrossOnlyKeysFromDecoder(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(h, h, memory, memory_mask))


class CrossQueriesFromMemory(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(memory, h, h, memory_mask))


class CrossQueriesAndKeysFromMemory(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.cross_attn(memory, memory, h, memory_mask))


class MemoryMaskIgnored(Good):
    def attend_memory(self, h, memory, memory_mask):
        return super().attend_memory(h, memory, None)


class MemoryMaskInverted(Good):
    def attend_memory(self, h, memory, memory_mask):
        return super().attend_memory(h, memory, None if memory_mask is None else ~memory_mask)


class MasksSwapped(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, memory_mask, tgt_mask)


class MaskArgumentsInAnotherOrder(Good):
    def forward(self, x, memory, memory_mask=None, tgt_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask)


class CrossBeforeSelf(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
            x = x + self.attend_self(self.norm1(x), tgt_mask)
            return x + self.feed(self.norm3(x))
        x = self.norm2(x + self.attend_memory(x, memory, memory_mask))
        x = self.norm1(x + self.attend_self(x, tgt_mask))
        return self.norm3(x + self.feed(x))


class FeedForwardBeforeCross(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.norm1(x + self.attend_self(x, tgt_mask))
        x = self.norm2(x + self.feed(x))
        return self.norm3(x + self.attend_memory(x, memory, memory_mask))


class NoResidualAroundCross(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self.attend_self(self.norm1(x), tgt_mask)
            x = self.attend_memory(self.norm2(x), memory, memory_mask)
            return x + self.feed(self.norm3(x))
        x = self.norm1(x + self.attend_self(x, tgt_mask))
        x = self.norm2(self.attend_memory(x, memory, memory_mask))
        return self.norm3(x + self.feed(x))


class NoResidualAroundSelf(Good):
    def attend_self(self, h, tgt_mask):
        return super().attend_self(h, tgt_mask) - h  # the caller adds h back: no residual


class NoResidualAroundFeedForward(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.norm1(x + self.attend_self(x, tgt_mask))
        x = self.norm2(x + self.attend_memory(x, memory, memory_mask))
        return self.norm3(self.feed(x))


class AlwaysPostLN(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, False)


class AlwaysPreLN(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, True)


class PreLNByDefault(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=True):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)


class NormsInsideTheResidual(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = x + self.norm1(self.attend_self(x, tgt_mask))
        x = x + self.norm2(self.attend_memory(x, memory, memory_mask))
        return x + self.norm3(self.feed(x))


class PreLNResidualFromNormed(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        x = self.norm1(x)
        x = x + self.attend_self(x, tgt_mask)
        x = self.norm2(x)
        x = x + self.attend_memory(x, memory, memory_mask)
        x = self.norm3(x)
        return x + self.feed(x)


class PreLNNormalisesMemory(Good):
    def attend_memory(self, h, memory, memory_mask):
        if self.norm_first:
            memory = self.norm2(memory)
        return super().attend_memory(h, memory, memory_mask)


class PreLNCrossOnRawX(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        x = x + self.attend_self(self.norm1(x), tgt_mask)
        x = x + self.attend_memory(x, memory, memory_mask)
        return x + self.feed(self.norm3(x))


class PreLNFeedForwardOnRawX(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if not self.norm_first:
            return super().forward(x, memory, tgt_mask, memory_mask)
        x = x + self.attend_self(self.norm1(x), tgt_mask)
        x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
        return x + self.feed(x)


class CrossReadsTheLayerInput(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        h = self.norm1(x + self.attend_self(x, tgt_mask))
        h = self.norm2(h + self.attend_memory(x, memory, memory_mask))
        return self.norm3(h + self.feed(h))


class NormsTwoAndThreeSwapped(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        self.norm2, self.norm3 = self.norm3, self.norm2
        try:
            return super().forward(x, memory, tgt_mask, memory_mask)
        finally:
            self.norm2, self.norm3 = self.norm3, self.norm2


class Norm3NeverUsed(Good):
    def feed(self, h):
        return super().feed(h)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        self.norm3, saved = self.norm2, self.norm3
        try:
            return super().forward(x, memory, tgt_mask, memory_mask)
        finally:
            self.norm3 = saved


class SharedNorm(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.norm3 = self.norm1


class OneAttentionForBoth(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = self.self_attn


class CrossWithSelfAttnsWeights(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.dropout2(self.self_attn(h, memory, memory, memory_mask))


class SelfAttentionReadsMemory(Good):
    def attend_self(self, h, tgt_mask):
        return self.dropout1(self.self_attn(h, self._memory, self._memory, tgt_mask))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        self._memory = memory
        return super().forward(x, memory, tgt_mask, memory_mask)


class NoReLU(Good):
    def feed(self, h):
        return self.dropout3(self.ff.linear2(self.ff.linear1(h)))


class MemoryDetached(Good):
    def attend_memory(self, h, memory, memory_mask):
        return super().attend_memory(h, memory.detach(), memory_mask)


class ForwardUnderNoGrad(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        with torch.no_grad():
            return super().forward(x, memory, tgt_mask, memory_mask)


class AlwaysFloat32(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask).float()


class ResidualInPlace(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x += self.attend_self(self.norm1(x), tgt_mask)
            x = x + self.attend_memory(self.norm2(x), memory, memory_mask)
            return x + self.feed(self.norm3(x))
        return super().forward(x, memory, tgt_mask, memory_mask)


class FlattensWithView(Good):
    """Runs the first sublayer on (B * T, d_model) rows: .view fails on a non-contiguous x."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        B, T, d = x.shape
        rows = x.view(B * T, d)
        return super().forward(rows.view(B, T, d), memory, tgt_mask, memory_mask)


class DropoutIgnored(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, 0.0, norm_first)


class DropoutInEval(Good):
    def attend_memory(self, h, memory, memory_mask):
        return F.dropout(self.cross_attn(h, memory, memory, memory_mask), self.dropout2.p)


class NoDropoutOnTheCrossAttentionOutput(Good):
    def attend_memory(self, h, memory, memory_mask):
        return self.cross_attn(h, memory, memory, memory_mask)


class CrossAttentionWithoutDropout(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)


class SeedsInForward(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        torch.manual_seed(0)
        return super().forward(x, memory, tgt_mask, memory_mask)


class NoNorm3(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        del self.norm3


class TorchsCrossAttention(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.cross_attn = nn.MultiheadAttention(d_model, n_heads, dropout, batch_first=True)


class MemoryFirst(Good):
    def forward(self, memory, x, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask)


class ReturnsAttention(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask), self.cross_attn.attn


class MemoryDropped(Good):
    def attend_memory(self, h, memory, memory_mask):
        return super().attend_memory(h, self.dropout2(memory), memory_mask)


class MemoryDroppedAsAKeyword(Good):
    """The dropped memory passed first, by keyword: the query comes after it."""

    def attend_memory(self, h, memory, memory_mask):
        attended = self.cross_attn(
            value=self.dropout2(memory), query=h, key=memory, mask=memory_mask
        )
        return self.dropout2(attended)


class InputDroppedAsAKeyword(Good):
    """The mask first by keyword, then x dropped as the value only."""

    def attend_self(self, h, tgt_mask):
        attended = self.self_attn(mask=tgt_mask, query=h, key=h, value=self.dropout1(h))
        return self.dropout1(attended)


class CrossQueryDropped(Good):
    def attend_memory(self, h, memory, memory_mask):
        attended = self.cross_attn(self.dropout2(h), memory, memory, memory_mask)
        return self.dropout2(attended)


class FeedForwardInputDropped(Good):
    def feed(self, h):
        return self.dropout3(self.ff(self.dropout3(h)))


class RateAsKeepProbability(Good):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.dropout3 = nn.Dropout(1 - dropout)  # the feed-forward's only


class InputDropped(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(self.dropout1(x), memory, tgt_mask, memory_mask)


class PreLNNormalisesItsOutput(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        out = super().forward(x, memory, tgt_mask, memory_mask)
        return F.layer_norm(out, out.shape[-1:]) if self.norm_first else out


class CausalAlwaysAdded(Good):
    """Combines tgt_mask with a causal mask of its own: right when a mask is given, but
    masks the future even when tgt_mask is None (an encoder-style call)."""

    def attend_self(self, h, tgt_mask):
        T = h.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        return super().attend_self(h, causal if tgt_mask is None else tgt_mask & causal)


class DropoutAfterTheResidual(Good):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = self.dropout1(x + self.self_attn(*[self.norm1(x)] * 3, tgt_mask))
            h = self.norm2(x)
            x = self.dropout2(x + self.cross_attn(h, memory, memory, memory_mask))
            return self.dropout3(x + self.ff(self.norm3(x)))
        return super().forward(x, memory, tgt_mask, memory_mask)


WRONG = [
    (CrossAttentionGivenTgtMask, "the cross-attention is given tgt_mask"),
    (PreLNWithAFinalNorm, "your pre-LN layer normalises its output (with norm3 again)"),
    (Stub, "⏳ DecoderLayer: not implemented yet"),
    (ForwardStub, "⏳ DecoderLayer: not implemented yet"),
    (CausalMaskMissing, "tgt_mask is ignored: the masked self-attention must use it"),
    (TgtMaskInverted, "tgt_mask is inverted"),
    (OwnCausalMask, "you build a causal mask of your own and ignore tgt_mask"),
    (CrossKeysFromDecoder, "the cross-attention's keys and values come from the decoder"),
    (CrossOnlyKeysFromDecoder, "the cross-attention's keys come from the decoder"),
    (CrossQueriesFromMemory, "the cross-attention's queries come from memory and its keys"),
    (CrossQueriesAndKeysFromMemory, "the cross-attention's queries and keys come from memory"),
    (MemoryMaskIgnored, "memory_mask is ignored"),
    (MemoryMaskInverted, "memory_mask is inverted"),
    (MasksSwapped, "the two masks are swapped"),
    (MaskArgumentsInAnotherOrder, "forward(x, memory, tgt_mask=None, memory_mask=None)"),
    (CrossBeforeSelf, "the sublayers run in the order cross-attention, masked self-attention"),
    (FeedForwardBeforeCross, "the sublayers run in the order masked self-attention, feed-fo"),
    (NoResidualAroundSelf, "the masked self-attention sublayer has no residual connection"),
    (NoResidualAroundCross, "the cross-attention sublayer has no residual connection"),
    (NoResidualAroundFeedForward, "the feed-forward sublayer has no residual connection"),
    (AlwaysPostLN, "with norm_first=True your layer computes post-LN"),
    (AlwaysPreLN, "with norm_first=False your layer computes pre-LN"),
    (PreLNByDefault, "built with the defaults, computes pre-LN"),
    (NormsInsideTheResidual, "you normalise each sublayer's output before adding it"),
    (PreLNResidualFromNormed, "the residual adds the normalised x"),
    (PreLNNormalisesMemory, "memory is normalised (with norm2) before the cross-attention"),
    (PreLNCrossOnRawX, "the cross-attention's queries are x, not norm2(x)"),
    (PreLNFeedForwardOnRawX, "the feed-forward reads x, not norm3(x)"),
    (CrossReadsTheLayerInput, "the cross-attention reads the layer's input x"),
    (
        NormsTwoAndThreeSwapped,
        "the LayerNorms are in the wrong places (you use masked "
        "self-attention: norm1, cross-attention: norm3, feed-forward: norm2)",
    ),  # fmt: skip
    (Norm3NeverUsed, "norm3 is never used"),
    (SharedNorm, "norm3 and norm1 are the same module"),
    (OneAttentionForBoth, "cross_attn and self_attn are the same module"),
    (CrossWithSelfAttnsWeights, "the cross-attention uses self_attn's weights"),
    (SelfAttentionReadsMemory, "the self-attention reads memory"),
    (NoReLU, "the feed-forward has no ReLU"),
    (MemoryDetached, "no gradient reaches memory"),
    (ForwardUnderNoGrad, "carries no gradient"),
    (AlwaysFloat32, "is float32, but the inputs were float64"),
    (ResidualInPlace, "changed one of its input tensors in place"),
    (FlattensWithView, "use .reshape(...) instead of .view(...)"),
    (DropoutIgnored, "in training mode drops nothing: the dropout argument is not used"),
    (DropoutInEval, "two calls give different outputs, so something is dropped in eval mode"),
    (NoDropoutOnTheCrossAttentionOutput, "the cross-attention sublayer's output is not dropped"),
    (CrossAttentionWithoutDropout, "self.cross_attn drops nothing in training mode"),
    (SeedsInForward, "two calls give the same output, so dropout draws the same mask"),
    (MemoryDropped, "dropout is applied to memory before the cross-attention"),
    (InputDropped, "dropout is applied to x before the masked self-attention"),
    (MemoryDroppedAsAKeyword, "dropout is applied to memory before the cross-attention"),
    (InputDroppedAsAKeyword, "dropout is applied to x before the masked self-attention"),
    (CrossQueryDropped, "dropout is applied to x before the cross-attention"),
    (
        RateAsKeepProbability,
        "changes the output although dropout=0.0, and identically on every call",
    ),
    (FeedForwardInputDropped, "dropout is applied to x before the feed-forward"),
    (
        PreLNNormalisesItsOutput,
        "your pre-LN layer normalises its output (with a LayerNorm of its own)",
    ),
    (CausalAlwaysAdded, "a causal mask is applied although tgt_mask is None"),
    (DropoutAfterTheResidual, "dropout is applied after the residual addition"),
    (NoNorm3, "your layer has no submodule `norm3`"),
    (TorchsCrossAttention, "self.cross_attn is torch's nn.MultiheadAttention"),
    (MemoryFirst, "forward(x, memory, tgt_mask=None, memory_mask=None)"),
    (ReturnsAttention, "return only the output tensor"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_decoder_layer_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.DecoderLayer, answer)
    assert passed is False and diagnosis in printed, printed


def test_decoder_layer_instance_instead_of_the_class_is_explained(verdict):
    passed, printed = verdict(check.DecoderLayer, Good(12, 3, 20))
    assert passed is False and "pass the class itself, not an instance" in printed


def test_the_checker_restores_the_thread_count(verdict):
    threads = torch.get_num_threads()
    verdict(check.DecoderLayer, Good)
    verdict(check.DecoderLayer, Stub)
    assert torch.get_num_threads() == threads
