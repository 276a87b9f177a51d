"""The lesson 02 checker: it accepts every correct answer and names each usual mistake.

Each wrong answer below is one a learner really writes; the test asserts the checker
returns False *and* prints the diagnosis for that mistake, not a generic "wrong".
"""

import math

import pytest
import torch
import torch.nn.functional as F

from course import check

# k.T on a batch is one of the mistakes under test; torch warns about it, rightly.
pytestmark = pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")


def by_matmul(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return weights @ v, weights


def by_einsum(q, k, v):
    weights = torch.softmax(torch.einsum("...qd,...kd->...qk", q, k), dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, v), weights


def by_functional(q, k, v):
    weights = F.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)
    return torch.matmul(weights, v), weights


def by_exp_and_sum(q, k, v):
    scores = q @ k.transpose(-2, -1)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ v, weights


def as_list(q, k, v):
    return list(by_matmul(q, k, v))


@pytest.mark.parametrize("answer", [by_matmul, by_einsum, by_functional, by_exp_and_sum, as_list])
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.dot_product_attention, answer)
    assert passed is True and "✅ dot_product_attention: passed" in printed, printed


def stub(q, k, v):
    # YOUR CODE HERE
    raise NotImplementedError


def softmax_over_queries(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-2)
    return weights @ v, weights


def no_softmax(q, k, v):
    weights = q @ k.transpose(-2, -1)
    return weights @ v, weights


def scaled(q, k, v):
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
    return weights @ v, weights


def swapped_return(q, k, v):
    output, weights = by_matmul(q, k, v)
    return weights, output


def k_not_transposed(q, k, v):
    weights = (q @ k).softmax(dim=-1)
    return weights @ v, weights


def k_dot_T(q, k, v):  # fine on one sequence, wrong on a batch
    weights = (q @ k.T).softmax(dim=-1)
    return weights @ v, weights


def global_softmax(q, k, v):
    scores = q @ k.transpose(-2, -1)
    weights = scores.flatten(-2).softmax(-1).view_as(scores)
    return weights @ v, weights


def scores_times_v(q, k, v):
    scores = q @ k.transpose(-2, -1)
    return scores @ v, scores.softmax(dim=-1)


def only_output(q, k, v):
    return by_matmul(q, k, v)[0]


def in_place(q, k, v):
    q *= 1.0 + 1e-3
    return by_matmul(q, k, v)


def weights_sliced(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output, weights[..., :-1]


def temperature_two(q, k, v):
    weights = (q @ k.transpose(-2, -1) / 2).softmax(dim=-1)  # a fixed temperature
    return weights @ v, weights


def weights_times_v_transposed(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return weights @ v.transpose(-2, -1), weights  # the bad product is not q @ k


def v_times_weights(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return v @ weights, weights


def computed_in_float64(q, k, v):
    weights = (q.double() @ k.double().transpose(-2, -1)).softmax(dim=-1)
    return weights @ v.double(), weights  # float64 whatever came in


def forced_to_float32(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output.float(), weights.float()


def flattened_with_view(q, k, v):
    """bmm over the batch axes flattened with .view: breaks on non-contiguous inputs."""
    *batch, T_q, d_k = q.shape
    q3, k3, v3 = (t.view(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    weights = torch.bmm(q3, k3.transpose(1, 2)).softmax(dim=-1)
    output = torch.bmm(weights, v3)
    return output.view(*batch, T_q, -1), weights.view(*batch, T_q, -1)


def weights_detached(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1).detach()
    return weights @ v, weights


def arguments_in_another_order(k, q, v):
    return by_matmul(q, k, v)


WRONG = [
    (stub, "⏳ dot_product_attention: not implemented yet"),
    (temperature_two, "the scores are divided by 2 before the softmax"),
    (weights_times_v_transposed, "The output is weights (..., T_q, T_k) @ v"),
    (v_times_weights, "The output is weights (..., T_q, T_k) @ v"),
    (computed_in_float64, "is float64, but the inputs were float32"),
    (forced_to_float32, "is float32, but the inputs were float64"),
    (flattened_with_view, "use .reshape(...) instead of .view(...)"),
    (weights_detached, "carries no gradient"),
    (arguments_in_another_order, "the lesson's signature is dot_product_attention(q, k, v)"),
    (softmax_over_queries, "softmax runs over the queries (dim=-2)"),
    (no_softmax, "raw scores"),
    (scaled, "divided by sqrt(d_k)"),
    (swapped_return, "wrong order"),
    (k_not_transposed, "k's last two axes swapped"),
    (k_dot_T, "not k.T"),
    (global_softmax, "over all entries at once"),
    (scores_times_v, "multiplies the raw scores by v"),
    (only_output, "should return the tuple (output, weights)"),
    (in_place, "in place"),
    (weights_sliced, "weights has shape"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_mistake_is_rejected_and_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.dot_product_attention, answer)
    assert passed is False and diagnosis in printed, printed
