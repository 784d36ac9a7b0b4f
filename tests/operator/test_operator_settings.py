"""Operator settings from HANGWATCH_OPERATOR_* variables.

Covers: defaults (sidecar image, port, telemetry dir, auto injection, fail-open webhook
with a short timeout, one cordoned node at most); every field has a docstring saying
why; variables override defaults with type conversion (int, path, mode, empty means
None); bad values fail with a message naming the variable or the field.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from hangwatch_operator import settings as settings_module
from hangwatch_operator.settings import InjectionMode, OperatorSettings, SettingsError


def test_defaults() -> None:
    settings = OperatorSettings.from_environ({})
    assert settings == OperatorSettings()
    assert settings.sidecar_image == "ghcr.io/hangwatch/hangwatch:0.1.0"
    assert (settings.sidecar_port, settings.telemetry_dir) == (9477, "/var/run/hangwatch/telemetry")
    assert settings.injection_mode is InjectionMode.AUTO
    assert (settings.webhook_failure_policy, settings.webhook_timeout_seconds) == ("Ignore", 5)
    assert settings.max_cordoned_nodes == 1


def test_every_field_documents_why_its_default() -> None:
    tree = ast.parse(inspect.getsource(settings_module))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OperatorSettings"]
    documented = {
        node.target.id
        for node, following in zip(cls.body, cls.body[1:], strict=False)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
    }
    assert documented == {f.name for f in dataclasses.fields(OperatorSettings)}


def test_variables_override_defaults() -> None:
    settings = OperatorSettings.from_environ(
        {
            "HANGWATCH_OPERATOR_SIDECAR_PORT": "9500",
            "HANGWATCH_OPERATOR_INJECTION_MODE": "Legacy",
            "HANGWATCH_OPERATOR_WEBHOOK_CERT_FILE": "/tls/tls.crt",
            "HANGWATCH_OPERATOR_WEBHOOK_HOST": "",
            "HANGWATCH_OPERATOR_SIDECAR_IMAGE": "registry.local/hangwatch:dev",
        }
    )
    assert settings.sidecar_port == 9500
    assert settings.injection_mode is InjectionMode.LEGACY
    assert settings.webhook_cert_file == Path("/tls/tls.crt")
    assert settings.webhook_host is None
    assert settings.sidecar_image == "registry.local/hangwatch:dev"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"HANGWATCH_OPERATOR_SIDECAR_PORT": "ninety"}, "HANGWATCH_OPERATOR_SIDECAR_PORT"),
        ({"HANGWATCH_OPERATOR_INJECTION_MODE": "sometimes"}, "HANGWATCH_OPERATOR_INJECTION_MODE"),
        ({"HANGWATCH_OPERATOR_WEBHOOK_PORT": "70000"}, "webhook_port must be 1..65535"),
        ({"HANGWATCH_OPERATOR_WEBHOOK_TIMEOUT_SECONDS": "60"}, "1..30"),
        ({"HANGWATCH_OPERATOR_WEBHOOK_FAILURE_POLICY": "Retry"}, "Ignore or Fail"),
        ({"HANGWATCH_OPERATOR_TELEMETRY_DIR": "telemetry"}, "must be absolute"),
        ({"HANGWATCH_OPERATOR_MAX_CORDONED_NODES": "-1"}, "max_cordoned_nodes must be 0..1000"),
        ({"HANGWATCH_OPERATOR_MAX_CORDONED_NODES": "all"}, "HANGWATCH_OPERATOR_MAX_CORDONED"),
    ],
)
def test_bad_values_name_the_variable_or_field(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        OperatorSettings.from_environ(environ)


def test_peering_without_priority_gets_a_random_one_so_replicas_never_tie() -> None:
    from hangwatch_operator.operator_cli import peering_priority

    assert peering_priority(7, peering=True) == 7
    assert peering_priority(None, peering=False) is None
    drawn = {peering_priority(None, peering=True) for _ in range(20)}
    assert len(drawn) > 1 and all(p is not None and p > 0 for p in drawn)
