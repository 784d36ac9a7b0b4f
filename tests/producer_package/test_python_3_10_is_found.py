"""Which CPython 3.10 the producer's 3.10 check runs on (`hangwatch_testing.pythons`):
pyenv's newest 3.10, never pyenv's shim; a one-line failure when the machine has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_testing.pythons import python_3_10


def _interpreter(root: Path, version: str) -> Path:
    path = root / "versions" / version / "bin" / "python3.10"
    path.parent.mkdir(parents=True)
    path.write_text("")
    path.chmod(0o755)
    return path


def test_the_newest_pyenv_3_10_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    _interpreter(tmp_path, "3.10.9")
    newest = _interpreter(tmp_path, "3.10.13")
    assert python_3_10() == str(newest)


def test_pyenvs_shim_is_not_an_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3.10"
    shim.write_text("#!/bin/sh\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(shims))
    with pytest.raises(AssertionError, match=r"no CPython 3\.10 on this machine"):
        python_3_10()


def test_python3_10_on_path_is_taken_without_pyenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3.10"
    python.write_text("")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert python_3_10() == str(python)
