"""Exercise checkers: `check.<exercise>(your_code)` prints one verdict, returns True/False.

    from course import check
    check.dot_product_attention(dot_product_attention)   # ✅ / ⏳ / ❌ and why

`EXERCISES` maps every exercise name to its checker, in lesson order.
"""

from course.check._framework import EXERCISES

# Lesson order is registration order: EXERCISES lists the checkers as they are imported.
# isort: off
from course.check.rnn import rnn_forward
from course.check.attention import dot_product_attention, scaled_dot_product_attention
from course.check.multihead import MultiHeadAttention, merge_heads, split_heads

# Lessons 05-12: each module lists its checkers in its own __all__.
from course.check.positional import *  # noqa: F403
from course.check.masking import *  # noqa: F403
from course.check.layers import *  # noqa: F403
from course.check.transformer import *  # noqa: F403
from course.check.decoding import *  # noqa: F403
from course.check.efficient import *  # noqa: F403
from course.check.data import *  # noqa: F403
from course.check.sampling import *  # noqa: F403

# isort: on

__all__ = [
    "EXERCISES",
    "rnn_forward",
    "dot_product_attention",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    *positional.__all__,  # noqa: F405
    *masking.__all__,  # noqa: F405
    *layers.__all__,  # noqa: F405
    *transformer.__all__,  # noqa: F405
    *decoding.__all__,  # noqa: F405
    *efficient.__all__,  # noqa: F405
    *data.__all__,  # noqa: F405
    *sampling.__all__,  # noqa: F405
]
