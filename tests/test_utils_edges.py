"""The shared helpers at their edges: course.utils (seeding, device, gap, timing),
course.plotting (the attention heatmap every lesson draws) and the package's version.

Written against the mutants that tools/mutation.py found alive: each test pins one
behaviour that no other test did.
"""

import importlib.metadata
import random

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import course
from course import utils
from course.plotting import attention_heatmap

# ------------------------------------------------------------------- utils ----------


def test_the_package_reports_the_version_it_was_installed_as():
    assert course.__version__ == importlib.metadata.version("course")  # pyproject.toml's


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_seed_everything_seeds_python_numpy_and_torch_and_defaults_to_zero():
    utils.seed_everything(0)
    first = _draws()
    utils.seed_everything()  # the default seed is 0
    assert _draws() == first
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    assert _draws() == first  # each library is seeded, with the very seed given
    utils.seed_everything(1)
    assert all(a != b for a, b in zip(_draws(), first, strict=True))


@pytest.mark.parametrize("available, kind", [(True, "cuda"), (False, "cpu")])
def test_device_is_the_gpu_exactly_when_there_is_one(monkeypatch, available, kind):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert utils.device() == torch.device(kind)


def test_gap_says_below_one_in_a_million_only_strictly_below():
    zero = torch.zeros(2, dtype=torch.float64)
    assert utils.gap(zero, zero + 0.999e-6) == "< 1e-6"
    assert utils.gap(zero, zero + 1e-6) == "1e-06"  # exactly 1e-6 is not below it
    assert utils.gap(zero, torch.tensor([0.0, -0.04], dtype=torch.float64)) == "4e-02"


def _counting():
    calls = []
    return calls, lambda *args: calls.append(args)


def test_best_seconds_repeats_five_times_by_default_after_one_warm_up():
    calls, fn = _counting()
    assert utils.best_seconds(fn, "x", 2) >= 0.0
    assert calls == [("x", 2)] * 6


def test_best_seconds_accepts_a_single_repeat_and_names_a_bad_count():
    calls, fn = _counting()
    utils.best_seconds(fn, repeats=1)
    assert len(calls) == 2
    with pytest.raises(ValueError) as error:
        utils.best_seconds(fn, repeats=-2)
    assert str(error.value) == "repeats must be at least 1, got -2"
    assert len(calls) == 2  # refused before any call


# ---------------------------------------------------------------- plotting ----------


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


WEIGHTS = torch.tensor([[0.75, 0.25, 0.0], [0.1, 1.25, 0.6]])  # (T_q=2, T_k=3), max 1.25


def test_heatmap_labels_axes_ticks_and_its_colorbar():
    ax = attention_heatmap(WEIGHTS, queries=["a", "b"], keys=["x", "y", "z"], title="my title")
    assert ax.get_xlabel() == "key (attended to)"
    assert ax.get_ylabel() == "query (attending)"
    assert ax.get_title() == "my title"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert list(ax.get_xticks()) == [0, 1, 2] and list(ax.get_yticks()) == [0, 1]
    label = ax.get_xticklabels()[0]
    assert (label.get_rotation(), label.get_horizontalalignment()) == (45.0, "right")
    assert ax.images[0].colorbar.ax.get_ylabel() == "attention weight"


def test_heatmap_numbers_rows_and_columns_without_labels_and_has_no_title_unless_given():
    ax = attention_heatmap(WEIGHTS)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1"]
    assert ax.get_title() == ""


def test_heatmap_shows_the_weights_on_viridis_from_zero_to_their_maximum():
    ax = attention_heatmap(WEIGHTS.clone().requires_grad_())
    image = ax.images[0]
    np.testing.assert_array_equal(image.get_array(), WEIGHTS.numpy())
    assert image.get_cmap().name == "viridis"
    assert image.get_clim() == (0.0, 1.25)
    zeros = attention_heatmap(np.zeros((2, 2)))  # nothing to show: no division by zero
    assert zeros.images[0].get_clim() == (0.0, 1e-9)


def test_heatmap_writes_each_weight_in_its_cell_dark_on_bright_cells():
    ax = attention_heatmap(WEIGHTS)
    texts = {(t.get_position(), t.get_text()): t for t in ax.texts}
    assert len(texts) == 6
    cell = texts[((1, 1), "1.25")]  # (x = key 1, y = query 1)
    assert (cell.get_ha(), cell.get_va(), cell.get_fontsize()) == ("center", "center", 8)
    colours = {text: t.get_color() for (_, text), t in texts.items()}
    # black above 60 % of the maximum (0.75 here, exactly), white up to it
    assert colours == {
        "0.75": "white",
        "0.25": "white",
        "0.00": "white",
        "0.10": "white",
        "1.25": "black",
        "0.60": "white",
    }
    half = attention_heatmap([[0.5, 0.4], [0.0, 0.1]])  # max 0.5: 0.4 is above 0.3
    assert [t.get_color() for t in half.texts] == ["black", "black", "white", "white"]


@pytest.mark.parametrize(
    "shape, annotate, expected",
    [((10, 10), None, 100), ((1, 101), None, 0), ((10, 11), None, 0), ((10, 11), True, 110)],
)
def test_heatmap_annotates_up_to_a_hundred_cells_unless_told(shape, annotate, expected):
    ax = attention_heatmap(
        torch.rand(shape, generator=torch.Generator().manual_seed(0)), annotate=annotate
    )
    assert len(ax.texts) == expected
    assert len(attention_heatmap(torch.ones(2, 2), annotate=False).texts) == 0


def test_heatmap_makes_a_figure_sized_to_the_matrix_or_draws_into_the_given_axes():
    ax = attention_heatmap(torch.ones(4, 10))
    assert tuple(ax.figure.get_size_inches()) == pytest.approx((0.6 * 10 + 2, 0.5 * 4 + 1.5))
    fig, given = plt.subplots(figsize=(4, 3))
    plt.figure()  # another figure is the current one: the heatmap still goes into `given`
    width = given.get_position(original=True).width
    assert attention_heatmap(WEIGHTS, ax=given) is given
    assert len(fig.axes) == 2  # the heatmap and its colorbar
    colorbar = given.images[0].colorbar.ax.get_position(original=True)
    assert colorbar.width == pytest.approx(0.046 * width)  # a slim bar ...
    gap = colorbar.x0 - given.get_position(original=True).x1
    assert gap == pytest.approx(0.04 * width)  # ... just right of the heatmap


def test_heatmap_refuses_anything_but_one_matrix():
    with pytest.raises(ValueError) as error:
        attention_heatmap(torch.zeros(2, 3, 4))
    assert str(error.value) == "attention_heatmap draws one (T_q, T_k) matrix, got shape (2, 3, 4)"
