"""Exercise checkers: `check.<exercise>(your_code)` prints one verdict, returns True/False.

    from course import check
    check.dot_product_attention(dot_product_attention)   # ✅ / ⏳ / ❌ and why

`EXERCISES` maps every exercise name to its checker, in lesson order.
"""

from course.check._framework import EXERCISES

from course.check.rnn import rnn_forward  # isort: skip (lesson 01 registers first)
from course.check.attention import dot_product_attention, scaled_dot_product_attention
from course.check.multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = [
    "EXERCISES",
    "rnn_forward",
    "dot_product_attention",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
]
