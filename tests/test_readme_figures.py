"""A figure that the README's pages quote and a lesson also prints is the same number.

The lessons fill their prose from the run (`{{ expr }}`, see course.authoring), and each
solution notebook records the values it was filled with. The README and its pages in docs/
(the results that were the README's long sections until issue 34 moved them) are not
generated, so each figure a page shares with a lesson is listed here: the page's text
around it, with the figure as the one group, and the lesson field that holds the run's
value. A rebuilt lesson whose run changes a figure fails this test until the page says the
same.
"""

import re

import nbformat
import pytest

from course.authoring import ROOT

# The page that quotes each lesson's figures.
PAGES = {
    "09_training": "docs/training.md",  # Training the model (`make train`)
    "11_translation": "docs/translation.md",  # Translating real sentences (lesson 11)
    "12_decoder_only": "docs/gpt.md",  # A small GPT (lesson 12)
}

# (a pattern in the lesson's page with the figure as its one group, lesson notebook, field)
FIGURES = [
    (r"\(([\d,]+) training pairs, [\d,]+ held-out", "09_training", "len(task.train):,"),
    (r"training pairs, ([\d,]+) held-out\s+sentences", "09_training", "len(task.test):,"),
    (r"2 decoder layers, ([\d,]+) parameters\)", "09_training", "n_parameters:,"),
    (r"and takes (\d+) steps of 64 sentences", "09_training", 'config["steps"]'),
    (r"\*\*([\d,]+) pairs\*\* \(the tutorial's", "11_translation", "len(sentences):,"),
    (r"seeded: ([\d,]+) training pairs", "11_translation", "len(task.train):,"),
    (r"training pairs and ([\d,]+) held-out ones", "11_translation", "len(task.test):,"),
    (r"`eng-fra.txt`: ([\d,]+) English", "11_translation", "len(pairs):,"),
    (r"\((\d+%) of a random 10% split's", "11_translation", "leaked / len(random_test):.0%"),
    (r"\(([\d,]+) French and [\d,]+ English entries", "11_translation", "len(task.src_vocab):,"),
    (r"[\d,]+ French and ([\d,]+) English entries", "11_translation", "len(task.tgt_vocab):,"),
    (r"`<unk>`\): (\d+) held-out French sentences", "11_translation", "unknown_sources"),
    (r"and (\d+) held-out\s+answers a word", "11_translation", "unknown_targets"),
    (r"2 \+ 2 layers, beam 4 \| ([\d,]+) \(seed 0\)", "11_translation", "transformer_parameters:,"),
    (r"hidden 128, greedy \| ([\d,]+) \(seed 0\)", "11_translation", "gru_parameters:,"),
    (r"In these short runs on ([\d,]+) short pairs", "11_translation", "len(task.train):,"),
    (r"on each side\*\*: ([\d,]+) of the", "11_translation", "len(full):,"),
    (r"the (\d+) pairs left out", "11_translation", "len(pairs) - len(full)"),
    (r"fall on the same side: ([\d,]+) training", "12_decoder_only", "len(data.train):,"),
    (r"training and ([\d,]+) held-out\s+sentences", "12_decoder_only", "len(data.test):,"),
    (r"\n([\d,]+) parameters; AdamW", "12_decoder_only", "n_params:,"),
    (r"with a vocabulary of ([\d,]+) pieces", "12_decoder_only", "len(data.vocab):,"),
    (r"sentences for seed 0, ([\d,]+) held-out tokens", "12_decoder_only", "n_targets:,"),
    (
        r"clipped to norm 1, (\d+) seconds of training",
        "12_decoder_only",
        'config["time_budget"]:.0f',
    ),
    (r"\| 0 \| 2,750 \| 26\.7 \| ([\d.]+) \|", "12_decoder_only", "bigram:.1f"),
    (r"\| 0 \| 2,750 \| 26\.7 \| [\d.]+ \| ([\d.]+) \|", "12_decoder_only", "unigram:.1f"),
    (r"same model for (\d+) steps on one thread", "12_decoder_only", "STEPS"),
    (r"\(held-out perplexity ([\d.]+) in\s+its stored run", "12_decoder_only", "ppl:.1f"),
]


def _filled(lesson: str) -> dict[str, str]:
    nb = nbformat.read(ROOT / "solutions" / f"{lesson}.ipynb", as_version=4)
    return nb.metadata.get("course", {}).get("filled", {})


@pytest.mark.parametrize(("pattern", "lesson", "field"), FIGURES, ids=[f[2] for f in FIGURES])
def test_readme_quotes_the_lessons_run(pattern, lesson, field):
    page = PAGES[lesson]
    match = re.search(pattern, (ROOT / page).read_text(encoding="utf-8"))
    assert match, f"{page} no longer has the text /{pattern}/: update tests/{__name__}.py"
    values = _filled(lesson)
    assert field in values, (
        f"solutions/{lesson}.ipynb records no {{{{ {field} }}}}: the lesson's prose must use it"
    )
    assert match.group(1) == values[field], (
        f"{page} says {match.group(1)} where solutions/{lesson}.ipynb's run gives "
        f"{values[field]} ({{{{ {field} }}}})"
    )
