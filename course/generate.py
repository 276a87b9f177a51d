"""Let a trained language model continue your words: `python -m course.generate`.

    python -m course.train --task lm-en                       # runs/lm-en/checkpoint.pt
    python -m course.generate --prompt "I am"                 # one continuation, T = 1
    python -m course.generate --prompt "Tom" --temperature 0  # greedy
    python -m course.generate --prompt "Where" --top-k 20 --top-p 0.9 --seed 3 --samples 5

The prompt is cleaned as the training sentences were (tatoeba.full_normalize: the text as
written, one space between words) and cut into the model's subword pieces; the model reads
`<bos> pieces` and adds up to --max-new-tokens pieces, each drawn by course.lm.sample_next
(--temperature, --top-k, --top-p) from a generator seeded by --seed, until it writes
<eos>. Each of the --samples continuations is printed on its own line, prompt included.

Bad input gets a message on stderr and exit status 2, never a traceback: an empty prompt,
a character the vocabulary cannot encode (it would be <unk>), a temperature below 0, a
top-p outside (0, 1], a top-k below 1, a missing or unreadable checkpoint.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from course.data import BOS_ID

DEFAULT_CHECKPOINT = Path("runs/lm-en/checkpoint.pt")
EMPTY_PROMPT = 'give a prompt to continue, e.g. --prompt "I am"'


class GenerateError(Exception):
    """A problem with the command line, the checkpoint or the prompt: printed, exit 2."""


def check_settings(
    temperature: float, top_k: int | None, top_p: float | None, max_new_tokens: int, samples: int
) -> None:
    """Raise GenerateError naming the first setting out of range."""
    if not math.isfinite(temperature) or temperature < 0:
        raise GenerateError(
            f"--temperature must be a number >= 0 (0: greedy, 1: the model's own "
            f"distribution), got {temperature}"
        )
    if top_k is not None and top_k < 1:
        raise GenerateError(f"--top-k must be an int >= 1 (or left out), got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise GenerateError(f"--top-p must be in (0, 1] (or left out), got {top_p}")
    if max_new_tokens < 1:
        raise GenerateError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")
    if samples < 1:
        raise GenerateError(f"--samples must be at least 1, got {samples}")


def load(path: Path | str, device: str | torch.device = "cpu"):
    """(model in eval mode, vocab) from a language-model checkpoint; GenerateError if none."""
    from course import lm

    path = Path(path)
    try:
        model, vocab, _ = lm.load_lm(path, device)
    except FileNotFoundError:
        raise GenerateError(
            f"there is no checkpoint at {path}; train one first: python -m course.train "
            f"--task lm-en (it writes {DEFAULT_CHECKPOINT})"
        ) from None
    except ValueError as error:
        raise GenerateError(str(error)) from None
    return model, vocab


def encode_prompt(vocab, prompt: str) -> list[int]:
    """`<bos>` and the prompt's pieces; GenerateError for an empty prompt or a character
    the vocabulary has no piece for."""
    from course.subword import UNK_ID
    from course.tatoeba import full_normalize

    if not isinstance(prompt, str):
        raise GenerateError(f"the prompt must be text, got {type(prompt).__name__}")
    text = full_normalize(prompt)
    if not text:
        raise GenerateError(EMPTY_PROMPT)
    ids = vocab.encode(text)
    if UNK_ID in ids:
        pieces = vocab.pieces(text)
        unknown = sorted({c for piece, i in zip(pieces, ids, strict=True) if i == UNK_ID
                          for c in piece.replace("\u2581", "")})  # fmt: skip
        raise GenerateError(
            f"the prompt {text!r} has characters the model's vocabulary cannot encode "
            f"(they would be <unk>): {' '.join(map(repr, unknown))}. The model was trained "
            "on Tatoeba's English sentences: use the letters, digits and punctuation they have"
        )
    return [BOS_ID, *ids]


@torch.no_grad()
def continuations(
    model,
    vocab,
    prompt: str,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    max_new_tokens: int = 30,
    samples: int = 1,
) -> list[str]:
    """`samples` continuations of `prompt`, each the prompt's text and what the model wrote
    after it, up to its <eos> (or max_new_tokens pieces, fewer if the model's max_len is
    reached first). The same seed gives the same texts."""
    from course import lm

    check_settings(temperature, top_k, top_p, max_new_tokens, samples)
    ids = encode_prompt(vocab, prompt)
    room = model.max_len + 1 - len(ids)  # the model reads at most max_len positions
    if room < 1:
        raise GenerateError(
            f"the prompt is {len(ids) - 1} pieces long; this model reads at most "
            f"{model.max_len - 1} after <bos>: shorten it"
        )
    device = next(model.parameters()).device
    prompt_ids = torch.tensor([ids] * samples, device=device)  # (samples, T0)
    generator = torch.Generator(device=device).manual_seed(seed)
    out = lm.generate(
        model, prompt_ids, min(max_new_tokens, room), temperature, top_k, top_p, generator
    )  # (samples, T0 + n)
    return [vocab.decode(row) for row in out]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m course.generate",
        description="Continue a prompt with a language model trained by "
        "python -m course.train --task lm-en.",
    )
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--prompt", required=True, help='the words to continue: "I am"')
    parser.add_argument("--temperature", type=float, default=1.0, help="0: greedy (default 1)")
    parser.add_argument("--top-k", type=int, default=None, help="keep the k most likely")
    parser.add_argument("--top-p", type=float, default=None, help="nucleus: keep mass p")
    parser.add_argument("--seed", type=int, default=0, help="seeds the draws (default 0)")
    parser.add_argument("--max-new-tokens", type=int, default=30, help="default 30 pieces")
    parser.add_argument("--samples", type=int, default=1, help="continuations (default 1)")
    parser.add_argument(
        "--device", default="cpu", help="cpu (default), auto (CUDA, else Apple's MPS), cuda, mps"
    )
    return parser.parse_args(argv)


def _choose_device(name: str) -> torch.device:
    from course.utils import device

    try:
        return device(name)
    except ValueError as error:
        raise GenerateError(f"--device {error}") from None


def _checked(device: torch.device, model, vocab, prompt: str) -> torch.device:
    """`device`, or the CPU where it is Apple's MPS and the model's loss on the prompt there
    is not the CPU's (course.utils.mps_checked)."""
    if device.type != "mps":
        return device
    from course import lm
    from course.utils import mps_checked

    ids = torch.tensor([encode_prompt(vocab, prompt)])  # (1, T0)
    return mps_checked(device, model, lm.lm_loss, ids)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_settings(args.temperature, args.top_k, args.top_p, args.max_new_tokens,
                       args.samples)  # fmt: skip
        if not args.prompt.strip():  # said before the (slower) checkpoint is read
            raise GenerateError(EMPTY_PROMPT)
        device = _choose_device(args.device)
        model, vocab = load(args.checkpoint)
        model = model.to(_checked(device, model, vocab, args.prompt))
        texts = continuations(
            model, vocab, args.prompt, args.temperature, args.top_k, args.top_p, args.seed,
            args.max_new_tokens, args.samples,
        )  # fmt: skip
    except GenerateError as error:
        print(f"python -m course.generate: error: {error}", file=sys.stderr)
        return 2
    for text in texts:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
