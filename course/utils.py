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
