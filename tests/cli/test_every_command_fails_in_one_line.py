"""Every `hangwatch` command: `--help` works and no flag value, however bad, gives a traceback.

Covers: `--help` of every command and every action of `lab` and `pipeline` exits 0 (a
real process each); hypothesis fuzzes every command's flags with hostile values (NaN,
infinities, huge and negative numbers, empty strings, paths under /dev/null, percent
signs, control characters, bad URLs, unknown librdkafka properties): a usage error is
exactly one line on stderr and exit 3, other failures (no lab running, no cluster
credentials) one line and their own exit code, never a traceback. Undecodable bytes in
arguments, in real processes. Input a command accepts reaches the point where it would
start its real work (a probe, a sidecar loop, a lab, Spark, the operator's connection
to a cluster), where the fuzz stops it (`Started`): the real work is covered by each
component's own tests. Also the cases found by hand: `sidecar --help` (a `%` in a help
string), `demo --keep /dev/null/x`, `operator --liveness` with a port out of range or
no URL at all, `sidecar --probe-interval-seconds nan`, a bad `HANGWATCH_LOG_LEVEL`, and
`sidecar -X bogus.prop=1`, which `probe` already refused (both now validate properties
with librdkafka itself).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hangwatch import cli
from hangwatch.contracts import ExitCode

COMMANDS = sorted(cli.COMMANDS)
ACTIONS = {"lab": ["up", "down", "status", "fault"], "pipeline": ["run", "verify"]}
"""Commands whose first argument is an action with flags of its own."""

STARTS: dict[str, list[tuple[str, str]]] = {
    "probe": [("hangwatch_sidecar.probe.cli", "probe_cluster")],
    "sidecar": [("hangwatch_sidecar.sidecar_cli", "SidecarLoop")],
    "lab": [("hangwatch_lab.cli", "_up")],
    "pipeline": [
        ("hangwatch_pipeline.pipeline_cli", "verify"),
        ("hangwatch_pipeline.job", "execute"),
    ],
    "operator": [("hangwatch_operator.operator_cli", "_check_credentials")],
    "check": [("hangwatch_operator.check_cli", "survey")],
    "demo": [("hangwatch_demo.spark_cluster", "local_spark_cluster")],
    "config-check": [],
}
"""Where each command would start its real work: replaced by `_started` in the fuzz."""

HOSTILE = [
    "nan", "NaN", "inf", "-inf", "1e309", "-1", "0", "-0", "99999999999999999999999", "1.5",
    "", " ", "x", "%", "%(default)s", "%s%d", "/dev/null/x", "/dev/null", "/", "..",
    "é", "a" * 5000, "http://127.0.0.1:99999/healthz", "notaurl", "ftp://x/y",
    "http://:80/", "bogus.prop=1", "=", "a=", "host:0", "host:99999", "[::1]", "h:1,,h:2",
    "-", "--", "-X", "events:0", "local[0]", "local[2,4]", "a,b", "spark-app",
]  # fmt: skip
PLAUSIBLE = [
    "127.0.0.1:9092", "kafka:9092", "events", "healthy", "1", "10", "2.5", "ns",
    "security.protocol=PLAINTEXT", "acks=all", "librdkafka", "sarama", "java",
]  # fmt: skip
"""Values some flag accepts, so the fuzz also reaches the checks behind the first one."""
VALUES = st.one_of(
    st.sampled_from(HOSTILE),
    st.sampled_from(PLAUSIBLE),
    st.text(max_size=12),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


class Started(Exception):
    """The command accepted its input and was about to start its real work."""


def _started(*_: Any, **__: Any) -> Any:
    raise Started


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError(f"no sub-command {name}")


def _flags(parser: argparse.ArgumentParser) -> list[tuple[str, bool]]:
    """(flag, takes a value) of every optional argument but --help."""
    return [
        (action.option_strings[-1], action.nargs != 0)
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def _positionals(parser: argparse.ArgumentParser) -> int:
    return sum(
        1
        for a in parser._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    )


def _grammar() -> dict[tuple[str, ...], tuple[int, list[tuple[str, bool]]]]:
    """(command[, action]) -> (positional arguments, flags): read once from the real parsers."""
    table = {}
    for command in COMMANDS:
        parser = _subparser(cli.build_parser(only=command), command)
        for action in ACTIONS.get(command, [None]):
            sub = parser if action is None else _subparser(parser, action)
            key = (command,) if action is None else (command, action)
            table[key] = (_positionals(sub), _flags(sub))
    return table


GRAMMAR = _grammar()


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    start = draw(st.sampled_from(sorted(k for k in GRAMMAR if k[0] == command)))
    positionals, flags = GRAMMAR[start]
    argv = [*start, *(draw(VALUES) for _ in range(positionals))]
    for flag, takes_value in draw(st.lists(st.sampled_from(flags), max_size=5)) if flags else []:
        argv += [flag, draw(VALUES)] if takes_value else [flag]
    return argv


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real work starts; no lab, cluster or log configuration of the developer's is touched;
    signal handlers and logging are restored after each command."""
    for module, name in (pair for pairs in STARTS.values() for pair in pairs):
        monkeypatch.setattr(f"{module}.{name}", _started)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    for name in ("HANGWATCH_BOOTSTRAP", "HANGWATCH_LOG_LEVEL", "HANGWATCH_TELEMETRY_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str]:
    """(exit code, stderr) of `hangwatch ARGV` in this process; None when it started."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    root = logging.getLogger()
    log_state = (list(root.handlers), root.level)
    try:
        code: int | None = cli.main(argv)
    except SystemExit as exc:  # argparse: --help, usage errors
        code = exc.code if isinstance(exc.code, int) else 0
    except Started:
        code = None
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        root.handlers[:], root.level = log_state
    return code, capsys.readouterr().err


def _assert_one_line(argv: list[str], code: int | None, err: str) -> None:
    if code is None or code == ExitCode.OK:
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, (argv, err)
    assert len(lines) == 1, (argv, err)
    if code == ExitCode.USAGE:
        assert lines[0].startswith("hangwatch"), (argv, err)


@settings(
    max_examples=300,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines())
def test_no_flag_value_gives_a_traceback(
    argv: list[str], isolated: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, capsys)
    _assert_one_line(argv, code, err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--keep", "/dev/null/x"], "--keep /dev/null/x"),
        (["operator", "--liveness", "http://127.0.0.1:99999/healthz"], "--liveness"),
        (["operator", "--liveness", "notaurl"], "--liveness"),
        (["sidecar", "--bootstrap", "k:9092", "--probe-interval-seconds", "nan"], "nan"),
        (["sidecar", "--bootstrap", "k:9092", "--stall-seconds", "1e309"], "--stall-seconds"),
        (["sidecar", "--bootstrap", "k:9092", "-X", "bogus.prop=1"], "bogus.prop"),
        (["probe", "--bootstrap", "k:9092", "-X", "bogus.prop=1"], "bogus.prop"),
    ],
)
def test_cases_found_by_hand_are_usage_errors(
    argv: list[str], message: str, isolated: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, capsys)
    assert code == ExitCode.USAGE, err
    _assert_one_line(argv, code, err)
    assert message in err


def test_a_bad_log_level_is_a_usage_error(
    isolated: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HANGWATCH_LOG_LEVEL", "LOUD")
    code, err = _run(["sidecar", "--bootstrap", "k:9092"], capsys)
    assert code == ExitCode.USAGE
    assert "HANGWATCH_LOG_LEVEL" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["lab", "status", "--state", "\udcff"],
        ["demo", "--keep", "/dev/null/\udcff"],
        ["probe", "--bootstrap", "\udcff:9092"],
        ["config-check", "-X", "\udcff=1"],
        ["sidecar", "--bootstrap", "k:9092", "-X", "client.id=\udcff"],
    ],
)
def test_undecodable_bytes_in_arguments(argv: list[str], tmp_path: Path) -> None:
    """Bytes that are not UTF-8 reach Python as surrogates; a real process must still
    answer in one line (its stderr escapes what it cannot encode)."""
    proc = subprocess.run(
        [sys.executable, "-m", "hangwatch", *(os.fsencode(a) for a in argv)],
        capture_output=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
    )
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode in (ExitCode.DEGRADED, ExitCode.USAGE), err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


HELP_LINES = [[c] for c in COMMANDS] + [[c, a] for c, actions in ACTIONS.items() for a in actions]


@pytest.mark.parametrize("argv", HELP_LINES, ids=" ".join)
def test_help_of_every_command(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hangwatch", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "usage: hangwatch" in proc.stdout
