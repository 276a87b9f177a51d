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
