"""The speed figures that README.md and docs/*.md quote are docs/timings.json's (issue 42).

tools/timings.py (`make timings`) times the course's commands (Run All of each learner
notebook, `make notebooks`, `make test`, `make train`, `make site`, `make progress`) into one
record, docs/timings.json, with the machine they ran on, and writes every figure the pages
quote from it (`python tools/timings.py --write-docs`). `timings.figures()` lists them: the
page, a pattern whose one group is the figure, and how the record writes it. A figure edited
by hand, or a record measured again without --write-docs, fails here until the pages are
written again. The course map's Run All column is also checked on its own, to the second.

The tool's pure parts (a partial measurement merged into the record, the machine's
description, the pages' text) are tested on made-up records; nothing here runs a notebook.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _tools import load

from course import i18n

ROOT = Path(__file__).resolve().parents[1]
timings = load("timings")

RECORD = json.loads((ROOT / "docs" / "timings.json").read_text(encoding="utf-8"))
FIGURES = timings.figures()
PAGES = sorted({f.page for f in FIGURES})
LESSONS = sorted(timings.learner_notebooks())
MACHINE = {
    "cpu": "AMD EPYC 7B13 64-Core Processor",
    "cores": 2,
    "system": "Linux x86_64",
    "python": "3.11.7",
    "torch": "2.13.0+cpu",
}


def stamp(seconds: float, date: str = "2026-12-01T10:00:00+00:00", load=1.0) -> dict:
    return {
        "seconds": seconds,
        "load_before": load,
        "load_after": load + 0.5,
        "commit": "0" * 40,
        "dirty": False,
        "changed": [],
        "date": date,
    }


def thread_run(condition, threads, steps, median, busy=0, load=0.2):
    return {
        "condition": condition,
        "threads": threads,
        "steps": steps,
        "median_step_seconds": median,
        "train_seconds": median * steps * 1.1,
        "busy_processes": busy,
        "load_before": load,
    }


THREAD_RUNS = [
    thread_run("idle", 1, 200, 0.080),
    thread_run("idle", 2, 200, 0.052, load=0.4),
    thread_run("busy", 1, 60, 0.115, busy=2, load=2.1),
    thread_run("busy", 2, 60, 0.720, busy=2, load=2.9),
]


def full_record() -> dict:
    """A made-up record holding every entry (figures no machine measured)."""
    metrics = {
        "task": "toy-translation",
        "exact_match": 1.0,
        "bleu": 100.0,
        "train_seconds": 51.23,
        "median_step_seconds": 0.08,
        "params": 240549,
        "steps": 600,
        "device": "cpu",
        "seed": 0,
        "lr": 0.001,
    }
    train = stamp(66.6) | {
        "train_seconds": 51.23,
        "output": [
            "toy-translation: exact match 100.0%, BLEU 100.00 on 2000 held-out sentences; "
            "600 steps in 51 s on cpu",
            json.dumps(metrics),
        ],
    }
    lessons = {n: stamp(10.5 * i, load=0.5 + i / 10) for i, n in enumerate(LESSONS, 1)}
    measured = {
        "run-all": {"command": "Run All", "lessons": lessons},
        "notebooks": stamp(654.0),
        "test": stamp(590.4),
        "train": train,
        "site": stamp(17.4),
        "progress": stamp(149.6) | {"notebooks": len(LESSONS)},
        "threads": stamp(120.0) | {"runs": THREAD_RUNS},
    }
    return timings.merge(None, MACHINE, measured)


# --- the pages quote the record ------------------------------------------------------------


@pytest.mark.parametrize("figure", FIGURES, ids=[f.name for f in FIGURES])
def test_each_figure_on_the_pages_is_the_records(figure):
    found = timings.quoted(figure)
    assert len(found) == 1, (
        f"{figure.page} holds /{figure.pattern}/ {len(found)} times, not once: update "
        "figures() in tools/timings.py"
    )
    expected = figure.render(RECORD)
    assert found[0].group(1) == expected, (
        f"{figure.page} says {found[0].group(1)!r} where docs/timings.json gives {expected!r}: "
        "run `python tools/timings.py --write-docs`"
    )


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/ko/index.md"])
def test_the_run_all_column_is_the_record_to_the_second(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d\d) \|.*\| ([^|]*) \| [^|]* \|$", text, re.M))
    assert sorted(rows) == LESSONS
    measured = RECORD["entries"].get("run-all", {}).get("lessons", {})
    for lesson, cell in rows.items():
        expected = f"{round(measured[lesson]['seconds'])} s" if lesson in measured else "—"
        assert cell == expected, f"{page}, lesson {lesson}: Run All {cell!r}, record {expected!r}"


def test_the_pages_name_the_records_machine():
    machine = RECORD["machine"]
    cpu = timings.short_cpu(machine["cpu"])
    for page in ("README.md", "docs/index.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        note = re.search(r'^"Run All" is how long.*?\n\n', text, re.S | re.M).group(0)
        note = " ".join(note.split())
        if RECORD["entries"].get("run-all"):
            assert f"a {machine['cores']}-core {cpu} (torch {machine['torch']}, " in note, page
            assert f"Python {machine['python']})" in note, page
            assert "`docs/timings.json`" in note, page
        else:
            assert "not measured yet" in note, page
    if "site" in RECORD["entries"]:
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        assert f"on a {machine['cores']}-core {cpu}, from `docs/timings.json`" in readme


# --- the translated pages (docs/ko/, generated from the English ones by course.i18n) ----------

TRANSLATED = [p.relative_to(ROOT).as_posix() for p in i18n.pages("ko")]


def korean_figures(record: dict, page: str) -> list[str]:
    """The figures of `page`'s prose (not its Run All column) as the Korean page writes them."""
    found = []
    for figure in FIGURES:
        if figure.page == page and not figure.name.startswith(f"{page}: Run All of "):
            text = " ".join(re.sub(r"(?m)^>", "", figure.render(record)).split())  # unboxed
            found += [i18n.fill_figures("{{ 1 }}", (f,), "ko") for f in i18n.mask_figures(text)[1]]
    return found


@pytest.mark.parametrize("page", TRANSLATED)
def test_the_korean_pages_quote_the_records_figures(page):
    korean = (ROOT / "docs" / "ko" / Path(page).name).read_text(encoding="utf-8")
    figures = korean_figures(RECORD, page)
    assert figures, f"{page}: no figure of the record"
    for figure in figures:
        assert figure in korean, f"docs/ko/{Path(page).name} lacks {figure!r}: make translations"


def test_a_retiming_rewrites_the_korean_pages_and_stales_no_translation(tmp_path):
    """tools/timings.py --write-docs writes the Korean pages too; their figures are their
    units' fields, so neither a re-timing here nor a record of another machine stales them."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "translations", tmp_path / "translations")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "README.ko.md", tmp_path / "README.ko.md")
    later = copy.deepcopy(RECORD)  # this machine, another day, other seconds and loads
    stamps = [*later["entries"].values(), *later["entries"]["run-all"]["lessons"].values()]
    for n, entry in enumerate(stamps):
        entry.update(date="2027-01-05T09:00:00+00:00", load_before=1.5, load_after=2.0 + n / 10)
        for key in ("seconds", "train_seconds"):
            if key in entry:
                entry[key] *= 1.7
    for record in (later, full_record()):
        changed = timings.write_docs(record, tmp_path)
        assert {f"docs/ko/{Path(p).name}" for p in TRANSLATED} <= set(changed), changed
        for page in TRANSLATED:
            english = tmp_path / page
            assert i18n.problems(english, "ko", tmp_path) == [], page
            assert i18n.page_staleness(english, "ko", tmp_path) == [], page
            korean = (tmp_path / "docs" / "ko" / english.name).read_text(encoding="utf-8")
            assert all(f in korean for f in korean_figures(record, page)), page
        korean_map = (tmp_path / "docs" / "ko" / "index.md").read_text(encoding="utf-8")
        rows = dict(re.findall(r"^\| (\d\d) \|.*\| ([^|]*) \| [^|]* \|$", korean_map, re.M))
        assert rows == {lesson: timings.run_all_cell(record, lesson) for lesson in LESSONS}
    timings.write_docs(RECORD, tmp_path)  # the committed record gives the committed pages
    for page in TRANSLATED:
        name = f"docs/ko/{Path(page).name}"
        assert (tmp_path / name).read_text() == (ROOT / name).read_text(), name


# Durations left on these pages outside the figures above: none is a timing of a command.
NOT_TIMINGS = {
    "README.md": ["45 to 90 minutes"],
    "docs/grading.md": [
        "stopped after 300 s",  # a --timeout, not a measurement
        "| 600 s |",  # --timeout's default, a setting
        "stopped 10 s later",  # the watchdog's grace, a setting
        # the sandbox's cost: measured by a kept script (tools/sandbox_cost.py), its command,
        # machine and load beside the table; not a command the record times
        "| 236.9 s | 240.8 s |",
        "| 260.4 s | 276.7 s |",
        "| 497.3 s | 517.5 s |",
    ],
}
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|seconds?|minutes?|min)\b")


@pytest.mark.parametrize(
    "page",
    [
        "README.md",
        "docs/index.md",
        "docs/progress.md",
        "docs/grading.md",
        "docs/exercises.md",
        "docs/troubleshooting.md",
        "docs/authoring.md",
    ],
)
def test_no_other_timing_is_quoted_by_hand(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    spans = []
    for figure in (f for f in FIGURES if f.page == page):
        found = timings.quoted(figure)
        if found:
            spans.append(found[0].span(1))
    for start, end in sorted(spans, reverse=True):  # from the end: earlier spans stay in place
        text = text[:start] + text[end:]
    for allowed in NOT_TIMINGS.get(page, []):
        text = text.replace(allowed, "")
    assert not DURATION.findall(text), (
        f"{page} quotes {DURATION.findall(text)} by hand: take it from docs/timings.json "
        "(tools/timings.py's figures()) or drop it"
    )


def test_the_record_is_one_machines_well_formed_measurements():
    assert set(RECORD["machine"]) == {"cpu", "cores", "system", "python", "torch"}
    entries = RECORD["entries"]
    assert set(entries) <= set(timings.NAMES), set(entries)
    flat = [(f"run-all {n}", e) for n, e in entries.get("run-all", {}).get("lessons", {}).items()]
    flat += [(name, e) for name, e in entries.items() if name != "run-all"]
    for name, entry in flat:
        assert entry["seconds"] > 0, name
        assert {"load_before", "load_after", "commit", "dirty", "changed", "date"} <= set(entry)
        assert entry["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", entry["commit"]), name
        assert re.match(r"\d{4}-\d\d-\d\dT", entry["date"]), name
        command = {"threads": "make train"}.get(name, f"make {name}")  # what each one times
        assert name.startswith("run-all") or entry["command"].startswith(command), name
    for lesson, entry in entries.get("run-all", {}).get("lessons", {}).items():
        assert entry["notebook"].startswith(f"notebooks/{lesson}_"), lesson
        assert (ROOT / entry["notebook"]).is_file(), entry["notebook"]


# --- the lead boxes ------------------------------------------------------------------------

BOXES = [f for f in FIGURES if f.pattern == timings.BOX_HOW_LONG]
# Lead boxes whose "How long" is no figure of the record: `make bench` writes benchmarks.md's,
# and troubleshooting.md's names none.
BOX_NOT_FROM_THE_RECORD = {"docs/benchmarks.md", "docs/troubleshooting.md"}


def box_how_long_line(text: str) -> str | None:
    """The lead box's "How long" item as a reader sees it: to the next item or the box's end."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("> - **How long:**"):
            end = i + 1
            while (
                end < len(lines)
                and lines[end].startswith(">")
                and not lines[end].startswith("> - ")
            ):
                end += 1
            return "\n".join(lines[i:end])
    return None


def unboxed(box: str) -> str:
    """A lead box's wrapped item on one line, as Markdown reads it."""
    return " ".join(re.sub(r"\n>   ", " ", box).split())


def test_every_lead_boxs_how_long_is_a_figure_of_the_record_whole():
    pages = sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
    with_box = [p for p in pages if box_how_long_line((ROOT / p).read_text(encoding="utf-8"))]
    assert sorted(f.page for f in BOXES) == sorted(set(with_box) - BOX_NOT_FROM_THE_RECORD)
    for figure in BOXES:
        text = (ROOT / figure.page).read_text(encoding="utf-8")
        found = timings.quoted(figure)
        assert len(found) == 1 and found[0].group(1) == box_how_long_line(text), figure.page


def test_a_changed_record_changes_every_lead_box_so_a_stale_one_fails(tmp_path):
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    other = full_record()  # another machine, other seconds
    timings.write_docs(other, tmp_path)
    for figure in BOXES:
        box = timings.quoted(figure, tmp_path)[0].group(1)
        assert box == figure.render(other), figure.page
        assert box != figure.render(RECORD), f"{figure.page}: the box ignores the record"
        assert "a 2-core AMD EPYC 7B13" in unboxed(box), figure.page
    record = copy.deepcopy(RECORD)  # the same machine, one second more everywhere
    for entry in [*record["entries"].values(), *record["entries"]["run-all"]["lessons"].values()]:
        for key in ("seconds", "train_seconds"):
            if key in entry:
                entry[key] += 60
    for figure in BOXES:
        assert figure.render(record) != figure.render(RECORD), figure.page


def test_what_the_lead_boxes_say_of_a_full_record():
    record = full_record()
    boxes = {f.page: unboxed(f.render(record)) for f in BOXES}
    on = "on the course's reference machine, a 2-core AMD EPYC 7B13"
    lesson = {n: timings.duration(10.5 * i) for i, n in enumerate(LESSONS, 1)}
    assert boxes == {
        "docs/authoring.md": "> - **How long:** 10.9 minutes for all twelve lessons "
        f"{on} (`make timings`, from `docs/timings.json`).",
        "docs/exercises.md": "> - **How long:** a checker's run is part of its notebook's "
        f"Run All, which takes 10 s to 2.1 minutes per lesson {on} ([the course map](index.md), "
        "from `docs/timings.json`).",
        "docs/gpt.md": f"> - **How long:** lesson 12's Run All takes {lesson['12']} {on} "
        "([the course map](index.md), from `docs/timings.json`); `lm-en` trains for 10 "
        "minutes (its `time_budget`), then measures the held-out perplexity.",
        "docs/grading.md": "> - **How long:** about as long as `make progress` for each "
        f"learner, 2.5 minutes for 12 notebooks {on} ([Where you stand](progress.md), from "
        "`docs/timings.json`).",
        "docs/progress.md": f"> - **How long:** 2.5 minutes for the 12 learner notebooks {on} "
        '("How long" below, from `docs/timings.json`).',
        "docs/training.md": f"> - **How long:** 67 s {on}, 51 s of it training "
        '("How long" below, from `docs/timings.json`).',
        "docs/translation.md": f"> - **How long:** lesson 11's Run All takes {lesson['11']} "
        f"{on} ([the course map](index.md), from `docs/timings.json`). `fra-eng` trains for "
        "10 minutes and `fra-eng-full` for 20 (their `time_budget`), then translate the "
        "held-out sentences (45-50 s for `fra-eng-full`).",
    }


def test_what_the_lead_boxes_say_of_a_partial_or_empty_record():
    partial = timings.merge(
        None, MACHINE, {"run-all": {"command": "x", "lessons": {"02": stamp(1.82)}}}
    )
    boxes = {f.page: unboxed(f.render(partial)) for f in BOXES}
    assert "which takes 2 s per lesson (1 measured so far) on" in boxes["docs/exercises.md"]
    assert "lesson 12's Run All: not measured yet (`make timings`" in boxes["docs/gpt.md"]
    empty = timings.merge(None, MACHINE, {})
    for figure in BOXES:
        box = unboxed(figure.render(empty))
        assert "not measured yet (`make timings` records it in `docs/timings.json`)" in box
        measured = box.replace(timings.GPT_TASK, "").replace(timings.TRANSLATION_TASKS, "")
        assert not re.search(r"\d s\b|\d minutes", measured), box  # the tasks' budgets aside


def test_a_lead_box_wraps_inside_its_list_item():
    for figure in BOXES:
        lines = figure.render(full_record()).splitlines()
        assert lines[0].startswith("> - **How long:** "), figure.page
        for line in lines:
            assert len(line) <= 92 and line.count("`") % 2 == 0, line
            assert line.count("[") == line.count("]"), f"a link cut in two: {line!r}"
        for line in lines[1:]:
            assert line.startswith(">   ") and not re.match(r">\s+(?:[-+*#>|]|\d+[.)])\s", line)
            assert not re.match(r">\s+(?:s|minutes?)\b", line), f"a unit cut off: {line!r}"
        assert re.fullmatch(timings.BOX_HOW_LONG, "\n".join(lines)), figure.page


def test_make_timings_follows_make_bench():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^TIMINGS_ARGS \?=$", makefile, re.M)
    assert " timings " in re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1) + " "
    targets = re.findall(r"^([a-z-]+): .*## ", makefile, re.M)
    assert targets[targets.index("bench") + 1] == "timings"
    assert "tools/timings.py $(TIMINGS_ARGS)" in makefile


# --- the record ----------------------------------------------------------------------------


def test_measuring_a_subset_keeps_the_other_entries():
    old = full_record()
    new_site = stamp(20.0, date="2026-12-02T09:00:00+00:00")
    new_lesson = {LESSONS[1]: stamp(3.0, date="2026-12-02T09:00:00+00:00")}
    merged = timings.merge(
        old, MACHINE, {"site": new_site, "run-all": {"command": "x", "lessons": new_lesson}}
    )
    assert merged["entries"]["site"] == new_site
    assert merged["entries"]["train"] == old["entries"]["train"]  # its own date and load
    lessons = merged["entries"]["run-all"]["lessons"]
    assert lessons[LESSONS[1]]["seconds"] == 3.0
    assert lessons[LESSONS[0]] == old["entries"]["run-all"]["lessons"][LESSONS[0]]
    assert list(lessons) == LESSONS
    assert list(merged["entries"]) == timings.NAMES
    assert old["entries"]["site"]["seconds"] == 17.4  # the old record is not changed


def test_a_first_measurement_starts_the_record():
    merged = timings.merge(None, MACHINE, {"site": stamp(9.0)})
    assert merged["machine"] == MACHINE and list(merged["entries"]) == ["site"]


def test_another_machine_is_refused_unless_fresh():
    other = MACHINE | {"cpu": "Intel(R) Xeon(R) CPU @ 2.20GHz", "torch": "2.12.0"}
    with pytest.raises(timings.MachineChanged, match="cpu .*torch '2.13.0\\+cpu' there"):
        timings.merge(full_record(), other, {"site": stamp(9.0)})
    fresh = timings.merge(full_record(), other, {"site": stamp(9.0)}, fresh=True)
    assert fresh["machine"] == other and list(fresh["entries"]) == ["site"]


def test_main_refuses_another_machine_before_measuring(tmp_path, monkeypatch, capsys):
    path = tmp_path / "timings.json"
    timings.write_record(full_record(), path)
    monkeypatch.setattr(timings, "machine", lambda: MACHINE | {"cores": 16})
    monkeypatch.setattr(timings, "measure", lambda *a, **k: pytest.fail("measured anyway"))
    assert timings.main(["--only", "site", "--record", str(path)]) == 2
    assert "another machine (cores 2 there, 16 here)" in capsys.readouterr().err
    assert json.loads(path.read_text()) == full_record()


def test_main_merges_what_it_measured(tmp_path, monkeypatch):
    path = tmp_path / "timings.json"
    timings.write_record(full_record(), path)
    asked = []

    def measure(names, lessons, timeout):
        asked.append((names, lessons))
        return {"run-all": {"command": "x", "lessons": {"02": stamp(2.0)}}}, []

    monkeypatch.setattr(timings, "machine", lambda: MACHINE)
    monkeypatch.setattr(timings, "measure", measure)
    assert timings.main(["--lessons", "2", "--record", str(path)]) == 0
    assert asked == [(["run-all"], ["02"])]  # --lessons alone: their Run All only
    record = json.loads(path.read_text())
    assert record["entries"]["run-all"]["lessons"]["02"]["seconds"] == 2.0
    assert record["entries"]["site"] == full_record()["entries"]["site"]


@pytest.mark.parametrize(
    ("text", "names"),
    [("site,train", ["train", "site"]), ("all", timings.NAMES), (" test ", ["test"])],
)
def test_names(text, names):
    assert timings.parse_names(text, []) == names


@pytest.mark.parametrize("text", ["bogus", "site,make", ","])
def test_unknown_names_are_refused(text):
    with pytest.raises(timings.UsageError, match="expected names among run-all"):
        timings.parse_names(text, [])


def test_lessons():
    assert timings.parse_lessons("5,2,05", ["02", "05"]) == ["02", "05"]
    assert timings.parse_lessons(None, ["02", "05"]) == ["02", "05"]
    with pytest.raises(timings.UsageError, match="among 02, 05, got '13'"):
        timings.parse_lessons("13", ["02", "05"])


def test_changed_paths_name_a_renamed_file_once_and_leave_the_record_out():
    status = " M README.md\0R  new.py\0old.py\0?? docs/timings.json\0?? tools/x.py\0"
    changed = timings.changed_paths(status, ignore=("docs/timings.json",))
    assert changed == ["README.md", "new.py", "tools/x.py"]


# --- the machine ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "short"),
    [
        ("Intel(R) Xeon(R) Processor", "Intel Xeon"),
        ("Intel(R) Xeon(R) CPU @ 2.20GHz", "Intel Xeon"),
        ("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "Intel Xeon Platinum 8375C"),
        ("AMD EPYC 7B13 64-Core Processor", "AMD EPYC 7B13"),
        ("Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz", "Intel Core i7-8550U"),
        ("Apple M2", "Apple M2"),
        ("", "unknown CPU"),
    ],
)
def test_a_cpus_short_name(model, short):
    assert timings.short_cpu(model) == short


def test_the_machines_description():
    assert timings.describe(MACHINE, full=False) == "a 2-core AMD EPYC 7B13"
    assert timings.describe(MACHINE) == "a 2-core AMD EPYC 7B13 (torch 2.13.0+cpu, Python 3.11.7)"


def test_this_machine_is_described_by_every_key():
    here = timings.machine()
    assert set(here) == set(MACHINE) and here["cores"] >= 1 and here["cpu"]


# --- the pages' text -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1.82, "2 s"), (119.4, "119 s"), (120.0, "2.0 minutes"), (590, "9.8 minutes")],
)
def test_durations(seconds, text):
    assert timings.duration(seconds) == text


def test_loads_and_dates():
    entries = [stamp(1, load=0.44), stamp(1, "2026-12-02T01:00:00+00:00", load=1.6)]
    assert timings.loads(entries) == "load average 0.4 to 2.1"
    assert timings.loads(entries[:1]) == "load average 0.4 to 0.9"
    assert timings.loads([{"load_before": 1.0, "load_after": 1.04}]) == "load average 1.0"
    assert timings.dates(entries) == "2026-12-01 to 2026-12-02"
    assert timings.dates(entries[:1]) == "2026-12-01"


def test_wrapping_keeps_code_spans_whole_and_starts_no_list():
    text = "word " * 16 + "`python -m course.train --task toy-translation` and - not a list " * 3
    wrapped = timings.wrap(text, indent="  ")
    assert " ".join(wrapped.split()) == " ".join(text.split())
    for line in wrapped.splitlines():
        assert len(line) <= 90 and line.count("`") % 2 == 0, line
        assert not line.lstrip().startswith("- "), line


def test_what_the_pages_say_before_anything_is_measured():
    empty = timings.merge(None, MACHINE, {})
    assert timings.run_all_cell(empty, "01") == "—"
    assert "not measured yet" in " ".join(timings.run_all_note(empty).split())
    assert timings.site_figure(empty) == "not timed yet: `make timings`"
    assert timings.test_figure(empty) == ""
    assert "<seconds> s" in timings.train_example(empty)
    assert "Not measured yet" in timings.train_how_long(empty)
    assert timings.progress_example(empty) == "… s"
    assert "Not measured yet" in timings.threads_table(empty)


def test_what_the_pages_say_of_a_full_record():
    record = full_record()
    note = " ".join(timings.run_all_note(record).split())
    total = sum(10.5 * i for i in range(1, len(LESSONS) + 1))
    assert f"All {len(LESSONS)}, one after the other: {timings.duration(total)}." in note
    assert "marked —" not in note and "took 10.9 minutes" in note
    assert timings.site_figure(record) == "17 s on a 2-core AMD EPYC 7B13, from `docs/timings.json`"
    assert timings.test_figure(record).startswith("; 9.8 minutes on a 2-core AMD EPYC 7B13")
    example = timings.train_example(record).splitlines()
    assert example[0].endswith("600 steps in 51 s on cpu")
    assert example[1].endswith('"seed": 0, ...}') and '"lr"' not in example[1]
    how_long = " ".join(timings.train_how_long(record).split())
    assert how_long.startswith("**How long.** 51 s of training (`train_seconds`) and 67 s for")
    assert timings.progress_example(record) == "150 s"
    assert "took 2.5 minutes" in " ".join(timings.progress_how_long(record).split())
    table, note = timings.threads_table(record).split("\n\n")
    assert table.splitlines()[2:] == [
        "| idle | 80 ms | 52 ms |",
        "| beside 2 busy processes (one per core) | 115 ms | 720 ms |",
    ]
    note = " ".join(note.split())
    assert "200 steps idle and 60 busy" in note and "load average 0.4 at most" in note
    assert note.endswith(
        "an idle machine's step 35% faster and a busy machine's 6.3 times as slow."
    )


def test_what_a_second_thread_does_is_worded_by_its_direction():
    record = full_record()
    record["entries"]["threads"]["runs"] = [
        thread_run("idle", 1, 200, 0.050),
        thread_run("idle", 2, 200, 0.060),
        thread_run("busy", 1, 60, 0.100, busy=2),
        thread_run("busy", 2, 60, 0.090, busy=2),
    ]
    note = " ".join(timings.threads_table(record).split())
    assert note.endswith("an idle machine's step 20% slower and a busy machine's 10% faster.")


def test_the_threads_runs_ask_for_their_count_and_refuse_another(monkeypatch):
    asked = []

    def fake_run(command, cwd, env=None, timeout=None):
        threads = int(command[command.index("--set") + 1].split("=")[1])
        asked.append((threads, command[command.index("--steps") + 1]))
        line = json.dumps({"threads": threads, "steps": 3, "median_step_seconds": 0.1,
                           "train_seconds": 0.3})  # fmt: skip
        return timings.Timed(1.0, 0, [(0.5, line)], "")

    monkeypatch.setattr(timings, "run_timed", fake_run)
    monkeypatch.setattr(timings, "spinners", lambda count: [])
    entry = timings.measure_threads(10, runs=(("idle", 1, 3), ("idle", 2, 3)))
    assert asked == [(1, "3"), (2, "3")]
    assert [r["threads"] for r in entry["runs"]] == [1, 2]

    def wrong_count(command, cwd, env=None, timeout=None):
        return timings.Timed(1.0, 0, [(0.5, json.dumps({"threads": 1, "steps": 3}))], "")

    monkeypatch.setattr(timings, "run_timed", wrong_count)
    with pytest.raises(timings.MeasurementFailed, match="asked for 2 threads"):
        timings.measure_threads(10, runs=(("idle", 2, 3),))


def test_the_busy_processes_are_stopped_even_when_the_run_fails(monkeypatch):
    started = []
    spin = timings.spinners
    monkeypatch.setattr(timings, "spinners", lambda count: started.extend(spin(count)) or started)
    monkeypatch.setattr(timings.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(
        timings, "run_timed", lambda *a, **k: timings.Timed(0.1, 1, [], "Traceback: boom")
    )
    with pytest.raises(timings.MeasurementFailed):
        timings.measure_threads(10, runs=(("busy", 1, 3),))
    assert len(started) == (os.cpu_count() or 1)
    assert all(process.poll() is not None for process in started)  # none left spinning


def test_partly_measured_lessons_are_marked():
    record = timings.merge(
        None, MACHINE, {"run-all": {"command": "x", "lessons": {"02": stamp(1.82)}}}
    )
    assert timings.run_all_cell(record, "02") == "2 s"
    assert timings.run_all_cell(record, "03") == "—"
    assert "A lesson marked — has not been measured yet." in " ".join(
        timings.run_all_note(record).split()
    )


def test_the_pages_are_written_from_any_record_and_back(tmp_path):
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    record = full_record()
    assert sorted(timings.write_docs(record, tmp_path)) == PAGES
    assert timings.write_docs(record, tmp_path) == []  # written once, nothing to change
    for figure in FIGURES:
        found = timings.quoted(figure, tmp_path)
        assert len(found) == 1 and found[0].group(1) == figure.render(record), figure.name
    timings.write_docs(RECORD, tmp_path)  # the committed record gives the committed pages
    for page in PAGES:
        assert (tmp_path / page).read_text() == (ROOT / page).read_text(), page


# --- running -------------------------------------------------------------------------------


def test_a_timed_command_stamps_its_lines(tmp_path):
    code = "import sys; print('one'); print('{\"a\": 1}'); print('err', file=sys.stderr)"
    timed = timings.run_timed([sys.executable, "-c", code], tmp_path)
    assert timed.returncode == 0 and timed.stderr == "err\n"
    assert [line for _, line in timed.lines] == ["one", '{"a": 1}']
    assert 0 <= timed.lines[0][0] <= timed.lines[1][0] <= timed.seconds
    assert timings.last_json(timed.lines) == {"a": 1}


def test_a_command_past_its_timeout_is_stopped(tmp_path):
    timed = timings.run_timed(
        [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, None, 1
    )
    assert timed.returncode != 0 and timed.seconds < 20


def test_each_lessons_build_seconds_come_from_its_lines():
    lines = [
        (0.0, "executing solutions/01_rnn_limits.py ..."),
        (30.0, "wrote notebooks/01_rnn_limits.ipynb"),
        (30.5, "wrote solutions/01_rnn_limits.ipynb"),
        (30.6, "executing solutions/02_dot_product_attention.py ..."),
        (35.0, "wrote notebooks/02_dot_product_attention.ipynb"),
    ]
    assert timings.lesson_seconds(lines, 36.0) == {"01": 30.5, "02": 5.4}


def test_the_working_copy_is_a_clone_of_the_tree_that_imports_its_own_course(tmp_path):
    clone = timings.working_copy(tmp_path / "repo")
    listed = subprocess.run(
        ["git", "ls-files"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "course/train.py" in listed and "tools/timings.py" in listed
    assert not any(name.startswith((".venv/", "build/", "runs/")) for name in listed)
    if (ROOT / ".venv").is_dir():
        assert (clone / ".venv").is_symlink()
    found = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('course').origin)"],
        cwd=tmp_path,
        env=timings.copy_env(clone),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found) == clone / "course" / "__init__.py"
