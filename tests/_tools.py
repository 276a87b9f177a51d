"""tools/*.py as modules, for the tests (tools/ is no package; pytest puts tests/ on sys.path)."""

import importlib.util
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load(name: str):
    """tools/<name>.py, loaded once and registered in sys.modules under its name: a module's
    dataclasses look their module up there (tools/timings.py's fail to build otherwise)."""
    path = TOOLS / f"{name}.py"
    module = sys.modules.get(name)
    if module is not None and Path(getattr(module, "__file__", "") or "").resolve() == path:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
