"""The lab's TLS material (`hangwatch_lab.kafka.tls`, openssl, no Kafka): the brokers'
keystore holds a certificate the lab's CA signed when the setting says `trusted`, one
it did not sign when `untrusted`, and the trusted one is there to fix it; a TLS mode
the lab does not know is one usage error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_lab.kafka import tls
from hangwatch_lab.kafka.settings import KafkaSettings


def _signed_by_the_labs_ca(material: tls.Material, keystore: Path) -> bool:
    cert = subprocess.run(
        ["openssl", "pkcs12", "-in", str(keystore), "-nokeys", "-clcerts",
         "-passin", f"pass:{tls.KEYSTORE_PASSWORD}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    verified = subprocess.run(
        ["openssl", "verify", "-CAfile", str(material.ca)],
        input=cert, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return verified.returncode == 0


@pytest.mark.parametrize("presented", ["trusted", "untrusted"])
def test_the_brokers_keystore_is_the_one_the_setting_names(tmp_path: Path, presented: str) -> None:
    material = tls.make_material(tmp_path / "tls", presented)
    assert _signed_by_the_labs_ca(material, material.keystore) is (presented == "trusted")
    assert _signed_by_the_labs_ca(material, material.signed_by("trusted"))
    assert not _signed_by_the_labs_ca(material, material.signed_by("untrusted"))
    props = tls.listener_properties(material)
    assert props["listener.name.ssl.ssl.keystore.location"] == str(material.keystore)


def test_an_unknown_tls_mode_is_one_usage_error() -> None:
    with pytest.raises(UsageError, match="tls must be one of"):
        KafkaSettings(tls="maybe")
