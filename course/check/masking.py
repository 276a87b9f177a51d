"""Checkers for lesson 06 (masking): causal_mask, padding_mask. (Being written.)"""

__all__: list[str] = []
