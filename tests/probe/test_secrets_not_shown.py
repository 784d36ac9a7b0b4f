"""Secret -X values never appear in output, errors or logs.

Covers:
- SASL credentials passed with -X: neither the text summary, nor the JSON document, nor
  stderr contain the password; the document shows the key with `[redacted]`; the mock
  rejects SASL, so the brokers are `auth_error` (exit 2) and the error text is scrubbed;
- an invalid secret-bearing property (a malformed inline key) is a usage error whose
  message does not echo the value;
- a malformed -X argument (no key, or a bare secret without `key=`) is not echoed;
- the engine's settings repr and its DEBUG logs (the sidecar's case) hold no secret.
"""

from __future__ import annotations

import json
import logging

import pytest

from hangwatch.contracts import ExitCode, Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.settings import ProbeSettings

from .helpers import FAST_FLAGS, probe_lab, run_cli

SECRET = "hunter2-0f3c9a"
SASL = [
    "-X", "security.protocol=SASL_PLAINTEXT",
    "-X", "sasl.mechanism=PLAIN",
    "-X", "sasl.username=probe",
    "-X", f"sasl.password={SECRET}",
]  # fmt: skip


def test_sasl_password_is_never_printed(lab: Lab) -> None:
    text = run_cli("--bootstrap", lab.bootstrap, *SASL, *FAST_FLAGS)
    as_json = run_cli("--bootstrap", lab.bootstrap, *SASL, "--json", *FAST_FLAGS)

    for proc in (text, as_json):
        assert proc.returncode == ExitCode.UNAVAILABLE
        assert SECRET not in proc.stdout + proc.stderr
    document = json.loads(as_json.stdout)
    assert document["settings"]["client_config"]["sasl.password"] == "[redacted]"
    assert document["settings"]["client_config"]["sasl.username"] == "probe"
    assert {e["reachability"] for e in document["endpoints"]} == {"auth_error"}
    assert "auth_error" in text.stdout


def test_invalid_secret_value_is_not_echoed() -> None:
    proc = run_cli(
        "-b", "127.0.0.1:9", "-X", "security.protocol=SSL", "-X", f"ssl.key.pem={SECRET}"
    )

    assert proc.returncode == ExitCode.USAGE
    assert "ssl.key.pem" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


@pytest.mark.parametrize("argument", [f"={SECRET}", SECRET])
def test_malformed_argument_is_not_echoed(argument: str) -> None:
    proc = run_cli("-b", "127.0.0.1:9", "-X", argument)

    assert proc.returncode == ExitCode.USAGE
    assert "malformed -X argument #1" in proc.stderr
    assert SECRET not in proc.stderr


def test_engine_keeps_secrets_out_of_repr_and_logs(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "probe",
        "sasl.password": SECRET,
    }
    settings = ProbeSettings(connect_timeout_ms=800, request_timeout_ms=800, client_config=config)
    caplog.set_level(logging.DEBUG)

    result, assessment = probe_lab(lab, settings=settings)

    assert {r.reachability for r in assessment.rows} == {Reachability.AUTH_ERROR}
    assert SECRET not in repr(settings) + repr(result) + repr(assessment)
    assert caplog.records, "librdkafka log lines should reach the probes logger"
    assert SECRET not in caplog.text
