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


def four_d_only(q, k, v):  # written for split heads (B, h, T, d_k): axes counted from the front
    weights = (q @ k.transpose(2, 3)).softmax(dim=-1)
    return weights @ v, weights


def softmax_over_dim_3(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=3)
    return weights @ v, weights


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
    (four_d_only, "Your code counts axes from the front"),
    (softmax_over_dim_3, "Your code counts axes from the front"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_each_mistake_is_rejected_and_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.dot_product_attention, answer)
    assert passed is False and diagnosis in printed, printed


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the case it names (shapes, float64, non-contiguous) and the hint it adds.


def transposes_q_instead_of_k(q, k, v):
    weights = (q.transpose(-2, -1) @ k).softmax(dim=-1)
    return weights @ v, weights


def scores_from_the_values(q, k, v):
    weights = (q @ v.transpose(-2, -1)).softmax(dim=-1)  # v where k belongs
    return weights @ k, weights


def weights_transposed_before_v(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    return weights.transpose(-2, -1) @ v, weights


def weights_in_float32(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output, weights.float()


def output_in_float32(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output.float(), weights


def scores_as_output(q, k, v):
    scores = q @ k.transpose(-2, -1)
    return scores, scores.softmax(dim=-1)  # the wrong variable returned first


def log_softmax(q, k, v):
    weights = (q @ k.transpose(-2, -1)).log_softmax(dim=-1)
    return weights @ v, weights


def sigmoid_not_softmax(q, k, v):
    weights = torch.sigmoid(q @ k.transpose(-2, -1))
    return weights @ v, weights


def uniform_weights(q, k, v):
    scores = q @ k.transpose(-2, -1)
    weights = torch.full_like(scores, 1 / k.shape[-2])  # every key alike: a plain average
    return weights @ v, weights


def output_scaled(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output / math.sqrt(q.shape[-1]), weights


def softmax_over_dim_1(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(dim=1)  # the keys on one sequence only
    return weights @ v, weights


def q_through_numpy(q, k, v):
    q = torch.from_numpy(q.numpy())  # fails once q requires grad
    return by_matmul(q, k, v)


def keys_detached(q, k, v):
    return by_matmul(q, k.detach(), v)


def values_through_numpy(q, k, v):
    return by_matmul(q, k, torch.from_numpy(v.detach().numpy()))


def nan_made_and_patched(q, k, v):
    """The right values, with a 0/0 on the way patched by nan_to_num: NaN gradients."""
    output, weights = by_matmul(q, k, v)
    nan = output / (output - output)
    return output + torch.nan_to_num(nan, nan=0.0, posinf=0.0, neginf=0.0), weights


def rows_off_within_the_tolerance(q, k, v):
    """Each weight within the checker's tolerance of the right one, but the rows no
    longer sum to 1: a distribution over the keys must."""
    output, weights = by_matmul(q, k, v)
    return output, weights * (1 + 0.99e-4) + 1e-5 * 0.99


def squeezed(q, k, v):
    output, weights = by_matmul(q, k, v)
    return output.squeeze(), weights.squeeze()  # a batch of one loses its axis


VERDICTS = [
    (
        four_d_only,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2). "
        "Your code counts axes from the front (k.transpose(2, 3), softmax(dim=3)), which works "
        "on 4-D inputs (B, h, T, d_k) only: count them from the end, k.transpose(-2, -1) and "
        "softmax(dim=-1), so that one sequence (T, d_k) and a batch (B, T, d_k) work too",
    ),
    (
        by_matmul,
        "✅ dot_product_attention: passed (4 input shapes, one sequence, batched, non-contiguous "
        "and float64; values and gradients matched the reference).",
    ),
    (
        stub,
        "⏳ dot_product_attention: not implemented yet. Replace `raise NotImplementedError` with "
        "your code, run that cell, then this one again.",
    ),
    (
        temperature_two,
        "❌ dot_product_attention: the scores are divided by 2 before the softmax (a temperature): "
        "here, use the plain dot product q·k",
    ),
    (
        weights_times_v_transposed,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x5 and 6x5). The output is "
        "weights (..., T_q, T_k) @ v (..., T_k, d_v): check the order and that v is used as it "
        "is, not transposed",
    ),
    (
        v_times_weights,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x6 and 3x5). The output is "
        "weights (..., T_q, T_k) @ v (..., T_k, d_v): check the order and that v is used as it "
        "is, not transposed",
    ),
    (
        computed_in_float64,
        "❌ dot_product_attention: weights is float64, but the inputs were float32: keep the "
        "inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; no .float() or "
        ".double())",
    ),
    (
        forced_to_float32,
        "❌ dot_product_attention: on q (1, 4, 5), k (1, 3, 5), v (1, 3, 2) float64: weights is "
        "float32, but the inputs were float64: keep the inputs' dtype (make new tensors with "
        "x.new_zeros(...) or dtype=x.dtype; no .float() or .double())",
    ),
    (
        flattened_with_view,
        "❌ dot_product_attention: on q (2, 2, 4, 8), k (2, 2, 3, 8), v (2, 2, 3, 2) "
        "non-contiguous: on inputs q (2, 2, 4, 8), k (2, 2, 3, 8), v (2, 2, 3, 2) your code "
        "raised RuntimeError: view size is not compatible with input tensor's size and stride (at "
        "least one dimension spans across two contiguous subspaces). Use .reshape(...) instead. "
        "The tensor is not contiguous in memory (a transpose or a slice made it so): use "
        ".reshape(...) instead of .view(...), or .contiguous().view(...)",
    ),
    (
        weights_detached,
        "❌ dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): the result carries no "
        "gradient, so nothing before it could learn. Something cut it from the computation graph: "
        ".detach(), a `with torch.no_grad():` block, or a new tensor made from values "
        "(torch.tensor(...), .item(), .numpy())",
    ),
    (
        arguments_in_another_order,
        "❌ dot_product_attention: your parameters come in the order (k, q, v); the lesson's "
        "signature is dot_product_attention(q, k, v), and the notebooks pass the arguments in "
        "that order",
    ),
    (
        softmax_over_queries,
        "❌ dot_product_attention: the softmax runs over the queries (dim=-2); each query's "
        "weights must sum to 1 over the keys: softmax(dim=-1)",
    ),
    (
        no_softmax,
        "❌ dot_product_attention: the weights are the raw scores q·k: turn them into a "
        "distribution over the keys with a softmax (dim=-1)",
    ),
    (
        scaled,
        "❌ dot_product_attention: the scores are divided by sqrt(d_k): that's lesson 03's idea. "
        "Here, use the plain dot product q·k",
    ),
    (
        swapped_return,
        "❌ dot_product_attention: the results come back in the wrong order: return (output, "
        "weights)",
    ),
    (
        k_not_transposed,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x7 and 5x7). The scores are q "
        "@ k with k's last two axes swapped: k.transpose(-2, -1)",
    ),
    (
        k_dot_T,
        "❌ dot_product_attention: on inputs q (2, 3, 9), k (2, 5, 9), v (2, 5, 6) your code "
        "raised RuntimeError: The size of tensor a (2) must match the size of tensor b (9) at "
        "non-singleton dimension 0. Check which axes you multiply: scores = q (..., T_q, d_k) @ "
        "k.transpose(-2, -1) (..., d_k, T_k); output = weights (..., T_q, T_k) @ v (..., T_k, "
        "d_v). It works on one sequence but not on a batch: use k.transpose(-2, -1), not k.T or "
        "k.t(), so the batch axes stay in front",
    ),
    (
        global_softmax,
        "❌ dot_product_attention: the softmax is taken over all entries at once; take it per "
        "query, over the keys (dim=-1)",
    ),
    (
        scores_times_v,
        "❌ dot_product_attention: the output multiplies the raw scores by v: multiply the softmax "
        "weights instead",
    ),
    (
        only_output,
        "❌ dot_product_attention: should return the tuple (output, weights), got a tensor of "
        "shape (3, 6)",
    ),
    (
        in_place,
        "❌ dot_product_attention: your code changed one of its input tensors in place; compute "
        "new tensors instead (e.g. x = x * 2, not x *= 2)",
    ),
    (
        weights_sliced,
        "❌ dot_product_attention: weights has shape (3, 4), expected (3, 5). They are (..., T_q, "
        "T_k): one row per query, one column per key",
    ),
    (
        transposes_q_instead_of_k,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (7x3 and 5x7). Check which axes "
        "you multiply: scores = q (..., T_q, d_k) @ k.transpose(-2, -1) (..., d_k, T_k); output = "
        "weights (..., T_q, T_k) @ v (..., T_k, d_v)",
    ),
    (
        scores_from_the_values,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x7 and 6x5). Check which axes "
        "you multiply: scores = q (..., T_q, d_k) @ k.transpose(-2, -1) (..., d_k, T_k); output = "
        "weights (..., T_q, T_k) @ v (..., T_k, d_v)",
    ),
    (
        weights_transposed_before_v,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x3 and 5x6). The output is "
        "weights (..., T_q, T_k) @ v (..., T_k, d_v): check the order and that v is used as it "
        "is, not transposed",
    ),
    (
        weights_in_float32,
        "❌ dot_product_attention: on q (1, 4, 5), k (1, 3, 5), v (1, 3, 2) float64: weights is "
        "float32, but the inputs were float64: keep the inputs' dtype (make new tensors with "
        "x.new_zeros(...) or dtype=x.dtype; no .float() or .double())",
    ),
    (
        output_in_float32,
        "❌ dot_product_attention: on q (1, 4, 5), k (1, 3, 5), v (1, 3, 2) float64: output is "
        "float32, but the inputs were float64: keep the inputs' dtype (make new tensors with "
        "x.new_zeros(...) or dtype=x.dtype; no .float() or .double())",
    ),
    (
        scores_as_output,
        "❌ dot_product_attention: output has shape (3, 5), expected (3, 6). It is (..., T_q, "
        "d_v): one weighted average of the values per query",
    ),
    (
        log_softmax,
        "❌ dot_product_attention: weights is not right: at index (0, 2) you have -6.882, expected "
        "0.001026 (largest difference 6.88)",
    ),
    (
        sigmoid_not_softmax,
        "❌ dot_product_attention: weights is not right: at index (0, 4) you have 0.735, expected "
        "0.1335 (largest difference 0.602)",
    ),
    (
        uniform_weights,
        "❌ dot_product_attention: weights is not right: at index (0, 0) you have 0.2, expected "
        "0.8347 (largest difference 0.635)",
    ),
    (
        output_scaled,
        "❌ dot_product_attention: output is not right: at index (2, 4) you have 0.5645, expected "
        "1.494 (largest difference 0.929)",
    ),
    (
        softmax_over_dim_1,
        "❌ dot_product_attention: the softmax runs over the queries (dim=-2); each query's "
        "weights must sum to 1 over the keys: softmax(dim=-1)",
    ),
    (
        q_through_numpy,
        "❌ dot_product_attention: on inputs q (3, 7), k (5, 7), v (5, 6) your code raised "
        "RuntimeError: Can't call numpy() on Tensor that requires grad. Use "
        "tensor.detach().numpy() instead.",
    ),
    (
        keys_detached,
        "❌ dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): no gradient reaches k, so it "
        "could not learn: something between k and the result is cut from the graph (.detach(), "
        "torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        values_through_numpy,
        "❌ dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): no gradient reaches v, so it "
        "could not learn: something between v and the result is cut from the graph (.detach(), "
        "torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        nan_made_and_patched,
        "❌ dot_product_attention: on q (3, 7), k (5, 7), v (5, 6): the gradient with respect to q "
        "holds NaN or inf, so one training step would make the model NaN",
    ),
    (
        rows_off_within_the_tolerance,
        "❌ dot_product_attention: weights do not sum to 1 over the key axis: softmax over dim=-1?",
    ),
    (
        squeezed,
        "❌ dot_product_attention: on q (1, 4, 5), k (1, 3, 5), v (1, 3, 2) float64: weights has "
        "shape (4, 3), expected (1, 4, 3). They are (..., T_q, T_k): one row per query, one "
        "column per key",
    ),
]


@pytest.mark.parametrize("answer, line", VERDICTS, ids=[v[0].__name__ for v in VERDICTS])
def test_the_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.dot_product_attention, answer)
    assert printed == line + "\n"
    assert passed is (answer is by_matmul)
