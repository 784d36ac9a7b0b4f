"""The release workflow is valid, and `make check`'s linter would say so if it were not.

Covers: actionlint (scripts/go-tool.sh, the binary `make check` runs, with shellcheck on
the `run:` scripts) passes .github/workflows/release.yml, and fails a copy into which a
careless edit was planted: a misspelt `runs-on` key, an untrusted expression spliced into
a script, and an unquoted variable shellcheck names.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    tool = subprocess.run(
        ["bash", str(ROOT / "scripts" / "go-tool.sh"), "actionlint"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tool.returncode == 0, tool.stderr
    assert shutil.which("shellcheck"), "no shellcheck: run scripts/setup.sh"
    return subprocess.run(
        [tool.stdout.strip(), "-no-color", "-oneline", "-pyflakes=", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_release_workflow_passes() -> None:
    checked = actionlint(WORKFLOW)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("runs-on: ubuntu-24.04", "run-on: ubuntu-24.04", '"runs-on" section is missing'),
        (
            'make publish REGISTRY="$REGISTRY"',
            "make publish REGISTRY=${{ github.head_ref }}",
            "potentially untrusted",
        ),
        ("--notes-file release-notes.md dist/*", "--notes-file $NOTES dist/*", "SC2086"),
    ],
)
def test_a_broken_workflow_fails(tmp_path: Path, old: str, new: str, said: str) -> None:
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / "release.yml"
    broken.write_text(text.replace(old, new))
    checked = actionlint(broken)
    assert checked.returncode == 1
    assert said in checked.stdout
