"""A shared subword vocabulary: byte-pair encoding (BPE) for lesson 11's French -> English task.

A word-level vocabulary (`course.data.Vocab`) has one id per word it has seen, and nothing
for the others: "fatiguées" is unknown when training only had "fatigué" and "fatiguée". A
character-level one knows every word but makes sentences several times longer, and attention
costs grow with the square of the length. Subwords sit in between: frequent words are one
piece, rare words are spelt with a few frequent pieces (say "▁fatigu" "ées").

**Byte-pair encoding** (Sennrich et al., 2016) learns those pieces from a corpus:

1. start from characters: every word is a sequence of single letters, each word starting
   with "▁", the mark of a word boundary (sentencepiece's convention);
2. count every pair of adjacent pieces over the corpus, inside words only, and merge the
   most frequent pair into a new piece, everywhere it occurs;
3. repeat until the vocabulary has V pieces: the specials, the alphabet, and one new piece
   per merge (so V minus the specials minus the alphabet merges).

Sennrich's example, with "low" 5 times, "lower" 2, "newest" 6 and "widest" 3: "e s" and
"s t" occur 9 times each (newest, widest); "e s" becomes "es", then "es t" becomes "est"
(9); the three merges that build "▁low" (7 times each: low, lower) come next, then those of
"newest" (6 times). After these merges "▁low" is one piece, "▁lower" is "▁low" "e" "r", and
the suffix "est" is shared by "newest" and "widest". Encoding a new sentence replays the
learned merges in order, so a word never seen in training still encodes: at worst letter
by letter.

**One vocabulary for both languages.** The Transformer paper (Vaswani et al., 2017, §5.1)
encodes WMT English-German with "a shared source-target vocabulary of about 37000 tokens"
of BPE, and ties the encoder's embedding, the decoder's embedding and the pre-softmax
projection into one matrix (§3.4). Tying needs one id space: id 517 must be the same string
on both sides. A shared vocabulary is trained on the training split's sentences of both
languages together; French and English share many pieces (names, numbers, punctuation,
"▁table", "tion"), which are then learned once, and a name copied from the source to the
target is the same id in both (`Transformer(..., tie_embeddings=True)` with
`src_vocab == tgt_vocab == len(vocab)`).

**The vocabulary size trades against sequence length.** A small V leaves most words in
several pieces: long sequences, slow attention, and a model that must learn to spell. A
large V makes most words one piece: short sequences, but a bigger embedding matrix and
softmax (V x d_model numbers), and many pieces seen too rarely in training to be learned.
`average_length` measures pieces per sentence for the lesson's table of V against length.

Conventions:

- The course's specials keep their ids: 0 "<pad>", 1 "<bos>", 2 "<eos>" (`course.data`),
  and "<unk>" is id 3 (`UNK_ID`). `encode` never produces 0, 1 or 2; the batches add them.
- The input is already normalized: lowercased, punctuation split off by spaces ("je suis
  très fatigué ." and "i m very tired ."). Pieces never cross a space, and `decode` puts
  one space between words, so decode(encode(text)) == text for such text (runs of
  whitespace, and leading or trailing whitespace, become single spaces / nothing).
- A character the training texts lack has no piece: it encodes to <unk> (id 3), one <unk>
  for a run of such characters, and decodes to the text "<unk>". (Byte fallback, which
  spells unknown characters as UTF-8 bytes, would cost 256 ids in every vocabulary and
  rule out the small vocabularies of the lesson's table.) Training uses every character of
  the training texts (character_coverage=1.0), so every training sentence round-trips.

The BPE itself is Google's sentencepiece library (Kudo & Richardson, 2018), model_type
"bpe", with no text normalization of its own (the rule "identity"): what goes in comes out.
"""

from __future__ import annotations

import io
import numbers
import re
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
from torch import Tensor

from course.tokens import BOS_ID, EOS_ID, PAD_ID, SPECIALS

UNK_ID = 3
UNK = "<unk>"
SUBWORD_SPECIALS = (*SPECIALS, UNK)  # at ids 0, 1, 2, 3
WORD_BOUNDARY = "▁"  # U+2581, starts every piece that starts a word

# sentencepiece's trainer, set up for the course: BPE, the course's specials at fixed ids,
# no normalization, every character of the corpus kept, one thread (the same result on
# every machine), and quiet.
_TRAINER_OPTIONS = dict(
    model_type="bpe",
    character_coverage=1.0,
    normalization_rule_name="identity",
    byte_fallback=False,
    split_by_whitespace=True,
    pad_id=PAD_ID,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    unk_id=UNK_ID,
    pad_piece=SPECIALS[PAD_ID],
    bos_piece=SPECIALS[BOS_ID],
    eos_piece=SPECIALS[EOS_ID],
    unk_piece=UNK,
    unk_surface=UNK,
    hard_vocab_limit=True,
    num_threads=1,
    minloglevel=2,
)
_DEFAULT_MAX_SENTENCE_BYTES = 4192  # sentencepiece silently skips longer sentences


def _words(text: str) -> str:
    """The text with every run of whitespace made one space, none at either end."""
    return " ".join(text.split())


def _check_texts(texts: Iterable[str], what: str) -> list[str]:
    if isinstance(texts, str):
        raise ValueError(f"{what} expects an iterable of sentences, got the str {texts!r}")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(
                f"{what} expects every sentence to be a str, got {text!r} "
                f"({type(text).__name__}) at position {i}"
            )
    return texts


class SubwordVocab:
    """A trained BPE vocabulary: text <-> subword ids, the course's specials at ids 0 to 3.

    Build one with `train_subword_vocab` or `SubwordVocab.load`. `itos[i]` is the piece of
    id i; pieces that start a word start with "▁" (`WORD_BOUNDARY`).
    """

    def __init__(self, model_proto: bytes) -> None:
        """Wrap a serialized sentencepiece model (what `save` writes)."""
        if not isinstance(model_proto, bytes):
            raise ValueError(
                f"SubwordVocab expects the bytes of a sentencepiece model, "
                f"got {type(model_proto).__name__}"
            )
        try:
            processor = spm.SentencePieceProcessor(model_proto=model_proto)
        except RuntimeError as err:
            raise ValueError(
                f"expected a serialized sentencepiece model, got {len(model_proto)} bytes "
                f"that are not one ({err})"
            ) from None
        itos = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        if tuple(itos[: len(SUBWORD_SPECIALS)]) != SUBWORD_SPECIALS:
            raise ValueError(
                f"expected the specials {list(SUBWORD_SPECIALS)} at ids 0 to "
                f"{len(SUBWORD_SPECIALS) - 1}, got {itos[: len(SUBWORD_SPECIALS)]}"
            )
        self._proto = model_proto
        self._sp = processor
        self.itos: list[str] = itos

    # -- pickling (DataLoader workers, spawned processes): the model's bytes are the state
    def __getstate__(self) -> dict:
        return {"model_proto": self._proto}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model_proto"])

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other: object) -> bool:  # the same trained model, byte for byte
        return isinstance(other, SubwordVocab) and self._proto == other._proto

    __hash__ = None

    def __repr__(self) -> str:
        learned = self.itos[len(SUBWORD_SPECIALS) :]
        shown = " ".join(learned[:8]) + (" ..." if len(learned) > 8 else "")
        return f"SubwordVocab({len(self)} BPE pieces: {' '.join(SUBWORD_SPECIALS)} {shown})"

    def encode(self, text: str) -> list[int]:
        """The subword ids of one sentence, no specials added (<unk> for unknown characters)."""
        if not isinstance(text, str):
            raise ValueError(f"encode expects a str, got {text!r} ({type(text).__name__})")
        return self._sp.encode(_words(text), out_type=int)

    def pieces(self, text: str) -> list[str]:
        """The subword pieces of one sentence, as strings: "▁je ▁suis ▁fatigu é ▁." split.

        An unknown character shows as itself here, though it encodes to <unk>.
        """
        if not isinstance(text, str):
            raise ValueError(f"pieces expects a str, got {text!r} ({type(text).__name__})")
        return self._sp.encode(_words(text), out_type=str)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` up to the first <eos> (excluded), skipping <pad> and <bos>.

        Accepts a list of ints or a 1-D tensor. The words come back separated by single
        spaces, as `encode` saw them; an <unk> comes back as the text "<unk>".
        """
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode expects a 1-D tensor of ids, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        if isinstance(ids, str):
            raise ValueError(f"decode expects ids, got the str {ids!r}")
        kept = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                raise ValueError(f"decode expects int ids, got {i!r} ({type(i).__name__})")
            if not 0 <= i < len(self):
                raise ValueError(
                    f"id {i} is out of range: expected 0 to {len(self) - 1} "
                    f"for a vocabulary of {len(self)} pieces"
                )
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            kept.append(int(i))
        return self._sp.decode(kept)

    def save(self, path: str | Path) -> Path:
        """Write the vocabulary to one file (a sentencepiece .model file); returns the path."""
        path = Path(path)
        path.write_bytes(self._proto)
        return path

    @classmethod
    def load(cls, path: str | Path) -> SubwordVocab:
        """Read a vocabulary that `save` wrote: the same pieces, the same encodings."""
        path = Path(path)
        try:
            return cls(path.read_bytes())
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None


def minimum_vocab_size(texts: Iterable[str]) -> int:
    """The smallest vocab_size BPE can train on `texts`: the 4 specials plus the alphabet.

    The alphabet is every distinct character of the texts, with "▁" for the word boundary.
    """
    texts = _check_texts(texts, "minimum_vocab_size")
    alphabet = {c for text in texts for c in _words(text) if c != " "} | {WORD_BOUNDARY}
    return len(SUBWORD_SPECIALS) + len(alphabet)


def train_subword_vocab(
    texts: Iterable[str], vocab_size: int, seed: int = 0, exact: bool = True
) -> SubwordVocab:
    """Train a BPE vocabulary of `vocab_size` pieces (specials included) on `texts` only.

    For a shared vocabulary, pass the training split's sentences of both languages together.
    Deterministic: the same texts and vocab_size give the same vocabulary on every run
    (BPE's merges are counted, not sampled). `seed` seeds sentencepiece's random generator,
    which only its sentence sampling would use; on the full corpus, as here, it changes
    nothing, and is there so that a run states every seed it depends on.

    exact=False makes vocab_size a ceiling: texts too small for that many merges (a user's
    own small file, the tests' sample) give a smaller vocabulary instead of an error.
    """
    texts = _check_texts(texts, "train_subword_vocab")
    sentences = [s for s in (_words(t) for t in texts) if s]
    if not sentences:
        raise ValueError(
            f"train_subword_vocab expects at least one non-empty sentence, got {len(texts)} "
            f"texts and none with a word in it"
        )
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral):
        raise ValueError(
            f"vocab_size must be an int, got {vocab_size!r} ({type(vocab_size).__name__})"
        )
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if not isinstance(exact, bool):
        raise ValueError(f"exact must be True or False, got {exact!r}")
    minimum = minimum_vocab_size(sentences)
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size {vocab_size} is too small for these texts: expected at least "
            f"{minimum} ({len(SUBWORD_SPECIALS)} specials + {minimum - len(SUBWORD_SPECIALS)} "
            f"characters, '▁' for the word boundary included), got {vocab_size}"
        )
    longest = max(len(s.encode("utf-8")) for s in sentences)
    spm.set_random_generator_seed(int(seed))
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=int(vocab_size),
            max_sentence_length=max(_DEFAULT_MAX_SENTENCE_BYTES, longest + 1),
            **{**_TRAINER_OPTIONS, "hard_vocab_limit": exact},
        )
    except RuntimeError as err:
        found = re.search(r"Vocabulary size too high \((\d+)\).*<= (\d+)", str(err))
        if found is None:
            raise
        raise ValueError(
            f"vocab_size {vocab_size} is too large for these texts: BPE runs out of pairs to "
            f"merge; expected at most {found.group(2)}, got {vocab_size}"
        ) from None
    return SubwordVocab(model.getvalue())


def average_length(vocab: SubwordVocab, texts: Iterable[str]) -> float:
    """The mean number of pieces per sentence of `texts` (no specials counted)."""
    texts = _check_texts(texts, "average_length")
    if not texts:
        raise ValueError("average_length expects at least one sentence, got none")
    return sum(len(vocab.encode(text)) for text in texts) / len(texts)
