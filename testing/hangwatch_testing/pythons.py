"""The CPython interpreters the producer distribution is checked on beside the project's
own (3.11+) and Debian bullseye's 3.9 (`hangwatch_testing.bullseye`).

3.10 is the python3 of Apache Spark's official images (Ubuntu 22.04). No registry these
machines install from serves a CPython 3.10 build (Debian: 3.9 and 3.11; PyPI: none;
npm's portable Pythons download from GitHub), so the suite uses the one the machine
already has: pyenv's newest 3.10, else `python3.10` on PATH (the image of the machines this project
is developed and tested on ships pyenv's CPython 3.6-3.13 beside its python3, 3.11).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PYENV_VERSIONS = "versions/3.10.*/bin/python3.10"
"""Where pyenv keeps a CPython 3.10, under its root (`PYENV_ROOT`, default ~/.pyenv)."""


def python_3_10() -> str:
    """A CPython 3.10 interpreter of this machine: pyenv's newest 3.10, else `python3.10`
    on PATH (not pyenv's shim, which runs only the version pyenv has selected); an
    AssertionError naming where it was looked for when there is none (a missing
    interpreter fails the check, never skips it)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = sorted(
        root.glob(PYENV_VERSIONS), key=lambda p: int(p.parts[-3].rsplit(".", 1)[1]), reverse=True
    )
    if candidates:
        return str(candidates[0])
    found = shutil.which("python3.10")
    if found is not None and Path(found).parent != root / "shims":
        return found
    raise AssertionError(
        f"no CPython 3.10 on this machine ({root / PYENV_VERSIONS}, or python3.10 on PATH): "
        "the producer's Python 3.10 check needs one"
    )
