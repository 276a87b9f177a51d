"""Checker for lesson 12: sample_next(logits, temperature=1.0, top_k=None, top_p=None,
generator=None) -> ids.

The contract (course.lm.sample_next): logits (B, V) give ids (B,), logits (V,) one 0-d id,
torch.long. temperature 0 is greedy (the argmax, nothing drawn); otherwise the logits are
divided by the temperature, top-k keeps the k largest (ties with the k-th: all kept, or
exactly k of them; never fewer than k), top-p keeps the smallest set of most probable
tokens whose probability reaches p (the boundary token kept), top-k before top-p (on the
renormalised top-k distribution), and one id per row is drawn from `generator`.

A sampler returns draws, not probabilities, and a correct one may draw them in many ways
(multinomial over the vocabulary or over the sorted tokens, a loop per row, the
Gumbel-max trick), so no exact ids can be required. The checker judges the distribution
each answer samples from, with DRAWS draws per row of every case (one call on a batch of
DRAWS copies of each row, a seeded generator), three ways:

1. support, exactly: a token whose probability is 0 (cut by top-k or top-p) must never be
   drawn, and every token whose probability is at least MUST must be drawn at least once
   (a correct sampler misses one with probability (1 - MUST)^DRAWS < 1e-40);
2. frequencies: every token's share of the draws lies within TOLERANCE of its probability.
   TOLERANCE comes from Hoeffding's inequality, P(|share - p| >= t) <= 2 exp(-2 DRAWS t^2),
   at a false-alarm rate FALSE_ALARM = 1e-12 per token: with 110 such tests in a
   check, a correct answer fails one with probability below 1e-9, whatever its random
   stream, and every mistake below moves some probability by more than twice TOLERANCE
   or changes the support (tests/test_check_sampling.py proves it for every case);
3. the mistake: the first of the case's wrong distributions that the draws fit in the
   same two ways is named.

Cases: temperature 1, 2 and 0.5; top-k = 3 without ties (on logits all below 0, see _LOW)
and with three logits tied at the 3rd place; top-k = 4 at temperature 2 (the threshold of
the divided logits); top-p = 0.5 (a boundary token to keep; the tokens below the top one
hold more than p, so that a nucleus sorted in ascending order leaves the top token out and
is told apart from top_p ignored), 0.3 (only the top token reaches it) and 1.0; a
temperature of 0.5 with top-p (the nucleus of the tempered distribution); a batch
of three different rows (top-k, then top-p on float64 non-contiguous logits); top-k and
top-p together (two cases, see BOTH). Before them: the result's type, dtype and shape for
(V,), (B, V) and (1, V); temperature 0 (with and without top-k and top-p) giving the argmax of
every row with nothing drawn (neither the generator's state nor the global one moves).
Every case's call must leave torch's global random state as it was. After them, the
generator, without filters and with all of them: two generators seeded alike give the
same ids, one generator gives new ids on a second call, and torch's global random state
is untouched; tiny temperatures (0.01, 0.001) drawing only the argmax (no overflow);
generator=None working, and two calls without a generator drawing different ids (no
fixed seed inside). Every call also checks that `logits` is left as it was. The checker
restores torch's global random state in any case.

A mistake is named in a case only where its distribution is told apart from the right
one for sure (`_separated`); a crash gets a hint that depends on the error (a top-k
threshold of the wrong shape, a row cut entirely, logits given to torch.multinomial).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course.check._framework import (
    Mistake,
    call,
    exercise,
    expect_signature,
    noncontiguous,
)

__all__ = ["sample_next"]

_SIGNATURE = "sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None)"
_NAMES = ("logits", "temperature", "top_k", "top_p", "generator")

DRAWS = 4000  # per row of a case
FALSE_ALARM = 1e-12  # per token's frequency test
TOLERANCE = math.sqrt(math.log(2 / FALSE_ALARM) / (2 * DRAWS))  # Hoeffding: about 0.0595
MUST = 0.03  # a token at least this probable must be drawn at least once


# ------------------------------------------------------- the right distribution -----


class _Generator(torch.Generator):
    """A torch.Generator that shows its seed in a verdict (not its memory address)."""

    def __repr__(self) -> str:
        return f"torch.Generator().manual_seed({self.initial_seed()})"


def generator(seed: int) -> torch.Generator:
    gen = _Generator()
    gen.manual_seed(seed)
    return gen


def _renormalised(probs: torch.Tensor) -> torch.Tensor:
    return probs / probs.sum(dim=-1, keepdim=True)  # (R, V)


def _softmax(rows: torch.Tensor, temperature: float) -> torch.Tensor:
    return (rows / temperature).softmax(dim=-1)  # (R, V)


def _top_k(probs: torch.Tensor, k: int | None, strict: bool = False) -> torch.Tensor:
    """Keep the tokens at least as probable as the k-th (strict: only those above the
    (k+1)-th, a mistake), renormalised."""
    if k is None or k >= probs.shape[-1]:
        return probs
    if strict:
        cut = probs.topk(k + 1, dim=-1).values[:, -1:]  # (R, 1)
        return _renormalised(probs * (probs > cut))
    kth = probs.topk(k, dim=-1).values[:, -1:]  # (R, 1)
    return _renormalised(probs * (probs >= kth))


def _top_p(probs: torch.Tensor, p: float | None, boundary=True, in_order=True,
           descending=True) -> torch.Tensor:  # fmt: skip
    """Keep the nucleus: in order of probability (in_order=False: in vocabulary order;
    descending=False: least probable first; both mistakes), a token is kept when the tokens
    before it hold less than p (boundary=False: when the tokens up to and including it hold
    at most p, a mistake)."""
    if p is None or p >= 1:
        return probs
    if in_order:
        sorted_probs, order = probs.sort(dim=-1, descending=descending)  # (R, V) each
    else:
        sorted_probs, order = probs, torch.arange(probs.shape[-1]).expand_as(probs)
    cumulative = sorted_probs.cumsum(dim=-1)  # (R, V)
    keep_sorted = (cumulative - sorted_probs < p) if boundary else (cumulative <= p)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # vocabulary order
    kept = probs * keep
    return _renormalised(kept) if bool((kept.sum(-1) > 0).all()) else kept * math.nan


def _right(rows: torch.Tensor, temperature: float, k=None, p=None) -> torch.Tensor:
    return _top_p(_top_k(_softmax(rows, temperature), k), p)


# ------------------------------------------------------------------- the cases -----

_ROW = (1.2, -0.3, 2.0, 0.4, -0.6, 0.9)
_TIES = (2.0, 0.5, 0.5, 1.2, 0.5, -0.5)  # the 3rd largest, 0.5, three times
# Three rows whose top two tokens split the probability differently (0.69/0.31, 0.62/0.38,
# 0.86/0.14): an answer that mixes the rows of a batch (every row drawn with row 0's
# probabilities) draws the wrong shares even where it keeps the right tokens.
_ROWS = (_ROW, (0.0, 1.5, -0.5, 0.8, 1.0, -1.0), (-0.2, 0.3, 0.1, 3.4, -0.7, 1.6))


@dataclass(frozen=True)
class _Case:
    rows: tuple[tuple[float, ...], ...]
    temperature: float
    top_k: int | None = None
    top_p: float | None = None
    ties: bool = False  # top-k's k-th largest is tied: several supports are right
    dtype: torch.dtype = torch.float32
    contiguous: bool = True

    @property
    def name(self) -> str:
        parts = [f"temperature={self.temperature}"]
        parts += [f"top_k={self.top_k}"] if self.top_k is not None else []
        parts += [f"top_p={self.top_p}"] if self.top_p is not None else []
        if len(self.rows) == 1:
            where = f"logits {list(self.rows[0])}"
        else:
            where = f"a batch of {len(self.rows)} different rows of logits"
        if self.dtype != torch.float32 or not self.contiguous:
            where += f" ({str(self.dtype).removeprefix('torch.')}"
            where += ", non-contiguous)" if not self.contiguous else ")"
        return f"on {where} with {', '.join(parts)}"

    def logits(self) -> torch.Tensor:
        return torch.tensor(self.rows, dtype=torch.float64)  # (R, V)

    def batch(self) -> torch.Tensor:
        """DRAWS copies of every row, row i of the batch being row i % R: (DRAWS * R, V)."""
        batch = self.logits().to(self.dtype).repeat(DRAWS, 1)
        return batch if self.contiguous else noncontiguous(batch)

    def distribution(self) -> torch.Tensor:
        """The course's answer: (R, V) float64 (top-k ties: every tied token kept)."""
        return _right(self.logits(), self.temperature, self.top_k, self.top_p)

    def mistakes(self) -> dict[str, tuple[str, torch.Tensor]]:
        """Mistake -> (its diagnosis, the (R, V) distribution it samples from), for the
        mistakes that change the distribution of this case."""
        rows, T, k, p = self.logits(), self.temperature, self.top_k, self.top_p
        probs = _softmax(rows, T)  # (R, V)
        wrong: dict[str, tuple[str, torch.Tensor]] = {}
        if k is not None:  # first: its draws may also fit "k ignored" or others
            scores = rows / T  # (R, V)
            kth = scores.topk(k, dim=-1).values[:, -1:]  # (R, 1)
            finite = torch.where(scores >= kth, scores, torch.full_like(scores, 1e-10))
            wrong["finite cut"] = (
                _FINITE_CUT,
                _top_p(finite.softmax(dim=-1), p),
            )
            if T != 1:
                raw_kth = rows.topk(k, dim=-1).values[:, -1:]  # (R, 1): before the temperature
                wrong["k from the raw logits"] = (
                    "top-k's threshold was taken from the logits before dividing by the "
                    "temperature, then compared with the divided ones: take the k-th largest "
                    "of the same scores you cut, scores = logits / temperature first, then "
                    "kth = scores.topk(k, dim=-1).values[..., -1:]",
                    _top_p(_renormalised(probs * (scores >= raw_kth)), p),
                )
        if T != 1:
            wrong["multiplied"] = (
                "the logits were multiplied by the temperature: divide them, logits / "
                "temperature (a temperature above 1 flattens the distribution, below 1 "
                "sharpens it)",
                _right(rows, 1 / T, k, p),
            )
            given = [name for name, v in (("top_k", k), ("top_p", p)) if v]
            wrong["temperature ignored"] = (
                "the temperature was ignored"
                + (
                    f" when {' and '.join(given)} {'was' if len(given) == 1 else 'were'} given"
                    if given
                    else ""
                )  # fmt: skip
                + ": divide the logits by it before the softmax"
                + (", then filter" if given else ""),
                _right(rows, 1.0, k, p),
            )
        wrong["softmax twice"] = (
            "the softmax was applied twice (to probabilities, which flattens them): "
            "softmax the scores once, then filter and draw; torch.multinomial takes the "
            "probabilities as they are",
            _right(_softmax(rows, T).softmax(dim=-1).log(), 1.0, k, p),
        )
        if k is not None and p is None and not self.ties and k < rows.shape[-1]:
            kept = _right(rows, T, k).sort(dim=-1, descending=True).values  # (R, V)
            wrong["top-k positions"] = (
                f"the ids drawn are positions in the top-k list (0 .. {k - 1}), not token "
                "ids: map them back to the vocabulary, indices.gather(-1, drawn) (torch.topk "
                "returns the values and their indices)",
                kept,
            )
        wrong["dim 0"] = (
            "the softmax was taken over the batch axis (dim=0): each row's probabilities "
            "come from its own logits, torch.softmax(scores, dim=-1)",
            _renormalised((rows / T).softmax(dim=0)),
        )
        if k is not None:
            wrong["k over the batch"] = (
                "top-k over the whole batch: the k-th largest was taken over every row at "
                "once (a flattened tensor); take it per row, topk(k, dim=-1)",
                _renormalised(probs * (rows == rows.max())),
            )
            if self.ties:
                wrong["ties dropped"] = (
                    "top-k dropped the tokens tied with the k-th largest: the k-th largest "
                    f"logit (k={k}) here is shared by several tokens, and you kept fewer than "
                    f"top_k={k}. Keep every token whose logit is >= the k-th largest (the "
                    "course's rule), or exactly k of them, never fewer than k",
                    _top_p(_top_k(probs, k, strict=True), p),
                )
            elif k >= 2:
                wrong["k - 1"] = (
                    f"top-k kept k - 1 tokens: with top_k={k} you kept {k - 1}, an "
                    "off-by-one. The k-th largest is topk(k).values[..., -1], or "
                    "sorted_logits[..., k - 1]",
                    _right(rows, T, k - 1, p),
                )
            if k > 1:
                smallest = rows.kthvalue(k, dim=-1, keepdim=True).values  # (R, 1)
                wrong["k-th smallest"] = (
                    "top-k's threshold is the k-th *smallest* logit, so almost every token is "
                    "kept: sort() and torch.sort are ascending unless told otherwise. Take the "
                    "k-th largest, scores.topk(k, dim=-1).values[..., -1:] or "
                    "scores.sort(dim=-1, descending=True).values[..., k - 1:k]",
                    _top_p(_renormalised(probs * (rows >= smallest)), p),
                )
            wrong["k ignored"] = (
                "top_k was ignored"
                + (" when top_p was given too" if p is not None else "")
                + ": keep only the k most probable tokens (then apply top-p, if given)",
                _right(rows, T, None, p),
            )
        if p is not None and p < 1:
            if T != 1:  # first: a sharper case than the ones before, its own mistake
                untempered = _top_p(_top_k(_softmax(rows, 1.0), k), p)
                wrong["temperature after"] = (
                    "the temperature must be applied before top-k and top-p: the nucleus is "
                    "the one of the tempered distribution (divide the logits first, then "
                    "filter)",
                    _renormalised((untempered > 0) * probs),
                )
            wrong["boundary dropped"] = (
                "top-p dropped the boundary token: keep the smallest set of most probable "
                "tokens whose probability reaches p, the token that crosses p included (keep "
                "a token while the tokens ranked above it hold less than p)",
                _top_p(_top_k(probs, k), p, boundary=False),
            )
            wrong["unsorted"] = (
                "top-p added up the probabilities in vocabulary order: sort them first "
                "(descending), take the nucleus in that order, and map the kept tokens back "
                "to their ids",
                _top_p(_top_k(probs, k), p, in_order=False),
            )
            wrong["ascending"] = (
                _ASCENDING,
                _top_p(_top_k(probs, k), p, descending=False),
            )
            wrong["sorted positions"] = (
                "the ids drawn are positions in the sorted order (0 is the most probable "
                "token), not token ids: map them back to the vocabulary, order.gather(-1, "
                "drawn) with the order that sort returned",
                self.distribution().sort(dim=-1, descending=True).values,
            )
            wrong["p ignored"] = (
                "top_p was ignored"
                + (" when top_k was given too" if k is not None else "")
                + ": keep the smallest set of most probable tokens whose probability "
                "reaches p",
                _right(rows, T, k, None),
            )
            if k is not None:
                wrong["full nucleus"] = (
                    _FULL_NUCLEUS,
                    _top_k(_top_p(probs, p), k),
                )
        wrong["argmax"] = (
            "your answer always drew the most probable token: only temperature 0 is greedy; "
            "otherwise draw from the distribution, torch.multinomial(probs, 1, "
            "generator=generator)",
            torch.nn.functional.one_hot(rows.argmax(-1), rows.shape[-1]).double(),
        )
        want = self.distribution()  # a mistake is named only where it shows for sure
        return {
            key: (diagnosis, alt)
            for key, (diagnosis, alt) in wrong.items()
            if not torch.isnan(alt).any() and _separated(alt, want)
        }


def _separated(alt: torch.Tensor, want: torch.Tensor) -> bool:
    """Draws from `alt` cannot pass for draws from `want`, nor the reverse: some token's
    probability differs by more than twice TOLERANCE, or one of them draws a token at
    least MUST probable that the other never draws."""
    gap = (alt - want).abs().amax(dim=-1)  # (R,)
    support = ((alt > 0) != (want > 0)) & ((alt >= MUST) | (want >= MUST))  # (R, V)
    return bool((gap > 2 * TOLERANCE).any() or support.any())


_FINITE_CUT = (
    "top-k set the cut tokens to a finite value, not -inf (1e-10, 0 or another number): "
    "exp of it is not 0, so the softmax still gives them probability and they are drawn. "
    "Set their scores to float('-inf'), scores.masked_fill(scores < kth, float('-inf')), "
    "or their probabilities to 0 after the softmax"
)
_ASCENDING = (
    "top-p sorted the probabilities in ascending order (sort() is ascending unless told "
    "otherwise), so its nucleus is made of the least probable tokens: sort(dim=-1, "
    "descending=True), so that the nucleus starts with the most probable token"
)
_FULL_NUCLEUS = (
    "top-p must be applied after top-k, to the top-k distribution renormalised: your "
    "nucleus was measured on the full distribution (top-p applied before top-k, or top-k's "
    "probabilities not renormalised before top-p: their cumulative sum then reaches p later)"
)
# Probabilities 0.30, 0.14, 0.12, 0.11, 0.10, 0.09, 0.08, 0.06 in a shuffled order: a top
# token, then a flat tail, where top-2 renormalised (0.68, 0.32) and the full distribution
# have different nuclei.
_FLAT = tuple(round(math.log(q), 3) for q in (0.11, 0.30, 0.08, 0.14, 0.10, 0.06, 0.12, 0.09))
# The main row shifted down by 3, every logit below 0 (the same probabilities): a cut to 0
# or 1e-10 ("finite cut") gives the cut tokens most of the probability there, so that
# its draws cannot pass for those of an answer that ignores top_k. (On the main row itself
# the cut logits are close to 0, and the two sample alike.)
_LOW = tuple(x - 3 for x in _ROW)

CASES = (
    _Case((_ROW,), 1.0),
    _Case((_ROW,), 2.0),
    _Case((_ROW,), 0.5),
    _Case((_LOW,), 1.0, top_k=3),
    _Case((_TIES,), 1.0, top_k=3, ties=True),
    _Case((_ROW,), 2.0, top_k=4),
    _Case((_ROW,), 1.0, top_p=0.5),
    _Case((_ROW,), 1.0, top_p=0.3),
    _Case((_ROW,), 1.0, top_p=1.0),
    _Case((_ROW,), 0.5, top_p=0.6),
    _Case(_ROWS, 1.0, top_k=2),
    _Case(_ROWS, 1.0, top_p=0.5, dtype=torch.float64, contiguous=False),
)
# top-k and top-p together. The nucleus of the full distribution and the top-k are both
# prefixes of the tokens sorted by probability, so "the nucleus measured on the full
# distribution" (top-p before top-k, or not renormalised) always keeps what ignoring one
# of the two keeps: in the first case what ignoring top_k keeps, in the second what
# ignoring top_p keeps. Only the two together tell the three mistakes apart.
BOTH = (
    _Case((_ROW,), 1.0, top_k=4, top_p=0.7),
    _Case((_FLAT,), 1.0, top_k=2, top_p=0.6),
)


# ----------------------------------------------------------------- the results -----


def _expect_ids(result, shape: tuple[int, ...], V: int, where: str) -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise Mistake(
            f"{where}: the result should be a torch.Tensor of token ids, got a "
            f"{type(result).__name__}. Return the tensor itself (no .item(), int(...) or "
            ".tolist())"
        )
    if result.dtype != torch.long:
        raise Mistake(
            f"{where}: the ids should be integers (torch.long), got "
            f"{str(result.dtype).removeprefix('torch.')}: return the token ids "
            "(torch.multinomial's or argmax's), not probabilities or scores"
        )
    if tuple(result.shape) != shape:
        got = tuple(result.shape)
        if shape == ():
            how = "take the single id, ids[0]"
        elif shape == (1,) and got == ():
            how = (
                "a batch of one row still gives one id per row. .squeeze() removes every "
                "axis of size 1, the batch's too when B = 1: use .squeeze(-1) or [:, 0]"
            )
        elif got == (*shape, 1):
            how = "torch.multinomial(probs, 1) gives (B, 1): take [:, 0] or .squeeze(-1)"
        else:
            how = "one id per row of logits"
        raise Mistake(f"{where}: the ids have shape {got}, expected {shape}: {how}")
    if result.numel() and (int(result.min()) < 0 or int(result.max()) >= V):
        raise Mistake(f"{where}: ids must be token ids 0 .. {V - 1}, got {result.tolist()!r:.60}")
    return result


def _greedy_hint(message: str) -> str | None:
    """The hint for a crash at temperature 0, by what the error says."""
    if "must match the size" in message:
        return _THRESHOLD_SHAPE
    if "too many indices" in message or "Dimension out of range" in message:
        return (
            "a single row of logits (V,) has no batch axis: work on the last axis, "
            "argmax(dim=-1), topk(k, dim=-1).values[..., -1:], not dim=1 or [:, -1]"
        )
    if "temperature" in message:  # the learner's own check refuses 0
        return (
            "temperature=0 is a valid input: it means greedy decoding. Return "
            "logits.argmax(dim=-1) when temperature == 0, before anything else"
        )
    lowered = message.lower()
    # NaN from logits / 0 (torch.multinomial's and Categorical's messages), Python's
    # ZeroDivisionError ("float division by zero"), math.log(0) ("math domain error")
    if any(word in lowered for word in ("nan", "zero", "domain")):
        return (
            "temperature=0 means greedy: return logits.argmax(dim=-1) before using the "
            "temperature (logits / 0 is inf or NaN, and so is the softmax of it)"
        )
    return None


_THRESHOLD_SHAPE = (
    "Top-k's threshold, topk(k).values[:, -1], has shape (B,), which does not line up "
    "with the logits (B, V): keep the last axis, topk(k, dim=-1).values[..., -1:] (B, 1), "
    "or [:, -1].unsqueeze(-1), so that it broadcasts over the vocabulary"
)
_PROBABILITIES = (
    "Softmax the scores first: torch.multinomial takes probabilities, each >= 0 and finite, "
    "not logits nor log-probabilities"
)


def _tiny_hint(temperature: float):
    def hint(message: str) -> str | None:
        if "inf" in message or "nan" in message.lower():
            return (
                f"at temperature={temperature} the scores logits / temperature are in the "
                "hundreds or thousands, and exp of them overflows to inf (inf / inf is NaN). Use "
                "torch.softmax, which subtracts each row's max first, or subtract it yourself"
            )
        return None

    return hint


def _case_hint(case: _Case):
    def hint(message: str) -> str | None:
        if "must match the size" in message:
            return _THRESHOLD_SHAPE
        if "probability tensor contains" in message:
            if case.top_p is not None:
                return (
                    "Some row's probabilities hold NaN (or inf, or < 0): every token of a row "
                    "was cut, and the softmax of a row of -inf is NaN. On a batch, "
                    "sorted_indices[sorted_to_remove] is a flat list of token ids, and "
                    "scores[those ids] = -inf cuts whole rows (the ids index the batch axis): "
                    "map the mask back row by row, to_remove = sorted_to_remove.scatter(-1, "
                    "sorted_indices, sorted_to_remove), then scores.masked_fill(to_remove, "
                    "float('-inf'))"
                )
            return (
                "Some row's probabilities hold NaN, inf or negative values (a row whose every "
                "token is cut to -inf gives NaN). " + _PROBABILITIES
            )
        if "sum of probabilities" in message or "invalid multinomial" in message:
            if case.top_p is not None:
                return (
                    f"with top_p={case.top_p} no token was left to draw: the most probable "
                    "token always reaches p on its own or with others, so it is kept; top-p "
                    "dropped the boundary token (keep a token while the tokens ranked above "
                    "it hold less than p)"
                )
            return "no token was left to draw: top-k must keep at least k tokens"
        return None

    return hint


def _shares(ids: torch.Tensor, R: int, V: int) -> torch.Tensor:
    """(R, V) float64: each row's share of the draws for each token (batch row i is row
    i % R)."""
    rows = torch.arange(ids.shape[0]) % R  # (R * DRAWS,)
    counts = torch.bincount(rows * V + ids, minlength=R * V).reshape(R, V)  # (R, V)
    return counts.double() / DRAWS


def _fits(shares: torch.Tensor, probs: torch.Tensor) -> str | None:
    """None when the draws fit `probs`; else the first problem, in words."""
    for r in range(probs.shape[0]):
        row = f" (row {r})" if probs.shape[0] > 1 else ""
        drawn, p = shares[r], probs[r]
        for v in range(p.shape[0]):
            if drawn[v] > 0 and p[v] == 0:
                return (
                    f"token {v}{row} was drawn {int(drawn[v] * DRAWS)} times in {DRAWS} draws, "
                    "but its probability is 0 here (it should be cut)"
                )
        for v in range(p.shape[0]):
            if drawn[v] == 0 and p[v] >= MUST:
                return (
                    f"token {v}{row} has probability {float(p[v]):.3f} but was never drawn in "
                    f"{DRAWS} draws (it should be kept)"
                )
        gap = (drawn - p).abs()  # (V,)
        v = int(gap.argmax())
        if gap[v] > TOLERANCE:
            return (
                f"token {v}{row} was drawn {float(drawn[v]):.1%} of the time, but its "
                f"probability is {float(p[v]):.1%} (a right sampler stays within "
                f"±{TOLERANCE:.1%} of it)"
            )
    return None


def _tied_support(case: _Case, shares: torch.Tensor) -> torch.Tensor:
    """The right distribution for the support the draws show, when it is one that a
    top-k with ties may keep (every token above the k-th, some tied with it, k or more
    in all); else the course's (every tied token kept)."""
    probs = _softmax(case.logits(), case.temperature)  # (R, V)
    kth = probs.topk(case.top_k, dim=-1).values[:, -1:]  # (R, 1)
    seen = shares > 0  # (R, V)
    above, tied_or_above = probs > kth, probs >= kth
    allowed = (
        (seen | ~above).all()
        and (~seen | tied_or_above).all()
        and bool((seen.sum(-1) >= case.top_k).all())
    )
    support = seen if allowed else tied_or_above
    return _top_p(_renormalised(probs * support), case.top_p)


def _draw(candidate, case: _Case, seed: int) -> tuple[str | None, list[str]]:
    """Judge one case: (None, []) when its draws fit the right distribution, else (the
    first problem in words, the mistakes whose distributions the draws fit)."""
    batch = case.batch()
    R, V = len(case.rows), batch.shape[-1]
    before = torch.get_rng_state()
    got = call(
        candidate, batch, case.temperature, case.top_k, case.top_p, generator(100 + seed),
        names=_NAMES, hints=_case_hint(case),
    )  # fmt: skip
    ids = _expect_ids(got, (batch.shape[0],), V, case.name)
    if not torch.equal(torch.get_rng_state(), before):
        raise Mistake(f"{case.name}, generator given: {_GLOBAL_DRAWN}")
    shares = _shares(ids, R, V)
    want = _tied_support(case, shares) if case.ties else case.distribution()
    problem = _fits(shares, want)
    if problem is None:
        return None, []
    mistakes = case.mistakes()
    fitting = [key for key, (_, alt) in mistakes.items() if _fits(shares, alt) is None]
    if not fitting and bool((ids == ids[0]).all()):
        problem = (
            f"every one of the {ids.shape[0]} rows got the same id, {int(ids[0])}: one id is "
            "drawn per row, torch.multinomial(probs, 1) on the whole (B, V) batch (not "
            "probs[0], nor one draw expanded to every row)"
        )
    return problem, fitting


def _judge(candidate, case: _Case, seed: int) -> None:
    problem, fitting = _draw(candidate, case, seed)
    if problem is not None:
        named = case.mistakes()[fitting[0]][0] if fitting else problem
        raise Mistake(f"{case.name}: {named}")


def _judge_both(candidate, seed: int) -> None:
    """The two cases of BOTH, judged together (see BOTH)."""
    results = [_draw(candidate, case, seed + i) for i, case in enumerate(BOTH)]
    if all(problem is None for problem, _ in results):
        return
    fitting = [set(keys) for _, keys in results]
    for key in ("full nucleus", "k ignored", "p ignored"):
        # a mistake fits both cases (a right case counts as fitting a mistake that
        # changes nothing there)
        if all(
            key in keys or (problem is None and key not in case.mistakes())
            for (problem, _), keys, case in zip(results, fitting, BOTH, strict=True)
        ):
            i = next(i for i, (problem, _) in enumerate(results) if problem is not None)
            raise Mistake(f"{BOTH[i].name}: {BOTH[i].mistakes()[key][0]}")
    for case, (problem, keys) in zip(BOTH, results, strict=True):
        if problem is not None:
            named = case.mistakes()[keys[0]][0] if keys else problem
            raise Mistake(f"{case.name}: {named}")


# ------------------------------------------------------------ the other checks -----


def _expect_shapes(candidate) -> None:
    row = torch.tensor(_ROW)  # (V,)
    where = f"on logits of shape (V,) = {tuple(row.shape)} (one row), temperature=1.0"
    hints = {"probability tensor contains": _PROBABILITIES}
    got = call(candidate, row, 1.0, None, None, generator(0), names=_NAMES, hints=hints)
    _expect_ids(got, (), len(_ROW), where)
    for rows in (torch.tensor(_ROWS), torch.tensor(_ROWS[:1])):  # (B, V), then B = 1
        where = f"on logits of shape (B, V) = {tuple(rows.shape)}, temperature=1.0"
        got = call(candidate, rows, 1.0, None, None, generator(0), names=_NAMES, hints=hints)
        _expect_ids(got, (rows.shape[0],), len(_ROW), where)


def _expect_greedy(candidate) -> None:
    rows = torch.tensor((*_ROWS, _TIES))  # (4, V), no tie for the largest
    want = rows.argmax(dim=-1)  # (4,)
    for k, p in ((None, None), (2, 0.5)):
        for logits, expected in ((rows, want), (rows[0], want[0])):
            where = f"on logits of shape {tuple(logits.shape)} with temperature=0" + (
                f", top_k={k}, top_p={p}" if k is not None else ""
            )
            gen, before = generator(2), torch.get_rng_state()
            state = gen.get_state()
            got = call(candidate, logits, 0.0, k, p, gen, names=_NAMES, hints=_greedy_hint)
            got = _expect_ids(got, tuple(expected.shape), rows.shape[-1], where)
            if not torch.equal(got, expected):
                raise Mistake(
                    f"{where}: got ids {got.tolist()}, expected the argmax of each row, "
                    f"{expected.tolist()}. temperature=0 means greedy: return "
                    "logits.argmax(dim=-1), with no draw and no filter"
                )
            moved = not torch.equal(gen.get_state(), state)
            if moved or not torch.equal(torch.get_rng_state(), before):
                which = "the generator it was given" if moved else "torch's global generator"
                raise Mistake(
                    f"{where}: the ids are the argmax, but your code drew from {which} "
                    "(its state moved): at temperature 0 nothing is drawn, so that the "
                    "draws after it are the ones they would have been. Return "
                    "logits.argmax(dim=-1) first, before any draw (no tiny temperature in its "
                    "place, no torch.multinomial of a one-hot)"
                )


_GLOBAL_DRAWN = (
    "your code drew from torch's global random generator "
    "(torch.multinomial without generator=generator, torch.rand without it, or "
    "torch.distributions.Categorical, whose sample() takes no generator), which moves "
    "the notebook's own random state. Draw from the one you are given: "
    "torch.multinomial(probs, 1, generator=generator)"
)
# (temperature, top_k, top_p) of the generator's checks: plain, then every filter on
_SETTINGS = ((1.0, None, None), (0.8, 4, 0.9))


def _expect_generator_used(candidate) -> None:
    for setting in _SETTINGS:
        _expect_generator_used_with(candidate, *setting)


def _expect_generator_used_with(candidate, temperature, top_k, top_p) -> None:
    batch = torch.tensor(_ROW).repeat(200, 1)  # (200, V)
    where = f"on logits (200, V) with temperature={temperature}" + (
        f", top_k={top_k}, top_p={top_p}" if top_k is not None else ""
    )

    def draw(gen):
        got = call(candidate, batch, temperature, top_k, top_p, gen, names=_NAMES)
        return _expect_ids(got, (200,), len(_ROW), where)

    before = torch.get_rng_state()
    first = draw(generator(11))
    if not torch.equal(torch.get_rng_state(), before):
        raise Mistake(f"{where}, generator given: {_GLOBAL_DRAWN}")
    second = draw(generator(11))
    if not torch.equal(first, second):
        raise Mistake(
            f"{where}: two generators seeded alike (torch.Generator().manual_seed(11)) gave "
            "different ids: every draw must come from `generator`, so that the same seed "
            "gives the same text"
        )
    gen = generator(12)
    if torch.equal(draw(gen), draw(gen)):
        raise Mistake(
            f"{where}: two calls with the same generator drew exactly the same ids: the "
            "generator must move on after each draw. Don't create a new generator or "
            "re-seed the one you are given (generator.manual_seed(...)) inside sample_next: "
            "draw from it as it is"
        )


def _expect_tiny_temperatures(candidate) -> None:
    rows = torch.tensor((*_ROWS, _TIES))  # (4, V): gaps of 0.5 or more to the largest
    batch = rows.repeat(500, 1)  # (2000, V)
    want = batch.argmax(dim=-1)  # (2000,)
    for temperature in (0.01, 0.001):
        where = f"on logits (2000, V) with temperature={temperature}"
        got = call(candidate, batch, temperature, None, None, generator(3), names=_NAMES,
                   hints=_tiny_hint(temperature))  # fmt: skip
        got = _expect_ids(got, (batch.shape[0],), rows.shape[-1], where)
        if not torch.equal(got, want):
            wrong = int((got != want).sum())
            raise Mistake(
                f"{where}: {wrong} of 2000 draws are not the row's most probable token, whose "
                "probability here is 1 - 1e-20 or more: a temperature this small must be "
                "nearly greedy. Divide the logits by the temperature (not multiply)"
            )


def _expect_no_generator_works(candidate) -> None:
    rows = torch.tensor(_ROWS)  # (3, V)
    where = "on logits (3, V) with generator=None"
    hint = {"generator": "generator=None must work: torch.multinomial accepts it"}
    got = call(candidate, rows, 1.0, None, None, None, names=_NAMES, hints=hint)
    _expect_ids(got, (len(_ROWS),), len(_ROW), where)
    batch = torch.tensor(_ROW).repeat(200, 1)  # (200, V)
    for temperature, top_k, top_p in _SETTINGS:
        setting = f"temperature={temperature}" + (
            f", top_k={top_k}, top_p={top_p}" if top_k is not None else ""
        )
        where = f"on logits (200, V) with {setting} and generator=None"
        draws = [
            call(candidate, batch, temperature, top_k, top_p, None, names=_NAMES, hints=hint)
            for _ in range(2)
        ]
        first, second = (_expect_ids(d, (200,), len(_ROW), where) for d in draws)
        if torch.equal(first, second):
            raise Mistake(
                f"{where}, two calls drew exactly the same ids: without a generator your "
                "code draws from a fixed seed (torch.manual_seed(0), "
                "torch.Generator().manual_seed(0), or a new torch.Generator(), which always "
                "starts from the same default seed). With generator=None, draw from torch's "
                "global generator: torch.multinomial(probs, 1, generator=None) does"
            )


@exercise("sample_next")
def sample_next(candidate) -> str:
    expect_signature(candidate, _NAMES, _SIGNATURE)
    state = torch.get_rng_state()
    try:
        _expect_shapes(candidate)
        _expect_greedy(candidate)
        for seed, case in enumerate(CASES):
            _judge(candidate, case, seed)
        _judge_both(candidate, len(CASES))
        _expect_generator_used(candidate)
        _expect_tiny_temperatures(candidate)
        _expect_no_generator_works(candidate)
    finally:
        torch.set_rng_state(state)
    return (
        f"{len(CASES) + len(BOTH)} distributions judged on {DRAWS} draws per row (temperature, "
        "top-k with and without ties and with a temperature, top-p's boundary token, both "
        "together, a batch, float64 and non-contiguous), temperature 0 greedy with nothing "
        "drawn, tiny temperatures greedy, the generator honoured, generator=None not a fixed "
        "seed, the global random state untouched, logits left unchanged"
    )
