"""tools/check_pins.py without the network: wheel tags, markers, specifiers, the table and the
exit code on made-up file lists; and the repository's own pins, markers and Python range."""

import importlib.util
import re
import sys
import urllib.error
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("check_pins", ROOT / "tools" / "check_pins.py")
cp = importlib.util.module_from_spec(_spec)
sys.modules["check_pins"] = cp  # dataclasses look their module up there
_spec.loader.exec_module(cp)

PLATFORMS = list(cp.PLATFORMS)
PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]


# --- wheel tags ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "filename, python, platform",
    [
        ("torch-2.13.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "linux-x86_64"),
        ("torch-2.13.0-cp312-cp312-manylinux_2_28_aarch64.whl", "3.12", "linux-aarch64"),
        ("torch-2.13.0-cp314-cp314-macosx_14_0_arm64.whl", "3.14", "macos-arm64"),
        ("torch-2.13.0-cp311-cp311-win_amd64.whl", "3.11", "windows-x86_64"),
        # compressed tag sets, legacy manylinux names, universal2, the stable ABI, pure Python
        (
            "numpy-2.2.6-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "3.10",
            "linux-x86_64",
        ),
        ("x-1.0-cp311-cp311-manylinux2014_aarch64.whl", "3.11", "linux-aarch64"),
        ("x-1.0-cp311-cp311-macosx_10_9_universal2.whl", "3.11", "macos-arm64"),
        ("x-1.0-cp39-abi3-win_amd64.whl", "3.14", "windows-x86_64"),
        ("tqdm-4.70.1-py3-none-any.whl", "3.13", "macos-arm64"),
        ("six-1.0-py2.py3-none-any.whl", "3.10", "windows-x86_64"),
        (
            "ruff-0.17.6-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            "3.14",
            "linux-aarch64",
        ),
        ("x-1.0-1-cp313-cp313-win_amd64.whl", "3.13", "windows-x86_64"),  # with a build tag
    ],
)
def test_wheels_that_install(filename, python, platform):
    assert cp.wheel_fits(filename, python, platform)


@pytest.mark.parametrize(
    "filename, python, platform, why",
    [
        ("torch-2.13.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.11", "linux-x86_64", "python"),
        ("torch-2.13.0-cp310-cp310-manylinux_2_28_x86_64.whl", "3.10", "linux-aarch64", "arch"),
        (
            "torch-2.13.0-cp314-cp314t-manylinux_2_28_x86_64.whl",
            "3.14",
            "linux-x86_64",
            "free-threaded build only",
        ),
        ("x-1.0-cp312-abi3-win_amd64.whl", "3.11", "windows-x86_64", "abi3 built for a later 3.x"),
        ("x-1.0-cp311-cp311-manylinux_2_39_x86_64.whl", "3.11", "linux-x86_64", "glibc too new"),
        ("x-1.0-cp311-cp311-musllinux_1_2_x86_64.whl", "3.11", "linux-x86_64", "musl"),
        ("x-1.0-cp311-cp311-linux_x86_64.whl", "3.11", "linux-x86_64", "not manylinux"),
        ("x-1.0-cp311-cp311-macosx_15_0_arm64.whl", "3.11", "macos-arm64", "macOS too new"),
        ("x-1.0-cp311-cp311-macosx_11_0_x86_64.whl", "3.11", "macos-arm64", "Intel Mac"),
        ("x-1.0-cp311-cp311-win32.whl", "3.11", "windows-x86_64", "32-bit Windows"),
        ("x-1.0-cp311-cp311-win_arm64.whl", "3.11", "windows-x86_64", "Windows on ARM"),
        ("x-1.0-py2-none-any.whl", "3.11", "windows-x86_64", "Python 2 only"),
        ("x-1.0-py312-none-any.whl", "3.11", "windows-x86_64", "pure, but for 3.12+"),
        ("x-1.0-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl", "3.10", "linux-x86_64", "PyPy"),
        ("x-1.0.tar.gz", "3.11", "linux-x86_64", "source distribution"),
    ],
)
def test_wheels_that_do_not_install(filename, python, platform, why):
    assert not cp.wheel_fits(filename, python, platform), why


def test_find_wheel_honours_requires_python_and_skips_yanked_files():
    pure = {"filename": "ipykernel-7.4.0-py3-none-any.whl", "requires-python": ">=3.11"}
    assert cp.find_wheel([pure], "3.11", "linux-x86_64") is pure
    assert cp.find_wheel([pure], "3.10", "linux-x86_64") is None
    yanked = {"filename": "x-1.0-py3-none-any.whl", "yanked": "broken"}
    assert cp.find_wheel([yanked], "3.11", "linux-x86_64") is None


def test_release_files_match_the_version_exactly_and_normalize_names():
    files = [
        {"filename": "jupyter_server-2.2.6-py3-none-any.whl"},
        {"filename": "jupyter_server-2.2.60-py3-none-any.whl"},
        {"filename": "jupyter-server-2.2.6.tar.gz"},
        {"filename": "jupyter_server-2.2.6.zip.asc"},
    ]
    got = [f["filename"] for f in cp.release_files(files, "Jupyter.Server", "2.2.6")]
    assert got == ["jupyter_server-2.2.6-py3-none-any.whl", "jupyter-server-2.2.6.tar.gz"]


# --- specifiers and markers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, version, allowed",
    [
        (None, "3.10.0", True),
        (">=3.10", "3.10.0", True),
        (">=3.11", "3.10.0", False),
        (">=3.10,<3.15", "3.14", True),
        (">=3.10,<3.15", "3.15", False),
        (">=3.9", "3.10", True),  # numbers, not strings: "3.10" < "3.9" as text
        ("!=3.14.1,>=3.12", "3.14.0", True),
        ("!=3.14.1,>=3.12", "3.14.1", False),
        ("==3.10.*", "3.10.4", True),
        ("!=3.10.*", "3.10.0", False),
        ("~=3.9", "3.13", True),
        ("~=3.9.1", "3.10", False),
        ("<4", "3.14", True),
    ],
)
def test_specifier_allows(spec, version, allowed):
    assert cp.specifier_allows(spec, version) is allowed


def test_a_malformed_specifier_is_a_clear_error():
    with pytest.raises(ValueError, match=r"expected a clause like '>=3.10'.*got 'about 3'"):
        cp.specifier_allows("about 3", "3.11")


@pytest.mark.parametrize(
    "marker, python, platform, holds",
    [
        ('python_version < "3.11"', "3.10", "linux-x86_64", True),
        ('python_version < "3.11"', "3.11", "linux-x86_64", False),
        ('python_version >= "3.11"', "3.14", "macos-arm64", True),
        ('python_version >= "3.9"', "3.10", "linux-x86_64", True),  # not a string comparison
        ("'3.11' > python_version", "3.10", "linux-x86_64", True),  # variable on the right
        ('sys_platform == "win32"', "3.12", "windows-x86_64", True),
        ('sys_platform == "win32"', "3.12", "macos-arm64", False),
        (
            'platform_machine != "aarch64" and python_version < "3.12"',
            "3.11",
            "linux-aarch64",
            False,
        ),
        ('python_version < "3.11" or sys_platform == "darwin"', "3.13", "macos-arm64", True),
        (
            '(python_version < "3.11" or sys_platform == "darwin") and os_name == "nt"',
            "3.10",
            "windows-x86_64",
            True,
        ),
        ('"linux" in sys_platform', "3.10", "linux-aarch64", True),
        (None, "3.10", "linux-x86_64", True),
    ],
)
def test_marker_holds(marker, python, platform, holds):
    assert cp.marker_holds(marker, cp.marker_env(python, platform)) is holds


@pytest.mark.parametrize(
    "marker, message",
    [
        ('python_versoin < "3.11"', "unknown marker variable 'python_versoin'"),
        ('python_version < "3.11" and', "incomplete"),
        ('(python_version < "3.11"', "unbalanced parentheses"),
        ('python_version < "3.11" "3.12"', "cannot read the marker"),
        ('sys_platform < "win32"', "needs a version variable"),
    ],
)
def test_a_bad_marker_is_a_clear_error(marker, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cp.marker_holds(marker, cp.marker_env("3.11", "linux-x86_64"))


# --- requirements and the Python range ----------------------------------------------------


def test_parse_requirements_reads_pins_markers_and_skips_comments():
    text = '# comment\n\ntorch==2.13.0\nnumpy==2.2.6; python_version < "3.11"  # old\n'
    pins = cp.parse_requirements(text)
    assert [(p.name, p.version, p.marker) for p in pins] == [
        ("torch", "2.13.0", None),
        ("numpy", "2.2.6", 'python_version < "3.11"'),
    ]


def test_a_requirement_that_is_not_a_pin_is_a_clear_error():
    with pytest.raises(ValueError, match=r"line 2: expected 'name==version'.*got 'numpy>=2'"):
        cp.parse_requirements("torch==2.13.0\nnumpy>=2\n")


def test_supported_pythons_come_from_requires_python_and_need_an_upper_bound():
    assert cp.supported_pythons('requires-python = ">=3.10,<3.15"\n') == PYTHONS
    with pytest.raises(ValueError, match="no upper bound"):
        cp.supported_pythons('requires-python = ">=3.10"\n')


# --- the check, the table and the exit code -----------------------------------------------


def _wheels(name, version, pythons, requires=None):
    """A made-up release with a wheel for each Python on each of the four platforms."""
    tags = ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "macosx_14_0_arm64", "win_amd64"]
    return [
        {
            "filename": f"{name}-{version}-cp{p.replace('.', '')}-cp{p.replace('.', '')}-{t}.whl",
            "requires-python": requires,
        }
        for p in pythons
        for t in tags
    ]


INDEX = {  # name -> every file on the made-up index
    "torch": _wheels("torch", "2.13.0", PYTHONS),
    "numpy": _wheels("numpy", "2.2.6", ["3.10", "3.11"]) + _wheels("numpy", "2.4.6", PYTHONS[1:]),
    "tqdm": [{"filename": "tqdm-4.70.1-py3-none-any.whl", "requires-python": ">=3.7"}],
}
GOOD = (
    'torch==2.13.0\nnumpy==2.2.6; python_version < "3.11"\n'
    'numpy==2.4.6; python_version >= "3.11"\ntqdm==4.70.1\n'
)


def _lookup(pin):
    return [("PyPI", cp.release_files(INDEX.get(pin.name, []), pin.name, pin.version))]


def test_check_passes_when_every_pin_has_a_wheel_everywhere():
    report = cp.check(cp.parse_requirements(GOOD), PYTHONS, PLATFORMS, _lookup)
    assert report.ok, report.problems
    table = cp.render(report)
    assert re.search(r"^torch==2\.13\.0 +(✓✓✓✓ +){5}$", table, re.M), table
    assert re.search(
        r'^numpy==2\.2\.6 +\[python_version < "3\.11"\] +✓✓✓✓ +(···· +){4}$', table, re.M
    ), table
    assert "✗" not in table.split("\n", 1)[1]  # past the legend


def test_check_names_the_pin_python_and_reason_when_a_wheel_is_missing():
    text = "numpy==2.4.6\ntqdm==4.70.1\n"
    report = cp.check(cp.parse_requirements(text), PYTHONS, PLATFORMS, _lookup)
    assert report.problems == [
        "numpy==2.4.6 on Python 3.10 (all four platforms): no wheel built for CPython 3.10 there"
    ]
    assert re.search(r"^numpy==2\.4\.6 +✗✗✗✗ +(✓✓✓✓ +){4}$", cp.render(report), re.M)


def test_check_says_when_the_release_needs_a_newer_python():
    index = {
        "ipykernel": [{"filename": "ipykernel-7.4.0-py3-none-any.whl", "requires-python": ">=3.11"}]
    }

    def lookup(pin):
        return [("PyPI", cp.release_files(index[pin.name], pin.name, pin.version))]

    report = cp.check(cp.parse_requirements("ipykernel==7.4.0\n"), PYTHONS, PLATFORMS, lookup)
    assert report.problems == [
        "ipykernel==7.4.0 on Python 3.10 (all four platforms): the release requires Python >=3.11"
    ]


def test_check_reports_a_missing_platform_and_a_missing_release():
    index = dict(INDEX, torch=[f for f in INDEX["torch"] if "win_amd64" not in f["filename"]])

    def lookup(pin):
        return [("PyPI", cp.release_files(index.get(pin.name, []), pin.name, pin.version))]

    report = cp.check(
        cp.parse_requirements("torch==2.13.0\ntqdm==9.9.9\n"), ["3.12"], PLATFORMS, lookup
    )
    assert report.problems == [
        "torch==2.13.0 on Python 3.12 (Windows x86_64): no wheel built for CPython 3.12 there",
        "tqdm==9.9.9 on Python 3.12 (all four platforms): no such release on the index",
    ]


def test_check_catches_markers_that_leave_a_gap_or_overlap():
    gap = 'numpy==2.2.6; python_version < "3.11"\nnumpy==2.4.6; python_version > "3.11"\n'
    report = cp.check(cp.parse_requirements(gap), PYTHONS, PLATFORMS, _lookup)
    assert report.problems == [
        "numpy on Python 3.11 (all four platforms): no pin applies: check its markers in "
        "requirements.txt"
    ]
    overlap = 'numpy==2.2.6; python_version <= "3.11"\nnumpy==2.4.6; python_version >= "3.11"\n'
    report = cp.check(cp.parse_requirements(overlap), PYTHONS, PLATFORMS, _lookup)
    assert report.problems == [
        "numpy on Python 3.11 (all four platforms): numpy==2.2.6 and numpy==2.4.6 all apply; "
        "expected one (check the markers)"
    ]


def _main(tmp_path, monkeypatch, capsys, text, fetch):
    req = tmp_path / "requirements.txt"
    req.write_text(text)
    monkeypatch.setattr(cp, "fetch_files", fetch)
    code = cp.main(["--requirements", str(req), "--python", *PYTHONS])
    return code, capsys.readouterr().out


def test_main_exits_0_when_all_is_well_and_1_when_a_wheel_is_missing(tmp_path, monkeypatch, capsys):
    def fetch(index, name, timeout=None):
        assert index == cp.PYPI, "the CPU index is asked only when PyPI lacks a torch wheel"
        return INDEX.get(name, [])

    code, out = _main(tmp_path, monkeypatch, capsys, GOOD, fetch)
    assert code == 0, out
    assert out.rstrip().endswith("All 4 pins have a wheel for every promised Python and platform.")
    code, out = _main(tmp_path, monkeypatch, capsys, "numpy==2.4.6\n", fetch)
    assert code == 1, out
    assert "✗ numpy==2.4.6 on Python 3.10 (all four platforms)" in out


def test_main_looks_for_torch_on_the_cpu_index_when_pypi_lacks_it(tmp_path, monkeypatch, capsys):
    def fetch(index, name, timeout=None):
        if index == cp.TORCH_CPU:
            return _wheels("torch", "2.13.0+cpu", PYTHONS)
        return []  # not on PyPI at all

    code, out = _main(tmp_path, monkeypatch, capsys, "torch==2.13.0\n", fetch)
    assert code == 0, out
    assert "wheels found on: the PyTorch CPU index" in out


def test_main_warns_and_exits_0_when_the_index_is_unreachable(tmp_path, monkeypatch, capsys):
    def fetch(index, name, timeout=None):
        raise cp.IndexUnreachable(f"{index}/{name}/: timed out")

    code, out = _main(tmp_path, monkeypatch, capsys, GOOD, fetch)
    assert code == 0
    assert out.splitlines()[-1] == (
        f"WARNING: the package index is unreachable ({cp.PYPI}/torch/: timed out); "
        "pins NOT checked, exiting 0."
    )


def test_fetch_files_turns_network_errors_into_index_unreachable(monkeypatch):
    def refuse(request, timeout):
        assert timeout == 7, "every request has a timeout"
        raise urllib.error.URLError("no route")

    monkeypatch.setattr(cp.urllib.request, "urlopen", refuse)
    with pytest.raises(cp.IndexUnreachable, match="no route"):
        cp.fetch_files("https://index.invalid/simple", "torch", timeout=7)


def test_the_html_index_page_is_read_too():
    page = (
        '<a href="/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=00"'
        ' data-requires-python="&gt;=3.10">torch</a>'
    )
    parser = cp._Anchors()
    parser.feed(page)
    assert parser.files == [
        {
            "filename": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
            "requires-python": ">=3.10",
            "yanked": False,
        }
    ]
    assert cp.release_files(parser.files, "torch", "2.13.0") == parser.files


# --- the repository itself: one range everywhere, exactly one pin per package ------------


def _range():
    pythons = cp.supported_pythons((ROOT / "pyproject.toml").read_text())
    return pythons[0], pythons[-1], pythons


def test_every_place_names_the_same_python_range():
    low, high, pythons = _range()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^PY_MIN\s*:?=\s*{re.escape(low)}$", makefile, re.M), "Makefile PY_MIN"
    assert re.search(rf"^PY_MAX\s*:?=\s*{re.escape(high)}$", makefile, re.M), "Makefile PY_MAX"
    pyproject = (ROOT / "pyproject.toml").read_text()
    classifiers = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)
    assert classifiers == pythons
    readme = (ROOT / "README.md").read_text()
    assert f"Python {low} to {high}" in readme
    platforms = (ROOT / "docs" / "platforms.md").read_text()  # the README links it
    assert f"outside {low} to {high}" in platforms
    table = re.search(r"^\| platform \|(.*)\|$", platforms, re.M)
    assert table is not None, "docs/platforms.md's table of supported Pythons and platforms"
    assert [c.strip() for c in table.group(1).split("|")] == pythons
    assert "tools/check_pins.py" in (ROOT / ".ci" / "run").read_text()


def test_the_requirements_give_exactly_one_pin_per_package_on_every_python_and_platform():
    _, _, pythons = _range()
    pins = cp.parse_requirements((ROOT / "requirements.txt").read_text())
    assert any(p.name == "torch" and p.version == "2.13.0" and p.marker is None for p in pins)
    for name in {p.name for p in pins}:
        for python in pythons:
            for platform in PLATFORMS:
                env = cp.marker_env(python, platform)
                chosen = [p for p in pins if p.name == name and cp.marker_holds(p.marker, env)]
                assert len(chosen) == 1, (name, python, platform, chosen)


def test_a_page_that_is_not_an_index_is_treated_as_unreachable(monkeypatch):
    class Reply:
        headers = {"Content-Type": "application/vnd.pypi.simple.v1+json"}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return b"<html>proxy error</html>"

    monkeypatch.setattr(cp.urllib.request, "urlopen", lambda request, timeout: Reply())
    with pytest.raises(cp.IndexUnreachable, match="not an index page"):
        cp.fetch_files(cp.PYPI, "torch")


def test_why_missing_names_a_source_only_release():
    files = [{"filename": "x-1.0.tar.gz", "requires-python": None}]
    assert cp.why_missing(files, "3.12") == "no wheel, only a source distribution"
