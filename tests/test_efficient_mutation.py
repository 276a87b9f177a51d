"""course.efficient, the behaviour its mutation run found unpinned: what each error message
says was expected and what came, the public names (`__all__`), the defaults (speedup's 128
tokens from <bos> 1 timed 3 times; attention_cost's d_k 64, batch 1, 4 heads, 3 repeats and
seed 0), the edges every check must let through (T = 1, k = 1, n_global = T, a pattern just
long enough), the positions a model may name, speedup's ratio and attention_cost's rows under
a stand-in clock and a stand-in GPU, the backward pass attention_cost times, the Linformer
projections' scales and a hand-built KVCache's sinusoidal default.
"""

import math
import re
from types import SimpleNamespace

import pytest
import torch
from test_efficient import _model, _source, _translation_model
from torch import nn

import course.efficient as efficient
from course.attention import scaled_dot_product_attention
from course.decoding import greedy_decode
from course.efficient import (
    KVCache,
    LinformerSelfAttention,
    PatternAttention,
    SelfAttentionCall,
    attention_cost,
    bigbird_mask,
    cached_greedy_decode,
    decode_step,
    kv_cache_attention,
    linformer_encoder,
    replace_encoder_attention,
    sliding_window_mask,
    speedup,
)
from course.masking import padding_mask
from course.multihead import MultiHeadAttention

pytestmark = pytest.mark.usefixtures("one_thread")


def raises(message, exception=ValueError):
    """pytest.raises for exactly this message, word for word."""
    return pytest.raises(exception, match=f"^{re.escape(message)}$")


class _Clock:
    """Stands in for the time module: perf_counter() reads `now`, which the code timed
    moves forward (a run "takes" exactly what the test says)."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self):
        return self.now


class _TorchWith:
    """course.efficient's `torch`, with some attributes replaced (the rest is torch's)."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(torch, name)


# ------------------------------------------------------------------- public names --


def test_the_public_names_are_the_lessons_tools():
    assert efficient.__all__ == [
        "kv_cache_attention",
        "KVCache",
        "decode_step",
        "cached_greedy_decode",
        "cached_beam_search",
        "speedup",
        "attention_cost",
        "sdpa",
        "LinformerSelfAttention",
        "sliding_window_mask",
        "bigbird_mask",
        "PatternAttention",
        "SelfAttentionCall",
        "replace_encoder_attention",
        "sparse_encoder",
        "linformer_encoder",
    ]
    namespace = {}
    exec("from course.efficient import *", namespace)  # what a notebook's star import gets
    assert all(namespace[name] is getattr(efficient, name) for name in efficient.__all__)


# ------------------------------------------------------------- kv_cache_attention --


def test_kv_cache_attention_messages_say_what_came():
    q = torch.randn(2, 3, 1, 4)
    cache = torch.randn(2, 3, 5, 4)
    one_position = "must be (B, h, 1, d_k), one new position, got "
    with raises("q_new " + one_position + "a torch.float32 tensor of shape (2, 3, 2, 4)"):
        kv_cache_attention(torch.randn(2, 3, 2, 4), q, q, None, None)
    with raises("k_new " + one_position + "a torch.float32 tensor of shape (2, 3, 4)"):
        kv_cache_attention(q, torch.randn(2, 3, 4), q, None, None)
    with raises("v_new " + one_position + "NoneType None"):
        kv_cache_attention(q, q, None, None, None)
    with raises(
        "k_cache and v_cache are both None (the first step) or both tensors, got k_cache "
        "a torch.float32 tensor of shape (2, 3, 5, 4) and v_cache NoneType None"
    ):
        kv_cache_attention(q, q, q, cache, None)
    with raises(
        "k_cache must be (2, 3, 't', 4) like the new position, got a torch.float32 tensor of "
        "shape (2, 3, 5, 6)"
    ):
        kv_cache_attention(q, q, q, torch.randn(2, 3, 5, 6), cache)
    with raises(
        "v_cache must be (2, 3, 't', 4) like the new position, got a torch.float32 tensor of "
        "shape (1, 3, 5, 4)"
    ):
        kv_cache_attention(q, q, q, cache, torch.randn(1, 3, 5, 4))
    with raises(
        "k_cache and v_cache must hold the same t positions, got (2, 3, 5, 4) and (2, 3, 4, 4)"
    ):
        kv_cache_attention(q, q, q, cache, torch.randn(2, 3, 4, 4))


def test_the_new_query_key_and_value_must_share_batch_and_heads():
    # each mismatch alone is refused, though attention would broadcast over it
    share = "q_new, k_new, v_new must share (B, h, 1): got "
    k = torch.randn(1, 3, 1, 4)
    with raises(share + "(2, 3, 1, 4), (1, 3, 1, 4), (1, 3, 1, 4)"):  # q's batch only
        kv_cache_attention(torch.randn(2, 3, 1, 4), k, k, None, None)
    with raises(share + "(1, 3, 1, 4), (1, 3, 1, 4), (2, 3, 1, 6)"):  # v's batch only
        kv_cache_attention(k, k, torch.randn(2, 3, 1, 6), None, None)
    out, _, v_all = kv_cache_attention(k, k, torch.randn(1, 3, 1, 6), None, None)
    assert out.shape == v_all.shape == (1, 3, 1, 6)  # values may be wider than keys


# ---------------------------------------------------------- cached greedy decode --


class _EncoderDecoder(nn.Module):
    """Lesson 09's contract (encode, decode, pad_id) without the Transformer's layers."""

    pad_id = 0

    def encode(self, src, src_mask=None):
        return src

    def decode(self, tgt, memory, src_mask=None):
        return tgt


def test_cached_decoding_says_which_part_of_a_transformer_is_missing():
    with raises(
        "cached decoding needs a course.transformer.Transformer (decoder_layers, tgt_embed, "
        "pos, out, pad_id), got _EncoderDecoder without decoder_layers"
    ):
        cached_greedy_decode(_EncoderDecoder().eval(), _source(0), 5, 1, 2)


def test_cached_decoding_knows_two_kinds_of_positions_and_defaults_to_sinusoidal():
    model, src = _model(0), _source(0)
    want = greedy_decode(model, src, 8, 1, 2)
    del model.positions  # a Transformer from before rotary positions: the table is its only kind
    assert torch.equal(cached_greedy_decode(model, src, 8, 1, 2), want)
    model.positions = "learned"
    with raises("cached decoding knows sinusoidal and rotary positions, got 'learned'"):
        cached_greedy_decode(model, src, 8, 1, 2)


def test_decoding_past_max_len_says_which_position():
    model = _model(0)
    with raises(
        "position 40 is past the model's max_len=40: build the Transformer with a larger "
        "max_len, or decode fewer tokens"
    ):
        cached_greedy_decode(model, _source(0), 60, 1, model.tgt_vocab)


def test_a_hand_built_cache_is_for_the_sinusoidal_table():
    model, src = _model(0), _source(0)
    src_mask = padding_mask(src, model.pad_id)
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        started = KVCache.start(model, memory, src_mask)
        cache = KVCache(started.self_kv, started.cross_kv, src_mask, started.key_is_real)
        assert cache.rotary is False
        bos = torch.full((src.shape[0], 1), 1)
        got = decode_step(model, bos[:, 0], cache)
        want = model.decode(bos, memory, src_mask)[:, -1]
    assert torch.allclose(got, want, atol=1e-5)


# ----------------------------------------------------------------------- speedup --


def _stub_decoders(monkeypatch, recompute_times, cached_times, disagree=False):
    """Replace the two decoders speedup times by stand-ins that record their arguments,
    "take" the given seconds, call by call, and return the same (or different) tokens."""
    clock = _Clock()
    monkeypatch.setattr(efficient, "time", clock)
    calls = {"recompute": [], "cached": []}

    def stand_in(name, times, tokens):
        def decode(model, src, max_len, bos_id, eos_id):
            calls[name].append((max_len, bos_id, eos_id))
            clock.now += times[len(calls[name]) - 1]
            return tokens

        return decode

    ids = torch.zeros(4, 3, dtype=torch.long)
    monkeypatch.setattr(efficient, "greedy_decode", stand_in("recompute", recompute_times, ids))
    other = ids + 1 if disagree else ids
    monkeypatch.setattr(efficient, "cached_greedy_decode", stand_in("cached", cached_times, other))
    return calls


def test_speedup_is_the_ratio_of_the_median_times_after_a_warm_up(monkeypatch):
    model, src = _model(0), _source(0)
    # the first call of each is the warm-up (and the agreement check): never timed
    calls = _stub_decoders(monkeypatch, [50.0, 2.0, 9.0, 3.0], [50.0, 0.5, 0.25, 4.0])
    result = speedup(model, src)
    assert result == {
        "recompute_s": 3.0,  # the median of 2, 9 and 3
        "cached_s": 0.5,  # the median of 0.5, 0.25 and 4
        "speedup": 6.0,  # recompute / cached
        "n_tokens": 128,
        "batch": 4,
    }
    # by default 128 tokens from <bos> = 1, each decoder run 1 + 3 times, with an <eos> that
    # no logit stands for (tgt_vocab), so that every sentence runs all 128 tokens
    everything = (128, 1, model.tgt_vocab)
    assert calls == {"recompute": [everything] * 4, "cached": [everything] * 4}


def test_speedup_refuses_decoders_that_disagree(monkeypatch):
    _stub_decoders(monkeypatch, [1.0], [1.0], disagree=True)
    with raises("cached and recomputed greedy decoding disagree on these inputs", RuntimeError):
        speedup(_model(0), _source(0), n_tokens=2)


# ---------------------------------------------------------------- attention_cost --


def _hooked_attention(seen):
    """The course's attention, returning (output, weights) and noting which of the two
    backward reaches, and with what gradient."""

    def attention(q, k, v, mask=None):
        output, weights = scaled_dot_product_attention(q, k, v, mask)
        output.register_hook(lambda grad: seen.append(("output", grad)))
        weights.register_hook(lambda grad: seen.append(("weights", grad)))
        return output, weights

    return attention


def test_attention_cost_backpropagates_the_sum_of_the_output():
    seen = []
    attention_cost(_hooked_attention(seen), [3], d_k=2, repeats=1)  # fn may return a tuple
    outputs = [grad for name, grad in seen if name == "output"]
    assert len(outputs) == 2  # the warm-up and the timed pass
    assert all(torch.equal(grad, torch.ones(1, 4, 3, 2)) for grad in outputs)  # d sum / d out


def test_attention_cost_times_the_course_attentions_output_by_default(monkeypatch):
    seen = []
    monkeypatch.setattr(efficient, "scaled_dot_product_attention", _hooked_attention(seen))
    attention_cost(None, [3], d_k=2, repeats=1)
    assert [name for name, _ in seen].count("output") == 2


def test_attention_cost_defaults(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(efficient, "time", clock)
    inputs, pass_seconds = [], iter([7.0, 3.0, 1.0, 2.0])

    def attention(q, k, v):
        inputs.append((q.detach().clone(), k.detach().clone(), v.detach().clone()))
        clock.now += next(pass_seconds)
        return scaled_dot_product_attention(q, k, v)[0]

    (row,) = attention_cost(attention, [5])
    assert row == {"T": 5, "seconds": 2.0, "weights_bytes": 1 * 4 * 5 * 5 * 4, "peak_bytes": None}
    assert len(inputs) == 4  # a warm-up, then 3 timed passes (median 2.0, not the warm-up's 7)
    gen = torch.Generator().manual_seed(0)  # seed 0, batch 1, 4 heads, d_k 64
    want = [torch.randn(1, 4, 5, 64, generator=gen) for _ in range(3)]
    assert all(torch.equal(got, w) for got, w in zip(inputs[0], want, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(inputs[0], inputs[-1], strict=True))


class _Cuda:
    """Stands in for torch.cuda on a machine without a GPU: 5000 bytes held throughout; each
    pass ends with one synchronize and peaks 1000 bytes above that, the very first pass
    (the warm-up, which fills caches) 3000."""

    def __init__(self):
        self.synchronized = []
        self.peak = 0  # above the 5000 held, since the last reset

    def synchronize(self, device):
        self.peak = max(self.peak, 3000 if not self.synchronized else 1000)
        self.synchronized.append(device)

    def memory_allocated(self, device):
        return 5000

    def reset_peak_memory_stats(self, device):
        self.peak = 0

    def max_memory_allocated(self, device):
        return 5000 + self.peak


class _Moved:
    """A tensor's .to(a stand-in device): the tensor itself."""

    def __init__(self, tensor):
        self.tensor = tensor

    def to(self, device):
        return self.tensor


def test_on_a_gpu_each_pass_waits_and_the_peak_is_one_pass_above_the_start(monkeypatch):
    cuda, gpu = _Cuda(), SimpleNamespace(type="cuda", index=0)
    on_a_gpu = _TorchWith(
        cuda=cuda,
        device=lambda device: gpu,
        randn=lambda *args, **kwargs: _Moved(torch.randn(*args, **kwargs)),
    )
    monkeypatch.setattr(efficient, "torch", on_a_gpu)
    monkeypatch.setattr(efficient, "synchronize", cuda.synchronize)  # course.utils's wait
    rows = attention_cost(None, [4, 6], d_k=2, repeats=2, device="cuda")
    assert [row["peak_bytes"] for row in rows] == [1000, 1000]
    # every pass waits for the GPU's kernels, so that the clock measures them, not their launch
    assert cuda.synchronized == [gpu] * 2 * (1 + 1 + 2)  # warm-up, peak pass, 2 timed


def test_attention_cost_names_a_bad_length():
    with raises("every T in T_values must be a positive int, got int 0"):
        attention_cost(None, [8, 0])


# --------------------------------------------------------------------- Linformer --


def test_linformer_messages_say_what_came():
    with raises(
        "d_model must be divisible by n_heads: d_model=10, n_heads=3 (d_model / n_heads = "
        "3.33333 is not a whole head size d_k)"
    ):
        LinformerSelfAttention(10, 3, seq_len=8, k=2)
    with raises("seq_len must be a positive int, got 0"):
        LinformerSelfAttention(16, 4, seq_len=0, k=2)
    with raises("k must be a positive int, got 0"):
        LinformerSelfAttention(16, 4, seq_len=8, k=0)
    with raises("dropout must be in [0, 1), got 1.0"):
        LinformerSelfAttention(16, 4, seq_len=8, k=2, dropout=1.0)
    lin = LinformerSelfAttention(16, 4, seq_len=20, k=5)
    with raises(
        "x must have shape (B, T, d_model=16), got a torch.float32 tensor of shape (1, 4, 8)"
    ):
        lin(torch.randn(1, 4, 8))
    with raises("x has T=21 positions, more than seq_len=20"):
        lin(torch.randn(1, 21, 16))
    with raises(
        "mask must be a bool padding mask (B, 1, 1, T) = (3, 1, 1, 12), got a torch.float32 "
        "tensor of shape (3, 1, 1, 12)"
    ):
        lin(torch.randn(3, 12, 16), torch.ones(3, 1, 1, 12))


def test_linformer_takes_one_position_projected_to_one_row():
    torch.manual_seed(0)
    lin = LinformerSelfAttention(8, 2, seq_len=1, k=1, dropout=0.5)
    assert lin(torch.randn(3, 1, 8)).shape == (3, 1, 8)
    assert lin.attn.shape == (3, 2, 1, 1)


def test_linformer_head_size_is_a_whole_number_as_in_multihead_attention():
    lin = LinformerSelfAttention(12, 3, seq_len=4, k=2)
    assert type(lin.d_k) is int and lin.d_k == MultiHeadAttention(12, 3).d_k == 4


def test_linformer_projections_are_drawn_with_variance_one_over_k():
    torch.manual_seed(0)
    k, seq_len = 16, 400
    lin = LinformerSelfAttention(8, 2, seq_len=seq_len, k=k)
    for projection in (lin.E, lin.F):
        assert projection.shape == (k, seq_len)
        assert 0.9 < float(projection.detach().var()) * k < 1.1
        assert abs(float(projection.detach().mean())) < 0.01
    assert not torch.equal(lin.E, lin.F)  # two projections, drawn apart


def test_linformer_encoder_xavier_initialises_the_new_projections():
    torch.manual_seed(0)
    model = linformer_encoder(_translation_model(), k=3)
    d_model = 16
    bound = math.sqrt(6 / (d_model + d_model))  # Xavier uniform: U(-bound, bound)
    for layer in model.encoder_layers:
        lin = layer.self_attn.attention
        for projection in (lin.w_q, lin.w_k, lin.w_v, lin.w_o):
            weight = projection.weight.detach()
            assert float(weight.abs().max()) <= bound
            # variance bound^2 / 3 (nn.Linear's own init would give a third of it)
            assert 0.7 < float(weight.var()) / (bound**2 / 3) < 1.3, float(weight.var())


# ------------------------------------------------------------------ sparse masks --


def test_mask_messages_say_what_came():
    with raises("T must be a positive int, got int 0"):
        sliding_window_mask(0, 1)
    with raises("window must be an int >= 0, got int -1"):
        sliding_window_mask(4, -1)
    with raises("window must be an int >= 0, got float 1.5"):
        bigbird_mask(4, 1.5, 1, 1)
    with raises("n_global must be an int >= 0, got int -1"):
        bigbird_mask(4, 1, -1, 1)
    with raises("n_random must be an int >= 0, got bool True"):
        bigbird_mask(4, 1, 1, True)
    with raises("n_global must be at most T=4, got 5"):
        bigbird_mask(4, 1, 5, 1)
    with raises("generator must be a torch.Generator or None, got int 3"):
        bigbird_mask(4, 1, 1, 1, generator=3)


def test_a_single_position_and_an_all_global_mask_are_allowed():
    assert sliding_window_mask(1, 0).tolist() == [[True]]
    assert bigbird_mask(1, 0, 1, 0).tolist() == [[True]]
    assert bigbird_mask(4, 0, 4, 0).all()  # every position global: full attention


def test_a_hidden_key_drawn_at_exactly_zero_is_still_a_random_key(monkeypatch):
    # torch.rand draws in [0, 1): 0.0 is a draw like any other
    zeros = _TorchWith(rand=lambda *shape, generator=None: torch.zeros(*shape))
    monkeypatch.setattr(efficient, "torch", zeros)
    mask = bigbird_mask(8, 0, 1, 2)
    fixed = sliding_window_mask(8, 0)
    fixed[:, 0] = True
    assert (mask & ~fixed)[1:].sum(1).tolist() == [2] * 7


# ---------------------------------------------------- plugging a variant in the model --


def test_pattern_messages_say_what_came():
    attention = MultiHeadAttention(8, 2)
    with raises(
        "pattern must be a square bool (T, T) mask, True = may attend (e.g. "
        "sliding_window_mask(T, window)), got a torch.float32 tensor of shape (3, 3)"
    ):
        PatternAttention(attention, torch.ones(3, 3))
    wrapped = PatternAttention(attention, sliding_window_mask(4, 1))
    query, key = torch.randn(1, 5, 8), torch.randn(1, 6, 8)
    with raises(
        "the pattern covers 4 positions, the input has T_q=5, T_k=6: build the pattern for "
        "the longest sequence"
    ):
        wrapped(query, key, key)


def test_a_pattern_as_long_as_the_input_or_of_one_position_is_enough():
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    pattern = sliding_window_mask(5, 1)
    assert torch.equal(PatternAttention(attention, pattern)(x, x, x), attention(x, x, x, pattern))
    one = torch.ones(1, 1, dtype=torch.bool)
    x = x[:, :1]
    assert torch.equal(PatternAttention(attention, one)(x, x, x), attention(x, x, x))
    with pytest.raises(ValueError, match="square bool"):
        PatternAttention(attention, torch.ones(0, 0, dtype=torch.bool))


def test_pattern_attention_repr_says_how_much_is_allowed():
    wrapped = PatternAttention(MultiHeadAttention(8, 2), sliding_window_mask(4, 0))
    assert wrapped.extra_repr() == "pattern=(4, 4), 25% of the scores allowed"


def test_plugging_messages_name_the_module_that_came():
    call = SelfAttentionCall(LinformerSelfAttention(8, 2, seq_len=4, k=2))
    x = torch.randn(1, 4, 8)
    with raises(
        "LinformerSelfAttention is self-attention: query, key and value must be the same "
        "tensor x (as EncoderLayer passes them), got different tensors"
    ):
        call(x, x, x.clone())
    with raises(
        "replace_encoder_attention needs a course.transformer.Transformer (encoder_layers, "
        "each with a self_attn), got MultiHeadAttention"
    ):
        replace_encoder_attention(MultiHeadAttention(8, 2), lambda a: a)
