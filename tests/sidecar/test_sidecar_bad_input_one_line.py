"""`hangwatch sidecar` rejects bad configuration with one line and exit 3, never a traceback.

Covers: missing bootstrap; a non-numeric flag; a non-numeric environment variable;
stall not longer than the probe interval; an expected write interval not longer than
the probe interval, negative or NaN; a port out of range; a malformed bootstrap
entry; a malformed `-X`; a driver UI URL with a path, a driver URL that is not Spark's,
an executor id that could escape a REST path; a probe mode, socket ports or uids out of
range, a socket process tree that is a PID out of range or a blank command line (flag and
environment), a socket-view switch that is not a boolean (flag and environment), a NaN
interval; and that a secret-looking `-X` value is never echoed.
"""

from __future__ import annotations

import os

import pytest

from hangwatch_testing.processes import run_hangwatch

CASES = {
    "no bootstrap": ([], {}, "--bootstrap (HANGWATCH_BOOTSTRAP) is required"),
    "bad float flag": (
        ["--bootstrap", "x:1", "--probe-interval-seconds", "abc"],
        {},
        "invalid float value",
    ),
    "bad env": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_PORT": "abc"},
        "HANGWATCH_PORT='abc' is not a valid int",
    ),
    "stall vs interval": (
        ["--bootstrap", "x:1", "--stall-seconds", "1", "--probe-interval-seconds", "5"],
        {},
        "--stall-seconds must be longer than --probe-interval-seconds",
    ),
    "write interval vs probe interval": (
        ["--bootstrap", "x:1", "--expected-write-interval-seconds", "3"],
        {"HANGWATCH_PROBE_INTERVAL_SECONDS": "5"},
        "--expected-write-interval-seconds must be 0 (not said) or longer than "
        "--probe-interval-seconds",
    ),
    "write interval negative": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_EXPECTED_WRITE_INTERVAL_SECONDS": "-10"},
        "--expected-write-interval-seconds must be 0 (not said) or longer",
    ),
    "write interval nan": (
        ["--bootstrap", "x:1", "--expected-write-interval-seconds", "nan"],
        {},
        "--expected-write-interval-seconds must be 0 (not said) or longer",
    ),
    "port": (["--bootstrap", "x:1", "--port", "70000"], {}, "--port must be 0..65535"),
    "bootstrap entry": (["--bootstrap", "host:notaport"], {}, "port in bootstrap entry"),
    "malformed -X": (["--bootstrap", "x:1", "-X", "hunter2"], {}, "malformed -X argument #1"),
    "spark ui url": (
        ["--bootstrap", "x:1", "--spark-ui-url", "http://driver:4040/api/v1"],
        {},
        "--spark-ui-url: UI URL must be the UI's base",
    ),
    "spark driver url": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_SPARK_DRIVER_URL": "driver:7078"},
        "--spark-driver-url: driver URL must look like spark://",
    ),
    "executor id": (
        ["--bootstrap", "x:1", "--executor-id", "../../etc"],
        {},
        "--executor-id must be letters, digits",
    ),
    "probe mode": (
        ["--bootstrap", "x:1", "--probe-mode", "sometimes"],
        {},
        "--probe-mode must be one of passive-first, fresh",
    ),
    "socket ports": (
        ["--bootstrap", "x:1", "--socket-ports", "9092,70000"],
        {},
        "--socket-ports: '70000' is not a number in 1..65535",
    ),
    "socket uids env": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_SOCKET_UIDS": "185,-1"},
        "--socket-uids: '-1' is not a number",
    ),
    "socket process pid": (
        ["--bootstrap", "x:1", "--socket-process", "0"],
        {},
        "--socket-process: a PID must be 1..4194304, got 0",
    ),
    "socket process env": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_SOCKET_PROCESS": "   "},
        "--socket-process: blank text would match every process",
    ),
    "socket view flag": (
        ["--bootstrap", "x:1", "--socket-view", "maybe"],
        {},
        "invalid parse_bool value",
    ),
    "socket view env": (
        ["--bootstrap", "x:1"],
        {"HANGWATCH_SOCKET_VIEW": "maybe"},
        "HANGWATCH_SOCKET_VIEW='maybe' is not a valid bool",
    ),
    "fresh interval": (
        ["--bootstrap", "x:1", "--fresh-connect-interval-seconds", "nan"],
        {},
        "--fresh-connect-interval-seconds must be > 0",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_configuration_is_one_line_exit_3(case: str) -> None:
    args, env, message = CASES[case]
    proc = run_hangwatch("sidecar", *args, timeout=60, env={**os.environ, **env})
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "hunter2" not in proc.stderr
