"""Every `hangwatch` sub-command answers `--help`.

Covers: `hangwatch COMMAND --help` prints a usage text and exits 0 for every command
in `hangwatch.cli.COMMANDS` (argparse formats help strings with `%`, so a literal `%`
in a setting's documentation once turned `hangwatch sidecar --help` into a traceback).
"""

from __future__ import annotations

import pytest

from hangwatch.cli import COMMANDS
from hangwatch_testing.processes import run_hangwatch


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_prints_usage_and_exits_zero(command: str) -> None:
    done = run_hangwatch(command, "--help", timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: hangwatch {command}")
    assert "Traceback" not in done.stderr
