"""Checkers for lesson 08 (the full Transformer): DecoderLayer.

The learner's class is built positionally as the lesson states, `DecoderLayer(d_model,
n_heads, d_ff, dropout, norm_first)`; its parameters are found by the course's names
(`self_attn.w_q` ..., `cross_attn.w_q` ..., `ff.linear1`, `ff.linear2`, `norm1` ..
`norm3`) and the reference's random weights, LayerNorm gains and shifts included, are
copied into them, so that a part left out or used in the wrong place shows.

Cases, in both norm_first settings: a target and a source of the same length first (so
that mistakes which would otherwise crash, queries taken from memory or the two masks
swapped, give numbers the checker can name), then T_tgt != T_src without masks, with a
causal mask only, with causal & padding masks and a source padding mask that matter,
non-contiguous x and memory with B = 2, and a batch of one in float64, non-contiguous
too. Values and gradients of x, of memory (the encoder learns through it) and of every
parameter.

The usual mistakes are computed from the reference's own sublayers and named: a mask
ignored, inverted, replaced by a causal mask of one's own, or the two masks swapped;
the cross-attention's keys or values taken from the decoder, its queries from memory,
memory normalised, the cross-attention computed with self_attn's weights; a residual
missing; the norms in the other arrangement, in the wrong places or inside the residual;
the sublayers in the wrong order; the feed-forward without its ReLU. Dropout is checked
where it belongs: none in eval mode; in training mode on each of the three sublayers'
outputs before it is added (measured exactly, with the sublayers replaced by known
tensors), inside the feed-forward and on both attentions' weights, at the rate asked,
new on each call; and nowhere else (not on x or memory before a sublayer reads them).

Helpers shared with lesson 07's EncoderLayer checker are imported from
course.check.layers (private there; one implementation for both checkers).
"""

from __future__ import annotations

import functools
import itertools

import torch
import torch.nn.functional as F
from torch import nn

from course.check._framework import (
    Mistake,
    call,
    exercise,
    generator,
    noncontiguous,
    randn,
)
from course.check.assembly import check_encoder_decoder
from course.check.layers import (
    _D_MODEL,
    _build,
    _check_ff_dropout,
    _check_signatures,
    _expect_attention_dropout,
    _expect_cases,
    _expect_defaults,
    _expect_dropout_while_training,
    _expect_residual_dropout,
    _ff_variant,
    _finally_normed,
    _first_wrong_part,
    _Layer,
    _norm_pairs,
    _one_tensor,
    _pairs,
    _projection_pairs,
    _seeded,
    _submodule,
    final_norm_mistake,
)

__all__ = ["DecoderLayer", "EncoderDecoder"]

_B, _T_TGT, _T_SRC = 2, 5, 7  # every size differs from d_model=12, h=3, d_ff=20
_SUBLAYERS = {"self": "masked self-attention", "cross": "cross-attention", "ff": "feed-forward"}
_NORMS = ("norm1", "norm2", "norm3")


def _call_hint(message: str) -> str | None:
    if "must match the size of tensor" in message:
        return (
            f"x has T_tgt={_T_TGT} positions and memory T_src={_T_SRC}. Cross-attention takes "
            "its queries from the decoder and its keys and values from memory, "
            "self.cross_attn(x, memory, memory, memory_mask), so its output has T_tgt "
            "positions; and tgt_mask (B, 1, T_tgt, T_tgt) belongs to the self-attention, "
            "memory_mask (B, 1, 1, T_src) to the cross-attention"
        )
    if "positional argument" in message:
        return (
            "The layer is called as layer(x, memory, tgt_mask=None, memory_mask=None): x is "
            "the decoder's input, memory the encoder's output"
        )
    return None


# ------------------------------------------------------------- the parts ----------


def _dec_pairs(module: nn.Module, ref) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """'cross_attn.w_q.weight' -> (the learner's tensor, the reference's), every parameter."""
    pairs = _pairs(module, ref)  # self_attn, ff, norm1, norm2: lesson 07's names
    cross = _submodule(
        module, "cross_attn", "self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)"
    )
    if cross is module.self_attn:
        raise Mistake(
            "cross_attn and self_attn are the same module: the cross-attention has its own "
            "projections, self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)"
        )
    if isinstance(cross, nn.MultiheadAttention):
        raise Mistake(
            "self.cross_attn is torch's nn.MultiheadAttention: use the course's "
            "MultiHeadAttention(d_model, n_heads, dropout) from lesson 04 (course.multihead)"
        )
    pairs |= _projection_pairs(cross, ref.cross_attn, "cross_attn")
    norm3 = _submodule(module, "norm3", "self.norm3 = LayerNorm(d_model)")
    if norm3 is module.norm1 or norm3 is module.norm2:
        other = "norm1" if norm3 is module.norm1 else "norm2"
        raise Mistake(
            f"norm3 and {other} are the same module: each of the three sublayers has its own "
            "LayerNorm, with its own gain and bias: self.norm1, self.norm2, self.norm3 = "
            "LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)"
        )
    return pairs | _norm_pairs(norm3, ref.norm3, "norm3")


def _run(module, x, memory, tgt_mask, memory_mask, what: str) -> torch.Tensor:
    args = [x, memory]
    if tgt_mask is not None or memory_mask is not None:
        args += [tgt_mask, memory_mask]
    names = ("x", "memory", "tgt_mask", "memory_mask")
    return _one_tensor(call(module, *args, names=names, hints=_call_hint), what)


# ----------------------------------------------------- the usual mistakes ----------


def _dec_variant(ref, x, memory, tgt_mask, memory_mask, arrangement: str, *,
                 residual=(True, True, True), norms=_NORMS, order=("self", "cross", "ff"),
                 norms_by_position=False, tgt_mode="as is", memory_mode="as is",
                 masks_swapped=False, self_q="h", self_kv="h", cross_q="h", cross_k="memory",
                 cross_v="memory", memory_normed=False, cross_module="cross_attn",
                 activation="relu", ff_reads="h", final_norm=None) -> torch.Tensor:  # fmt: skip
    """The reference layer (eval mode) with one usual mistake switched on.

    arrangement: "post" x = norm(x + sub(x)); "pre" x = x + sub(norm(x)); "norm inside"
    x = x + norm(sub(x)); "pre from normed" (the residual adds norm(x), not x).
    residual / norms: per sublayer (self, cross, ff), in that order; order: the order the
    sublayers run in, each keeping its norm (or, norms_by_position, norm1 .. norm3 in the
    order they run). tgt_mode / memory_mode: "as is", "dropped", "inverted", or for
    tgt_mode "own causal" (a causal mask made inside instead of tgt_mask). The sublayers'
    inputs: "h" (the sublayer's input: x in post-LN, norm(x) in pre-LN), "raw" (the
    stream x itself), "memory", "input" (the layer's input, before any sublayer).
    memory_mode also "tgt" (tgt_mask used as the memory mask); final_norm: None, "norm3"
    (norm3 once more on the output) or "plain" (a fresh LayerNorm on the output).
    """
    if final_norm is not None:
        out = _dec_variant(ref, x, memory, tgt_mask, memory_mask, arrangement,
                           residual=residual, norms=norms, order=order,
                           norms_by_position=norms_by_position, tgt_mode=tgt_mode,
                           memory_mode=memory_mode, masks_swapped=masks_swapped, self_q=self_q,
                           self_kv=self_kv, cross_q=cross_q, cross_k=cross_k, cross_v=cross_v,
                           memory_normed=memory_normed, cross_module=cross_module,
                           activation=activation, ff_reads=ff_reads)  # fmt: skip
        return _finally_normed(ref, out, final_norm, "norm3")
    T = x.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T_tgt, T_tgt)
    modes = {"as is": lambda m: m, "dropped": lambda m: None,
             "inverted": lambda m: None if m is None else ~m,
             "own causal": lambda m: causal}  # fmt: skip
    if memory_mode == "tgt":  # tgt_mask given to the cross-attention as well
        modes["tgt"] = lambda m: tgt_mask
    tmask, mmask = modes[tgt_mode](tgt_mask), modes[memory_mode](memory_mask)
    if masks_swapped:
        tmask, mmask = mmask, tmask
    mem = ref.norm2(memory) if memory_normed else memory
    layer_input = x

    def sources(h, raw):
        return {"h": h, "raw": raw, "memory": mem, "input": layer_input}

    def run_self(h, raw):
        s = sources(h, raw)
        return ref.self_attn(s[self_q], s[self_kv], s[self_kv], tmask)

    def run_cross(h, raw):
        s = sources(h, raw)
        return getattr(ref, cross_module)(s[cross_q], s[cross_k], s[cross_v], mmask)

    def run_ff(h, raw):
        return _ff_variant(ref, sources(h, raw)[ff_reads], activation)

    run = {"self": run_self, "cross": run_cross, "ff": run_ff}
    position = dict(zip(("self", "cross", "ff"), range(3), strict=True))
    for step, name in enumerate(order):
        i = position[name]
        norm = getattr(ref, norms[step] if norms_by_position else norms[i])
        keep = residual[i]
        if arrangement == "post":
            x = norm((x if keep else 0) + run[name](x, x))
        elif arrangement == "pre":
            x = (x if keep else 0) + run[name](norm(x), x)
        elif arrangement == "norm inside":
            x = (x if keep else 0) + norm(run[name](x, x))
        else:  # "pre from normed"
            h = norm(x)
            x = (h if keep else 0) + run[name](h, h)
    return x


def _norms_phrase(norms: tuple[str, str, str]) -> str:
    used = ", ".join(f"{_SUBLAYERS[s]}: {n}" for s, n in zip(_SUBLAYERS, norms, strict=True))
    if sorted(norms) == list(_NORMS):
        problem = "the LayerNorms are in the wrong places"
    else:
        unused = [n for n in _NORMS if n not in norms]
        problem = f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} never used"
    return (
        f"{problem} (you use {used}): norm1 belongs to the masked self-attention, norm2 to the "
        "cross-attention, norm3 to the feed-forward, each its own"
    )


def _order_phrase(order: tuple[str, str, str], by_position: bool) -> str:
    ran = ", ".join(_SUBLAYERS[s] for s in order)
    norms = " (norm1, norm2, norm3 in the order they run)" if by_position else ""
    return (
        f"the sublayers run in the order {ran}{norms}: a decoder layer first attends to the "
        "target so far (masked self-attention), then to the source (cross-attention), then "
        "applies the feed-forward network"
    )


def _dec_mistakes(ref, x, memory, tgt_mask, memory_mask, norm_first: bool) -> dict:
    """Diagnosis -> what that mistake gives on these inputs (those that can be computed:
    a mistake that cannot run on these shapes is left out; it fails on its own)."""
    right = "pre" if norm_first else "post"
    base = functools.partial(_dec_variant, ref, x, memory, tgt_mask, memory_mask)
    run = functools.partial(base, right)
    candidates = []

    def add(diagnosis, variant):
        candidates.append((diagnosis, variant))

    if tgt_mask is not None:
        add(
            "tgt_mask is ignored: the masked self-attention must use it, "
            "self.self_attn(x, x, x, tgt_mask). Without it every position sees the words after "
            "it, the very words it is trained to predict",
            lambda: run(tgt_mode="dropped"),
        )
        add(
            "tgt_mask is inverted: it is True where a position may attend; pass it on as it is",
            lambda: run(tgt_mode="inverted"),
        )
        add(
            "you build a causal mask of your own and ignore tgt_mask: use the tgt_mask you "
            "are given (it may hide padding too, and it already holds the causal part)",
            lambda: run(tgt_mode="own causal"),
        )
    else:
        add(
            "a causal mask is applied although tgt_mask is None: the layer applies the masks "
            "it is given and nothing else (the model builds them, course.masking.decoder_mask)",
            lambda: run(tgt_mode="own causal"),
        )
    if memory_mask is not None:
        add(
            "memory_mask is ignored: the cross-attention must use it, self.cross_attn(x, "
            "memory, memory, memory_mask), so that no position attends to the source's padding",
            lambda: run(memory_mode="dropped"),
        )
        add(
            "memory_mask is inverted: it is True where a source position may be attended to; "
            "pass it on as it is",
            lambda: run(memory_mode="inverted"),
        )
    if tgt_mask is not None and tgt_mask.shape[-1] == memory.shape[1]:
        add(
            "the cross-attention is given tgt_mask, the target's causal (and padding) mask: "
            "it hides source positions by the *target's* positions, and the source's padding "
            "not at all. The cross-attention may read every real source word: give it "
            "memory_mask, self.cross_attn(x, memory, memory, memory_mask); tgt_mask is for the "
            "masked self-attention only",
            lambda: run(memory_mode="tgt"),
        )
    if tgt_mask is not None and memory_mask is not None:
        add(
            "the two masks are swapped: tgt_mask goes to the masked self-attention, "
            "memory_mask to the cross-attention",
            lambda: run(masks_swapped=True),
        )
    if norm_first:
        add(
            "with norm_first=True your layer computes post-LN, norm(x + sublayer(x)), the "
            "paper's arrangement: pre-LN normalises each sublayer's *input* and adds its output "
            "to x untouched, x = x + sublayer(norm(x)). Is norm_first ignored?",
            lambda: base("post"),
        )
    else:
        add(
            "with norm_first=False your layer computes pre-LN, x + sublayer(norm(x)): the "
            "default is the paper's post-LN, Add & Norm after each sublayer, "
            "x = norm(x + sublayer(x)). Is norm_first ignored, or its meaning reversed?",
            lambda: base("pre"),
        )
    add(
        "the cross-attention's keys and values come from the decoder, cross_attn(x, x, x): "
        "that is a second self-attention. Queries come from the decoder, keys and values from "
        "the encoder's output: self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_k="h", cross_v="h"),
    )
    add(
        "the cross-attention's keys come from the decoder: queries from the decoder, keys "
        "*and* values from memory, self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_k="h"),
    )
    add(
        "the cross-attention's values come from the decoder: queries from the decoder, keys "
        "and values from memory, self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_v="h"),
    )
    add(
        "the cross-attention's queries come from memory and its keys and values from the "
        "decoder: the other way round. The decoder asks (queries), the source answers (keys "
        "and values): self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_q="memory", cross_k="h", cross_v="h"),
    )
    add(
        "the cross-attention's queries and keys come from memory and its values from the "
        "decoder: queries come from the decoder, keys and values from memory, "
        "self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_q="memory", cross_v="h"),
    )
    add(
        "the cross-attention's queries come from memory: the queries come from the decoder, "
        "self.cross_attn(x, memory, memory, memory_mask)",
        lambda: run(cross_q="memory"),
    )
    add(
        "the self-attention reads memory: the masked self-attention takes query, key and value "
        "all from the decoder, self.self_attn(x, x, x, tgt_mask); memory is for the "
        "cross-attention only",
        lambda: run(self_kv="memory"),
    )
    add(
        "the cross-attention uses self_attn's weights: call self.cross_attn for it, the "
        "second MultiHeadAttention with its own projections",
        lambda: run(cross_module="self_attn"),
    )
    add(
        "memory is normalised (with norm2) before the cross-attention: memory goes in as it "
        "comes from the encoder (which normalises its own output); only the decoder's stream x "
        "is normalised, as torch.nn.TransformerDecoderLayer does",
        lambda: run(memory_normed=True),
    )
    add(
        "there is no residual connection at all: each sublayer's output must be added to its "
        "input, x + sublayer(...)",
        lambda: run(residual=(False, False, False)),
    )
    for i, name in enumerate(_SUBLAYERS):
        keep = tuple(j != i for j in range(3))
        add(
            f"the {_SUBLAYERS[name]} sublayer has no residual connection: add its output to "
            f"its input, x + dropout{i + 1}(...)",
            lambda keep=keep: run(residual=keep),
        )
    if norm_first:
        add(
            "the residual adds the normalised x: x = norm(x) replaced the residual stream. "
            "Pre-LN keeps x as it is and adds each sublayer's output to it, "
            "x = x + sublayer(norm(x)) (use another name for the normalised x)",
            lambda: base("pre from normed"),
        )
        add(
            "the masked self-attention reads x, not norm1(x): in pre-LN each sublayer works "
            "on the normalised stream, h = norm1(x); x = x + self_attn(h, h, h, tgt_mask)",
            lambda: run(self_q="raw", self_kv="raw"),
        )
        add(
            "the self-attention's keys and values come from x; all three (query, key, "
            "value) come from h = norm1(x): self_attn(h, h, h, tgt_mask)",
            lambda: run(self_kv="raw"),
        )
        add(
            "the cross-attention's queries are x, not norm2(x): in pre-LN the sublayer reads "
            "the normalised stream, self.cross_attn(norm2(x), memory, memory, memory_mask)",
            lambda: run(cross_q="raw"),
        )
        for which, final in (
            ("with a LayerNorm of its own", lambda: F.layer_norm(run(), (_D_MODEL,))),
            ("with norm3 again", lambda: run(final_norm="norm3")),
        ):
            add(final_norm_mistake(which, "x + ff(norm3(x))", "decoder_norm"), final)
        add(
            "the feed-forward reads x, not norm3(x): x = x + ff(norm3(x))",
            lambda: run(ff_reads="raw"),
        )
    else:
        add(
            "you normalise each sublayer's output before adding it, x + norm(sublayer(x)); the "
            "paper's Add & Norm normalises the sum: norm(x + sublayer(x))",
            lambda: base("norm inside"),
        )
        add(
            "the cross-attention reads the layer's input x instead of the self-attention "
            "sublayer's output: each sublayer works on what the one before it returned",
            lambda: run(cross_q="input"),
        )
        add(
            "the feed-forward reads the layer's input x instead of the cross-attention "
            "sublayer's output: each sublayer works on what the one before it returned",
            lambda: run(ff_reads="input"),
        )
    add(
        "the feed-forward has no ReLU: without it linear2(linear1(x)) is one linear map. "
        "FFN(x) = linear2(relu(linear1(x)))",
        lambda: run(activation="none"),
    )
    add(
        "the feed-forward applies a ReLU after linear2 too: its output must be able to be "
        "negative. FFN(x) = linear2(relu(linear1(x)))",
        lambda: run(activation="relu twice"),
    )
    add(
        "the feed-forward uses GELU; the paper's (and torch's default) activation is ReLU, "
        "FFN(x) = linear2(relu(linear1(x)))",
        lambda: run(activation="gelu"),
    )
    for order in itertools.permutations(_SUBLAYERS):
        if order == tuple(_SUBLAYERS):
            continue
        add(_order_phrase(order, False), lambda order=order: run(order=order))
        add(
            _order_phrase(order, True), lambda order=order: run(order=order, norms_by_position=True)
        )
    for norms in itertools.product(_NORMS, repeat=3):
        if norms != _NORMS:
            add(_norms_phrase(norms), lambda norms=norms: run(norms=norms))
    wrong = {}
    for diagnosis, variant in candidates:
        try:
            wrong.setdefault(diagnosis, variant())
        except (RuntimeError, ValueError):  # this mistake cannot run on these shapes
            continue
    return wrong


def _sublayer_culprit(module, ref, gen) -> str | None:
    """When the layer's output is wrong and no usual mistake matches: is one of its parts
    itself wrong? Each is run alone on random inputs."""
    dtype = ref.norm1.weight.dtype
    z = randn(gen, _B, _T_TGT, _D_MODEL).to(dtype)
    m = randn(gen, _B, _T_SRC, _D_MODEL).to(dtype)
    parts = [(f"self.{n} does not compute LayerNorm: fix your LayerNorm (lesson 07)",
              lambda mod, n=n: getattr(mod, n)(z)) for n in _NORMS]  # fmt: skip
    parts += [
        ("self.ff does not compute linear2(relu(linear1(x))): build it with "
         "FeedForward(d_model, d_ff, dropout)", lambda mod: mod.ff(z)),
        ("self.self_attn does not compute multi-head attention: build it with "
         "MultiHeadAttention(d_model, n_heads, dropout) (lesson 04)",
         lambda mod: mod.self_attn(z, z, z)),
        ("self.cross_attn does not compute multi-head attention: build it with "
         "MultiHeadAttention(d_model, n_heads, dropout) (lesson 04)",
         lambda mod: mod.cross_attn(z, m, m)),
    ]  # fmt: skip
    return _first_wrong_part(module, ref, parts)


# ----------------------------------------------------------------- cases ----------


def _cases(gen):
    """(name, x, memory, tgt_mask, memory_mask). Target lengths 5 and 3 (2 pads); source
    lengths 7 and 4, or 5 and 2 in the first case, where T_src = T_tgt. Non-contiguous
    inputs twice: with B = 2 (where merging B and T with .view fails) and with B = 1."""
    causal = torch.ones(_T_TGT, _T_TGT, dtype=torch.bool).tril()  # (T_tgt, T_tgt)
    tgt_real = torch.arange(_T_TGT) < torch.tensor([5, 3])[:, None]  # (B, T_tgt)
    tgt_mask = tgt_real[:, None, None, :] & causal  # (B, 1, T_tgt, T_tgt)
    src_real = torch.arange(_T_SRC) < torch.tensor([7, 4])[:, None]  # (B, T_src)
    memory_mask = src_real[:, None, None, :]  # (B, 1, 1, T_src)
    short_mask = (torch.arange(_T_TGT) < torch.tensor([5, 2])[:, None])[:, None, None, :]

    def pair(t_src, b=_B):
        return randn(gen, b, _T_TGT, _D_MODEL), randn(gen, b, t_src, _D_MODEL)

    x, memory = pair(_T_SRC)
    one_x, one_memory = pair(_T_SRC, b=1)
    return [
        ("T_tgt = T_src = 5, a causal & padding tgt_mask (B, 1, T_tgt, T_tgt) and a padding "
         "memory_mask (B, 1, 1, T_src)", *pair(_T_TGT), tgt_mask, short_mask),
        ("T_tgt = 5, T_src = 7, no masks", x, memory, None, None),
        ("T_tgt = 5, T_src = 7, a causal tgt_mask (T_tgt, T_tgt) only", x, memory, causal, None),
        ("T_tgt = 5, T_src = 7, non-contiguous x and memory, a causal & padding tgt_mask and "
         "a padding memory_mask", *map(noncontiguous, pair(_T_SRC)), tgt_mask, memory_mask),
        ("a batch of one, float64, non-contiguous x and memory, a causal tgt_mask and a "
         "padding memory_mask", noncontiguous(one_x.double()), noncontiguous(one_memory.double()),
         causal, memory_mask[1:]),
    ]  # fmt: skip


_DECODER = _Layer(
    name="DecoderLayer",
    inputs=("x", "memory"),
    masks=("tgt_mask", "memory_mask"),
    parts={
        "self_attn": "masked self-attention",
        "cross_attn": "cross-attention",
        "ff": "feed-forward",
    },
    dropout_to="both MultiHeadAttentions and the FeedForward",
    shape_hint="It is (B, T_tgt, d_model), like x",
    pairs=_dec_pairs,
    run=_run,
    mistakes=_dec_mistakes,
    variant=_dec_variant,
    culprit=_sublayer_culprit,
)


@exercise("DecoderLayer")
def DecoderLayer(candidate) -> str:
    return _seeded(_check_decoder_layer, candidate)


def _check_decoder_layer(candidate) -> str:
    _check_signatures(_DECODER, candidate)
    gen = generator(9)
    n_cases = _expect_cases(_DECODER, candidate, gen, _cases)
    module, ref, _, shown = _build(_DECODER, candidate, False, 0.1, gen, defaults=True)
    x, memory = randn(gen, _B, _T_TGT, _D_MODEL), randn(gen, _B, _T_SRC, _D_MODEL)
    _expect_defaults(_DECODER, module, ref, shown, x, memory)
    for norm_first in (False, True):
        _check_dropout(candidate, gen, norm_first)
    return (
        f"{n_cases} cases, post-LN and pre-LN: T_tgt = T_src and T_tgt != T_src, no masks, "
        "causal, causal & padding with source padding, non-contiguous, a batch of one in "
        "float64; values and gradients of x, memory and every parameter; the defaults; "
        "dropout only while training, on each sublayer's output, in the feed-forward and on "
        "both attentions' weights, at the rate asked"
    )


# --------------------------------------------------------------- dropout ----------


def _check_dropout(candidate, gen, norm_first: bool) -> None:
    p = 0.3
    x = randn(gen, 4, 16, _D_MODEL)  # 768 values per sublayer output: the rate is measurable
    memory = randn(gen, 4, 9, _D_MODEL)
    module, ref, shown = _expect_dropout_while_training(
        _DECODER, candidate, gen, norm_first, p, x, memory
    )
    _check_ff_dropout(module, ref, gen, p, shown)
    for attn in ("self_attn", "cross_attn"):
        z, m = randn(gen, 4, 16, _D_MODEL), randn(gen, 4, 12, _D_MODEL)
        _expect_attention_dropout(module, ref, attn, z, z if attn == "self_attn" else m, p, shown)
    x, memory = randn(gen, 4, 16, _D_MODEL), randn(gen, 4, 9, _D_MODEL)
    value = randn(gen, 4, 16, _D_MODEL)  # what the replaced sublayer returns
    _expect_residual_dropout(_DECODER, candidate, gen, norm_first, p, value, x, memory)


# ------------------------------------------------- EncoderDecoder: the whole model ----------


@exercise("EncoderDecoder")
def EncoderDecoder(candidate) -> str:
    """Lesson 08's assembly exercise; the checks live in course.check.assembly."""
    return _seeded(check_encoder_decoder, candidate)
