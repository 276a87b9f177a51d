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


# ------------------------------------------------------- the full verdict lines ----------
# The message is what the learner reads: for each diagnosis the whole printed line is pinned
# down, with the case it names (sizes, h0 or not, float64, non-contiguous): an answer that
# breaks only on one time step, a batch of one, float64 or a non-contiguous x is caught there.


def one_based_loop(x, W_xh, W_hh, b, h0=None):
    h, states = _start(x, W_hh, h0), []
    for t in range(1, x.shape[1] + 1):  # x[:, T] does not exist
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states, dim=1), h


def concatenated_not_stacked(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return torch.cat(hs.unbind(1), dim=1), h  # (B, T * d_h)


def keeps_the_concatenated_input(x, W_xh, W_hh, b, h0=None):
    """The [x_t, h] form of the step, appending the wrong variable: z, not the new h."""
    h, states = _start(x, W_hh, h0), []
    W = torch.cat([W_xh, W_hh])  # (d_in + d_h, d_h)
    for t in range(x.shape[1]):
        z = torch.cat([x[:, t], h], dim=-1)  # (B, d_in + d_h)
        h = torch.tanh(z @ W + b)
        states.append(z)
    return torch.stack(states, dim=1), h  # (B, T, d_in + d_h)


def sliced_steps_keep_a_time_axis(x, W_xh, W_hh, b, h0=None):
    h = _start(x, W_hh, h0)[:, None]  # (B, 1, d_h)
    states = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t : t + 1] @ W_xh + h @ W_hh + b)  # (B, 1, d_h)
        states.append(h)
    return torch.stack(states, dim=1), h  # (B, T, 1, d_h)


def squeezes_the_states(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs.squeeze(), h  # loses the time axis when T = 1 (and the batch when B = 1)


def returns_hs_twice(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, hs


def last_state_indexed_time_first(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, hs[-1, -1]  # (d_h,): the last step of the last sequence only


def returns_torch_h_n(x, W_xh, W_hh, b, h0=None):
    rnn = torch.nn.RNN(W_xh.shape[0], W_xh.shape[1], batch_first=True).to(x.dtype)
    weights = {
        "weight_ih_l0": W_xh.T,
        "weight_hh_l0": W_hh.T,
        "bias_ih_l0": b,
        "bias_hh_l0": torch.zeros_like(b),
    }
    start = None if h0 is None else h0.unsqueeze(0)
    return torch.func.functional_call(rnn, weights, (x, start))  # h_n is (1, B, d_h)


def last_state_one_step_early(x, W_xh, W_hh, b, h0=None):
    h, states = _start(x, W_hh, h0), []
    for t in range(x.shape[1]):
        before = h
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states, dim=1), before  # the state before the last step


def last_state_averaged_over_time(x, W_xh, W_hh, b, h0=None):
    hs, _ = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, hs.mean(dim=1)


def states_as_numpy(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs.detach().numpy(), h


def last_state_as_list(x, W_xh, W_hh, b, h0=None):
    hs, h = loop_and_stack(x, W_xh, W_hh, b, h0)
    return hs, h.tolist()


def weights_in_another_order(x, W_hh, W_xh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def time_first_by_reshape(x, W_xh, W_hh, b, h0=None):
    B, T, d_in = x.shape
    steps = x.reshape(T, B, d_in)  # not a transpose: the numbers land in the wrong places
    h, states = _start(x, W_hh, h0), []
    for x_t in steps:
        h = torch.tanh(x_t @ W_xh + h @ W_hh + b)
        states.append(h)
    return torch.stack(states, dim=1), h


def h0_indexed_as_torch_h_0(x, W_xh, W_hh, b, h0=None):
    if h0 is not None:
        h0 = h0[0]  # torch.nn.RNN's h_0 is (1, B, d_h); this one is (B, d_h): row 0 for all
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def x_through_numpy(x, W_xh, W_hh, b, h0=None):
    x = torch.from_numpy(x.numpy())  # fails once x requires grad
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def h0_through_numpy(x, W_xh, W_hh, b, h0=None):
    if h0 is not None:
        h0 = torch.from_numpy(h0.numpy())  # fails once h0 requires grad
    return loop_and_stack(x, W_xh, W_hh, b, h0)


def x_detached(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x.detach(), W_xh, W_hh, b, h0)


def w_hh_as_data(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh.data, b, h0)


def b_as_data(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b.data, h0)


def h0_detached(x, W_xh, W_hh, b, h0=None):
    """What truncated backprop does between batches, here inside one sequence's call."""
    return loop_and_stack(x, W_xh, W_hh, b, None if h0 is None else h0.detach())


def passes(x, W_xh, W_hh, b, h0=None):
    return loop_and_stack(x, W_xh, W_hh, b, h0)


VERDICTS = [
    (
        passes,
        "✅ rnn_forward: passed (6 cases, with and without h0, T = 1 to 6, a batch of one in "
        "float64; values equal to torch.nn.RNN given the same weights, gradients to the "
        "reference's).",
    ),
    (
        stub,
        "⏳ rnn_forward: not implemented yet. Replace `raise NotImplementedError` with your code, "
        "run that cell, then this one again.",
    ),
    (no_tanh, "❌ rnn_forward: tanh is missing: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)"),
    (
        relu,
        "❌ rnn_forward: you used ReLU; a vanilla RNN (and torch.nn.RNN's default) squashes with "
        "tanh: torch.tanh(...)",
    ),
    (
        sigmoid,
        "❌ rnn_forward: you used a sigmoid; a vanilla RNN (and torch.nn.RNN's default) squashes "
        "with tanh, whose values lie in (-1, 1): torch.tanh(...)",
    ),
    (
        h0_ignored,
        "❌ rnn_forward: h0 is ignored: when h0 is given, the first step must use it as h_{t-1} "
        "(start from zeros only when h0 is None)",
    ),
    (
        never_updated,
        "❌ rnn_forward: the hidden state is never carried over: every step uses h0 (or zeros) as "
        "h_{t-1}. Assign the new state, h = torch.tanh(...), and use it in the next step",
    ),
    (
        never_updated_and_returns_last_step,
        "❌ rnn_forward: the hidden state is never carried over: every step uses h0 (or zeros) as "
        "h_{t-1}. Assign the new state, h = torch.tanh(...), and use it in the next step",
    ),
    (
        w_hh_transposed,
        "❌ rnn_forward: W_hh is transposed: the recurrent term is h_{t-1} (B, d_h) @ W_hh, not h "
        "@ W_hh.T (or W_hh @ h)",
    ),
    (
        w_hh_on_the_left,
        "❌ rnn_forward: W_hh is transposed: the recurrent term is h_{t-1} (B, d_h) @ W_hh, not h "
        "@ W_hh.T (or W_hh @ h)",
    ),
    (
        w_xh_transposed,
        "❌ rnn_forward: W_xh is transposed: the input term is x_t (B, d_in) @ W_xh (d_in, d_h), "
        "as given",
    ),
    (
        f_linear_without_transposing,
        "❌ rnn_forward: W_xh and W_hh are both transposed: use x_t @ W_xh and h @ W_hh as given "
        "(F.linear(x, W) computes x @ W.T: pass it W_xh.T, or use @)",
    ),
    (no_bias, "❌ rnn_forward: the bias b is missing: h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)"),
    (
        bias_twice,
        "❌ rnn_forward: the bias is added twice: there is one b per step (torch.nn.RNN's two "
        "biases, bias_ih and bias_hh, add up to this one b)",
    ),
    (
        loops_over_batch,
        "❌ rnn_forward: you looped over the batch axis: x is batch first, (B, T, d_in), so step t "
        "reads x[:, t] and hs stacks the states on dim=1",
    ),
    (
        indexes_batch_as_time,
        "❌ rnn_forward: on inputs x (2, 5, 4), W_xh (4, 4), W_hh (4, 4), b (4,) your code raised "
        "RuntimeError: The size of tensor a (5) must match the size of tensor b (2) at "
        "non-singleton dimension 0. x is batch first, (B, T, d_in): the input at step t is x[:, "
        "t] (B, d_in), not x[t]",
    ),
    (
        time_first_output,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None has shape (5, 2, 4), expected (2, 5, "
        "4). The batch and time axes are swapped: keep batch first, torch.stack(states, dim=1) "
        "gives (B, T, d_h)",
    ),
    (
        off_by_one,
        "❌ rnn_forward: hs is off by one step: it holds h_0 .. h_{T-1}. Keep the state *after* "
        "each step, h_1 .. h_T (hs[:, -1] is h_T)",
    ),
    (
        includes_h0,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None has shape (2, 6, 4), expected (2, 5, "
        "4). That is T + 1 states: hs holds h_1 .. h_T, not h_0",
    ),
    (
        reversed_order,
        "❌ rnn_forward: hs is in reversed time order: hs[:, t] must be the state after step t, in "
        "reading order (torch.stack(states, dim=1), no flip)",
    ),
    (
        reads_backwards,
        "❌ rnn_forward: the sequence is read backwards: step t must read x[:, t], from t = 0 up "
        "to T - 1",
    ),
    (
        wrong_return_order,
        "❌ rnn_forward: the results come back in the wrong order: return (hs, h_T)",
    ),
    (
        only_hs,
        "❌ rnn_forward: you returned only hs: return the pair (hs, h_T), with h_T = the last "
        "state (B, d_h)",
    ),
    (only_h_T, "❌ rnn_forward: should return the tuple (hs, h_T), got a tensor of shape (2, 4)"),
    (
        list_not_stacked,
        "❌ rnn_forward: hs is a Python list of states: turn it into one tensor (B, T, d_h) with "
        "torch.stack(states, dim=1)",
    ),
    (
        first_state_as_last,
        "❌ rnn_forward: h_T is h_1, the first state: return the last one, hs[:, -1]",
    ),
    (h0_as_last, "❌ rnn_forward: h_T is h0 (or zeros): return the state after the last step"),
    (
        last_state_keeps_time_axis,
        "❌ rnn_forward: h_T has shape (2, 1, 4), expected (2, 4). h_T is (B, d_h): hs[:, -1], not "
        "hs[:, -1:]",
    ),
    (
        changes_h0_in_place,
        "❌ rnn_forward: your code changed one of its input tensors in place; compute new tensors "
        "instead (e.g. x = x * 2, not x *= 2)",
    ),
    (
        state_detached_each_step,
        "❌ rnn_forward: backward through hs on x (2, 5, 4), d_h=4, h0=None: the values are right, "
        "but the state is detached from the graph at each step (h.detach() or h.data), so the "
        "gradient stops after one step: backpropagation through time needs h_{t-1} kept in the "
        "graph. Use h as it is",
    ),
    (
        tanh_on_input_only,
        "❌ rnn_forward: tanh wraps only the input term: the new state is tanh of the whole sum, "
        "h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)",
    ),
    (
        tanh_on_input_and_bias,
        "❌ rnn_forward: tanh wraps only x_t W_xh + b: the recurrent term belongs inside too, h_t "
        "= tanh(x_t W_xh + h_{t-1} W_hh + b)",
    ),
    (
        tanh_on_recurrence_only,
        "❌ rnn_forward: tanh wraps only the recurrent term: the new state is tanh of the whole "
        "sum, h_t = tanh(x_t W_xh + h_{t-1} W_hh + b)",
    ),
    (
        one_aliased_buffer,
        "❌ rnn_forward: every entry of hs is the last state h_T: the states share one buffer that "
        "each step overwrites in place (h[:] = ..., h.copy_(...)). Make a new tensor at every "
        "step, h = torch.tanh(...), and keep each one",
    ),
    (
        h0_or_zeros,
        "❌ rnn_forward: on inputs x (3, 4, 5), W_xh (5, 2), W_hh (2, 2), b (2,), h0 (3, 2) your "
        "code raised RuntimeError: Boolean value of Tensor with more than one value is ambiguous. "
        "`h0 or ...` (or `if h0:`) asks whether a whole tensor is true: write `h0 if h0 is not "
        "None else x.new_zeros(B, d_h)`",
    ),
    (
        state_forced_to_float32,
        "❌ rnn_forward: on inputs x (1, 4, 3), W_xh (3, 2), W_hh (2, 2), b (2,) your code raised "
        "RuntimeError: expected m1 and m2 to have the same dtype, but got: float != double. Your "
        "code mixes float32 and float64: create new tensors in the inputs' dtype "
        "(x.new_zeros(...), torch.zeros(..., dtype=x.dtype)) and don't call .float() or .double()",
    ),
    (
        preallocated_in_float32,
        "❌ rnn_forward: hs on x (1, 4, 3), d_h=2, h0=None, float64 is float32, but the inputs "
        "were float64: keep the inputs' dtype (make new tensors with x.new_zeros(...) or "
        "dtype=x.dtype; no .float() or .double())",
    ),
    (
        returns_float32,
        "❌ rnn_forward: hs on x (1, 4, 3), d_h=2, h0=None, float64 is float32, but the inputs "
        "were float64: keep the inputs' dtype (make new tensors with x.new_zeros(...) or "
        "dtype=x.dtype; no .float() or .double())",
    ),
    (
        torch_rnn_squeezed,
        "❌ rnn_forward: h_T has shape (2,), expected (1, 2). With a batch of one, h_T must still "
        "be (1, d_h): don't .squeeze() it; from torch.nn.RNN's h_n (1, B, d_h) take h_n[0]",
    ),
    (
        torch_rnn_with_copied_weights,
        "❌ rnn_forward: backward through hs on x (2, 5, 4), d_h=4, h0=None: no gradient reaches "
        "W_xh, so it could not learn: something between W_xh and the result is cut from the graph "
        "(.detach(), torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        view_of_noncontiguous_input,
        "❌ rnn_forward: on inputs x (3, 6, 2), W_xh (2, 5), W_hh (5, 5), b (5,) your code raised "
        "RuntimeError: view size is not compatible with input tensor's size and stride (at least "
        "one dimension spans across two contiguous subspaces). Use .reshape(...) instead. The "
        "tensor is not contiguous in memory (a transpose or a slice made it so): use "
        ".reshape(...) instead of .view(...), or .contiguous().view(...)",
    ),
    (
        hidden_size_from_input,
        "❌ rnn_forward: on inputs x (3, 6, 2), W_xh (2, 5), W_hh (5, 5), b (5,) your code raised "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x2 and 5x5). Check each step's "
        "shapes: x_t = x[:, t] (B, d_in) @ W_xh (d_in, d_h), h (B, d_h) @ W_hh (d_h, d_h), with h "
        "starting as h0 or zeros (B, d_h), d_h = W_hh.shape[0]; use the matrices as given, not "
        "transposed",
    ),
    (returns_none, "❌ rnn_forward: should return the tuple (hs, h_T), got a NoneType"),
    (returns_a_string, "❌ rnn_forward: should return the tuple (hs, h_T), got a str"),
    (
        raises_type_error,
        "❌ rnn_forward: on inputs x (2, 5, 4), W_xh (4, 4), W_hh (4, 4), b (4,) your code raised "
        "TypeError: unsupported operand",
    ),
    (returns_three_things, "❌ rnn_forward: should return 2 things (hs, h_T), got 3"),
    (returns_nan, "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None contains 40 NaN/inf value(s)"),
    (
        takes_no_h0,
        "❌ rnn_forward: on inputs x (3, 4, 5), W_xh (5, 2), W_hh (2, 2), b (2,), h0 (3, 2) your "
        "code raised TypeError: takes_no_h0() takes 4 positional arguments but 5 were given. The "
        "signature is rnn_forward(x, W_xh, W_hh, b, h0=None)",
    ),
    (
        one_based_loop,
        "❌ rnn_forward: on inputs x (2, 5, 4), W_xh (4, 4), W_hh (4, 4), b (4,) your code raised "
        "IndexError: index 5 is out of bounds for dimension 1 with size 5. x is batch first, (B, "
        "T, d_in): loop over t in range(T) with T = x.shape[1], and read x[:, t]",
    ),
    (
        concatenated_not_stacked,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None has shape (2, 20), expected (2, 5, 4). "
        "hs is (B, T, d_h): the state after every step, stacked with torch.stack(states, dim=1)",
    ),
    (
        keeps_the_concatenated_input,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None has shape (2, 5, 8), expected (2, 5, "
        "4). Each state is d_h wide: h (B, d_h) @ W_hh (d_h, d_h)",
    ),
    (
        sliced_steps_keep_a_time_axis,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None has shape (2, 5, 1, 4), expected (2, 5, "
        "4). hs is (B, T, d_h): the state after every step, stacked with torch.stack(states, "
        "dim=1)",
    ),
    (
        squeezes_the_states,
        "❌ rnn_forward: hs on x (4, 1, 2), d_h=3, with h0 has shape (4, 3), expected (4, 1, 3). "
        "hs is (B, T, d_h): the state after every step, stacked with torch.stack(states, dim=1)",
    ),
    (
        returns_hs_twice,
        "❌ rnn_forward: h_T has shape (2, 5, 4), expected (2, 4). h_T is the last state, hs[:, "
        "-1]",
    ),
    (
        last_state_indexed_time_first,
        "❌ rnn_forward: h_T has shape (4,), expected (2, 4). h_T is the last state, hs[:, -1]",
    ),
    (
        returns_torch_h_n,
        "❌ rnn_forward: h_T has shape (1, 2, 4), expected (2, 4). That is torch.nn.RNN's h_n "
        "(num_layers, B, d_h): return h_n[0], (B, d_h)",
    ),
    (
        last_state_one_step_early,
        "❌ rnn_forward: h_T is h_{T-1}, one step early: return the state after the last step",
    ),
    (
        last_state_averaged_over_time,
        "❌ rnn_forward: h_T is not right: at index (1, 2) you have -0.1696, expected 0.9921 "
        "(largest difference 1.16)",
    ),
    (states_as_numpy, "❌ rnn_forward: hs should be a torch.Tensor, got a ndarray"),
    (last_state_as_list, "❌ rnn_forward: h_T should be a torch.Tensor, got a list"),
    (
        weights_in_another_order,
        "❌ rnn_forward: your parameters come in the order (x, W_hh, W_xh, b, h0); the lesson's "
        "signature is rnn_forward(x, W_xh, W_hh, b, h0=None), and the notebooks pass the "
        "arguments in that order",
    ),
    (
        time_first_by_reshape,
        "❌ rnn_forward: hs on x (2, 5, 4), d_h=4, h0=None is not right: at index (1, 0, 2) you "
        "have 0.9492, expected -0.9307 (largest difference 1.88)",
    ),
    (
        h0_indexed_as_torch_h_0,
        "❌ rnn_forward: hs on x (3, 4, 5), d_h=2, with h0 is not right: at index (1, 1, 1) you "
        "have 0.4769, expected 0.3562 (largest difference 0.121)",
    ),
    (
        x_through_numpy,
        "❌ rnn_forward: on inputs x (2, 5, 4), W_xh (4, 4), W_hh (4, 4), b (4,) your code raised "
        "RuntimeError: Can't call numpy() on Tensor that requires grad. Use "
        "tensor.detach().numpy() instead.",
    ),
    (
        h0_through_numpy,
        "❌ rnn_forward: on inputs x (3, 4, 5), W_xh (5, 2), W_hh (2, 2), b (2,), h0 (3, 2) your "
        "code raised RuntimeError: Can't call numpy() on Tensor that requires grad. Use "
        "tensor.detach().numpy() instead.",
    ),
    (
        x_detached,
        "❌ rnn_forward: backward through hs on x (2, 5, 4), d_h=4, h0=None: no gradient reaches "
        "x, so it could not learn: something between x and the result is cut from the graph "
        "(.detach(), torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        w_hh_as_data,
        "❌ rnn_forward: backward through hs on x (2, 5, 4), d_h=4, h0=None: no gradient reaches "
        "W_hh, so it could not learn: something between W_hh and the result is cut from the graph "
        "(.detach(), torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        b_as_data,
        "❌ rnn_forward: backward through hs on x (2, 5, 4), d_h=4, h0=None: no gradient reaches "
        "b, so it could not learn: something between b and the result is cut from the graph "
        "(.detach(), torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
    (
        h0_detached,
        "❌ rnn_forward: backward through hs on x (3, 4, 5), d_h=2, with h0: no gradient reaches "
        "h0, so it could not learn: something between h0 and the result is cut from the graph "
        "(.detach(), torch.no_grad(), values copied with torch.tensor(...) or .item())",
    ),
]


@pytest.mark.parametrize("answer, line", VERDICTS, ids=[v[0].__name__ for v in VERDICTS])
def test_the_whole_verdict_line(answer, line, verdict):
    passed, printed = verdict(check.rnn_forward, answer)
    assert printed == line + "\n"
    assert passed is (answer is passes)
