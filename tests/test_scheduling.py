"""How `make test` orders its work (the root conftest.py): the longest units first, so that no
long one starts last and runs alone while the other process waits; a lesson's two notebooks
one unit, its learner notebook first (course/memo.py reuses the first one's training)."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest_order", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_unit_named_as_long_exists():
    """A renamed file or lesson would silently drop out of the order: each name must exist."""
    for unit in _root_conftest().LONGEST:
        if unit.startswith("lesson "):
            number = unit.split()[1]
            assert list((ROOT / "notebooks").glob(f"{number}_*.ipynb")), unit
            assert list((ROOT / "solutions").glob(f"{number}_*.ipynb")), unit
        else:
            assert (ROOT / unit).is_file(), unit


def test_the_longest_units_come_first_and_each_keeps_its_own_order():
    conftest = _root_conftest()
    ids = [
        "tests/test_a.py::test_one",
        "notebooks/02_dot_product_attention.ipynb::Cell 0",
        "tests/test_gpu_check.py::test_first",
        "notebooks/11_translation.ipynb::Cell 0",
        "notebooks/11_translation.ipynb::Cell 1",
        "solutions/11_translation.ipynb::Cell 0",
        "tests/test_gpu_check.py::test_second",
        "notebooks/12_decoder_only.ipynb::Cell 0",
        "tests/test_a.py::test_two",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    conftest.pytest_collection_modifyitems(items)
    assert [item.nodeid for item in items] == [
        "notebooks/11_translation.ipynb::Cell 0",
        "notebooks/11_translation.ipynb::Cell 1",
        "solutions/11_translation.ipynb::Cell 0",
        "notebooks/12_decoder_only.ipynb::Cell 0",
        "tests/test_gpu_check.py::test_first",
        "tests/test_gpu_check.py::test_second",
        "tests/test_a.py::test_one",
        "notebooks/02_dot_product_attention.ipynb::Cell 0",
        "tests/test_a.py::test_two",
    ]
    assert conftest._unit("solutions/11_translation.ipynb::Cell 3") == "lesson 11"
    assert conftest._unit("tests/test_site.py::test_x[a]") == "tests/test_site.py"
