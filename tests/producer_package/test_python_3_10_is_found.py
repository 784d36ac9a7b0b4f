"""Which CPython 3.10 the producer's 3.10 check runs on (`hangwatch_testing.pythons`):
pyenv's newest 3.10, never pyenv's shim; a one-line failure when the machine has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_testing.pythons import python_3_10


def _executable(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _interpreter(root: Path, version: str) -> Path:
    return _executable(root / "versions" / version / "bin" / "python3.10")


def test_the_newest_pyenv_3_10_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    _interpreter(tmp_path, "3.10.9")
    newest = _interpreter(tmp_path, "3.10.13")
    assert python_3_10() == str(newest)


def test_pyenvs_shim_is_not_an_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    shim = _executable(tmp_path / "shims" / "python3.10", "#!/bin/sh\nexit 127\n")
    monkeypatch.setenv("PATH", str(shim.parent))
    with pytest.raises(AssertionError, match=r"no CPython 3\.10 on this machine"):
        python_3_10()


def test_python3_10_on_path_is_taken_without_pyenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    python = _executable(tmp_path / "bin" / "python3.10")
    monkeypatch.setenv("PATH", str(python.parent))
    assert python_3_10() == str(python)
