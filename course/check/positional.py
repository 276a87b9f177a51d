"""Checker for lesson 05 (positional encoding): sinusoidal_encoding.

The answer is a table of constants, sinusoidal_encoding(max_len, d_model) -> (max_len,
d_model): nothing flows backward through it, and its inputs are two ints, so there are
no gradients, float64 or non-contiguous inputs to try. What such an answer can get wrong
is its shape, its dtype (float32, torch's default, like the embeddings it is added to)
and its values; each usual mistake with the formula is recomputed here and named when the
answer matches it. The sizes: an even d_model, an odd one (whose last dimension is a
sin), max_len 1, a larger 60 x 32 table and a square one (where a transposed table has
the right shape).
"""

import math

import numpy as np
import torch

from course import positional as reference
from course.check._framework import (
    Mistake,
    call,
    close,
    exercise,
    expect_close,
    expect_shape,
    expect_signature,
    matches,
)

__all__ = ["sinusoidal_encoding"]

# (max_len, d_model), in the order they are tried: the first one names most mistakes.
_SIZES = [(12, 8), (12, 7), (1, 6), (60, 32), (16, 16)]
# Float32 arithmetic on the way (exp, pow, pos * w) is off by ~2e-6 at 60 x 32; every
# mistake below is off by more than 1e-2 somewhere.
_ATOL, _RTOL = 1e-4, 1e-4
_BASE = 10000.0


def _table(
    max_len: int,
    d_model: int,
    *,
    base: float = _BASE,
    exponent: str = "2i/d",
    layout: str = "interleaved",
    start: int = 0,
    unit: float = 1.0,
    inverted: bool = False,
) -> torch.Tensor:
    """The table a learner's formula gives, in float64: the right one with the defaults.

    exponent: of base for dimension j, pair i = j // 2 ("2i/d" is right; "j/d" one exponent
      per dimension; "2j/d" twice the dimension index; "4i/d" doubled; "i/d" the 2 left
      out; "2i//d" integer division; "-2i/d" multiplied instead of divided);
    layout: "interleaved" (sin even, cos odd: right), "swapped" (cos even, sin odd),
      "halves" (all sins, then all cosines), "halves, cos first", "sin only";
    start: the first position; unit: what the angles are multiplied by (pi / 180: read as
      degrees); inverted: the angle upside down, base^power / pos (NaN at position 0).
    """
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    j = torch.arange(d_model, dtype=torch.float64)  # (d_model,): dimension index
    n_sin = (d_model + 1) // 2
    if layout.startswith("halves"):
        i = torch.where(j < n_sin, j, j - n_sin)  # each half counts its pairs from 0
        is_sin = (j < n_sin) if layout == "halves" else (j >= n_sin)
    else:
        i = torch.div(j, 2, rounding_mode="floor")  # (d_model,): pair index
        is_sin = {
            "interleaved": j % 2 == 0,
            "swapped": j % 2 == 1,
            "sin only": torch.ones(d_model, dtype=torch.bool),
        }[layout]
    power = {
        "2i/d": 2 * i / d_model,
        "j/d": j / d_model,
        "2j/d": 2 * j / d_model,
        "4i/d": 4 * i / d_model,
        "i/d": i / d_model,
        "2i//d": torch.div(2 * i, d_model, rounding_mode="floor"),
        "-2i/d": -2 * i / d_model,
    }[exponent]
    angle = (base**power / pos if inverted else pos / base**power) * unit  # (max_len, d_model)
    return torch.where(is_sin, torch.sin(angle), torch.cos(angle))  # (max_len, d_model)


_INTERLEAVE = "pe[:, 0::2] = torch.sin(angle), pe[:, 1::2] = torch.cos(angle)"


_INVERTED = (
    "the angle is upside down, 10000^(2i/d_model) / pos: at position 0 that divides by 0, "
    "and sin(inf) is NaN. The angle is pos / 10000^(2i/d_model): the position on top, so it "
    "grows along the sequence, slowly for the later pairs"
)


def _mistakes(max_len: int, d_model: int) -> dict[str, torch.Tensor]:
    """Diagnosis -> the table that mistake gives at this size."""
    wrong = {
        "sin and cos are swapped: the even dimensions 0, 2, 4, ... hold the sin, the odd ones "
        f"the cos ({_INTERLEAVE})": _table(max_len, d_model, layout="swapped"),
        "every dimension holds a sin: the odd dimensions hold the cos of the same angle "
        f"({_INTERLEAVE})": _table(max_len, d_model, layout="sin only"),
        "the sines and cosines come as two halves (all sins, then all cosines); the paper "
        "interleaves them, a sin and a cos of the same angle side by side in each pair of "
        f"dimensions ({_INTERLEAVE})": _table(max_len, d_model, layout="halves"),
        "the cosines and sines come as two halves (all cosines, then all sins); the paper "
        "interleaves them, sin in the even dimensions and cos in the odd ones "
        f"({_INTERLEAVE})": _table(max_len, d_model, layout="halves, cos first"),
        "each dimension j has its own exponent j/d_model; the two dimensions of pair i share "
        "one frequency, 1/10000^(2i/d_model): dimensions 2i and 2i+1 both use the exponent "
        "2i/d_model (torch.arange(0, d_model, 2) / d_model gives the 2i/d_model)": _table(
            max_len, d_model, exponent="j/d"
        ),
        "the exponent is 2j/d_model with j the dimension index; in the formula 2i is the even "
        "dimension of pair i, so dimensions 2i and 2i+1 both use 2i/d_model "
        "(torch.arange(0, d_model, 2) / d_model)": _table(max_len, d_model, exponent="2j/d"),
        "the exponent is doubled, 2·(2i)/d_model: 2i is already the even dimension of pair i "
        "(0, 2, 4, ...), so with torch.arange(0, d_model, 2) don't multiply by 2 again": _table(
            max_len, d_model, exponent="4i/d"
        ),
        "the exponent is i/d_model, half of 2i/d_model: pair i's frequency is "
        "1/10000^(2i/d_model) (torch.arange(0, d_model, 2) / d_model)": _table(
            max_len, d_model, exponent="i/d"
        ),
        "every pair has frequency 1: the exponent 2i/d_model was computed with integer "
        "division (//), which makes it 0; divide with /": _table(
            max_len, d_model, exponent="2i//d"
        ),
        "the positions are multiplied by 10000^(2i/d_model) instead of divided: the angle is "
        "pos / 10000^(2i/d_model) (in the exp form exp(-2i·ln(10000)/d_model): mind the minus)": (
            _table(max_len, d_model, exponent="-2i/d")
        ),
        "the positions start at 1; the first row is position 0 (torch.arange(max_len)), whose "
        "sines are 0 and cosines 1": _table(max_len, d_model, start=1),
        "the angles were converted from degrees to radians (× pi/180): pos / 10000^(2i/d_model) "
        "is already in radians, which torch.sin and torch.cos take; use it as it is": _table(
            max_len, d_model, unit=math.pi / 180
        ),
        "the angles were converted to degrees (× 180/pi): torch.sin and torch.cos take "
        "radians, and pos / 10000^(2i/d_model) already is one; use it as it is": _table(
            max_len, d_model, unit=180 / math.pi
        ),
    }
    if max_len == d_model:  # a transposed table has the right shape only here
        wrong["the table is transposed: one row per position, one column per dimension"] = _table(
            max_len, d_model
        ).T
    return wrong


def _loosely(got: torch.Tensor, max_len: int, d_model: int) -> str | None:
    """A mistake matched to 1e-2: mistakes with angles in the thousands (multiplied by
    10000^(2i/d_model), read as degrees) lose ~1e-3 to float32 rounding of the angle."""
    wrong = _mistakes(max_len, d_model)
    return next((d for d, table in wrong.items() if matches(got, table, 1e-2, 0.0)), None)


def _fitted_frequencies(got: torch.Tensor, max_len: int, d_model: int) -> str | None:
    """Name the mistake when the table is right but for its frequencies' ladder: pair i at
    w^i for some w other than 10000^(-2/d_model). That is base b = w^(-d_model/2), or,
    equally, the paper's base with some other width D: a wider table cut to d_model
    columns, or the exponent divided by max_len."""
    if max_len < 2 or d_model < 4:
        return None
    got = got.double()
    w_1 = math.atan2(float(got[1, 2]), float(got[1, 3]))  # pair 1 at position 1: angle w_1
    if not 0 < w_1 < 1:
        return None
    base = w_1 ** (-d_model / 2)  # w_1 = base^(-2/d_model)
    if not matches(got, _table(max_len, d_model, base=base), _ATOL, _RTOL):
        return None
    width = d_model * math.log(_BASE) / math.log(base)  # w_1 = 10000^(-2/width)
    if abs(width - max_len) < 1e-2 and max_len != d_model:
        return (
            f"the exponent is divided by max_len ({max_len}): it is 2i/d_model, so the "
            "frequencies depend on the table's width, not its length"
        )
    if abs(width - round(width)) < 1e-2 and round(width) < d_model:
        return (
            f"the exponent divides 2i by {round(width)}, not by d_model={d_model}: pair i "
            "turns at 1/10000^(2i/d_model) (np.linspace(0, 1, d_model // 2) gives "
            "2i/(d_model - 2), not 2i/d_model)"
        )
    if abs(width - round(width)) < 1e-2 and round(width) > d_model:
        return (
            f"the table holds the first {d_model} columns of a table built for "
            f"d_model={round(width)}: the frequencies 1/10000^(2i/d_model) depend on d_model, "
            "so build the table for the d_model asked (a wider or cached table cut to size "
            "has other frequencies)"
        )
    for log, name in ((math.log10, "math.log10"), (math.log2, "math.log2")):
        if math.isclose(math.log(base), log(_BASE), rel_tol=1e-3):
            return (
                f"the exp form needs the natural logarithm: 10000^(-2i/d_model) = "
                f"exp(-2i·ln(10000)/d_model), with math.log(10000) = 9.21; {name}(10000) = "
                f"{log(_BASE):.3g} makes the base e^{log(_BASE):.3g} = {base:.4g}"
            )
    return (
        f"the frequencies are those of base {base:.4g}: the paper's base is 10000, pair i "
        "turns at 1/10000^(2i/d_model)"
    )


def _crash_hint(d_model: int):
    """For the odd d_model: whatever failed, the count of sin and cos dimensions."""
    if d_model % 2 == 0:
        return None
    n_sin, n_cos = (d_model + 1) // 2, d_model // 2
    hint = (
        f"The table must work for an odd d_model too: d_model={d_model} has {n_sin} sin "
        f"dimensions (0, 2, ..., {d_model - 1}) and {n_cos} cos dimensions (1, 3, ..., "
        f"{d_model - 2}), the last sin without a partner. Compute the {n_sin} angles of the "
        f"even dimensions and give the cos only the first {n_cos}: "
        "pe[:, 1::2] = torch.cos(angle[:, :d_model // 2])"
    )
    return lambda message: hint


def _as_tensor(table, what: str) -> torch.Tensor:
    """The answer as a tensor, or a message for a numpy array, a list or a tuple."""
    if isinstance(table, torch.Tensor):
        return table
    if isinstance(table, np.ndarray):
        raise Mistake(
            f"{what} returned a numpy array: return a torch.Tensor, "
            "torch.from_numpy(table).float(), or build the table with torch functions"
        )
    if isinstance(table, tuple | list):
        if any(isinstance(item, torch.Tensor) for item in table):
            raise Mistake(
                f"{what} returned a {type(table).__name__} of {len(table)} things: return only "
                "the table, one tensor (max_len, d_model)"
            )
        raise Mistake(
            f"{what} returned a Python {type(table).__name__}: return a torch.Tensor of shape "
            "(max_len, d_model), torch.tensor(rows), or build the table with torch functions"
        )
    raise Mistake(f"{what} should return a torch.Tensor, got a {type(table).__name__}")


def _shape_hint(got: torch.Tensor, want: torch.Tensor, max_len: int, d_model: int) -> str:
    """What a table of the wrong shape probably is."""
    shape = tuple(got.shape)
    if shape == (1, max_len, d_model):
        return (
            "Leave out the batch axis: the table is (max_len, d_model), and broadcasting adds "
            "it to every sequence of a batch (B, T, d_model)"
        )
    if shape == (d_model, max_len):
        swapped = reference.sinusoidal_encoding(d_model, max_len)
        if close(got.double(), swapped.double(), _ATOL, _RTOL):
            return (
                "Your function read its arguments the other way round: the lesson calls "
                "sinusoidal_encoding(max_len, d_model), the number of positions first"
            )
        return "The table is transposed: one row per position, one column per dimension"
    if shape == (max_len, d_model // 2) or shape == (max_len, (d_model + 1) // 2):
        return (
            "That is one column per pair of dimensions: each pair holds a sin *and* a cos of "
            f"the same angle, so there are d_model columns in all ({_INTERLEAVE})"
        )
    if shape == (max_len, 2 * d_model):
        return (
            "d_model counts the sin and the cos dimensions together: there are d_model / 2 "
            "pairs, i = 0 .. d_model/2 - 1 (torch.arange(0, d_model, 2) gives their 2i)"
        )
    if d_model % 2 and shape == (max_len, d_model + 1):
        return (
            f"One column too many for an odd d_model: {d_model} dimensions, the last one a sin "
            "without its cos (cut a wider table with pe[:, :d_model] only if it was built "
            "with this d_model's frequencies)"
        )
    if len(shape) == 2 and shape[1] == d_model and shape[0] < max_len:
        return (
            f"Fewer rows than the {max_len} positions asked: one row per position 0 .. "
            "max_len - 1 (a table cached for a smaller max_len?)"
        )
    if len(shape) == 2 and shape[1] == d_model and shape[0] == max_len + 1:
        return "One row too many: the positions are 0 .. max_len - 1, torch.arange(max_len)"
    return "One row per position, one column per dimension"


def _expect_dtype(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    if got.dtype == want.dtype:
        return
    wanted = str(want.dtype).removeprefix("torch.")
    if got.dtype == torch.float64:
        raise Mistake(
            f"{what} is float64; return {wanted}, torch's default dtype and the dtype of the "
            "embeddings the table is added to (a float64 table would turn every sum x + PE "
            "into float64): end with .float(), or build it with dtype=torch.float32"
        )
    if not got.dtype.is_floating_point:
        raise Mistake(
            f"{what} is {str(got.dtype).removeprefix('torch.')}, so every sin and cos was cut "
            "to a whole number when stored in it (torch.zeros_like of an integer tensor, or "
            "torch.arange without a float dtype?): create the table as floats, "
            "torch.zeros(max_len, d_model)"
        )
    raise Mistake(
        f"{what} is {str(got.dtype).removeprefix('torch.')}; return {wanted}, torch's default "
        "dtype and the dtype of the embeddings the table is added to"
    )


def _check_size(candidate, max_len: int, d_model: int) -> None:
    what = f"sinusoidal_encoding({max_len}, {d_model})"
    table = call(
        candidate, max_len, d_model, names=("max_len", "d_model"), hints=_crash_hint(d_model)
    )
    got = _as_tensor(table, what).detach().cpu()
    want = reference.sinusoidal_encoding(max_len, d_model)  # (max_len, d_model)
    expect_shape(got, want.shape, what, _shape_hint(got, want, max_len, d_model))
    _expect_dtype(got, want, what)
    if not torch.isfinite(got).all() and max_len > 1:
        # float32 angles in the thousands: matched to 1e-2, as `_loosely` does
        if matches(got, _table(max_len, d_model, inverted=True), 1e-2, 0.0):
            raise Mistake(f"{what}: {_INVERTED}")
    try:
        expect_close(
            got,
            want,
            what,
            wrong=lambda: _mistakes(max_len, d_model),
            atol=_ATOL,
            rtol=_RTOL,
            explain=lambda got: (
                _loosely(got, max_len, d_model) or _fitted_frequencies(got, max_len, d_model)
            ),
        )
    except Mistake as mistake:
        if str(mistake).startswith(what):
            raise
        raise Mistake(f"{what}: {mistake}") from None


@exercise("sinusoidal_encoding")
def sinusoidal_encoding(candidate) -> str:
    expect_signature(candidate, ("max_len", "d_model"), "sinusoidal_encoding(max_len, d_model)")
    with torch.random.fork_rng(devices=[]):  # a learner's code may draw: the notebook's state stays
        for max_len, d_model in _SIZES:
            _check_size(candidate, max_len, d_model)
    sizes = ", ".join(f"{m} x {d}" for m, d in _SIZES)
    return (
        f"{len(_SIZES)} tables ({sizes}): even and odd d_model, one position, a square one; "
        "float32 values matched the paper's formula"
    )
