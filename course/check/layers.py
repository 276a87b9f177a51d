"""Checkers for lesson 07 (Add & Norm, feed-forward): LayerNorm, EncoderLayer. (Being written.)"""

__all__: list[str] = []
