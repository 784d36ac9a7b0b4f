"""Packaging and layout guarantees.

Covers: after installation `import operator` is still the standard library (no
top-level `operator` package shadows it, from the repo root or elsewhere), and no
module of benchmarks/ or scripts/ (run as scripts, their folder first on sys.path) is
named like a standard library module; no module over 700 lines and no sidecar function
over 80; every
component package imports and says its role in a module docstring; the `hangwatch`
command lists its sub-commands, prints its version and answers an unknown command
with one line and exit 3.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from hangwatch_testing.processes import run_hangwatch

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [
    "hangwatch_producer",
    "hangwatch",
    "hangwatch_lab",
    "hangwatch_sidecar",
    "hangwatch_pipeline",
    "hangwatch_operator",
]


@pytest.mark.parametrize("cwd", [ROOT, ROOT / "operator", Path("/")])
def test_import_operator_is_the_standard_library(cwd: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import operator; print(operator.__file__)"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(out).parent == Path(sysconfig.get_paths()["stdlib"])
    assert not (ROOT / "operator" / "__init__.py").exists()


@pytest.mark.parametrize("folder", ["benchmarks", "scripts"])
def test_no_script_folder_shadows_a_standard_library_module(folder: str) -> None:
    """A script run as `python FOLDER/NAME.py` puts FOLDER first on sys.path: a module or
    package there named like the standard library's (benchmarks/operator.py once) is
    what every import of that name gets, in the script and in the library it uses."""
    names = {p.stem for p in (ROOT / folder).glob("*.py")}
    names |= {p.parent.name for p in (ROOT / folder).glob("*/__init__.py")}
    assert len(names) > 3, names
    assert sorted(names & sys.stdlib_module_names) == []


@pytest.mark.parametrize("name", PACKAGES)
def test_component_packages_import_and_document_their_role(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and len(module.__doc__.strip()) > 40


def test_every_module_opens_with_a_docstring() -> None:
    missing = []
    for folder in ("producer", "core", "lab", "sidecar", "pipeline", "operator"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.stat().st_size and not path.read_text().lstrip().startswith(('"""', "'''")):
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def _hangwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return run_hangwatch(*args, timeout=None)


def test_cli_help_version_and_unknown_command() -> None:
    helped = _hangwatch("--help")
    assert helped.returncode == 0
    assert "lab" in helped.stdout and "probe" in helped.stdout
    assert _hangwatch("--version").stdout.startswith("hangwatch ")
    unknown = _hangwatch("explode")
    assert unknown.returncode == 3
    assert unknown.stderr.count("\n") == 1 and "unknown command" in unknown.stderr


MAX_MODULE_LINES = 700
MAX_SIDECAR_FUNCTION_LINES = 80


def _python_files() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in tracked]


def test_no_module_is_over_700_lines_nor_a_sidecar_function_over_80() -> None:
    """A module doing several jobs is split by job (issue 42): no Python module of the
    repository over 700 lines; no function of the sidecar over 80."""
    long_modules, long_functions = [], []
    for path in _python_files():
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{name}: {len(text.splitlines())} lines")
        if name.startswith("sidecar/"):
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_SIDECAR_FUNCTION_LINES:
                        long_functions.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not long_modules and not long_functions, long_modules + long_functions
