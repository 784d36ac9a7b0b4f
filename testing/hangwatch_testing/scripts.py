"""Loads a program of the repository's scripts/ folder as a module, for its tests.

scripts/ is no package (each file runs as `python3 scripts/NAME.py`), so tests that call a
generator's functions (the dashboard's, the docs references') load it by path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str) -> ModuleType:
    """scripts/<name>.py, executed once more as a fresh module named `name` (registered in
    `sys.modules` under that name, replacing an earlier load)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no scripts/{name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
