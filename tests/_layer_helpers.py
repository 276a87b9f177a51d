"""Helpers the layer and transformer tests share (imported by tests/test_layers.py and
tests/test_transformer.py; pytest puts tests/ on sys.path)."""

import torch
from torch import nn


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randomize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter random (biases non-zero, norm gains away from 1): all of them count.
    A tied parameter is visited once (named_parameters skips repeats)."""
    gen = _gen(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.3
            p.copy_(noise + (1.0 if "norm" in name and name.endswith("weight") else 0.0))
    return module
