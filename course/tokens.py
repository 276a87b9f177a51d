"""Token-level basics, the ground floor of the course's data: special ids, `Vocab`, `pad_rows`.

Every data source above this module (course.generated, course.tatoeba, course.subword,
course.lm) and the task registry above them all (course.data) build on these, and this
module imports none of them:

    PAD_ID = 0 ("<pad>"), BOS_ID = 1 ("<bos>"), EOS_ID = 2 ("<eos>")   the same everywhere
    UNK = "<unk>"          a real task's stand-in for a word its training split never had
    Vocab(tokens)          words <-> ids, the three specials first
    pad_rows(rows)         id lists of different lengths -> one (B, T) tensor, PAD_ID after

An id that a Vocab gives is in range by construction (0 .. len(vocab) - 1): batches built
from a Vocab's ids need no check of their values later, in the model, where reading them
back from a GPU would cost a wait at every step.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")  # at ids PAD_ID, BOS_ID, EOS_ID
UNK = "<unk>"  # a real task's stand-in for a word its training split never had

Pair = tuple[tuple[str, ...], tuple[str, ...]]  # (source words, target words)


class Vocab:
    """Words <-> ids: the three specials first, then each distinct token in the order given.

    `itos[i]` is the word of id i, `stoi[word]` the id of a word. Building a Vocab from
    another's `itos` gives the same Vocab (the specials are not added twice).
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str):
            raise ValueError(f"Vocab expects an iterable of tokens, got the str {tokens!r}")
        tokens = list(tokens)
        for token in tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"every token must be a non-empty str, got {token!r}")
        self.itos: list[str] = list(dict.fromkeys([*SPECIALS, *tokens]))
        self.stoi: dict[str, int] = {word: i for i, word in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:  # two Vocabs are equal when their words are
        return isinstance(other, Vocab) and self.itos == other.itos

    __hash__ = None  # mutable, like the list it wraps

    def __repr__(self) -> str:
        return (
            f"Vocab({len(self)} words: {' '.join(self.itos[:8])}{' ...' if len(self) > 8 else ''})"
        )

    def encode(self, words: Sequence[str]) -> list[int]:
        """The ids of `words` (a sequence of words, not a sentence string), no specials added."""
        if isinstance(words, str):
            raise ValueError(
                f"encode expects a sequence of words, got the str {words!r}: split it first"
            )
        ids = []
        for word in words:
            if word not in self.stoi:
                raise ValueError(
                    f"unknown word {word!r}: not among the {len(self)} words of this vocabulary"
                )
            ids.append(self.stoi[word])
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The words of `ids` up to the first <eos> (excluded), skipping <pad> and <bos>.

        Accepts a list of ints or a 1-D tensor.
        """
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode expects a 1-D tensor of ids, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        words = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise ValueError(f"decode expects int ids, got {i!r} ({type(i).__name__})")
            if not 0 <= i < len(self):
                raise ValueError(f"id {i} is out of range for a vocabulary of {len(self)} words")
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            words.append(self.itos[i])
        return words


def pad_rows(rows: Sequence[Sequence[int]]) -> Tensor:
    """Rows of ids of different lengths -> one long tensor (len(rows), longest), PAD_ID after."""
    longest = max(len(row) for row in rows)
    batch = torch.full((len(rows), longest), PAD_ID, dtype=torch.long)  # (B, T)
    for b, row in enumerate(rows):
        batch[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return batch
