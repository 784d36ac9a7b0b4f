"""Bad input gets one line on stderr and exit code 3, never a traceback (the real CLI).

Covers: empty, malformed and out-of-range bootstrap entries, unbracketed IPv6, an unknown
librdkafka property, an invalid property value, a malformed -X, bootstrap.servers given
through -X, out-of-range timeouts, an empty topic name, a missing CA file for TLS, and a
missing --bootstrap. Also: an unresolvable host is NOT bad input (dns_error, exit 2).
"""

from __future__ import annotations

import json

import pytest

from hangwatch.contracts import ExitCode

from .helpers import FAST_FLAGS, run_cli

GOOD = "127.0.0.1:9"

CASES = {
    "empty bootstrap": (["--bootstrap", ""], "bootstrap list is empty"),
    "blank entry": (["--bootstrap", f"{GOOD},,"], "empty entry"),
    "no port": (["--bootstrap", "kafka-0"], "has no port"),
    "port zero": (["--bootstrap", "kafka-0:0"], "must be 1..65535"),
    "port too big": (["--bootstrap", "kafka-0:70000"], "must be 1..65535"),
    "port not a number": (["--bootstrap", "kafka-0:http"], "must be 1..65535"),
    "ipv6 without brackets": (["--bootstrap", "::1:9092"], "needs brackets"),
    "space in host": (["--bootstrap", "kafka 0:9092"], "malformed host"),
    "unknown property": (["-b", GOOD, "-X", "no.such.property=1"], "property 'no.such.property'"),
    "invalid value": (["-b", GOOD, "-X", "security.protocol=carrier-pigeon"], "Invalid value"),
    "malformed -X": (["-b", GOOD, "-X", "acks=1", "-X", "acks"], "malformed -X argument #2"),
    "-X without key": (["-b", GOOD, "-X", "=1"], "malformed -X argument #1"),
    "bootstrap via -X": (["-b", GOOD, "-X", "bootstrap.servers=x:1"], "--bootstrap"),
    "zero timeout": (["-b", GOOD, "--connect-timeout-ms", "0"], "--connect-timeout-ms"),
    "huge timeout": (["-b", GOOD, "--request-timeout-ms", "9999999"], "--request-timeout-ms"),
    "timeout not a number": (["-b", GOOD, "--connect-timeout-ms", "soon"], "invalid int"),
    "empty topic": (["-b", GOOD, "--topic", " "], "topic names"),
    "missing CA file": (
        ["-b", GOOD, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=/nonexistent/ca.pem"],
        "ssl.ca.location",
    ),
    "no bootstrap": ([], "--bootstrap"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_3(name: str) -> None:
    args, expected = CASES[name]

    proc = run_cli(*args)

    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]


def test_unresolvable_host_is_a_result_not_bad_input() -> None:
    proc = run_cli("--bootstrap", "kafka-0.hangwatch.invalid:9092", "--json", *FAST_FLAGS)

    assert proc.returncode == ExitCode.UNAVAILABLE, proc.stderr
    assert proc.stderr == ""
    document = json.loads(proc.stdout)
    assert document["endpoints"][0]["reachability"] == "dns_error"
