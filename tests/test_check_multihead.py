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
    (DropoutOnTheOutput, "nothing is dropped at p=0.5"),
    (DropoutWholeHeads, "dropout drops whole rows"),
    (AttnBeforeDropout, "nothing is dropped at p=0.5"),
    (ValuesProjectedWithWK, "the values are projected with w_k"),
    (SoftmaxOverHeads, "the softmax runs over the heads (dim=1)"),
    (HeadsMergedInReverse, "the heads are concatenated in reverse order"),
    (ForwardArgumentsInAnotherOrder, "forward(query, key, value, mask=None)"),
    (InitArgumentsInAnotherOrder, "MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=True)"),
    (ForwardUnderNoGrad, "carries no gradient"),
    (ForcedToFloat32, "is float32, but the inputs were float64"),
    (FusedWithWeightsToo, "nothing is dropped at p=0.5"),
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
