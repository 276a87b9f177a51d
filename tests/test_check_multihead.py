"""The lesson 04 checkers accept every correct answer and name each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import check
from course.attention import scaled_dot_product_attention

# ------------------------------------------------------------ split_heads ----------


def split_view_transpose(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)


def split_reshape_permute(x, n_heads):
    B, T, _ = x.shape
    return x.reshape(B, T, n_heads, -1).permute(0, 2, 1, 3)


def split_unflatten(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)


def split_einsum(x, n_heads):
    B, T, d_model = x.shape
    return torch.einsum("bthd->bhtd", x.view(B, T, n_heads, d_model // n_heads))


def split_by_chunks(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)  # h x (B, T, d_k) -> (B, h, T, d_k)


SPLIT_RIGHT = [
    split_view_transpose,
    split_reshape_permute,
    split_unflatten,
    split_einsum,
    split_by_chunks,
]


@pytest.mark.parametrize("answer", SPLIT_RIGHT)
def test_split_heads_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.split_heads, answer)
    assert passed is True and "✅ split_heads: passed" in printed


def split_stub(x, n_heads):
    # YOUR CODE HERE
    raise NotImplementedError


def split_no_transpose(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, n_heads, T, d_model // n_heads)


def split_left_in_place(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads)


def split_wrong_axes(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 3)


def split_interleaved(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, d_model // n_heads, n_heads).permute(0, 3, 1, 2)


def split_n_heads_as_d_k(x, n_heads):
    B, T, d_model = x.shape
    return x.view(B, T, -1, n_heads).transpose(1, 2)


def split_hard_coded_heads(x, n_heads):
    return split_view_transpose(x, 3)


def split_returns_tuple(x, n_heads):
    return split_view_transpose(x, n_heads), n_heads


def split_heads_reversed(x, n_heads):
    return split_view_transpose(x, n_heads).flip(1)


def split_detached(x, n_heads):
    return split_view_transpose(x, n_heads).detach()


def split_flattening_with_view(x, n_heads):
    B, T, d_model = x.shape
    rows = x.view(B * T, d_model)  # merging B and T needs contiguous memory
    return rows.view(B, T, n_heads, -1).transpose(1, 2)


def split_in_float32(x, n_heads):
    return split_view_transpose(x, n_heads).float()


def split_arguments_swapped(n_heads, x):
    return split_view_transpose(x, n_heads)


SPLIT_WRONG = [
    (split_heads_reversed, "the heads come out in reverse order"),
    (split_detached, "carries no gradient"),
    (split_flattening_with_view, "use .reshape(...) instead of .view(...)"),
    (split_in_float32, "is float32, but the inputs were float64"),
    (split_arguments_swapped, "the lesson's signature is split_heads(x, n_heads)"),
    (split_stub, "⏳ split_heads: not implemented yet"),
    (split_no_transpose, "reshaped (B, T, d_model) straight to (B, h, T, d_k)"),
    (split_left_in_place, "left the heads after time: .transpose(1, 2)"),
    (split_wrong_axes, "transposed the wrong axes"),
    (split_interleaved, "heads are interleaved"),
    (split_n_heads_as_d_k, "used n_heads as the size of each head"),
    (split_hard_coded_heads, "using the n_heads argument"),
    (split_returns_tuple, "should be a torch.Tensor"),
]


@pytest.mark.parametrize("answer, diagnosis", SPLIT_WRONG, ids=[w[0].__name__ for w in SPLIT_WRONG])
def test_split_heads_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.split_heads, answer)
    assert passed is False and diagnosis in printed, printed


# ------------------------------------------------------------ merge_heads ----------


def merge_transpose_reshape(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def merge_contiguous_view(x):
    B, h, T, d_k = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, -1)


def merge_flatten(x):
    return x.transpose(1, 2).flatten(-2)


def merge_cat(x):
    return torch.cat(x.unbind(dim=1), dim=-1)  # h x (B, T, d_k) -> (B, T, h * d_k)


def merge_einsum(x):
    B, h, T, d_k = x.shape
    return torch.einsum("bhtd->bthd", x).reshape(B, T, h * d_k)


MERGE_RIGHT = [
    merge_transpose_reshape,
    merge_contiguous_view,
    merge_flatten,
    merge_cat,
    merge_einsum,
]


@pytest.mark.parametrize("answer", MERGE_RIGHT)
def test_merge_heads_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.merge_heads, answer)
    assert passed is True and "✅ merge_heads: passed" in printed


def merge_stub(x):
    # YOUR CODE HERE
    raise NotImplementedError


def merge_reshape_only(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)


def merge_interleaved(x):
    B, h, T, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)


def merge_wrong_axes(x):
    B, h, T, d_k = x.shape
    return x.transpose(2, 3).reshape(B, T, h * d_k)


def merge_view_after_transpose(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).view(B, T, h * d_k)


def merge_not_flattened(x):
    return x.transpose(1, 2)


def merge_time_flattened(x):
    return x.flatten(2)


def merge_heads_reversed(x):
    return merge_transpose_reshape(x.flip(1))


def merge_through_numpy(x):
    B, h, T, d_k = x.shape
    merged = x.detach().numpy().transpose(0, 2, 1, 3).reshape(B, T, h * d_k)
    return torch.from_numpy(merged)


MERGE_WRONG = [
    (merge_heads_reversed, "the heads are concatenated in reverse order"),
    (merge_through_numpy, "carries no gradient"),
    (merge_stub, "⏳ merge_heads: not implemented yet"),
    (merge_reshape_only, "without moving the heads back"),
    (merge_interleaved, "features are interleaved"),
    (merge_wrong_axes, "transposed the wrong axes"),
    (merge_view_after_transpose, "no longer contiguous"),
    (merge_not_flattened, "flatten the last two axes"),
    (merge_time_flattened, "flattened time with the features"),
]


@pytest.mark.parametrize("answer, diagnosis", MERGE_WRONG, ids=[w[0].__name__ for w in MERGE_WRONG])
def test_merge_heads_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.merge_heads, answer)
    assert passed is False and diagnosis in printed, printed


# ------------------------------------------------------- MultiHeadAttention ----------


class Good(nn.Module):
    """A correct module, written the lesson's way; the mistakes below each change one thing."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.h, self.d_k, self.dropout = n_heads, d_model // n_heads, dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn = None

    def split(self, x):
        return split_view_transpose(x, self.h)

    def merge(self, x):
        return merge_transpose_reshape(x)

    def attend(self, q, k, v, mask):
        dropout_p = self.dropout if self.training else 0.0
        return scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)

    def forward(self, query, key, value, mask=None):
        q = self.split(self.w_q(query))
        k = self.split(self.w_k(key))
        v = self.split(self.w_v(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return self.w_o(self.merge(heads))


class InlineAttention(Good):
    """Attention written out, with einsum, -1e9 and torch.where."""

    def attend(self, q, k, v, mask):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
        weights = F.dropout(F.softmax(scores, dim=-1), self.dropout, self.training)
        return weights @ v, weights


class MaskEqualsZero(Good):
    def attend(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / self.d_k**0.5
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if self.training:
            weights = F.dropout(weights, p=self.dropout)
        return torch.matmul(weights, v), weights


class UnflattenPermute(Good):
    def split(self, x):
        return x.unflatten(-1, (self.h, self.d_k)).permute(0, 2, 1, 3)

    def merge(self, x):
        return x.permute(0, 2, 1, 3).flatten(2)


class KeepsAttnWithGrad(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        self.attn = self.attn.clone().requires_grad_()  # not detached: fine for the checker
        return out


class DropoutModule(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias)
        self.drop = nn.Dropout(dropout)

    def attend(self, q, k, v, mask):
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        weights = self.drop(weights)
        return weights @ v, weights


class FusedWithWeightsToo(Good):
    """Output from torch's fused kernel, weights computed separately for plotting."""

    def attend(self, q, k, v, mask):
        p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return out, scaled_dot_product_attention(q, k, v, mask)[1]


class D2LStyle(nn.Module):
    """As d2l.ai writes it: heads folded into the batch, bmm, and the attention weights kept
    before dropout (the dropped ones only multiply the values)."""

    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = n_heads
        self.dropout = nn.Dropout(dropout)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def transpose_qkv(self, x):  # (B, T, d_model) -> (B * h, T, d_k)
        x = x.reshape(x.shape[0], x.shape[1], self.num_heads, -1).permute(0, 2, 1, 3)
        return x.reshape(-1, x.shape[2], x.shape[3])

    def transpose_output(self, x):  # (B * h, T, d_k) -> (B, T, d_model)
        x = x.reshape(-1, self.num_heads, x.shape[1], x.shape[2]).permute(0, 2, 1, 3)
        return x.reshape(x.shape[0], x.shape[1], -1)

    def forward(self, query, key, value, mask=None):
        q, k, v = (self.transpose_qkv(f(x)) for f, x in
                   ((self.w_q, query), (self.w_k, key), (self.w_v, value)))  # fmt: skip
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
        scores = scores.reshape(B, self.num_heads, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e6)
        self.attn = F.softmax(scores, dim=-1)  # (B, h, T_q, T_k), before dropout
        weights = self.dropout(self.attn).reshape(B * self.num_heads, T_q, T_k)
        return self.w_o(self.transpose_output(torch.bmm(weights, v)))


class LoopOverHeads(Good):
    """No reshaping at all: one slice of features per head, attention in a Python loop."""

    def forward(self, query, key, value, mask=None):
        q_all, k_all, v_all = self.w_q(query), self.w_k(key), self.w_v(value)
        answers, weights = [], []
        for j in range(self.h):
            features = slice(j * self.d_k, (j + 1) * self.d_k)
            head_mask = None
            if mask is not None:
                B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
                head_mask = mask.broadcast_to(B, self.h, T_q, T_k)[:, j]  # (B, T_q, T_k)
            out, w = scaled_dot_product_attention(
                q_all[..., features],
                k_all[..., features],
                v_all[..., features],
                head_mask,
                dropout_p=self.dropout if self.training else 0.0,
            )
            answers.append(out)
            weights.append(w)
        self.attn = torch.stack(weights, dim=1)  # (B, h, T_q, T_k)
        return self.w_o(torch.cat(answers, dim=-1))


MHA_RIGHT = [
    Good,
    LoopOverHeads,
    InlineAttention,
    MaskEqualsZero,
    UnflattenPermute,
    KeepsAttnWithGrad,
    DropoutModule,
    FusedWithWeightsToo,  # self.attn before dropout: the output shows the drop (issue 23)
    D2LStyle,
]


@pytest.mark.parametrize("answer", MHA_RIGHT)
def test_mha_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.MultiHeadAttention, answer)
    assert passed is True and "✅ MultiHeadAttention: passed" in printed, printed


class Stub(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__()
        # YOUR CODE HERE
        raise NotImplementedError

    def forward(self, query, key, value, mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class ForwardStub(Good):
    def forward(self, query, key, value, mask=None):
        # YOUR CODE HERE
        raise NotImplementedError


class NoWO(Good):
    def forward(self, query, key, value, mask=None):
        q = self.split(self.w_q(query))
        k, v = self.split(self.w_k(key)), self.split(self.w_v(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return self.merge(heads)


class Unscaled(Good):
    def attend(self, q, k, v, mask):
        return scaled_dot_product_attention(q * math.sqrt(self.d_k), k, v, mask)


class ScaledByDModel(Good):
    def attend(self, q, k, v, mask):
        return scaled_dot_product_attention(q / math.sqrt(self.h), k, v, mask)


class MaskIgnored(Good):
    def attend(self, q, k, v, mask):
        return scaled_dot_product_attention(q, k, v)


class MaskInverted(InlineAttention):
    def attend(self, q, k, v, mask):
        return super().attend(q, k, v, None if mask is None else ~mask)


class KeyValueSwapped(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, value, key, mask)


class QueryForKeysInline(InlineAttention):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, value, mask)


class ValuesFromKey(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, key, mask)


class QueryForKeys(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, value, mask)


class OneFullWidthHead(Good):
    def split(self, x):
        return x.unsqueeze(1)  # (B, 1, T, d_model)


class SplitWithoutTranspose(Good):
    def split(self, x):
        return split_no_transpose(x, self.h)


class MergeWithoutTranspose(Good):
    def merge(self, x):
        return merge_reshape_only(x)


class ReturnsTuple(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask), self.attn


class NoAttn(Good):
    def attend(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None


class AttnAveraged(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        self.attn = self.attn.mean(dim=1)
        return out


class AttnIsScores(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        q, k = self.split(self.w_q(query)), self.split(self.w_k(key))
        self.attn = q @ k.transpose(-2, -1)
        return out


class AttnIsMaskedScores(InlineAttention):
    def attend(self, q, k, v, mask):
        out, _ = super().attend(q, k, v, mask)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        return out, scores if mask is None else scores.masked_fill(~mask, float("-inf"))


class DropoutAlways(Good):
    def attend(self, q, k, v, mask):
        return scaled_dot_product_attention(q, k, v, mask, dropout_p=self.dropout)


class DropoutIgnored(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, 0.0, bias)


class NoDropoutArgument(Good):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)


class NotAModule:
    def __init__(self, d_model, n_heads):
        pass


class OtherNames(Good):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.out = self.w_o
        del self.w_o


class SmallProjections(Good):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.w_q = nn.Linear(d_model, d_model // n_heads)


class NoBias(Good):
    def __init__(self, d_model, n_heads, bias=False):
        super().__init__(d_model, n_heads, bias=bias)


class ProjectionsAsTensors(Good):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        self.w_k = nn.Parameter(torch.zeros(d_model, d_model))


class SelfAttentionOnly(Good):
    def forward(self, x, mask=None):
        return super().forward(x, x, x, mask)


class MaskNamedDifferently(Good):
    def forward(self, query, key, value, attn_mask=None):
        return super().forward(query, key, value, attn_mask)


class OutputShapeWrong(Good):
    def forward(self, query, key, value, mask=None):
        q = self.split(self.w_q(query))
        k, v = self.split(self.w_k(key)), self.split(self.w_v(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return heads  # (B, h, T_q, d_k)


def split_heads(x, n_heads):  # the notebook's split_heads, still a stub
    # YOUR CODE HERE
    raise NotImplementedError


class CallsUnfinishedSplitHeads(Good):
    def split(self, x):
        return split_heads(x, self.h)


class BiasAlwaysOn(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias=True)


class DropoutConstant(DropoutModule):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias)
        self.drop = nn.Dropout(0.1)  # the argument is ignored


class DropoutOnTheOutput(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias)
        self.drop = nn.Dropout(dropout)

    def attend(self, q, k, v, mask):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.drop(out), weights


class DropoutWholeHeads(Good):
    def attend(self, q, k, v, mask):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.dropout:
            keep = torch.rand(*weights.shape[:2], 1, 1) >= self.dropout  # one draw per head
            weights = weights * keep / (1 - self.dropout)
        return weights @ v, weights


class AttnBeforeDropout(Good):
    def attend(self, q, k, v, mask):
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        dropped = F.dropout(weights, self.dropout, self.training)
        return dropped @ v, weights  # keeps the weights before dropout


class AttnBeforeDropoutAtAFixedRate(Good):
    def attend(self, q, k, v, mask):
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        dropped = F.dropout(weights, 0.1, self.training)  # <- not the rate given
        return dropped @ v, weights


class AttnBeforeDropoutNotRescaled(Good):
    def attend(self, q, k, v, mask):
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        if self.training:  # <- a mask of zeros, no 1 / (1 - p)
            weights_used = weights * (torch.rand_like(weights) >= self.dropout)
        else:
            weights_used = weights
        return weights_used @ v, weights


def test_weights_kept_before_dropout_pass_when_the_output_shows_the_drop(verdict):
    """Lesson 04 asks to keep "the attention weights" in self.attn: the ones before dropout
    (d2l's choice, and the better picture) are as right as the dropped ones, as long as the
    output comes from correctly dropped weights (the checker reads them back from it)."""
    passed, printed = verdict(check.MultiHeadAttention, AttnBeforeDropout)
    assert passed is True and "✅ MultiHeadAttention: passed" in printed, printed


class AddsTheHeadAxisToTheMask(Good):
    """The Annotated Transformer's mask.unsqueeze(1), on masks that have the head axis already."""

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # <- "the same mask for every head"
        return super().forward(query, key, value, mask)


def test_a_head_axis_added_to_a_4d_mask_is_named(verdict):
    passed, printed = verdict(check.MultiHeadAttention, AddsTheHeadAxisToTheMask)
    assert passed is False
    assert "your module adds a head axis to the mask (mask.unsqueeze(1))" in printed, printed


class ValuesProjectedWithWK(Good):
    def forward(self, query, key, value, mask=None):
        q, k = self.split(self.w_q(query)), self.split(self.w_k(key))
        v = self.split(self.w_k(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return self.w_o(self.merge(heads))


class SoftmaxOverHeads(InlineAttention):
    def attend(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=1)
        return weights @ v, weights


class HeadsMergedInReverse(Good):
    def merge(self, x):
        return merge_transpose_reshape(x.flip(1))


class ForwardArgumentsInAnotherOrder(Good):
    def forward(self, query, value, key, mask=None):
        return super().forward(query, key, value, mask)


class InitArgumentsInAnotherOrder(Good):
    def __init__(self, d_model, n_heads, bias=True, dropout=0.0):
        super().__init__(d_model, n_heads, dropout, bias)


class ForwardUnderNoGrad(Good):
    def forward(self, query, key, value, mask=None):
        with torch.no_grad():
            return super().forward(query, key, value, mask)


class ForcedToFloat32(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask).float()


MHA_WRONG = [
    (CallsUnfinishedSplitHeads, "your code calls split_heads, which is not implemented yet"),
    (BiasAlwaysOn, "with bias=False, self.w_q still has a bias"),
    (DropoutConstant, "which is dropout at p=0.1, but p=0.5 was asked"),
    (DropoutOnTheOutput, "dropout is applied to the attention's output"),
    (AttnBeforeDropoutAtAFixedRate, "which is dropout at p=0.1, but p=0.5 was asked"),
    (AttnBeforeDropoutNotRescaled, "the values that survive dropout are not rescaled"),
    (DropoutWholeHeads, "dropout drops whole rows"),
    (ValuesProjectedWithWK, "the values are projected with w_k"),
    (SoftmaxOverHeads, "the softmax runs over the heads (dim=1)"),
    (HeadsMergedInReverse, "the heads are concatenated in reverse order"),
    (ForwardArgumentsInAnotherOrder, "forward(query, key, value, mask=None)"),
    (InitArgumentsInAnotherOrder, "MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=True)"),
    (ForwardUnderNoGrad, "carries no gradient"),
    (ForcedToFloat32, "is float32, but the inputs were float64"),
    (Stub, "⏳ MultiHeadAttention: not implemented yet"),
    (ForwardStub, "⏳ MultiHeadAttention: not implemented yet"),
    (NoWO, "skips w_o"),
    (Unscaled, "scores are not scaled"),
    (ScaledByDModel, "divided by sqrt(d_model)"),
    (MaskIgnored, "mask is ignored"),
    (MaskInverted, "mask is inverted"),
    (KeyValueSwapped, "used value for the keys and key for the values"),
    (QueryForKeysInline, "only q comes from query"),
    (ValuesFromKey, "values come from key"),
    (QueryForKeys, "only q comes from query"),
    (OneFullWidthHead, "heads are not split"),
    (SplitWithoutTranspose, "heads are scrambled"),
    (MergeWithoutTranspose, "merged back in the wrong order"),
    (ReturnsTuple, "return only the output tensor (B, T_q, d_model); keep the weights in"),
    (NoAttn, "output is right on every case, but self.attn is missing"),
    (AttnAveraged, "don't average over the heads"),
    (AttnIsScores, "self.attn holds the raw scores"),
    (AttnIsMaskedScores, "self.attn holds the masked scores"),
    (DropoutAlways, "the output changes in eval mode"),
    (DropoutIgnored, "in training mode nothing was dropped"),
    (NoDropoutArgument, "__init__(self, d_model, n_heads, dropout=0.0, bias=True)"),
    (NotAModule, "not an nn.Module"),
    (OtherNames, "no attribute w_o"),
    (SmallProjections, "self.w_q.weight has shape (4, 12)"),
    (NoBias, "no bias"),
    (ProjectionsAsTensors, "self.w_k is a Parameter"),
    (SelfAttentionOnly, "mha(query, key, value, mask=None)"),
    (MaskNamedDifferently, "forward(self, query, key, value, mask=None)"),
    (OutputShapeWrong, "(B, T_q, d_model)"),
]


@pytest.mark.parametrize("answer, diagnosis", MHA_WRONG, ids=[w[0].__name__ for w in MHA_WRONG])
def test_mha_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.MultiHeadAttention, answer)
    assert passed is False and diagnosis in printed, printed
    assert "❌" in printed or "⏳" in printed


def test_passing_an_instance_instead_of_the_class_is_explained(verdict):
    passed, printed = verdict(check.MultiHeadAttention, Good(12, 3))
    assert passed is False and "the class itself, not an instance" in printed


# ----------------------------------------------------- more wrong answers ----------
# Each one reaches a diagnosis, a hint or a case the lists above do not; their verdicts are
# pinned down below, whole.


def split_heads_into_the_batch(x, n_heads):
    return torch.cat(x.chunk(n_heads, dim=-1), dim=0)  # (h * B, T, d_k): heads stacked on B


def split_squeezed(x, n_heads):
    return split_view_transpose(x, n_heads).squeeze()  # loses the axes of size 1


def merge_cat_along_time(x):
    return torch.cat(x.unbind(dim=1), dim=1)  # (B, h * T, d_k): heads end to end in time


def merge_squeezed(x):
    return merge_transpose_reshape(x).squeeze()


class TorchStyleNames(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            self.w_q,
            self.w_k,
            self.w_v,
            self.w_o,
        )
        del self.w_q, self.w_k, self.w_v, self.w_o

    def forward(self, query, key, value, mask=None):
        q = self.split(self.q_proj(query))
        k, v = self.split(self.k_proj(key)), self.split(self.v_proj(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return self.out_proj(self.merge(heads))


class ForgetsToReturn(Good):
    def forward(self, query, key, value, mask=None):
        super().forward(query, key, value, mask)  # no return: the result is None


class AttnOfTheFirstItemOnly(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        self.attn = self.attn[0]  # (h, T_q, T_k): "one batch item is enough to plot"
        return out


class AttnIsScaledScores(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        q, k = self.split(self.w_q(query)), self.split(self.w_k(key))
        self.attn = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        return out


class DropoutModuleWithTheWrongKeyword(Good):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, dropout, bias)
        self.drop = nn.Dropout(dropout=dropout)  # nn.Dropout's rate is p


class AttnDroppedOutputNot(Good):
    """self.attn holds the dropped weights; the output is computed from the others."""

    def attend(self, q, k, v, mask):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return out, F.dropout(weights, self.dropout, self.training)


class DropoutDrawnTwice(Good):
    """One dropout for the output, another for the weights kept in self.attn."""

    def attend(self, q, k, v, mask):
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        p = self.dropout if self.training else 0.0
        return F.dropout(weights, p) @ v, F.dropout(weights, p)


def split_through_float32(x, n_heads):
    return split_view_transpose(x.float(), n_heads).to(x.dtype)  # rounds float64 inputs


def split_x_through_numpy(x, n_heads):
    x = torch.from_numpy(x.numpy())  # fails once x requires grad
    return split_view_transpose(x, n_heads)


def split_nan_patched(x, n_heads):
    """The right values, with a 0/0 on the way patched by nan_to_num: NaN gradients."""
    heads = split_view_transpose(x, n_heads)
    return heads + torch.nan_to_num(heads / (heads - heads), nan=0.0, posinf=0.0, neginf=0.0)


def merge_through_float32(x):
    return merge_transpose_reshape(x.float()).to(x.dtype)


def merge_x_through_numpy(x):
    return merge_transpose_reshape(torch.from_numpy(x.numpy()))


def merge_nan_patched(x):
    merged = merge_transpose_reshape(x)
    return merged + torch.nan_to_num(merged / (merged - merged), nan=0.0, posinf=0.0, neginf=0.0)


def merge_returns_a_list(x):
    return list(merge_transpose_reshape(x))


def merge_with_heads_in_the_batch(x):
    """Written for heads stacked into the batch, (B * h, T, d_k), by .view: fails on the
    non-contiguous heads that split_heads returns."""
    B, h, T, d_k = x.shape
    x = x.view(B * h, T, d_k).view(B, h, T, d_k)
    return x.transpose(1, 2).reshape(B, T, h * d_k)


class EinsumQueryForKeys(InlineAttention):
    def attend(self, q, k, v, mask):
        weights = (torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_k)).softmax(dim=-1)
        return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights

    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, value, mask)


class MergeWithView(Good):
    def merge(self, x):
        return merge_view_after_transpose(x)


class MaskGivenAHeadAxis(Good):
    def attend(self, q, k, v, mask):
        return super().attend(q, k, v, None if mask is None else mask.unsqueeze(1))


class MaskReshapedForPadding(Good):
    def attend(self, q, k, v, mask):
        if mask is not None:  # "a padding mask (B, T_k)": not what a causal (T, T) mask is
            mask = mask.reshape(q.shape[0], 1, 1, -1)
        return super().attend(q, k, v, mask)


class WOWeightAsData(Good):
    def forward(self, query, key, value, mask=None):
        q = self.split(self.w_q(query))
        k, v = self.split(self.w_k(key)), self.split(self.w_v(value))
        heads, self.attn = self.attend(q, k, v, mask)
        return F.linear(self.merge(heads), self.w_o.weight.data, self.w_o.bias)


class MaskedBranchUnscaled(InlineAttention):
    def attend(self, q, k, v, mask):
        if mask is None:
            return super().attend(q, k, v, mask)
        scores = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))  # no / sqrt(d_k)
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return weights @ v, weights


class MaskTransposed(InlineAttention):
    def attend(self, q, k, v, mask):
        return super().attend(q, k, v, None if mask is None else mask.transpose(-2, -1))


class KeysFromValue(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, value, value, mask)


class ValuesProjectedWithWQ(Good):
    def forward(self, query, key, value, mask=None):
        q, k = self.split(self.w_q(query)), self.split(self.w_k(key))
        heads, self.attn = self.attend(q, k, self.split(self.w_q(value)), mask)
        return self.w_o(self.merge(heads))


class KeysProjectedWithWQ(Good):
    def forward(self, query, key, value, mask=None):
        q, k = self.split(self.w_q(query)), self.split(self.w_q(key))
        heads, self.attn = self.attend(q, k, self.split(self.w_v(value)), mask)
        return self.w_o(self.merge(heads))


class OneFullWidthHeadScaledByDK(InlineAttention):
    """No split, but the scores divided by sqrt(d_k) all the same."""

    def split(self, x):
        return x.unsqueeze(1)  # (B, 1, T, d_model)

    def attend(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return weights @ v, weights


class MaskAlwaysCausal(Good):
    """Any mask given is replaced by a causal one of the scores' size."""

    def attend(self, q, k, v, mask):
        if mask is not None:
            mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return super().attend(q, k, v, mask)


class MaskKeywordOnly(Good):
    def forward(self, query, key, value, *, mask=None):
        return super().forward(query, key, value, mask)


class AttnHeadAxisSqueezed(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        self.attn = self.attn.squeeze(1)  # (B, T_q, T_k) when there is one head
        return out


class QueryDetached(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query.detach(), key, value, mask)


class ManualProjections(Good):
    """x @ W.T + b written out: breaks when bias=False leaves b = None."""

    def forward(self, query, key, value, mask=None):
        def project(layer, x):
            return x @ layer.weight.T + layer.bias

        q = self.split(project(self.w_q, query))
        k, v = self.split(project(self.w_k, key)), self.split(project(self.w_v, value))
        heads, self.attn = self.attend(q, k, v, mask)
        return project(self.w_o, self.merge(heads))


class AttnOnlyInEval(Good):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        if self.training:
            self.attn = None  # "no need to keep them while training"
        return out


class DropoutFixedSeed(Good):
    def attend(self, q, k, v, mask):
        torch.manual_seed(0)  # the same "random" mask on every call
        return super().attend(q, k, v, mask)


class MaskFirstRowOnly(Good):
    """Every mask read as a key mask: its first row, (..., 1, T_k), for all the queries."""

    def attend(self, q, k, v, mask):
        return super().attend(q, k, v, None if mask is None else mask[..., :1, :])


class FourDimMaskTakenAsPadding(Good):
    """A 4-D mask taken for a padding mask (B, 1, 1, T_k): its first row for all queries."""

    def attend(self, q, k, v, mask):
        if mask is not None and mask.dim() == 4:
            mask = mask[:, :, :1, :]
        return super().attend(q, k, v, mask)


class NoDropoutAndNoAttnWhileTraining(AttnOnlyInEval):
    def __init__(self, d_model, n_heads, dropout=0.0, bias=True):
        super().__init__(d_model, n_heads, 0.0, bias)  # the rate is ignored


class OutputSqueezed(Good):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask).squeeze()  # a batch of one: (T_q, d)


class InputsFlattenedWithView(Good):
    """The projections applied to (B * T, d_model) rows made with .view."""

    def forward(self, query, key, value, mask=None):
        def rows(x):
            return x.view(-1, x.shape[-1])

        B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
        q = self.split(self.w_q(rows(query)).view(B, T_q, -1))
        k = self.split(self.w_k(rows(key)).view(B, T_k, -1))
        v = self.split(self.w_v(rows(value)).view(B, T_k, -1))
        heads, self.attn = self.attend(q, k, v, mask)
        return self.w_o(self.merge(heads))


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the case it names (sizes, heads, masks, float64, dropout rate) and its hint.

SPLIT_VERDICTS = [
    (
        split_view_transpose,
        "✅ split_heads: passed (5 inputs, 1 to 5 heads, float64 and non-contiguous too; every "
        "number in its head, gradients included).",
    ),
    (
        split_heads_reversed,
        "❌ split_heads: the heads come out in reverse order: head 0 must hold the first d_k "
        "features, x[..., :d_k]; don't flip the head axis",
    ),
    (
        split_detached,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3): the result carries no "
        "gradient, so nothing before it could learn. Something cut it from the computation graph: "
        ".detach(), a `with torch.no_grad():` block, or a new tensor made from values "
        "(torch.tensor(...), .item(), .numpy())",
    ),
    (
        split_flattening_with_view,
        "❌ split_heads: on inputs x (2, 4, 6), n_heads=2 your code raised RuntimeError: view size "
        "is not compatible with input tensor's size and stride (at least one dimension spans "
        "across two contiguous subspaces). Use .reshape(...) instead. The tensor is not "
        "contiguous in memory (a transpose or a slice made it so): use .reshape(...) instead of "
        ".view(...), or .contiguous().view(...)",
    ),
    (
        split_in_float32,
        "❌ split_heads: the result (x of shape (2, 4, 6), float64, non-contiguous, n_heads=2) is "
        "float32, but the inputs were float64: keep the inputs' dtype (make new tensors with "
        "x.new_zeros(...) or dtype=x.dtype; no .float() or .double())",
    ),
    (
        split_arguments_swapped,
        "❌ split_heads: your parameters come in the order (n_heads, x); the lesson's signature is "
        "split_heads(x, n_heads), and the notebooks pass the arguments in that order",
    ),
    (
        split_stub,
        "⏳ split_heads: not implemented yet. Replace `raise NotImplementedError` with your code, "
        "run that cell, then this one again.",
    ),
    (
        split_no_transpose,
        "❌ split_heads: you reshaped (B, T, d_model) straight to (B, h, T, d_k): that keeps the "
        "memory order, so a head gets whole vectors of a few positions instead of its own slice "
        "of every position. Cut the features first, .view(B, T, h, d_k), then .transpose(1, 2)",
    ),
    (
        split_left_in_place,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3) has shape (2, 5, 3, 4), "
        "expected (2, 3, 5, 4). You cut the features into (h, d_k) but left the heads after time: "
        ".transpose(1, 2) to bring them in front, giving (B, h, T, d_k)",
    ),
    (
        split_wrong_axes,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3) has shape (2, 4, 3, 5), "
        "expected (2, 3, 5, 4). The right sizes in the wrong order: you transposed the wrong "
        "axes. From (B, T, h, d_k), swap time and heads: .transpose(1, 2) or .permute(0, 2, 1, 3)",
    ),
    (
        split_interleaved,
        "❌ split_heads: the heads are interleaved: you cut d_model as (d_k, h), so head j gets "
        "features j, j+h, j+2h, ... Head j must hold the contiguous block j*d_k:(j+1)*d_k: "
        ".view(B, T, h, d_k)",
    ),
    (
        split_n_heads_as_d_k,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3) has shape (2, 4, 5, 3), "
        "expected (2, 3, 5, 4). You used n_heads as the size of each head: d_k = d_model // "
        "n_heads",
    ),
    (
        split_hard_coded_heads,
        "❌ split_heads: on inputs x (3, 2, 8), n_heads=2 your code raised RuntimeError: shape "
        "'[3, 2, 3, 2]' is invalid for input of size 48. Compute the sizes from the inputs: B, T, "
        "d_model = x.shape and d_k = d_model // n_heads, using the n_heads argument (not a fixed "
        "number)",
    ),
    (split_returns_tuple, "❌ split_heads: the result should be a torch.Tensor, got a tuple"),
    (
        split_heads_into_the_batch,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3) has shape (6, 5, 4), "
        "expected (2, 3, 5, 4). It is (B, h, T, d_k) with d_k = d_model // n_heads",
    ),
    (
        split_squeezed,
        "❌ split_heads: the result (x of shape (1, 3, 7), n_heads=1) has shape (3, 7), expected "
        "(1, 1, 3, 7). It is (B, h, T, d_k) with d_k = d_model // n_heads",
    ),
    (
        split_through_float32,
        "❌ split_heads: the result (x of shape (2, 4, 6), float64, non-contiguous, n_heads=2) is "
        "not right: at index (0, 0, 2, 0) you have -1.158, expected -1.158 (largest difference "
        "5.92e-08)",
    ),
    (
        split_x_through_numpy,
        "❌ split_heads: on inputs x (2, 5, 12), n_heads=3 your code raised RuntimeError: Can't "
        "call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
    ),
    (
        split_nan_patched,
        "❌ split_heads: the result (x of shape (2, 5, 12), n_heads=3): the gradient with respect "
        "to x holds NaN or inf, so one training step would make the model NaN",
    ),
]


MERGE_VERDICTS = [
    (
        merge_transpose_reshape,
        "✅ merge_heads: passed (5 inputs, 1 to 5 heads, float64 and non-contiguous too, gradients "
        "included; merge_heads(split_heads(x)) == x).",
    ),
    (
        merge_heads_reversed,
        "❌ merge_heads: the heads are concatenated in reverse order: head 0's features come "
        "first, then head 1's, ...; don't flip the head axis",
    ),
    (
        merge_through_numpy,
        "❌ merge_heads: the result (x of shape (2, 3, 5, 4)): the result carries no gradient, so "
        "nothing before it could learn. Something cut it from the computation graph: .detach(), a "
        "`with torch.no_grad():` block, or a new tensor made from values (torch.tensor(...), "
        ".item(), .numpy())",
    ),
    (
        merge_stub,
        "⏳ merge_heads: not implemented yet. Replace `raise NotImplementedError` with your code, "
        "run that cell, then this one again.",
    ),
    (
        merge_reshape_only,
        "❌ merge_heads: you reshaped (B, h, T, d_k) straight to (B, T, h*d_k) without moving the "
        "heads back behind time: the numbers end up at the wrong positions. First .transpose(1, "
        "2) to (B, T, h, d_k), then .reshape(B, T, h * d_k)",
    ),
    (
        merge_interleaved,
        "❌ merge_heads: the heads' features are interleaved: you flattened (d_k, h) instead of "
        "(h, d_k). Head j's d_k features must stay together at j*d_k:(j+1)*d_k: .transpose(1, "
        "2).reshape(B, T, h * d_k)",
    ),
    (
        merge_wrong_axes,
        "❌ merge_heads: you transposed the wrong axes: the heads (dim 1) and time (dim 2) must "
        "swap, .transpose(1, 2), before the reshape",
    ),
    (
        merge_view_after_transpose,
        "❌ merge_heads: on inputs x (2, 3, 5, 4) your code raised RuntimeError: view size is not "
        "compatible with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead. After a transpose the tensor is no "
        "longer contiguous in memory: use .reshape(...) instead of .view(...), or "
        ".contiguous().view(...)",
    ),
    (
        merge_not_flattened,
        "❌ merge_heads: the result (x of shape (2, 3, 5, 4)) has shape (2, 5, 3, 4), expected (2, "
        "5, 12). Almost: now flatten the last two axes, .reshape(B, T, h * d_k)",
    ),
    (
        merge_time_flattened,
        "❌ merge_heads: the result (x of shape (2, 3, 5, 4)) has shape (2, 3, 20), expected (2, "
        "5, 12). You flattened time with the features: first .transpose(1, 2) to (B, T, h, d_k)",
    ),
    (
        merge_cat_along_time,
        "❌ merge_heads: the result (x of shape (2, 3, 5, 4)) has shape (2, 15, 4), expected (2, "
        "5, 12). It is (B, T, h * d_k): the heads' answers side by side for each position",
    ),
    (
        merge_squeezed,
        "❌ merge_heads: the result (x of shape (1, 1, 3, 7)) has shape (3, 7), expected (1, 3, "
        "7). It is (B, T, h * d_k): the heads' answers side by side for each position",
    ),
    (
        merge_through_float32,
        "❌ merge_heads: the result (x of shape (2, 2, 4, 3), float64, non-contiguous) is not "
        "right: at index (1, 1, 3) you have -3.252, expected -3.252 (largest difference 8.52e-08)",
    ),
    (
        merge_x_through_numpy,
        "❌ merge_heads: on inputs x (2, 3, 5, 4) your code raised RuntimeError: Can't call "
        "numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
    ),
    (
        merge_nan_patched,
        "❌ merge_heads: the result (x of shape (2, 3, 5, 4)): the gradient with respect to x "
        "holds NaN or inf, so one training step would make the model NaN",
    ),
    (merge_returns_a_list, "❌ merge_heads: the result should be a torch.Tensor, got a list"),
    (
        merge_with_heads_in_the_batch,
        "❌ merge_heads: on inputs x (2, 3, 5, 4) your code raised RuntimeError: view size is not "
        "compatible with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead. The tensor is not contiguous in "
        "memory (a transpose or a slice made it so): use .reshape(...) instead of .view(...), or "
        ".contiguous().view(...)",
    ),
]


MHA_VERDICTS = [
    (
        Good,
        "✅ MultiHeadAttention: passed (10 cases: self- and cross-attention, padding and causal "
        "masks, 1 to 4 heads, float64 and a batch of one; values and gradients; bias=False; "
        "dropout on the attention weights, only while training).",
    ),
    (
        CallsUnfinishedSplitHeads,
        "⏳ MultiHeadAttention: your code calls split_heads, which is not implemented yet (it "
        "still raises NotImplementedError). Finish split_heads first, run its cell, then this one "
        "again.",
    ),
    (
        BiasAlwaysOn,
        "❌ MultiHeadAttention: with bias=False, self.w_q still has a bias: pass the argument on, "
        "nn.Linear(d_model, d_model, bias=bias)",
    ),
    (
        DropoutConstant,
        "❌ MultiHeadAttention: self.attn after self-attention with dropout=0.5 in training mode: "
        "the kept values are scaled by 1.11, which is dropout at p=0.1, but p=0.5 was asked. Use "
        "the rate you are given, not a fixed number",
    ),
    (
        DropoutOnTheOutput,
        "❌ MultiHeadAttention: with dropout=0.5 in training mode, dropout is applied to the "
        "attention's output (the heads, weights @ v), not to the weights: drop the attention "
        "weights after the softmax, then multiply the dropped weights by v",
    ),
    (
        AttnBeforeDropoutAtAFixedRate,
        "❌ MultiHeadAttention: the weights behind the output of self-attention with "
        "dropout=0.5 in training mode (self.attn keeps them before dropout, which is fine): the "
        "kept values are scaled by 1.11, which is dropout at p=0.1, but p=0.5 was asked. Use the "
        "rate you are given, not a fixed number",
    ),
    (
        AttnBeforeDropoutNotRescaled,
        "❌ MultiHeadAttention: the weights behind the output of self-attention with "
        "dropout=0.5 in training mode (self.attn keeps them before dropout, which is fine): the "
        "values that survive dropout are not rescaled: multiply them by 1 / (1 - p) = 2, so "
        "their expected value stays the same (F.dropout and nn.Dropout do it for you)",
    ),
    (
        DropoutWholeHeads,
        "❌ MultiHeadAttention: self.attn after self-attention with dropout=0.5 in training mode: "
        "dropout drops whole rows (a query's every weight) at once; drop each weight on its own, "
        "with a random mask of the weights' full shape (F.dropout(weights, p))",
    ),
    (
        ValuesProjectedWithWK,
        "❌ MultiHeadAttention: the values are projected with w_k: v = self.w_v(value)",
    ),
    (
        SoftmaxOverHeads,
        "❌ MultiHeadAttention: the softmax runs over the heads (dim=1): each query's weights must "
        "sum to 1 over the keys, the last axis: softmax(dim=-1)",
    ),
    (
        HeadsMergedInReverse,
        "❌ MultiHeadAttention: the heads are concatenated in reverse order: after the attention, "
        "head 0's answer comes first, then head 1's, ... (merge without flipping the head axis)",
    ),
    (
        ForwardArgumentsInAnotherOrder,
        "❌ MultiHeadAttention: your parameters come in the order (query, value, key, mask); the "
        "lesson's signature is forward(query, key, value, mask=None), and the notebooks pass the "
        "arguments in that order",
    ),
    (
        InitArgumentsInAnotherOrder,
        "❌ MultiHeadAttention: your parameters come in the order (d_model, n_heads, bias, "
        "dropout); the lesson's signature is MultiHeadAttention(d_model, n_heads, dropout=0.0, "
        "bias=True), and the notebooks pass the arguments in that order",
    ),
    (
        ForwardUnderNoGrad,
        "❌ MultiHeadAttention: the output on self-attention, d_model=12, n_heads=3: the result "
        "carries no gradient, so nothing before it could learn. Something cut it from the "
        "computation graph: .detach(), a `with torch.no_grad():` block, or a new tensor made from "
        "values (torch.tensor(...), .item(), .numpy())",
    ),
    (
        ForcedToFloat32,
        "❌ MultiHeadAttention: the output on cross-attention, a batch of one, float64, "
        "non-contiguous, d_model=12, n_heads=3 is float32, but the inputs were float64: keep the "
        "inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; no .float() or "
        ".double())",
    ),
    (
        Stub,
        "⏳ MultiHeadAttention: not implemented yet. Replace `raise NotImplementedError` with your "
        "code, run that cell, then this one again.",
    ),
    (
        ForwardStub,
        "⏳ MultiHeadAttention: not implemented yet. Replace `raise NotImplementedError` with your "
        "code, run that cell, then this one again.",
    ),
    (
        NoWO,
        "❌ MultiHeadAttention: the output skips w_o: after merging the heads, mix them with "
        "self.w_o (return self.w_o(merged))",
    ),
    (
        Unscaled,
        "❌ MultiHeadAttention: the scores are not scaled: each head divides q·k by sqrt(d_k), "
        "with d_k = d_model // n_heads",
    ),
    (
        ScaledByDModel,
        "❌ MultiHeadAttention: the scores are divided by sqrt(d_model); each head works in d_k = "
        "d_model // n_heads dimensions, so divide by sqrt(d_k)",
    ),
    (
        MaskIgnored,
        "❌ MultiHeadAttention: the mask is ignored: pass it on to the attention of every head (it "
        "is already broadcastable to (B, h, T_q, T_k))",
    ),
    (
        MaskInverted,
        "❌ MultiHeadAttention: the mask is inverted: True means *may attend*, so fill the scores "
        "with -inf where the mask is False (e.g. scores.masked_fill(~mask, float('-inf')))",
    ),
    (
        KeyValueSwapped,
        "❌ MultiHeadAttention: query, key and value are mixed up: you used value for the keys and "
        "key for the values. Scores compare w_q(query) with w_k(key); the weights average "
        "w_v(value)",
    ),
    (
        QueryForKeysInline,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12) your "
        "code raised RuntimeError: Expected size for first two dimensions of batch2 tensor to be: "
        "[6, 4] but got: [6, 6]. Which input feeds which projection? q = w_q(query); k = "
        "w_k(key) and v = w_v(value), both T_k long: only q comes from query",
    ),
    (
        ValuesFromKey,
        "❌ MultiHeadAttention: the values come from key: project value with w_v, v = w_v(value)",
    ),
    (
        QueryForKeys,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12) your "
        "code raised ValueError: k and v must have the same length T_k (dim -2): k is (2, 3, 4, "
        "4), v is (2, 3, 6, 4). Which input feeds which projection? q = w_q(query); k = w_k(key) "
        "and v = w_v(value), both T_k long: only q comes from query",
    ),
    (
        OneFullWidthHead,
        "❌ MultiHeadAttention: the heads are not split: this is one full-width head. Cut q, k and "
        "v into n_heads heads with split_heads before the attention, and merge them after",
    ),
    (
        SplitWithoutTranspose,
        "❌ MultiHeadAttention: the heads are scrambled: q, k, v were reshaped straight to (B, h, "
        "T, d_k). Split with .view(B, T, h, d_k).transpose(1, 2)",
    ),
    (
        MergeWithoutTranspose,
        "❌ MultiHeadAttention: the heads are merged back in the wrong order: (B, h, T, d_k) was "
        "reshaped straight to (B, T, d_model). Use .transpose(1, 2) first, then .reshape",
    ),
    (
        ReturnsTuple,
        "❌ MultiHeadAttention: forward returned a tuple of 2 things on self-attention, "
        "d_model=12, n_heads=3: return only the output tensor (B, T_q, d_model); keep the weights "
        "in self.attn",
    ),
    (
        NoAttn,
        "❌ MultiHeadAttention: your output is right on every case, but self.attn is missing: keep "
        "the attention weights (B, h, T_q, T_k) in self.attn for plotting (torch's fused "
        "F.scaled_dot_product_attention does not return them; "
        "course.attention.scaled_dot_product_attention returns (output, weights))",
    ),
    (
        AttnAveraged,
        "❌ MultiHeadAttention: self.attn after cross-attention, a batch of one, float64, "
        "non-contiguous, d_model=12, n_heads=3 has shape (1, 4, 6), expected (1, 3, 4, 6). One "
        "map per head: don't average over the heads",
    ),
    (
        AttnIsScores,
        "❌ MultiHeadAttention: self.attn holds the raw scores q·k, before the softmax: keep the "
        "weights (after the softmax), the ones that multiply v",
    ),
    (
        AttnIsMaskedScores,
        "❌ MultiHeadAttention: self.attn after cross-attention, a batch of one, float64, "
        "non-contiguous, d_model=12, n_heads=3 contains 48 NaN/inf value(s): self.attn holds the "
        "masked scores, before the softmax: keep the weights (after the softmax), the ones that "
        "multiply v",
    ),
    (
        DropoutAlways,
        "❌ MultiHeadAttention: with dropout=0.5 the output changes in eval mode: drop attention "
        "weights only while training, dropout_p = self.dropout if self.training else 0.0 (an "
        "nn.Dropout module does this by itself)",
    ),
    (
        DropoutIgnored,
        "❌ MultiHeadAttention: with dropout=0.5 in training mode nothing was dropped: drop "
        "attention weights while training, dropout_p = self.dropout if self.training else 0.0",
    ),
    (
        NoDropoutArgument,
        "❌ MultiHeadAttention: on inputs d_model=12, n_heads=3, dropout=0.0, bias=False your code "
        "raised TypeError: NoDropoutArgument.__init__() takes 3 positional arguments but 5 were "
        "given. The constructor's signature is __init__(self, d_model, n_heads, dropout=0.0, "
        "bias=True), in that order",
    ),
    (
        NotAModule,
        "❌ MultiHeadAttention: MultiHeadAttention(12, 3) gave a NotAModule, not an nn.Module: "
        "write `class MultiHeadAttention(nn.Module)` and call super().__init__() first in "
        "__init__",
    ),
    (
        OtherNames,
        "❌ MultiHeadAttention: your module has no attribute w_o. Name the four projections "
        "self.w_q, self.w_k, self.w_v, self.w_o = nn.Linear(d_model, d_model) (found: w_q, w_k, "
        "w_v)",
    ),
    (
        SmallProjections,
        "❌ MultiHeadAttention: self.w_q.weight has shape (4, 12) for d_model=12, expected (12, "
        "12): all four projections are nn.Linear(d_model, d_model); the heads are cut out of "
        "their output by split_heads",
    ),
    (
        NoBias,
        "❌ MultiHeadAttention: self.w_q has no bias of shape (12,): by default (bias=True) each "
        "projection is nn.Linear(d_model, d_model, bias=bias) with a bias",
    ),
    (
        ProjectionsAsTensors,
        "❌ MultiHeadAttention: self.w_k is a Parameter, expected an nn.Linear(d_model, d_model) "
        "(a layer with a .weight)",
    ),
    (
        SelfAttentionOnly,
        "❌ MultiHeadAttention: on inputs query (2, 5, 12), key (2, 5, 12), value (2, 5, 12) your "
        "code raised TypeError: SelfAttentionOnly.forward() takes from 2 to 3 positional "
        "arguments but 4 were given. The module is called as mha(query, key, value, mask=None)",
    ),
    (
        MaskNamedDifferently,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12), mask "
        "(2, 1, 1, 6) your code raised TypeError: MaskNamedDifferently.forward() got an "
        "unexpected keyword argument 'mask'. Name the last argument of forward `mask`: "
        "forward(self, query, key, value, mask=None)",
    ),
    (
        OutputShapeWrong,
        "❌ MultiHeadAttention: the output on self-attention, d_model=12, n_heads=3 has shape (2, "
        "3, 5, 4), expected (2, 5, 12). It is (B, T_q, d_model): one vector per query position",
    ),
    (
        TorchStyleNames,
        "❌ MultiHeadAttention: your module has no attribute w_q. Name the four projections "
        "self.w_q, self.w_k, self.w_v, self.w_o = nn.Linear(d_model, d_model) (found: none of "
        "them)",
    ),
    (
        ForgetsToReturn,
        "❌ MultiHeadAttention: the output on self-attention, d_model=12, n_heads=3 should be a "
        "torch.Tensor, got a NoneType",
    ),
    (
        AttnOfTheFirstItemOnly,
        "❌ MultiHeadAttention: self.attn after cross-attention, a batch of one, float64, "
        "non-contiguous, d_model=12, n_heads=3 has shape (3, 4, 6), expected (1, 3, 4, 6). Keep "
        "the weights of the latest call: one (T_q, T_k) map per batch item and head",
    ),
    (
        AttnIsScaledScores,
        "❌ MultiHeadAttention: self.attn holds the scaled scores q·k / sqrt(d_k), before the "
        "softmax: keep the weights (after the softmax), the ones that multiply v",
    ),
    (
        DropoutModuleWithTheWrongKeyword,
        "❌ MultiHeadAttention: on inputs d_model=12, n_heads=3 your code raised TypeError: "
        "_DropoutNd.__init__() got an unexpected keyword argument 'dropout'. nn.Dropout and "
        "F.dropout call the rate p: nn.Dropout(p=dropout), F.dropout(weights, p=dropout)",
    ),
    (
        AttnDroppedOutputNot,
        "❌ MultiHeadAttention: with dropout=0.5 in training mode the output does not come from "
        "the dropped weights in self.attn: drop the attention weights, then multiply those by v "
        "(keep the same weights in self.attn)",
    ),
    (
        DropoutDrawnTwice,
        "❌ MultiHeadAttention: with dropout=0.5 in training mode the output and self.attn come "
        "from two different dropout draws (each call to dropout draws a new random mask): drop "
        "the weights once, dropped = dropout(weights), keep dropped in self.attn and multiply "
        "the same dropped weights by v",
    ),
    (
        EinsumQueryForKeys,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12) your "
        "code raised RuntimeError: einsum(): subscript k has size 6 for operand 1 which does not "
        "broadcast with previously seen size 4. Which input feeds which projection? q = "
        "w_q(query); k = w_k(key) and v = w_v(value), both T_k long: only q comes from query",
    ),
    (
        MergeWithView,
        "❌ MultiHeadAttention: on inputs query (2, 5, 12), key (2, 5, 12), value (2, 5, 12) your "
        "code raised RuntimeError: view size is not compatible with input tensor's size and "
        "stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) "
        "instead. After a transpose the tensor is no longer contiguous in memory: use "
        ".reshape(...) instead of .view(...), or .contiguous().view(...)",
    ),
    (
        MaskTransposed,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12), mask "
        "(2, 1, 1, 6) your code raised RuntimeError: The size of tensor a (6) must match the size "
        "of tensor b (4) at non-singleton dimension 2. Check the axes: q, k, v are (B, h, T, d_k) "
        "after the split, the weights (B, h, T_q, T_k); the mask arrives broadcastable to (B, h, "
        "T_q, T_k) as it is",
    ),
    (
        MaskReshapedForPadding,
        "❌ MultiHeadAttention: on inputs query (2, 5, 12), key (2, 5, 12), value (2, 5, 12), mask "
        "(5, 5) your code raised RuntimeError: shape '[2, 1, 1, -1]' is invalid for input of size "
        "25. Check the sizes you reshape to: query has T_q positions, key and value T_k",
    ),
    (
        WOWeightAsData,
        "❌ MultiHeadAttention: the output on self-attention, d_model=12, n_heads=3: no gradient "
        "reaches w_o.weight, so it could not learn: something between w_o.weight and the result "
        "is cut from the graph (.detach(), torch.no_grad(), values copied with torch.tensor(...) "
        "or .item())",
    ),
    (
        MaskedBranchUnscaled,
        "❌ MultiHeadAttention: the scores are not scaled: each head divides q·k by sqrt(d_k), "
        "with d_k = d_model // n_heads",
    ),
    (
        KeysFromValue,
        "❌ MultiHeadAttention: the keys come from value: project key with w_k, k = w_k(key)",
    ),
    (
        ValuesProjectedWithWQ,
        "❌ MultiHeadAttention: the values are projected with w_q: v = self.w_v(value)",
    ),
    (
        KeysProjectedWithWQ,
        "❌ MultiHeadAttention: the keys are projected with w_q: k = self.w_k(key)",
    ),
    (
        OneFullWidthHeadScaledByDK,
        "❌ MultiHeadAttention: the heads are not split: this is one full-width head (scaled by "
        "sqrt(d_k)). Cut q, k and v into n_heads heads with split_heads before the attention, "
        "merge them after",
    ),
    (
        MaskAlwaysCausal,
        "❌ MultiHeadAttention: the output on cross-attention with a padding mask (B, 1, 1, T_k), "
        "d_model=12, n_heads=3 is not right: at index (1, 0, 7) you have -2.58, expected 4.006 "
        "(largest difference 6.59)",
    ),
    (
        MaskKeywordOnly,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12), mask "
        "(2, 1, 1, 6) your code raised TypeError: MaskKeywordOnly.forward() takes 4 positional "
        "arguments but 5 were given. The module is called as mha(query, key, value, mask=None)",
    ),
    (
        AttnHeadAxisSqueezed,
        "❌ MultiHeadAttention: self.attn after self-attention with causal & padding masks (B, 1, "
        "T, T), d_model=8, n_heads=1 has shape (2, 5, 5), expected (2, 1, 5, 5). One map per "
        "head: don't average over the heads",
    ),
    (
        QueryDetached,
        "❌ MultiHeadAttention: the output on self-attention, d_model=12, n_heads=3: your values "
        "are right, but the gradient with respect to x is not, so training would follow the wrong "
        "slope. Something on the way is cut from the graph or rebuilt from values (.detach(), "
        ".data, torch.tensor(...)), or a step is computed without autograd",
    ),
    (
        ManualProjections,
        "❌ MultiHeadAttention: on inputs query (2, 5, 12), key (2, 5, 12), value (2, 5, 12) your "
        "code raised TypeError: unsupported operand type(s) for +: 'Tensor' and 'NoneType'",
    ),
    (
        AttnOnlyInEval,
        "❌ MultiHeadAttention: self.attn after self-attention with dropout=0.5 in training mode "
        "should be a torch.Tensor, got a NoneType",
    ),
    (
        DropoutFixedSeed,
        "❌ MultiHeadAttention: self.attn after self-attention with dropout=0.5 in training mode: "
        "two calls dropped exactly the same entries. Dropout must draw a new random mask on every "
        "call: don't seed inside your function (torch.manual_seed) or keep one mask",
    ),
    (
        MaskFirstRowOnly,
        "❌ MultiHeadAttention: the output on self-attention with a causal mask (T, T), "
        "d_model=12, n_heads=3 is not right: at index (1, 4, 7) you have -2.13, expected 4.622 "
        "(largest difference 6.75)",
    ),
    (
        FourDimMaskTakenAsPadding,
        "❌ MultiHeadAttention: the output on self-attention with causal & padding masks (B, 1, T, "
        "T), d_model=12, n_heads=3 is not right: at index (0, 4, 7) you have -5.863, expected "
        "-0.2984 (largest difference 5.56)",
    ),
    (
        NoDropoutAndNoAttnWhileTraining,
        "❌ MultiHeadAttention: with dropout=0.5 in training mode nothing was dropped: drop "
        "attention weights while training, dropout_p = self.dropout if self.training else 0.0",
    ),
    (
        OutputSqueezed,
        "❌ MultiHeadAttention: the output on cross-attention, a batch of one, float64, "
        "non-contiguous, d_model=12, n_heads=3 has shape (4, 12), expected (1, 4, 12). It is (B, "
        "T_q, d_model): one vector per query position",
    ),
    (
        InputsFlattenedWithView,
        "❌ MultiHeadAttention: on inputs query (2, 4, 12), key (2, 6, 12), value (2, 6, 12) your "
        "code raised RuntimeError: view size is not compatible with input tensor's size and "
        "stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) "
        "instead. After a transpose the tensor is no longer contiguous in memory: use "
        ".reshape(...) instead of .view(...), or .contiguous().view(...)",
    ),
]


@pytest.mark.parametrize(
    "answer, line", SPLIT_VERDICTS, ids=[v[0].__name__ for v in SPLIT_VERDICTS]
)
def test_split_heads_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.split_heads, answer)
    assert printed == line + "\n"
    assert passed is (answer is split_view_transpose)


@pytest.mark.parametrize(
    "answer, line", MERGE_VERDICTS, ids=[v[0].__name__ for v in MERGE_VERDICTS]
)
def test_merge_heads_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.merge_heads, answer)
    assert printed == line + "\n"
    assert passed is (answer is merge_transpose_reshape)


@pytest.mark.parametrize("answer, line", MHA_VERDICTS, ids=[v[0].__name__ for v in MHA_VERDICTS])
def test_mha_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.MultiHeadAttention, answer)
    assert printed == line + "\n"
    assert passed is (answer is Good)
