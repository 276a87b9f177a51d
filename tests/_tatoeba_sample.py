"""A small generated stand-in for the Tatoeba file, in its exact format (tests never read
the real data): `English<TAB>French` lines, several French sentences for some English
ones (as Tatoeba has), accents and apostrophes to normalize, and lines the tutorial's
filter drops (English not starting with a pronoun and a verb, or too long)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

SUBJECTS = [  # English, its French forms (tu / vous: two translations of one sentence)
    ("I'm", ["Je suis"]),
    ("He's", ["Il est"]),
    ("She is", ["Elle est"]),
    ("You're", ["Tu es", "Vous êtes"]),
    ("We are", ["Nous sommes"]),
    ("They're", ["Ils sont", "Elles sont"]),
]
ADJECTIVES = [
    ("tired", "fatigué"), ("happy", "heureux"), ("late", "en retard"), ("ready", "prêt"),
    ("hungry", "affamé"), ("very busy", "très occupé"), ("at home", "à la maison"),
    ("not afraid", "pas effrayé"), ("a teacher", "enseignant"), ("still young", "encore jeune"),
    ("in the garden", "dans le jardin"), ("from France", "de France"),
]  # fmt: skip
ENDINGS = [(".", "."), ("!", " !")]
OTHERS = [  # dropped by the tutorial's filter: no "i am" / "he is" / ... at the start
    ("Go.", "Va !"),
    ("Who are you?", "Qui êtes-vous ?"),
    ("Tom can't swim.", "Tom ne sait pas nager."),
    ("I'm sure that he will come back to the house before the night falls.",
     "Je suis sûr qu'il reviendra à la maison avant que la nuit ne tombe."),
]  # fmt: skip


def sample_pairs() -> list[tuple[str, str]]:
    """(English, French) pairs: every subject x adjective x ending, plus OTHERS."""
    pairs = []
    for (subject, frenches), (adjective, french_adjective), (end, french_end) in itertools.product(
        SUBJECTS, ADJECTIVES, ENDINGS
    ):
        for french_subject in frenches:
            pairs.append(
                (f"{subject} {adjective}{end}", f"{french_subject} {french_adjective}{french_end}")
            )
    pairs += OTHERS
    random.Random(0).shuffle(pairs)
    return pairs


def write_sample(path: Path, three_columns: bool = False) -> Path:
    """The sample as a pairs file at `path` (manythings' three columns if asked)."""
    credit = "\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (someone) & #2 (someone else)"
    lines = [f"{en}\t{fr}{credit if three_columns else ''}\n" for en, fr in sample_pairs()]
    path.write_text("".join(lines), encoding="utf-8")
    return path
