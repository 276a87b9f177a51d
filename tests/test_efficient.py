"""course.efficient: the KV cache, attention's cost, Linformer and sparse masks (lesson 10)."""

import math

import pytest
import torch
import torch.nn.functional as F

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
    sdpa,
    sliding_window_mask,
    sparse_encoder,
    speedup,
)
from course.masking import causal_mask, padding_mask
from course.multihead import MultiHeadAttention
from course.positional import apply_rotary
from course.transformer import Transformer

# Tiny models are all overhead: one thread is faster, and deaf to a loaded machine.
pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------- kv_cache_attention --


def test_kv_cache_attention_equals_the_last_row_of_causal_attention():
    torch.manual_seed(0)
    B, h, T, d_k = 2, 3, 6, 4
    q, k, v = (torch.randn(B, h, T, d_k, dtype=torch.float64) for _ in range(3))
    full, _ = scaled_dot_product_attention(q, k, v, causal_mask(T))  # (B, h, T, d_k)
    k_cache = v_cache = None
    for t in range(T):
        out, k_cache, v_cache = kv_cache_attention(
            q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], k_cache, v_cache
        )
        assert out.shape == (B, h, 1, d_k)
        assert torch.allclose(out, full[:, :, t : t + 1], atol=1e-12)
    assert torch.equal(k_cache, k) and torch.equal(v_cache, v)


def test_kv_cache_attention_with_rotary_matches_rotated_causal_attention():
    torch.manual_seed(1)
    B, h, T, d_k = 2, 2, 5, 6
    q, k, v = (torch.randn(B, h, T, d_k, dtype=torch.float64) for _ in range(3))
    qr, kr = apply_rotary(q, 10000.0), apply_rotary(k, 10000.0)
    full, _ = scaled_dot_product_attention(qr, kr, v, causal_mask(T))
    k_cache = v_cache = None
    for t in range(T):
        step = slice(t, t + 1)
        out, k_cache, v_cache = kv_cache_attention(
            q[:, :, step], k[:, :, step], v[:, :, step], k_cache, v_cache, None, 10000.0
        )
        assert torch.allclose(out, full[:, :, step], atol=1e-12)
    assert torch.allclose(k_cache, kr, atol=1e-12)  # the cache holds rotated keys


def test_kv_cache_attention_leaves_the_cache_alone_and_applies_the_mask():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 1, 4) for _ in range(3))
    k_cache, v_cache = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    before = k_cache.clone(), v_cache.clone()
    mask = torch.tensor([True, False, True, True])[None, None, None, :]  # (1, 1, 1, 4)
    out, k_all, v_all = kv_cache_attention(q, k, v, k_cache, v_cache, mask)
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])
    want, _ = scaled_dot_product_attention(q, k_all, v_all, mask)
    assert torch.equal(out, want)


def test_kv_cache_attention_names_bad_input():
    q = torch.randn(2, 3, 1, 4)
    cache = torch.randn(2, 3, 5, 4)
    with pytest.raises(ValueError, match=r"q_new must be \(B, h, 1, d_k\)"):
        kv_cache_attention(torch.randn(2, 3, 2, 4), q, q, None, None)
    with pytest.raises(ValueError, match="both None"):
        kv_cache_attention(q, q, q, cache, None)
    with pytest.raises(ValueError, match="k_cache must be"):
        kv_cache_attention(q, q, q, torch.randn(2, 3, 5, 6), cache)
    with pytest.raises(ValueError, match="same t positions"):
        kv_cache_attention(q, q, q, cache, torch.randn(2, 3, 4, 4))
    with pytest.raises(ValueError, match="share"):
        kv_cache_attention(q, torch.randn(1, 3, 1, 4), q, None, None)


# ---------------------------------------------------------- cached greedy decode --


def _model(seed, norm_first=False, n_layers=2, positions="sinusoidal", vocab=12):
    torch.manual_seed(seed)
    return Transformer(vocab, vocab, d_model=16, n_heads=2, n_layers=n_layers, d_ff=32,
                       dropout=0.2, norm_first=norm_first, max_len=40,
                       positions=positions).eval()  # fmt: skip


def _source(seed, B=4, T=6, vocab=12):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(1, vocab, (B, T), generator=gen)  # (B, T)
    if B > 1:
        src[1, T - 2 :] = 0  # padding
    return src


CONFIGS = [
    (norm_first, n_layers, positions)
    for norm_first in (False, True)
    for n_layers in (1, 2, 3)
    for positions in ("sinusoidal", "rotary")
]


@pytest.mark.parametrize(("norm_first", "n_layers", "positions"), CONFIGS)
def test_cached_greedy_decode_equals_greedy_decode(norm_first, n_layers, positions):
    for seed in range(2):
        model = _model(seed, norm_first, n_layers, positions)
        for B in (4, 1):
            src = _source(seed, B)
            want = greedy_decode(model, src, 15, 1, 2)
            got = cached_greedy_decode(model, src, 15, 1, 2)
            assert got.dtype == torch.long and torch.equal(got, want)


def test_sentences_end_at_different_steps_and_the_result_still_matches():
    # eos_id chosen as a token the models write: outputs end at several steps
    ended = set()
    for seed in range(6):
        model = _model(seed, seed % 2 == 1)
        src = _source(seed, B=6)
        want = greedy_decode(model, src, 12, 1, 3)
        assert torch.equal(cached_greedy_decode(model, src, 12, 1, 3), want)
        is_eos = want == 3
        ended |= {int(row.nonzero()[0]) for row in is_eos if row.any()}
    assert len(ended) >= 3, ended  # <eos> came at three or more different steps


def _per_step_logits(model, src, steps, dtype):
    model = model.to(dtype)
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    cache = KVCache.start(model, memory, src_mask)
    gen = torch.Generator().manual_seed(0)
    prefix = torch.full((src.shape[0], 1), 1)  # <bos>
    worst = 0.0
    for _ in range(steps):
        cached = decode_step(model, prefix[:, -1], cache)  # (B, V)
        full = model.decode(prefix, memory, src_mask)[:, -1]  # (B, V)
        worst = max(worst, float((cached - full).abs().max()))
        # any next token, padding included, so masked keys are exercised too
        prefix = torch.cat([prefix, torch.randint(0, 12, (src.shape[0], 1), generator=gen)], 1)
    return worst


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_per_step_logits_match_recomputing_the_prefix(norm_first, positions):
    with torch.no_grad():
        model = _model(3, norm_first, 2, positions)
        assert _per_step_logits(model, _source(3), 10, torch.float32) < 1e-5
        model = _model(3, norm_first, 2, positions)
        assert _per_step_logits(model, _source(3), 10, torch.float64) < 1e-10


def test_cached_decoding_refuses_training_mode_and_bad_input():
    model = _model(0).train()
    with pytest.raises(ValueError, match="eval"):
        cached_greedy_decode(model, _source(0), 5, 1, 2)
    model.eval()
    with pytest.raises(ValueError, match="max_len"):
        cached_greedy_decode(model, _source(0), 0, 1, 2)
    with pytest.raises(ValueError, match="src"):
        cached_greedy_decode(model, _source(0).float(), 5, 1, 2)
    with pytest.raises(ValueError, match="Transformer"):
        cached_greedy_decode(torch.nn.Linear(2, 2).eval(), _source(0), 5, 1, 2)
    with pytest.raises(ValueError, match="max_len=40"):  # positions past the table
        cached_greedy_decode(model, _source(0), 60, 1, model.tgt_vocab)


def test_speedup_reports_both_timings_on_a_tiny_run():
    model, src = _model(0), _source(0)
    result = speedup(model, src, n_tokens=4, repeats=1)
    assert result["n_tokens"] == 4 and result["batch"] == 4
    assert result["recompute_s"] > 0 and result["cached_s"] > 0 and result["speedup"] > 0
    with pytest.raises(ValueError, match="eval"):
        speedup(model.train(), src, n_tokens=4)


# ------------------------------------------------------------ attention's cost --


def test_sdpa_equals_the_course_attention_with_a_boolean_mask():
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = causal_mask(5) & torch.tensor([True, True, False, True, True])
    want, _ = scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(sdpa(q, k, v, mask), want, atol=1e-6)


def test_attention_cost_rows():
    rows = attention_cost(None, [8, 16], d_k=4, batch=2, n_heads=2, repeats=1)
    assert [r["T"] for r in rows] == [8, 16]
    assert [r["weights_bytes"] for r in rows] == [2 * 2 * 8 * 8 * 4, 2 * 2 * 16 * 16 * 4]
    assert all(r["seconds"] > 0 and r["peak_bytes"] is None for r in rows)
    assert len(attention_cost(sdpa, [8], d_k=4, repeats=1)) == 1
    with pytest.raises(ValueError, match="T_values"):
        attention_cost(None, [8, 0])
    from_a_generator = attention_cost(None, (T for T in (8, 16)), d_k=4, repeats=1)
    assert [r["T"] for r in from_a_generator] == [8, 16]  # read twice: checked, then timed


# ------------------------------------------------------------------- Linformer --


def test_linformer_with_identity_projections_is_full_attention():
    torch.manual_seed(5)
    T, d_model, h = 7, 12, 3
    lin = LinformerSelfAttention(d_model, h, seq_len=T, k=T).double()
    full = MultiHeadAttention(d_model, h).double()
    with torch.no_grad():
        lin.E.copy_(torch.eye(T))
        lin.F.copy_(torch.eye(T))
        for name in ("w_q", "w_k", "w_v", "w_o"):
            getattr(full, name).load_state_dict(getattr(lin, name).state_dict())
    x = torch.randn(2, T, d_model, dtype=torch.float64)
    assert torch.equal(lin(x), full(x, x, x))


def test_linformer_shapes_short_sequences_and_padding():
    torch.manual_seed(6)
    lin = LinformerSelfAttention(16, 4, seq_len=20, k=5)
    x = torch.randn(3, 12, 16)
    out = lin(x)
    assert out.shape == (3, 12, 16) and lin.attn.shape == (3, 4, 12, 5)
    mask = torch.ones(3, 1, 1, 12, dtype=torch.bool)
    mask[0, ..., 8:] = False
    changed = x.clone()
    changed[0, 8:] = 100.0  # what the padding holds must not matter
    assert torch.allclose(lin(x, mask)[0, :8], lin(changed, mask)[0, :8], atol=1e-5)
    with pytest.raises(ValueError, match="seq_len=20"):
        lin(torch.randn(1, 21, 16))
    with pytest.raises(ValueError, match="d_model=16"):
        lin(torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="padding mask"):
        lin(x, mask.float())
    with pytest.raises(ValueError, match="k must be"):
        LinformerSelfAttention(16, 4, 20, 0)


# -------------------------------------------------------------- sparse masks --


def test_sliding_window_mask_is_a_band():
    mask = sliding_window_mask(7, 2)
    assert mask.shape == (7, 7) and mask.dtype == torch.bool
    i, j = torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij")
    assert torch.equal(mask, (i - j).abs() <= 2)
    assert torch.equal(sliding_window_mask(4, 0), torch.eye(4, dtype=torch.bool))
    assert mask.sum(1).tolist() == [3, 4, 5, 5, 5, 4, 3]
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="T must be"):
            sliding_window_mask(bad, 1)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, -1)


def test_bigbird_mask_structure_and_seed():
    T, window, n_global, n_random = 16, 1, 2, 3
    mask = bigbird_mask(T, window, n_global, n_random, torch.Generator().manual_seed(0))
    assert mask.shape == (T, T) and mask.dtype == torch.bool
    assert mask[:n_global].all() and mask[:, :n_global].all()  # global rows and columns
    band = sliding_window_mask(T, window)
    assert (mask | ~band).all()  # the window is inside
    fixed = band.clone()
    fixed[:, :n_global] = True
    extra = (mask & ~fixed)[n_global:].sum(1)  # random keys per non-global row
    assert (extra == n_random).all(), extra
    again = bigbird_mask(T, window, n_global, n_random, torch.Generator().manual_seed(0))
    other = bigbird_mask(T, window, n_global, n_random, torch.Generator().manual_seed(1))
    assert torch.equal(mask, again) and not torch.equal(mask, other)
    # more random keys than are hidden: all of them
    assert bigbird_mask(4, 1, 0, 10, torch.Generator().manual_seed(0)).all()
    with pytest.raises(ValueError, match="n_global"):
        bigbird_mask(4, 1, 5, 1)
    with pytest.raises(ValueError, match="generator"):
        bigbird_mask(4, 1, 1, 1, generator=3)


def test_sdpa_takes_our_sparse_masks():
    torch.manual_seed(7)
    q, k, v = (torch.randn(1, 2, 10, 4) for _ in range(3))
    mask = bigbird_mask(10, 1, 1, 2, torch.Generator().manual_seed(0))
    want, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(weights[..., ~mask], torch.zeros_like(weights[..., ~mask]))
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), want, atol=1e-6)
    assert math.isclose(float(weights.sum()), 20.0, rel_tol=1e-5)


# ------------------------------------------------- plugging a variant into the model --


def _translation_model(seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return Transformer(11, 13, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=dropout,
                       max_len=12)  # fmt: skip


def test_pattern_attention_equals_the_attention_given_pattern_and_mask():
    torch.manual_seed(8)
    attention = MultiHeadAttention(12, 3).double()
    pattern = bigbird_mask(9, 1, 1, 2, torch.Generator().manual_seed(0))
    wrapped = PatternAttention(attention, pattern)
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    padding = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    padding[1, ..., 5:] = False
    want = attention(x, x, x, padding & pattern[:7, :7])
    assert torch.equal(wrapped(x, x, x, padding), want)
    assert torch.equal(wrapped.attn, attention.attn)
    assert (wrapped.attn[..., ~pattern[:7, :7]] == 0).all()
    assert torch.equal(wrapped(x, x, x), attention(x, x, x, pattern[:7, :7]))  # no mask
    full = PatternAttention(attention, torch.ones(9, 9, dtype=torch.bool))
    assert torch.equal(full(x, x, x, padding), attention(x, x, x, padding))
    assert "pattern=(9, 9)" in repr(wrapped)


def test_sparse_encoder_changes_only_the_encoder_and_keeps_the_weights():
    model = _translation_model()
    src = torch.tensor([[3, 4, 5, 6, 7, 2], [5, 6, 2, 0, 0, 0]])  # (2, 6), padded
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 0]])  # (2, 4)
    state = {name: p.clone() for name, p in model.state_dict().items()}
    want_all = model(src, tgt)
    assert sparse_encoder(model, torch.ones(12, 12, dtype=torch.bool)) is model
    assert all(isinstance(layer.self_attn, PatternAttention) for layer in model.encoder_layers)
    assert all(isinstance(layer.self_attn, MultiHeadAttention) for layer in model.decoder_layers)
    renamed = {name.replace("self_attn.attention.", "self_attn."): p
               for name, p in model.state_dict().items()}  # fmt: skip
    assert renamed.keys() == state.keys()
    assert all(torch.equal(renamed[name], p) for name, p in state.items())
    assert torch.equal(model(src, tgt), want_all)  # an all-True pattern changes nothing

    window = _translation_model()
    sparse_encoder(window, sliding_window_mask(12, 1))
    plain = _translation_model()
    mask = padding_mask(src, 0) & sliding_window_mask(6, 1)  # (2, 1, 6, 6)
    memory = plain.pos(plain.src_embed(src))  # (2, 6, 16)
    for layer in plain.encoder_layers:
        memory = layer(memory, mask)  # (2, 6, 16)
    assert torch.allclose(window.encode(src), memory, atol=1e-6)
    with pytest.raises(ValueError, match="covers 4 positions"):
        sparse_encoder(_translation_model(), sliding_window_mask(4, 1)).encode(src)


def test_linformer_encoder_trains_and_refuses_cross_attention():
    model = linformer_encoder(_translation_model(dropout=0.1), k=3)
    attentions = [layer.self_attn for layer in model.encoder_layers]
    assert all(isinstance(a, SelfAttentionCall) for a in attentions)
    assert all(isinstance(a.attention, LinformerSelfAttention) for a in attentions)
    first = attentions[0].attention
    assert (first.seq_len, first.k, first.n_heads, first.dropout) == (12, 3, 2, 0.1)
    src = torch.tensor([[3, 4, 5, 6, 7, 2], [5, 6, 2, 0, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6], [1, 7, 8, 0]])
    model(src, tgt).sum().backward()
    for a in attentions:
        assert a.attention.E.grad is not None and a.attention.E.grad.abs().sum() > 0
    assert attentions[0].attn.shape == (2, 2, 6, 3)  # (B, h, T, k)
    model.eval()
    changed = src.clone()
    changed[1, 3:] = 9  # what stands in the padding must not matter...
    same = model.encode(changed, padding_mask(src, 0))
    assert torch.allclose(model.encode(src)[1, :3], same[1, :3], atol=1e-5)
    x = torch.randn(1, 4, 16)
    with pytest.raises(ValueError, match="same tensor"):
        attentions[0](x, torch.randn(1, 4, 16), x)


def test_plugging_helpers_name_bad_input():
    attention = MultiHeadAttention(8, 2)
    for bad in (torch.ones(3, 3), torch.ones(3, 4, dtype=torch.bool), "window", None):
        with pytest.raises(ValueError, match="square bool"):
            PatternAttention(attention, bad)
    with pytest.raises(ValueError, match="square bool"):
        sparse_encoder(_translation_model(), torch.ones(2, 2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="encoder_layers"):
        replace_encoder_attention(attention, lambda a: a)
    with pytest.raises(ValueError, match="k must be"):
        linformer_encoder(_translation_model(), k=0)
