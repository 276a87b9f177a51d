"""Translate your own sentence with a trained model: `python -m course.translate`.

    python -m course.train --task fra-eng                 # 10 minutes: runs/fra-eng/
    python -m course.translate --checkpoint runs/fra-eng/checkpoint.pt "je suis très fatigué ."
    python -m course.translate --checkpoint runs/fra-eng/checkpoint.pt --beam 4 \\
        --attention attention.png "elle est plus grande que moi ."
    python -m course.train --task fra-eng-full            # 20 minutes: runs/fra-eng-full/
    python -m course.translate --checkpoint runs/fra-eng-full/checkpoint.pt --beam 4 \\
        "Je ne sais pas où il est allé."

The sentence is normalized exactly as the training pairs were (course.data.load_task's
task.tokenize): for fra-eng lowercase, accents dropped, . ! ? split off, so "Je suis très
fatigué." works as well; for fra-eng-full the text as written, in subword pieces. A word
(fra-eng) or a character (fra-eng-full) the training split never had is read as <unk>,
and said so on stderr; an empty sentence, or one longer than the model's positions, is
refused with a message.

`load(path)` gives (model, task) back from a checkpoint of course.train, for lesson 11's
last cell; `translate(model, task, sentence)` does the rest.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from course.data import BOS_ID, EOS_ID, REAL_TASKS, UNK, load_task
from course.masking import padding_mask


class TranslateError(Exception):
    """A problem with the command line, the checkpoint or the sentence: printed, exit 2."""


@dataclass
class Translation:
    """What `translate` returns: the translation, the words it read and wrote, the words
    it did not know, and the cross-attention (T_out, T_src) of the decoder's last layer,
    averaged over its heads, for plotting (None for a model that keeps none)."""

    text: str
    source_words: list[str]
    output_words: list[str]
    unknown: list[str]
    attention: torch.Tensor | None


def load(path: Path | str, device: str | torch.device = "cpu"):
    """(model in eval mode, task) from a checkpoint of `python -m course.train` on a real task."""
    from course.train import build_model  # the trainer builds the model a checkpoint fits

    path = Path(path)
    if not path.is_file():
        raise TranslateError(
            f"there is no checkpoint at {path}; train one first: "
            "python -m course.train --task fra-eng (it writes runs/fra-eng/checkpoint.pt)"
        )
    try:  # the RNG state and everything else stays on the CPU; only the weights move
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise TranslateError(f"cannot read {path} as a checkpoint ({error})") from None
    if not isinstance(checkpoint, dict) or not {"task", "seed", "config", "model"} <= set(
        checkpoint
    ):
        raise TranslateError(f"{path} is not a checkpoint of python -m course.train")
    if checkpoint["task"] not in REAL_TASKS:
        raise TranslateError(
            f"{path} was trained on {checkpoint['task']!r}, not on real sentences: "
            f"translate needs a checkpoint of {', '.join(REAL_TASKS)}"
        )
    task = load_task(checkpoint["task"], seed=checkpoint["seed"])  # the same vocabularies
    model = build_model(task, checkpoint["config"])
    model.load_state_dict(checkpoint["model"])
    return model.to(device).eval(), task


def _cross_attention(model) -> torch.Tensor | None:
    """The last decoder layer's cross-attention of the latest decode, averaged over heads."""
    layers = getattr(model, "decoder_layers", None)
    if layers is not None:
        weights = layers[-1].cross_attn.attn  # (B, h, T_out, T_src) or None
        return None if weights is None else weights[0].mean(dim=0)  # (T_out, T_src)
    weights = getattr(model, "attn", None)  # the GRU's (B, T_out, T_src)
    return None if weights is None else weights[0]


@torch.no_grad()
def translate(model, task, sentence: str, beam: int = 1) -> Translation:
    """Normalize `sentence`, translate it (greedy, or beam search with `beam` > 1), and
    read the cross-attention back from one more teacher-forced pass over the output."""
    from course.decoding import beam_search, greedy_decode
    from course.efficient import cached_beam_search, cached_greedy_decode

    if not isinstance(sentence, str) or not sentence.strip():
        raise TranslateError('give a sentence to translate, e.g. "je suis très fatigué ."')
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise TranslateError(f"--beam must be a positive int (1: greedy), got {beam!r}")
    words = task.tokenize(sentence)  # the task's normalization: words or subword pieces
    if not words:
        raise TranslateError(
            f"nothing is left of {sentence!r} once normalized for {task.name}"
            + (" (it reads the letters a-z and . ! ? only)" if task.name == "fra-eng" else "")
        )
    if len(words) > task.max_src_len:
        raise TranslateError(
            f"{len(words)} {task.unit} is too long for this model: it was trained on "
            f"sentences of at most {task.max_src_len} {task.unit} ({task.name}); split the "
            "sentence"
        )
    unknown = [word for word in words if word not in task.src_vocab.stoi]
    known = [word if word not in unknown else UNK for word in words]
    device = next(model.parameters()).device
    src = torch.tensor([task.src_vocab.encode(known) + [EOS_ID]], device=device)  # (1, T_src)
    max_len = task.max_tgt_len + 1
    cached = hasattr(model, "decoder_layers")  # the Transformer: lesson 10's KV cache
    if beam > 1:
        search = cached_beam_search if cached else beam_search
        out = search(model, src, max_len, BOS_ID, EOS_ID, beam_size=beam, alpha=0.6)
    else:
        out = (cached_greedy_decode if cached else greedy_decode)(
            model, src, max_len, BOS_ID, EOS_ID
        )  # (1, T_out)
    ids = out[0].tolist()
    ids = ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else ids  # with its <eos>
    tgt_in = torch.tensor([[BOS_ID, *ids[:-1]]], device=device)  # (1, T_out)
    src_mask = padding_mask(src, model.pad_id)  # (1, 1, 1, T_src)
    model.decode(tgt_in, model.encode(src, src_mask), src_mask)  # keeps every step's attention
    output = [task.tgt_vocab.itos[i] for i in ids if i != EOS_ID]
    return Translation(
        text=task.detokenize(output),
        source_words=known + ["<eos>"],
        output_words=output + (["<eos>"] if EOS_ID in ids else []),
        unknown=unknown,
        attention=_cross_attention(model),
    )


def save_attention(translation: Translation, path: Path | str) -> None:
    """The cross-attention of `translation` as a heatmap PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course.plotting import attention_heatmap

    if translation.attention is None:
        raise TranslateError("this model keeps no attention weights to plot")
    ax = attention_heatmap(
        translation.attention,
        queries=translation.output_words,
        keys=translation.source_words,
        title="cross-attention, last decoder layer (mean of the heads)",
    )
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=100)
    plt.close(ax.figure)


def _choose_device(name: str) -> torch.device:
    from course.utils import device

    try:
        return device(name)
    except ValueError as error:
        raise TranslateError(f"--device {error}") from None


def _checked(device: torch.device, model, task) -> torch.device:
    """`device`, or the CPU where it is Apple's MPS and the model's loss on the first
    held-out pairs there is not the CPU's (course.train.checked_device)."""
    if device.type != "mps":
        return device
    from torch import nn

    from course.data import PAD_ID, make_batches
    from course.train import checked_device

    batch = next(make_batches(task.test[:64], task, 64, shuffle=False))
    return checked_device(device, model, nn.CrossEntropyLoss(ignore_index=PAD_ID), batch)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course.translate",
        description="Translate a French sentence with a model trained by "
        "python -m course.train --task fra-eng (or fra-eng-full).",
    )
    parser.add_argument("sentence", help='the sentence, in quotes: "je suis très fatigué ."')
    parser.add_argument("--checkpoint", type=Path, default=Path("runs/fra-eng/checkpoint.pt"))
    parser.add_argument("--beam", type=int, default=1, help="beam size (1: greedy, default)")
    parser.add_argument("--attention", type=Path, help="save the cross-attention map as a PNG")
    parser.add_argument(
        "--device", default="cpu", help="cpu (default), auto (CUDA, else Apple's MPS), cuda, mps"
    )
    args = parser.parse_args(argv)
    try:
        device = _choose_device(args.device)
        model, task = load(args.checkpoint)
        model = model.to(_checked(device, model, task))
        result = translate(model, task, args.sentence, beam=args.beam)
        if result.unknown:
            print(
                f"note: not among the {len(task.src_vocab):,} {task.unit} the model was "
                f"trained on, read as <unk>: {', '.join(result.unknown)}",
                file=sys.stderr,
            )
        if args.attention is not None:
            save_attention(result, args.attention)
            print(f"cross-attention saved to {args.attention}", file=sys.stderr)
    except TranslateError as error:
        print(f"python -m course.translate: error: {error}", file=sys.stderr)
        return 2
    print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
