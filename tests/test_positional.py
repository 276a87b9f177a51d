"""course.positional: the sinusoidal table checked against the formula computed with math
(torch has no sinusoidal encoding to compare with), the shift map, the modules the full
model uses, and rotary position embeddings."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from course.positional import (
    PositionalEncoding,
    TokenEmbedding,
    apply_rotary,
    frequencies,
    shift_matrix,
    sinusoidal_encoding,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _by_hand(pos: int, j: int, d_model: int) -> float:
    """PE(pos, j) from the paper's formula, in plain Python floats."""
    i = j // 2
    angle = pos / 10000 ** (2 * i / d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


# ---------------------------------------------------------------- the table ----------


def test_entries_computed_by_hand():
    # d_model = 8: 10000^(2i/8) = 10^i, so w_i = 1, 0.1, 0.01, 0.001
    pe = sinusoidal_encoding(10, 8)
    assert pe[3, 2].item() == pytest.approx(math.sin(0.3), abs=1e-7)  # sin(3 / 10)
    assert pe[3, 3].item() == pytest.approx(math.cos(0.3), abs=1e-7)
    assert pe[5, 0].item() == pytest.approx(math.sin(5.0), abs=1e-7)
    assert pe[7, 7].item() == pytest.approx(math.cos(0.007), abs=1e-7)
    assert pe[0].tolist() == [0.0, 1.0] * 4  # position 0: sin 0 = 0, cos 0 = 1


@pytest.mark.parametrize("max_len, d_model", [(50, 16), (7, 5), (3, 1), (1, 4), (200, 512)])
def test_every_entry_matches_the_formula(max_len, d_model):
    pe = sinusoidal_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    want = torch.tensor(
        [[_by_hand(p, j, d_model) for j in range(d_model)] for p in range(max_len)],
        dtype=torch.float64,
    )
    assert torch.allclose(pe.double(), want, atol=1e-7, rtol=0)


def test_matches_an_independent_numpy_computation():
    max_len, d_model = 100, 64
    angle = np.arange(max_len)[:, None] / np.power(10000.0, np.arange(0, d_model, 2) / d_model)
    want = np.empty((max_len, d_model))
    want[:, 0::2], want[:, 1::2] = np.sin(angle), np.cos(angle)
    assert np.allclose(sinusoidal_encoding(max_len, d_model).numpy(), want, atol=1e-7)


def test_odd_d_model_ends_with_a_sin():
    pe = sinusoidal_encoding(20, 7)
    assert pe.shape == (20, 7)
    last = torch.tensor([math.sin(p / 10000 ** (6 / 7)) for p in range(20)])
    assert torch.allclose(pe[:, 6], last, atol=1e-7)
    # the first six columns are pairs of sin and cos with the same angle
    assert torch.allclose(pe[:, 0:6:2] ** 2 + pe[:, 1:6:2] ** 2, torch.ones(20, 3), atol=1e-6)


def test_every_pair_is_a_point_on_the_unit_circle():
    pe = sinusoidal_encoding(300, 32)
    assert torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(300, 16), atol=1e-6)
    assert torch.allclose(pe.norm(dim=-1), torch.full((300,), 4.0), atol=1e-5)  # sqrt(32 / 2)


def test_wavelengths_run_from_2_pi_towards_10000_2_pi():
    w = frequencies(512)
    assert w.shape == (256,) and w.dtype == torch.float64
    assert w[0].item() == 1.0  # wavelength 2 pi
    assert 2 * math.pi / w[-1].item() == pytest.approx(2 * math.pi * 10000 ** (510 / 512))
    assert bool((w[1:] < w[:-1]).all())  # slower and slower
    assert frequencies(8).tolist() == pytest.approx([1, 0.1, 0.01, 0.001])
    assert frequencies(4, base=100.0).tolist() == pytest.approx([1, 0.1])


def test_a_longer_table_starts_with_the_shorter_one():
    assert torch.equal(sinusoidal_encoding(100, 16)[:30], sinusoidal_encoding(30, 16))


def test_the_table_follows_the_default_dtype():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert sinusoidal_encoding(3, 4).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize(
    "max_len, d_model, message",
    [
        (0, 8, r"max_len must be a positive int, got 0"),
        (10, -2, r"d_model must be a positive int, got -2"),
        (10.0, 8, r"max_len must be a positive int, got 10.0 \(float\)"),
        (10, "8", r"d_model must be a positive int, got '8' \(str\)"),
        (True, 8, r"max_len must be a positive int, got True \(bool\)"),
    ],
)
def test_bad_sizes_are_refused(max_len, d_model, message):
    with pytest.raises(ValueError, match=message):
        sinusoidal_encoding(max_len, d_model)


def test_numpy_ints_are_sizes_too():
    assert sinusoidal_encoding(np.int64(4), np.int32(6)).shape == (4, 6)


def test_frequencies_refuse_a_bad_base():
    with pytest.raises(ValueError, match=r"base must be a number greater than 1, got 1.0"):
        frequencies(8, base=1.0)
    with pytest.raises(ValueError, match=r"greater than 1, got 'x'"):
        frequencies(8, base="x")


# ------------------------------------------------------ shifting by k positions ----------


@pytest.mark.parametrize("k", [1, 3, 17, -5, 0])
def test_shift_matrix_maps_every_position_to_k_later(k):
    d_model, max_len = 16, 120
    pe = sinusoidal_encoding(max_len, d_model).double()
    M = shift_matrix(k, d_model).double()  # (d_model, d_model)
    start, stop = max(0, -k), max_len - max(0, k)
    shifted = pe[start:stop] @ M.T  # each row: M_k PE(pos)
    assert torch.allclose(shifted, pe[start + k : stop + k], atol=1e-6)


def test_shift_matrix_is_a_rotation_per_pair():
    M = shift_matrix(4, 8).double()
    assert torch.allclose(M.T @ M, torch.eye(8, dtype=torch.float64), atol=1e-6)  # orthogonal
    assert torch.count_nonzero(M[0:2, 2:]) == 0 and torch.count_nonzero(M[2:4, :2]) == 0
    w = 0.1  # pair 1 of d_model = 8
    block = torch.tensor([[math.cos(4 * w), math.sin(4 * w)], [-math.sin(4 * w), math.cos(4 * w)]])
    assert torch.allclose(M[2:4, 2:4].float(), block, atol=1e-7)


def test_shifts_compose():
    assert torch.allclose(shift_matrix(3, 12) @ shift_matrix(4, 12), shift_matrix(7, 12), atol=1e-6)


def test_shift_matrix_errors():
    with pytest.raises(ValueError, match=r"even d_model, got 7"):
        shift_matrix(1, 7)
    with pytest.raises(ValueError, match=r"k must be an int .*got 1.5"):
        shift_matrix(1.5, 8)


# ------------------------------------------------------------- the modules ----------


def test_token_embedding_scales_by_sqrt_d_model():
    torch.manual_seed(0)
    embed = TokenEmbedding(11, 16)
    assert isinstance(embed.embedding, nn.Embedding)
    assert embed.embedding.weight.shape == (11, 16)
    tokens = torch.tensor([[1, 5, 10], [0, 0, 3]])  # (B=2, T=3)
    out = embed(tokens)
    assert out.shape == (2, 3, 16) and out.dtype == torch.float32
    assert torch.allclose(out, embed.embedding.weight[tokens] * 4.0)  # sqrt(16) = 4


def test_token_embedding_weight_can_be_tied():
    embed, output = TokenEmbedding(11, 16), nn.Linear(16, 11, bias=False)
    output.weight = embed.embedding.weight  # what the full model does with tie_embeddings
    embed(torch.tensor([[1, 2]])).sum().backward()
    assert output.weight.grad is not None and output.weight.grad[1].abs().sum() > 0


@pytest.mark.parametrize(
    "tokens, message",
    [
        (torch.tensor([1, 2]), r"\(B, T\) tensor of token ids, got \(2,\)"),
        (torch.tensor([[1.0, 2.0]]), r"integer token ids \(torch.long\), got torch.float32"),
        (torch.tensor([[1, 11]]), r"tokens holds token ids from 1 to 11, but its vocabulary"),
        (torch.tensor([[-1, 2]]), r"token ids from -1 to 2"),
        ([[1, 2]], r"got list"),
    ],
)
def test_token_embedding_refuses_bad_tokens(tokens, message):
    with pytest.raises(ValueError, match=message):
        TokenEmbedding(11, 16)(tokens)


def test_token_embedding_refuses_bad_sizes():
    with pytest.raises(ValueError, match=r"vocab_size must be a positive int, got 0"):
        TokenEmbedding(0, 16)


def test_positional_encoding_adds_the_table():
    module = PositionalEncoding(8, max_len=50)
    assert isinstance(module.pe, torch.Tensor) and module.pe.shape == (50, 8)
    assert "pe" in dict(module.named_buffers()) and not list(module.parameters())
    x = torch.randn(3, 20, 8, generator=_gen())  # (B, T, d_model)
    out = module(x)
    assert out.shape == (3, 20, 8) and out.dtype == torch.float32
    assert torch.equal(out, x + sinusoidal_encoding(20, 8))


def test_positional_encoding_keeps_the_inputs_dtype():
    module = PositionalEncoding(8, max_len=50)
    x = torch.randn(2, 5, 8, generator=_gen(), dtype=torch.float64)
    out = module(x)
    assert out.dtype == torch.float64
    assert torch.allclose(out, x + sinusoidal_encoding(5, 8).double())
    assert module(x.to(torch.bfloat16)).dtype == torch.bfloat16


def test_positional_encoding_follows_the_module_to_another_dtype_and_back():
    module = PositionalEncoding(8, max_len=10).double()
    assert module.pe.dtype == torch.float64
    assert "pe" not in module.state_dict()  # recomputed from the formula, not saved


def test_positional_encoding_dropout_only_while_training():
    torch.manual_seed(0)
    module = PositionalEncoding(16, max_len=64, dropout=0.5)
    x = torch.randn(4, 64, 16, generator=_gen())
    with_positions = x + sinusoidal_encoding(64, 16)
    module.eval()
    assert torch.equal(module(x), with_positions)
    module.train()
    dropped = module(x)
    zero = dropped == 0
    assert 0.45 < zero.float().mean().item() < 0.55
    assert torch.allclose(dropped[~zero], with_positions[~zero] * 2)  # scaled by 1 / (1 - p)
    assert not torch.equal(module(x) == 0, zero)  # a new mask every call


def test_positional_encoding_gradient_flows_to_x():
    x = torch.randn(2, 6, 8, generator=_gen(), requires_grad=True)
    PositionalEncoding(8, max_len=10)(x).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def test_positional_encoding_refuses_too_long_a_sequence():
    with pytest.raises(ValueError, match=r"T=11 positions, longer than max_len=10"):
        PositionalEncoding(8, max_len=10)(torch.zeros(1, 11, 8))


@pytest.mark.parametrize(
    "x, message",
    [
        (torch.zeros(2, 5, 6), r"\(B, T, d_model=8\), got \(2, 5, 6\)"),
        (torch.zeros(5, 8), r"\(B, T, d_model=8\), got \(5, 8\)"),
        ("x", r"got str"),
    ],
)
def test_positional_encoding_refuses_a_wrong_shape(x, message):
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(8, max_len=10)(x)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"dropout": -0.1}, r"got -0.1"),
        ({"dropout": "0.1"}, r"dropout must be a number in \[0, 1\), got '0.1'"),
        ({"max_len": 0}, r"max_len must be a positive int, got 0"),
    ],
)
def test_positional_encoding_refuses_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PositionalEncoding(8, **kwargs)


def test_the_full_models_input_layer():
    """Embed, scale, add positions, dropout: the paper's input to the first layer."""
    torch.manual_seed(0)
    embed, positions = TokenEmbedding(20, 32), PositionalEncoding(32, dropout=0.1).eval()
    tokens = torch.randint(0, 20, (2, 9), generator=_gen())
    x = positions(embed(tokens))
    want = embed.embedding(tokens) * math.sqrt(32) + sinusoidal_encoding(9, 32)
    assert x.shape == (2, 9, 32) and torch.allclose(x, want)


# ------------------------------------------------------------------ rotary ----------


def test_rotary_dot_product_depends_only_on_the_offset():
    d = 16
    q, k = torch.randn(2, d, generator=_gen(), dtype=torch.float64)
    scores = {}
    for m in range(0, 40, 3):
        for n in range(0, 40, 5):
            q_m = apply_rotary(q[None], positions=torch.tensor([m]))[0]  # q at position m
            k_n = apply_rotary(k[None], positions=torch.tensor([n]))[0]  # k at position n
            scores.setdefault(m - n, []).append(float(q_m @ k_n))
    assert len(scores) > 10
    for offset, values in scores.items():
        assert max(values) - min(values) < 1e-10, offset
    assert len({round(v[0], 6) for v in scores.values()}) > 10  # and it does depend on it


def test_rotary_on_a_sequence_matches_row_by_row_positions():
    x = torch.randn(2, 3, 7, 8, generator=_gen())  # (B, h, T, d)
    whole = apply_rotary(x)
    for t in range(7):
        alone = apply_rotary(x[..., t : t + 1, :], positions=torch.tensor([t]))
        assert torch.allclose(whole[..., t : t + 1, :], alone, atol=1e-6)


def test_rotary_preserves_norms_and_leaves_position_0_alone():
    x = torch.randn(2, 4, 30, 12, generator=_gen())  # (B, h, T, d)
    rotated = apply_rotary(x)
    assert rotated.shape == x.shape and rotated.dtype == x.dtype
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.equal(rotated[..., 0, :], x[..., 0, :])
    assert not torch.allclose(rotated[..., 1:, :], x[..., 1:, :])


def test_rotary_entries_computed_by_hand():
    x = torch.tensor([[1.0, 0.0, 2.0, 1.0]] * 4, dtype=torch.float64)  # (T=4, d=4)
    out = apply_rotary(x, base=100.0)  # theta = 1, 0.1
    a, b = 3 * 1.0, 3 * 0.1  # position 3
    want = [math.cos(a), math.sin(a), 2 * math.cos(b) - math.sin(b), 2 * math.sin(b) + math.cos(b)]
    assert out[3].tolist() == pytest.approx(want)


def test_rotary_uses_the_sinusoidal_frequencies():
    """Rotating (0, 1) in every pair by pos * w_i gives (-sin, cos): the sinusoidal table
    up to the sign of the sines."""
    T, d = 25, 10
    ones = torch.zeros(T, d, dtype=torch.float64)
    ones[:, 1::2] = 1.0
    rotated = apply_rotary(ones)
    pe = sinusoidal_encoding(T, d).double()
    assert torch.allclose(rotated[:, 0::2], -pe[:, 0::2], atol=1e-6)
    assert torch.allclose(rotated[:, 1::2], pe[:, 1::2], atol=1e-6)


def test_rotary_keeps_gradients():
    x = torch.randn(3, 5, 6, generator=_gen(), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(apply_rotary, (x,))


def test_rotary_works_on_non_contiguous_input():
    x = torch.randn(6, 5, 8, generator=_gen()).transpose(0, 1)  # (5, 6, 8) strided
    assert torch.allclose(apply_rotary(x), apply_rotary(x.contiguous()))


@pytest.mark.parametrize(
    "x, kwargs, message",
    [
        (torch.zeros(2, 5, 7), {}, r"must be even, got 7"),
        (torch.zeros(8), {}, r"\(\.\.\., T, d\), got \(8,\)"),
        (torch.zeros(5, 8), {"positions": torch.arange(4)}, r"\(T,\) = \(5,\) .*shape \(4,\)"),
        (torch.zeros(5, 8), {"base": 0.5}, r"base must be a number greater than 1"),
    ],
)
def test_rotary_errors(x, kwargs, message):
    with pytest.raises(ValueError, match=message):
        apply_rotary(x, **kwargs)


# ------------------------------------------ what mutation testing found unpinned ----------


@pytest.mark.parametrize(
    "make",
    [
        lambda: frequencies(0),
        lambda: shift_matrix(1, 0),
        lambda: TokenEmbedding(5, 0),
        lambda: PositionalEncoding(0),
    ],
    ids=["frequencies", "shift_matrix", "TokenEmbedding", "PositionalEncoding"],
)
def test_a_bad_d_model_is_named_d_model(make):
    with pytest.raises(ValueError, match=r"^d_model must be a positive int, got 0$"):
        make()


def test_any_base_above_one_is_a_base():
    w = frequencies(8, base=1.5)  # (4,)
    assert torch.allclose(w, 1.5 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))


def test_positional_encoding_defaults_to_the_papers_5000_positions():
    pe = PositionalEncoding(8)
    assert pe.max_len == 5000 and pe.pe.shape == (5000, 8)


def test_rotary_refuses_zero_features():
    with pytest.raises(ValueError, match=r"d = x.shape\[-1\] must be even, got 0$"):
        apply_rotary(torch.zeros(5, 0))


def test_rotary_positions_error_names_shape_and_dtype():
    message = (
        r"^positions must be a \(T,\) = \(5,\) tensor of numbers, one per row of x, got "
        r"shape \(5,\) and dtype torch.bool$"
    )
    with pytest.raises(ValueError, match=message):
        apply_rotary(torch.zeros(5, 8), positions=torch.ones(5, dtype=torch.bool))
