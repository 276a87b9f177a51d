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
