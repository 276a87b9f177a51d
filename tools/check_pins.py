"""Does every pin in requirements.txt have a wheel for every Python and platform we promise?

    python3 tools/check_pins.py                  # the supported Pythons, from pyproject.toml
    python3 tools/check_pins.py --python 3.15    # try a Python we do not promise yet

For each pin (its environment marker evaluated per Python version) it asks the package index
(PyPI's JSON simple API, PEP 691) for the pinned release's files and looks for a wheel that
installs on CPython X.Y on Linux x86_64, Linux aarch64, macOS arm64 and Windows x86_64, honouring
the file's requires-python. It prints a table, then one line per missing wheel.

Exit status: 1 if a promised combination has no wheel (or no pin at all), 0 if all have one.
If the index cannot be reached it says so in one line and exits 0: an offline CI run must not
fail for network reasons (the check then simply did not happen). Every request has a timeout.

Standard library only, so it runs with any python3, before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPI = "https://pypi.org/simple"
TORCH_CPU = "https://download.pytorch.org/whl/cpu"  # CPU-only builds of torch
TIMEOUT_S = 20  # seconds per request; the first request that fails ends the check

# The oldest system each platform promises: glibc 2.28 (what torch's manylinux_2_28 wheels need;
# Debian 10, RHEL 8, Ubuntu 20.04 and later) and macOS 14 (what torch's arm64 wheels need).
# A wheel built for a newer glibc or macOS would not install there.
MAX_GLIBC = (2, 28)
MAX_MACOS = (14, 0)
PLATFORMS = {
    "linux-x86_64": "Linux x86_64",
    "linux-aarch64": "Linux aarch64",
    "macos-arm64": "macOS arm64",
    "windows-x86_64": "Windows x86_64",
}
# Values of the marker variables on each platform (PEP 508).
MARKER_ENV = {
    "linux-x86_64": {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": "x86_64",
    },
    "linux-aarch64": {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": "aarch64",
    },
    "macos-arm64": {
        "sys_platform": "darwin",
        "platform_system": "Darwin",
        "os_name": "posix",
        "platform_machine": "arm64",
    },
    "windows-x86_64": {
        "sys_platform": "win32",
        "platform_system": "Windows",
        "os_name": "nt",
        "platform_machine": "AMD64",
    },
}
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


# ---------------------------------------------------------------------------------------------
# Versions and specifiers (the subset requirements and requires-python use)


def version_tuple(text: str) -> tuple[int, ...]:
    """'3.10' -> (3, 10); '2.13.0+cpu' -> (2, 13, 0); pre-release suffixes are dropped."""
    parts = []
    for piece in text.strip().split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:  # '0rc1': keep 0, stop
            break
    if not parts:
        raise ValueError(f"expected a version like '3.11', got {text!r}")
    return tuple(parts)


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def specifier_allows(spec: str | None, version: str) -> bool:
    """Does a specifier set such as '>=3.10,!=3.11.*,<4' admit `version`? None/'' admits all."""
    if not spec or not spec.strip():
        return True
    v = version_tuple(version)
    for clause in spec.split(","):
        clause = clause.strip()
        if not clause:
            continue
        m = re.fullmatch(r"(~=|===|==|!=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.+!*-]*)", clause)
        if m is None:
            raise ValueError(f"expected a clause like '>=3.10' in {spec!r}, got {clause!r}")
        op, target = m.groups()
        if target.endswith(".*"):  # prefix match: ==3.10.* / !=3.10.*
            prefix = version_tuple(target[:-2])
            same = (v + (0,) * len(prefix))[: len(prefix)] == prefix
            ok = same if op == "==" else (not same if op == "!=" else None)
            if ok is None:
                raise ValueError(f"'.*' only goes with == or !=, got {clause!r}")
        else:
            t = version_tuple(target)
            c = _cmp(v, t)
            if op in ("==", "==="):
                ok = c == 0
            elif op == "!=":
                ok = c != 0
            elif op == "<":
                ok = c < 0
            elif op == "<=":
                ok = c <= 0
            elif op == ">":
                ok = c > 0
            elif op == ">=":
                ok = c >= 0
            else:  # ~=X.Y.Z means >=X.Y.Z and ==X.Y.*
                ok = c >= 0 and (v + (0,) * len(t))[: len(t) - 1] == t[: len(t) - 1]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Environment markers (PEP 508): `and`, `or`, parentheses, comparisons of a variable with a
# quoted string. Enough for `python_version < "3.11"` and `sys_platform == "win32"`.

_TOKEN = re.compile(
    r"\s*(\(|\)|and\b|or\b|not in\b|in\b|===|==|!=|<=|>=|~=|<|>|"
    r"'[^']*'|\"[^\"]*\"|[A-Za-z_][A-Za-z0-9_.]*)"
)
_VERSION_VARS = {"python_version", "python_full_version"}


def _tokens(marker: str) -> list[str]:
    out, pos = [], 0
    while pos < len(marker.rstrip()):
        m = _TOKEN.match(marker, pos)
        if m is None:
            raise ValueError(f"cannot read the marker {marker!r} at {marker[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def marker_holds(marker: str | None, env: dict[str, str]) -> bool:
    """Evaluate a PEP 508 marker in `env` (variable name -> value). None/'' holds everywhere."""
    if not marker or not marker.strip():
        return True
    tokens = _tokens(marker)
    pos = 0

    def value(tok: str) -> str:
        if tok[0] in "'\"":
            return tok[1:-1]
        if tok not in env:
            raise ValueError(
                f"unknown marker variable {tok!r} in {marker!r}; expected one of {sorted(env)}"
            )
        return env[tok]

    def comparison() -> bool:
        nonlocal pos
        if tokens[pos] == "(":
            pos += 1
            result = disjunction()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ValueError(f"unbalanced parentheses in the marker {marker!r}")
            pos += 1
            return result
        if pos + 2 >= len(tokens):
            raise ValueError(f"incomplete comparison in the marker {marker!r}")
        left, op, right = tokens[pos], tokens[pos + 1], tokens[pos + 2]
        pos += 3
        lv, rv = value(left), value(right)
        if op in ("in", "not in"):
            return (lv in rv) == (op == "in")
        if left in _VERSION_VARS or right in _VERSION_VARS:
            if left in _VERSION_VARS:
                return specifier_allows(f"{op}{rv}", lv)
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            return specifier_allows(f"{flipped}{lv}", rv)
        if op == "==":
            return lv == rv
        if op == "!=":
            return lv != rv
        raise ValueError(f"operator {op!r} needs a version variable, in the marker {marker!r}")

    def conjunction() -> bool:
        nonlocal pos
        result = comparison()
        while pos < len(tokens) and tokens[pos] == "and":
            pos += 1
            result = comparison() and result
        return result

    def disjunction() -> bool:
        nonlocal pos
        result = conjunction()
        while pos < len(tokens) and tokens[pos] == "or":
            pos += 1
            result = conjunction() or result
        return result

    try:
        result = disjunction()
    except IndexError:
        raise ValueError(f"incomplete marker {marker!r}") from None
    if pos != len(tokens):
        raise ValueError(f"cannot read the marker {marker!r} at {' '.join(tokens[pos:])!r}")
    return result


def marker_env(python: str, platform: str) -> dict[str, str]:
    env = dict(MARKER_ENV[platform])
    env.update(
        python_version=python,
        python_full_version=f"{python}.0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return env


# ---------------------------------------------------------------------------------------------
# requirements.txt


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: str | None = None
    line: int = 0

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def parse_requirements(text: str) -> list[Pin]:
    """`name==version` lines, each with an optional `; marker`. Anything else is an error."""
    pins = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, _, marker = line.partition(";")
        m = re.fullmatch(r"([A-Za-z0-9][\w.-]*)\s*==\s*([0-9][\w.+!-]*)", spec.strip())
        if m is None:
            raise ValueError(
                f"requirements line {number}: expected 'name==version' "
                f"(optionally '; marker'), got {raw.strip()!r}"
            )
        pins.append(Pin(m.group(1), m.group(2), marker.strip() or None, number))
    return pins


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def supported_pythons(pyproject: str, candidates: range = range(6, 31)) -> list[str]:
    """The 3.X versions that pyproject.toml's requires-python admits (it needs an upper bound)."""
    m = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.M)
    if m is None:
        raise ValueError("pyproject.toml has no requires-python")
    found = [f"3.{minor}" for minor in candidates if specifier_allows(m.group(1), f"3.{minor}")]
    if f"3.{candidates[-1]}" in found:
        raise ValueError(f"requires-python {m.group(1)!r} has no upper bound; expected '<3.N'")
    return found


# ---------------------------------------------------------------------------------------------
# Wheel tags


def _platform_ok(tag: str, platform: str) -> bool:
    if tag == "any":
        return True
    if platform.startswith("linux-"):
        arch = platform.split("-", 1)[1]
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_" + arch, tag)
        if m:
            return (int(m.group(1)), int(m.group(2))) <= MAX_GLIBC
        legacy, _, tag_arch = tag.partition("_")
        return tag_arch == arch and legacy in LEGACY_MANYLINUX
    if platform == "macos-arm64":
        m = re.fullmatch(r"macosx_(\d+)_(\d+)_(arm64|universal2)", tag)
        return m is not None and (int(m.group(1)), int(m.group(2))) <= MAX_MACOS
    if platform == "windows-x86_64":
        return tag == "win_amd64"
    raise ValueError(f"unknown platform {platform!r}; expected one of {list(PLATFORMS)}")


def _python_ok(py_tag: str, abi_tag: str, python: str) -> bool:
    """CPython X.Y (the default, GIL build) against one interpreter tag + one ABI tag."""
    major, minor = version_tuple(python)[:2]
    m = re.fullmatch(r"(cp|py)(\d)(\d*)", py_tag)
    if m is None:
        return False
    kind, tag_major, tag_minor = m.group(1), int(m.group(2)), m.group(3)
    if tag_major != major:
        return False
    if kind == "py":  # py3 (any 3.x) or py3Y (3.Y and later, pure Python)
        return abi_tag == "none" and (not tag_minor or int(tag_minor) <= minor)
    if not tag_minor:
        return False
    tag_minor = int(tag_minor)
    if abi_tag == "abi3":  # stable ABI: built for 3.Y, loads on 3.Y and later
        return tag_minor <= minor
    if abi_tag in (f"cp{major}{minor}", "none"):
        return tag_minor == minor
    return False  # cp314t (free-threaded), cp37m, ...


def wheel_fits(filename: str, python: str, platform: str) -> bool:
    """Would pip install this wheel on CPython `python` on `platform`? (Not a wheel: False.)"""
    if not filename.endswith(".whl"):
        return False
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        return False
    py_tags, abi_tags, plat_tags = parts[-3].split("."), parts[-2].split("."), parts[-1].split(".")
    return any(_python_ok(p, a, python) for p in py_tags for a in abi_tags) and any(
        _platform_ok(t, platform) for t in plat_tags
    )


def release_files(files: list[dict], name: str, version: str) -> list[dict]:
    """The files of one release, from a project page's file list (filenames carry the version)."""
    wanted = (normalize(name), version.split("+")[0])  # 2.13.0 matches 2.13.0+cpu
    out = []
    for f in files:
        stem = f["filename"]
        for ext in (".whl", ".tar.gz", ".zip"):
            if stem.endswith(ext):
                stem = stem[: -len(ext)]
                break
        else:
            continue
        if f["filename"].endswith(".whl"):  # name_escaped-version-...
            file_name, _, rest = stem.partition("-")
            file_version = rest.split("-")[0]
        else:  # an sdist: name-version, where an old name may hold '-'
            file_name, _, file_version = stem.rpartition("-")
        if normalize(file_name) == wanted[0] and file_version.split("+")[0] == wanted[1]:
            out.append(f)
    return out


def find_wheel(files: list[dict], python: str, platform: str) -> dict | None:
    """The first file that installs on (python, platform), honouring its requires-python."""
    for f in files:
        if f.get("yanked"):
            continue
        if wheel_fits(f["filename"], python, platform) and specifier_allows(
            f.get("requires-python"), f"{python}.0"
        ):
            return f
    return None


# ---------------------------------------------------------------------------------------------
# The index


class IndexUnreachable(Exception):
    pass


class _Anchors(HTMLParser):
    """File list from a PEP 503 HTML page (download.pytorch.org serves only HTML)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[dict] = []

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        a = dict(attrs)
        href = a.get("href") or ""
        filename = href.split("#")[0].rsplit("/", 1)[-1]
        if filename:
            self.files.append(
                {
                    "filename": urllib.request.unquote(filename),
                    "requires-python": a.get("data-requires-python"),
                    "yanked": "data-yanked" in a,
                }
            )


def fetch_files(index: str, name: str, timeout: float = TIMEOUT_S) -> list[dict]:
    """Every file the index lists for `name`; [] when the project is not there."""
    url = f"{index}/{normalize(name)}/"
    req = urllib.request.Request(
        url,
        headers={
            "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
            "User-Agent": "course-check-pins",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            kind = resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return []
        raise IndexUnreachable(f"{url}: HTTP {err.code}") from err
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise IndexUnreachable(f"{url}: {getattr(err, 'reason', err)}") from err
    if "json" in kind:
        try:
            return json.loads(body)["files"]
        except (ValueError, KeyError) as err:  # a proxy's error page, say
            raise IndexUnreachable(f"{url}: not an index page ({err})") from err
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.files


# ---------------------------------------------------------------------------------------------
# The check


@dataclass
class Report:
    pythons: list[str]
    platforms: list[str]
    # (package, python, platform) -> (pin, where) with where = index name, or None: no wheel
    cells: dict[tuple[str, str, str], tuple[Pin, str | None]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def why_missing(files: list[dict], python: str) -> str:
    """Why no file of a release installs on Python `python` (for the ✗ lines)."""
    if not files:
        return "no such release on the index"
    wheels = [f for f in files if f["filename"].endswith(".whl") and not f.get("yanked")]
    if not wheels:
        return "no wheel, only a source distribution"
    needs = {f.get("requires-python") for f in wheels}
    if all(not specifier_allows(spec, f"{python}.0") for spec in needs):
        return "the release requires Python " + " / ".join(sorted(s for s in needs if s))
    return f"no wheel built for CPython {python} there"


def check(pins: list[Pin], pythons: list[str], platforms: list[str], lookup) -> Report:
    """`lookup(pin) -> [(index name, files of that release)]`, in the order to try them."""
    report = Report(pythons, platforms)
    packages = list(dict.fromkeys(normalize(p.name) for p in pins))
    cache: dict[Pin, list[tuple[str, list[dict]]]] = {}
    missing: dict[tuple[str, str, str], list[str]] = {}  # (what, python, why) -> platforms
    for package in packages:
        for python in pythons:
            for platform in platforms:
                chosen = [
                    p
                    for p in pins
                    if normalize(p.name) == package
                    and marker_holds(p.marker, marker_env(python, platform))
                ]
                if not chosen:
                    key = (package, python, "no pin applies: check its markers in requirements.txt")
                    missing.setdefault(key, []).append(platform)
                    continue
                if len(chosen) > 1:
                    key = (
                        package,
                        python,
                        f"{' and '.join(map(str, chosen))} all apply; "
                        "expected one (check the markers)",
                    )
                    missing.setdefault(key, []).append(platform)
                pin = chosen[0]
                if pin not in cache:
                    cache[pin] = lookup(pin)
                found = next(
                    (
                        index
                        for index, files in cache[pin]
                        if find_wheel(files, python, platform) is not None
                    ),
                    None,
                )
                report.cells[(package, python, platform)] = (pin, found)
                if found is None:
                    why = why_missing(cache[pin][0][1], python)
                    if len(cache[pin]) > 1:
                        why += f" (looked on {', '.join(index for index, _ in cache[pin])})"
                    missing.setdefault((str(pin), python, why), []).append(platform)
    for (what, python, why), where in missing.items():
        names = (
            "all four platforms"
            if len(where) == len(PLATFORMS)
            else ", ".join(PLATFORMS[p] for p in where)
        )
        report.problems.append(f"{what} on Python {python} ({names}): {why}")
    for pin, found in cache.items():
        if any(f.get("yanked") for _, files in found for f in files):
            report.notes.append(f"{pin}: some of its files are yanked on the index")
    return report


def render(report: Report) -> str:
    """A table: one row per pin, one column per Python, one mark per platform in each cell."""
    rows = []  # (label, [cell text per python])
    seen: list[Pin] = []
    for pin, _ in report.cells.values():
        if pin not in seen:
            seen.append(pin)
    for pin in seen:
        cells = []
        for python in report.pythons:
            text = ""
            for platform in report.platforms:
                entry = report.cells.get((normalize(pin.name), python, platform))
                if entry is None or entry[0] != pin:
                    text += "·"
                else:
                    text += "✗" if entry[1] is None else "✓"
            cells.append(text)
        label = str(pin) + ("  [" + pin.marker + "]" if pin.marker else "")
        rows.append((label, cells))
    width = max([len(r[0]) for r in rows] + [3]) + 2
    cell_w = max(len(report.platforms), 4) + 2
    head = "pin".ljust(width) + "".join(p.ljust(cell_w) for p in report.pythons)
    legend = (
        "each cell: "
        + ", ".join(PLATFORMS[p] for p in report.platforms)
        + "; ✓ wheel on the index, ✗ none, · another pin applies"
    )
    lines = [legend, head, "-" * len(head)]
    lines += [label.ljust(width) + "".join(c.ljust(cell_w) for c in cells) for label, cells in rows]
    sources = sorted({w for _, w in report.cells.values() if w})
    if sources:
        lines.append("wheels found on: " + ", ".join(sources))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt")
    parser.add_argument(
        "--python",
        nargs="+",
        metavar="X.Y",
        help="Python versions to check (default: pyproject's requires-python)",
    )
    parser.add_argument("--index", default=PYPI, help=f"simple index (default {PYPI})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per request")
    args = parser.parse_args(argv)

    pins = parse_requirements(args.requirements.read_text())
    pythons = args.python or supported_pythons((ROOT / "pyproject.toml").read_text())
    platforms = list(PLATFORMS)
    unreachable: list[str] = []

    def lookup(pin: Pin) -> list[tuple[str, list[dict]]]:
        files = fetch_files(args.index, pin.name, args.timeout)
        found = [
            (
                "PyPI" if args.index == PYPI else args.index,
                release_files(files, pin.name, pin.version),
            )
        ]
        complete = all(find_wheel(found[0][1], py, plat) for py in pythons for plat in platforms)
        if normalize(pin.name) == "torch" and not complete:
            try:  # the CPU-only index: the other place a torch wheel may come from
                files = fetch_files(TORCH_CPU, pin.name, args.timeout)
                found.append(("the PyTorch CPU index", release_files(files, pin.name, pin.version)))
            except IndexUnreachable:
                unreachable.append(TORCH_CPU)
        return found

    print(
        f"Checking {len(pins)} pins from {args.requirements.name} for Python "
        f"{', '.join(pythons)} on {', '.join(PLATFORMS[p] for p in platforms)} ...",
        flush=True,
    )
    try:
        report = check(pins, pythons, platforms, lookup)
    except IndexUnreachable as err:
        print(f"WARNING: the package index is unreachable ({err}); pins NOT checked, exiting 0.")
        return 0
    print(render(report))
    for url in unreachable:
        print(f"(could not reach {url}: torch was looked up on PyPI only)")
    for note in report.notes:
        print("note:", note)
    for problem in report.problems:
        print("✗", problem)
    if report.ok:
        print(f"All {len(pins)} pins have a wheel for every promised Python and platform.")
        return 0
    n = len(report.problems)
    print(f"{n} problem{'s' * (n != 1)}: a promised Python/platform lacks a wheel (✗ above).")
    return 1


if __name__ == "__main__":
    sys.exit(main())
