"""Attention, step by step: the reference code the notebooks build on.

One module per concept, in lesson order:

    01 rnn          why recurrence is a bottleneck; the RNN baseline
    02 attention    dot-product attention (and, in 03, its scaled, masked form)
    04 multihead    multi-head attention
    ...

`course.check` holds the exercise checkers; `course.authoring` builds the notebooks.
"""

__version__ = "0.1.0"

import torch as _torch  # noqa: E402

from course.utils import course_threads as _course_threads  # noqa: E402

# The thread policy (course.utils): one CPU thread unless $COURSE_THREADS or
# $OMP_NUM_THREADS says otherwise, for every lesson, checker and training run alike.
_torch.set_num_threads(_course_threads())
