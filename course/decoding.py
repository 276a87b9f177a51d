"""Decoding a trained encoder-decoder: greedy search and beam search (lesson 09).

Training shows the decoder the right previous words (teacher forcing). At test time
there are none: the model must feed its own output back in, one token at a time,

    memory = encode(src)                                   once
    y_0 = <bos>;  y_t = choose(decode(y_0 .. y_{t-1}, memory)[last position])

until it writes <eos> or reaches max_len. The two ways to choose:

    greedy_decode(model, src, max_len, bos_id, eos_id)
        the most likely next token at every step (argmax);
    beam_search(model, src, max_len, bos_id, eos_id, beam_size=4, alpha=0.6)
        keep the beam_size most likely partial sentences, and pick among the ended ones
        by log-probability over the GNMT length penalty (Wu et al. 2016)
            lp(Y) = ((5 + |Y|) / 6) ** alpha
        the setting of the Transformer paper (beam 4, alpha 0.6, section 6.1).

Both return token ids (B, T_out), T_out <= max_len: without the <bos>, with each
sentence's <eos>, and the model's pad_id after it. `sequence_scores` rescores any such
output under the model, which is how beam search and greedy are compared.

The searches themselves, `greedy_loop` and `beam_loop`, take any next-token scorer: here
the decoder over the whole prefix, in lesson 10 (course.efficient) a KV cache.

`model` is anything with encode(src, src_mask) -> memory, decode(tgt, memory, src_mask)
-> logits (B, T, V) and pad_id, as course.transformer.Transformer. Putting it in eval
mode (no dropout) is the caller's job; no gradients are kept.
"""

from __future__ import annotations

import math
import numbers

import torch

from course.masking import padding_mask
from course.utils import describe, is_token_ids


def _check_args(model, src, max_len, bos_id, eos_id) -> None:
    for name in ("encode", "decode", "pad_id"):
        if not hasattr(model, name):
            raise ValueError(
                f"model must have encode, decode and pad_id (a course.transformer.Transformer), "
                f"got {type(model).__name__} without {name}"
            )
    if not is_token_ids(src):
        raise ValueError(
            f"src must be a (B, T_src) integer tensor of token ids, got {describe(src)}"
        )
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1:
        raise ValueError(f"max_len must be a positive int (tokens to generate), got {max_len!r}")
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be a non-negative int token id, got {value!r}")


def length_penalty(length: int | torch.Tensor, alpha: float = 0.6) -> float | torch.Tensor:
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** alpha; |Y| counts the output's tokens, <eos> too.

    A sentence's log-probability only falls as it grows, so ranking by it alone prefers
    short outputs. Dividing by lp (1 for one token, growing slower than the length for
    alpha < 1) evens that out; alpha = 0 turns it off.
    """
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """src (B, T_src) -> (B, T_out) ids, T_out <= max_len: argmax, one token at a time.

    The encoder runs once. At step t the decoder reads the B prefixes <bos> y_1 .. y_t
    and the last position's logits choose y_{t+1}. A sentence that has written <eos> is
    done: from then on it gets pad_id. The loop ends when every sentence is done, or
    after max_len tokens. The output leaves out <bos> and keeps each <eos>.

    Each step runs the decoder over the whole prefix again, T_out steps of growing
    length: simple, and quadratic in the output's length (lesson 10 caches instead).
    """
    _check_args(model, src, max_len, bos_id, eos_id)
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model): the encoder runs once

    def last_position_logits(tokens: torch.Tensor) -> torch.Tensor:  # (B, t) -> (B, V)
        return model.decode(tokens, memory, src_mask)[:, -1]  # (B, t, V) -> (B, V)

    B = src.shape[0]
    return greedy_loop(last_position_logits, B, max_len, bos_id, eos_id, model.pad_id, src.device)


def greedy_loop(
    next_logits, B: int, max_len: int, bos_id: int, eos_id: int, pad_id: int, device=None
) -> torch.Tensor:
    """The greedy loop around any next-token scorer: next_logits(tokens (B, t)) -> (B, V).

    From <bos>, append each sentence's argmax; a sentence that has written <eos> gets
    pad_id from then on; stop when all are done or after max_len tokens. Returns (B, T_out)
    without <bos>. greedy_decode scores the whole prefix again at each step;
    course.efficient.cached_greedy_decode scores only the newest token, from a cache.
    """
    tokens = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (B, 1): <bos>
    done = torch.zeros(B, dtype=torch.bool, device=device)  # (B,): wrote <eos> already
    for _ in range(max_len):
        next_token = next_logits(tokens).argmax(dim=-1)  # (B, V) -> (B,): the likeliest
        next_token = next_token.masked_fill(done, pad_id)  # (B,): padding once done
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        done = done | (next_token == eos_id)  # (B,)
        if bool(done.all()):
            break
    return tokens[:, 1:]  # (B, 1 + T_out) -> (B, T_out): without <bos>


@torch.no_grad()
def sequence_scores(
    model,
    src: torch.Tensor,
    out: torch.Tensor,
    bos_id: int,
    eos_id: int,
    alpha: float = 0.6,
) -> torch.Tensor:
    """The score beam search ranks by, log P(Y | src) / lp(|Y|), of each row of `out`.

    out (B, T_out) is a decoder's output (no <bos>; each row ends at its first <eos>, or
    runs to the end of the row when it has none, and padding after). One teacher-forced
    pass reads every token's log-probability; returns (B,) float.
    """
    _check_args(model, src, 1, bos_id, eos_id)
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != src.shape[0]:
        raise ValueError(
            f"out must be the (B={src.shape[0]}, T_out) token ids decoded from src, "
            f"got {describe(out)}"
        )
    out = out.long()
    B = out.shape[0]
    bos = torch.full((B, 1), bos_id, dtype=torch.long, device=out.device)  # (B, 1)
    tgt_in = torch.cat([bos, out[:, :-1]], dim=1)  # (B, T_out): shifted right
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    logits = model.decode(tgt_in, model.encode(src, src_mask), src_mask)  # (B, T_out, V)
    log_probs = logits.float().log_softmax(dim=-1)  # (B, T_out, V)
    token_log_probs = log_probs.gather(-1, out[..., None])[..., 0]  # (B, T_out)
    is_eos = (out == eos_id).long()  # (B, T_out)
    before_eos = is_eos.cumsum(dim=1) - is_eos == 0  # (B, T_out): up to and with the 1st <eos>
    lengths = before_eos.sum(dim=1)  # (B,)
    total = (token_log_probs * before_eos).sum(dim=1)  # (B,)
    return total / length_penalty(lengths.float(), alpha)  # (B,)


def _check_beam(beam_size, alpha) -> None:
    if isinstance(beam_size, bool) or not isinstance(beam_size, numbers.Integral) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive int, got {beam_size!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or alpha < 0:
        raise ValueError(f"alpha must be a number >= 0 (0: no length penalty), got {alpha!r}")


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
) -> torch.Tensor:
    """src (B, T_src) -> (B, T_out) ids, T_out <= max_len, the same format as greedy_decode.

    Each sentence keeps K = beam_size hypotheses. At every step each live hypothesis is
    extended by every token, and of those K * V candidates the K with the highest
    log-probability are kept. A kept candidate ending in <eos> leaves the beam, finished,
    scored log P / lp(|Y|); a sentence is done when no live hypothesis can still beat its
    best finished one, and every one stops after max_len tokens (live ones are then
    finished as they are). The answer is the best-scoring finished hypothesis. With K = 1
    this is greedy.

    All sentences search at once: the decoder's batch holds B * K rows, sentence b's
    beam in rows b*K .. b*K + K-1. An empty slot (a beam not yet full at the start, a
    hypothesis that finished) has log-probability -inf, so it never wins a place again.

    Each step runs the decoder over every hypothesis's whole prefix again (lesson 10's
    course.efficient.cached_beam_search caches instead); the search itself is beam_loop.
    """
    _check_args(model, src, max_len, bos_id, eos_id)
    _check_beam(beam_size, alpha)
    B, K = src.shape[0], int(beam_size)
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model): the encoder runs once
    memory = memory.repeat_interleave(K, dim=0)  # (B*K, T_src, d_model): one per hypothesis
    src_mask = src_mask.repeat_interleave(K, dim=0)  # (B*K, 1, 1, T_src)

    def next_log_probs(hypotheses: torch.Tensor) -> torch.Tensor:  # (B*K, t) -> (B*K, V)
        logits = model.decode(hypotheses, memory, src_mask)  # (B*K, t, V): the whole prefix
        return logits[:, -1].float().log_softmax(dim=-1)  # (B*K, V): the next token

    # nothing to reorder: each step decodes the (reordered) prefixes from scratch
    return beam_loop(
        next_log_probs, None, B, K, max_len, bos_id, eos_id, alpha, model.pad_id, src.device
    )


def beam_loop(
    next_log_probs,
    reorder,
    B: int,
    K: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    alpha: float,
    pad_id: int,
    device=None,
) -> torch.Tensor:
    """beam_search's search around any scorer: next_log_probs(hypotheses (B*K, t)) -> (B*K, V).

    next_log_probs gives the next token's log-probabilities for each current hypothesis
    (row b*K + k: sentence b's k-th; each starts with <bos>). After every step's top-k,
    reorder(parent) is told where the K new hypotheses of each sentence come from:
    parent (B*K,) long, the row of each new hypothesis's parent, so that something kept
    per row (a KV cache) can follow; reorder None: nothing to tell. Returns (B, T_out)
    without <bos>, as beam_search. beam_search scores the whole prefixes again at each
    step; course.efficient.cached_beam_search scores only the newest tokens, from a cache.
    """
    hypotheses = torch.full((B, K, 1), bos_id, dtype=torch.long, device=device)  # (B, K, t)
    live_log_prob = torch.full((B, K), -math.inf, device=device)  # (B, K): log P, -inf = empty
    live_log_prob[:, 0] = 0.0  # the search starts from one hypothesis: <bos>
    best_score = torch.full((B,), -math.inf, device=device)  # (B,): best finished so far
    best = torch.full((B, max_len), pad_id, dtype=torch.long, device=device)
    best_length = torch.zeros(B, dtype=torch.long, device=device)  # (B,)
    done = torch.zeros(B, dtype=torch.bool, device=device)  # (B,)
    rows = torch.arange(B, device=device)  # (B,)
    for t in range(1, max_len + 1):
        log_probs = next_log_probs(hypotheses.flatten(0, 1))  # (B*K, t) -> (B*K, V)
        V = log_probs.shape[-1]
        candidates = live_log_prob[..., None] + log_probs.view(B, K, V)  # (B, K, V)
        top_log_prob, flat = candidates.view(B, K * V).topk(K, dim=-1)  # (B, K)
        parent, token = flat // V, flat % V  # (B, K) each: which hypothesis, which token
        kept = (top_log_prob > -math.inf) & ~done[:, None]  # (B, K): real candidates
        ended = kept & ((token == eos_id) | (t == max_len))  # (B, K)
        hypotheses = torch.cat(
            [hypotheses[rows[:, None], parent], token[..., None]], dim=-1
        )  # (B, K, t) gathered by parent, + the new token -> (B, K, t + 1)
        if reorder is not None:  # whatever is kept per row follows its hypothesis
            reorder((rows[:, None] * K + parent).flatten())  # (B, K) -> (B*K,): parent rows
        # the best hypothesis that finished at this step, per sentence
        score = torch.where(ended, top_log_prob / length_penalty(t, alpha), -math.inf)  # (B, K)
        step_best, j = score.max(dim=-1)  # (B,), (B,): the first of equal scores
        better = step_best > best_score  # (B,): strictly, so earlier finishers win ties
        best_score = torch.where(better, step_best, best_score)  # (B,)
        best[better, :t] = hypotheses[rows, j, 1:][better]  # (B, t) without <bos>
        best[better, t:] = pad_id
        best_length = torch.where(better, t, best_length)  # (B,)
        live_log_prob = torch.where(kept & ~ended, top_log_prob, -math.inf)  # (B, K)
        # a live log P only falls as it grows, and lp is largest at max_len: no live
        # hypothesis can end above its log P / lp(max_len). Stop when none can beat the best.
        ceiling = live_log_prob.max(dim=-1).values / length_penalty(max_len, alpha)  # (B,)
        done |= best_score >= ceiling  # (B,): also when none is live (ceiling -inf)
        if bool(done.all()):
            break
    return best[:, : int(best_length.max())]  # (B, max_len) -> (B, T_out)
