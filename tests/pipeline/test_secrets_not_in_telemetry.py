"""Secrets in the producer configuration never reach the telemetry file or the logs.

Covered, against the real lab:
- password, key password and OAuth client secret values are absent from the telemetry
  file's bytes; their keys are present with the redaction marker;
- the same holds for every log record the producer emits and for `config`;
- a configuration error does not echo a secret value back in the UsageError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hangwatch.errors import UsageError
from hangwatch_lab import Lab
from hangwatch_pipeline import producer
from hangwatch_producer.secrets import REDACTED

from .producer_helpers import FAST, doc_where

pytestmark = pytest.mark.usefixtures("producer_env")

SECRETS = {
    "sasl.username": "spark-writer",
    "sasl.password": "pw-4c1d-very-secret",
    "ssl.key.password": "keypass-9f8e-secret",
    "sasl.oauthbearer.client.secret": "oauth-77aa-secret",
}


def test_secret_values_are_absent_from_file_and_logs(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    conf: dict[str, Any] = {"bootstrap.servers": lab.bootstrap, **SECRETS}
    with caplog.at_level("DEBUG"), producer(conf, FAST) as p:
        assert p.telemetry_path is not None
        p.send("t", "value")
        p.flush()
        doc = doc_where(p.telemetry_path, lambda d: d["stats"] is not None, 30)
        data = p.telemetry_path.read_text()
        config = p.config
    for key, value in SECRETS.items():
        if key == "sasl.username":
            assert doc["config"][key] == value  # not a secret: shown, helps debugging
            continue
        assert value not in data
        assert doc["config"][key] == REDACTED and config[key] == REDACTED
        assert all(value not in (r.getMessage() + str(r.__dict__)) for r in caplog.records)


def test_configuration_error_does_not_echo_secrets(lab: Lab, producer_env: Path) -> None:
    conf = {"bootstrap.servers": lab.bootstrap, **SECRETS, "no.such.property": 1}
    with pytest.raises(UsageError) as caught:
        producer(conf, FAST)
    assert "no.such.property" in str(caught.value)
    assert all(value not in str(caught.value) for value in SECRETS.values() if "secret" in value)
    assert not list(producer_env.iterdir())
