"""Plots the lessons share, so each notebook shows attention the same way."""

import matplotlib.pyplot as plt
import torch


def attention_heatmap(weights, queries=None, keys=None, ax=None, title=None, annotate=None):
    """Draw a (T_q, T_k) weight matrix: one row per query, one column per key.

    `queries` / `keys` label the rows / columns; `annotate` writes each weight in its
    cell (default: when the matrix is small enough to read). The colorbar beside it is
    labelled "attention weight", as every heatmap in the course must be.
    """
    w = (
        weights.detach().cpu().float()
        if isinstance(weights, torch.Tensor)
        else torch.tensor(weights)
    )
    if w.dim() != 2:
        raise ValueError(
            f"attention_heatmap draws one (T_q, T_k) matrix, got shape {tuple(w.shape)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * w.shape[1] + 2, 0.5 * w.shape[0] + 1.5))
    image = ax.imshow(w.numpy(), cmap="viridis", vmin=0.0, vmax=max(1e-9, float(w.max())))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_xticks(
        range(w.shape[1]), keys if keys is not None else range(w.shape[1]), rotation=45, ha="right"
    )
    ax.set_yticks(range(w.shape[0]), queries if queries is not None else range(w.shape[0]))
    if annotate is None:
        annotate = w.numel() <= 100
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                value = float(w[i, j])
                ax.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if value > 0.6 * float(w.max()) else "white",
                )
    if title:
        ax.set_title(title)
    colorbar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)  # ax's own figure
    colorbar.set_label("attention weight")
    return ax


# Lesson 06's colours for a boolean mask: grey where a query may not attend, blue where it may.
MAY_ATTEND_COLOURS = ("#d0d0d0", "#1f77b4")


def mask_heatmap(mask, ax=None, title=None, queries=None, keys=None, colorbar=True):
    """Draw a boolean (T_q, T_k) mask, True = may attend, in lesson 06's colours: blue where
    the query may attend, grey where it may not, with a two-entry colorbar "may attend"
    (False / True) unless `colorbar` is False (a figure of many masks then draws one)."""
    from matplotlib.colors import ListedColormap

    m = mask.detach().cpu() if isinstance(mask, torch.Tensor) else torch.tensor(mask)
    if m.dim() != 2 or m.dtype != torch.bool:
        raise ValueError(
            f"mask_heatmap draws one boolean (T_q, T_k) mask, got {m.dtype} {tuple(m.shape)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.4 * m.shape[1] + 2, 0.4 * m.shape[0] + 1.5))
    cmap = ListedColormap(list(MAY_ATTEND_COLOURS))
    image = ax.imshow(m.int().numpy(), cmap=cmap, vmin=-0.5, vmax=1.5)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_xticks(
        range(m.shape[1]), keys if keys is not None else range(m.shape[1]), rotation=45, ha="right"
    )
    ax.set_yticks(range(m.shape[0]), queries if queries is not None else range(m.shape[0]))
    if title:
        ax.set_title(title)
    if colorbar:
        bar = ax.figure.colorbar(image, ax=ax, ticks=[0, 1], fraction=0.046, pad=0.04)
        bar.ax.set_yticklabels(["False", "True"])
        bar.set_label("may attend")
    return ax
