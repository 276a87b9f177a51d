"""check.rnn_forward: correct RNNs in many styles pass; each usual mistake gets its own name.

The wrong answers below are the slips people make when they first unroll an RNN (the
activation, h0, the orientation of the matrices, the time axis, what is returned). For
each, the test wants a False verdict whose one printed line names that slip.
"""

import pytest
import torch
import torch.nn.functional as F

from course import check
from course.rnn import rnn_forward as reference_rnn_forward


def _start(x, W_hh, h0):
    return x.new_zeros(x.shape[0], W_hh.shape[0]) if h0 is None else h0  # (B, d_h)


# ------------------------------------------------------------ correct answers ----------


def loop_and_stack(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states, dim=1), h


def preallocated(x, W_xh, W_hh, b, h0=None):
    B, T, _ = x.shape
    hs = x.new_zeros(B, T, W_hh.shape[0])
    h = _start(x, W_hh, h0)
    for t in range(T):
        h = (x[:, t] @ W_xh + h @ W_hh + b).tanh()
        hs[:, t] = h
    return hs, hs[:, -1]


def with_einsum(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    x_part = torch.einsum("btd,dh->bth", x, W_xh) + b
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x_part[:, t] + torch.einsum("bh,hk->bk", h, W_hh))
        states.append(h)
    return torch.stack(states, 1), states[-1]


def with_f_linear(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = []
    for x_t in x.unbind(dim=1):
        h = F.linear(x_t, W_xh.T, b) + F.linear(h, W_hh.T)
        h = h.tanh()
        states.append(h)
    return torch.stack(states, dim=1), h


def returns_a_list(x, W_xh, W_hh, b, h0=None):
    return list(loop_and_stack(x, W_xh, W_hh, b, h0))


def through_torch_rnn(x, W_xh, W_hh, b, h0=None):
    """torch.nn.RNN run with the given tensors as its weights, so gradients reach them."""
    rnn = torch.nn.RNN(W_xh.shape[0], W_xh.shape[1], batch_first=True).to(x.dtype)
    weights = {
        "weight_ih_l0": W_xh.T,
        "weight_hh_l0": W_hh.T,
        "bias_ih_l0": b,
        "bias_hh_l0": torch.zeros_like(b),
    }
    start = None if h0 is None else h0.unsqueeze(0)  # (1, B, d_h)
    hs, h_n = torch.func.functional_call(rnn, weights, (x, start))
    return hs, h_n[0]


def h0_required_keyword(x, W_xh, W_hh, b, h0=None):
    if h0 is None:
        h0 = torch.zeros(x.shape[0], W_hh.shape[1], dtype=x.dtype)
    return loop_and_stack(x, W_xh, W_hh, b, h0)


RIGHT = [
    loop_and_stack,
    preallocated,
    with_einsum,
    with_f_linear,
    returns_a_list,
    through_torch_rnn,
    h0_required_keyword,
    reference_rnn_forward,
]


@pytest.mark.parametrize("answer", RIGHT)
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.rnn_forward, answer)
    assert passed is True and "✅ rnn_forward: passed" in printed, printed


# ------------------------------------------------------------- mistakes ----------


def _loop(x, W_xh, W_hh, b, h0, step, carry=True):
    """A loop with one step rule changed; the state is carried unless carry=False."""
    start = _start(x, W_hh, h0)
    h, states = start, []
    for t in range(x.shape[1]):
        h = step(x[:, t], h if carry else start)
        states.append(h)
    return torch.stack(states, dim=1), h


def stub(x, W_xh, W_hh, b, h0=None):
    # YOUR CODE HERE
    raise NotImplementedError


def no_tanh(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: x_t @ W_xh + h @ W_hh + b)


def relu(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: torch.relu(x_t @ W_xh + h @ W_hh + b))


def sigmoid(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: torch.sigmoid(x_t @ W_xh + h @ W_hh + b))


def h0_ignored(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b)


def never_updated(x, W_xh, W_hh, b, h0=None):
    def step(x_t, h):
        return torch.tanh(x_t @ W_xh + h @ W_hh + b)

    return _loop(x, W_xh, W_hh, b, h0, step, carry=False)


def never_updated_and_returns_last_step(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = [torch.tanh(x[:, t] @ W_xh + h @ W_hh + b) for t in range(x.shape[1])]
    return torch.stack(states, dim=1), states[-1]


def w_hh_transposed(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh.T, b, h0)


def w_hh_on_the_left(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: torch.tanh(x_t @ W_xh + (W_hh @ h.T).T + b))


def w_xh_transposed(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: torch.tanh(x_t @ W_xh.T + h @ W_hh + b))


def f_linear_without_transposing(x, W_xh, W_hh, b, h0=None):
    step = lambda x_t, h: torch.tanh(F.linear(x_t, W_xh, b) + F.linear(h, W_hh))  # noqa: E731
    return _loop(x, W_xh, W_hh, b, h0, step)


def no_bias(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, torch.zeros_like(b), h0)


def bias_twice(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda x_t, h: torch.tanh(x_t @ W_xh + b + h @ W_hh + b))


def loops_over_batch(x, W_xh, W_hh, b, h0=None):
    h = torch.zeros(x.shape[1], W_hh.shape[0]) if h0 is None else h0
    states = []
    for x_t in x:  # iterates over the batch: x_t is (T, d_in)
        h = torch.tanh(x_t @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states), h


def indexes_batch_as_time(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[t] @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states, dim=1), h


def time_first_output(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs.transpose(0, 1), h


def off_by_one(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        states.append(h)
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)
    return torch.stack(states, dim=1), h


def includes_h0(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return torch.cat([_start(x, W_hh, h0)[:, None], hs], dim=1), h


def reversed_order(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs.flip(1), h


def reads_backwards(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x.flip(1), W_xh, W_hh, b, h0)


def wrong_return_order(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return h, hs


def only_hs(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b, h0)[0]


def only_h_T(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b, h0)[1]


def list_not_stacked(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return list(hs.unbind(1)), h


def first_state_as_last(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, hs[:, 0]


def h0_as_last(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, _start(x, W_hh, h0)


def last_state_keeps_time_axis(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, hs[:, -1:]


def changes_h0_in_place(x, W_xh, W_hh, b, h0=None):
    if h0 is None:
        return loop_and_stack(x, W_xh, W_hh, b)
    h, states = h0, []
    for t in range(x.shape[1]):
        h.mul_(0).add_(torch.tanh(x[:, t] @ W_xh + h.clone() @ W_hh + b))
        states.append(h.clone())
    return torch.stack(states, dim=1), h.clone()


def hidden_size_from_input(x, W_xh, W_hh, b, h0=None):
    h = torch.zeros(x.shape[0], x.shape[2]) if h0 is None else h0
    return loop_and_stack(x, W_xh, W_hh, b, h)


def state_detached_each_step(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ W_xh + h.detach() @ W_hh + b)  # truncated BPTT
        states.append(h)
    return torch.stack(states, dim=1), h


def tanh_on_input_only(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda xt, h: torch.tanh(xt @ W_xh) + h @ W_hh + b)


def tanh_on_input_and_bias(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda xt, h: torch.tanh(xt @ W_xh + b) + h @ W_hh)


def tanh_on_recurrence_only(x, W_xh, W_hh, b, h0=None):
    return _loop(x, W_xh, W_hh, b, h0, lambda xt, h: xt @ W_xh + torch.tanh(h @ W_hh) + b)


def one_aliased_buffer(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0).clone()
    states = []
    for t in range(x.shape[1]):
        h[:] = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)  # overwrites the one buffer
        states.append(h)
    return torch.stack(states, dim=1), h


def h0_or_zeros(x, W_xh, W_hh, b, h0=None):
    h0 = h0 or torch.zeros(x.shape[0], W_hh.shape[0])
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def state_forced_to_float32(x, W_xh, W_hh, b, h0=None):
    if h0 is None:
        h0 = torch.zeros(x.shape[0], W_hh.shape[1])  # float32, whatever x is
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def preallocated_in_float32(x, W_xh, W_hh, b, h0=None):
    B, T, _ = x.shape
    hs = torch.zeros(B, T, W_hh.shape[0])
    h = _start(x, W_hh, h0)
    for t in range(T):
        h = (x[:, t] @ W_xh + h @ W_hh + b).tanh()
        hs[:, t] = h
    return hs, hs[:, -1]


def returns_float32(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs.float(), h.float()


def torch_rnn_squeezed(x, W_xh, W_hh, b, h0=None):
    hs, h_n = through_torch_rnn(x, W_xh, W_hh, b, h0)
    return hs, h_n.squeeze()  # (B, d_h), but (d_h,) for a batch of one


def torch_rnn_with_copied_weights(x, W_xh, W_hh, b, h0=None):
    rnn = torch.nn.RNN(W_xh.shape[0], W_xh.shape[1], batch_first=True).to(x.dtype)
    with torch.no_grad():  # the copies cut the graph: no gradient reaches W_xh, W_hh, b
        rnn.weight_ih_l0.copy_(W_xh.T)
        rnn.weight_hh_l0.copy_(W_hh.T)
        rnn.bias_ih_l0.copy_(b)
        rnn.bias_hh_l0.zero_()
    hs, h_n = rnn(x, None if h0 is None else h0.unsqueeze(0))
    return hs, h_n[0]


def view_of_noncontiguous_input(x, W_xh, W_hh, b, h0=None):
    B, T, d_in = x.shape
    x_part = (x.view(B * T, d_in) @ W_xh + b).view(B, T, -1)
    h = _start(x, W_hh, h0)
    states = []
    for t in range(T):
        h = torch.tanh(x_part[:, t] + h @ W_hh)
        states.append(h)
    return torch.stack(states, dim=1), h


WRONG = [
    (stub, "⏳ rnn_forward: not implemented yet"),
    (no_tanh, "tanh is missing"),
    (relu, "you used ReLU"),
    (sigmoid, "you used a sigmoid"),
    (h0_ignored, "h0 is ignored"),
    (never_updated, "the hidden state is never carried over"),
    (never_updated_and_returns_last_step, "the hidden state is never carried over"),
    (w_hh_transposed, "W_hh is transposed"),
    (w_hh_on_the_left, "W_hh is transposed"),
    (w_xh_transposed, "W_xh is transposed"),
    (f_linear_without_transposing, "F.linear(x, W) computes x @ W.T"),
    (no_bias, "the bias b is missing"),
    (bias_twice, "the bias is added twice"),
    (loops_over_batch, "you looped over the batch axis"),
    (indexes_batch_as_time, "the input at step t is x[:, t]"),
    (time_first_output, "batch and time axes are swapped"),
    (off_by_one, "hs is off by one step"),
    (includes_h0, "That is T + 1 states"),
    (reversed_order, "hs is in reversed time order"),
    (reads_backwards, "the sequence is read backwards"),
    (wrong_return_order, "wrong order: return (hs, h_T)"),
    (only_hs, "you returned only hs"),
    (only_h_T, "should return the tuple (hs, h_T), got a tensor of shape (2, 4)"),
    (list_not_stacked, "torch.stack(states, dim=1)"),
    (first_state_as_last, "h_T is h_1, the first state"),
    (h0_as_last, "h_T is h0 (or zeros)"),
    (last_state_keeps_time_axis, "not hs[:, -1:]"),
    (changes_h0_in_place, "changed one of its input tensors in place"),
    (state_detached_each_step, "the state is detached from the graph at each step"),
    (tanh_on_input_only, "tanh wraps only the input term"),
    (tanh_on_input_and_bias, "tanh wraps only x_t W_xh + b"),
    (tanh_on_recurrence_only, "tanh wraps only the recurrent term"),
    (one_aliased_buffer, "share one buffer that each step overwrites in place"),
    (h0_or_zeros, "write `h0 if h0 is not None else"),
    (state_forced_to_float32, "mixes float32 and float64"),
    (preallocated_in_float32, "is float32, but the inputs were float64"),
    (returns_float32, "is float32, but the inputs were float64"),
    (torch_rnn_squeezed, "With a batch of one, h_T must still be (1, d_h)"),
    (torch_rnn_with_copied_weights, "no gradient reaches W_xh"),
    (view_of_noncontiguous_input, "use .reshape(...) instead of .view(...)"),
    (hidden_size_from_input, "h starting as h0 or zeros (B, d_h), d_h = W_hh.shape[0]"),
]


@pytest.mark.parametrize("answer, diagnosis", WRONG, ids=[w[0].__name__ for w in WRONG])
def test_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.rnn_forward, answer)
    assert passed is False and diagnosis in printed, printed
    assert printed.startswith("⏳" if answer is stub else "❌"), printed


# ------------------------------------------------------ absurd answers ----------


def returns_none(x, W_xh, W_hh, b, h0=None):
    return None


def returns_a_string(x, W_xh, W_hh, b, h0=None):
    return "hs, h_T"


def raises_type_error(x, W_xh, W_hh, b, h0=None):
    raise TypeError("unsupported operand")


def returns_three_things(x, W_xh, W_hh, b, h0=None):
    return (*loop_and_stack(x, W_xh, W_hh, b, h0), None)


def returns_nan(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs * float("nan"), h


def takes_no_h0(x, W_xh, W_hh, b):
    return loop_and_stack(x, W_xh, W_hh, b)


ABSURD = [
    (returns_none, "should return the tuple (hs, h_T), got a NoneType"),
    (returns_a_string, "should return the tuple (hs, h_T), got a str"),
    (raises_type_error, "your code raised TypeError: unsupported operand"),
    (returns_three_things, "should return 2 things (hs, h_T), got 3"),
    (returns_nan, "NaN"),
    (takes_no_h0, "The signature is rnn_forward(x, W_xh, W_hh, b, h0=None)"),
    (42, "expected your function or class itself"),
]


@pytest.mark.parametrize(
    "answer, diagnosis", ABSURD, ids=[getattr(a[0], "__name__", repr(a[0])) for a in ABSURD]
)
def test_absurd_answers_never_raise(answer, diagnosis, verdict):
    passed, printed = verdict(check.rnn_forward, answer)
    assert passed is False and diagnosis in printed, printed
