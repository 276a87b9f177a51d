"""course.rnn.TutorialSeq2Seq: the PyTorch tutorial's GRU encoder-decoder, attention before
the GRU step (lesson 11's baseline), in the course's encode / decode / generate contract.

The wiring is proved against a reference written here by hand from the model's own weights;
the decoders of course.decoding must run on it unchanged.
"""

import pytest
import torch
import torch.nn.functional as F

from course.decoding import beam_search, greedy_decode
from course.masking import padding_mask
from course.rnn import Seq2SeqRNN, TutorialSeq2Seq

PAD, BOS, EOS = 0, 1, 2
SRC = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0], [9, 0, 0, 0]])  # (3, 4): padded at the end
TGT_IN = torch.tensor([[1, 3, 4, 5, 6], [1, 7, 8, 0, 0], [1, 2, 3, 0, 0]])  # (3, 5)


def _model(seed: int = 0, src_vocab: int = 11, tgt_vocab: int = 9, **kwargs) -> TutorialSeq2Seq:
    torch.manual_seed(seed)
    return TutorialSeq2Seq(src_vocab, tgt_vocab, d_hidden=kwargs.pop("d_hidden", 12), **kwargs)


def _message(call) -> str:
    with pytest.raises(ValueError) as error:
        call()
    return str(error.value)


# --------------------------------------------------------------- shapes ----------


def test_shapes_of_forward_encode_decode_and_generate():
    model = _model().eval()
    memory = model.encode(SRC)
    assert memory.shape == (3, 4, 12)
    assert model(SRC, TGT_IN).shape == (3, 5, 9) and model.attn.shape == (3, 5, 4)
    logits = model.decode(TGT_IN[:, :2], memory, padding_mask(SRC, PAD))
    assert logits.shape == (3, 2, 9) and model.attn.shape == (3, 2, 4)
    out = model.generate(SRC, BOS, EOS, max_len=7)
    assert out.dtype == torch.long and out.shape[0] == 3 and 1 <= out.shape[1] <= 7
    assert model.attn.shape == (3, out.shape[1], 4)
    assert TutorialSeq2Seq(11, 9).eval().encode(SRC).shape == (3, 4, 128)  # the tutorial's H


def test_memory_is_zero_on_padding_and_real_elsewhere():
    memory = _model().eval().encode(SRC)
    real = SRC != PAD
    assert torch.equal(memory[~real], torch.zeros(int((~real).sum()), 12))
    assert (memory[real].abs().sum(dim=-1) > 0).all()


def test_logits_depend_on_the_source():
    model = _model().eval()
    changed = SRC.clone()
    changed[0, 1] = 10
    before, after = model(SRC, TGT_IN), model(changed, TGT_IN)
    assert not torch.allclose(before[0], after[0])  # row 0 read its source ...
    torch.testing.assert_close(before[1:], after[1:], atol=0, rtol=0)  # ... and only row 0 did


def test_teacher_forcing_steps_the_decoder_gru_once_per_target_position():
    model = _model().eval()
    inputs = []
    model.decoder.register_forward_hook(lambda module, args, output: inputs.append(args[0]))
    model(SRC, TGT_IN)
    assert [tuple(x.shape) for x in inputs] == [(3, 1, 24)] * 5  # [embedded, context] per step


# ------------------------------------------------------ padding and causality ----------


def test_padding_changes_nothing():
    model = _model().eval()
    alone = model(SRC[1:2, :2], TGT_IN[1:2])  # (1, 5, V): [7, 8] without padding
    weights_alone = model.attn
    batched = model(SRC, TGT_IN)  # row 1 padded to the first row's length
    torch.testing.assert_close(batched[1:2], alone, atol=1e-6, rtol=0)
    torch.testing.assert_close(model.attn[1:2, :, :2], weights_alone, atol=1e-6, rtol=0)


def test_the_decoder_is_causal():
    model = _model().eval()
    logits = model(SRC, TGT_IN)
    for t in range(TGT_IN.shape[1] - 1):
        changed = TGT_IN.clone()
        changed[:, t + 1 :] = torch.randint(3, 9, changed[:, t + 1 :].shape)
        again = model(SRC, changed)
        torch.testing.assert_close(again[:, : t + 1], logits[:, : t + 1], atol=0, rtol=0)
        assert not torch.allclose(again[:, t + 1 :], logits[:, t + 1 :])


# --------------------------------------------------------------- the wiring ----------


def test_forward_is_decode_of_encode_with_the_padding_mask():
    model = _model().eval()
    src_mask = padding_mask(SRC, PAD)
    by_parts = model.decode(TGT_IN, model.encode(SRC, src_mask), src_mask)
    assert torch.equal(model(SRC, TGT_IN), by_parts)
    assert torch.equal(model.encode(SRC), model.encode(SRC, src_mask))


def _gru_step(x, h, gru, k: int = 0):
    """One step of torch's GRU by hand: weight_ih_l0 = [W_ir | W_iz | W_in], same for hh."""
    W_ir, W_iz, W_in = getattr(gru, f"weight_ih_l{k}").chunk(3)
    W_hr, W_hz, W_hn = getattr(gru, f"weight_hh_l{k}").chunk(3)
    b_ir, b_iz, b_in = getattr(gru, f"bias_ih_l{k}").chunk(3)
    b_hr, b_hz, b_hn = getattr(gru, f"bias_hh_l{k}").chunk(3)
    r = torch.sigmoid(W_ir @ x + b_ir + W_hr @ h + b_hr)  # reset gate
    z = torch.sigmoid(W_iz @ x + b_iz + W_hz @ h + b_hz)  # update gate
    n = torch.tanh(W_in @ x + b_in + r * (W_hn @ h + b_hn))  # candidate
    return (1 - z) * n + z * h


def _reference(model, src_row, tgt_row):
    """One sentence, step by step: (logits (T_tgt, V), weights (T_tgt, L)) from the weights."""
    h = torch.zeros(model.d_hidden)
    memory = []
    for token in src_row[src_row != PAD]:  # the encoder reads the real tokens only
        h = _gru_step(model.src_embed.weight[token], h, model.encoder)
        memory.append(h)
    memory = torch.stack(memory)  # (L, H); h is memory[-1], the decoder's h_0
    a = model.attention
    logits, weights = [], []
    for y in tgt_row:
        scores = torch.tanh(a.w_query.weight @ h + a.w_memory(memory)) @ a.v.weight[0]  # (L,)
        w = scores.softmax(dim=0)  # attention first, asked by h_{t-1} ...
        x = torch.cat([model.tgt_embed.weight[y], w @ memory])  # [embedded, context]
        h = _gru_step(x, h, model.decoder)  # ... then the GRU step
        logits.append(model.out.weight @ h + model.out.bias)
        weights.append(w)
    return torch.stack(logits), torch.stack(weights)


@pytest.mark.parametrize("seed", [0, 1])
def test_logits_equal_a_step_by_step_reference_from_the_models_weights(seed):
    model = _model(seed).eval()
    logits = model(SRC, TGT_IN)
    with torch.no_grad():
        for b in range(SRC.shape[0]):
            want, want_weights = _reference(model, SRC[b], TGT_IN[b])
            torch.testing.assert_close(logits[b], want, atol=1e-5, rtol=1e-5)
            L = want_weights.shape[1]
            torch.testing.assert_close(model.attn[b, :, :L], want_weights, atol=1e-5, rtol=1e-5)


def test_attention_weights_sum_to_one_over_real_tokens_and_are_zero_on_padding():
    model = _model().eval()
    real = (SRC != PAD)[:, None, :]  # (B, 1, T_src)
    for run in (
        lambda: model(SRC, TGT_IN),
        lambda: model.generate(SRC, BOS, EOS, max_len=6),
    ):
        run()
        weights = model.attn
        assert not weights.requires_grad
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:2]))
        assert (weights.masked_select(~real) == 0).all()
        assert (weights.masked_select(real.expand_as(weights)) > 0).all()


# ------------------------------------------------------------- it learns ----------


def _copy_task(n: int = 200, vocab: int = 8, seed: int = 0):
    """n random sequences of 3 to 5 tokens from 3 .. vocab - 1, padded; the answer copies them."""
    gen = torch.Generator().manual_seed(seed)
    length = torch.randint(3, 6, (n,), generator=gen)  # (n,)
    tokens = torch.randint(3, vocab, (n, 5), generator=gen)  # (n, 5)
    src = tokens.where(torch.arange(5) < length[:, None], PAD)  # (n, 5)
    tgt_in = torch.cat([torch.full((n, 1), BOS), src], dim=1)  # (n, 6)
    tgt_out = torch.cat([src, torch.full((n, 1), PAD)], dim=1)  # (n, 6)
    tgt_out[torch.arange(n), length] = EOS
    return src, tgt_in, tgt_out


@pytest.fixture(scope="module")
def trained():
    """A small model trained on the copy task: 300 full-batch Adam steps, lr 1e-2."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = _model(0, src_vocab=8, tgt_vocab=8, d_hidden=16)
        src, tgt_in, tgt_out = _copy_task()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(300):
            logits = model(src, tgt_in)  # (200, 6, 8)
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return model.eval(), src, tgt_out, losses


def test_it_learns_to_copy(trained):
    model, src, tgt_out, losses = trained
    assert losses[-1] < 0.3 < losses[0]
    out = model.generate(src[:20], BOS, EOS, max_len=8)  # it also copies on its own
    assert torch.equal(out, tgt_out[:20, : out.shape[1]])


# ------------------------------------------------------------ the decoders ----------


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_decode_and_generate_agree_exactly(seed):
    model = _model(seed, tgt_vocab=5).eval()  # a small vocabulary: <eos> comes by chance
    src = torch.randint(3, 11, (6, 5), generator=torch.Generator().manual_seed(seed))
    src[::2, 3:] = PAD
    want = greedy_decode(model, src, max_len=8, bos_id=BOS, eos_id=EOS)
    assert torch.equal(model.generate(src, BOS, EOS, max_len=8), want)


def test_greedy_decode_and_generate_agree_on_the_trained_model(trained):
    model, src, tgt_out, _ = trained
    out = model.generate(src, BOS, EOS, max_len=8)
    assert torch.equal(out, greedy_decode(model, src, 8, BOS, EOS))
    assert out.shape[1] == 6  # trimmed: the loop stopped when every row had written <eos>
    assert (out == EOS).sum(dim=1).tolist() == [1] * len(src)
    assert torch.equal(model.generate(src, BOS, EOS, max_len=3), out[:, :3])


@pytest.mark.parametrize("seed", [0, 1])
def test_beam_search_of_one_is_greedy(seed):
    model = _model(seed, tgt_vocab=5).eval()
    src = torch.randint(3, 11, (5, 4), generator=torch.Generator().manual_seed(seed))
    src[1, 2:] = PAD
    greedy = greedy_decode(model, src, max_len=6, bos_id=BOS, eos_id=EOS)
    assert torch.equal(beam_search(model, src, 6, BOS, EOS, beam_size=1), greedy)


def test_beam_search_of_four_returns_the_documented_format(trained):
    model, src, tgt_out, _ = trained
    for m, s in ((model, src[:10]), (_model(1, tgt_vocab=5).eval(), SRC)):
        out = beam_search(m, s, max_len=7, bos_id=BOS, eos_id=EOS, beam_size=4)
        assert out.dtype == torch.long and out.shape[0] == len(s) and 1 <= out.shape[1] <= 7
        is_eos = (out == EOS).long()
        after_eos = is_eos.cumsum(dim=1) - is_eos > 0  # (B, T_out): after the first <eos>
        assert (out[after_eos] == m.pad_id).all()
    out = beam_search(model, src[:10], max_len=7, bos_id=BOS, eos_id=EOS, beam_size=4)
    assert torch.equal(out, tgt_out[:10, : out.shape[1]])  # the trained model copies


# --------------------------------------------------------------- training ----------


def test_gradients_reach_every_parameter():
    model = _model()
    logits = model(SRC, TGT_IN)
    F.cross_entropy(logits.flatten(0, 1), TGT_IN.roll(-1, 1).flatten()).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all() and parameter.grad.abs().sum() > 0, name


def test_dropout_acts_in_training_only():
    model = _model(dropout=0.5)
    assert not torch.equal(model(SRC, TGT_IN), model(SRC, TGT_IN))
    model.eval()
    assert torch.equal(model(SRC, TGT_IN), model(SRC, TGT_IN))
    still = _model(dropout=0.0)  # in training, without dropout, two runs agree
    assert torch.equal(still(SRC, TGT_IN), still(SRC, TGT_IN))


# ------------------------------------------------------------------ errors ----------


def test_bad_sources_are_refused_with_what_came():
    model = _model().eval()
    forward = lambda src: model(src, TGT_IN[:1])  # noqa: E731
    generate = lambda src: model.generate(src, BOS, EOS, 5)  # noqa: E731
    for run in (model.encode, forward, generate):  # all three check src alike
        assert _message(lambda run=run: run([[3, 4]])) == (
            "src must be token ids of shape (B, T_src), got list"
        )
        assert _message(lambda run=run: run(torch.tensor([3, 4, 5]))) == (
            "src must be token ids of shape (B, T_src), got (3,)"
        )
        assert _message(lambda run=run: run(torch.ones(1, 3))) == (
            "src must be integer token ids of shape (B, T_src), got a torch.float32 tensor "
            "of shape (1, 3)"
        )
        assert _message(lambda run=run: run(torch.tensor([[3, 4], [0, 0]]))) == (
            "every source sequence needs at least one token that is not padding"
        )
        assert _message(lambda run=run: run(torch.tensor([[3, 0, 4]]))) == (
            "padding (pad_id=0) must come at the end of each row"
        )
    other = _model(pad_id=5)
    assert _message(lambda: other.encode(torch.tensor([[3, 5, 4]]))) == (
        "padding (pad_id=5) must come at the end of each row"
    )


def test_the_check_is_shared_with_seq2seq_rnn():
    model = Seq2SeqRNN(11, 9, d_embed=6, d_hidden=10)
    assert _message(lambda: model.encode(torch.ones(1, 3))) == (
        "src must be integer token ids of shape (B, T_src), got a torch.float32 tensor "
        "of shape (1, 3)"
    )


def test_bad_masks_and_targets_are_refused_with_what_came():
    model = _model().eval()
    memory, src_mask = model.encode(SRC), padding_mask(SRC, PAD)
    assert _message(lambda: model.decode(TGT_IN, memory, src_mask[:, 0, 0])) == (
        "src_mask must be a bool padding mask of shape (B, 1, 1, T_src) = (3, 1, 1, 4) "
        "(course.masking.padding_mask), got a torch.bool tensor of shape (3, 4)"
    )
    assert _message(lambda: model.encode(SRC, src_mask.long())) == (
        "src_mask must be a bool padding mask of shape (B, 1, 1, T_src) = (3, 1, 1, 4) "
        "(course.masking.padding_mask), got a torch.int64 tensor of shape (3, 1, 1, 4)"
    )
    holes = src_mask.clone()
    holes[0, 0, 0, 1] = False
    assert _message(lambda: model.decode(TGT_IN, memory, holes)) == (
        "padding (pad_id=0) must come at the end of each row"
    )
    assert _message(lambda: model.decode(TGT_IN[:2], memory, src_mask)) == (
        "tgt must be integer token ids (B=3, T_tgt), got a torch.int64 tensor of shape (2, 5)"
    )
    assert _message(lambda: model.decode(TGT_IN, memory[0], src_mask)) == (
        "memory must have shape (B, T_src, d_hidden), got (4, 12)"
    )
