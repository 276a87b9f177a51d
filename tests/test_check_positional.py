"""The lesson 05 checker accepts every correct table and names each usual mistake.

Each wrong answer below is one a learner really writes; each test asserts the checker
returns False *and* prints the diagnosis for that mistake, on one verdict line.
"""

import functools
import math

import numpy as np
import pytest
import torch

from course import check
from course.positional import sinusoidal_encoding as reference

# ------------------------------------------------------------ right answers ----------


def exp_log_form(max_len, d_model):
    """The exp / log form: w_i = exp(-2i ln(10000) / d_model)."""
    position = torch.arange(max_len).unsqueeze(1)  # (max_len, 1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def pow_form(max_len, d_model):
    """torch.pow and a division, angles for the even dimensions only."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(d/2),)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (max_len, ceil(d/2))
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, : d_model // 2].cos()
    return pe


def python_loop(max_len, d_model):
    """A loop over positions and dimensions with math.sin / math.cos."""
    rows = []
    for pos in range(max_len):
        row = []
        for j in range(d_model):
            angle = pos / 10000 ** (2 * (j // 2) / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows)


def stack_interleave(max_len, d_model):
    """sin and cos stacked on a new last axis, then flattened: (.., pairs, 2) -> (.., 2 pairs)."""
    pairs = (d_model + 1) // 2
    frequency = 10000 ** (-torch.arange(pairs) * 2 / d_model)  # (pairs,)
    angle = torch.outer(torch.arange(max_len, dtype=torch.float32), frequency)
    table = torch.stack([angle.sin(), angle.cos()], dim=-1)  # (max_len, pairs, 2)
    return table.reshape(max_len, 2 * pairs)[:, :d_model]  # an odd d_model drops the last cos


def float64_then_float32(max_len, d_model):
    """Computed in float64, rounded to float32 at the end."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe.float()


def with_numpy(max_len, d_model):
    """numpy all the way, converted at the end."""
    position = np.arange(max_len)[:, None]
    angle = position / np.power(10000, np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return torch.from_numpy(pe).float()


def einsum_form(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float32)
    frequency = 1 / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    angle = torch.einsum("p,f->pf", position, frequency)  # (max_len, ceil(d/2))
    pe = torch.zeros(max_len, d_model)
    pe[:, ::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return pe


def requiring_grad(max_len, d_model):
    """A table that requires grad: no mistake (the checker only reads its values)."""
    return exp_log_form(max_len, d_model).requires_grad_()


@functools.lru_cache
def cached(max_len, d_model):
    """One table per size, kept: the same tensor for the same request."""
    return exp_log_form(max_len, d_model)


RIGHT = [
    exp_log_form,
    pow_form,
    python_loop,
    stack_interleave,
    float64_then_float32,
    with_numpy,
    einsum_form,
    requiring_grad,
    cached,
    reference,
]


@pytest.mark.parametrize("answer", RIGHT, ids=[f.__name__ for f in RIGHT])
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.sinusoidal_encoding, answer)
    assert passed is True and printed.startswith("✅ sinusoidal_encoding: passed"), printed


# ------------------------------------------------------------ wrong answers ----------


def table(max_len, d_model, exponent=None, first=torch.sin, then=torch.cos, start=0, base=10000.0):
    """A learner's table with one thing changed: the exponent of each pair / dimension,
    which function goes first, the first position, the base."""
    position = torch.arange(start, start + max_len, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    power = exponent(j, d_model) if exponent else 2 * (j // 2) / d_model  # (d_model,)
    angle = position / base**power  # (max_len, d_model)
    return torch.where(j % 2 == 0, first(angle), then(angle))


def swapped(max_len, d_model):
    return table(max_len, d_model, first=torch.cos, then=torch.sin)


def sin_only(max_len, d_model):
    return table(max_len, d_model, then=torch.sin)


def per_dimension(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for j in range(d_model):
            angle = pos / 10000 ** (j / d_model)  # j, not the pair's 2i
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def twice_the_dimension(max_len, d_model):
    return table(max_len, d_model, exponent=lambda j, d: 2 * j / d)


def doubled(max_len, d_model):
    two_i = torch.arange(0, d_model, 2)
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * two_i / d_model)  # 2 * (2i)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe


def forgot_the_two(max_len, d_model):
    return table(max_len, d_model, exponent=lambda j, d: (j // 2) / d)


def integer_division(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i // d_model))
            if i + 1 < d_model:
                pe[pos, i + 1] = math.cos(pos / 10000 ** (i // d_model))
    return pe


def multiplied(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (math.log(10000.0) / d_model))  # no minus
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def inverted_angle(max_len, d_model):
    """10000^(2i/d_model) / pos: the fraction upside down (inf, then NaN, at position 0)."""
    position = torch.arange(max_len)[:, None]
    angle = 10000 ** (torch.arange(0, d_model, 2) / d_model) / position  # <- inverted
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe


def halves(max_len, d_model):
    position = torch.arange(max_len)[:, None]
    angle = position / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.cat([angle.sin(), angle[:, : d_model // 2].cos()], dim=-1)


def halves_cos_first(max_len, d_model):
    position = torch.arange(max_len)[:, None]
    angle = position / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.cat([angle.cos(), angle[:, : d_model // 2].sin()], dim=-1)


def base_1000(max_len, d_model):
    return table(max_len, d_model, base=1000.0)


def log10_in_the_exp_form(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log10(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def from_position_1(max_len, d_model):
    return table(max_len, d_model, start=1)


def in_degrees(max_len, d_model):
    return table(
        max_len, d_model, first=lambda a: a.deg2rad().sin(), then=lambda a: a.deg2rad().cos()
    )


def to_degrees(max_len, d_model):
    return table(
        max_len, d_model, first=lambda a: a.rad2deg().sin(), then=lambda a: a.rad2deg().cos()
    )


def odd_crash(max_len, d_model):
    """The usual vectorised form, which fails on an odd d_model."""
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)  # one column too many when d_model is odd
    return pe


def odd_refused(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    return exp_log_form(max_len, d_model)


def odd_stack_crash(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model)


def odd_built_one_wider(max_len, d_model):
    """An odd d_model handled by building the even table one wider and cutting it."""
    if d_model % 2:
        return exp_log_form(max_len, d_model + 1)[:, :d_model]
    return exp_log_form(max_len, d_model)


def odd_one_column_too_many(max_len, d_model):
    pairs = (d_model + 1) // 2
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(pairs) * 2 / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # 2 * pairs columns


def in_float64(max_len, d_model):
    return float64_then_float32(max_len, d_model).double()


def in_float16(max_len, d_model):
    return exp_log_form(max_len, d_model).half()


def integer_table(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1)  # int64
    pe = torch.zeros_like(position).repeat(1, d_model)  # an int64 table
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def as_numpy(max_len, d_model):
    return exp_log_form(max_len, d_model).numpy()


def as_list(max_len, d_model):
    return exp_log_form(max_len, d_model).tolist()


def as_tuple(max_len, d_model):
    return exp_log_form(max_len, d_model), d_model


def with_batch_axis(max_len, d_model):
    return exp_log_form(max_len, d_model).unsqueeze(0)


def transposed(max_len, d_model):
    return exp_log_form(max_len, d_model).T


def transposed_when_square(max_len, d_model):
    pe = exp_log_form(max_len, d_model)
    return pe.T if max_len == d_model else pe


def lengths_first_other_names(d, n):
    return exp_log_form(n, d)


def parameters_swapped(d_model, max_len):
    return exp_log_form(max_len, d_model)


def one_column_per_pair(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return angle.sin()


def two_columns_per_dimension(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(d_model) * 2 / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


_WIDE = exp_log_form(100, 32)  # computed once, "for speed"


def cached_wide_table(max_len, d_model):
    return _WIDE[:max_len, :d_model]


_SHORT: dict = {}


def cached_short_table(max_len, d_model):
    if d_model not in _SHORT:
        _SHORT[d_model] = exp_log_form(20, d_model)
    return _SHORT[d_model][:max_len]


def divided_by_max_len(max_len, d_model):
    return table(max_len, d_model, exponent=lambda j, d: 2 * (j // 2) / max_len)


def linspace_exponents(max_len, d_model):
    exponent = torch.linspace(0, 1, d_model // 2)  # 2i / (d_model - 2), not 2i / d_model
    angle = torch.arange(max_len)[:, None] / 10000**exponent
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)


def one_row_too_many(max_len, d_model):
    return exp_log_form(max_len + 1, d_model)


def with_noise(max_len, d_model):
    return exp_log_form(max_len, d_model) + 1e-3 * torch.randn(max_len, d_model)


def with_nan(max_len, d_model):
    pe = exp_log_form(max_len, d_model)
    return pe / pe  # 0 / 0 where sin 0 = 0


WRONG = [
    (swapped, "sin and cos are swapped"),
    (sin_only, "every dimension holds a sin"),
    (per_dimension, "each dimension j has its own exponent j/d_model"),
    (twice_the_dimension, "the exponent is 2j/d_model with j the dimension index"),
    (doubled, "the exponent is doubled"),
    (forgot_the_two, "the exponent is i/d_model, half of 2i/d_model"),
    (integer_division, "integer division (//)"),
    (multiplied, "multiplied by 10000^(2i/d_model) instead of divided"),
    (inverted_angle, "sinusoidal_encoding(12, 8): the angle is upside down"),
    (halves, "come as two halves (all sins, then all cosines)"),
    (halves_cos_first, "come as two halves (all cosines, then all sins)"),
    (base_1000, "the frequencies are those of base 1000: the paper's base is 10000"),
    (log10_in_the_exp_form, "the exp form needs the natural logarithm"),
    (from_position_1, "the positions start at 1"),
    (in_degrees, "converted from degrees to radians"),
    (to_degrees, "converted to degrees"),
    (odd_crash, "must work for an odd d_model too: d_model=7 has 4 sin dimensions"),
    (odd_refused, "must work for an odd d_model too"),
    (odd_stack_crash, "give the cos only the first 3"),
    (odd_built_one_wider, "the first 7 columns of a table built for d_model=8"),
    (odd_one_column_too_many, "One column too many for an odd d_model"),
    (in_float64, "is float64; return float32"),
    (in_float16, "is float16; return float32"),
    (integer_table, "is int64, so every sin and cos was cut to a whole number"),
    (as_numpy, "returned a numpy array"),
    (as_list, "returned a Python list"),
    (as_tuple, "returned a tuple of 2 things: return only the table"),
    (with_batch_axis, "Leave out the batch axis"),
    (transposed, "The table is transposed"),
    (transposed_when_square, "sinusoidal_encoding(16, 16): the table is transposed"),
    (lengths_first_other_names, "read its arguments the other way round"),
    (parameters_swapped, "the lesson's signature is sinusoidal_encoding(max_len, d_model)"),
    (one_column_per_pair, "one column per pair of dimensions"),
    (two_columns_per_dimension, "d_model counts the sin and the cos dimensions together"),
    (cached_wide_table, "the first 8 columns of a table built for d_model=32"),
    (cached_short_table, "Fewer rows than the 60 positions asked"),
    (divided_by_max_len, "the exponent is divided by max_len (12)"),
    (linspace_exponents, "the exponent divides 2i by 6, not by d_model=8"),
    (one_row_too_many, "One row too many"),
    (with_noise, "sinusoidal_encoding(12, 8) is not right: at index"),
    (with_nan, "contains"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.sinusoidal_encoding, answer)
    assert passed is False and printed.startswith("❌ sinusoidal_encoding: "), printed
    assert diagnosis in printed, printed


def test_the_odd_case_is_named_in_the_message(verdict):
    _, printed = verdict(check.sinusoidal_encoding, odd_crash)
    assert "on inputs max_len=12, d_model=7 your code raised RuntimeError" in printed, printed


def test_a_mistake_on_a_later_size_names_that_size(verdict):
    _, printed = verdict(check.sinusoidal_encoding, odd_built_one_wider)
    assert "❌ sinusoidal_encoding: sinusoidal_encoding(12, 7): the table holds" in printed


def test_randomness_in_the_answer_leaves_the_notebooks_random_state_alone(verdict):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    verdict(check.sinusoidal_encoding, with_noise)
    assert torch.equal(torch.rand(3), expected)


def test_a_stub_is_not_implemented_yet(verdict):
    def sinusoidal_encoding(max_len, d_model):
        # YOUR CODE HERE
        raise NotImplementedError

    passed, printed = verdict(check.sinusoidal_encoding, sinusoidal_encoding)
    assert passed is False and printed.startswith("⏳ sinusoidal_encoding: not implemented yet")


def test_every_named_mistake_differs_from_the_right_table_and_from_the_others():
    """On the first size, no two diagnoses describe the same table (so the one named is the
    one made), and none is the right answer."""
    from course.check.positional import _mistakes

    tables = list(_mistakes(12, 8).values())
    right = reference(12, 8).double()
    for n, t in enumerate(tables):
        assert (t - right).abs().max() > 1e-2
        for other in tables[n + 1 :]:
            assert (t - other).abs().max() > 1e-2


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the size it names, the numbers it computes and its hint.


def hard_coded_ln(max_len, d_model):
    """ln(10000) typed in as 9.21 (the hint's rounded figure): base e^9.21 = 9997.5, right to
    1e-4 on the small tables, off on the 60 x 32 one."""
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-9.21 / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def base_100000(max_len, d_model):
    """One zero too many: a base above 10000, whose width 8·ln(1e4)/ln(1e5) = 6.4 is no
    whole number (so not named as a narrower table)."""
    return table(max_len, d_model, base=100000.0)


def log2_in_the_exp_form(max_len, d_model):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log2(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe


def returned_before_filling(max_len, d_model):
    """The zeros the table starts as: no frequency to read (atan2(0, 0) = 0), no mistake."""
    return torch.zeros(max_len, d_model)


def positions_not_a_column(max_len, d_model):
    """torch.arange(max_len) without [:, None]: a crash on an even d_model, with no word about
    odd ones."""
    angle = torch.arange(max_len) / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe


def odd_drops_the_last_sin(max_len, d_model):
    """d_model // 2 pairs stacked: right for an even d_model, one column short for an odd."""
    pairs = d_model // 2
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(pairs) * 2 / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, -1)


def cut_from_a_13_wide_table(max_len, d_model):
    """A table built 13 wide, cut: width 13 is one more than max_len = 12, yet no max_len."""
    return exp_log_form(max_len, max(13, d_model))[:, :d_model]


def squeezed(max_len, d_model):
    """A stray .squeeze(): harmless but for one position, where it drops the row axis."""
    return exp_log_form(max_len, d_model).squeeze()


def no_return(max_len, d_model):
    pe = exp_log_form(max_len, d_model)  # noqa: F841 (the return is forgotten)


def as_dict(max_len, d_model):
    return {"pe": exp_log_form(max_len, d_model)}


def _crashed(sizes, error, hint=""):
    return f"❌ sinusoidal_encoding: on inputs {sizes} your code raised {error}{hint}"


_ODD_HINT = (
    ". The table must work for an odd d_model too: d_model=7 has 4 sin dimensions (0, 2, ..., "
    "6) and 3 cos dimensions (1, 3, ..., 5), the last sin without a partner. Compute the 4 "
    "angles of the even dimensions and give the cos only the first 3: pe[:, 1::2] = "
    "torch.cos(angle[:, :d_model // 2])"
)
_PE = "(pe[:, 0::2] = torch.sin(angle), pe[:, 1::2] = torch.cos(angle))"
_FLOAT32 = "return float32, torch's default dtype and the dtype of the embeddings the table is"

VERDICTS = [
    (
        exp_log_form,
        "✅ sinusoidal_encoding: passed (5 tables (12 x 8, 12 x 7, 1 x 6, 60 x 32, 16 x 16): even "
        "and odd d_model, one position, a square one; float32 values matched the paper's "
        "formula).",
    ),
    (
        swapped,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): sin and cos are swapped: the even "
        f"dimensions 0, 2, 4, ... hold the sin, the odd ones the cos {_PE}",
    ),
    (
        sin_only,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): every dimension holds a sin: the odd "
        f"dimensions hold the cos of the same angle {_PE}",
    ),
    (
        halves,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the sines and cosines come as two "
        "halves (all sins, then all cosines); the paper interleaves them, a sin and a cos of the "
        f"same angle side by side in each pair of dimensions {_PE}",
    ),
    (
        halves_cos_first,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the cosines and sines come as two "
        "halves (all cosines, then all sins); the paper interleaves them, sin in the even "
        f"dimensions and cos in the odd ones {_PE}",
    ),
    (
        one_column_per_pair,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) has shape (12, 4), expected (12, 8). "
        "That is one column per pair of dimensions: each pair holds a sin *and* a cos of the "
        f"same angle, so there are d_model columns in all {_PE}",
    ),
    (
        log10_in_the_exp_form,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the exp form needs the natural "
        "logarithm: 10000^(-2i/d_model) = exp(-2i·ln(10000)/d_model), with math.log(10000) = "
        "9.21; math.log10(10000) = 4 makes the base e^4 = 54.6",
    ),
    (
        log2_in_the_exp_form,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the exp form needs the natural "
        "logarithm: 10000^(-2i/d_model) = exp(-2i·ln(10000)/d_model), with math.log(10000) = "
        "9.21; math.log2(10000) = 13.3 makes the base e^13.3 = 5.899e+05",
    ),
    (
        hard_coded_ln,
        "❌ sinusoidal_encoding: sinusoidal_encoding(60, 32): the frequencies are those of base "
        "9997: the paper's base is 10000, pair i turns at 1/10000^(2i/d_model)",
    ),
    (
        base_100000,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the frequencies are those of base "
        "1e+05: the paper's base is 10000, pair i turns at 1/10000^(2i/d_model)",
    ),
    (
        cut_from_a_13_wide_table,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8): the table holds the first 8 columns "
        "of a table built for d_model=13: the frequencies 1/10000^(2i/d_model) depend on "
        "d_model, so build the table for the d_model asked (a wider or cached table cut to "
        "size has other frequencies)",
    ),
    (
        returned_before_filling,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) is not right: at index (0, 1) you "
        "have 0, expected 1 (largest difference 1)",
    ),
    (
        odd_crash,
        _crashed(
            "max_len=12, d_model=7",
            "RuntimeError: The expanded size of the tensor (3) must match the existing size (4) "
            "at non-singleton dimension 1.  Target sizes: [12, 3].  Tensor sizes: [12, 4]",
            _ODD_HINT,
        ),
    ),
    (
        positions_not_a_column,
        _crashed(
            "max_len=12, d_model=8",
            "RuntimeError: The size of tensor a (12) must match the size of tensor b (4) at "
            "non-singleton dimension 0",
        ),
    ),
    (
        odd_one_column_too_many,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 7) has shape (12, 8), expected (12, 7). "
        "One column too many for an odd d_model: 7 dimensions, the last one a sin without its "
        "cos (cut a wider table with pe[:, :d_model] only if it was built with this d_model's "
        "frequencies)",
    ),
    (
        odd_drops_the_last_sin,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 7) has shape (12, 6), expected (12, 7). "
        "One row per position, one column per dimension",
    ),
    (
        squeezed,
        "❌ sinusoidal_encoding: sinusoidal_encoding(1, 6) has shape (6,), expected (1, 6). One "
        "row per position, one column per dimension",
    ),
    (
        as_numpy,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) returned a numpy array: return a "
        "torch.Tensor, torch.from_numpy(table).float(), or build the table with torch functions",
    ),
    (
        as_tuple,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) returned a tuple of 2 things: return "
        "only the table, one tensor (max_len, d_model)",
    ),
    (
        as_list,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) returned a Python list: return a "
        "torch.Tensor of shape (max_len, d_model), torch.tensor(rows), or build the table with "
        "torch functions",
    ),
    (
        no_return,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) should return a torch.Tensor, got a "
        "NoneType",
    ),
    (
        as_dict,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) should return a torch.Tensor, got a "
        "dict",
    ),
    (
        in_float64,
        f"❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) is float64; {_FLOAT32} added to (a "
        "float64 table would turn every sum x + PE into float64): end with .float(), or build "
        "it with dtype=torch.float32",
    ),
    (
        in_float16,
        f"❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) is float16; {_FLOAT32} added to",
    ),
    (
        integer_table,
        "❌ sinusoidal_encoding: sinusoidal_encoding(12, 8) is int64, so every sin and cos was "
        "cut to a whole number when stored in it (torch.zeros_like of an integer tensor, or "
        "torch.arange without a float dtype?): create the table as floats, torch.zeros(max_len, "
        "d_model)",
    ),
]


@pytest.mark.parametrize("answer, line", VERDICTS, ids=[v[0].__name__ for v in VERDICTS])
def test_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.sinusoidal_encoding, answer)
    assert printed == line + "\n"
    assert passed is (answer is exp_log_form)


def test_the_named_mistakes_are_the_learners_tables_to_the_strict_tolerance():
    """The tables the checker recomputes are the mistakes themselves, not near them: each
    small-angle mistake matches the learner's table to 1e-4 at every size (only the angles in
    the thousands, multiplied and read as degrees, need the loose 1e-2)."""
    from course.check.positional import _ATOL, _RTOL, _SIZES, _mistakes, matches

    answers = {
        "converted from degrees to radians": in_degrees,
        "the positions start at 1": from_position_1,
        "sin and cos are swapped": swapped,
        "the exponent is doubled": doubled,
        "integer division (//)": integer_division,
    }
    for max_len, d_model in _SIZES:
        wrong = _mistakes(max_len, d_model)
        for name, answer in answers.items():
            (mistaken,) = [t for d, t in wrong.items() if name in d]
            assert matches(answer(max_len, d_model), mistaken, _ATOL, _RTOL), (name, max_len)


def test_the_sizes_are_what_they_are_for():
    """An even and an odd d_model, one position, a square table, one with positions and
    angles large enough (60 x 32) for a rounded ln(10000) to show."""
    from course.check.positional import _SIZES

    assert any(d % 2 == 0 for _, d in _SIZES) and any(d % 2 for _, d in _SIZES)
    assert any(m == 1 for m, _ in _SIZES) and any(m == d for m, d in _SIZES)
    assert (60, 32) in _SIZES


def test_no_frequency_is_read_where_the_table_has_no_position_1_or_no_pair_1():
    """A one-row table has no position 1, a 3-wide one no pair 1 (columns 2 and 3): the
    frequency fit gives up rather than index outside the table."""
    from course.check.positional import _fitted_frequencies

    assert _fitted_frequencies(reference(1, 6) + 0.5, 1, 6) is None
    assert _fitted_frequencies(reference(12, 3) + 0.5, 12, 3) is None


def test_frequencies_that_grow_along_the_pairs_are_no_base():
    """pos · b^(2i/d_model), frequencies growing with i (here b = 10, w_1 = 1.78): no base
    ladder to name; a base under 1 would give a negative width and a nonsense message."""
    from course.check.positional import _fitted_frequencies

    growing = (torch.arange(12.0)[:, None] * 10 ** (2 * (torch.arange(8) // 2) / 8)).float()
    growing = torch.where(torch.arange(8) % 2 == 0, growing.sin(), growing.cos())
    assert _fitted_frequencies(growing, 12, 8) is None


def test_shape_hints_for_an_odd_d_model():
    """One column per pair names both counts for an odd d_model (3 or 4 of d_model = 7), and
    d_model + 1 columns is 'one too many for an odd d_model' only when d_model is odd."""
    from course.check.positional import _shape_hint

    want = reference(12, 7)
    for pairs in (3, 4):
        hint = _shape_hint(torch.zeros(12, pairs), want, 12, 7)
        assert hint.startswith("That is one column per pair of dimensions"), hint
    even = reference(12, 8)
    generic = "One row per position, one column per dimension"
    assert _shape_hint(torch.zeros(12, 9), even, 12, 8) == generic
    assert _shape_hint(torch.zeros(12, 11), reference(12, 10), 12, 10) == generic
    assert _shape_hint(torch.zeros(12, 3), even, 12, 8) == generic
    assert _shape_hint(torch.zeros(12, 5), even, 12, 8) == generic
