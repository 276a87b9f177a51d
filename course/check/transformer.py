"""Checkers for lesson 08 (the full Transformer): DecoderLayer. (Being written.)"""

__all__: list[str] = []
