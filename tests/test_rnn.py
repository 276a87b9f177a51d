"""course.rnn: the vanilla RNN equals torch.nn.RNN, the lesson's helpers, the seq2seq baseline."""

import pytest
import torch
from torch import nn

from course.rnn import (
    BOS,
    DIGIT_VOCAB,
    EOS,
    FIRST_DIGIT,
    PAD,
    Seq2SeqRNN,
    digit_task,
    from_torch_rnn,
    gradient_by_distance,
    rnn_forward,
    to_torch_rnn,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _weights(d_in, d_h, seed=0, scale=0.5):
    gen = _gen(seed)
    W_xh = torch.randn(d_in, d_h, generator=gen) * scale  # (d_in, d_h)
    W_hh = torch.randn(d_h, d_h, generator=gen) * scale  # (d_h, d_h)
    b = torch.randn(d_h, generator=gen) * scale  # (d_h,)
    return W_xh, W_hh, b


# ------------------------------------------------- rnn_forward vs torch.nn.RNN ----------

SHAPES = [(2, 5, 3, 4), (3, 1, 4, 2), (1, 7, 6, 6), (4, 3, 2, 5)]  # (B, T, d_in, d_h)


@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_rnn_forward_equals_torch_rnn(shape, with_h0):
    B, T, d_in, d_h = shape
    W_xh, W_hh, b = _weights(d_in, d_h)
    x = torch.randn(B, T, d_in, generator=_gen(1))
    h0 = torch.randn(B, d_h, generator=_gen(2)) if with_h0 else None
    hs, h_T = rnn_forward(x, W_xh, W_hh, b, h0)
    want_hs, want_h_n = to_torch_rnn(W_xh, W_hh, b)(x, None if h0 is None else h0[None])
    assert hs.shape == (B, T, d_h) and h_T.shape == (B, d_h)
    torch.testing.assert_close(hs, want_hs, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(h_T, want_h_n[0], atol=1e-6, rtol=1e-5)
    assert torch.equal(h_T, hs[:, -1])


def test_rnn_forward_follows_the_formula_step_by_step():
    W_xh, W_hh, b = _weights(3, 4)
    x = torch.randn(2, 3, 3, generator=_gen(1))
    hs, _ = rnn_forward(x, W_xh, W_hh, b)
    h = torch.zeros(2, 4)
    for t in range(3):
        h = torch.tanh(x[:, t] @ W_xh + h @ W_hh + b)
        torch.testing.assert_close(hs[:, t], h)


def test_h0_matters_and_inputs_are_left_alone():
    W_xh, W_hh, b = _weights(3, 4)
    x = torch.randn(2, 5, 3, generator=_gen(1))
    h0 = torch.ones(2, 4)
    copies = [t.clone() for t in (x, W_xh, W_hh, b, h0)]
    with_h0, _ = rnn_forward(x, W_xh, W_hh, b, h0)
    without, _ = rnn_forward(x, W_xh, W_hh, b)
    assert not torch.allclose(with_h0[:, 0], without[:, 0])
    for original, copy in zip((x, W_xh, W_hh, b, h0), copies, strict=True):
        assert torch.equal(original, copy)


def test_gradients_match_torchs():
    B, T, d_in, d_h = 2, 6, 3, 4
    W_xh, W_hh, b = (t.requires_grad_() for t in _weights(d_in, d_h))
    x = torch.randn(B, T, d_in, generator=_gen(1), requires_grad=True)
    h0 = torch.randn(B, d_h, generator=_gen(2), requires_grad=True)
    hs, h_T = rnn_forward(x, W_xh, W_hh, b, h0)
    (hs.pow(2).sum() + h_T.sum()).backward()

    theirs = to_torch_rnn(W_xh.detach(), W_hh.detach(), b.detach())
    x2, h02 = x.detach().clone().requires_grad_(), h0.detach().clone().requires_grad_()
    want_hs, want_h_n = theirs(x2, h02[None])
    (want_hs.pow(2).sum() + want_h_n.sum()).backward()

    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(h0.grad, h02.grad)
    torch.testing.assert_close(W_xh.grad, theirs.weight_ih_l0.grad.T)
    torch.testing.assert_close(W_hh.grad, theirs.weight_hh_l0.grad.T)
    torch.testing.assert_close(b.grad, theirs.bias_ih_l0.grad)


def test_from_torch_rnn_adds_torchs_two_biases():
    torch.manual_seed(0)
    theirs = nn.RNN(3, 5, batch_first=True)  # both biases non-zero by default
    assert not torch.allclose(theirs.bias_hh_l0, torch.zeros(5))
    x = torch.randn(2, 4, 3, generator=_gen(1))
    hs, h_T = rnn_forward(x, *from_torch_rnn(theirs))
    want_hs, want_h_n = theirs(x)
    torch.testing.assert_close(hs, want_hs)
    torch.testing.assert_close(h_T, want_h_n[0])


def test_from_torch_rnn_without_bias_and_round_trip():
    theirs = nn.RNN(3, 5, bias=False, batch_first=True)
    W_xh, W_hh, b = from_torch_rnn(theirs)
    assert torch.equal(b, torch.zeros(5))
    back = from_torch_rnn(to_torch_rnn(W_xh, W_hh, b))
    for got, want in zip(back, (W_xh, W_hh, b), strict=True):
        assert torch.equal(got, want)


def test_from_torch_rnn_refuses_what_rnn_forward_cannot_compute():
    with pytest.raises(ValueError, match="tanh"):
        from_torch_rnn(nn.RNN(3, 5, nonlinearity="relu"))
    with pytest.raises(ValueError, match="one-layer"):
        from_torch_rnn(nn.RNN(3, 5, num_layers=2))
    with pytest.raises(ValueError, match="one-layer"):
        from_torch_rnn(nn.LSTM(3, 5))


def test_to_torch_rnn_refuses_mismatched_weights():
    W_xh, W_hh, b = _weights(3, 4)
    with pytest.raises(ValueError, match=r"W_hh \(3, 3\)"):
        to_torch_rnn(W_xh, torch.zeros(3, 3), b)


BAD_INPUTS = [
    ({"x": torch.zeros(5, 3)}, r"x must have shape \(B, T, d_in\), got \(5, 3\)"),
    ({"x": torch.zeros(2, 0, 3)}, r"at least one time step, got shape \(2, 0, 3\)"),
    ({"x": [[1.0]]}, "x must be a torch.Tensor, got list"),
    ({"W_xh": torch.zeros(4, 4)}, r"W_xh must have shape \(d_in=3, d_h\).*got \(4, 4\)"),
    ({"W_hh": torch.zeros(4, 3)}, r"W_hh must have shape \(d_h, d_h\) = \(4, 4\).*got \(4, 3\)"),
    ({"b": torch.zeros(3)}, r"b must have shape \(d_h,\) = \(4,\), got \(3,\)"),
    ({"b": torch.zeros(1, 4)}, r"b must have shape \(d_h,\) = \(4,\), got \(1, 4\)"),
    ({"h0": torch.zeros(4)}, r"h0 must have shape \(B, d_h\) = \(2, 4\) or be None, got \(4,\)"),
    ({"h0": torch.zeros(1, 2, 4)}, r"h0 must have shape \(B, d_h\) = \(2, 4\).*got \(1, 2, 4\)"),
]


@pytest.mark.parametrize("change, message", BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_inputs_name_expected_and_actual(change, message):
    W_xh, W_hh, b = _weights(3, 4)
    inputs = {"x": torch.zeros(2, 5, 3), "W_xh": W_xh, "W_hh": W_hh, "b": b, "h0": None}
    with pytest.raises(ValueError, match=message):
        rnn_forward(**(inputs | change))


# ------------------------------------------------------- gradient by distance ----------


def test_gradient_by_distance_is_the_jacobian_norm_of_each_input():
    torch.manual_seed(0)
    rnn = nn.RNN(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3, generator=_gen(1))
    norms = gradient_by_distance(rnn, x)
    assert norms.shape == (5,)
    for b in range(2):  # one sequence alone, the Jacobian written out with autograd
        jac = torch.autograd.functional.jacobian(lambda s: rnn(s)[0][0, -1], x[b : b + 1])
        per_position = jac.pow(2).sum(dim=(0, 1, 3)).sqrt()  # (T,): by position t
        if b == 0:
            expected = per_position / 2
        else:
            expected = expected + per_position / 2
    torch.testing.assert_close(norms, expected.flip(0))  # entry k is distance k from the end


def test_gradient_shrinks_with_distance_for_a_vanilla_rnn_with_small_weights():
    torch.manual_seed(0)
    rnn = nn.RNN(4, 8, batch_first=True)
    with torch.no_grad():
        rnn.weight_hh_l0.mul_(0.5)  # spectral radius well below 1
    norms = gradient_by_distance(rnn, torch.randn(3, 30, 4, generator=_gen(1)))
    assert (norms[1:] < norms[:-1]).all()  # strictly decreasing with distance
    assert norms[-1] < 1e-6 * norms[0]


def test_gradient_by_distance_takes_an_lstm_and_checks_its_input():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8, batch_first=True)
    norms = gradient_by_distance(lstm, torch.randn(2, 10, 4, generator=_gen(1)))
    assert norms.shape == (10,) and (norms > 0).all() and norms[-1] < norms[0]
    with pytest.raises(ValueError, match="batch_first"):
        gradient_by_distance(nn.LSTM(4, 8), torch.randn(2, 10, 4))
    with pytest.raises(ValueError, match=r"\(B, T, d_in=4\), got \(2, 10, 3\)"):
        gradient_by_distance(lstm, torch.randn(2, 10, 3))


# ---------------------------------------------------------------- digit task ----------


@pytest.mark.parametrize("reverse", [False, True], ids=["copy", "reverse"])
def test_digit_task_layout(reverse):
    src, tgt_in, tgt_out = digit_task(200, range(2, 7), _gen(), reverse=reverse)
    assert src.shape == (200, 6) and tgt_in.shape == tgt_out.shape == (200, 7)
    lengths = (src != PAD).sum(dim=1)
    assert set(lengths.tolist()) == {2, 3, 4, 5, 6}
    for row in range(200):
        n = int(lengths[row])
        digits = src[row, :n]
        assert (digits >= FIRST_DIGIT).all() and (digits < DIGIT_VOCAB).all()
        assert (src[row, n:] == PAD).all()  # padding only at the end
        answer = digits.flip(0) if reverse else digits
        assert tgt_in[row, 0] == BOS and torch.equal(tgt_in[row, 1 : n + 1], answer)
        assert torch.equal(tgt_out[row, :n], answer) and tgt_out[row, n] == EOS
        assert (tgt_in[row, n + 1 :] == PAD).all() and (tgt_out[row, n + 1 :] == PAD).all()


def test_digit_task_is_reproducible():
    first = digit_task(10, range(1, 5), _gen(3))
    second = digit_task(10, range(1, 5), _gen(3))
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- Seq2SeqRNN ----------

VARIANTS = [("gru", False), ("gru", True), ("lstm", False), ("lstm", True)]
IDS = [f"{cell}{'+attention' if attention else ''}" for cell, attention in VARIANTS]


def _model(cell, attention, seed=0):
    torch.manual_seed(seed)
    return Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10, cell=cell, attention=attention).eval()


def _src():
    """Two sequences of lengths 4 and 2, padded to 5; token ids 3..10."""
    return torch.tensor([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0]])


@pytest.mark.parametrize("cell, attention", VARIANTS, ids=IDS)
def test_forward_shapes(cell, attention):
    model = _model(cell, attention)
    tgt_in = torch.tensor([[1, 2, 3], [1, 4, 0]])  # (B, T_tgt)
    logits = model(_src(), tgt_in)
    assert logits.shape == (2, 3, 9)
    encoded = model.encode(_src())
    assert encoded.memory.shape == (2, 5, 10) and encoded.src_mask.shape == (2, 5)
    h = encoded.state[0] if cell == "lstm" else encoded.state
    assert h.shape == (1, 2, 10)  # the context vector: d_hidden numbers per sequence
    if attention:
        assert model.attn.shape == (2, 3, 5)
        torch.testing.assert_close(model.attn.sum(-1), torch.ones(2, 3))
        assert (model.attn[1, :, 2:] == 0).all()  # padding gets no weight
    else:
        assert model.attn is None


@pytest.mark.parametrize("cell, attention", VARIANTS, ids=IDS)
def test_trailing_padding_changes_nothing(cell, attention):
    model = _model(cell, attention)
    tgt_in = torch.tensor([[1, 5, 6, 7]])
    short = torch.tensor([[3, 4, 5]])  # (1, 3)
    padded = torch.tensor([[3, 4, 5, 0, 0, 0, 0]])  # the same sequence, padded to 7
    with torch.no_grad():
        torch.testing.assert_close(model(padded, tgt_in), model(short, tgt_in))
        # ... also inside a batch, next to a longer sequence
        batch = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]])
        torch.testing.assert_close(
            model(batch, tgt_in.expand(2, -1))[0], model(short, tgt_in)[0], atol=1e-6, rtol=1e-5
        )
        # and the encoder's last state is the one after the last real token
        torch.testing.assert_close(model.encode(padded).state, model.encode(short).state)


@pytest.mark.parametrize("cell, attention", VARIANTS, ids=IDS)
def test_the_source_matters(cell, attention):
    model = _model(cell, attention)
    tgt_in = torch.tensor([[1, 5, 6]])
    with torch.no_grad():
        a = model(torch.tensor([[3, 4, 5]]), tgt_in)
        b = model(torch.tensor([[3, 4, 6]]), tgt_in)
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("cell, attention", VARIANTS, ids=IDS)
def test_decoding_one_token_at_a_time_equals_the_whole_target(cell, attention):
    model = _model(cell, attention)
    src, tgt_in = _src(), torch.tensor([[1, 2, 3, 4], [1, 4, 5, 6]])
    with torch.no_grad():
        whole = model(src, tgt_in)
        encoded, state, steps = model.encode(src), None, []
        for t in range(tgt_in.shape[1]):
            logits, state = model.decode(tgt_in[:, t : t + 1], encoded, state)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cell, attention", VARIANTS, ids=IDS)
def test_generate_is_greedy_and_pads_after_end(cell, attention):
    model = _model(cell, attention)
    src = _src()
    out = model.generate(src, bos_id=1, eos_id=2, max_len=6)
    assert out.shape == (2, 6) and out.dtype == torch.long
    with torch.no_grad():  # feeding its own answers back gives back the same argmaxes
        fed = torch.cat([torch.ones(2, 1, dtype=torch.long), out[:, :-1]], dim=1)
        greedy = model(src, fed).argmax(-1)  # (2, 6)
    for row in range(2):
        ended = (out[row] == 2).nonzero()
        n = int(ended[0]) + 1 if len(ended) else 6  # tokens up to and including EOS
        assert torch.equal(out[row, :n], greedy[row, :n])
        assert (out[row, n:] == 0).all()
    if attention:
        assert model.attn.shape[0] == 2 and model.attn.shape[2] == 5


def test_generate_stops_at_end_of_sequence():
    model = _model("gru", False)
    with torch.no_grad():  # a model that always says EOS (token 2)
        model.out.weight.zero_()
        model.out.bias.copy_(torch.arange(9) == 2)
    out = model.generate(_src(), bos_id=1, eos_id=2, max_len=4)
    assert torch.equal(out, torch.tensor([[2, 0, 0, 0], [2, 0, 0, 0]]))


class Scripted(Seq2SeqRNN):
    """Says, step by step, the tokens in SCRIPT (one row per sequence), whatever it reads."""

    SCRIPT = torch.tensor([[5, 2, 7, 7, 7], [5, 6, 6, 2, 7]])  # row 0 ends at step 2, row 1 at 4

    def decode(self, tgt_in, encoded, state=None):
        step = 0 if state is None else state + 1
        logits = nn.functional.one_hot(self.SCRIPT[:, step], 9).float()[:, None]  # (B, 1, 9)
        return logits, step


def test_generate_pads_each_row_after_its_own_end():
    model = Scripted(11, 9, d_embed=6, d_hidden=10)
    out = model.generate(_src(), bos_id=1, eos_id=2, max_len=6)
    assert torch.equal(out, torch.tensor([[5, 2, 0, 0, 0, 0], [5, 6, 6, 2, 0, 0]]))


def test_encode_refuses_bad_sources():
    model = _model("gru", False)
    with pytest.raises(ValueError, match="at the end"):
        model.encode(torch.tensor([[3, 0, 4]]))
    with pytest.raises(ValueError, match="at least one token"):
        model.encode(torch.tensor([[3, 4], [0, 0]]))
    with pytest.raises(ValueError, match=r"\(B, T_src\), got \(3,\)"):
        model.encode(torch.tensor([3, 4, 5]))
    with pytest.raises(ValueError, match="cell must be one of"):
        Seq2SeqRNN(5, 5, cell="transformer")


def test_parameters_learn_through_both_halves():
    model = _model("gru", True)
    logits = model(_src(), torch.tensor([[1, 2, 3], [1, 4, 0]]))
    logits.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
