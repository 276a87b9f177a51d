"""Mutation testing for `course`: how many small, deliberate bugs do the unit tests catch?

A mutant is the module with one small change, the kind of slip a person makes: `<` for
`<=`, `+` for `-`, `and` for `or`, a number off by one, a string or an error message
altered, a call statement deleted, a value replaced by None, a condition negated. The
unit tests run against every mutant. A mutant is *killed* when a test fails (or the run
hangs past its time limit); it *survives* when every test still passes, which points to
behaviour that no test pins down. Some survivors are *equivalent*: the change does not
alter what the module does at all (e.g. `x > 0.0` -> `x >= 0.0` where x = 0 takes the
same path either way). Those are listed, each with the reason, in
tools/mutation_equivalent.txt, and the score is taken over the others:

    score = killed / (mutants - equivalent)

Run it from the repository root with the project's own Python; it needs nothing but
the course's requirements (the standard library, pytest and what the tests import):

    .venv/bin/python tools/mutation.py course/attention.py            # one module
    .venv/bin/python tools/mutation.py course/rnn.py course/utils.py --fail-under 95  # exit 1 below
    .venv/bin/python tools/mutation.py course/rnn.py --list           # the mutants, none run
    .venv/bin/python tools/mutation.py course/rnn.py --tests "tests/test_rnn.py -k digit"
    .venv/bin/python tools/mutation.py course/utils.py --json out.json        # machine-readable
    .venv/bin/python tools/mutation.py course/utils.py --again out.json   # survivors only

It is slow (minutes per module on two cores), so it is not part of `make test`. It forks,
so it runs on Linux and macOS, not on Windows.

How it works, and why it is safe to run in a working tree:
- the repository (without .git and .venv) is copied to a temporary folder, once per
  module and parallel job (--jobs); mutants are written there only, never into the
  repository, and the copies are deleted at the end;
- one baseline run of the module's tests (all must pass) records which test executes
  which line of the module, and how long each test takes;
- each mutant then runs in a forked process (torch and pytest are imported once, before
  the fork) with only the tests that execute its lines, stopping at the first failure.
  A mutant in code that runs at import time (constants, default arguments, class
  bodies) runs all the module's tests. A mutant on a line no test executes survives
  without a run ("not covered"); lines that run only in another process (a Jupyter
  kernel started by a test) count as not executed, so give such a module tests that
  call it in-process.
The module's tests default to tests/test_<name>.py and tests/test_<name>_*.py (see
DEFAULT_TESTS for the modules whose tests are named otherwise); --tests overrides.
A line ending in `# pragma: no mutate` is never mutated.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.txt"

# pytest arguments per module when tests/test_<name>.py + tests/test_<name>_*.py is not it.
# The authoring tests that read the committed notebooks (and execute the real lessons)
# are left out: they are slow and depend on the state of notebooks/ and solutions/,
# not on authoring.py; the sandbox tests cover the same functions.
COMMITTED_NOTEBOOK_TESTS = [
    "test_there_are_lessons",
    "test_solution_notebooks_are_current",
    "test_learner_notebooks_are_current",
    "test_learner_notebook_has_stubs_and_no_answers_or_outputs",
    "test_solution_notebook_checkers_all_passed",
    "test_every_checker_a_lesson_calls_is_registered",
    "test_learner_notebook_calls_its_checkers",
    "test_cli_check_reports_current_notebooks",
]
# course.progress's tests that grade notebooks in real kernels (one class folder, about a
# minute; the kernels' lines are not seen): tests/test_progress_mutation.py covers the same
# code in-process, with a stand-in kernel.
PROGRESS_KERNEL_TESTS = [
    "test_a_report_exits_0_and_counts_what_passed",
    "test_a_generated_learner_notebook_is_not_yet",
    "test_a_solution_notebook_passes",
    "test_a_wrong_answer_fails_with_its_diagnosis_though_the_reference_is_imported_later",
    "test_a_syntax_error_is_reported_with_its_cell_and_the_rest_still_runs",
    "test_a_forged_checker_cell_is_judged_by_the_real_checker",
    "test_a_deleted_exercise_cell_is_missing",
    "test_a_lesson_without_its_notebook_is_missing",
    "test_learner_files_are_byte_for_byte_unchanged",
    "test_csv_has_a_header_and_one_row_per_learner_and_exercise",
]
DEFAULT_TESTS = {
    "course/authoring.py": [
        "tests/test_pipeline.py",
        "tests/test_authoring_edges.py",
        *(f"--deselect=tests/test_pipeline.py::{name}" for name in COMMITTED_NOTEBOOK_TESTS),
    ],
    "course/tokens.py": ["tests/test_data.py"],  # the basics of every task, tested with them
    "course/generated.py": ["tests/test_data.py"],  # the generated tasks, tested with the registry
    "course/plotting.py": ["tests/test_utils_edges.py"],  # with the other shared helpers
    "course/__init__.py": ["tests/test_utils_edges.py"],  # the package's version
    "course/check/attention.py": [  # lesson 02's checker and lesson 03's
        "tests/test_check_attention.py",
        "tests/test_check_scaled_attention.py",
        "tests/test_checkers.py",
    ],
    "course/check/_framework.py": ["tests/test_framework.py", "tests/test_checkers.py"],
    "course/progress.py": [
        "tests/test_progress.py",
        "tests/test_progress_mutation.py",
        *(f"--deselect=tests/test_progress.py::{name}" for name in PROGRESS_KERNEL_TESTS),
    ],
    "course/multihead.py": [  # fused=True and rotary_base are tested where they are used
        "tests/test_multihead.py",
        "tests/test_multihead_edges.py",
        "tests/test_fused_attention.py",
        "tests/test_transformer.py",
    ],
    "course/check/layers.py": [  # the DecoderLayer checker (lesson 08) runs on its machinery
        "tests/test_check_layers.py",
        "tests/test_check_layers_mutation.py",
        "tests/test_check_layers_norm_mutation.py",
        "tests/test_check_layers_sublayer_mutation.py",
        "tests/test_check_transformer.py",
        "tests/test_check_transformer_mutation.py",
        "tests/test_checkers.py",
    ],
    "course/utils.py": [  # the thread policy and write_atomically are tested where used
        "tests/test_utils.py",
        "tests/test_utils_edges.py",
        "tests/test_threads.py",
        "tests/test_train_loop.py",
    ],
    "course/layers.py": [  # lesson 08's DecoderLayer is tested with the Transformer
        "tests/test_layers.py",
        "tests/test_layers_mutation.py",
        "tests/test_transformer.py",
    ],
}
CHECK_TESTS = ["tests/test_checkers.py"]  # the contract every checker in course/check obeys

PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:nbval", "-o", "addopts=", "-W", "ignore"]
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info", "backups"
)


# ------------------------------------------------------------------ mutants ----------


@dataclass
class Mutant:
    module: str  # e.g. "course/attention.py"
    line: int
    where: str  # the enclosing function or class ("<module>" at top level)
    original: str  # the code before and after, one line each, for the report
    mutated: str
    source: str  # the whole mutated module
    first_line: int
    last_line: int
    import_time: bool  # runs when the module is imported (not inside a function body)
    statement: tuple[int, int] = (0, 0)  # the lines of the innermost statement holding it
    id: str = ""  # "where: original -> mutated" (+ " #n" for the n-th identical one)
    status: str = ""  # killed | timeout | survived | not covered | equivalent | error
    tests: list[str] = field(default_factory=list)


BINARY = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Div,
    ast.Pow: ast.Mult,
    ast.MatMult: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _short(code: str, limit: int = 90) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 1] + "…"


def _is_bare_string(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


class _Mutator:
    """Walks a module's AST and lists every mutation of it, as `found` says."""

    def __init__(self, source: str):
        self.source = source
        self.tree = ast.parse(source)
        self.lines = [line.decode() for line in source.encode().splitlines()]  # as ast counts
        # (node, its replacement (a node, or a statement as text), where, in a function body,
        # how to show the replacement when unparsing it would not say what changed)
        self.found: list[tuple[ast.AST, ast.AST | str, str, bool, str | None]] = []

    def run(self):
        self._visit(self.tree, None, "<module>", False)
        return self.found

    def statement_lines(self) -> dict[int, tuple[int, int]]:
        """id(node) -> the lines of the innermost statement holding it. A test that runs any
        line of that statement runs the node too, though the node's own lines may never be
        reported to a tracer (e.g. a dict key on its own line: its constant is loaded on
        another line)."""
        lines: dict[int, tuple[int, int]] = {}

        def walk(node, span):
            if isinstance(node, ast.stmt):
                span = (node.lineno, node.end_lineno)
            lines[id(node)] = span
            for child in ast.iter_child_nodes(node):
                walk(child, span)

        walk(self.tree, (1, 1))
        return lines

    def _skip_line(self, node) -> bool:
        line = self.lines[node.lineno - 1] if hasattr(node, "lineno") else ""
        return "pragma: no mutate" in line

    def _add(self, node, new, where, in_body, label=None):
        if not self._skip_line(node):
            self.found.append((node, new, where, in_body, label))

    def _visit(self, node, parent, where, in_body):
        if _is_bare_string(node) or isinstance(node, ast.Import | ast.ImportFrom):
            return  # docstrings (and strings documenting an attribute) do nothing
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            return
        if isinstance(node, ast.JoinedStr):  # an f-string, e.g. an error message
            self._fstring(node, where, in_body)
            return
        self._mutations(node, parent, where, in_body)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "decorator_list", "type_comment"):
                continue  # type hints and decorators are not behaviour we test
            child_where, child_in_body = where, in_body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                child_where = node.name if where == "<module>" else f"{where}.{node.name}"
                if name == "body":
                    child_in_body = True  # runs when called
                else:
                    child_where += "()"  # the signature: defaults are evaluated at import
            elif isinstance(node, ast.Lambda) and name == "body":
                child_in_body = True
            elif isinstance(node, ast.ClassDef):
                child_where = node.name if where == "<module>" else f"{where}.{node.name}"
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    self._visit(child, node, child_where, child_in_body)

    def _fstring(self, node, where, in_body):
        """Its text upper-cased (a test matching any of its words fails), and each value it
        shows left out in turn (a test checking that the message names that value fails)."""
        values = node.values
        upper = [
            ast.Constant(v.value.upper()) if isinstance(v, ast.Constant) else v for v in values
        ]
        if ast.unparse(ast.JoinedStr(upper)) != ast.unparse(node):
            self._add(node, ast.JoinedStr(upper), where, in_body, "upper-cased")
        for i, value in enumerate(values):
            if isinstance(value, ast.FormattedValue):
                label = f"without {{{ast.unparse(value.value)}}}"
                self._add(node, ast.JoinedStr(values[:i] + values[i + 1 :]), where, in_body, label)

    def _mutations(self, node, parent, where, in_body):
        add = lambda new: self._add(node, new, where, in_body)  # noqa: E731
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                add(ast.Constant(not value))
            elif isinstance(value, int):
                add(ast.Constant(value + 1))
            elif isinstance(value, float):
                add(ast.Constant(value + 1.0))
            elif isinstance(value, str) and any(c.isspace() for c in value):
                if value.upper() != value:  # prose, e.g. a message: a test matching it fails
                    add(ast.Constant(value.upper()))
            elif isinstance(value, str):  # a name, a key, an option: now another one
                add(ast.Constant(f"XX{value}XX"))
        elif isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            add(ast.BinOp(node.left, BINARY[type(node.op)](), node.right))
        elif isinstance(node, ast.AugAssign) and type(node.op) in BINARY:
            add(ast.AugAssign(node.target, BINARY[type(node.op)](), node.value))
        elif isinstance(node, ast.UnaryOp):  # -x, +x, not x, ~x  ->  x
            add(node.operand)
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in COMPARE:
                    ops = list(node.ops)
                    ops[i] = COMPARE[type(op)]()
                    add(ast.Compare(node.left, ops, node.comparators))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(ast.BoolOp(other, node.values))
        elif isinstance(node, ast.If | ast.IfExp | ast.While):
            if not isinstance(node.test, ast.Compare | ast.BoolOp | ast.UnaryOp | ast.Constant):
                self._add(node.test, ast.UnaryOp(ast.Not(), node.test), where, in_body)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            single = all(isinstance(t, ast.Name | ast.Attribute | ast.Subscript) for t in targets)
            if single and not _is_none(node.value):
                self._add(node.value, ast.Constant(None), where, in_body)
        elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            self._add(node.value, ast.Constant(None), where, in_body)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            add("pass")  # the call's side effect never happens
        elif isinstance(node, ast.Break):
            add("continue")
        elif isinstance(node, ast.Continue):
            add("break")


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_main_guard(test) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def mutants_of(module: str, source: str) -> list[Mutant]:
    """Every mutant of one module, in source order, with stable ids."""
    data = source.encode()
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    found = []
    mutator = _Mutator(source)
    statements = mutator.statement_lines()
    for node, new, where, in_body, label in mutator.run():
        begin = starts[node.lineno - 1] + node.col_offset  # col offsets count UTF-8 bytes
        end = starts[node.end_lineno - 1] + node.end_col_offset
        if isinstance(new, str):  # a statement, replaced in place
            text = shown = new
        else:
            text = f"({ast.unparse(new)})"
            shown = label or ast.unparse(new)
        mutated = (data[:begin] + text.encode() + data[end:]).decode()
        try:
            compile(mutated, module, "exec")
        except SyntaxError:
            continue  # should not happen; a broken mutant measures nothing
        original = ast.unparse(node)
        if original == shown:
            continue
        found.append(
            Mutant(
                module=module,
                line=node.lineno,
                where=where,
                original=_short(original),
                mutated=_short(shown),
                source=mutated,
                first_line=node.lineno,
                last_line=node.end_lineno,
                import_time=not in_body,
                statement=statements.get(id(node), (node.lineno, node.end_lineno)),
            )
        )
    seen: dict[str, int] = {}
    for m in found:
        base = f"{m.where}: {m.original} -> {m.mutated}"
        seen[base] = seen.get(base, 0) + 1
        m.id = base if seen[base] == 1 else f"{base} #{seen[base]}"
    return found


# ---------------------------------------------------------------- equivalents ----------


def read_equivalents(path: Path) -> dict[tuple[str, str], str]:
    """(module, mutant id) -> why it is equivalent, from lines `module | id | reason`."""
    equivalents = {}
    if not path.exists():
        return equivalents
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        module, rest = line.split(" | ", 1)
        if " | " not in rest:
            raise SystemExit(f"{path}:{number}: expected `module | mutant id | reason`")
        mutant_id, reason = rest.rsplit(" | ", 1)
        equivalents[(module.strip(), mutant_id.strip())] = reason.strip()
    return equivalents


# --------------------------------------------------------------- running tests ----------


class _Select:
    """pytest plugin: keep only the tests named in `keep` (None keeps all)."""

    def __init__(self, keep):
        self.keep = keep

    def pytest_collection_modifyitems(self, session, config, items):
        if self.keep is None:
            return
        kept = [i for i in items if i.nodeid in self.keep]
        dropped = [i for i in items if i.nodeid not in self.keep]
        items[:] = kept
        if dropped:
            config.hook.pytest_deselected(items=dropped)


class _Trace:
    """pytest plugin: which test executes which line of one file, and how long each takes."""

    COLLECT = "<collect>"

    def __init__(self, filename: str):
        self.filename = filename
        self.current = self.COLLECT
        self.lines: dict[str, set[int]] = {}
        self.seconds: dict[str, float] = {}

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines.setdefault(self.current, set()).add(frame.f_lineno)
        return self._line

    def tracer(self, frame, event, arg):
        if frame.f_code.co_filename == self.filename:
            self.lines.setdefault(self.current, set()).add(frame.f_lineno)
            return self._line
        return None

    def pytest_sessionstart(self, session):
        sys.settrace(self.tracer)  # from here on: collection (imports) and every test

    def pytest_runtest_logstart(self, nodeid, location):
        self.current, self.started = nodeid, time.perf_counter()

    def pytest_runtest_logfinish(self, nodeid, location):
        self.seconds[nodeid] = time.perf_counter() - self.started
        self.current = self.COLLECT

    def save(self, path: Path) -> None:
        sys.settrace(None)
        lines = {test: sorted(numbers) for test, numbers in self.lines.items()}
        path.write_text(json.dumps({"lines": lines, "seconds": self.seconds}))


def _fork_pytest(workdir: Path, args: list[str], plugins: list, log: Path, after=None) -> int:
    """Run pytest in a forked child (its own process group); return the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 98
    try:
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(workdir)
        sys.path.insert(0, str(workdir))
        import pytest

        code = int(pytest.main(args, plugins=plugins))
        if after is not None:
            after()
    except BaseException:  # noqa: BLE001 - anything that goes wrong in the child kills the mutant
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _preimport():
    """Import the heavy libraries once, before any fork (never `course` itself)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in ("pytest", "numpy", "torch", "matplotlib.pyplot", "nbformat", "jupytext"):
        try:
            __import__(name)
        except ImportError:
            pass
    try:
        import nbclient  # noqa: F401
    except ImportError:
        pass


class Unmeasured(Exception):
    """A module whose mutants cannot be run: no tests, or tests that fail unmutated."""


def tests_for(module: str, root: Path) -> list[str]:
    if module in DEFAULT_TESTS:
        return list(DEFAULT_TESTS[module])
    stem = Path(module).stem
    prefix = "test_check_" if Path(module).parent.name == "check" else "test_"
    found = sorted(
        {*root.glob(f"tests/{prefix}{stem}.py"), *root.glob(f"tests/{prefix}{stem}_*.py")}
    )
    extra = CHECK_TESTS if prefix == "test_check_" else []
    args = [str(p.relative_to(root)) for p in found] + extra
    if not args:
        raise Unmeasured(f"no tests found (tests/{prefix}{stem}*.py): name them with --tests")
    return args


def baseline(module: str, workdir: Path, args: list[str]) -> _Trace:
    """Run the module's tests once, unmutated, recording the lines each test executes."""
    trace = _Trace(str(workdir / module))
    log, saved = workdir / "baseline.log", workdir / "baseline.json"
    saved.unlink(missing_ok=True)
    pid = _fork_pytest(
        workdir, [*args, *PYTEST_ARGS], [trace], log, after=lambda: trace.save(saved)
    )
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0 or not saved.exists():
        tail = log.read_text(errors="replace")[-3000:]
        raise Unmeasured(f"the tests fail on the unmutated module (pytest exit {code}):\n{tail}")
    result = json.loads(saved.read_text())
    trace.lines = {test: set(numbers) for test, numbers in result["lines"].items()}
    trace.seconds = result["seconds"]
    if not trace.lines:
        raise Unmeasured(f"the tests never executed {workdir / module}: do they import it?")
    return trace


def select_tests(mutant: Mutant, trace: _Trace) -> list[str] | None:
    """The tests that execute the mutant's lines; all tests for import-time code."""
    first, last = mutant.statement
    lines = set(range(mutant.first_line, mutant.last_line + 1)) | set(range(first, last + 1))
    if mutant.import_time or lines & trace.lines.get(_Trace.COLLECT, set()):
        return list(trace.seconds)
    return [t for t in trace.seconds if lines & trace.lines.get(t, set())]


def run_mutants(module, mutants, trace, workdirs, args, say) -> None:
    queue = []
    for m in mutants:
        m.tests = select_tests(m, trace) or []
        if m.tests:
            queue.append(m)
        else:
            m.status = "not covered"
    running: dict[int, tuple[Mutant, Path, float, float]] = {}  # pid -> mutant, dir, t0, limit
    free = list(workdirs)
    done, total = 0, len(queue)
    while queue or running:
        while queue and free:
            m, workdir = queue.pop(0), free.pop()
            (workdir / module).write_text(m.source, encoding="utf-8")
            limit = 15.0 + 4.0 * sum(trace.seconds[t] for t in m.tests)
            pid = _fork_pytest(
                workdir, [*args, *PYTEST_ARGS, "-x"], [_Select(set(m.tests))], workdir / "run.log"
            )
            running[pid] = (m, workdir, time.monotonic(), limit)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
            for pid, (m, _, t0, limit) in list(running.items()):
                if time.monotonic() - t0 > limit:
                    os.killpg(pid, signal.SIGKILL)
                    m.status = "timeout"
            continue
        m, workdir, _, _ = running.pop(pid)
        free.append(workdir)
        code = os.waitstatus_to_exitcode(status)
        if not m.status:  # pytest's exit codes: 0 passed, 1 failed, 2 interrupted (e.g. an
            # import error), 3 internal error; a negative code is a crash (a signal)
            m.status = {0: "survived", 4: "error", 5: "error"}.get(code, "killed")
        done += 1
        say(f"  [{done}/{total}] {m.status:8} line {m.line}: {m.id}")
    for workdir in workdirs:  # leave the copies unmutated
        (workdir / module).write_text((ROOT / module).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------ main ----------


def earlier_alive(module: str, source: str, earlier: list[dict]) -> set[str]:
    """The ids of the mutants an earlier run of this very source (its --json) left alive."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    for result in earlier:
        if result.get("module") != module:
            continue
        if result.get("source_sha256") != digest:
            raise Unmeasured(
                f"--again: the earlier run measured another version of {module} "
                f"(sha256 {result.get('source_sha256')}, now {digest}): run it whole"
            )
        return {m["id"] for m in result["survivors"]} | {m["id"] for m in result["equivalents"]}
    raise Unmeasured(f"--again: the earlier run did not measure {module}")


def measure(module, args, jobs, equivalents, verbose, tmp, earlier=None) -> dict:
    say = (lambda text: print(text, flush=True)) if verbose else (lambda _: None)
    source = (ROOT / module).read_text(encoding="utf-8")
    mutants = mutants_of(module, source)
    killed_before = []
    if earlier is not None:  # rerun only what the earlier run left alive
        alive = earlier_alive(module, source, earlier)
        killed_before = [m for m in mutants if m.id not in alive]
        for m in killed_before:
            m.status = "killed"
        mutants_to_run = [m for m in mutants if m.id in alive]
    else:
        mutants_to_run = mutants
    if not mutants:
        print(f"{module}: nothing to mutate", flush=True)
        return {"module": module, "mutants": 0, "killed": 0, "timeout": 0, "survived": 0,
                "equivalent": 0, "score": 100.0, "seconds": 0.0, "survivors": [],
                "equivalents": []}  # fmt: skip
    workdirs = []
    for i in range(jobs):  # fresh copies for each module: the tree may have changed since
        workdir = Path(tmp) / module.replace("/", "_") / f"w{i}"
        shutil.copytree(ROOT, workdir, ignore=COPY_IGNORE)
        workdirs.append(workdir)
    started = time.monotonic()
    print(f"{module}: {len(mutants)} mutants; tests: {' '.join(args)}", flush=True)
    trace = baseline(module, workdirs[0], args)
    if killed_before:
        print(f"{module}: {len(killed_before)} killed in the earlier run; running the "
              f"{len(mutants_to_run)} it left alive", flush=True)  # fmt: skip
    run_mutants(module, mutants_to_run, trace, workdirs, args, say)
    for m in mutants:
        if m.status in ("survived", "not covered") and (module, m.id) in equivalents:
            m.status = "equivalent"
    count = {s: sum(m.status == s for m in mutants) for s in ("killed", "timeout", "equivalent")}
    killed = count["killed"] + count["timeout"]
    survivors = [m for m in mutants if m.status in ("survived", "not covered", "error")]
    scored = len(mutants) - count["equivalent"]
    score = 100.0 * killed / scored if scored else 100.0
    seconds = time.monotonic() - started
    print(
        f"{module}: {len(mutants)} mutants, {killed} killed ({count['timeout']} by timeout), "
        f"{len(survivors) + count['equivalent']} survived of which {count['equivalent']} "
        f"equivalent; score {killed}/{scored} = {score:.1f}% of non-equivalent mutants "
        f"({seconds:.0f} s)",
        flush=True,
    )
    for m in survivors:
        print(f"  SURVIVED {module}:{m.line} [{m.status}] {m.id}")
    status = {m.id: m.status for m in mutants}
    for mod, mutant_id in equivalents:
        if mod == module and status.get(mutant_id) != "equivalent":
            why = "no longer exists" if mutant_id not in status else f"was {status[mutant_id]}"
            print(
                f"  note: {EQUIVALENT_FILE.name} lists, as equivalent, a mutant that {why}: "
                f"{mutant_id}"
            )
    return {
        "module": module,
        "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "mutants": len(mutants),
        "killed_in_earlier_run": len(killed_before),
        "killed": killed,
        "timeout": count["timeout"],
        "survived": len(survivors) + count["equivalent"],
        "equivalent": count["equivalent"],
        "score": round(score, 2),
        "seconds": round(seconds, 1),
        "survivors": [{"line": m.line, "id": m.id, "status": m.status} for m in survivors],
        "equivalents": [
            {"line": m.line, "id": m.id, "why": equivalents[(module, m.id)]}
            for m in mutants
            if m.status == "equivalent"
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/mutation.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("modules", nargs="+", help="files to mutate, e.g. course/attention.py")
    parser.add_argument(
        "--tests", help="pytest arguments instead of the default tests, one string: 'a.py -k x'"
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--quiet", action="store_true", help="no line per mutant")
    parser.add_argument("--fail-under", type=float, help="exit 1 if a module scores below")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--equivalent", type=Path, default=EQUIVALENT_FILE)
    parser.add_argument(
        "--again",
        type=Path,
        metavar="EARLIER_JSON",
        help="run only the mutants that an earlier run's --json left alive (the same "
        "source, checked by its sha256): after adding tests, the killed stay killed",
    )
    options = parser.parse_args(argv)

    modules = []
    for name in options.modules:
        path = Path(name).resolve()
        if not path.is_file() or ROOT not in path.parents:
            parser.error(f"{name} is not a file in {ROOT}")
        modules.append(path.relative_to(ROOT).as_posix())
    if options.list:
        for module in modules:
            for m in mutants_of(module, (ROOT / module).read_text(encoding="utf-8")):
                print(f"{module}:{m.line} {'(import time) ' if m.import_time else ''}{m.id}")
        return 0

    # One thread per test process (they run side by side), set before torch is imported:
    # OpenMP in a forked child of a parent that started its threads can hang.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    sys.dont_write_bytecode = True  # mutants of equal size written in the same second
    _preimport()
    equivalents = read_equivalents(options.equivalent)
    earlier = json.loads(options.again.read_text(encoding="utf-8")) if options.again else None
    results = []
    with tempfile.TemporaryDirectory(prefix="course-mutation-") as tmp:
        for module in modules:
            try:
                args = shlex.split(options.tests) if options.tests else tests_for(module, ROOT)
                verbose = not options.quiet
                results.append(
                    measure(module, args, max(1, options.jobs), equivalents, verbose, tmp, earlier)
                )
            except Unmeasured as error:  # say so, go on with the other modules, exit 1
                print(f"{module}: NOT MEASURED: {error}", flush=True)
                results.append({"module": module, "error": str(error)})
    if options.json:
        options.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if len(results) > 1:
        print("\nmodule                       mutants  killed  survived  equivalent  score")
        for r in results:
            if "error" in r:
                print(f"{r['module']:28} not measured: {r['error'].splitlines()[0]}")
                continue
            print(
                f"{r['module']:28} {r['mutants']:7} {r['killed']:7} {r['survived']:9} "
                f"{r['equivalent']:11}  {r['score']:.1f}%"
            )
    if any("error" in r for r in results):
        return 1
    if options.fail_under is not None and any(r["score"] < options.fail_under for r in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
