"""`hangwatch lab` from a shell: state file, status, faults and one-line errors.

Covers: `lab up` prints the bootstrap string first and records state; `status` and
`status --json` from another process; `fault` with a missing or invalid argument
exits 3 with one line and no traceback; commands without a running lab exit 1 with
one line naming the state file; `down` stops the lab; bad `--topics`/`--brokers`;
`--state` is accepted before or after the action, as the README shows both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_lab.cli import parse_topics
from hangwatch_testing.processes import run_hangwatch
from tests.lab.clients import lab_cli, lab_command


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_status_fault_and_down_from_another_shell(tmp_path: Path) -> None:
    state = tmp_path / "lab.json"
    with lab_cli(state, "--brokers", "2", "--topics", "events:4") as (up, bootstrap):
        recorded = json.loads(state.read_text())
        assert recorded["bootstrap"] == bootstrap
        status = json.loads(lab_command(state, "status", "--json").stdout)
        assert [b["condition"] for b in status["brokers"]] == ["up", "up"]
        assert status["topics"] == {"events": 4}
        down = lab_command(state, "fault", "down", "--broker", "2")
        assert down.returncode == 0 and "down" in down.stdout.splitlines()[2]
        missing = lab_command(state, "fault", "rtt", "--broker", "1")
        assert missing.returncode == 3
        assert "needs --ms" in _one_line_error(missing)
        unknown = lab_command(state, "fault", "down", "--broker", "7")
        assert unknown.returncode == 3
        assert "no broker 7" in _one_line_error(unknown)
        assert lab_command(state, "fault", "restore", "--all").returncode == 0
        assert lab_command(state, "down").returncode == 0
        assert up.wait(timeout=20) == 0
        assert not state.exists()


def test_commands_without_a_lab_name_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "none.json"
    proc = lab_command(state, "status")
    assert proc.returncode == 1
    assert str(state) in _one_line_error(proc)


@pytest.mark.parametrize("action", ["status", "down", "fault"])
def test_state_after_the_action_is_the_same_flag(tmp_path: Path, action: str) -> None:
    state = tmp_path / "after.json"
    extra = ["restore", "--all"] if action == "fault" else []
    proc = run_hangwatch("lab", action, *extra, "--state", str(state), timeout=60)
    assert proc.returncode == 1  # no lab behind that state file, and it says which
    assert str(state) in _one_line_error(proc)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "--brokers", "0"], "--brokers must be between 1 and 32"),
        (["up", "--topics", "t:zero"], "invalid --topics entry"),
        (["fault", "explode"], "invalid choice"),
        (["up", "--controllers", "3"], "--controllers applies to --engine kafka only"),
        (["up", "--engine", "kafka", "--controllers", "9"], "--controllers must be between 0"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = lab_command(tmp_path / "lab.json", *args)
    assert proc.returncode == 3
    assert message in _one_line_error(proc)


def test_parse_topics() -> None:
    assert parse_topics("a:6, b ,c:1") == {"a": 6, "b": 3, "c": 1}
    with pytest.raises(UsageError):
        parse_topics("a:0")
