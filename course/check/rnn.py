"""Checker for lesson 01: `rnn_forward`, a vanilla RNN unrolled over time.

The answer is compared with `torch.nn.RNN` given the same weights, on inputs where B, T,
d_in and d_h differ (a swapped axis shows up as a wrong shape), with and without h0,
and for T = 1. W_hh is square but its values are not symmetric, so W_hh.T gives other
numbers; the first case has d_in == d_h, so that a transposed W_xh gives numbers to
diagnose instead of a shape error. When the numbers are wrong, the usual mistakes are
computed on the same inputs and the one that matches is named. One case has a
non-contiguous x, the last a batch of one in float64. Every case is also judged backward: the
gradients with respect to x, W_xh, W_hh, b and h0 must equal the reference's, which
catches a state detached at each step (backpropagation through time cut short).
"""

import functools

import torch

from course import rnn as reference
from course.check._framework import (
    Mistake,
    call,
    exercise,
    expect_close,
    expect_gradients,
    expect_shape,
    expect_signature,
    expect_tensor,
    expect_tuple,
    generator,
    noncontiguous,
    randn,
)

# (B, T, d_in, d_h, with h0). d_in == d_h only in the first case, so that a transposed W_xh
# gives numbers to diagnose there; everywhere else all four sizes differ.
_CASES = [
    (2, 5, 4, 4, False),
    (3, 4, 5, 2, True),
    (4, 1, 2, 3, True),  # one time step
    (3, 6, 2, 5, False),  # x not contiguous (as a transposed tensor is)
    (5, 2, 3, 4, True),
    (1, 4, 3, 2, False),  # a batch of one, in float64
]
_NONCONTIGUOUS, _ROBUST = 3, len(_CASES) - 1

_HINTS = {
    "cannot be multiplied": "Check each step's shapes: x_t = x[:, t] (B, d_in) @ W_xh (d_in, d_h), "
    "h (B, d_h) @ W_hh (d_h, d_h), with h starting as h0 or zeros (B, d_h), "
    "d_h = W_hh.shape[0]; use the matrices as given, not transposed",
    "must match the size": "x is batch first, (B, T, d_in): the input at step t is x[:, t] "
    "(B, d_in), not x[t]",
    "out of bounds": "x is batch first, (B, T, d_in): loop over t in range(T) with "
    "T = x.shape[1], and read x[:, t]",
    "positional argument": "The signature is rnn_forward(x, W_xh, W_hh, b, h0=None)",
    "Boolean value of Tensor with more than one value is ambiguous": "`h0 or ...` (or `if h0:`) "
    "asks whether a whole tensor is true: write `h0 if h0 is not None else x.new_zeros(B, d_h)`",
}


def _detached_each_step(x, W_xh, W_hh, b, h0=None):
    """The right values, but the state is detached at every step: truncated backprop."""
    B, T, _ = x.shape
    h = x.new_zeros(B, W_hh.shape[0]) if h0 is None else h0  # (B, d_h)
    hs = []
    for t in range(T):
        h = torch.tanh(x[:, t] @ W_xh + h.detach() @ W_hh + b)  # (B, d_h)
        hs.append(h)
    return torch.stack(hs, dim=1), h  # (B, T, d_h), (B, d_h)


_GRADIENT_MISTAKES = {
    "the values are right, but the state is detached from the graph at each step "
    "(h.detach() or h.data), so the gradient stops after one step: backpropagation through "
    "time needs h_{t-1} kept in the graph. Use h as it is": _detached_each_step,
}


def _unroll(x, W_xh, W_hh, b, h0, activation=torch.tanh, carry=True, step=None):
    """A vanilla RNN with one mistake switched on: another activation, h never carried,
    or another `step(x_t, h) -> h_t`."""
    B, T, _ = x.shape
    start = x.new_zeros(B, W_hh.shape[0]) if h0 is None else h0  # (B, d_h)
    step = step or (lambda x_t, h: activation(x_t @ W_xh + h @ W_hh + b))
    h, hs = start, []
    for t in range(T):
        h = step(x[:, t], h if carry else start)  # (B, d_h)
        hs.append(h)
    return torch.stack(hs, dim=1)  # (B, T, d_h)


def _hs_mistakes(x, W_xh, W_hh, b, h0) -> dict[str, torch.Tensor]:
    """Diagnosis -> the hidden states (B, T, d_h) that mistake returns, on these inputs."""
    hs, _ = reference.rnn_forward(x, W_xh, W_hh, b, h0)
    start = x.new_zeros(x.shape[0], W_hh.shape[0]) if h0 is None else h0  # (B, d_h)
    wrong = {}
    if h0 is not None:
        wrong[
            "h0 is ignored: when h0 is given, the first step must use it as h_{t-1} "
            "(start from zeros only when h0 is None)"
        ] = reference.rnn_forward(x, W_xh, W_hh, b)[0]
    wrong |= {
        "the hidden state is never carried over: every step uses h0 (or zeros) as h_{t-1}. "
        "Assign the new state, h = torch.tanh(...), and use it in the next step": _unroll(
            x, W_xh, W_hh, b, h0, carry=False
        ),
        "tanh is missing: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)": _unroll(
            x, W_xh, W_hh, b, h0, activation=lambda z: z
        ),
        "you used ReLU; a vanilla RNN (and torch.nn.RNN's default) squashes with tanh: "
        "torch.tanh(...)": _unroll(x, W_xh, W_hh, b, h0, activation=torch.relu),
        "you used a sigmoid; a vanilla RNN (and torch.nn.RNN's default) squashes with tanh, "
        "whose values lie in (-1, 1): torch.tanh(...)": _unroll(
            x, W_xh, W_hh, b, h0, activation=torch.sigmoid
        ),
        "tanh wraps only the input term: the new state is tanh of the whole sum, "
        "h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)": _unroll(
            x, W_xh, W_hh, b, h0, step=lambda x_t, h: torch.tanh(x_t @ W_xh) + h @ W_hh + b
        ),
        "tanh wraps only x_t W_xh + b: the recurrent term belongs inside too, "
        "h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)": _unroll(
            x, W_xh, W_hh, b, h0, step=lambda x_t, h: torch.tanh(x_t @ W_xh + b) + h @ W_hh
        ),
        "tanh wraps only the recurrent term: the new state is tanh of the whole sum, "
        "h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)": _unroll(
            x, W_xh, W_hh, b, h0, step=lambda x_t, h: x_t @ W_xh + torch.tanh(h @ W_hh) + b
        ),
        "every entry of hs is the last state h_T: the states share one buffer that each step "
        "overwrites in place (h[:] = ..., h.copy_(...)). Make a new tensor at every step, "
        "h = torch.tanh(...), and keep each one": hs[:, -1:].expand_as(hs),
        "W_hh is transposed: the recurrent term is h_{t-1} (B, d_h) @ W_hh, "
        "not h @ W_hh.T (or W_hh @ h)": reference.rnn_forward(x, W_xh, W_hh.T, b, h0)[0],
        "the bias b is missing: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)": reference.rnn_forward(
            x, W_xh, W_hh, torch.zeros_like(b), h0
        )[0],
        "the bias is added twice: there is one b per step (torch.nn.RNN's two biases, "
        "bias_ih and bias_hh, add up to this one b)": reference.rnn_forward(
            x, W_xh, W_hh, 2 * b, h0
        )[0],
        "hs is off by one step: it holds h_0 .. h_{T-1}. Keep the state *after* each step, "
        "h_1 .. h_T (hs[:, -1] is h_T)": torch.cat([start[:, None], hs[:, :-1]], dim=1),
        "hs is in reversed time order: hs[:, t] must be the state after step t, in reading "
        "order (torch.stack(states, dim=1), no flip)": hs.flip(1),
        "the sequence is read backwards: step t must read x[:, t], "
        "from t = 0 up to T - 1": reference.rnn_forward(x.flip(1), W_xh, W_hh, b, h0)[0],
    }
    if W_xh.shape[0] == W_xh.shape[1]:
        wrong |= {
            "W_xh is transposed: the input term is x_t (B, d_in) @ W_xh (d_in, d_h), as "
            "given": reference.rnn_forward(x, W_xh.T, W_hh, b, h0)[0],
            "W_xh and W_hh are both transposed: use x_t @ W_xh and h @ W_hh as given "
            "(F.linear(x, W) computes x @ W.T: pass it W_xh.T, or use @)": reference.rnn_forward(
                x, W_xh.T, W_hh.T, b, h0
            )[0],
        }
    if h0 is None:  # looping over dim 0 steps through the batch; stacking on dim 0 hides it
        hs_by_batch, _ = reference.rnn_forward(x.transpose(0, 1), W_xh, W_hh, b)  # (T, B, d_h)
        wrong[
            "you looped over the batch axis: x is batch first, (B, T, d_in), so step t "
            "reads x[:, t] and hs stacks the states on dim=1"
        ] = hs_by_batch.transpose(0, 1)
    return wrong


def _shape_hint(got: torch.Tensor, B: int, T: int, d_h: int) -> str:
    shape = tuple(got.shape)
    if shape == (T, B, d_h):
        return (
            "The batch and time axes are swapped: keep batch first, "
            "torch.stack(states, dim=1) gives (B, T, d_h)"
        )
    if shape == (B, T + 1, d_h):
        return "That is T + 1 states: hs holds h_1 .. h_T, not h_0"
    if len(shape) == 3 and shape[:2] == (B, T):
        return "Each state is d_h wide: h (B, d_h) @ W_hh (d_h, d_h)"
    return "hs is (B, T, d_h): the state after every step, stacked with torch.stack(states, dim=1)"


def _expect_pair(result, B: int, T: int, d_h: int) -> tuple:
    """The result is the pair (hs, h_T); name the usual ways it is not."""
    if isinstance(result, torch.Tensor) and tuple(result.shape) == (B, T, d_h):
        raise Mistake(
            "you returned only hs: return the pair (hs, h_T), with h_T = the last state (B, d_h)"
        )
    hs, h_T = expect_tuple(result, ("hs", "h_T"))
    if isinstance(hs, list | tuple):
        raise Mistake(
            f"hs is a Python {type(hs).__name__} of states: turn it into one tensor (B, T, d_h) "
            "with torch.stack(states, dim=1)"
        )
    if getattr(hs, "shape", None) == (B, d_h) and getattr(h_T, "shape", None) == (B, T, d_h):
        raise Mistake("the results come back in the wrong order: return (hs, h_T)")
    return expect_tensor(hs, "hs"), expect_tensor(h_T, "h_T")


def _check_last_state(h_T, want_hs, h0, B: int, d_h: int) -> None:
    shape = tuple(h_T.shape)
    hint = "h_T is the last state, hs[:, -1]"
    if shape == (B, 1, d_h):
        hint = "h_T is (B, d_h): hs[:, -1], not hs[:, -1:]"
    if shape == (d_h,) and B == 1:
        hint = (
            "With a batch of one, h_T must still be (1, d_h): don't .squeeze() it; "
            "from torch.nn.RNN's h_n (1, B, d_h) take h_n[0]"
        )
    if shape == (1, B, d_h):
        hint = "That is torch.nn.RNN's h_n (num_layers, B, d_h): return h_n[0], (B, d_h)"
    expect_shape(h_T, (B, d_h), "h_T", hint)
    start = want_hs.new_zeros(B, d_h) if h0 is None else h0  # (B, d_h)
    wrong = {
        "h_T is h0 (or zeros): return the state after the last step": start,
        "h_T is h_1, the first state: return the last one, hs[:, -1]": want_hs[:, 0],
    }
    if want_hs.shape[1] > 1:
        wrong["h_T is h_{T-1}, one step early: return the state after the last step"] = want_hs[
            :, -2
        ]
    expect_close(h_T, want_hs[:, -1], "h_T", wrong=wrong)


def _inputs(gen, B, T, d_in, d_h, with_h0, dtype=torch.float32, contiguous=True):
    x = randn(gen, B, T, d_in, dtype=dtype)  # (B, T, d_in)
    W_xh = randn(gen, d_in, d_h, dtype=dtype) * 0.6  # (d_in, d_h)
    W_hh = randn(gen, d_h, d_h, dtype=dtype) * 0.6  # (d_h, d_h): not symmetric, so W_hh.T differs
    b = randn(gen, d_h, dtype=dtype) * 0.5  # (d_h,)
    h0 = randn(gen, B, d_h, dtype=dtype) * 0.5 if with_h0 else None  # (B, d_h)
    return (x if contiguous else noncontiguous(x)), W_xh, W_hh, b, h0


@exercise("rnn_forward")
def rnn_forward(candidate) -> str:
    # Building a torch.nn.RNN draws initial weights from torch's global generator: fork it,
    # so that checking leaves the notebook's random state as it was.
    with torch.random.fork_rng(devices=[]):
        return _check(candidate)


def _check(candidate) -> str:
    expect_signature(candidate, ("x", "W_xh", "W_hh", "b", "h0"),
                     "rnn_forward(x, W_xh, W_hh, b, h0=None)")  # fmt: skip
    gen = generator(1)
    for i, (B, T, d_in, d_h, with_h0) in enumerate(_CASES):
        dtype = torch.float64 if i == _ROBUST else torch.float32
        x, W_xh, W_hh, b, h0 = _inputs(
            gen, B, T, d_in, d_h, with_h0, dtype, contiguous=i != _NONCONTIGUOUS
        )
        with torch.no_grad():
            want_hs, _ = reference.to_torch_rnn(W_xh, W_hh, b)(
                x, None if h0 is None else h0[None]
            )  # torch.nn.RNN: (B, T, d_h)
        args = (x, W_xh, W_hh, b) if h0 is None else (x, W_xh, W_hh, b, h0)
        names = ("x", "W_xh", "W_hh", "b", "h0")
        result = call(candidate, *args, names=names, hints=_HINTS)
        hs, h_T = _expect_pair(result, B, T, d_h)
        what = f"hs on x {(B, T, d_in)}, d_h={d_h}, " + ("with h0" if with_h0 else "h0=None")
        what += {_ROBUST: ", float64", _NONCONTIGUOUS: ", x not contiguous"}.get(i, "")
        expect_shape(hs, want_hs.shape, what, _shape_hint(hs, B, T, d_h))
        expect_close(hs, want_hs, what, wrong=functools.partial(_hs_mistakes, x, W_xh, W_hh, b, h0))
        _check_last_state(h_T, want_hs, h0, B, d_h)
        inputs = {"x": x, "W_xh": W_xh, "W_hh": W_hh, "b": b} | ({"h0": h0} if with_h0 else {})
        expect_gradients(
            functools.partial(call, candidate, names=names, hints=_HINTS),
            reference.rnn_forward,
            inputs,
            f"backward through {what}",
            wrong=_GRADIENT_MISTAKES,
        )
    return (
        f"{len(_CASES)} cases, with and without h0, T = 1 to 6, a batch of one in float64; "
        "values equal to torch.nn.RNN given the same weights, gradients to the reference's"
    )
