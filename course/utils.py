"""Small helpers every lesson uses: seeding and choosing a device."""

import random

import numpy as np
import torch


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch so that a notebook run twice prints the same numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def device() -> torch.device:
    """The GPU when there is one, else the CPU. Nothing in the course needs a GPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def gap(got: torch.Tensor, want: torch.Tensor) -> str:
    """The largest absolute difference between two tensors, as text that reads the same on
    every run: "< 1e-6" when they agree to float32 rounding, else its order of magnitude."""
    difference = (got.detach() - want.detach()).abs().max().item()
    return "< 1e-6" if difference < 1e-6 else f"{difference:.0e}"
