"""Loads a program of the repository's scripts/ folder as a module, for its tests.

scripts/ is no package (each file runs as `python3 scripts/NAME.py`), so tests that call a
generator's functions (the dashboard's, the docs references') load it by path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str) -> ModuleType:
    """scripts/<name>.py, executed once more as a fresh module named `name`."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no scripts/{name}.py"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
