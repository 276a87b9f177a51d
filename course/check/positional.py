"""Checkers for lesson 05 (positional encoding): sinusoidal_encoding. (Being written.)"""

__all__: list[str] = []
