"""The lesson 03 checker: every correct answer passes, each usual mistake is named.

Each wrong answer below is one a learner really writes; the test asserts the checker
returns False *and* prints the diagnosis for that mistake, not a generic "wrong".
"""

import math

import pytest
import torch
import torch.nn.functional as F

from course import check

# ------------------------------------------------------------ correct answers ----------


def by_masked_fill(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:  # a row with no key to attend to: zeros, not NaN
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def by_einsum_and_where(q, k, v, mask=None, dropout_p=0.0):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, -1e9)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # -1e9 makes a fully masked row uniform: the rule is zeros
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p, training=True)
    return torch.einsum("...qk,...kv->...qv", weights, v), weights


def by_nan_to_num(q, k, v, mask=None, dropout_p=0.0):
    scores = torch.matmul(q, k.transpose(-1, -2)) / torch.sqrt(torch.tensor(q.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = F.softmax(scores, dim=-1).nan_to_num(0.0)
    if dropout_p:
        keep = torch.rand_like(weights) >= dropout_p
        weights = weights * keep / (1 - dropout_p)
    return torch.matmul(weights, v), weights


def by_where_then_isnan_patched(q, k, v, mask=None, dropout_p=0.0):
    """-inf put in by torch.where (which, like masked_fill, sends the filled scores a zero
    gradient), the NaN rows patched with where(isnan): right, values and gradients."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = scores.softmax(dim=-1)
    weights = F.dropout(torch.where(weights.isnan(), 0.0, weights), dropout_p)
    return weights @ v, weights


def by_renormalising_after_the_softmax(q, k, v, mask=None, dropout_p=0.0):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def as_list(q, k, v, mask=None, dropout_p=0.0):
    return list(by_masked_fill(q, k, v, mask, dropout_p))


CORRECT = [
    by_masked_fill,
    by_einsum_and_where,
    by_nan_to_num,
    by_where_then_isnan_patched,
    by_renormalising_after_the_softmax,
    as_list,
]


@pytest.mark.parametrize("answer", CORRECT)
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.scaled_dot_product_attention, answer)
    assert passed is True, printed
    assert "✅ scaled_dot_product_attention: passed" in printed


# ------------------------------------------------------------- wrong answers ----------


def _attend(q, k, v, mask=None, scale=None, fill=float("-inf"), dim=-1, dropout_p=0.0):
    """A configurable attention to write the mistakes below in one line each."""
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1]) if scale is None else scale(scores)
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = scores.softmax(dim=dim).nan_to_num(0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def stub(q, k, v, mask=None, dropout_p=0.0):
    # YOUR CODE HERE
    raise NotImplementedError


def not_scaled(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s, dropout_p=dropout_p)


def divided_by_d_k(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s / q.shape[-1], dropout_p=dropout_p)


def multiplied(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s * math.sqrt(q.shape[-1]))


def divided_by_sqrt_d_v(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s / math.sqrt(v.shape[-1]))


def scaled_after_softmax(q, k, v, mask=None, dropout_p=0.0):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def softmax_over_queries(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, dim=-2)


def no_softmax(q, k, v, mask=None, dropout_p=0.0):
    weights = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return weights @ v, weights


def swapped_return(q, k, v, mask=None, dropout_p=0.0):
    return by_masked_fill(q, k, v, mask, dropout_p)[::-1]


def scaled_in_place(q, k, v, mask=None, dropout_p=0.0):
    q /= math.sqrt(q.shape[-1])
    return _attend(q, k, v, mask, scale=lambda s: s)


def mask_always_used(q, k, v, mask=None, dropout_p=0.0):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, -1e9)
    weights = scores.softmax(-1)
    return weights @ v, weights


def no_mask_parameter(q, k, v):
    return _attend(q, k, v)


def mask_ignored(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v)


def mask_inverted(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, None if mask is None else ~mask)


def masked_with_zero(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, fill=0.0)


def mask_multiplies_the_scores(q, k, v, mask=None, dropout_p=0.0):
    keep = 1 if mask is None else mask
    return _attend(q, k, v, scale=lambda s: s / math.sqrt(q.shape[-1]) * keep)


def mask_after_softmax(q, k, v, mask=None, dropout_p=0.0):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def mask_transposed(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, None if mask is None else mask.transpose(-2, -1))


def nan_on_empty_rows(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def ones_on_empty_rows(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 1.0)
    return weights @ v, weights


def output_from_unmasked_weights(q, k, v, mask=None, dropout_p=0.0):
    _, weights = by_masked_fill(q, k, v, mask, dropout_p)
    return _attend(q, k, v)[0], weights


def no_dropout_parameter(q, k, v, mask=None):
    return by_masked_fill(q, k, v, mask)


def dropout_ignored(q, k, v, mask=None, dropout_p=0.0):
    return by_masked_fill(q, k, v, mask)


def dropout_not_rescaled(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    weights = weights * (torch.rand_like(weights) >= dropout_p)
    return weights @ v, weights


def dropout_on_the_output(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    return F.dropout(output, dropout_p), weights


def dropout_on_the_scores(q, k, v, mask=None, dropout_p=0.0):
    scores = F.dropout(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dropout_p)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1).nan_to_num(0.0)
    return weights @ v, weights


def dropout_p_as_keep_probability(q, k, v, mask=None, dropout_p=0.0):
    return by_masked_fill(q, k, v, mask, 1 - dropout_p if dropout_p else 0.0)


def output_before_dropout(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    return output, F.dropout(weights, dropout_p)


def mask_unsqueezed(q, k, v, mask=None, dropout_p=0.0):
    if mask is not None:
        mask = mask.unsqueeze(1)  # "one more axis for the heads": the mask already broadcasts
    return by_masked_fill(q, k, v, mask, dropout_p)


def temperature_two(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s / 2, dropout_p=dropout_p)


def naive_softmax(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()  # overflows to inf once a score passes ~88.7
    weights = (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def minus_1e9_uniform_rows(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, fill=-1e9, dropout_p=dropout_p)


def additive_mask_nan_patched(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:  # an additive mask: -inf + score, then NaN patched in the forward
        scores = scores + torch.where(mask, 0.0, float("-inf"))
    weights = torch.nan_to_num(scores.softmax(dim=-1), nan=0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def additive_mask_rows_zeroed(q, k, v, mask=None, dropout_p=0.0):
    """The recipe's last step (empty rows zeroed by masked_fill after the softmax) does not
    save a mask that was added to the scores: the NaN gradient goes back through the addition."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, float("-inf"))
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def additive_log_mask(q, k, v, mask=None, dropout_p=0.0):
    """log(mask) is 0 or -inf: an additive mask in disguise, NaN patched in the forward."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + torch.log(mask.to(scores.dtype))
    weights = F.dropout(scores.softmax(dim=-1).nan_to_num(0.0), dropout_p)
    return weights @ v, weights


def if_mask(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.dropout(scores.softmax(-1), dropout_p)
    return weights @ v, weights


def arguments_in_another_order(q, k, v, dropout_p=0.0, mask=None):
    return by_masked_fill(q, k, v, mask, dropout_p)


def computed_in_float64(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q.double(), k.double(), v.double(), mask, dropout_p)
    return output, weights  # float64 whatever came in


def output_detached(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    return output.detach(), weights


def forward_under_no_grad(q, k, v, mask=None, dropout_p=0.0):
    with torch.no_grad():
        return by_masked_fill(q, k, v, mask, dropout_p)


def dropout_whole_rows(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    if dropout_p:
        keep = torch.rand(*weights.shape[:-1], 1) >= dropout_p  # one draw per query
        weights = weights * keep / (1 - dropout_p)
    return weights @ v, weights


def dropout_whole_keys(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    if dropout_p:
        keep = torch.rand(*weights.shape[:-2], 1, weights.shape[-1]) >= dropout_p  # per key
        weights = weights * keep / (1 - dropout_p)
    return weights @ v, weights


def dropout_fixed_seed(q, k, v, mask=None, dropout_p=0.0):
    torch.manual_seed(0)  # the same "random" mask on every call
    return by_masked_fill(q, k, v, mask, dropout_p)


def dropout_constant_rate(q, k, v, mask=None, dropout_p=0.0):
    return by_masked_fill(q, k, v, mask, 0.25 if dropout_p else 0.0)  # argument ignored


def dropout_on_the_query(q, k, v, mask=None, dropout_p=0.0):
    return by_masked_fill(F.dropout(q, dropout_p), k, v, mask)


WRONG = [
    (stub, "⏳ scaled_dot_product_attention: not implemented yet"),
    (mask_unsqueezed, "Use the mask as it comes"),
    (temperature_two, "the scores are divided by 2, but here d_k = q.shape[-1] = 7"),
    (naive_softmax, "the softmax overflows"),
    (minus_1e9_uniform_rows, "gets uniform weights 1/T_k"),
    (additive_mask_nan_patched, "the gradient with respect to q holds NaN or inf"),
    (additive_mask_rows_zeroed, "the NaN passes through the addition"),
    (additive_log_mask, "the NaN passes through the addition"),
    (if_mask, "write `if mask is not None:`"),
    (arguments_in_another_order, "the lesson's signature is scaled_dot_product_attention("),
    (computed_in_float64, "is float64, but the inputs were float32"),
    (output_detached, "carries no gradient"),
    (forward_under_no_grad, "carries no gradient"),
    (dropout_whole_rows, "dropout drops whole rows"),
    (dropout_whole_keys, "dropout drops whole keys"),
    (dropout_fixed_seed, "two calls dropped exactly the same entries"),
    (dropout_constant_rate, "Use the rate you are given"),
    (dropout_on_the_query, "Dropout belongs on these attention weights, after the softmax"),
    (not_scaled, "are not scaled"),
    (divided_by_d_k, "divided by d_k; divide by its square root"),
    (multiplied, "multiplied by sqrt(d_k)"),
    (divided_by_sqrt_d_v, "square root of d_v"),
    (scaled_after_softmax, "scaling comes after the softmax"),
    (softmax_over_queries, "over the queries (dim=-2)"),
    (no_softmax, "with no softmax"),
    (swapped_return, "wrong order"),
    (scaled_in_place, "in place"),
    (mask_always_used, "apply it only `if mask is not None:`"),
    (no_mask_parameter, "must take the mask as its fourth argument"),
    (mask_ignored, "the mask is ignored"),
    (mask_inverted, "the mask is inverted"),
    (masked_with_zero, "set to 0, but exp(0) = 1"),
    (mask_multiplies_the_scores, "set to 0, but exp(0) = 1"),
    (mask_after_softmax, "applied after the softmax"),
    (mask_transposed, "wrong way round"),
    (nan_on_empty_rows, "may attend to no key) gets NaN"),
    (ones_on_empty_rows, "should get zero weights"),
    (output_from_unmasked_weights, "output is computed from the weights before masking"),
    (no_dropout_parameter, "right without dropout; now add the last parameter"),
    (dropout_ignored, "nothing is dropped"),
    (dropout_not_rescaled, "not rescaled"),
    (dropout_on_the_output, "weights you return were not dropped, but the output changed"),
    (dropout_on_the_scores, "Dropout belongs on these attention weights, after the softmax"),
    (dropout_p_as_keep_probability, "p is the probability to *drop* a weight"),
    (output_before_dropout, "uses the weights from before dropout"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_mistake_is_rejected_and_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.scaled_dot_product_attention, answer)
    assert passed is False
    assert diagnosis in printed, printed


def test_masked_mistakes_say_which_mask(verdict):
    printed = verdict(check.scaled_dot_product_attention, mask_inverted)[1]
    assert "with a causal mask (T, T) (mask (5, 5))" in printed


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the case it names (shapes, mask, large scores, dropout rate) and its hint.


def d_k_from_axis_1(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, scale=lambda s: s / math.sqrt(q.shape[1]), dropout_p=dropout_p)


def scores_times_v(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) @ v, weights


def sigmoid_not_softmax(q, k, v, mask=None, dropout_p=0.0):
    weights = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    return weights @ v, weights


def softmax_over_dim_1(q, k, v, mask=None, dropout_p=0.0):
    return _attend(q, k, v, mask, dim=1, dropout_p=dropout_p)


def always_causal(q, k, v, mask=None, dropout_p=0.0):
    """Any mask given is replaced by a causal one of the scores' size."""
    if mask is not None:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    return by_masked_fill(q, k, v, mask, dropout_p)


def masked_branch_softmax_over_queries(q, k, v, mask=None, dropout_p=0.0):
    if mask is None:
        return by_masked_fill(q, k, v, None, dropout_p)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-2).nan_to_num(0.0)  # dim=-2 in this branch only
    return weights @ v, weights


def output_before_zeroing_empty_rows(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.dropout(scores.softmax(dim=-1), dropout_p)
    output = weights @ v  # NaN where a query may attend to nothing
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return output, weights


def clamped_scores(q, k, v, mask=None, dropout_p=0.0):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).clamp(-30, 30)  # "no overflow"
    return _attend(q, k, v, mask, scale=lambda s: scores, dropout_p=dropout_p)


def output_by_naive_exp(q, k, v, mask=None, dropout_p=0.0):
    """The weights from a safe softmax; the output from exp / sum, written out again."""
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    if mask is not None or dropout_p:
        return output, weights
    e = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()  # inf above ~88.7
    return (e @ v) / e.sum(dim=-1, keepdim=True), weights


def naive_softmax_with_a_fallback(q, k, v, mask=None, dropout_p=0.0):
    """exp / sum, with the NaN of an overflow replaced by a safe softmax's value: right
    values, but the NaN stays in the backward pass."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    naive = e / e.sum(-1, keepdim=True)
    weights = torch.where(torch.isnan(naive), scores.softmax(dim=-1), naive).nan_to_num(0.0)
    weights = F.dropout(weights, dropout_p)
    return weights @ v, weights


def dropout_drawn_twice(q, k, v, mask=None, dropout_p=0.0):
    """One dropout for the output, another for the weights returned."""
    _, weights = by_masked_fill(q, k, v, mask)
    return F.dropout(weights, dropout_p) @ v, F.dropout(weights, dropout_p)


def one_minus_mask(q, k, v, mask=None, dropout_p=0.0):
    if mask is None:
        return by_masked_fill(q, k, v, None, dropout_p)
    return by_masked_fill(q, k, v, 1 - mask, dropout_p)


def where_with_an_integer_mask(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask.int(), scores, float("-inf"))
    weights = F.dropout(scores.softmax(dim=-1).nan_to_num(0.0), dropout_p)
    return weights @ v, weights


def _drop(weights, p):
    return F.dropout(weights, p)


def calls_its_dropout_helper_by_keyword(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask)
    if dropout_p:
        weights = _drop(weights, dropout_p=dropout_p)  # the helper's parameter is p
    return weights @ v, weights


def _masked(q, k, v):
    return by_masked_fill(q, k, v)


def calls_its_helper_with_a_mask_keyword(q, k, v, mask=None, dropout_p=0.0):
    if mask is None:
        return by_masked_fill(q, k, v, None, dropout_p)
    return _masked(q, k, v, mask=mask)  # the helper has no mask parameter


def float_mask_inverted_by_subtraction(q, k, v, mask=None, dropout_p=0.0):
    if mask is None:
        return by_masked_fill(q, k, v, None, dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(1.0 - mask.float(), float("-inf"))  # a float "mask"
    weights = F.dropout(scores.softmax(dim=-1).nan_to_num(0.0), dropout_p)
    return weights @ v, weights


def output_scaled_again(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    return output / math.sqrt(q.shape[-1]), weights  # the scaling belongs to the scores only


def squeezed(q, k, v, mask=None, dropout_p=0.0):
    output, weights = by_masked_fill(q, k, v, mask, dropout_p)
    return output.squeeze(), weights.squeeze()  # a batch of one loses its axis


VERDICTS = [
    (
        by_masked_fill,
        "✅ scaled_dot_product_attention: passed (4 shapes without a mask (non-contiguous, "
        "float64, batch of one); causal, padding and per-head masks; a query that may attend to "
        "nothing; scores in the hundreds; values and gradients; dropout at two rates).",
    ),
    (
        stub,
        "⏳ scaled_dot_product_attention: not implemented yet. Replace `raise NotImplementedError` "
        "with your code, run that cell, then this one again.",
    ),
    (
        mask_unsqueezed,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised RuntimeError: The size of "
        "tensor a (5) must match the size of tensor b (2) at non-singleton dimension 0. Use the "
        "mask as it comes: it is already broadcastable to the scores' shape (..., T_q, T_k), so "
        "don't transpose, reshape or unsqueeze it",
    ),
    (
        temperature_two,
        "❌ scaled_dot_product_attention: the scores are divided by 2, but here d_k = q.shape[-1] "
        "= 7, so divide by sqrt(d_k) = 2.65: compute it from q, don't write a fixed number",
    ),
    (
        naive_softmax,
        "❌ scaled_dot_product_attention: with large scores (q and k of size about 12, d_k = 16): "
        "the softmax overflows: scores in the hundreds make exp(score) = inf and the weights inf "
        "/ inf = NaN. Subtract each row's maximum before exp (softmax(s) = softmax(s - max s)), "
        "or use torch.softmax / scores.softmax(dim=-1), which do it for you",
    ),
    (
        minus_1e9_uniform_rows,
        "❌ scaled_dot_product_attention: with a mask with a query that may attend to nothing "
        "(mask (2, 4, 5)): a query whose mask row is all False gets uniform weights 1/T_k, the "
        "average of keys it was told to ignore (what a -1e9 fill gives). The rule, here and in "
        "torch's scaled_dot_product_attention, is zero weights and a zero output: after the "
        "softmax, weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)",
    ),
    (
        additive_mask_nan_patched,
        "❌ scaled_dot_product_attention: with a mask with a query that may attend to nothing "
        "(mask (2, 4, 5)): the gradients: the gradient with respect to q holds NaN or inf, so one "
        "training step would make the model NaN. A softmax over a row of -inf makes NaN, and its "
        "backward sends NaN to that row's scores whatever you do to the weights afterwards "
        "(nan_to_num, where(isnan), zeroing the row). Whether the NaN reaches q and k depends on "
        "how the mask got into the scores: added to them (scores + a 0/-inf mask, or + "
        "log(mask)), the NaN passes through the addition. masked_fill(~mask, float('-inf')) "
        "replaces the scores it fills, so its backward sends them zero and stops the NaN: mask "
        "with it, then zero the empty rows after the softmax",
    ),
    (
        if_mask,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised RuntimeError: Boolean "
        "value of Tensor with more than one value is ambiguous. `if mask:` asks whether a whole "
        "tensor is true: write `if mask is not None:`",
    ),
    (
        arguments_in_another_order,
        "❌ scaled_dot_product_attention: your parameters come in the order (q, k, v, dropout_p, "
        "mask); the lesson's signature is scaled_dot_product_attention(q, k, v, mask=None, "
        "dropout_p=0.0), and the notebooks pass the arguments in that order",
    ),
    (
        computed_in_float64,
        "❌ scaled_dot_product_attention: weights is float64, but the inputs were float32: keep "
        "the inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; no .float() "
        "or .double())",
    ),
    (
        output_detached,
        "❌ scaled_dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): the result carries no "
        "gradient, so nothing before it could learn. Something cut it from the computation graph: "
        ".detach(), a `with torch.no_grad():` block, or a new tensor made from values "
        "(torch.tensor(...), .item(), .numpy())",
    ),
    (
        forward_under_no_grad,
        "❌ scaled_dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): the result carries no "
        "gradient, so nothing before it could learn. Something cut it from the computation graph: "
        ".detach(), a `with torch.no_grad():` block, or a new tensor made from values "
        "(torch.tensor(...), .item(), .numpy())",
    ),
    (
        dropout_whole_rows,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: dropout drops whole rows (a query's "
        "every weight) at once; drop each weight on its own, with a random mask of the weights' "
        "full shape (F.dropout(weights, p))",
    ),
    (
        dropout_whole_keys,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: dropout drops whole keys at once; "
        "drop each weight on its own, with a random mask of the weights' full shape "
        "(F.dropout(weights, p))",
    ),
    (
        dropout_fixed_seed,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: two calls dropped exactly the same "
        "entries. Dropout must draw a new random mask on every call: don't seed inside your "
        "function (torch.manual_seed) or keep one mask",
    ),
    (
        dropout_constant_rate,
        "❌ scaled_dot_product_attention: with dropout_p=0.6: the kept values are scaled by 1.33, "
        "which is dropout at p=0.25, but p=0.6 was asked. Use the rate you are given, not a fixed "
        "number",
    ),
    (
        dropout_on_the_query,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: nothing is dropped at p=0.25. "
        "Dropout belongs on these attention weights, after the softmax, and the dropped weights "
        "are the ones that multiply v",
    ),
    (
        not_scaled,
        "❌ scaled_dot_product_attention: the scores are not scaled: divide q·k by sqrt(d_k), with "
        "d_k = q.shape[-1]",
    ),
    (
        divided_by_d_k,
        "❌ scaled_dot_product_attention: the scores are divided by d_k; divide by its square "
        "root, math.sqrt(d_k)",
    ),
    (
        multiplied,
        "❌ scaled_dot_product_attention: the scores are multiplied by sqrt(d_k); divide by it "
        "instead",
    ),
    (
        divided_by_sqrt_d_v,
        "❌ scaled_dot_product_attention: the scores are divided by the square root of d_v (v's "
        "width); the dot products are q·k, so divide by sqrt(d_k), d_k = q.shape[-1]",
    ),
    (
        scaled_after_softmax,
        "❌ scaled_dot_product_attention: the scaling comes after the softmax: divide the scores, "
        "before the softmax, so the weights still sum to 1",
    ),
    (
        softmax_over_queries,
        "❌ scaled_dot_product_attention: the softmax runs over the queries (dim=-2); each query's "
        "weights must sum to 1 over the keys: softmax(dim=-1)",
    ),
    (
        no_softmax,
        "❌ scaled_dot_product_attention: the weights are the scaled scores, with no softmax: add "
        ".softmax(dim=-1)",
    ),
    (
        swapped_return,
        "❌ scaled_dot_product_attention: the results come back in the wrong order: return "
        "(output, weights)",
    ),
    (
        scaled_in_place,
        "❌ scaled_dot_product_attention: your code changed one of its input tensors in place; "
        "compute new tensors instead (e.g. x = x * 2, not x *= 2)",
    ),
    (
        mask_always_used,
        "❌ scaled_dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "TypeError: bad operand type for unary ~: 'NoneType'. mask is None when no mask is given: "
        "apply it only `if mask is not None:`",
    ),
    (
        no_mask_parameter,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised TypeError: "
        "no_mask_parameter() takes 3 positional arguments but 4 were given. Your function must "
        "take the mask as its fourth argument, in the lesson's order: def "
        "scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0)",
    ),
    (
        mask_ignored,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the mask is "
        "ignored: before the softmax, set the scores to -inf where the mask is False, so those "
        "keys get exactly zero weight",
    ),
    (
        mask_inverted,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the mask is "
        "inverted: True means *may attend*, so fill the scores with -inf where the mask is False: "
        "scores.masked_fill(~mask, float('-inf'))",
    ),
    (
        masked_with_zero,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): masked scores "
        "are set to 0, but exp(0) = 1 still gives those keys weight: set them to -inf (or a large "
        "negative number like -1e9)",
    ),
    (
        mask_multiplies_the_scores,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): masked scores "
        "are set to 0, but exp(0) = 1 still gives those keys weight: set them to -inf (or a large "
        "negative number like -1e9)",
    ),
    (
        mask_after_softmax,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the mask is "
        "applied after the softmax, so the remaining weights no longer sum to 1: mask the scores "
        "*before* the softmax",
    ),
    (
        mask_transposed,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the mask is "
        "read the wrong way round: mask[..., i, j] says whether query i may attend to key j (rows "
        "are queries, columns keys); use it as it is, not transposed",
    ),
    (
        nan_on_empty_rows,
        "❌ scaled_dot_product_attention: with a mask with a query that may attend to nothing "
        "(mask (2, 4, 5)): a query whose mask row is all False (it may attend to no key) gets "
        "NaN: the softmax of a row of -inf is 0 / 0. Give such a row zero weights, e.g. "
        "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) after the softmax",
    ),
    (
        ones_on_empty_rows,
        "❌ scaled_dot_product_attention: with a mask with a query that may attend to nothing "
        "(mask (2, 4, 5)): a query whose mask row is all False (it may attend to no key) should "
        "get zero weights, got values from 1 to 1",
    ),
    (
        output_from_unmasked_weights,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the output is "
        "computed from the weights before masking: use the masked weights, output = weights @ v",
    ),
    (
        no_dropout_parameter,
        "❌ scaled_dot_product_attention: on inputs q (8, 16, 5), k (8, 16, 5), v (8, 16, 3), "
        "mask=None, dropout_p=0.25 your code raised TypeError: no_dropout_parameter() takes from "
        "3 to 4 positional arguments but 5 were given. Your attention is right without dropout; "
        "now add the last parameter: def scaled_dot_product_attention(q, k, v, mask=None, "
        "dropout_p=0.0)",
    ),
    (
        dropout_ignored,
        "❌ scaled_dot_product_attention: with dropout_p=0.25 nothing is dropped: drop attention "
        "weights at random after the softmax, weights = F.dropout(weights, p=dropout_p)",
    ),
    (
        dropout_not_rescaled,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: the values that survive dropout are "
        "not rescaled: multiply them by 1 / (1 - p) = 1.33, so their expected value stays the "
        "same (F.dropout and nn.Dropout do it for you)",
    ),
    (
        dropout_on_the_output,
        "❌ scaled_dot_product_attention: the weights you return were not dropped, but the output "
        "changed: apply dropout to the weights, weights = F.dropout(weights, p=dropout_p), then "
        "output = weights @ v",
    ),
    (
        dropout_on_the_scores,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: nothing is dropped at p=0.25. "
        "Dropout belongs on these attention weights, after the softmax, and the dropped weights "
        "are the ones that multiply v",
    ),
    (
        dropout_p_as_keep_probability,
        "❌ scaled_dot_product_attention: with dropout_p=0.25: p is the probability to *drop* a "
        "weight, not to keep it: the kept values are scaled by 1/p = 4, and should be by 1/(1 - "
        "p) = 1.33 (F.dropout(weights, p=dropout_p))",
    ),
    (
        output_before_dropout,
        "❌ scaled_dot_product_attention: the output uses the weights from before dropout: compute "
        "it from the dropped weights you return, output = weights @ v",
    ),
    (
        d_k_from_axis_1,
        "❌ scaled_dot_product_attention: the scores are divided by 1.73, but here d_k = "
        "q.shape[-1] = 9, so divide by sqrt(d_k) = 3: compute it from q, don't write a fixed "
        "number",
    ),
    (
        scores_times_v,
        "❌ scaled_dot_product_attention: the output multiplies the scaled scores by v: multiply "
        "the softmax weights instead",
    ),
    (
        sigmoid_not_softmax,
        "❌ scaled_dot_product_attention: weights is not right: at index (2, 2) you have 0.661, "
        "expected 0.08527 (largest difference 0.576)",
    ),
    (
        softmax_over_dim_1,
        "❌ scaled_dot_product_attention: the softmax runs over the queries (dim=-2); each query's "
        "weights must sum to 1 over the keys: softmax(dim=-1)",
    ),
    (
        always_causal,
        "❌ scaled_dot_product_attention: with a padding mask (B, 1, T_k) (mask (2, 1, 6)): "
        "weights is not right: at index (0, 0, 0) you have 1, expected 0.03162 (largest "
        "difference 0.968)",
    ),
    (
        masked_branch_softmax_over_queries,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): the softmax "
        "runs over the queries (dim=-2); each query's weights must sum to 1 over the keys: "
        "softmax(dim=-1)",
    ),
    (
        output_before_zeroing_empty_rows,
        "❌ scaled_dot_product_attention: with a mask with a query that may attend to nothing "
        "(mask (2, 4, 5)): output contains 12 NaN/inf value(s)",
    ),
    (
        clamped_scores,
        "❌ scaled_dot_product_attention: with large scores (q and k of size about 12, d_k = 16): "
        "weights is not right: at index (1, 2, 1) you have 0.25, expected 1 (largest difference "
        "0.75)",
    ),
    (
        output_by_naive_exp,
        "❌ scaled_dot_product_attention: with large scores (q and k of size about 12, d_k = 16): "
        "output contains 21 NaN/inf value(s)",
    ),
    (
        naive_softmax_with_a_fallback,
        "❌ scaled_dot_product_attention: with large scores (q and k of size about 12, d_k = 16): "
        "the gradients: the gradient with respect to q holds NaN or inf, so one training step "
        "would make the model NaN. the softmax overflows: scores in the hundreds make exp(score) "
        "= inf and the weights inf / inf = NaN. Subtract each row's maximum before exp "
        "(softmax(s) = softmax(s - max s)), or use torch.softmax / scores.softmax(dim=-1), which "
        "do it for you",
    ),
    (
        dropout_drawn_twice,
        "❌ scaled_dot_product_attention: the output with dropout_p=0.25 is not right: at index "
        "(2, 7, 0) you have -1.125, expected 0.03381 (largest difference 1.16)",
    ),
    (
        one_minus_mask,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised RuntimeError: Subtraction, "
        "the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
        "mask, use the `~` or `logical_not()` operator instead. The mask is boolean: use ~mask "
        "(not 1 - mask) for its opposite",
    ),
    (
        float_mask_inverted_by_subtraction,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised RuntimeError: masked_fill_ "
        "only supports boolean masks, but got mask with dtype float. The mask is boolean: fill "
        "with scores.masked_fill(~mask, float('-inf')) or torch.where(mask, scores, "
        "float('-inf'))",
    ),
    (
        where_with_an_integer_mask,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised RuntimeError: where "
        "expected condition to be a boolean tensor, but got a tensor with dtype Int. The mask is "
        "boolean: fill with scores.masked_fill(~mask, float('-inf')) or torch.where(mask, scores, "
        "float('-inf'))",
    ),
    (
        calls_its_dropout_helper_by_keyword,
        "❌ scaled_dot_product_attention: on inputs q (8, 16, 5), k (8, 16, 5), v (8, 16, 3), "
        "mask=None, dropout_p=0.25 your code raised TypeError: _drop() got an unexpected keyword "
        "argument 'dropout_p'",
    ),
    (
        calls_its_helper_with_a_mask_keyword,
        "❌ scaled_dot_product_attention: with a causal mask (T, T) (mask (5, 5)): on inputs q (2, "
        "5, 4), k (2, 5, 4), v (2, 5, 6), mask (5, 5) your code raised TypeError: _masked() got "
        "an unexpected keyword argument 'mask'",
    ),
    (
        output_scaled_again,
        "❌ scaled_dot_product_attention: output is not right: at index (0, 1) you have -0.4465, "
        "expected -1.181 (largest difference 0.735)",
    ),
    (
        squeezed,
        "❌ scaled_dot_product_attention: on q (1, 4, 5), k (1, 3, 5), v (1, 3, 2) float64: "
        "weights has shape (4, 3), expected (1, 4, 3). They are (..., T_q, T_k): one row per "
        "query, one column per key",
    ),
]


@pytest.mark.parametrize("answer, line", VERDICTS, ids=[v[0].__name__ for v in VERDICTS])
def test_the_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.scaled_dot_product_attention, answer)
    assert printed == line + "\n"
    assert passed is (answer is by_masked_fill)
