"""Every import in the course package points down: no circle, no floor importing a higher one.

The graph is read from the source (ast), not by importing: every `import course...` and
`from course... import ...` counts, at the top of a module or inside a function (an import
deferred to call time is an edge all the same), and `from course import x` is an edge to
course.x when x is a module. The layering this enforces: basics (ids, vocabularies,
padding) at the bottom, data sources above them, the task registry above the sources,
training and CLIs on top.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course"

# The floors, bottom first. A module may import from its own floor (the graph being free of
# circles orders those) and from the floors below; never from a floor above.
FLOORS = {
    # the basics: helpers, the repository's links and Colab's install cell, the ground floor
    # of the data (special ids, Vocab, pad_rows), and memo (make test's reuse of a training run)
    "basics": ("__init__", "utils", "tokens", "links", "colab", "memo"),
    # the model, lesson by lesson, and what decodes it: no data in here
    "model": (
        "attention",
        "masking",
        "positional",
        "multihead",
        "layers",
        "transformer",
        "decoding",
        "efficient",
        "rnn",
        "plotting",
    ),
    # the data sources: generated tasks, Tatoeba, subwords, lesson 12's language-model data
    "sources": ("generated", "tatoeba", "subword", "lm"),
    # the task registry: load_task over every source
    "registry": ("data",),
    # training, benchmarks, the command lines, the checkers and the tools around them
    # (i18n: the translated editions' units and catalogues, below authoring, which builds
    # their notebooks; glossary: the Korean lint; translations: the translators' command;
    # sandbox: where progress runs a learner's kernel)
    "top": (
        "train",
        "translate",
        "generate",
        "bench",
        "sandbox",
        "progress",
        "i18n",
        "glossary",
        "authoring",
        "translations",
        "check",
    ),
}
FLOOR_OF = {name: i for i, names in enumerate(FLOORS.values()) for name in names}


def _module_name(path: Path) -> str:
    """course/x.py -> "x"; course/check/y.py -> "check" (the checkers count as one)."""
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else path.stem


def _imported(path: Path, modules: set[str]) -> set[str]:
    """The course modules that the file at `path` imports, anywhere in it."""
    package = ["course", *path.relative_to(PACKAGE).parent.parts]  # the file's package
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from .y import z
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "course" and len(parts) > 1 and parts[1] in modules:
                found.add(parts[1])
    return found


def import_graph() -> dict[str, set[str]]:
    """{module: the course modules it imports}, for course/*.py and course/check/ (as "check")."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in paths}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for path in paths:
        name = _module_name(path)
        graph[name] |= _imported(path, modules) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports, as [a, b, ..., a], or None when there is none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(f"course.{m}" for m in cycle)


def test_every_module_has_a_floor():
    unplaced = sorted(set(import_graph()) - set(FLOOR_OF))
    assert not unplaced, f"place these modules on a floor in FLOORS: {unplaced}"


def test_no_module_imports_from_a_higher_floor():
    floor_names = list(FLOORS)
    upward = [
        f"course.{module} ({floor_names[FLOOR_OF[module]]}) imports course.{target} "
        f"({floor_names[FLOOR_OF[target]]})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if FLOOR_OF.get(target, -1) > FLOOR_OF.get(module, len(FLOORS))
    ]
    assert not upward, "\n".join(upward)


def test_the_data_floors():
    """The issue's circles (data -> lm -> data, data -> subword -> data) are gone: the
    sources stand on course.tokens, and course.data stands on them."""
    graph = import_graph()
    assert graph["tokens"] == set()
    assert graph["generated"] == {"tokens"}
    for source in ("generated", "tatoeba", "subword", "lm"):
        assert "data" not in graph[source], source
    assert {"generated", "tatoeba", "subword", "lm", "tokens"} <= graph["data"]


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"b"}}, ["b", "b"]),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, None),
    ],
)
def test_find_cycle_finds_a_circle_and_only_a_circle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_the_graph_sees_deferred_and_relative_imports(tmp_path, monkeypatch):
    package = tmp_path / "course"
    (package / "check").mkdir(parents=True)
    (package / "low.py").write_text("def f():\n    from course import high\n")
    (package / "high.py").write_text("import course.low\n")
    (package / "check" / "__init__.py").write_text("from ..low import f\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", package)
    graph = import_graph()
    assert graph == {"low": {"high"}, "high": {"low"}, "check": {"low"}}
    assert find_cycle(graph) == ["low", "high", "low"]
