"""course.transformer, the behaviour its mutation run found unpinned: what each error
message says came (sizes, pad_id, empty batches, memory, a list for src or tgt), encode
building its own padding mask, from_torch's defaults and its refusals (an output layer
without a bias, source and output tied but not the target, layer stacks of different
depth), the repr, and parameter_counts' groups one by one.
"""

import pytest
import torch
from torch import nn

from course.masking import padding_mask
from course.transformer import (
    PAPER_BASE,
    PAPER_BIG,
    Transformer,
    load_transformer,
    parameter_counts,
)

SRC_VOCAB, TGT_VOCAB, D_MODEL, H, D_FF, PAD = 11, 13, 12, 2, 20, 0
SRC = torch.tensor([[2, 7, 1, 8, 2, 8, 1], [8, 2, 8, 4, 0, 0, 0]])
TGT = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]])


def _small(**kwargs) -> Transformer:
    torch.manual_seed(0)
    return Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 1, D_FF, dropout=0.0, **kwargs).eval()


@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"src_vocab": 0}, "src_vocab must be a positive int, got 0"),
        ({"tgt_vocab": 2.0}, "tgt_vocab must be a positive int, got 2.0"),
        ({"max_len": 0}, "max_len must be a positive int, got 0"),
        ({"pad_id": 1.5}, "pad_id must be an int token id, got 1.5"),
        ({"pad_id": True}, "pad_id must be an int token id, got True"),
        ({"pad_id": 11}, r"pad_id must be a token id of both vocabularies, 0 \.\. 10, got 11"),
        ({"pad_id": -1}, r"pad_id must be a token id of both vocabularies, 0 \.\. 10, got -1"),
    ],
)
def test_bad_settings_name_what_came(kwargs, said):
    settings = dict(src_vocab=SRC_VOCAB, tgt_vocab=TGT_VOCAB, d_model=D_MODEL, n_heads=H,
                    n_layers=1, d_ff=D_FF) | kwargs  # fmt: skip
    with pytest.raises(ValueError, match=f"^{said}$"):
        Transformer(**settings)


def test_the_last_id_of_the_smaller_vocabulary_can_pad():
    assert _small(pad_id=SRC_VOCAB - 1).pad_id == SRC_VOCAB - 1


def test_bad_tokens_and_memory_name_what_came():
    model = _small()
    with pytest.raises(ValueError, match=r"^src is empty: shape \(0, 3\)$"):
        model.encode(torch.zeros(0, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^tgt is empty: shape \(2, 0\)$"):
        model(SRC, torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(
        ValueError, match=r"^src must be a \(B, T\) integer tensor of token ids, got list"
    ):
        model([[1, 2]], TGT)
    with pytest.raises(
        ValueError, match=r"^tgt must be a \(B, T\) integer tensor of token ids, got list"
    ):
        model(SRC, [[1, 2]])
    with pytest.raises(
        ValueError,
        match=r"^memory must be the encoder's output \(B, T_src, d_model=12\), "
        r"got a torch.float32 tensor of shape \(2, 3, 8\)$",
    ):
        model.decode(TGT, torch.zeros(2, 3, 8))


def test_encode_builds_the_padding_mask_itself():
    model = _small()
    with torch.no_grad():
        own = model.encode(SRC)
        assert torch.equal(own, model.encode(SRC, padding_mask(SRC, PAD)))
        everything = torch.ones(1, 1, 1, SRC.shape[1], dtype=torch.bool)  # pads seen too
        assert not torch.allclose(own[1], model.encode(SRC, everything)[1])


def test_the_repr_says_every_setting():
    model = _small(norm_first=True, pad_id=3)
    assert (
        "src_vocab=11, tgt_vocab=13, pad_id=3, norm_first=True, tie_embeddings=False, "
        "positions='sinusoidal'"
    ) in repr(model)


def _torch_parts(bias: bool = True):
    theirs = nn.Transformer(D_MODEL, H, 1, 1, D_FF, dropout=0.0, batch_first=True)
    theirs.encoder.norm = theirs.decoder.norm = None  # post-LN, as the paper
    src, tgt = nn.Embedding(SRC_VOCAB, D_MODEL), nn.Embedding(TGT_VOCAB, D_MODEL)
    return theirs, src, tgt, nn.Linear(D_MODEL, TGT_VOCAB, bias=bias)


def test_from_torch_defaults():
    ours = Transformer.from_torch(*_torch_parts())
    assert ours.max_len == 5000 and ours.pad_id == 0
    assert ours.pos.max_len == 5000


def test_from_torch_refuses_an_output_without_bias_and_half_tied_weights():
    theirs, src, tgt, out = _torch_parts(bias=False)
    with pytest.raises(
        ValueError,
        match=r"^shapes differ: ours \(13,\), given None: build both with the same "
        r"vocabularies and d_model \(and out with a bias\)$",
    ):
        Transformer.from_torch(theirs, src, tgt, out)
    theirs, src, _, _ = _torch_parts()
    tgt, out = nn.Embedding(SRC_VOCAB, D_MODEL), nn.Linear(D_MODEL, SRC_VOCAB)
    out.weight = src.weight  # source and output tied, target not
    with pytest.raises(ValueError, match="some but not all of src_embedding, tgt_embedding"):
        Transformer.from_torch(theirs, src, tgt, out)


@pytest.mark.parametrize("encoder_layers, decoder_layers", [(2, 1), (1, 2)])
def test_load_transformer_refuses_stacks_of_another_depth(encoder_layers, decoder_layers):
    """Ours has one layer of each; theirs one more encoder, or one more decoder layer."""
    _, src, tgt, out = _torch_parts()
    theirs = nn.Transformer(
        D_MODEL, H, encoder_layers, decoder_layers, D_FF, dropout=0.0, batch_first=True
    )
    theirs.encoder.norm = theirs.decoder.norm = None
    with pytest.raises(ValueError, match="zip"):  # not a partial copy
        load_transformer(_small(), theirs, src, tgt, out)


def test_parameter_counts_group_by_group():
    d, ff, v_src, v_tgt = D_MODEL, D_FF, SRC_VOCAB, TGT_VOCAB
    attention, feed_forward, norm = 4 * d * d + 4 * d, 2 * d * ff + ff + d, 2 * d
    counts = parameter_counts(
        Transformer(v_src, v_tgt, d, H, 2, ff, norm_first=True)  # two layers, final norms
    )
    assert counts == {
        "source embedding": v_src * d,
        "target embedding": v_tgt * d,
        "output projection": v_tgt * d + v_tgt,
        "encoder self-attention": 2 * attention,
        "encoder feed-forward": 2 * feed_forward,
        "encoder LayerNorms": 2 * 2 * norm,
        "decoder self-attention": 2 * attention,
        "decoder cross-attention": 2 * attention,
        "decoder feed-forward": 2 * feed_forward,
        "decoder LayerNorms": 2 * 3 * norm,
        "final LayerNorms": 2 * norm,
    }
    assert parameter_counts(_small())["final LayerNorms"] == 0  # post-LN has none


def test_rotary_positions_use_lesson_05s_base():
    model = _small(positions="rotary")
    assert model.encoder_layers[0].self_attn.rotary_base == 10000.0


def test_the_papers_two_configurations_are_table_3s():
    """Vaswani et al. 2017, Table 3: base and big (P_drop 0.3 for English-German)."""
    assert PAPER_BASE == dict(d_model=512, n_heads=8, n_layers=6, d_ff=2048, dropout=0.1)
    assert PAPER_BIG == dict(d_model=1024, n_heads=16, n_layers=6, d_ff=4096, dropout=0.3)


def test_fused_is_off_by_default_and_reaches_every_attention_when_on():
    """fused=False keeps every layer's weights for lessons 08-09's plots; fused=True runs
    all of them, encoder and decoder, on PyTorch's kernel and says so in the repr."""
    src = torch.tensor([[3, 4, 5, PAD], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 4, 5], [1, 6, PAD]])
    for fused in (False, True):
        kwargs = {"fused": True} if fused else {}
        model = Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 2, D_FF, **kwargs).eval()
        model(src, tgt)
        attentions = [layer.self_attn for layer in model.encoder_layers] + [
            a for layer in model.decoder_layers for a in (layer.self_attn, layer.cross_attn)
        ]
        assert model.fused is fused
        assert all(a.fused is fused for a in attentions)
        assert all((a.attn is None) is fused for a in attentions)
        settings = model.extra_repr()  # the first line of repr(model)
        assert settings.endswith("positions='sinusoidal', fused=True" if fused else "'sinusoidal'")
    with pytest.raises(ValueError, match="^fused must be True or False, got 'yes'$"):
        Transformer(SRC_VOCAB, TGT_VOCAB, D_MODEL, H, 2, D_FF, fused="yes")
