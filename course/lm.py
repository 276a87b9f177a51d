"""One stack, no encoder: a small GPT, its data, its perplexity and how it samples (lesson 12).

A decoder-only Transformer is the encoder-decoder of lesson 08 with the encoder and the
cross-attention taken away. What is left is a stack of layers with one self-attention
each, under a causal mask: course.layers.EncoderLayer given `causal & padding` as its mask
is exactly such a block. Trained to predict every next token of a text, it is a language
model, the family of GPT:

    tokens (B, T) --embed--> N x [x + attn(norm1(x)), x + ff(norm2(x))] --norm--> --out--> logits

Design, and why:

- **pre-LN** (norm_first=True) with one LayerNorm after the last layer: the residual
  stream carries gradients to the first layer untouched (lesson 07), which is what lets
  GPT-2 and its successors train deep stacks without a long warm-up.
- **tied embeddings**: the output layer's weight *is* the input embedding matrix (Press
  and Wolf 2017): one (V, d_model) matrix instead of two, and a token's output score is
  the dot product of the last layer's vector with that token's own embedding.
- **rotary positions** (RoFormer, lesson 05): every self-attention rotates its queries and
  keys by their positions, so a score sees only how far apart two tokens are. A sentence
  reads the same wherever it starts, no table is added to the embeddings, and the KV
  cache needs nothing new: lesson 10's kv_cache_attention already rotates the newest key
  by its position t (the cache holds keys rotated once, each by its own position). It is
  what most of today's open decoder-only models (GPT-NeoX, LLaMA) use.
- **padding**: pad id 0 (course.data.PAD_ID), right-padded batches; the mask hides padded
  keys and the loss ignores padded targets.

The data (`load_lm_data`): the English side of lesson 11's Tatoeba file, each sentence
`tatoeba.full_normalize`d, every distinct sentence once. The held-out split is grouped:
sentences that differ only in case or in their final punctuation ("I'm tired." and "I'm
tired!") are one group, so no held-out sentence (nor its near twin) is in training. The
BPE vocabulary (course.subword) is trained on the training split only. A sequence is
`<bos> pieces <eos>`: the model reads <bos> first and must end the sentence itself.

Perplexity (`perplexity`) is exp of the mean next-token cross-entropy over the held-out
split's real tokens: every piece and the final <eos> is predicted, <bos> never (it is
given) and padding never. A perplexity of N means the model is, on average, as unsure as
if it chose uniformly among N tokens at each step. Two baselines on the same tokens give
the floor to beat (`unigram_perplexity`, `bigram_perplexity`, see `BigramBaseline`).

Generation (`generate`): one token at a time, each chosen by `sample_next` (greedy,
temperature, top-k, top-p) from the newest position's logits, with a KV cache (`LMCache`,
`lm_step`) so that each step feeds only the newest token.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from course import tatoeba
from course.efficient import _self_attend_step
from course.layers import EncoderLayer, LayerNorm
from course.masking import decoder_mask
from course.positional import TokenEmbedding
from course.subword import SubwordVocab, train_subword_vocab
from course.tokens import BOS_ID, EOS_ID, PAD_ID, pad_rows
from course.utils import describe, is_token_ids, write_atomically

__all__ = [
    "ROTARY_BASE",
    "LM_VOCAB_SIZE",
    "LM_TEST_FRACTION",
    "LanguageModel",
    "lm_loss",
    "lm_batches",
    "perplexity",
    "LMData",
    "english_sentences",
    "near_duplicate_key",
    "load_lm_data",
    "unigram_probabilities",
    "BigramBaseline",
    "unigram_perplexity",
    "bigram_perplexity",
    "sample_next",
    "LMCache",
    "lm_step",
    "generate",
    "generation_speedup",
    "train_lm",
    "save_lm",
    "load_lm",
]

ROTARY_BASE = 10000.0  # lesson 05's base
# English alone needs fewer pieces than lesson 11's shared French + English vocabulary
# (8,000): at 4,000 the median sentence is still only a few pieces longer than its words,
# and the output softmax, which a small CPU model pays for at every position, is half as wide.
LM_VOCAB_SIZE = 4000
LM_TEST_FRACTION = 0.02  # about 1,900 held-out sentences: a stable perplexity, quick to compute


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {describe(value)}")
    return int(value)


# ------------------------------------------------------------------------ the model --


class LanguageModel(nn.Module):
    """A decoder-only Transformer: LanguageModel(vocab_size)(tokens (B, T)) -> logits (B, T, V).

    Position t's logits are the model's scores for the token at t + 1, computed from
    tokens[:, :t + 1] only (the causal mask). Attributes:

        embed    TokenEmbedding: ids -> vectors * sqrt(d_model); its matrix is also `out`'s
        drop     dropout on the embeddings
        layers   nn.ModuleList of n_layers pre-LN EncoderLayer, rotary self-attention
        norm     the final LayerNorm (pre-LN leaves the residual stream un-normalised)
        out      nn.Linear(d_model, vocab_size), weight tied to embed.embedding.weight

    max_len bounds the sequences it accepts (rotary positions have no table to run out
    of, but a model is only known to work on lengths it was trained on).
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        n_heads: int = 4,
        n_layers: int = 4,
        d_ff: int = 1024,
        dropout: float = 0.1,
        max_len: int = 128,
        pad_id: int = PAD_ID,
        *,
        fused: bool = False,
    ):
        super().__init__()
        self.vocab_size = _positive_int("vocab_size", vocab_size)
        n_layers = _positive_int("n_layers", n_layers)
        self.max_len = _positive_int("max_len", max_len)
        if isinstance(pad_id, bool) or not isinstance(pad_id, numbers.Integral):
            raise ValueError(f"pad_id must be an int token id, got {describe(pad_id)}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must be a token id, 0 .. {vocab_size - 1}, got {pad_id}")
        self.pad_id = int(pad_id)
        self.config = dict(
            vocab_size=self.vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
            d_ff=d_ff, dropout=dropout, max_len=self.max_len, pad_id=self.pad_id,
        )  # fmt: skip
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [
                EncoderLayer(
                    d_model,
                    n_heads,
                    d_ff,
                    dropout,
                    norm_first=True,
                    rotary_base=ROTARY_BASE,
                    fused=fused,
                )  # fmt: skip
                for _ in range(n_layers)
            ]
        )
        self.norm = LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab_size)
        self.out.weight = self.embed.embedding.weight  # tied: one (V, d_model) matrix, two uses
        for p in self.parameters():  # as course.transformer: Xavier on every matrix
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @property
    def d_model(self) -> int:
        return self.embed.d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) ids, right-padded with pad_id -> logits (B, T, vocab_size)."""
        if not is_token_ids(tokens) or tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(
                f"tokens must be a non-empty (B, T) integer tensor of token ids, got "
                f"{describe(tokens)}"
            )
        T = tokens.shape[1]
        if T > self.max_len:
            raise ValueError(
                f"tokens has T={T} positions, longer than max_len={self.max_len}: cut the "
                "sequence or build the model with a larger max_len"
            )
        mask = decoder_mask(tokens, self.pad_id)  # (B, 1, T, T): causal & a real key
        x = self.drop(self.embed(tokens))  # (B, T) -> (B, T, d_model); no position table
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d_model): q and k rotated inside the attention
        return self.out(self.norm(x))  # (B, T, d_model) -> (B, T, vocab_size)

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, pad_id={self.pad_id}, max_len={self.max_len}"


def lm_loss(model: LanguageModel, tokens: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy of `<bos> pieces <eos> <pad>...` rows, tokens (B, T).

    The model reads tokens[:, :-1] and must predict tokens[:, 1:]: every piece and <eos>,
    never <bos> (it is never a target) and never padding (ignored). reduction "mean"
    averages over the real targets, "sum" adds them (for a perplexity over many batches).
    """
    if not is_token_ids(tokens) or tokens.shape[1] < 2:
        raise ValueError(
            f"tokens must be a (B, T) tensor of ids with T >= 2 (<bos> and at least one token "
            f"to predict), got {describe(tokens)}"
        )
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (B, T - 1) each: shifted by one
    logits = model(inputs)  # (B, T - 1, V)
    return F.cross_entropy(
        logits.flatten(0, 1),  # (B * (T - 1), V)
        targets.flatten(),  # (B * (T - 1),)
        ignore_index=model.pad_id,
        reduction=reduction,
    )


def lm_batches(
    sequences: Sequence[Sequence[int]],
    batch_size: int,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
) -> Iterator[torch.Tensor]:
    """One epoch of (B, T) long tensors, each row a sequence right-padded with PAD_ID."""
    batch_size = _positive_int("batch_size", batch_size)
    if not sequences:
        raise ValueError("lm_batches needs at least one sequence, got none")
    if shuffle:
        order = torch.randperm(len(sequences), generator=generator).tolist()
    else:
        order = list(range(len(sequences)))
    for start in range(0, len(order), batch_size):
        yield pad_rows([sequences[i] for i in order[start : start + batch_size]])


@torch.no_grad()
def perplexity(
    model: LanguageModel, sequences: Sequence[Sequence[int]], batch_size: int = 128
) -> float:
    """exp(mean next-token cross-entropy) over every real target of `sequences`.

    The mean is over tokens, not sentences: the sum of every target's -log p divided by
    their number (pieces and <eos>; <bos> and padding are never predicted). The model is
    run in eval mode (no dropout) and left in the mode it was in.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    try:
        for batch in lm_batches(sequences, batch_size):
            batch = batch.to(device)  # (B, T)
            total += float(lm_loss(model, batch, reduction="sum"))
            count += int((batch[:, 1:] != model.pad_id).sum())
    finally:
        model.train(was_training)
    return math.exp(total / count)


# ------------------------------------------------------------------------- the data --


@dataclass(frozen=True)
class LMData:
    """The language-modelling data: `<bos> pieces <eos>` id lists and their texts."""

    train: list[list[int]]
    test: list[list[int]]
    vocab: SubwordVocab
    train_text: list[str]
    test_text: list[str]

    @property
    def max_len(self) -> int:
        """The longest sequence, <bos> and <eos> included."""
        return max(len(s) for s in self.train + self.test)

    def __repr__(self) -> str:
        return (
            f"LMData({len(self.train)} train / {len(self.test)} held-out sentences, "
            f"{len(self.vocab)} BPE pieces, longest {self.max_len} tokens)"
        )


def english_sentences(pairs: Sequence[tuple[str, str]], max_words: int | None = None) -> list[str]:
    """Every distinct English sentence of (English, French) pairs, tatoeba.full_normalize'd,
    in the order first seen; at most `max_words` words (default tatoeba.FULL_MAX_WORDS)."""
    max_words = tatoeba.FULL_MAX_WORDS if max_words is None else max_words
    sentences = (tatoeba.full_normalize(english) for english, _ in pairs)
    return list(dict.fromkeys(s for s in sentences if s and len(s.split()) <= max_words))


_FINAL_PUNCTUATION = re.compile(r"[\s.!?…]+$")


def near_duplicate_key(sentence: str) -> str:
    """The group of a sentence for the held-out split: lowercased, final . ! ? dropped."""
    return _FINAL_PUNCTUATION.sub("", sentence.lower())


def load_lm_data(
    seed: int = 0,
    vocab_size: int = LM_VOCAB_SIZE,
    test_fraction: float = LM_TEST_FRACTION,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> LMData:
    """The English side of the Tatoeba file as `<bos> pieces <eos>` sequences.

    pairs: (English, French) pairs; default the data directory's file (course.tatoeba,
    downloaded once when absent). The split is tatoeba.grouped_split by
    `near_duplicate_key`, `seed` drawing it; the BPE vocabulary (at most vocab_size
    pieces, fewer for a small file) is trained on the training sentences only, so a
    held-out character it never saw becomes <unk>.
    """
    if pairs is None:
        pairs = tatoeba.load_pairs()
    sentences = english_sentences(pairs)
    train_text, test_text = tatoeba.grouped_split(
        sentences, group=near_duplicate_key, test_fraction=test_fraction, seed=seed
    )
    vocab = train_subword_vocab(train_text, vocab_size, seed=seed, exact=False)

    def ids(text: str) -> list[int]:
        return [BOS_ID, *vocab.encode(text), EOS_ID]

    return LMData(
        train=[ids(s) for s in train_text],
        test=[ids(s) for s in test_text],
        vocab=vocab,
        train_text=train_text,
        test_text=test_text,
    )


# -------------------------------------------------------------------- the baselines --
# Both predict the same targets as the model: every token after <bos>, <eos> included.
# Neither ever predicts <pad> or <bos>, so their probabilities spread over the V - 2 other
# ids, every one of which gets some probability (no held-out token has probability 0).


def _predictable(vocab_size: int) -> torch.Tensor:
    """Bool (V,): the ids a model must predict, every one but <pad> and <bos>."""
    keep = torch.ones(vocab_size, dtype=torch.bool)
    keep[[PAD_ID, BOS_ID]] = False
    return keep


def _check_sequences(sequences: object, what: str, vocab_size: int) -> None:
    if not isinstance(sequences, Sequence) or not sequences:
        raise ValueError(f"{what} must be a non-empty list of id lists, got {describe(sequences)}")
    for seq in sequences:
        if len(seq) < 2 or seq[0] != BOS_ID:
            raise ValueError(f"every sequence of {what} must be <bos> then tokens, got {seq!r}")
        if min(seq) < 0 or max(seq) >= vocab_size:
            raise ValueError(f"{what} holds an id outside 0 .. {vocab_size - 1}: {seq!r}")


def unigram_probabilities(train: Sequence[Sequence[int]], vocab_size: int) -> torch.Tensor:
    """P(w), float64 (V,), from the training targets with add-one (Laplace) smoothing:

        P(w) = (count(w) + 1) / (N + V'),  N targets counted, V' = V - 2 predictable ids,

    0 for <pad> and <bos>. Every other id, seen in training or not, gets at least 1/(N+V')."""
    _check_sequences(train, "train", vocab_size)
    counts = torch.zeros(vocab_size, dtype=torch.float64)  # (V,)
    for seq in train:
        counts += torch.bincount(torch.tensor(seq[1:]), minlength=vocab_size)
    keep = _predictable(vocab_size)  # (V,)
    smoothed = (counts + 1.0) * keep  # (V,): add one to every predictable id
    return smoothed / smoothed.sum()


class BigramBaseline:
    """P(w | v) from training counts, interpolated with the add-one unigram (Witten-Bell):

        P(w | v) = lambda_v * c(v, w) / c(v) + (1 - lambda_v) * P_unigram(w),
        lambda_v = c(v) / (c(v) + n(v)),

    c(v) how often v is followed by something in training, c(v, w) how often by w, n(v)
    how many *different* tokens followed v. A context followed by many different tokens
    (n(v) large for its c(v)) is one where a new token is likely, so it trusts its own
    counts less (Witten and Bell 1991). No parameter to tune. An unseen bigram still gets
    (1 - lambda_v) * P_unigram(w) > 0, and an unseen context falls back to the unigram,
    so every held-out token has a finite cost.
    """

    def __init__(self, train: Sequence[Sequence[int]], vocab_size: int):
        self.unigram = unigram_probabilities(train, vocab_size)  # (V,)
        self.pairs = Counter((v, w) for seq in train for v, w in pairwise(seq))
        self.context = Counter(v for seq in train for v in seq[:-1])  # c(v)
        self.followers = Counter(v for v, _ in self.pairs)  # n(v), distinct followers
        self.vocab_size = vocab_size

    def prob(self, v: int, w: int) -> float:
        c_v = self.context[v]
        if c_v == 0:  # a context never seen in training: the unigram alone
            return float(self.unigram[w])
        lam = c_v / (c_v + self.followers[v])
        return lam * self.pairs[(v, w)] / c_v + (1.0 - lam) * float(self.unigram[w])


def _mean_cost_to_perplexity(costs: list[float]) -> float:
    return math.exp(sum(costs) / len(costs))


def unigram_perplexity(
    train: Sequence[Sequence[int]], test: Sequence[Sequence[int]], vocab_size: int
) -> float:
    """The add-one unigram's perplexity on the test targets (every token after <bos>)."""
    _check_sequences(test, "test", vocab_size)
    log_p = unigram_probabilities(train, vocab_size).log()  # (V,)
    return _mean_cost_to_perplexity([-float(log_p[w]) for seq in test for w in seq[1:]])


def bigram_perplexity(
    train: Sequence[Sequence[int]], test: Sequence[Sequence[int]], vocab_size: int
) -> float:
    """BigramBaseline's perplexity on the test targets: the first piece is predicted from
    <bos>, each next one from the one before, and <eos> from the last piece."""
    _check_sequences(test, "test", vocab_size)
    bigram = BigramBaseline(train, vocab_size)
    costs = [-math.log(bigram.prob(v, w)) for seq in test for v, w in pairwise(seq)]
    return _mean_cost_to_perplexity(costs)


# ---------------------------------------------------------------------- sampling --


def _check_sampling(logits, temperature, top_k, top_p, generator) -> None:
    if (
        not isinstance(logits, torch.Tensor)
        or logits.dim() not in (1, 2)
        or not logits.dtype.is_floating_point
        or logits.shape[-1] == 0
        or logits.numel() == 0
    ):
        raise ValueError(
            f"logits must be a float tensor (V,) or (B, V) of scores, got {describe(logits)}"
        )
    if torch.isnan(logits).any() or (logits == math.inf).any():
        raise ValueError("logits hold NaN or +inf: a score must be a number, or -inf (banned)")
    if (logits == -math.inf).all(dim=-1).any():
        raise ValueError("a row of logits is all -inf: no token left to choose")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, numbers.Real)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise ValueError(
            f"temperature must be a number >= 0 (0 = greedy), got {describe(temperature)}"
        )
    if top_k is not None and (
        isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1
    ):
        raise ValueError(f"top_k must be None or an int >= 1, got {describe(top_k)}")
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1
    ):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {describe(top_p)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {describe(generator)}")


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Choose the next token from logits (B, V) -> ids (B,) long, or (V,) -> a 0-d id.

    - temperature: the logits are divided by it before the softmax. 1 keeps the model's
      distribution, above 1 flattens it, below 1 sharpens it; 0 is greedy, the argmax
      (the first one when several logits tie for the largest), and draws nothing.
    - top_k: keep the k tokens with the largest logits, and every token whose logit ties
      with the k-th largest (so more than k when there are ties at the k-th place; the
      rule of a threshold, logit >= k-th largest). None or k >= V keeps all.
    - top_p (nucleus sampling, Holtzman et al. 2020): keep the smallest set of most
      probable tokens whose probability reaches p: in order of probability, a token is
      kept when the tokens ranked above it hold less than p, so the token that crosses
      p (the boundary token) is kept. The most probable token is always kept. 1 keeps all.
    - both: temperature first, then top-k, then top-p on the distribution top-k left
      (renormalised). The kept tokens' probabilities are renormalised to sum to 1.

    One id per row is drawn with torch.multinomial(..., generator=generator): the same
    generator state gives the same ids, and torch's global random state is not touched
    (generator=None draws from it). Computed in float64; `logits` is left unchanged.
    """
    _check_sampling(logits, temperature, top_k, top_p, generator)
    if temperature == 0:  # greedy: no distribution, no draw
        return logits.argmax(dim=-1)  # (B, V) -> (B,), or (V,) -> ()
    rows = logits.detach().to(torch.float64)  # a new tensor: logits stay as they were
    one_row = rows.dim() == 1
    if one_row:
        rows = rows.unsqueeze(0)  # (V,) -> (1, V)
    # shift so that the largest is 0, then scale: no overflow however small the temperature
    scaled = (rows - rows.max(dim=-1, keepdim=True).values) / temperature  # (B, V)
    V = scaled.shape[-1]
    if top_k is not None and top_k < V:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]  # (B, V) -> (B, 1): the k-th largest
        scaled = scaled.masked_fill(scaled < kth, -math.inf)  # ties with the k-th stay
    probs = scaled.softmax(dim=-1)  # (B, V), renormalised over what top-k kept
    if top_p is not None and top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each
        above = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V): mass ranked above each
        drop_sorted = above >= top_p  # p was reached without this token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # vocab order
        probs = probs.masked_fill(drop, 0.0)  # (B, V); multinomial renormalises
    ids = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B, 1) -> (B,)
    return ids[0] if one_row else ids  # (B,), or () for one row


# -------------------------------------------------------- generation with a KV cache --


@dataclass
class LMCache:
    """What incremental generation keeps between steps, for a batch of B rows.

    self_kv      per layer, the self-attention's (k, v), each (B, h, t, d_k), keys already
                 rotated by their positions (None before the first step);
    key_is_real  (B, t), True where the token fed at that position is not padding.
    """

    self_kv: list[tuple[torch.Tensor | None, torch.Tensor | None]]
    key_is_real: torch.Tensor

    @property
    def length(self) -> int:
        """t, the number of positions fed so far: the next token's position."""
        return self.key_is_real.shape[1]

    @classmethod
    def start(cls, model: LanguageModel, batch: int, device=None) -> LMCache:
        key_is_real = torch.zeros(batch, 0, dtype=torch.bool, device=device)  # (B, 0)
        return cls([(None, None)] * len(model.layers), key_is_real)


def lm_step(model: LanguageModel, token: torch.Tensor, cache: LMCache) -> torch.Tensor:
    """Feed the token at position t = cache.length, token (B,) ids; returns its logits (B, V).

    The same numbers as model(prefix)[:, -1] for the prefix fed so far plus this token,
    on one position: each layer's self-attention appends the new key and value to its
    cache and attends over it (course.efficient's step, with rotary positions), then the
    feed-forward runs on the new position alone.
    """
    t = cache.length
    if t >= model.max_len:
        raise ValueError(
            f"position {t} is past the model's max_len={model.max_len}: generate fewer tokens"
        )
    token = token[:, None]  # (B,) -> (B, 1)
    cache.key_is_real = torch.cat([cache.key_is_real, token != model.pad_id], dim=1)  # (B, t+1)
    mask = cache.key_is_real[:, None, None, :]  # (B, t + 1) -> (B, 1, 1, t + 1)
    x = model.drop(model.embed(token))  # (B, 1) -> (B, 1, d_model)
    for i, layer in enumerate(model.layers):  # pre-LN, as EncoderLayer.forward
        x = x + _self_attend_step(layer, layer.norm1(x), cache, i, mask)  # (B, 1, d_model)
        x = x + layer.dropout2(layer.ff(layer.norm2(x)))  # (B, 1, d_model)
    return model.out(model.norm(x))[:, 0]  # (B, 1, d_model) -> (B, 1, V) -> (B, V)


@torch.no_grad()
def generate(
    model: LanguageModel,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int = EOS_ID,
    use_cache: bool = True,
) -> torch.Tensor:
    """Continue each row of prompt (B, T0) by up to max_new_tokens tokens -> (B, T0 + n).

    The prompt has no padding (every row the same length; start it with <bos>). Each step
    draws one token per row with sample_next(newest logits, temperature, top_k, top_p,
    generator); a row that has written eos_id gets padding after it, and generation stops
    when every row has, or after max_new_tokens. use_cache=True feeds only the newest
    token each step (lm_step, LMCache); use_cache=False reruns the model on the whole
    sequence every step: the same tokens, more work. The model must be in eval mode.
    """
    if model.training:
        raise ValueError("generate runs the model in eval mode (no dropout): call model.eval()")
    if not is_token_ids(prompt) or prompt.shape[0] == 0 or prompt.shape[1] == 0:
        raise ValueError(
            f"prompt must be a non-empty (B, T0) tensor of ids, got {describe(prompt)}"
        )
    if (prompt == model.pad_id).any():
        raise ValueError(
            "prompt must hold no padding: give every row the same length (generate one "
            "prompt at a time, or a batch of equal-length prompts)"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral):
        raise ValueError(f"max_new_tokens must be an int >= 1, got {describe(max_new_tokens)}")
    max_new_tokens = _positive_int("max_new_tokens", max_new_tokens)
    B, T0 = prompt.shape
    if T0 + max_new_tokens > model.max_len + 1:
        raise ValueError(
            f"a prompt of {T0} tokens plus {max_new_tokens} new ones is longer than the model's "
            f"max_len={model.max_len}: ask for at most {model.max_len + 1 - T0} new tokens"
        )
    tokens = prompt
    if use_cache:
        cache = LMCache.start(model, B, prompt.device)
        for t in range(T0):  # read the prompt into the cache, one position at a time
            logits = lm_step(model, prompt[:, t], cache)  # (B, V): after the last, the next's
    else:
        logits = model(tokens)[:, -1]  # (B, T0, V) -> (B, V)
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)  # (B,)
    for step in range(max_new_tokens):
        chosen = sample_next(logits, temperature, top_k, top_p, generator)  # (B, V) -> (B,)
        chosen = chosen.masked_fill(done, model.pad_id)  # padding after a row's <eos>
        tokens = torch.cat([tokens, chosen[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        done = done | (chosen == eos_id)
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        if use_cache:
            logits = lm_step(model, chosen, cache)  # only the newest token is fed
        else:
            logits = model(tokens)[:, -1]  # the whole sequence again: (B, t + 1, V) -> (B, V)
    return tokens


def generation_speedup(
    model: LanguageModel, prompt: torch.Tensor, n_tokens: int = 64, repeats: int = 3
) -> dict:
    """Time greedy generation of exactly n_tokens (no <eos> stops it), recomputing vs
    cached; the two must agree (checked). Returns recompute_s, cached_s (the best of
    `repeats`), speedup, n_tokens, batch."""
    no_eos = model.vocab_size  # an id no logit stands for: every row runs n_tokens

    def run(use_cache: bool) -> torch.Tensor:
        return generate(model, prompt, n_tokens, 0.0, eos_id=no_eos, use_cache=use_cache)

    if not torch.equal(run(False), run(True)):  # also the warm-up
        raise RuntimeError("cached and recomputed generation disagree on this prompt")
    seconds = {}
    for use_cache in (False, True):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run(use_cache)
            times.append(time.perf_counter() - start)
        seconds[use_cache] = min(times)
    return dict(
        recompute_s=seconds[False],
        cached_s=seconds[True],
        speedup=seconds[False] / seconds[True],
        n_tokens=n_tokens,
        batch=prompt.shape[0],
    )


# ------------------------------------------------------ training and checkpoints --


def train_lm(
    model: LanguageModel,
    sequences: Sequence[Sequence[int]],
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    time_budget: float | None = None,
) -> list[float]:
    """A plain training loop (AdamW, the next-token loss) for `steps` steps or until
    time_budget seconds have passed; returns the loss of every step. Batches are drawn
    from a generator seeded by `seed`, a new shuffle each epoch. The losses stay on the
    model's device until the end, then come back in one transfer (no step waits for a GPU:
    course.train.TrainingLog says why)."""
    steps = _positive_int("steps", steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    model.train()
    losses: list[torch.Tensor] = []  # one 0-d tensor per step, on the device
    start = time.perf_counter()
    while len(losses) < steps:
        for batch in lm_batches(sequences, batch_size, shuffle=True, generator=gen):
            loss = lm_loss(model, batch.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.detach())
            out_of_time = time_budget is not None and time.perf_counter() - start > time_budget
            if len(losses) >= steps or out_of_time:
                return torch.stack(losses).tolist()
    return torch.stack(losses).tolist()


CHECKPOINT_KIND = "course.lm"


def save_lm(path: str | Path, model: LanguageModel, vocab, **extra) -> Path:
    """Write the model's configuration and weights and the BPE vocabulary to one file
    (atomically); `extra` (seed, steps, metrics, ...) is kept beside them."""
    path = Path(path)
    state = dict(
        kind=CHECKPOINT_KIND,
        config=model.config,
        model={k: v.detach().cpu() for k, v in model.state_dict().items()},
        vocab=vocab.__getstate__()["model_proto"],
        extra=extra,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, functools.partial(torch.save, state))
    return path


def load_lm(path: str | Path, device: str | torch.device = "cpu"):
    """(model in eval mode, vocab, extra) from a file save_lm wrote.

    FileNotFoundError when there is no file; ValueError when it is not such a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same message
        raise ValueError(f"cannot read {path} as a checkpoint ({type(error).__name__})") from None
    if not isinstance(state, dict) or state.get("kind") != CHECKPOINT_KIND:
        raise ValueError(
            f"{path} is not a language-model checkpoint (expected one written by "
            "`python -m course.train --task lm-en` or course.lm.save_lm)"
        )
    model = LanguageModel(**state["config"])
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return model, SubwordVocab(state["vocab"]), state.get("extra", {})
