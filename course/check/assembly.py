"""The checker of lesson 08's assembly exercise, `EncoderDecoder`: the whole model.

The learner's class is built as the lesson states, `EncoderDecoder(src_vocab, tgt_vocab,
d_model, n_heads, n_layers, d_ff, dropout, norm_first, max_len=..., pad_id=...,
tie_embeddings=...)`, and compared with `course.transformer.Transformer` built alike, given
the same random weights. Its parameters are found by the course's names: `src_embed`,
`tgt_embed` (an nn.Embedding each, or a module holding one as `.embedding`, as the
course's TokenEmbedding does), `encoder_layers`, `decoder_layers` (nn.ModuleList of the
course's layers, or layers with their names), `encoder_norm`, `decoder_norm` (a LayerNorm
in pre-LN, None in post-LN) and `out`.

Structure first, each with its own diagnosis: the parts and their sizes, the layers built
with the rate and the arrangement asked, one module per layer, the final norms exactly in
pre-LN, the three matrices tied exactly when asked, the position table a buffer.

Then values and gradients (every parameter) in eval mode: post-LN and pre-LN, tied and
untied, padding in the source and the target, pad_id 0 and not 0 (with real tokens of id
0), T_src = T_tgt first (so that a target mask given to the cross-attention gives numbers
the checker can name instead of a crash), then T_src != T_tgt, and a batch of one in
float64. The usual mistakes are computed from the reference's own parts and named. A
mistake seen in eval mode only (the model right in training mode at dropout=0.0: masks
built `if self.training`) says so; logits wrong only at padded target positions name the
target's padding put on the query axis; a detached memory is told from detached
embeddings by which parameters get no gradient.

Where the class has `encode` and `decode` (the lesson's skeleton does), they are judged as
lesson 09 calls them, on each case's batch in reverse order (nothing may be left over from
the forward just run): encode(src, src_mask) must give the memory, and decode(tgt,
memory, src_mask), given no target mask, the logits: decode builds decoder_mask itself.
A class with neither (everything in forward) is judged on forward only. A stub of a
class of the learner's own (their unfinished DecoderLayer) is named as such: the
exercise builds on the course's layers, reference.EncoderLayer and reference.DecoderLayer.

Dropout is judged where it belongs, exactly: with every layer replaced by one that
returns its input (and records what it was given), the first layer of each stack must
receive dropout(embedding * sqrt(d_model) + positions), each entry 0 or scaled by
1 / (1 - p); the decoder must receive the encoder's output untouched, and the output
layer the decoder's. Nothing is dropped in eval mode, nor at dropout=0.0; a model wrong in
training mode at dropout=0.0 the same way on every call (a final norm skipped while
training) is told that its forward depends on self.training, not that its rate is fixed.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from course import transformer as reference
from course.check._framework import (
    Mistake,
    NotImplementedYet,
    call,
    close,
    expect_close,
    expect_fresh_randomness,
    expect_gradients,
    expect_shape,
    generator,
    randn,
)
from course.check.layers import _a_class, _built, _expect_dropped, _init_hints, _one_tensor
from course.masking import causal_mask, padding_mask
from course.multihead import MultiHeadAttention

_D, _H, _FF, _N = 12, 3, 20, 2  # d_model, h, d_ff, n_layers: every size differs
_SRC_V, _TGT_V, _TIED_V = 13, 11, 14  # vocabularies: untied (two sizes), tied (one)
_MAX_LEN = 40
_SIGNATURE = (
    "EncoderDecoder(src_vocab, tgt_vocab, d_model=512, n_heads=8, n_layers=6, d_ff=2048, "
    "dropout=0.1, norm_first=False, max_len=5000, pad_id=0, tie_embeddings=False)"
)
_INIT_NAMES = ("src_vocab", "tgt_vocab", "d_model", "n_heads", "n_layers", "d_ff", "dropout",
               "norm_first")  # fmt: skip

# ------------------------------------------------------------- diagnoses ----------
# Named here so that tests can look for them.

NO_SCALE = (
    "the embeddings are not multiplied by sqrt(d_model): the paper scales each token's "
    "vector, embedding(tokens) * math.sqrt(d_model), before adding the positions"
)
SCALE_D_K = (
    "the embeddings are multiplied by sqrt(d_k) = sqrt(d_model / n_heads): the scale is "
    "sqrt(d_model), the width of the whole vector (sqrt(d_k) belongs to the attention scores)"
)
SCALE_D_MODEL = (
    "the embeddings are multiplied by d_model itself: the scale is its square root, "
    "math.sqrt(d_model)"
)
POSITIONS_SCALED = (
    "the positions are multiplied by sqrt(d_model) too, (embedding + positions) * "
    "sqrt(d_model): only the embedding is scaled, embedding(tokens) * sqrt(d_model) + pe[:T]"
)
NO_POSITIONS = (
    "no positions are added: attention is order-blind (lesson 05), so the model needs "
    "embedding(tokens) * sqrt(d_model) + self.pe[:T], for the source and the target"
)
POSITIONS_AFTER_DROPOUT = (
    "the positions are added after the dropout: dropout(embedding * sqrt(d_model)) + pe. "
    "The sum is dropped, dropout(embedding * sqrt(d_model) + pe[:T]), so that a dropped entry "
    "is 0 and the positions are no more reliable than the words"
)
NO_CAUSAL = (
    "the decoder's self-attention has no causal mask: every target position sees the words "
    "after it, the very words it is trained to predict. Its mask is causal & target padding, "
    "course.masking.decoder_mask(tgt, pad_id), shape (B, 1, T_tgt, T_tgt)"
)
NO_TGT_PADDING = (
    "the decoder's self-attention has the causal mask but not the target's padding: it is "
    "causal & padding, padding_mask(tgt, pad_id) & causal_mask(T_tgt) (decoder_mask)"
)
NO_DECODER_MASK = (
    "the decoder's self-attention gets no mask at all: it needs causal & target padding, "
    "course.masking.decoder_mask(tgt, pad_id)"
)
CAUSAL_ENCODER = (
    "the encoder is given a causal mask: the encoder reads the whole source at once, every "
    "word may attend to the words after it too. Its mask is the source's padding alone, "
    "padding_mask(src, pad_id); the causal mask belongs to the decoder's self-attention"
)
NO_SRC_PADDING_ENCODER = (
    "the encoder's self-attention ignores the source's padding: give every encoder layer "
    "src_mask = padding_mask(src, pad_id), (B, 1, 1, T_src)"
)
NO_SRC_PADDING = (
    "the source's padding is masked nowhere: the encoder's self-attention and the decoder's "
    "cross-attention both need src_mask = padding_mask(src, pad_id), (B, 1, 1, T_src)"
)
NO_CROSS_MASK = (
    "the cross-attention ignores the source's padding: every decoder layer gets "
    "memory_mask = padding_mask(src, pad_id), the same mask as the encoder, so that no target "
    "position reads the padded source positions of the memory"
)
TGT_AS_MEMORY_MASK = (
    "the cross-attention is given the target's {which}: its keys are the *source* positions "
    "(the memory), so its mask is the source's padding, padding_mask(src, pad_id) "
    "(B, 1, 1, T_src). The target's causal & padding mask is for the decoder's "
    "self-attention only"
)
_MASKS_NEEDED = (
    "the encoder and the cross-attention need the source's padding mask, "
    "padding_mask(src, pad_id); the decoder's self-attention causal & target padding, "
    "decoder_mask(tgt, pad_id)"
)
NO_PADDING_MASKS = "only the causal mask, the padding masked nowhere: " + _MASKS_NEEDED
NO_MASKS = "no masks at all: " + _MASKS_NEEDED
INVERTED_MASKS = (
    "the padding masks are inverted, True on the padding (tokens == pad_id): in the course's "
    "masks True marks a position that may be attended to, padding_mask(src, pad_id) = "
    "(src != pad_id)[:, None, None, :]"
)
PADDING_IDX = (
    "self.{name} = nn.Embedding(..., padding_idx={used}), but the model was built with "
    "pad_id={pad_id}: the padding row is pad_id's, padding_idx=pad_id (or no padding_idx)"
)
WRONG_PAD_ID = (
    "the masks are built from token id {used}, not from pad_id={pad_id}: use the pad_id the "
    "model was built with (self.pad_id = pad_id), padding_mask(src, self.pad_id)"
)
NO_ENCODER_NORM = (
    "in pre-LN (norm_first=True) the encoder's output is not normalised: pre-LN layers "
    "leave the residual stream as it is, so the stack ends with one LayerNorm, "
    "memory = self.encoder_norm(x) after the last encoder layer"
)
NO_DECODER_NORM = (
    "in pre-LN (norm_first=True) the decoder's output is not normalised before the output "
    "layer: self.out(self.decoder_norm(y)) after the last decoder layer"
)
NO_FINAL_NORMS = (
    "in pre-LN (norm_first=True) neither stack ends with its LayerNorm: memory = "
    "self.encoder_norm(x) after the last encoder layer, self.out(self.decoder_norm(y)) "
    "after the last decoder layer"
)
EXTRA_FINAL_NORM = (
    "in post-LN (norm_first=False) {which} is normalised once more at the end: each post-LN "
    "layer ends with its own LayerNorm already, so the paper's model has no final norm "
    "(self.encoder_norm = self.decoder_norm = None; torch.nn.Transformer adds them anyway)"
)
NORMS_SWAPPED = (
    "encoder_norm and decoder_norm are swapped: encoder_norm ends the encoder (on the "
    "memory), decoder_norm the decoder (before self.out)"
)
SOFTMAX = (
    "the model returns probabilities (a softmax over the vocabulary): it returns the "
    "logits, self.out(y), and leaves the softmax to the loss (F.cross_entropy takes logits)"
)
TGT_WITH_SRC_TABLE = (
    "the target is embedded with src_embed: the decoder's tokens are looked up in their own "
    "table, self.tgt_embed(tgt) (one matrix only when tie_embeddings=True)"
)
SRC_WITH_TGT_TABLE = (
    "the source is embedded with tgt_embed: the encoder's tokens are looked up in their own "
    "table, self.src_embed(src) (one matrix only when tie_embeddings=True)"
)
LAYERS_NOT_CHAINED = (
    "every {stack} layer reads the embeddings, and only the last one's output is kept: each "
    "layer reads the output of the one before it, x = layer(x, mask) in the loop"
)
MEMORY_DETACHED = (
    "the values are right, but the memory (the encoder's output) is detached before the "
    "decoder (memory.detach(), .data or torch.no_grad() around the encoder), so no gradient "
    "reaches the encoder's layers (nor the source embeddings): the encoder never learns. "
    "Keep the memory in the graph: the decoder's loss is what trains the encoder"
)
PADDED_ONLY = (
    "the logits are right at every real target position and differ from the course model's "
    "only at the target's padded positions: the target's padding is masked on the query "
    "axis (rows of the scores, padding_mask(tgt, pad_id).transpose(-1, -2) or a (B, 1, T_tgt, "
    "1) mask) instead of the key axis. Padding belongs on the key axis, (B, 1, 1, T_tgt): no "
    "position reads a padded one, while a padded position still reads the others. "
    "decoder_mask(tgt, pad_id) is padding_mask(tgt, pad_id) & causal_mask(T_tgt)"
)
PADDED_ONLY_UNNAMED = (
    "the logits are right at every real target position and differ from the course model's "
    "only at the target's padded positions: something there is computed otherwise (the "
    "padded tokens' embeddings zeroed or changed? the target's padding masked on the query "
    "axis?). A pad token is embedded like any other token, and padding is masked on the key "
    "axis only, decoder_mask(tgt, pad_id): the padded positions then get the course "
    "model's logits too"
)
TRAINING_MASKS = (
    "{shown} in training mode (at dropout=0.0) is right on sentences without padding, and in "
    "eval mode, but not on sentences with padding: your padding masks depend on "
    "self.training. The model trains on padded batches: build the masks the same way in "
    "both modes"
)
TRAINING_ONLY = (
    "{shown} in training mode gives wrong logits although dropout=0.0, the same on every "
    "call, while eval mode was right in every case: nothing random makes the difference, so "
    "your forward depends on self.training (a norm, a mask or a step run only `if "
    "self.training:`, or only when not training?). Only dropout may tell the two modes "
    "apart: compute everything else the same way in both"
)
SAME_DROPOUT_EVERY_CALL = (
    "two calls give the same output, though units are dropped: the same ones on every call. "
    "Is torch.manual_seed (or a generator of your own) called inside the model? Dropout "
    "draws fresh randomness from torch's global generator on every call"
)
EVAL_ONLY = (
    "{diagnosis}. This happens in eval mode only: in training mode (at dropout=0.0) your "
    "model gives the right logits, so your forward depends on self.training (a causal mask "
    "built only `if self.training:`?). The model decodes in eval mode (lesson 09): compute "
    "the logits, masks included, the same way in both modes"
)
_AS_LESSON_09 = (
    "decode(tgt, memory, src_mask), called as lesson 09 calls it (greedy decoding gives no "
    "target mask), runs the decoder's self-attention "
)
_BUILD_IT = (
    "forward may build the mask and pass it on, but decode must build it itself when it is "
    "given none: tgt_mask = decoder_mask(tgt, self.pad_id) inside decode, causal & padding"
)
DECODE_NO_CAUSAL = (
    _AS_LESSON_09
    + "without the causal mask: every target position sees the ones after it. "
    + _BUILD_IT
)
DECODE_NO_MASK = (
    _AS_LESSON_09 + "with no mask at all, neither causal nor the target's padding: every "
    "target position sees the ones after it. " + _BUILD_IT
)
DECODE_NO_TGT_PADDING = (
    _AS_LESSON_09 + "with the causal mask but not the target's padding. " + _BUILD_IT
)
DECODE_NO_CROSS_MASK = (
    "decode(tgt, memory, src_mask), called as lesson 09 calls it, ignores its src_mask: the "
    "cross-attention must hide the padded source positions of memory, so every decoder "
    "layer gets memory_mask=src_mask, the argument decode was given"
)
DECODE_STALE_MASK = (
    "decode(tgt, memory, src_mask) used a source mask left over from the last call of "
    "forward (kept on self?), not the src_mask it was given: lesson 09 calls encode and "
    "decode without forward, on other sentences. Use the arguments, never state kept "
    "between calls"
)
ENCODE_NO_NORM = (
    "encode(src, src_mask), called as lesson 09 calls it, returns the last encoder layer's "
    "output without encoder_norm (in pre-LN, forward may apply it, but lesson 09 uses "
    "encode alone): end encode with memory = self.encoder_norm(x)"
)
OWN_LAYERS = (
    "your EncoderDecoder calls {culprit}, a method of a class of your own that is not "
    "implemented yet (your own DecoderLayer or EncoderLayer, from the exercise above?). This "
    "exercise does not use your layers: build the stacks from the course's, "
    "reference.EncoderLayer(...) and reference.DecoderLayer(...) (from course import layers "
    "as reference), so that it does not wait for your DecoderLayer"
)
EMBEDDINGS_DETACHED = (
    "the values are right, but the embeddings are detached (.detach(), .data or "
    "torch.no_grad()), so the embedding tables never learn: keep them in the graph"
)
UNTIED = (
    "tie_embeddings=True asks for one matrix in three places, but {which}: make them the same "
    "nn.Parameter, self.tgt_embed.weight = self.src_embed.weight and self.out.weight = "
    "self.src_embed.weight (copying the values, .data or .copy_(), ties nothing: the copies "
    "learn apart)"
)
TIED_UNASKED = (
    "tie_embeddings=False, but {which} share one matrix: tie them only when asked "
    "(`if tie_embeddings:`)"
)
SAME_LAYER_REPEATED = (
    "self.{stack} holds one layer {n} times ([layer] * n_layers repeats the same module, "
    "with the same weights): build a new layer each time, nn.ModuleList([{kind}(...) for _ "
    "in range(n_layers)])"
)
PE_PARAMETER = (
    "the sinusoidal table is a parameter ({name}), so it would be trained and saved: keep it "
    'a buffer, self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), '
    "persistent=False)"
)
NO_EMBEDDING_DROPOUT = (
    "in training mode nothing is dropped from the {side} embeddings + positions: the "
    "paper applies dropout to their sum, self.dropout(embedding * sqrt(d_model) + pe[:T]), "
    "on both sides"
)
DROPPED_TWICE = (
    "in training mode the {side} embeddings + positions are dropped twice (about "
    "1 - (1 - p)^2 of them zero, the rest scaled by 1 / (1 - p)^2): apply self.dropout once, "
    "to the sum"
)
DROPOUT_BETWEEN_LAYERS = (
    "in training mode something is dropped between the {stack} layers: each layer drops "
    "its own sublayers' outputs; the model drops only the embeddings + positions, once"
)
MEMORY_DROPPED = (
    "in training mode the decoder does not receive the encoder's output as it is (dropout "
    "on the memory?): memory = the last encoder layer's output{norm}, passed to every "
    "decoder layer unchanged"
)
LOGITS_DROPPED = (
    "in training mode the output layer does not receive the decoder's output as it is "
    "(dropout on y or on the logits?): logits = self.out({y}), with no dropout after the "
    "last decoder layer"
)


def _call_hint(message: str) -> str | None:
    if "must match the size of tensor" in message or "broadcast" in message:
        return (
            "Check the masks' shapes: the encoder and the cross-attention take the source's "
            "padding mask (B, 1, 1, T_src); the decoder's self-attention causal & target "
            "padding (B, 1, T_tgt, T_tgt). The cross-attention's keys are source positions. "
            "And each side adds its own positions, pe[:T] with its own length (T_src for the "
            "source, T_tgt for the target)"
        )
    if "index out of range" in message:
        return (
            "An embedding was given ids outside its vocabulary: the source is looked up in "
            "src_embed (src_vocab rows), the target in tgt_embed (tgt_vocab rows)"
        )
    if "positional argument" in message:
        return "The model is called as model(src, tgt): two (B, T) tensors of token ids"
    return None


# ------------------------------------------------------------- building ----------


def _vocabularies(tie: bool, one_vocabulary: bool) -> tuple[int, int]:
    return (_TIED_V, _TIED_V) if tie or one_vocabulary else (_SRC_V, _TGT_V)


def _reference(gen, norm_first, dropout, tie, pad_id, one_vocabulary):
    """course.transformer.Transformer in eval mode, with random weights (gains away from
    1, biases away from 0, so that every parameter counts)."""
    src_vocab, tgt_vocab = _vocabularies(tie, one_vocabulary)
    ref = reference.Transformer(src_vocab, tgt_vocab, _D, _H, _N, _FF, dropout, norm_first,
                                max_len=_MAX_LEN, pad_id=pad_id, tie_embeddings=tie)  # fmt: skip
    with torch.no_grad():
        for name, p in ref.named_parameters():
            start = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(start + 0.3 * randn(gen, *p.shape))
    return ref.eval()


def _table(module: nn.Module, name: str, vocab: int) -> nn.Embedding:
    """The learner's src_embed / tgt_embed table: an nn.Embedding, or one in `.embedding`."""
    part = getattr(module, name, None)
    table = part if isinstance(part, nn.Embedding) else getattr(part, "embedding", None)
    if not isinstance(table, nn.Embedding):
        raise Mistake(
            f"your model has no embedding table `{name}`: self.{name} = nn.Embedding(vocab, "
            "d_model). The names matter: the checker copies its weights into them"
        )
    if tuple(table.weight.shape) != (vocab, _D):
        raise Mistake(
            f"self.{name} is a ({table.weight.shape[0]}, {table.weight.shape[1]}) table; expected "
            f"({vocab}, d_model={_D}): one row per token of its vocabulary"
            + " (src_vocab for the source, tgt_vocab for the target)"
        )
    return table


def _stack(module: nn.Module, name: str, kind: str, norm_first: bool, dropout: float):
    layers = getattr(module, name, None)
    if not isinstance(layers, nn.ModuleList):
        raise Mistake(
            f"your model has no nn.ModuleList `{name}`: self.{name} = nn.ModuleList([{kind}("
            "d_model, n_heads, d_ff, dropout, norm_first) for _ in range(n_layers)]), the "
            "course's layers (from course import layers as reference)"
        )
    if len(layers) != _N:
        raise Mistake(
            f"self.{name} holds {len(layers)} layers, but n_layers={_N} was asked: one "
            f"{kind} per layer, n_layers of them"
        )
    if len({id(layer) for layer in layers}) < len(layers):
        raise Mistake(SAME_LAYER_REPEATED.format(stack=name, n=len(layers), kind=kind))
    for i, layer in enumerate(layers):
        arrangement = getattr(layer, "norm_first", norm_first)
        if isinstance(arrangement, bool) and arrangement != norm_first:
            raise Mistake(
                f"self.{name}[{i}] is built with norm_first={arrangement}, but the model with "
                f"norm_first={norm_first}: pass norm_first on to every layer, {kind}(d_model, "
                "n_heads, d_ff, dropout, norm_first)"
            )
        rates = {m.p for m in layer.modules() if isinstance(m, nn.Dropout)}
        rates |= {
            m.dropout
            for m in layer.modules()
            if isinstance(m, MultiHeadAttention) and isinstance(getattr(m, "dropout", None), float)
        }
        if rates - {dropout}:
            raise Mistake(
                f"self.{name}[{i}] drops at rate {max(rates - {dropout})}, but dropout="
                f"{dropout} was asked: pass dropout on to every layer, {kind}(d_model, "
                "n_heads, d_ff, dropout, norm_first)"
            )
    return layers


def _final_norms(module: nn.Module, norm_first: bool) -> None:
    for name, stack in (("encoder_norm", "encoder"), ("decoder_norm", "decoder")):
        norm = getattr(module, name, None)
        if norm_first and not isinstance(norm, nn.Module):
            raise Mistake(
                f"in pre-LN (norm_first=True) the {stack} ends with a LayerNorm: self.{name} = "
                f"LayerNorm(d_model) when norm_first, else None (found {norm!r})"
            )
        if not norm_first and norm is not None:
            which = "the encoder's output" if stack == "encoder" else "the decoder's output"
            raise Mistake(
                EXTRA_FINAL_NORM.format(which=which)
                + f": self.{name} = None when norm_first is False"
            )


def _tying(src: nn.Embedding, tgt: nn.Embedding, out: nn.Linear, tie: bool) -> None:
    pairs = {"tgt_embed": tgt.weight is src.weight, "out": out.weight is src.weight}
    pairs["tgt_embed and out"] = tgt.weight is out.weight
    if tie:
        apart = [n for n in ("tgt_embed", "out") if not pairs[n]]
        if apart:
            which = " and ".join(f"self.{n}.weight" for n in apart)
            verb = "is" if len(apart) == 1 else "are"
            raise Mistake(UNTIED.format(which=f"{which} {verb} not src_embed's matrix"))
    else:
        shared = [n for n, same in pairs.items() if same]
        if shared:
            names = {"tgt_embed": "src_embed and tgt_embed", "out": "src_embed and out",
                     "tgt_embed and out": "tgt_embed and out"}  # fmt: skip
            raise Mistake(TIED_UNASKED.format(which=names[shared[0]]))


def _ref_name(name: str) -> str:
    """The learner's parameter name as the reference's (src_embed.weight is the course's
    src_embed.embedding.weight)."""
    for table in ("src_embed", "tgt_embed"):
        if name == f"{table}.weight":
            return f"{table}.embedding.weight"
    return name


def _pairs(module: nn.Module, ref) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Every learner parameter (a tied one once) -> (it, the reference's)."""
    theirs = dict(ref.named_parameters(remove_duplicate=False))
    pairs, unknown = {}, []
    for name, p in module.named_parameters():
        want = theirs.get(_ref_name(name))
        if want is None:
            if tuple(p.shape) == (_MAX_LEN, _D):
                raise Mistake(PE_PARAMETER.format(name=name))
            unknown.append(name)
            continue
        if p.shape != want.shape:
            raise Mistake(
                f"your parameter {name} has shape {tuple(p.shape)}, expected {tuple(want.shape)}"
            )
        pairs[name] = (p, want)
    if unknown:
        raise Mistake(
            f"your model has parameters the course's model does not: {', '.join(unknown[:4])}. "
            "The model is embeddings, the two stacks of layers, the final norms in pre-LN "
            "only, and self.out; use the course's names"
        )
    missing = {id(p) for p in ref.parameters()} - {id(w) for _, w in pairs.values()}
    if missing:
        names = [n for n, p in ref.named_parameters() if id(p) in missing]
        raise Mistake(f"your model lacks parameters of the course's model: {', '.join(names[:4])}")
    return pairs


def _build(candidate, gen, norm_first, dropout, tie, pad_id, one_vocabulary=False):
    """The learner's model and the reference, the same weights: module, ref, pairs, shown.
    one_vocabulary: src_vocab == tgt_vocab also when untied (where tying could run)."""
    src_vocab, tgt_vocab = _vocabularies(tie, one_vocabulary)
    args = (src_vocab, tgt_vocab, _D, _H, _N, _FF, dropout, norm_first)
    kwargs = dict(max_len=_MAX_LEN, pad_id=pad_id, tie_embeddings=tie)
    shown = (
        f"EncoderDecoder({', '.join(map(str, args))}, "
        + ", ".join(f"{k}={v}" for k, v in kwargs.items())
        + ")"
    )
    hints = _init_hints(candidate, _SIGNATURE)
    module = call(candidate, *args, names=_INIT_NAMES, hints=hints, **kwargs)
    module = _built(module, "EncoderDecoder", shown)
    src = _table(module, "src_embed", src_vocab)
    tgt = _table(module, "tgt_embed", tgt_vocab)
    out = getattr(module, "out", None)
    if not isinstance(out, nn.Linear) or tuple(out.weight.shape) != (tgt_vocab, _D):
        raise Mistake(
            f"self.out should be nn.Linear(d_model, tgt_vocab) = nn.Linear({_D}, {tgt_vocab}), "
            f"the scores over the target vocabulary; found {out!r}"
        )
    if out.bias is None:
        raise Mistake("self.out has no bias: nn.Linear(d_model, tgt_vocab) keeps its bias")
    _stack(module, "encoder_layers", "reference.EncoderLayer", norm_first, dropout)
    _stack(module, "decoder_layers", "reference.DecoderLayer", norm_first, dropout)
    _final_norms(module, norm_first)
    _tying(src, tgt, out, tie)
    tables = {"src_embed": src, "tgt_embed": tgt}
    for name, table in tables.items():
        if table.padding_idx not in (None, pad_id):
            raise Mistake(PADDING_IDX.format(name=name, used=table.padding_idx, pad_id=pad_id))
    ref = _reference(gen, norm_first, dropout, tie, pad_id, one_vocabulary)
    for name, table in tables.items():  # padding_idx=pad_id: no gradient to the padding row
        getattr(ref, name).embedding.padding_idx = table.padding_idx
    pairs = _pairs(module, ref)
    with torch.no_grad():
        for mine, theirs in pairs.values():
            mine.copy_(theirs)
    return module, ref, pairs, shown


def _run(module, src, tgt, what: str) -> torch.Tensor:
    return _one_tensor(call(module, src, tgt, names=("src", "tgt"), hints=_call_hint), what)


# ----------------------------------------------------- the usual mistakes ----------


def _variant(ref, src, tgt, *, scale="sqrt d_model", positions="added", pad=None,
             enc_mask="padding", dec_mask="causal & padding", cross_mask="source padding",
             final=("encoder_norm", "decoder_norm"), extra=(), unchained=(),
             src_table="src_embed", tgt_table="tgt_embed", softmax=False, detach=False,
             inverted=False) -> torch.Tensor:  # fmt: skip
    """The reference's forward (eval mode), from its own parts, with one mistake switched on.

    scale: "sqrt d_model", "none", "sqrt d_k", "d_model"; positions: "added", "none",
    "scaled" (the sum multiplied); pad: the token id the masks are built from; the masks:
    enc_mask "padding" / "none" / "causal" (& padding); dec_mask "causal & padding" /
    "causal" / "padding" / "none" / "query padding" (causal & the target's padding on the
    query axis); cross_mask "source padding" / "none" / "target" (the
    decoder's mask) / "target padding". final: the final norms applied (pre-LN), in the
    order (on the memory, before out); extra: "encoder" / "decoder", a plain LayerNorm added
    there (post-LN); unchained: "encoder" / "decoder", where every layer reads the embeddings;
    src_table / tgt_table: the table each side is looked up in; inverted: the padding masks
    True on the padding.
    """
    d = _D
    pad = ref.pad_id if pad is None else pad
    factor = {"sqrt d_model": math.sqrt(d), "none": 1.0, "sqrt d_k": math.sqrt(d // _H),
              "d_model": float(d)}[scale]  # fmt: skip

    def embed(table, tokens):
        e = getattr(ref, table).embedding(tokens)  # (B, T, d_model)
        e = e.detach() if detach else e
        pe = ref.pos.pe[: tokens.shape[1]].to(e.dtype)  # (T, d_model)
        if positions == "none":
            return e * factor
        if positions == "scaled":
            return (e + pe) * factor
        return e * factor + pe

    src_pad, tgt_pad = padding_mask(src, pad), padding_mask(tgt, pad)  # (B, 1, 1, T)
    if inverted:  # True on the padding: src == pad_id
        src_pad, tgt_pad = ~src_pad, ~tgt_pad
    causal_s, causal_t = causal_mask(src.shape[1]), causal_mask(tgt.shape[1])
    enc = {"padding": src_pad, "none": None, "causal": src_pad & causal_s}[enc_mask]
    dec = {"causal & padding": tgt_pad & causal_t, "causal": causal_t, "padding": tgt_pad,
           "none": None,
           "query padding": tgt_pad.transpose(-1, -2) & causal_t}[dec_mask]  # fmt: skip
    cross = {"source padding": src_pad, "none": None, "target": tgt_pad & causal_t,
             "target padding": tgt_pad}[cross_mask]  # fmt: skip
    norms = {"encoder_norm": ref.encoder_norm, "decoder_norm": ref.decoder_norm}
    first, last = (norms.get(n) for n in final) if len(final) == 2 else (None, None)

    x = first_x = embed(src_table, src)
    for layer in ref.encoder_layers:
        x = layer(first_x if "encoder" in unchained else x, enc)  # (B, T_src, d_model)
    if first is not None:
        x = first(x)
    if "encoder" in extra:
        x = F.layer_norm(x, (d,))
    y = first_y = embed(tgt_table, tgt)
    for layer in ref.decoder_layers:
        y = layer(first_y if "decoder" in unchained else y, x, dec, cross)  # (B, T_tgt, d_model)
    if last is not None:
        y = last(y)
    if "decoder" in extra:
        y = F.layer_norm(y, (d,))
    logits = ref.out(y)  # (B, T_tgt, tgt_vocab)
    return logits.softmax(dim=-1) if softmax else logits


def _mistakes(ref, src, tgt, norm_first: bool, tie: bool) -> dict[str, torch.Tensor]:
    run = functools.partial(_variant, ref, src, tgt)
    candidates = [
        (NO_SCALE, lambda: run(scale="none")),
        (SCALE_D_K, lambda: run(scale="sqrt d_k")),
        (SCALE_D_MODEL, lambda: run(scale="d_model")),
        (NO_POSITIONS, lambda: run(positions="none")),
        (POSITIONS_SCALED, lambda: run(positions="scaled")),
        (NO_MASKS, lambda: run(enc_mask="none", dec_mask="none", cross_mask="none")),
        (NO_CAUSAL, lambda: run(dec_mask="padding")),
        (NO_TGT_PADDING, lambda: run(dec_mask="causal")),
        (PADDED_ONLY, lambda: run(dec_mask="query padding")),
        (NO_DECODER_MASK, lambda: run(dec_mask="none")),
        (CAUSAL_ENCODER, lambda: run(enc_mask="causal")),
        (NO_SRC_PADDING_ENCODER, lambda: run(enc_mask="none")),
        (NO_CROSS_MASK, lambda: run(cross_mask="none")),
        (NO_SRC_PADDING, lambda: run(enc_mask="none", cross_mask="none")),
        (NO_PADDING_MASKS, lambda: run(enc_mask="none", dec_mask="causal", cross_mask="none")),
        (TGT_AS_MEMORY_MASK.format(which="mask"), lambda: run(cross_mask="target")),
        (TGT_AS_MEMORY_MASK.format(which="padding mask"), lambda: run(cross_mask="target padding")),
        (SOFTMAX, lambda: run(softmax=True)),
        (INVERTED_MASKS, lambda: run(inverted=True)),
    ]
    for stacks in (("encoder", "decoder"), ("encoder",), ("decoder",)):
        stack = " and ".join(stacks)
        candidates.append(
            (LAYERS_NOT_CHAINED.format(stack=stack), lambda s=stacks: run(unchained=s))
        )
    for used in (0, 1, 2, 3):  # a wrong id only where the batch holds it (else: no mask)
        if used != ref.pad_id and bool((src == used).any() or (tgt == used).any()):
            candidates.append(
                (WRONG_PAD_ID.format(used=used, pad_id=ref.pad_id), lambda u=used: run(pad=u))
            )
    if not tie:
        candidates.append((TGT_WITH_SRC_TABLE, lambda: run(tgt_table="src_embed")))
        if int(src.max()) < ref.tgt_vocab:  # else looking the source up in tgt_embed crashes
            candidates.append((SRC_WITH_TGT_TABLE, lambda: run(src_table="tgt_embed")))
    if norm_first:
        candidates += [
            (NO_FINAL_NORMS, lambda: run(final=())),
            (NO_ENCODER_NORM, lambda: run(final=("", "decoder_norm"))),
            (NO_DECODER_NORM, lambda: run(final=("encoder_norm", ""))),
            (NORMS_SWAPPED, lambda: run(final=("decoder_norm", "encoder_norm"))),
        ]
    else:
        for extra, which in (
            (("encoder", "decoder"), "the output of both stacks"),
            (("encoder",), "the encoder's output"),
            (("decoder",), "the decoder's output"),
        ):
            candidates.append((EXTRA_FINAL_NORM.format(which=which), lambda e=extra: run(extra=e)))
    wrong = {}
    for diagnosis, variant in candidates:
        try:
            wrong.setdefault(diagnosis, variant())
        except (RuntimeError, ValueError, IndexError):  # cannot run on these shapes
            continue
    return wrong


# ----------------------------------------------------------------- cases ----------


def _tokens(gen, lengths: list[int], T: int, vocab: int, pad_id: int) -> torch.Tensor:
    """(B, T) ids: sentence b has lengths[b] real tokens (never pad_id, and a 0 among them
    when pad_id is not 0), then padding."""
    ids = torch.randint(0, vocab - 1, (len(lengths), T), generator=gen)  # (B, T)
    ids = ids + (ids >= pad_id).long()  # every id but pad_id
    if pad_id != 0:
        ids[:, 0] = 0  # a real token with the id a hard-coded 0 would hide
    return _padded(ids, lengths, pad_id)


def _padded(ids: torch.Tensor, lengths: list[int], pad_id: int) -> torch.Tensor:
    """ids (B, T) with sentence b cut to its first lengths[b] tokens, then padding."""
    real = torch.arange(ids.shape[1]) < torch.tensor(lengths)[:, None]  # (B, T)
    return torch.where(real, ids, torch.full_like(ids, pad_id))


# (norm_first, tie, pad_id, source lengths and T_src, target lengths and T_tgt, float64);
# the last untied case has one vocabulary for both sides, so that an answer which ties
# whatever it is asked can run, and be caught
_CASES = [
    (False, False, 0, ([5, 3], 5), ([5, 2], 5), False),
    (True, False, 0, ([5, 3], 5), ([5, 2], 5), False),
    (False, True, 3, ([7, 4], 7), ([5, 3], 5), False),
    (True, True, 3, ([6, 2], 6), ([4, 3], 4), False),
    (True, True, 1, ([5], 6), ([3], 5), True),
    (False, False, 2, ([6], 7), ([4], 4), True),
]


def _describe(norm_first, tie, pad_id, src, tgt, wide) -> str:
    arrangement = "pre-LN" if norm_first else "post-LN"
    tied = "tied" if tie else "untied"
    extra = ", float64" if wide else ""
    return (
        f"{arrangement}, {tied}, pad_id={pad_id}, src {tuple(src.shape)} and tgt "
        f"{tuple(tgt.shape)} with padding{extra}"
    )


def _expect_cases(candidate, gen) -> int:
    for norm_first, tie, pad_id, (src_lengths, t_src), (tgt_lengths, t_tgt), wide in _CASES:
        one_vocabulary = (norm_first, tie, wide) == (False, False, True)
        module, ref, pairs, shown = _build(
            candidate, gen, norm_first, 0.1, tie, pad_id, one_vocabulary
        )
        src_vocab, tgt_vocab = ref.src_vocab, ref.tgt_vocab
        src = _tokens(gen, src_lengths, t_src, src_vocab, pad_id)
        tgt = _tokens(gen, tgt_lengths, t_tgt, tgt_vocab, pad_id)
        if wide:
            module.double(), ref.double()
        module.eval()
        case = _describe(norm_first, tie, pad_id, src, tgt, wide)
        what = f"the output of {shown} in eval mode ({case})"
        with torch.no_grad():
            want = ref(src, tgt)
            got = _run(module, src, tgt, what)
            expect_shape(
                got, want.shape, what, "It is the logits (B, T_tgt, tgt_vocab): one score per "
                "target position and target token"
            )  # fmt: skip
            if not torch.equal(got, _run(module, src, tgt, what)):
                raise Mistake(
                    f"{what}: two calls give different outputs, so something is dropped in "
                    "eval mode. Use nn.Dropout modules (or F.dropout(x, p, self.training))"
                )
            try:
                expect_close(
                    got,
                    want,
                    what,
                    wrong=functools.partial(_mistakes, ref, src, tgt, norm_first, tie),
                    atol=1e-4,
                    explain=functools.partial(_padded_only, want, tgt, pad_id),
                )
            except Mistake as mistake:
                config = (norm_first, tie, pad_id, one_vocabulary, wide)
                if _right_in_training(candidate, config, src, tgt, what):
                    diagnosis = str(mistake).rstrip(".")  # named, or "{what} is not right: ..."
                    told = diagnosis if diagnosis.startswith(what) else f"{what}: {diagnosis}"
                    raise Mistake(EVAL_ONLY.format(diagnosis=told)) from None
                raise
        try:
            expect_gradients(
                lambda module=module, src=src, tgt=tgt, what=what: _run(module, src, tgt, what),
                lambda ref=ref, src=src, tgt=tgt: ref(src, tgt),
                {},
                what,
                parameters=pairs,
                wrong={
                    EMBEDDINGS_DETACHED: lambda ref=ref, src=src, tgt=tgt: _variant(
                        ref, src, tgt, detach=True
                    )
                },
            )
        except Mistake as mistake:  # a part cut off: name it
            if "no gradient reaches" in str(mistake):
                cut = _cut_off(module, src, tgt, what)
                encoder = {n for n, _ in module.named_parameters() if n.startswith("encoder_")}
                if (
                    encoder
                    and encoder <= cut
                    and all(n in encoder or n.startswith("src_embed") for n in cut)
                ):
                    raise Mistake(f"{what}: {MEMORY_DETACHED}") from None
                if cut and all(n.startswith(("src_embed", "tgt_embed")) for n in cut):
                    raise Mistake(f"{what}: {EMBEDDINGS_DETACHED}") from None
            raise
        _expect_encode_decode(module, ref, src, tgt, case)
    return len(_CASES)


def _cut_off(module, src, tgt, what: str) -> set[str]:
    """The learner's parameters that no gradient reaches from the logits."""
    named = dict(module.named_parameters())
    out = _run(module, src, tgt, what)
    projection = randn(generator(5), *out.shape, dtype=out.dtype)
    grads = torch.autograd.grad((out * projection).sum(), list(named.values()), allow_unused=True)
    return {n for n, g in zip(named, grads, strict=True) if g is None or not bool(g.any())}


def _padded_only(want, tgt, pad_id, got) -> str | None:
    """PADDED_ONLY_UNNAMED when `got` is right at every real target position, wrong at a
    padded one, and no named mistake (the exact query-axis mask among them) gives it."""
    real = (tgt != pad_id)[..., None].expand_as(want)  # (B, T_tgt, V)
    if bool(real.all()) or not close(got[real], want[real], atol=1e-4):
        return None
    return PADDED_ONLY_UNNAMED


def _right_in_training(candidate, config, src, tgt, what: str) -> bool:
    """Whether the learner's model, built at dropout=0.0, gives the right logits in
    training mode (where it was wrong in eval mode)."""
    norm_first, tie, pad_id, one_vocabulary, wide = config
    try:
        module, ref, _, _ = _build(
            candidate, generator(77), norm_first, 0.0, tie, pad_id, one_vocabulary
        )
        if wide:
            module.double(), ref.double()
        with torch.no_grad():
            got, want = _run(module.train(), src, tgt, what), ref(src, tgt)
            return got.dtype == want.dtype and close(got, want, atol=1e-4)
    except (Mistake, NotImplementedYet):
        return False


def _encode_decode_hint(message: str) -> str | None:
    if "positional argument" in message:
        return (
            "Lesson 09 calls model.encode(src, src_mask) and model.decode(tgt, memory, "
            "src_mask): decode takes three arguments and builds the target's mask itself"
        )
    return _call_hint(message)


def _decoded(ref, tgt, memory, self_mask, cross_mask) -> torch.Tensor:
    """The reference's decoder with the masks given: (B, T_tgt, tgt_vocab)."""
    y = ref.pos(ref.tgt_embed(tgt))  # (B, T_tgt, d_model)
    for layer in ref.decoder_layers:
        y = layer(y, memory, self_mask, cross_mask)
    return ref.out(y if ref.decoder_norm is None else ref.decoder_norm(y))


def _one_result(got, what: str, use: str) -> torch.Tensor:
    if isinstance(got, tuple | list):
        raise Mistake(
            f"{what} returned a {type(got).__name__} of {len(got)} things; lesson 09 takes "
            f"one tensor from it, {use}"
        )
    return _one_tensor(got, what)


def _expect_encode_decode(module, ref, src, tgt, case: str) -> None:
    """encode(src, src_mask) and decode(tgt, memory, src_mask), as lesson 09 calls them
    (no target mask: decode builds it), judged where the class has them. The batch is the
    case's in reverse order: nothing may be left over from the forward just run."""
    parts = (getattr(module, "encode", None), getattr(module, "decode", None))
    if not all(callable(part) for part in parts):
        return
    stale = padding_mask(src, ref.pad_id)  # what the last forward built
    src, tgt = src.flip(0), tgt.flip(0)
    src_mask = padding_mask(src, ref.pad_id)  # (B, 1, 1, T_src)
    tgt_pad, causal = padding_mask(tgt, ref.pad_id), causal_mask(tgt.shape[1])
    with torch.no_grad():
        memory = ref.encode(src, src_mask)  # (B, T_src, d_model)
        what = f"model.encode(src, src_mask) in eval mode ({case})"
        got = call(module.encode, src, src_mask, names=("src", "src_mask"),
                   hints=_encode_decode_hint)  # fmt: skip
        got = _one_result(got, what, "memory = model.encode(src, src_mask)")
        wrong = {}
        if ref.encoder_norm is not None:
            x = ref.pos(ref.src_embed(src))
            for layer in ref.encoder_layers:
                x = layer(x, src_mask)
            wrong[ENCODE_NO_NORM] = x
        expect_close(got, memory, what, wrong=wrong, atol=1e-4)
        want = ref.decode(tgt, memory, src_mask)  # (B, T_tgt, tgt_vocab)
        what = f"model.decode(tgt, memory, src_mask) in eval mode ({case})"
        got = call(module.decode, tgt, memory, src_mask, names=("tgt", "memory", "src_mask"),
                   hints=_encode_decode_hint)  # fmt: skip
        got = _one_result(got, what, "logits = model.decode(tokens, memory, src_mask)")
        run = functools.partial(_decoded, ref, tgt, memory)
        expect_close(
            got,
            want,
            what,
            wrong=lambda: {
                DECODE_NO_CAUSAL: run(tgt_pad, src_mask),
                DECODE_NO_MASK: run(None, src_mask),
                DECODE_NO_TGT_PADDING: run(causal, src_mask),
                DECODE_NO_CROSS_MASK: run(tgt_pad & causal, None),
                DECODE_STALE_MASK: run(tgt_pad & causal, stale),
            },
            atol=1e-4,
        )


# --------------------------------------------------------------- dropout ----------


def _first_tensor(args, kwargs):
    return args[0] if args else next(iter(kwargs.values()), None)


def _is_dropout_of(got: torch.Tensor, kept_all: torch.Tensor, p: float) -> bool:
    """Each entry of got 0 or kept_all / (1 - p), some of both."""
    zero = got.abs() <= 1e-6
    scaled = torch.isclose(got, kept_all / (1 - p), atol=1e-5, rtol=1e-4)
    return bool((zero | scaled).all()) and bool(zero.any()) and bool((~zero).any())


_STACK_OF = {"source": "encoder", "target": "decoder"}


def _expect_embedding_dropout(got, embedded, pe, p, side, what) -> None:
    """got: what the first layer of one stack received; embedded: embedding * sqrt(d)."""
    kept_all = embedded + pe
    if close(got, kept_all):
        raise Mistake(NO_EMBEDDING_DROPOUT.format(side=side))
    if _is_dropout_of(got - pe, embedded, p):
        raise Mistake(POSITIONS_AFTER_DROPOUT)
    if _is_dropout_of(got, kept_all, 1 - (1 - p) ** 2):
        raise Mistake(DROPPED_TWICE.format(side=side))
    _expect_dropped(
        got, kept_all, p, f"{what}: what the first {_STACK_OF[side]} layer receives",
        "Drop the sum once, self.dropout(embedding * sqrt(d_model) + pe[:T])",
    )  # fmt: skip


def _check_dropout(candidate, gen, norm_first: bool) -> None:
    # dropout=0.0 in training mode: nothing random anywhere
    src = _tokens(gen, [16] * 4, 16, _SRC_V, 0)
    tgt = _tokens(gen, [14] * 4, 14, _TGT_V, 0)
    module, ref, _, shown = _build(candidate, gen, norm_first, 0.0, False, 0)
    with torch.no_grad():
        trained = _run(module.train(), src, tgt, shown)
        if not close(trained, ref(src, tgt), atol=1e-4):
            if torch.equal(trained, _run(module, src, tgt, shown)):  # nothing random
                raise Mistake(TRAINING_ONLY.format(shown=shown))
            raise Mistake(
                f"{shown} in training mode changes the output although dropout=0.0: pass the "
                "constructor's dropout on to self.dropout and every layer, not a fixed rate"
            )
        src_padded, tgt_padded = _padded(src, [16, 11, 16, 6], 0), _padded(tgt, [14, 9, 3, 14], 0)
        got = _run(module, src_padded, tgt_padded, shown)
        if not close(got, ref(src_padded, tgt_padded), atol=1e-4):
            raise Mistake(TRAINING_MASKS.format(shown=shown))
    p = 0.3
    module, ref, _, shown = _build(candidate, gen, norm_first, p, False, 0)
    what = f"{shown} ({'pre-LN' if norm_first else 'post-LN'}) in training mode"
    with torch.no_grad():
        first, second = _run(module.train(), src, tgt, what), _run(module, src, tgt, what)
        if torch.equal(first, second):
            if close(first, ref(src, tgt), atol=1e-4):  # ref in eval mode: nothing dropped
                raise Mistake(f"{what}: two calls give the same output, so nothing is dropped")
            raise Mistake(f"{what}: {SAME_DROPOUT_EVERY_CALL}")
    # every layer replaced by the identity, recording what it receives
    seen = {"encoder": [], "decoder": []}

    def encoder_layer(*args, **kwargs):
        x = _first_tensor(args, kwargs)
        seen["encoder"].append(x)
        return x

    def decoder_layer(*args, **kwargs):
        values = [*args, *kwargs.values()]
        seen["decoder"].append(values[:2])
        return values[0]

    for layer in module.encoder_layers:
        layer.forward = encoder_layer
    for layer in module.decoder_layers:
        layer.forward = decoder_layer
    with torch.no_grad():
        s = ref.src_embed(src)  # (B, T_src, d_model): embedding * sqrt(d_model)
        t = ref.tgt_embed(tgt)  # (B, T_tgt, d_model)
        pe_s, pe_t = ref.pos.pe[: src.shape[1]], ref.pos.pe[: tgt.shape[1]]
        memory_of = ref.encoder_norm if norm_first else (lambda x: x)
        out_of = (lambda y: ref.out(ref.decoder_norm(y))) if norm_first else ref.out
        try:
            calm = _run(module.eval(), src, tgt, what)
        except Mistake:
            return
        if not close(calm, out_of(t + pe_t), atol=1e-4):
            return  # the layers are not called as modules: what they receive can't be seen
        seen["encoder"].clear(), seen["decoder"].clear()
        logits = _run(module.train(), src, tgt, what)
        if len(seen["encoder"]) != _N or len(seen["decoder"]) != _N:
            return
        x = seen["encoder"][0]
        _expect_embedding_dropout(x, s, pe_s, p, "source", what)
        if not all(torch.equal(later, x) for later in seen["encoder"][1:]):
            raise Mistake(DROPOUT_BETWEEN_LAYERS.format(stack="encoder"))
        y = seen["decoder"][0][0]
        _expect_embedding_dropout(y, t, pe_t, p, "target", what)
        if not all(torch.equal(later[0], y) for later in seen["decoder"][1:]):
            raise Mistake(DROPOUT_BETWEEN_LAYERS.format(stack="decoder"))
        memory = memory_of(x)
        if not all(close(given[1], memory) for given in seen["decoder"]):
            norm = ", after self.encoder_norm" if norm_first else ""
            raise Mistake(MEMORY_DROPPED.format(norm=norm))
        if not close(logits, out_of(y), atol=1e-4):
            shown_y = "self.decoder_norm(y)" if norm_first else "y"
            raise Mistake(LOGITS_DROPPED.format(y=shown_y))
        seen["encoder"].clear(), seen["decoder"].clear()
        _run(module, src, tgt, what)
        expect_fresh_randomness(x, seen["encoder"][0], f"{what}: the source embeddings")


# ------------------------------------------------------------- the checker ----------


def check_encoder_decoder(candidate) -> str:
    _a_class(candidate, "EncoderDecoder", _INIT_NAMES, _SIGNATURE, ("src", "tgt"),
             "forward(src, tgt)")  # fmt: skip
    gen = generator(10)
    try:
        n_cases = _expect_cases(candidate, gen)
        for norm_first in (False, True):
            _check_dropout(candidate, gen, norm_first)
    except NotImplementedYet as stub:  # a stub of a class of the learner's own (a layer)
        if stub.culprit in ("__init__", "forward"):
            raise Mistake(OWN_LAYERS.format(culprit=stub.culprit)) from None
        raise
    return (
        f"{n_cases} cases, post-LN and pre-LN, tied and untied: source and target padding, "
        "pad_id 0 and not 0, T_src = T_tgt and not, a batch of one in float64; values and "
        "gradients of every parameter; encode and decode as lesson 09 calls them; dropout "
        "only while training, on the embeddings + positions of both sides, nowhere between "
        "the stacks"
    )
