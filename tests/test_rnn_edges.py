"""course.rnn at its edges: the digit task's vocabulary and defaults, every error message,
the seq2seq baseline's defaults and its greedy decoding's stopping rule.

Written against the mutants that tools/mutation.py found alive: each test pins one
behaviour that no other test did. Error messages are compared whole: they name what was
expected and what came.
"""

import pytest
import torch
from torch import nn

from course.rnn import (
    BOS,
    DIGIT_VOCAB,
    EOS,
    FIRST_DIGIT,
    PAD,
    AdditiveAttention,
    Seq2SeqRNN,
    digit_task,
    from_torch_rnn,
    gradient_by_distance,
    rnn_forward,
    to_torch_rnn,
)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


# ------------------------------------------------------------ the digit task ----------


def test_the_digit_vocabulary_is_pad_begin_end_then_the_ten_digits():
    assert (PAD, BOS, EOS, FIRST_DIGIT, DIGIT_VOCAB) == (0, 1, 2, 3, 13)
    assert Seq2SeqRNN(DIGIT_VOCAB, DIGIT_VOCAB).pad_id == PAD  # the model's default padding


def test_digit_task_copies_by_default_and_keeps_special_tokens_apart_from_digits():
    src, tgt_in, tgt_out = digit_task(50, [1, 4], _gen(5))
    copied = digit_task(50, [1, 4], _gen(5), reverse=False)
    assert all(torch.equal(a, b) for a, b in zip((src, tgt_in, tgt_out), copied, strict=True))
    assert set(src.unique().tolist()) <= {PAD, *range(FIRST_DIGIT, FIRST_DIGIT + 10)}
    assert (tgt_in[:, 0] == BOS).all() and BOS not in src and BOS not in tgt_out
    assert (tgt_out == EOS).sum(dim=1).tolist() == [1] * 50  # one end per sequence
    lengths = (src != PAD).sum(dim=1)
    assert set(lengths.tolist()) == {1, 4}
    for row in range(50):  # copying: the answer is the source itself, then EOS
        n = int(lengths[row])
        assert torch.equal(tgt_out[row, :n], src[row, :n]) and tgt_out[row, n] == EOS


def test_digit_task_reverses_one_sequence_by_hand():
    torch.manual_seed(0)  # the generator alone decides: the global seed does not matter
    src, tgt_in, tgt_out = digit_task(1, [3], _gen(1), reverse=True)
    torch.manual_seed(1)
    again = digit_task(1, [3], _gen(1), reverse=True)
    assert all(torch.equal(a, b) for a, b in zip((src, tgt_in, tgt_out), again, strict=True))
    d1, d2, d3 = src[0].tolist()
    assert tgt_in[0].tolist() == [BOS, d3, d2, d1]
    assert tgt_out[0].tolist() == [d3, d2, d1, EOS]


def test_every_digit_appears():
    src, _, _ = digit_task(100, [6], _gen(2))
    assert sorted(src.unique().tolist()) == list(range(FIRST_DIGIT, DIGIT_VOCAB))


# -------------------------------------------------------- vanilla RNN errors ----------


def _inputs(**change):
    gen = _gen(0)
    inputs = {
        "x": torch.randn(2, 5, 3, generator=gen),  # (B, T, d_in)
        "W_xh": torch.randn(3, 4, generator=gen),  # (d_in, d_h)
        "W_hh": torch.randn(4, 4, generator=gen),  # (d_h, d_h)
        "b": torch.randn(4, generator=gen),  # (d_h,)
        "h0": None,
    }
    return inputs | change


RNN_ERRORS = {
    "x list": ({"x": [[1.0]]}, "x must be a torch.Tensor, got list"),
    "W_xh array": ({"W_xh": 3.0}, "W_xh must be a torch.Tensor, got float"),
    "W_hh list": ({"W_hh": [[0.0]]}, "W_hh must be a torch.Tensor, got list"),
    "b None": ({"b": None}, "b must be a torch.Tensor, got NoneType"),
    "x 4-d": ({"x": torch.zeros(1, 2, 5, 3)}, "x must have shape (B, T, d_in), got (1, 2, 5, 3)"),
    "x empty": (
        {"x": torch.zeros(2, 0, 3)},
        "x must have at least one time step, got shape (2, 0, 3)",
    ),
    "W_xh rows": (
        {"W_xh": torch.zeros(4, 4)},
        "W_xh must have shape (d_in=3, d_h) to match x (2, 5, 3), got (4, 4)",
    ),
    "W_xh 1-d": (
        {"W_xh": torch.zeros(3)},
        "W_xh must have shape (d_in=3, d_h) to match x (2, 5, 3), got (3,)",
    ),
    "W_hh": (
        {"W_hh": torch.zeros(4, 3)},
        "W_hh must have shape (d_h, d_h) = (4, 4) (d_h from W_xh (3, 4)), got (4, 3)",
    ),
    "b": ({"b": torch.zeros(5)}, "b must have shape (d_h,) = (4,), got (5,)"),
    "h0 shape": (
        {"h0": torch.zeros(3, 4)},
        "h0 must have shape (B, d_h) = (2, 4) or be None, got (3, 4)",
    ),
    "h0 list": ({"h0": [0.0] * 4}, "h0 must have shape (B, d_h) = (2, 4) or be None, got list"),
}


@pytest.mark.parametrize("case", RNN_ERRORS)
def test_rnn_forward_names_each_bad_input(case):
    change, message = RNN_ERRORS[case]
    assert _message(lambda: rnn_forward(**_inputs(**change))) == message


def test_rnn_forward_takes_a_single_step_and_a_given_h0():
    inputs = _inputs(x=torch.ones(1, 1, 3), h0=torch.full((1, 4), 0.5))
    hs, h_T = rnn_forward(**inputs)
    want = torch.tanh(torch.ones(1, 3) @ inputs["W_xh"] + 0.5 * inputs["W_hh"].sum(0) + inputs["b"])
    torch.testing.assert_close(hs, want[:, None])
    torch.testing.assert_close(h_T, want)


def test_to_torch_rnn_names_mismatched_weights():
    W_xh, W_hh, b = _inputs()["W_xh"], _inputs()["W_hh"], _inputs()["b"]
    expected = "expected W_xh (d_in, d_h), W_hh (d_h, d_h), b (d_h,); got W_xh {}, W_hh {}, b {}"
    assert _message(lambda: to_torch_rnn(W_xh, W_hh, torch.zeros(3))) == expected.format(
        "(3, 4)", "(4, 4)", "(3,)"
    )
    assert _message(lambda: to_torch_rnn(W_xh[0], W_hh, b)) == expected.format(
        "(4,)", "(4, 4)", "(4,)"
    )
    assert _message(lambda: to_torch_rnn(W_xh, W_hh[:3], b)) == expected.format(
        "(3, 4)", "(3, 4)", "(4,)"
    )
    # plain lists (a learner's nested-list weights) are named, not an AttributeError
    assert _message(lambda: to_torch_rnn(W_xh.tolist(), W_hh, b)) == expected.format(
        "list", "(4, 4)", "(4,)"
    )
    assert _message(lambda: to_torch_rnn(W_xh, W_hh, b.tolist())) == expected.format(
        "(3, 4)", "(4, 4)", "list"
    )


def test_to_torch_rnn_keeps_the_weights_dtype():
    W_xh, W_hh, b = (t.double() for t in (_inputs()[k] for k in ("W_xh", "W_hh", "b")))
    theirs = to_torch_rnn(W_xh, W_hh, b)
    assert theirs.weight_ih_l0.dtype == torch.float64 and theirs.batch_first
    assert theirs.nonlinearity == "tanh" and torch.equal(theirs.bias_hh_l0, torch.zeros(4).double())


@pytest.mark.parametrize(
    "module, message",
    [
        (
            nn.RNN(3, 5, bidirectional=True),
            "expected a one-layer, one-direction torch.nn.RNN, got RNN(3, 5, bidirectional=True)",
        ),
        (nn.GRU(3, 5), "expected a one-layer, one-direction torch.nn.RNN, got GRU(3, 5)"),
        (nn.RNN(3, 5, nonlinearity="relu"), "expected nonlinearity='tanh', got 'relu'"),
    ],
    ids=["bidirectional", "gru", "relu"],
)
def test_from_torch_rnn_names_what_it_cannot_compute(module, message):
    assert _message(lambda: from_torch_rnn(module)) == message


# ------------------------------------------------------- gradient by distance ----------


def test_gradient_by_distance_names_a_wrong_layer_or_input():
    lstm = nn.LSTM(4, 8, batch_first=True)
    assert _message(lambda: gradient_by_distance(nn.Linear(4, 8), torch.zeros(1, 2, 4))) == (
        "gradient_by_distance expects a batch_first=True recurrent layer"
    )
    assert _message(lambda: gradient_by_distance(lstm, torch.zeros(2, 4))) == (
        "x must have shape (B, T, d_in=4), got (2, 4)"
    )
    assert _message(lambda: gradient_by_distance(lstm, [[[0.0] * 4]])) == (
        "x must have shape (B, T, d_in=4), got list"
    )


def test_gradient_by_distance_by_hand_for_a_linear_recurrence():
    """With tanh's slope 1 at 0 and W_hh = a I, W_xh = I: d h_T / d x_{T-k} = a^k I."""
    layer = nn.RNN(2, 2, batch_first=True, bias=False)
    with torch.no_grad():
        layer.weight_ih_l0.copy_(torch.eye(2))
        layer.weight_hh_l0.copy_(0.5 * torch.eye(2))
    norms = gradient_by_distance(layer, torch.zeros(3, 4, 2))  # zeros: tanh'(0) = 1
    expected = torch.tensor([0.5**k for k in range(4)]) * 2**0.5  # Frobenius norm of a^k I
    torch.testing.assert_close(norms, expected)


# ---------------------------------------------------------------- Seq2SeqRNN ----------


def test_seq2seq_defaults():
    model = Seq2SeqRNN(11, 9)
    assert model.src_embed.embedding_dim == 32 and model.tgt_embed.embedding_dim == 32
    assert isinstance(model.encoder, nn.GRU) and isinstance(model.decoder, nn.GRU)
    assert model.encoder.hidden_size == model.d_hidden == 64 and model.encoder.batch_first
    assert model.decoder.batch_first and model.attention is None and model.cell == "gru"
    assert (model.out.in_features, model.out.out_features) == (64, 9)
    assert model.src_embed.padding_idx == 0 and model.tgt_embed.padding_idx == 0
    assert model.attn is None


def test_seq2seq_with_attention_reads_decoder_output_and_context_side_by_side():
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10, cell="lstm", attention=True, pad_id=1)
    assert isinstance(model.encoder, nn.LSTM) and isinstance(model.attention, AdditiveAttention)
    assert model.out.in_features == 2 * 10
    assert model.src_embed.padding_idx == 1 and model.pad_id == 1


def test_additive_attention_has_bahdanaus_parameters():
    """score = v . tanh(W_q q + W_m m): one bias is enough (a second would add to it), and a
    bias on v would shift every score alike, which softmax ignores."""
    attention = AdditiveAttention(10)
    shapes = {name: tuple(p.shape) for name, p in attention.named_parameters()}
    assert shapes == {"w_query.weight": (10, 10), "w_memory.weight": (10, 10),
                      "w_memory.bias": (10,), "v.weight": (1, 10)}  # fmt: skip


def test_additive_attention_by_hand():
    attention = AdditiveAttention(1)
    with torch.no_grad():
        attention.w_query.weight.fill_(1.0)
        attention.w_memory.weight.fill_(1.0)
        attention.w_memory.bias.fill_(0.0)
        attention.v.weight.fill_(2.0)
    queries = torch.tensor([[[0.5]]])  # (B=1, T_q=1, 1)
    memory = torch.tensor([[[1.0], [-1.0], [3.0]]])  # (B=1, T_src=3, 1), the last is padding
    mask = torch.tensor([[True, True, False]])
    context, weights = attention(queries, memory, mask)
    scores = 2 * torch.tanh(torch.tensor([1.5, -0.5]))  # v . tanh(q + m)
    want = scores.softmax(dim=0)
    torch.testing.assert_close(weights, torch.cat([want, torch.zeros(1)])[None, None])
    torch.testing.assert_close(context, (want[0] * 1.0 + want[1] * -1.0).reshape(1, 1, 1))


def test_seq2seq_errors_name_what_came():
    assert _message(lambda: Seq2SeqRNN(5, 5, cell="rnn")) == (
        "cell must be one of ['gru', 'lstm'], got 'rnn'"
    )
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10)
    assert _message(lambda: model.encode(torch.tensor([[3, 0, 4]]))) == (
        "padding (pad_id=0) must come at the end of each row"
    )
    assert _message(lambda: model.encode(torch.tensor([[3, 4], [0, 0]]))) == (
        "every source sequence needs at least one token that is not padding"
    )
    assert _message(lambda: model.encode([[3, 4]])) == (
        "src must be token ids of shape (B, T_src), got list"
    )
    assert _message(lambda: model.encode(torch.ones(1, 2, 3, dtype=torch.long))) == (
        "src must be token ids of shape (B, T_src), got (1, 2, 3)"
    )


def test_a_row_without_padding_is_accepted_next_to_a_padded_one():
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10).eval()
    encoded = model.encode(torch.tensor([[3, 4, 5], [6, 0, 0]]))
    assert encoded.src_mask.tolist() == [[True, True, True], [True, False, False]]
    assert torch.equal(encoded.memory[1, 1:], torch.zeros(2, 10))  # zeros on padding


def _always_end(attention: bool) -> Seq2SeqRNN:
    torch.manual_seed(0)
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10, attention=attention).eval()
    with torch.no_grad():  # every step says EOS (token 2)
        model.out.weight.zero_()
        model.out.bias.copy_(torch.arange(9) == 2)
    return model


def test_generate_stops_as_soon_as_every_row_has_ended():
    model = _always_end(attention=True)
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    out = model.generate(src, bos_id=1, eos_id=2, max_len=5)
    assert out.tolist() == [[2, 0, 0, 0, 0], [2, 0, 0, 0, 0]]
    assert model.attn.shape == (2, 1, 4)  # one step decoded, not five
    assert (model.attn[1, 0, 2:] == 0).all()


def test_generate_keeps_the_weights_of_every_step_it_decoded():
    torch.manual_seed(0)
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10, attention=True).eval()
    with torch.no_grad():  # every step says 5, never EOS: all max_len steps are decoded
        model.out.weight.zero_()
        model.out.bias.copy_(torch.arange(9) == 5)
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    out = model.generate(src, bos_id=1, eos_id=2, max_len=3)
    assert out.tolist() == [[5, 5, 5], [5, 5, 5]]
    generated = model.attn  # (B, steps, T_src)
    assert generated.shape == (2, 3, 4)
    with torch.no_grad():  # the same decoder inputs, all at once, give the same weights
        model(src, torch.tensor([[1, 5, 5], [1, 5, 5]]))
    torch.testing.assert_close(generated, model.attn)


def test_generate_starts_from_the_given_begin_token():
    model = _always_end(attention=False)
    seen = []
    decode = model.decode

    def spy(tgt_in, encoded, state=None):
        seen.append(tgt_in.tolist())
        return decode(tgt_in, encoded, state)

    model.decode = spy
    model.generate(torch.tensor([[3, 4], [5, 0]]), bos_id=7, eos_id=2, max_len=3)
    assert seen == [[[7], [7]]]


def test_encoder_and_decoder_read_batch_first_like_the_rest_of_the_course():
    """Called directly on (B, T, d_embed), each row is its own sequence."""
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10)
    embedded = model.src_embed(torch.tensor([[3, 4, 5], [6, 7, 8]]))  # (B=2, T=3, d_embed)
    for layer in (model.encoder, model.decoder):
        together, _ = layer(embedded)  # (B, T, d_hidden)
        alone, _ = layer(embedded[1:])  # the second row on its own
        assert together.shape == (2, 3, 10)
        torch.testing.assert_close(together[1:], alone)
