"""Bad input is one line on stderr, exit code 3, never a traceback, never a secret.

Covers (real CLI in a subprocess): unknown librdkafka property (validated by
librdkafka itself, with a suggestion); a value librdkafka refuses; unknown sarama and
Java keys with the closest known key suggested; a malformed Go duration and a
non-numeric integer naming the key; sarama's refused zero `Net.DialTimeout`; Java's
refused explicit `delivery.timeout.ms` below `linger.ms + request.timeout.ms`; a
missing `--file`; a malformed properties line; `-X` without `=` (a secret-looking
argument is not echoed); `--brokers 0`; a non-positive `--budget-seconds`; a missing
`--client`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config_check.helpers import run_cli

CASES = {
    "unknown-librdkafka-key": (
        ["--client", "librdkafka", "-X", "messag.timeout.ms=5000"],
        "unknown librdkafka property 'messag.timeout.ms' (did you mean 'message.timeout.ms'?)",
    ),
    "librdkafka-refused-value": (
        ["--client", "librdkafka", "-X", "message.timeout.ms=soon"],
        'Invalid value for configuration property "message.timeout.ms"',
    ),
    "librdkafka-out-of-range": (
        ["--client", "librdkafka", "-X", "socket.timeout.ms=1"],
        "outside allowed range",
    ),
    "unknown-sarama-key": (
        ["--client", "sarama", "-X", "Net.DialTimout=30s"],
        "unknown sarama setting 'Net.DialTimout' (did you mean 'Net.DialTimeout'?)",
    ),
    "unknown-java-key": (
        ["--client", "java", "-X", "max.block.msec=100"],
        "unknown java setting 'max.block.msec' (did you mean 'max.block.ms'?)",
    ),
    "malformed-duration": (
        ["--client", "sarama", "-X", "Net.WriteTimeout=3 seconds"],
        "Net.WriteTimeout: expected a Go duration such as 30s, 100ms or 1m30s, got '3 seconds'",
    ),
    "duration-without-unit": (
        ["--client", "sarama", "-X", "Net.DialTimeout=30"],
        "Net.DialTimeout: expected a Go duration",
    ),
    "non-numeric-integer": (
        ["--client", "java", "-X", "max.block.ms=1m"],
        "max.block.ms: expected an integer, got '1m'",
    ),
    "sarama-zero-dial-timeout": (
        ["--client", "sarama", "-X", "Net.DialTimeout=0s"],
        "Net.DialTimeout: must be > 0, got '0s'",
    ),
    "java-refused-delivery-timeout": (
        ["--client", "java", "-X", "delivery.timeout.ms=1000"],
        "the Java producer refuses this configuration",
    ),
    "missing-file": (
        ["--client", "java", "--file", "/nonexistent/producer.properties"],
        "--file /nonexistent/producer.properties: no such file",
    ),
    "x-without-equals": (
        ["--client", "java", "-X", "linger.ms"],
        "malformed -X argument #1 (expected property=value)",
    ),
    "x-secret-without-equals": (
        ["--client", "librdkafka", "-X", "sasl.password:hunter2"],
        "malformed -X argument #1 (expected property=value)",
    ),
    "zero-brokers": (["--client", "sarama", "--brokers", "0"], "--brokers must be >= 1, got 0"),
    "negative-budget": (
        ["--client", "sarama", "--budget-seconds", "-5"],
        "--budget-seconds must be a positive number, got -5.0",
    ),
    "missing-client": (["-X", "a=b"], "the following arguments are required: --client"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_three(case: str) -> None:
    args, expected = CASES[case]
    result = run_cli(*args)
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "hunter2" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_malformed_properties_line(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("# ok\nNet.DialTimeout=30s\nNet.WriteTimeout\n", encoding="utf-8")
    result = run_cli("--client", "sarama", "--file", str(props))
    assert result.returncode == 3
    assert result.stderr.strip().endswith(f"{props}:3: expected key=value, got 'Net.WriteTimeout'")
    assert "Traceback" not in result.stderr
