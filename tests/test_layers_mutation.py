"""course.layers, the behaviour its mutation run found unpinned: LayerNorm on a single
vector and on d_model = 1, what its errors say for a 0-d tensor and a bool size; torch
encoder layers built with nn.ReLU() (a module, not F.relu) are loaded; a layer missing only one
kind of bias is refused.
"""

import pytest
import torch
from _layer_helpers import _gen, _randomize
from torch import nn

from course.layers import DecoderLayer, EncoderLayer, LayerNorm

D_MODEL, H, D_FF = 12, 2, 20


def test_layer_norm_of_one_vector_and_of_one_feature():
    norm = _randomize(LayerNorm(D_MODEL))
    theirs = nn.LayerNorm(D_MODEL)
    with torch.no_grad():
        theirs.weight.copy_(norm.weight)
        theirs.bias.copy_(norm.bias)
    x = torch.randn(D_MODEL, generator=_gen())  # (d_model,): no batch, no time
    assert torch.allclose(norm(x), theirs(x), atol=1e-6)
    single = _randomize(LayerNorm(1))  # one feature: x - mean is 0, the output is the bias
    assert single.weight.shape == (1,)
    assert torch.equal(single(torch.randn(3, 1, generator=_gen())), single.bias.expand(3, 1))


def test_layer_norm_errors_say_what_came():
    with pytest.raises(
        ValueError, match=r"^LayerNorm expects x of shape \(\.\.\., d_model=12\), got \(\)$"
    ):
        LayerNorm(D_MODEL)(torch.tensor(1.0))
    with pytest.raises(ValueError, match="d_model must be a positive int, got True"):
        LayerNorm(True)


def test_a_layer_with_a_relu_module_is_loaded():
    """activation=nn.ReLU() (a module, not the string or F.relu) is ReLU too: both layers
    load it, and nn.GELU() is still refused."""
    x = torch.randn(2, 5, D_MODEL, generator=_gen(1))
    memory = torch.randn(2, 3, D_MODEL, generator=_gen(2))
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, H, D_FF, dropout=0.0, activation=nn.ReLU(), batch_first=True
    )
    theirs = _randomize(theirs)
    with torch.no_grad():
        assert torch.allclose(EncoderLayer.from_torch(theirs)(x), theirs.train()(x), atol=1e-5)
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, H, D_FF, dropout=0.0, activation=nn.ReLU(), batch_first=True
    )
    theirs = _randomize(theirs)
    with torch.no_grad():
        ours = DecoderLayer.from_torch(theirs)(x, memory)
        assert torch.allclose(ours, theirs.train()(x, memory), atol=1e-5)
    for layer, torchs in [(EncoderLayer, nn.TransformerEncoderLayer),
                          (DecoderLayer, nn.TransformerDecoderLayer)]:  # fmt: skip
        gelu = torchs(D_MODEL, H, D_FF, activation=nn.GELU(), batch_first=True)
        with pytest.raises(ValueError, match="ReLU activation"):
            layer.from_torch(gelu)


@pytest.mark.parametrize("missing", ["norm1", "linear1"])
def test_a_layer_missing_one_bias_is_refused(missing):
    theirs = nn.TransformerEncoderLayer(D_MODEL, H, D_FF, batch_first=True)
    getattr(theirs, missing).bias = None
    with pytest.raises(ValueError, match="only layers with bias=True are supported"):
        EncoderLayer.from_torch(theirs)


@pytest.mark.parametrize("layer", [EncoderLayer, DecoderLayer])
def test_a_layer_checks_its_dropout_before_building_its_parts(layer):
    """A bad rate and a bad head count at once: the layer names its own argument first,
    not an error from inside the attention it was about to build."""
    with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\), got 1.0$"):
        layer(D_MODEL, 5, D_FF, dropout=1.0)


def test_the_layers_keep_their_attention_weights_by_default():
    """fused defaults to False: lessons 07-09 plot `.attn` after a forward pass."""
    x = torch.randn(2, 5, D_MODEL, generator=_gen(3))
    memory = torch.randn(2, 3, D_MODEL, generator=_gen(4))
    encoder, decoder = EncoderLayer(D_MODEL, H, D_FF), DecoderLayer(D_MODEL, H, D_FF)
    encoder(x)
    decoder(x, memory)
    for attention in (encoder.self_attn, decoder.self_attn, decoder.cross_attn):
        assert attention.fused is False
        assert attention.attn is not None
