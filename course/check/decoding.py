"""Checker for lesson 09: greedy_decode(model, src, max_len, bos_id, eos_id).

The answer is token ids, so it is compared exactly with course.decoding.greedy_decode:
a (B, T_out) torch.long tensor, T_out <= max_len, without <bos>, with each sentence's
<eos>, model.pad_id after it, and no column after the step at which every sentence has
ended. Nothing flows backward through an argmax, so there are no gradients to judge.

The models. Small Transformers (2 layers, d_model 16, vocabulary 10) with seeded random
weights, built under a forked random state (the notebook's is left alone) and put in eval
mode, as the lesson's caller does. Two output biases are set by hand: <pad> and <bos>
get -30, so the model never writes them (a trained model does not either, and a <pad>
written mid-sentence would make a causal-only tgt_mask differ from the model's own
causal & padding mask: both are right). The sources below were chosen, for these
weights, so that each case shows what it is named after: sentences ending with <eos>
at different steps, some never before max_len; the source's padding and the causal
mask changing the tokens when left out. At every step the best logit leads the second
by at least 0.005, so answers computed in another order (one sentence at a time, say)
choose the same tokens. The models have dropout 0.3: an answer
that calls model.train() decodes with dropout on, which changes the tokens (and forward
hooks see it in any case).

Why a missing causal mask shows, although greedy decoding has no "future" to hide:
at each step the decoder reads the prefix <bos> y_1 .. y_t and only the last position's
logits are used. The last position may attend to every position of the prefix anyway, so
in the first decoder layer its vector is the same with or without the mask. But the
earlier positions are not: without the mask, position i < t reads positions i+1 .. t,
which it never did in training; and the second layer's last position reads those changed
vectors. With two or more decoder layers the logits change (and here, the tokens); with
one decoder layer a missing causal mask could not be seen at all. The checker's models
have two.

Re-feeding the argmax of *every* position (instead of appending the last position's to
the prefix) is no mistake, for the same reason the other way round: under the causal mask
position k's logits depend on the prefix up to k only, so its argmax is the token chosen
at step k again. Such an answer passes (tests/test_check_decoding.py has one).

The usual mistakes are computed from a parametrised copy of the reference (`_decode`)
and named when the answer matches one: no causal mask; the decoder fed <bos> alone, the
last token alone or the source, or the first position's logits read; a softmax over the
batch or over time before the argmax; the source's padding mask left out (or built with
pad 0); every sentence stopped at the first <eos> of any; no stop (no padding after
<eos>, no end before max_len, or both); <eos> dropped; <bos> kept; one step too many or
too few; the last <eos> cut off; <bos>, <eos> or <pad> hard-coded as 1, 2, 0; the output
transposed or with a trailing axis. Found otherwise: a list instead of a tensor, ids that
are not torch.long, sampling instead of argmax (two calls on the same inputs differ),
training mode (forward hooks see it), src edited in place, a loop past max_len. Once
the tokens are right on every case, what lesson 09 states is judged too (forward hooks
again): the encoder runs once (each source sentence encoded once; model(src, tgt) or
model.encode at every step is named), and nothing runs with gradients on (no
@torch.no_grad(), nor `with torch.no_grad():` or inference mode). When nothing matches,
the answer's own tokens are replayed through the model to say at which sentence and step
it left greedy decoding, or what comes after an <eos>.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from course import decoding
from course.check._framework import (
    Mistake,
    call,
    exercise,
    expect_signature,
    noncontiguous,
)
from course.masking import padding_mask
from course.transformer import Transformer

__all__ = ["greedy_decode"]

_SIGNATURE = "greedy_decode(model, src, max_len, bos_id, eos_id)"
_NAMES = ("model", "src", "max_len", "bos_id", "eos_id")
_VOCAB = 10  # source and target vocabularies
_NEVER = -30.0  # the output bias of <pad> and <bos>: the model never writes them
_MIN_GAP = 0.005  # the best logit leads the second by at least this at every step (tested)


class _Model(Transformer):
    """A Transformer whose repr fits on one line, for the verdict's "on inputs ..." part."""

    def __repr__(self) -> str:
        return (
            f"Transformer(src_vocab={self.src_vocab}, tgt_vocab={self.tgt_vocab}, "
            f"pad_id={self.pad_id})"
        )


@dataclass(frozen=True)
class _Case:
    what: str
    src: tuple[tuple[int, ...], ...]
    max_len: int
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    float64: bool = False
    noncontiguous: bool = False

    def model(self) -> _Model:
        """This case's model, the same weights every time (seeded, eval mode)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            model = _Model(_VOCAB, _VOCAB, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                           dropout=0.3, max_len=32, pad_id=self.pad_id)  # fmt: skip
        with torch.no_grad():
            model.out.bias[self.pad_id] = _NEVER
            model.out.bias[self.bos_id] = _NEVER
        return model.double().eval() if self.float64 else model.eval()

    def source(self) -> torch.Tensor:
        src = torch.tensor(self.src, dtype=torch.long)  # (B, T_src)
        return noncontiguous(src) if self.noncontiguous else src

    def args(self) -> tuple:
        return self.max_len, self.bos_id, self.eos_id


# Chosen for the weights above (tests/test_check_decoding.py checks what each case shows).
_CASES = [
    _Case("four sentences that end with <eos> at steps 4, 2, 6 and 3, max_len = 8",
          ((3, 6, 7, 6, 6), (6, 5, 7, 9, 5), (5, 6, 3, 4, 7), (6, 6, 7, 7, 5)), 8),
    _Case("three sentences, one of which does not end within max_len = 5 (T_out = max_len); "
          "a non-contiguous src",
          ((8, 9, 6, 7, 4), (4, 7, 6, 9, 5), (7, 8, 6, 9, 5)), 5, noncontiguous=True),
    _Case("a batch of one, ending at step 9 of max_len = 10, with a float64 model",
          ((6, 7, 3, 7, 5),), 10, float64=True),
    _Case("two sentences, neither ends within max_len = 6", ((7, 9, 8, 6, 6), (9, 3, 8, 3, 6)), 6),
    _Case("max_len = 1", ((4, 8, 9, 8, 9), (6, 5, 7, 9, 5), (4, 7, 6, 9, 5)), 1),
    _Case("sources of lengths 5, 3 and 4, padded with <pad> = 0, max_len = 8",
          ((3, 6, 7, 6, 6), (3, 6, 7, 0, 0), (5, 6, 3, 4, 0)), 8),
    _Case("other special ids: <pad> = 3, <bos> = 5, <eos> = 4, padded sources, max_len = 7",
          ((0, 9, 3, 3, 3), (1, 2, 1, 3, 3), (1, 9, 6, 5, 3)), 7, pad_id=3, bos_id=5, eos_id=4),
]  # fmt: skip


# ------------------------------------------------- the reference's mistakes ----------


@torch.no_grad()
def _decode(model, src, max_len, bos_id, eos_id, *, causal=True, src_mask="given",
            feed="prefix", position=-1, score="argmax", stop="all", pad_after_eos=True,
            keep_eos=True, extra_steps=0, keep_bos=False, pad_id=None, eos_check=None,
            check_before_append=False) -> torch.Tensor:  # fmt: skip
    """course.decoding.greedy_decode with one mistake switched on (the defaults: none).

    causal=False: decode with an all-True tgt_mask. src_mask: "given" (the padding mask),
    "decode" (left out of decode; encode builds its own), "encode" (all True in encode),
    "pad 0" (built with pad 0). feed: "prefix", "bos" (only <bos>), "last" (only the
    last token). position: which position's logits choose. score:
    "argmax", "softmax batch", "softmax time" (a softmax over that axis, then the argmax
    over the vocabulary). stop: "all" (when all are done), "any" (at the first <eos>),
    "never" (run to max_len). pad_after_eos: overwrite what comes after <eos>.
    keep_eos=False: <eos> itself is overwritten. extra_steps: +1 / -1 steps. keep_bos:
    return <bos> too. pad_id / eos_check: the padding written and the id taken for <eos>
    (hard-coded ids). check_before_append: the loop ends before the step's tokens are
    added.
    """
    pad = model.pad_id if pad_id is None else pad_id
    eos_seen = eos_id if eos_check is None else eos_check
    B = src.shape[0]
    mask = padding_mask(src, 0 if src_mask == "pad 0" else model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, torch.ones_like(mask) if src_mask == "encode" else mask)
    cross_mask = None if src_mask == "decode" else mask
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool)  # (B,)
    for _ in range(max_len + extra_steps):
        fed = {"bos": tokens[:, :1], "last": tokens[:, -1:]}.get(feed, tokens)
        t = fed.shape[1]
        tgt_mask = None if causal else torch.ones(B, 1, t, t, dtype=torch.bool)
        logits = model.decode(fed, memory, cross_mask, tgt_mask)  # (B, t, V)
        if score == "softmax batch":
            logits = logits.softmax(dim=0)
        elif score == "softmax time":
            logits = logits.softmax(dim=1)
        next_token = logits[:, position].argmax(dim=-1)  # (B,)
        ends = next_token == eos_seen  # (B,)
        if not keep_eos:
            done = done | ends
        if pad_after_eos:
            next_token = next_token.masked_fill(done, pad)  # (B,)
        if keep_eos:
            done = done | ends
        if check_before_append and bool(done.all()):
            break
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
        if (stop == "all" and bool(done.all())) or (stop == "any" and bool(done.any())):
            break
    return tokens if keep_bos else tokens[:, 1:]


_FEED = (
    "Each step must feed the decoder the whole prefix, <bos> and every token chosen so far, "
    "and take the last position's logits, logits[:, -1]"
)

_FED_THE_SOURCE = (
    "the decoder is fed the source sentence: it reads the source only through memory (the "
    "cross-attention); its input is the target side, <bos> and the tokens chosen so far. "
    f"{_FEED}"
)

# (diagnosis, keyword arguments of _decode that make that mistake). Checked in this order:
# the first whose output the answer matches is the message.
_MISTAKES: list[tuple[str, dict]] = [
    ("the source's padding is not masked: pass the src_mask to the decoder too, "
     "model.decode(tokens, memory, src_mask) with src_mask = padding_mask(src, model.pad_id), "
     "so that the cross-attention ignores the padded positions of memory",
     dict(src_mask="decode")),
    ("the encoder does not mask the source's padding (an all-True mask, or no src_mask "
     "anywhere): give model.encode(src, src_mask) the mask src_mask = padding_mask(src, "
     "model.pad_id), and model.decode(tokens, memory, src_mask) the same one",
     dict(src_mask="encode")),
    ("the decoder runs without its causal mask (an all-True or padding-only tgt_mask). "
     "Greedy decoding reads only the last position, which may see the whole prefix anyway, "
     "but without the mask each earlier position reads the ones after it, which it never "
     "did in training, and the next layer passes that on to the last position: the tokens "
     "change. Leave tgt_mask out, model.decode(tokens, memory, src_mask): the model then "
     "builds its causal mask itself (or pass causal_mask(t))", dict(causal=False)),
    ("every step chooses the same token: the decoder's input does not grow with the tokens "
     "chosen (it is fed <bos> alone, or another fixed tensor), or the next token is read at "
     f"the first position (logits[:, 0], which sees only <bos>). {_FEED}", dict(position=0)),
    ("the decoder is fed only the last token chosen, so it forgets the rest of the sentence "
     f"and where it is. {_FEED}", dict(feed="last")),
    ("the softmax before the argmax is taken over the batch (dim=0), which mixes the "
     "sentences: the argmax over the vocabulary of logits[:, -1] (dim=-1) is all you need; "
     "a softmax does not change it", dict(score="softmax batch")),
    ("the softmax before the argmax is taken over the positions (dim=1): the argmax over "
     "the vocabulary of logits[:, -1] (dim=-1) is all you need; a softmax does not change it",
     dict(score="softmax time")),
    ("every sentence stops at the first <eos> of any: the loop must go on until every "
     "sentence has written its <eos> (done = done | (next_token == eos_id); stop when "
     "done.all())", dict(stop="any")),
    ("the output runs to max_len with padding after each <eos>: stop the loop as soon as "
     "every sentence has ended (if done.all(): break), so that there are no columns of "
     "padding only (or cut them off before returning)", dict(stop="never")),
    ("no padding after <eos>: a sentence that has written <eos> is done, and gets "
     "model.pad_id at every later step (next_token.masked_fill(done, model.pad_id))",
     dict(pad_after_eos=False)),
    ("your code does not stop at <eos>: it goes on to max_len, and writes whatever the "
     "model says after each <eos>. Keep a `done` flag per sentence: pad once done, and stop "
     "when all are done", dict(pad_after_eos=False, stop="never")),
    ("<eos> is missing: each sentence's <eos> is replaced by padding. Mark a sentence done "
     "*after* writing this step's token (masked_fill with the done of the steps before, "
     "then done = done | (next_token == eos_id))", dict(keep_eos=False)),
    ("the output starts with <bos>: leave it out, return tokens[:, 1:]", dict(keep_bos=True)),
    ("the output is one step too long: a sentence that does not end gets max_len tokens, "
     "no more (for _ in range(max_len)), <bos> not counted", dict(extra_steps=1)),
    ("the output is one step too short: a sentence that does not end gets max_len tokens "
     "(for _ in range(max_len)), <bos> not counted", dict(extra_steps=-1)),
    ("the last sentence to end lacks its <eos>: the loop ends before that step's tokens "
     "are added. Append the step's tokens first, then test done.all()",
     dict(check_before_append=True)),
]  # fmt: skip


def _hard_coded(case: _Case) -> list[tuple[str, dict]]:
    """The mistakes of special ids written as numbers, where this case's ids differ."""
    found = []
    if case.bos_id != 1:
        found.append((f"your code starts with token 1, not bos_id (here {case.bos_id}): use the "
                      "bos_id argument", dict(bos=1)))  # fmt: skip
    if case.eos_id != 2:
        found.append((f"your code ends sentences at token 2, not eos_id (here {case.eos_id}): "
                      "use the eos_id argument", dict(eos_check=2)))  # fmt: skip
    if case.pad_id != 0:
        pad = f"model.pad_id (here {case.pad_id})"
        found += [
            (
                f"your code pads with 0 after <eos> and masks the source's 0s: padding is {pad}, "
                "for the src_mask and after <eos>",
                dict(pad_id=0, src_mask="pad 0"),
            ),
            (f"your code pads with 0 after <eos>: write {pad}", dict(pad_id=0)),
            (
                f"your code builds the src_mask with pad 0: padding is {pad}, "
                "padding_mask(src, model.pad_id)",
                dict(src_mask="pad 0"),
            ),
        ]
    return found


def _wrong_answers(case: _Case):
    """Yields (diagnosis, what that mistake returns on this case): the reshaped answers
    first (cheap), then hard-coded ids, then the rest; each computed only when the ones
    before it did not match."""
    right = _expected(case)
    yield (
        "the output is (T_out, B), one row per step: stack the steps along dim=1 "
        "(torch.stack(steps, dim=1), or torch.cat of (B, 1) columns), one row per sentence",
        right.T,
    )
    yield (
        "the output has a trailing axis of size 1, (B, T_out, 1): the next token of each "
        "sentence is (B,); logits[:, -1].argmax(dim=-1) gives that, then add it as a column "
        "with next_token[:, None]",
        right[..., None],
    )
    model, src = case.model(), case.source()
    max_len, bos_id, eos_id = case.args()
    for diagnosis, how in [*_hard_coded(case), *_MISTAKES]:
        how = dict(how)
        bos = how.pop("bos", bos_id)
        try:
            yield diagnosis, _decode(model, src, max_len, bos, eos_id, **how)
        except (RuntimeError, ValueError):  # this mistake cannot run on this case
            continue


@functools.cache
def _reference(case: _Case) -> torch.Tensor:
    return decoding.greedy_decode(case.model(), case.source(), *case.args())


def _expected(case: _Case) -> torch.Tensor:
    """The reference's answer on this case (computed once: the models never change)."""
    return _reference(case).clone()


# ----------------------------------------------------------------- judging ----------


def _describe_ids(t: torch.Tensor) -> str:
    return str(t.tolist()) if t.numel() <= 60 else f"a tensor of shape {tuple(t.shape)}"


def _expect_eval_mode(model, seen_training: list[bool]) -> None:
    left = any(m.training for m in model.modules())
    if left or any(seen_training):
        how = "and leaves it there" if left else "while decoding"
        raise Mistake(
            f"your code puts the model in training mode (model.train()) {how}: dropout is "
            "then on, and the tokens come out at random. Decoding is inference: leave the "
            "mode as the caller set it (model.eval()), and don't train the model here"
        )


def _expect_ids(got, what: str) -> torch.Tensor:
    """A tensor of integer token ids (torch.long), or the mistake."""
    if isinstance(got, list | tuple):
        raise Mistake(
            f"{what} is a {type(got).__name__}: return one (B, T_out) tensor of token ids, "
            "the steps put together with torch.cat (of (B, 1) columns) or torch.stack(steps, "
            "dim=1)"
        )
    if not isinstance(got, torch.Tensor):
        raise Mistake(f"{what} should be a (B, T_out) tensor of token ids, got a "
                      f"{type(got).__name__}")  # fmt: skip
    if got.dtype != torch.long:
        kind = str(got.dtype).removeprefix("torch.")
        raise Mistake(
            f"{what} is {kind}: token ids are torch.long (int64), as argmax returns them and "
            "embeddings need. Build the tokens with dtype=torch.long (torch.full((B, 1), "
            "bos_id, dtype=torch.long)), and don't convert them"
        )
    return got


def _replay(case: _Case, got: torch.Tensor, want: torch.Tensor) -> str | None:
    """Where the answer's own tokens leave greedy decoding: each token replayed through the
    model (teacher forcing with the answer's prefix), padding after <eos>, the length."""
    model, src = case.model(), case.source()
    max_len, bos_id, eos_id = case.args()
    if got.dim() != 2 or got.shape[0] != src.shape[0]:
        return None
    if got.shape[1] > max_len:
        return (f"the output has {got.shape[1]} tokens per sentence, more than "
                f"max_len = {max_len}: stop after max_len steps")  # fmt: skip
    if got.numel() and (int(got.min()) < 0 or int(got.max()) >= _VOCAB):
        return (
            f"the output holds token ids from {int(got.min())} to {int(got.max())}, but "
            f"the vocabulary has ids 0 .. {_VOCAB - 1}: are these the argmax's indices?"
        )
    B, T = got.shape
    with torch.no_grad():
        mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
        fed = torch.cat([torch.full((B, 1), bos_id), got], dim=1)  # (B, 1 + T)
        logits = model.decode(fed, model.encode(src, mask), mask)  # (B, 1 + T, V)
    for b in range(B):
        for k in range(T):
            token, ended = int(got[b, k]), eos_id in got[b, :k].tolist()
            if ended and token != model.pad_id:
                return (
                    f"sentence {b} has {token} at step {k + 1}, after its <eos>: pad "
                    f"with model.pad_id ({model.pad_id}) once a sentence is done"
                )
            best = int(logits[b, k].argmax())
            if not ended and token != best and logits[b, k, best] - logits[b, k, token] > 1e-3:
                before = " ".join(map(str, got[b, :k].tolist()))
                prefix = f"<bos> {before} (your own tokens)" if k else "<bos>"
                return (
                    f"sentence {b}, step {k + 1}: your code chose token {token}, but after "
                    f"{prefix} the model's most likely next token is {best}. {_FEED}, and "
                    "the argmax over the vocabulary (dim=-1)"
                )
    if T < want.shape[1]:
        b = next(b for b in range(B) if eos_id not in got[b].tolist())
        return (
            f"the output stops after {T} steps, but sentence {b} has not written <eos> yet: "
            f"go on until every sentence has written <eos>, or for max_len = {max_len} steps"
        )
    if T > want.shape[1]:
        return (
            f"the output goes on to {T} steps, but every sentence has written <eos> by step "
            f"{want.shape[1]}: stop as soon as all are done"
        )
    return None  # fmt: skip


_HINTS = {
    "longer than max_len": "Your loop went on past max_len steps: stop after max_len tokens "
    "(for _ in range(max_len)), even when some sentence has not written <eos>",
    "tgt holds token ids": "Your code fed the decoder ids outside its vocabulary: the "
    "prefix is bos_id, then argmax ids over the vocabulary (logits[:, -1].argmax(dim=-1); "
    "without dim, argmax flattens the tensor first), then model.pad_id once a sentence is done",
    "Boolean value of Tensor": "`if next_token == eos_id:` asks about all B sentences at "
    "once. Keep a (B,) flag, done = done | (next_token == eos_id), and stop when done.all()",
    "cannot be converted to Scalar": "`.item()` or `int(...)` reads one sentence's token; "
    "there are B. Keep a (B,) flag, done = done | (next_token == eos_id), and stop when "
    "done.all()",
}


def _hints(error: str) -> str | None:
    """The hint for an error the answer raised: _HINTS, or a size mismatch with the
    vocabulary's size in it (an argmax over the batch or the positions)."""
    for fragment, hint in _HINTS.items():
        if fragment in error:
            return hint
    if "must match" in error and re.search(rf"\b{_VOCAB}\b", error):
        return (
            f"A size {_VOCAB}, the vocabulary's, came where the batch's was expected: the "
            "argmax runs over the vocabulary, logits[:, -1].argmax(dim=-1), one token per "
            "sentence (B,)"
        )
    return None


@dataclass
class _Seen:
    """How an answer ran the model: the source rows the encoder read (B when the encoder
    runs once), and whether any module ran with gradients on."""

    encoded: int = 0
    with_grad: bool = False


def _run(candidate, case: _Case, fed: list | None = None, seen: _Seen | None = None):
    """One call of the answer on a fresh model of the case; checks the model's mode.
    `fed` collects what the answer gave the decoder as its input (tgt); `seen` how it ran
    the model."""
    model, src = case.model(), case.source()
    seen = _Seen() if seen is None else seen
    seen_training: list[bool] = []

    def look(module, _):
        seen_training.append(module.training)
        seen.with_grad |= torch.is_grad_enabled()

    def encoded(_, args):
        if args and isinstance(args[0], torch.Tensor) and args[0].dim():
            seen.encoded += args[0].shape[0]  # (B, T_src): B source sentences

    hooks = [m.register_forward_pre_hook(look) for m in model.modules()]
    hooks.append(model.src_embed.register_forward_pre_hook(encoded))
    if fed is not None:
        hooks.append(model.tgt_embed.register_forward_pre_hook(lambda m, a: fed.append(a[0])))
    try:
        got = call(candidate, model, src, *case.args(), names=_NAMES, hints=_hints)
    finally:
        for hook in hooks:
            hook.remove()
    _expect_eval_mode(model, seen_training)
    return got


def _expect_how(case: _Case, seen: _Seen) -> None:
    """The right tokens, made as the lesson states: the encoder once, no gradients."""
    B = len(case.src)
    if seen.encoded > B:
        raise Mistake(
            f"on {case.what}, your tokens are right, but the encoder ran at every step: it "
            f"encoded {seen.encoded} source sentences for a batch of {B}. The source does "
            "not change while decoding, so the encoder runs once, before the loop: memory = "
            "model.encode(src, src_mask); each step then calls model.decode(tokens, memory, "
            "src_mask) (model(src, tgt) runs the encoder again every time)"
        )
    if seen.with_grad:
        raise Mistake(
            f"on {case.what}, your tokens are right, but the model ran with gradients on: "
            "every step keeps its activations for a backward pass that never comes "
            "(.detach() afterwards does not prevent that). Nothing in decoding needs "
            "gradients: decorate greedy_decode with @torch.no_grad(), as the lesson asks (or "
            "decode inside `with torch.no_grad():`)"
        )


def _check_case(candidate, case: _Case, index: int) -> _Seen:
    """The answer's tokens on this case, or the mistake; returns how it ran the model."""
    want = _expected(case)  # (B, T_out)
    fed: list = []  # what the answer gave the decoder, one (B, t) tensor per call
    seen = _Seen()
    got = _run(candidate, case, fed, seen)
    if index == 0:  # the same inputs twice: greedy decoding has no randomness
        again = _run(candidate, case)
        if isinstance(got, torch.Tensor) and isinstance(again, torch.Tensor):
            if got.shape != again.shape or not torch.equal(got, again):
                raise Mistake(
                    f"on {case.what}, two calls on the same inputs gave different tokens: "
                    "greedy decoding has no randomness. Take the most likely token, "
                    "logits[:, -1].argmax(dim=-1), instead of sampling (torch.multinomial)"
                )
    got = _expect_ids(got, f"on {case.what}, the output")
    if got.shape == want.shape and torch.equal(got, want):
        return seen
    src = case.source()
    if any(isinstance(t, torch.Tensor) and t.shape == src.shape and torch.equal(t, src)
           for t in fed):  # fmt: skip
        raise Mistake(f"on {case.what}, {_FED_THE_SOURCE}")
    if got.dim() == 2 and got.shape[0] == src.shape[0] and got.shape[1] >= 1:
        if bool((got[:, 0] == case.bos_id).all()):  # the model never writes <bos>: kept
            rest = got[:, 1:]
            if rest.shape == want.shape and torch.equal(rest, want):
                rest_wrong = ""
            else:
                rest_wrong = f"; without it, {_diagnose(case, rest, want)}"
            raise Mistake(f"on {case.what}, {_KEPT_BOS}{rest_wrong}")
    raise Mistake(f"on {case.what}, {_diagnose(case, got, want)}")


_KEPT_BOS = "the output starts with <bos>: leave it out, return tokens[:, 1:]"


def _diagnose(case: _Case, got: torch.Tensor, want: torch.Tensor) -> str:
    """What is wrong with `got`, a (B, T) tensor of ids that is not `want`."""
    for diagnosis, answer in _wrong_answers(case):
        if got.shape == answer.shape and torch.equal(got, answer):
            return diagnosis
    reason = _replay(case, got, want)
    if reason:
        return reason
    return (
        f"the output is {_describe_ids(got)} (shape {tuple(got.shape)}), expected "
        f"{_describe_ids(want)} (shape {tuple(want.shape)})"
    )


@exercise("greedy_decode")
def greedy_decode(candidate) -> str:
    expect_signature(candidate, _NAMES, _SIGNATURE)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a sampling answer draws the same on every check
        seen = [_check_case(candidate, case, index) for index, case in enumerate(_CASES)]
        for case, how in zip(_CASES, seen, strict=True):  # the tokens first, then how
            _expect_how(case, how)
    return (
        f"{len(_CASES)} cases: sentences ending at different steps and some never, a batch "
        "of one, max_len = 1, padded sources, other special ids; the same tokens on two "
        "calls; the model left in eval mode and src unchanged; the encoder run once, "
        "without gradients"
    )
