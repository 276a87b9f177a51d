"""course.attention at its edges: every input check's message, small examples by hand.

Written against the mutants that tools/mutation.py found alive: each test pins one
behaviour that no other test did (the exact error messages, which name what was
expected and what came; the no-batch form of lesson 02's function; `attn` before use).
"""

import math

import numpy as np
import pytest
import torch

from course.attention import (
    AttentionHead,
    dot_product_attention,
    masked_softmax,
    scaled_dot_product_attention,
)

B, T_Q, T_K, D_K, D_V = 2, 4, 6, 5, 7  # every size differs, so a swapped axis shows


def _qkv():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(B, T_Q, D_K, generator=gen)  # (B, T_q, d_k)
    k = torch.randn(B, T_K, D_K, generator=gen)  # (B, T_k, d_k)
    v = torch.randn(B, T_K, D_V, generator=gen)  # (B, T_k, d_v)
    return {"q": q, "k": k, "v": v}


BAD_QKV = {  # what replaces one input -> the whole message
    "q is a list": ({"q": [[1.0]]}, "q must be a torch.Tensor, got list"),
    "k is an array": ({"k": np.zeros((T_K, D_K))}, "k must be a torch.Tensor, got ndarray"),
    "v is None": ({"v": None}, "v must be a torch.Tensor, got NoneType"),
    "q is 1-d": ({"q": torch.zeros(D_K)}, "q must have shape (..., T, d), got (5,)"),
    "k is 1-d": ({"k": torch.zeros(D_K)}, "k must have shape (..., T, d), got (5,)"),
    "v is 0-d": ({"v": torch.tensor(1.0)}, "v must have shape (..., T, d), got ()"),
    "d_k differs": (
        {"k": torch.zeros(B, T_K, 3)},
        "q and k must share d_k (last dim): q is (2, 4, 5), k is (2, 6, 3)",
    ),
    "T_k differs": (
        {"v": torch.zeros(B, 3, D_V)},
        "k and v must have the same length T_k (dim -2): k is (2, 6, 5), v is (2, 3, 7)",
    ),
}


@pytest.mark.parametrize("attention", [dot_product_attention, scaled_dot_product_attention])
@pytest.mark.parametrize("case", BAD_QKV)
def test_each_bad_input_is_named_with_what_was_expected_and_what_came(attention, case):
    change, message = BAD_QKV[case]
    with pytest.raises(ValueError) as error:
        attention(**(_qkv() | change))
    assert str(error.value) == message


@pytest.mark.parametrize(
    "mask, message",
    [
        (torch.ones(T_Q, T_K), "mask must be a bool tensor (True = may attend), got torch.float32"),
        (
            torch.ones(T_Q, T_K, dtype=torch.long),
            "mask must be a bool tensor (True = may attend), got torch.int64",
        ),
        ([[True] * T_K] * T_Q, "mask must be a bool tensor (True = may attend), got list"),
        (
            torch.ones(3, T_Q, T_K, dtype=torch.bool),
            "mask of shape (3, 4, 6) does not broadcast to the scores' shape "
            "(..., T_q, T_k) = (2, 4, 6)",
        ),
    ],
    ids=["float", "long", "list", "batch of 3"],
)
def test_a_bad_mask_is_named_with_what_was_expected_and_what_came(mask, message):
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(**_qkv(), mask=mask)
    assert str(error.value) == message


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5])
def test_dropout_p_outside_zero_to_one_is_named(p):
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(**_qkv(), dropout_p=p)
    assert str(error.value) == f"dropout_p must be in [0, 1), got {p}"


def test_dot_product_attention_by_hand_on_one_unbatched_sequence():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # (T_q=2, d_k=2): no batch axis
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T_k=3, d_k=2)
    v = torch.tensor([[1.0], [10.0], [100.0]])  # (T_k=3, d_v=1)
    output, weights = dot_product_attention(q, k, v)
    scores = [[1.0, 0.0, 1.0], [0.0, 2.0, 2.0]]  # q . k for every pair, unscaled
    expected = torch.tensor([[math.exp(s) for s in row] for row in scores])
    expected = expected / expected.sum(dim=1, keepdim=True)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(output, expected @ v)
    assert output.shape == (2, 1) and weights.shape == (2, 3)


def test_scaled_attention_divides_by_sqrt_d_k_on_a_hand_example():
    q = torch.tensor([[[2.0, 2.0, 2.0, 2.0]]])  # (1, 1, d_k=4): sqrt(d_k) = 2
    k = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]])  # (1, 2, 4)
    v = torch.tensor([[[0.0], [1.0]]])  # (1, 2, 1)
    output, weights = scaled_dot_product_attention(q, k, v)
    p = math.exp(1.0) / (math.exp(1.0) + 1.0)  # scores 2 / 2 = 1 and 0 / 2 = 0
    torch.testing.assert_close(weights, torch.tensor([[[p, 1.0 - p]]]))
    torch.testing.assert_close(output, torch.tensor([[[1.0 - p]]]))


def test_masked_softmax_renormalises_over_the_allowed_keys_and_zeroes_empty_rows():
    scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    mask = torch.tensor([[True, False, True], [False, False, False]])
    weights = masked_softmax(scores, mask)
    e2 = math.exp(2.0)
    torch.testing.assert_close(weights[0], torch.tensor([1 / (1 + e2), 0.0, e2 / (1 + e2)]))
    assert torch.equal(weights[1], torch.zeros(3))  # may attend to nothing: zeros, no NaN
    torch.testing.assert_close(masked_softmax(scores), scores.softmax(dim=-1))


def test_without_dropout_no_random_numbers_are_drawn():
    """A notebook that evaluates attention between seeded steps prints the same numbers."""
    torch.manual_seed(0)
    scaled_dot_product_attention(**_qkv())
    after_attention = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), after_attention)
    torch.manual_seed(0)
    scaled_dot_product_attention(**_qkv(), dropout_p=0.5)
    assert not torch.equal(torch.rand(3), after_attention)  # dropout itself does draw


def test_attention_head_keeps_no_weights_until_its_first_forward():
    head = AttentionHead(d_model=8, d_k=4)
    assert head.attn is None
    head(torch.randn(B, 3, 8, generator=torch.Generator().manual_seed(1)))
    assert head.attn.shape == (B, 3, 3)
    assert head.w_v.out_features == 4  # d_v defaults to d_k


def test_attention_head_names_a_wrong_input():
    head = AttentionHead(d_model=8, d_k=4)
    with pytest.raises(ValueError) as error:
        head(torch.zeros(3, 8))
    assert str(error.value) == "x must have shape (B, T, d_model=8), got (3, 8)"
    with pytest.raises(ValueError) as error:
        head([[0.0] * 8])
    assert str(error.value) == "x must have shape (B, T, d_model=8), got list"
