"""Lesson 08's assembly checker: the structure of the learner's model, named in full.

Before any value is compared, check.EncoderDecoder looks at the parts: the embedding
tables and their sizes, the output layer, the two nn.ModuleList of layers (how many,
at which rate), and the parameters against the course's model, name by name and shape
by shape. Each wrong answer below is one a learner writes (the names of PyTorch's
translation tutorial, the Annotated Transformer's Sequential, the paper's 6 layers or
d_ff = 4 * d_model hard-coded, torch's own attention, a plain Python list of layers);
each test reads the whole diagnosis as the learner reads it: which attribute, the sizes
found and the sizes expected. tools/mutation.py showed these messages unread (issue 32).
The checker's sizes: d_model=12, n_layers=2, d_ff=20, src_vocab=13 and tgt_vocab=11
(untied, the first case), dropout=0.1.
"""

import re

import pytest
import test_check_assembly as answers
import torch.nn.functional as F
from torch import nn

from course import check
from course.layers import DecoderLayer, EncoderLayer, LayerNorm
from course.multihead import MultiHeadAttention
from course.positional import PositionalEncoding

# ------------------------------------------------------------- the embeddings ----------


class TutorialNames(answers.Good):
    """The names of PyTorch's translation tutorial, src_tok_emb and tgt_tok_emb."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.src_tok_emb, self.tgt_tok_emb = self.src_embed, self.tgt_embed
        del self.src_embed, self.tgt_embed


class AnnotatedTargetEmbedding(answers.Good):
    """The Annotated Transformer's nn.Sequential(embedding, positions) for the target:
    no table the checker can find as tgt_embed or tgt_embed.embedding."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.tgt_embed = nn.Sequential(
            nn.Embedding(tgt_vocab, d_model), PositionalEncoding(d_model, 40, 0.1)
        )


class EmbeddingArgumentsSwapped(answers.Good):
    """nn.Embedding(d_model, vocab): the two sizes in the wrong order."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.src_embed = nn.Embedding(d_model, src_vocab)


class VocabulariesSwapped(answers.Good):
    """src_embed over the target's vocabulary, tgt_embed over the source's."""

    def __init__(self, src_vocab, tgt_vocab, *args, **kwargs):
        super().__init__(tgt_vocab, src_vocab, *args, **kwargs)
        self.out = nn.Linear(self.d_model, tgt_vocab)


NO_TABLE = (
    "your model has no embedding table `{name}`: self.{name} = nn.Embedding(vocab, d_model). "
    "The names matter: the checker copies its weights into them"
)

TABLES = {
    TutorialNames: NO_TABLE.format(name="src_embed"),
    AnnotatedTargetEmbedding: NO_TABLE.format(name="tgt_embed"),
    EmbeddingArgumentsSwapped: "self.src_embed is a (12, 13) table; expected (13, d_model=12): "
    "one row per token of its vocabulary (src_vocab for the source, tgt_vocab for the target)",
    VocabulariesSwapped: "self.src_embed is a (11, 12) table; expected (13, d_model=12): one row "
    "per token of its vocabulary (src_vocab for the source, tgt_vocab for the target)",
}


@pytest.mark.parametrize("answer", TABLES, ids=[a.__name__ for a in TABLES])
def test_an_embedding_table_missing_or_of_the_wrong_size_is_named(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert TABLES[answer] in printed, printed


# ------------------------------------------------------------- the output layer ----------


class OutputArgumentsSwapped(answers.Good):
    """nn.Linear(tgt_vocab, d_model): from the vocabulary to the model's width."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.out = nn.Linear(tgt_vocab, d_model)


class OutputWithoutBias(answers.Good):
    """bias=False, as GPT-2's lm_head: the course's model keeps the bias."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.out = nn.Linear(d_model, tgt_vocab, bias=False)


OUTPUTS = {
    OutputArgumentsSwapped: "self.out should be nn.Linear(d_model, tgt_vocab) = nn.Linear(12, "
    "11), the scores over the target vocabulary; found Linear(in_features=11, out_features=12, "
    "bias=True)",
    OutputWithoutBias: "self.out has no bias: nn.Linear(d_model, tgt_vocab) keeps its bias",
}


@pytest.mark.parametrize("answer", OUTPUTS, ids=[a.__name__ for a in OUTPUTS])
def test_an_output_layer_of_the_wrong_shape_or_without_bias_is_named(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert OUTPUTS[answer] in printed, printed


# ---------------------------------------------------------------- the stacks ----------


class LayersInAPythonList(answers.Good):
    """A plain list: its layers are no submodules (not trained, not moved, not saved)."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = [EncoderLayer(*args) for _ in range(n_layers)]  # <- a list
        self.decoder_layers = nn.ModuleList([DecoderLayer(*args) for _ in range(n_layers)])
        self.encoder_norm = LayerNorm(d_model) if norm_first else None
        self.decoder_norm = LayerNorm(d_model) if norm_first else None


class DecoderLayersInASequential(answers.Good):
    """nn.Sequential for the decoder layers, walked in a loop (it cannot pass the memory)."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.decoder_layers = nn.Sequential(*(DecoderLayer(*args) for _ in range(n_layers)))


class PapersSixLayers(answers.Good):
    """The paper's N = 6 encoder layers, whatever n_layers asks."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList([EncoderLayer(*args) for _ in range(6)])


NO_LIST = (
    "your model has no nn.ModuleList `{name}`: self.{name} = nn.ModuleList([reference.{kind}("
    "d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)]), the course's "
    "layers (from course import layers as reference)"
)

STACKS = {
    LayersInAPythonList: NO_LIST.format(name="encoder_layers", kind="EncoderLayer"),
    DecoderLayersInASequential: NO_LIST.format(name="decoder_layers", kind="DecoderLayer"),
    PapersSixLayers: "self.encoder_layers holds 6 layers, but n_layers=2 was asked: one "
    "reference.EncoderLayer per layer, n_layers of them",
}


@pytest.mark.parametrize("answer", STACKS, ids=[a.__name__ for a in STACKS])
def test_a_stack_not_in_a_module_list_or_of_the_wrong_depth_is_named(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert STACKS[answer] in printed, printed


class AttentionWithoutItsRate(EncoderLayer):
    """A layer of the learner's own (the course's names) whose attention is built without
    the rate, MultiHeadAttention(d_model, n_heads): its weights are never dropped, though
    the sublayers' outputs are."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads)


class OwnLayersAttentionNotDropped(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList([AttentionWithoutItsRate(*args) for _ in range(2)])


def test_attention_built_without_the_rate_is_seen_in_its_layer(verdict):
    """The attention's rate is a float on the course's MultiHeadAttention, not an
    nn.Dropout: the checker reads it there too."""
    passed, printed = verdict(check.EncoderDecoder, OwnLayersAttentionNotDropped)
    assert passed is False
    assert (
        "self.encoder_layers[0] drops at rate 0.0, but dropout=0.1 was asked: pass dropout on "
        "to every layer, reference.EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first)"
    ) in printed, printed


# ------------------------------------------------------------ the parameters ----------


class TorchAttentionLayer(EncoderLayer):
    """A layer of the learner's own with torch's nn.MultiheadAttention (its default
    dropout=0.0): its parameters are torch's in_proj_weight, out_proj, not w_q, ..., w_o."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first)
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)

    def _attend(self, x, mask):
        padding = None if mask is None else ~mask[:, 0, 0, :]  # torch: True = masked out
        return self.dropout1(self.self_attn(x, x, x, key_padding_mask=padding)[0])


class TorchAttention(answers.Good):
    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        args = (d_model, n_heads, d_ff, dropout, norm_first)
        self.encoder_layers = nn.ModuleList([TorchAttentionLayer(*args) for _ in range(2)])


class GeneratorLeftOver(answers.Good):
    """The Annotated Transformer's Generator kept beside self.out, never used."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, *args, **kwargs):
        super().__init__(src_vocab, tgt_vocab, d_model, *args, **kwargs)
        self.generator = nn.Linear(d_model, tgt_vocab)


class FeedForwardFourTimesWider(answers.Good):
    """d_ff = 4 * d_model, the paper's ratio, instead of the d_ff asked."""

    def build(self, d_model, n_heads, n_layers, d_ff, dropout, norm_first):
        super().build(d_model, n_heads, n_layers, 4 * d_model, dropout, norm_first)


EXTRA = (
    "your model has parameters the course's model does not: {}. The model is embeddings, "
    "the two stacks of layers, the final norms in pre-LN only, and self.out; use the "
    "course's names"
)

PARAMETERS = {
    # four named (the first four of many), not only the first
    TorchAttention: EXTRA.format(
        "encoder_layers.0.self_attn.in_proj_weight, encoder_layers.0.self_attn.in_proj_bias, "
        "encoder_layers.0.self_attn.out_proj.weight, encoder_layers.0.self_attn.out_proj.bias"
    ),
    GeneratorLeftOver: EXTRA.format("generator.weight, generator.bias"),
    FeedForwardFourTimesWider: "your parameter encoder_layers.0.ff.linear1.weight has shape "
    "(48, 12), expected (20, 12)",
}


@pytest.mark.parametrize("answer", PARAMETERS, ids=[a.__name__ for a in PARAMETERS])
def test_parameters_not_the_courses_are_named_with_their_shapes(answer, verdict):
    passed, printed = verdict(check.EncoderDecoder, answer)
    assert passed is False and printed.startswith("❌ EncoderDecoder: "), printed
    assert PARAMETERS[answer] in printed, printed


# ------------------------------------------------------ the dropout checks' model ----------


class DropoutRateHardCoded(answers.Good):
    def embed(self, table, tokens):
        x = table(tokens) * self.d_model**0.5 + self.pe[: tokens.shape[1]]
        return F.dropout(x, 0.1, self.training)  # the constructor's rate not used


def test_the_dropout_checks_judge_the_untied_model_with_two_vocabularies(verdict):
    """The training-mode checks build the lesson's usual model, untied with src_vocab and
    tgt_vocab apart as in the first case, at dropout=0.0; the verdict shows it as a call a
    learner can paste."""
    passed, printed = verdict(check.EncoderDecoder, DropoutRateHardCoded)
    assert passed is False
    shown = re.search(
        r"EncoderDecoder\((\d+), (\d+), 12, 3, 2, 20, 0\.0, False, max_len=40, pad_id=0, "
        r"tie_embeddings=False\) in training mode changes the output although dropout=0\.0: "
        r"pass the constructor's dropout on to self\.dropout and every layer, not a fixed rate",
        printed,
    )
    assert shown, printed
    assert shown[1] != shown[2], printed
