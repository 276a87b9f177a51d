"""course.multihead at its edges: `attn` before use, dropout's range, every error message.

Written against the mutants that tools/mutation.py found alive: each test pins one
behaviour no other test did. Error messages are compared whole, because a learner reads
them whole: they name what was expected and what came.
"""

import pytest
import torch
from torch import nn

from course.multihead import MultiHeadAttention, load_from_torch, merge_heads, split_heads

B, T, D_MODEL, H = 2, 5, 12, 3


def _x(T_=T, d=D_MODEL, seed=0):
    return torch.randn(B, T_, d, generator=torch.Generator().manual_seed(seed))  # (B, T, d)


def _message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


# -------------------------------------------------------------- the module ----------


def test_attn_is_none_until_the_first_forward():
    mha = MultiHeadAttention(D_MODEL, H)
    assert mha.attn is None
    mha(_x(), _x(), _x())
    assert mha.attn.shape == (B, H, T, T)


def test_d_k_is_a_whole_head_size():
    mha = MultiHeadAttention(D_MODEL, H)
    assert type(mha.d_k) is int and mha.d_k == 4
    assert (mha.d_model, mha.n_heads, mha.dropout) == (D_MODEL, H, 0.0)


@pytest.mark.parametrize("dropout", [1.0, 1.5, -0.1])
def test_dropout_outside_zero_to_one_is_refused(dropout):
    message = _message(lambda: MultiHeadAttention(D_MODEL, H, dropout=dropout))
    assert message == f"dropout must be in [0, 1), got {dropout}"


def test_dropout_zero_and_just_below_one_are_accepted():
    assert MultiHeadAttention(D_MODEL, H, dropout=0.0).dropout == 0.0
    assert MultiHeadAttention(D_MODEL, H, dropout=0.99).dropout == 0.99


@pytest.mark.parametrize(
    "n_heads, message",
    [
        (0, "n_heads must be a positive int, got 0"),
        (-3, "n_heads must be a positive int, got -3"),
        (3.0, "n_heads must be a positive int, got 3.0"),
        ("3", "n_heads must be a positive int, got '3'"),
        (True, "n_heads must be a positive int, got True"),
        (
            5,
            "d_model must be divisible by n_heads: d_model=12, n_heads=5 "
            "(d_model / n_heads = 2.4 is not a whole head size d_k)",
        ),
    ],
    ids=["zero", "negative", "float", "str", "bool", "not a divisor"],
)
def test_a_bad_number_of_heads_is_named(n_heads, message):
    assert _message(lambda: MultiHeadAttention(D_MODEL, n_heads)) == message
    assert _message(lambda: split_heads(_x(), n_heads)) == message


@pytest.mark.parametrize(
    "which, bad, message",
    [
        ("query", torch.zeros(B, T, 8), "query must have shape (B, T, d_model=12), got (2, 5, 8)"),
        ("key", torch.zeros(T, D_MODEL), "key must have shape (B, T, d_model=12), got (5, 12)"),
        ("value", [[0.0] * D_MODEL], "value must have shape (B, T, d_model=12), got list"),
        (
            "value",
            torch.zeros(B, T + 1, D_MODEL),
            "key and value must have the same (B, T_k): key (2, 5, 12), value (2, 6, 12)",
        ),
        (
            "value",
            torch.zeros(B + 1, T, D_MODEL),
            "key and value must have the same (B, T_k): key (2, 5, 12), value (3, 5, 12)",
        ),
        (
            "key and value",  # a batch of 1 would broadcast against the queries' 2
            torch.zeros(1, T, D_MODEL),
            "query and key must have the same batch size B: query (2, 5, 12), key (1, 5, 12)",
        ),
    ],
    ids=["query d_model", "key 2-d", "value list", "value T_k", "value B", "key and value B 1"],
)
def test_a_bad_input_is_named_with_what_was_expected_and_what_came(which, bad, message):
    mha = MultiHeadAttention(D_MODEL, H)
    inputs = {"query": _x(), "key": _x(), "value": _x()} | dict.fromkeys(which.split(" and "), bad)
    assert _message(lambda: mha(**inputs)) == message
    assert mha.attn is None  # nothing was computed


def test_split_and_merge_name_a_wrong_input():
    assert _message(lambda: split_heads([[1.0]], 2)) == (
        "split_heads expects x of shape (B, T, d_model), got list"
    )
    assert _message(lambda: split_heads(torch.zeros(2, 3, 4, 5), 2)) == (
        "split_heads expects x of shape (B, T, d_model), got (2, 3, 4, 5)"
    )
    assert _message(lambda: merge_heads(None)) == (
        "merge_heads expects x of shape (B, h, T, d_k), got NoneType"
    )
    assert _message(lambda: merge_heads(torch.zeros(1, 2, 3, 4, 5))) == (
        "merge_heads expects x of shape (B, h, T, d_k), got (1, 2, 3, 4, 5)"
    )


# ------------------------------------------------------------ load_from_torch ----------


@pytest.mark.parametrize(
    "option", [{"add_bias_kv": True}, {"add_zero_attn": True}, {"kdim": 8}, {"vdim": 8}]
)
def test_load_from_torch_refuses_every_variant_it_cannot_copy(option):
    theirs = nn.MultiheadAttention(D_MODEL, H, batch_first=True, **option)
    assert _message(lambda: load_from_torch(MultiHeadAttention(D_MODEL, H), theirs)) == (
        "only the plain torch.nn.MultiheadAttention is supported: kdim = vdim = embed_dim, "
        "add_bias_kv=False, add_zero_attn=False"
    )


def test_load_from_torch_names_what_it_got_instead_of_a_torch_module():
    assert _message(lambda: load_from_torch(MultiHeadAttention(D_MODEL, H), nn.Linear(2, 2))) == (
        "expected a torch.nn.MultiheadAttention, got Linear"
    )


class _ThreeProjections(nn.Module):
    """Has w_q, w_k, w_v but no w_o: load_from_torch must say which one is missing."""

    def __init__(self):
        super().__init__()
        self.w_q, self.w_k, self.w_v = (nn.Linear(D_MODEL, D_MODEL) for _ in range(3))


def test_load_from_torch_names_the_projection_that_is_missing_or_the_wrong_size():
    theirs = nn.MultiheadAttention(D_MODEL, H, batch_first=True)
    assert _message(lambda: load_from_torch(_ThreeProjections(), theirs)) == (
        "ours.w_o must be an nn.Linear(12, 12), got None"
    )
    assert _message(lambda: load_from_torch(MultiHeadAttention(24, H), theirs)) == (
        "ours.w_q must be an nn.Linear(12, 12), "
        "got Linear(in_features=24, out_features=24, bias=True)"
    )


def test_load_from_torch_says_which_side_has_a_bias():
    with_bias = nn.MultiheadAttention(D_MODEL, H, batch_first=True)
    without = nn.MultiheadAttention(D_MODEL, H, bias=False, batch_first=True)
    assert _message(
        lambda: load_from_torch(MultiHeadAttention(D_MODEL, H, bias=False), with_bias)
    ) == ("ours.w_q has no bias but theirs has one: build both with the same bias= setting")
    assert _message(lambda: load_from_torch(MultiHeadAttention(D_MODEL, H), without)) == (
        "ours.w_q has a bias but theirs has none: build both with the same bias= setting"
    )


def test_from_torch_copies_the_dropout_and_the_bias_setting():
    theirs = nn.MultiheadAttention(D_MODEL, H, dropout=0.25, bias=False, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.dropout == 0.25 and ours.w_o.bias is None
    torch.testing.assert_close(ours.w_k.weight, theirs.in_proj_weight[D_MODEL : 2 * D_MODEL])


def test_any_rotary_base_above_1_is_a_base():
    """The rule is base > 1 (base ** (-2i / d_k) must shrink with i), not base >= 2."""
    assert MultiHeadAttention(D_MODEL, 2, rotary_base=1.5).rotary_base == 1.5
    with pytest.raises(ValueError, match=r"a base greater than 1 .* rotary_base=1$"):
        MultiHeadAttention(D_MODEL, 2, rotary_base=1)


def test_the_fused_path_names_the_scores_axes_of_a_bad_mask():
    """With fused=True the mask goes to PyTorch's kernel, checked first against the heads'
    scores (B, h, T_q, T_k), with those axes named."""
    mha = MultiHeadAttention(D_MODEL, H, fused=True)
    assert _message(
        lambda: mha(_x(), _x(), _x(), torch.ones(B, 1, T, T + 1, dtype=torch.bool))
    ) == (
        "mask of shape (2, 1, 5, 6) does not broadcast to the scores' shape "
        "(B, h, T_q, T_k) = (2, 3, 5, 5)"
    )
