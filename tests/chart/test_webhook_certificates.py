"""The webhook's serving certificate: four sources, stable ones for GitOps, a private key.

Covers, with the real Helm engine:
- default (generated): each render without cluster access makes a new CA, which is why
  GitOps needs one of the stable sources below;
- `webhook.providedCert` (PEM values): the Secret holds exactly those PEMs and the
  caBundle is the CA; two renders are identical;
- `webhook.existingSecret`: no Secret is rendered, the operator mounts the named one,
  the caBundle comes from the values (PEM or base64 PEM, same result); a missing
  caBundle, an incomplete providedCert and two sources at once fail with one message;
- the Secret volume has mode 0440 (never world-readable) in every source, and the pod
  runs with an fsGroup (required by the chart); a real file with that mode, owned by
  root and the fsGroup, is readable by the operator's non-root uid/gid, while 0400
  would not be, so the key stays readable to the operator only.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from hangwatch_operator.certificates import generate_webhook_certificates
from tests.chart.rendering import Rendered, only, render

DNS = "hangwatch-operator.hangwatch-system.svc"
SECRET_MODE = 0o440
OPERATOR_ID = 65532


def _ca_bundle(objects: list[Rendered]) -> str:
    config = only(objects, "MutatingWebhookConfiguration")
    bundle: str = config["webhooks"][0]["clientConfig"]["caBundle"]
    return bundle


def _tls_volume(objects: list[Rendered]) -> dict[str, Any]:
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    volume: dict[str, Any] = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    return volume


def _pems() -> dict[str, str]:
    made = generate_webhook_certificates([DNS])
    return {
        "caCert": made.ca_pem.decode(),
        "tlsCert": made.cert_pem.decode(),
        "tlsKey": made.key_pem.decode(),
    }


def test_generated_certificates_change_on_every_render() -> None:
    first, second = render({}), render({})
    assert _ca_bundle(first) != _ca_bundle(second)
    secret = only(first, "Secret")
    assert secret["data"]["ca.crt"] == _ca_bundle(first)


def test_provided_certificates_are_rendered_as_given_and_stable() -> None:
    pems = _pems()
    values = {"webhook": {"providedCert": pems}}
    first, second = render(values), render(values)
    assert [o.obj for o in first] == [o.obj for o in second]
    secret = only(first, "Secret")
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {
        "ca.crt": pems["caCert"],
        "tls.crt": pems["tlsCert"],
        "tls.key": pems["tlsKey"],
    }
    assert base64.b64decode(_ca_bundle(first)).decode() == pems["caCert"]
    assert _tls_volume(first)["secret"]["secretName"] == secret["metadata"]["name"]


@pytest.mark.parametrize("encoded", [False, True])
def test_an_existing_secret_is_mounted_and_its_ca_comes_from_the_values(encoded: bool) -> None:
    ca = _pems()["caCert"]
    given = base64.b64encode(ca.encode()).decode() if encoded else ca
    values = {"webhook": {"existingSecret": {"name": "serving-cert", "caBundle": given}}}
    objects = render(values)
    assert "Secret" not in {o.kind for o in objects}
    assert _tls_volume(objects)["secret"]["secretName"] == "serving-cert"
    assert base64.b64decode(_ca_bundle(objects)).decode() == ca
    assert [o.obj for o in render(values)] == [o.obj for o in objects]


@pytest.mark.parametrize(
    ("webhook", "message"),
    [
        ({"existingSecret": {"name": "serving-cert", "caBundle": ""}}, "caBundle is required"),
        ({"providedCert": {"caCert": "x", "tlsCert": "", "tlsKey": ""}}, "together"),
        (
            {"certManager": {"enabled": True}, "existingSecret": {"name": "s", "caBundle": "c"}},
            "choose one of",
        ),
    ],
)
def test_ambiguous_or_incomplete_sources_fail_in_one_message(
    webhook: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render({"webhook": webhook})


@pytest.mark.parametrize(
    "webhook",
    [
        {},
        {"certManager": {"enabled": True}},
        {"existingSecret": {"name": "serving-cert", "caBundle": "Y2E="}},
    ],
)
def test_the_key_is_mounted_0440_with_an_fs_group(webhook: dict[str, Any]) -> None:
    objects = render({"webhook": webhook})
    assert _tls_volume(objects)["secret"]["defaultMode"] == SECRET_MODE
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["fsGroup"] == OPERATOR_ID
    assert pod["securityContext"]["runAsUser"] == OPERATOR_ID


def test_an_fs_group_is_required() -> None:
    context = {"fsGroup": None}  # null removes the default
    with pytest.raises(helm.HelmRenderError, match="fsGroup is required"):
        render({"operator": {"podSecurityContext": context}})


def _read_as_operator(path: Path) -> int:
    """Exit code of a child that reads `path` as uid/gid 65532 (what the kubelet runs)."""

    def drop() -> None:
        os.setgroups([])
        os.setgid(OPERATOR_ID)
        os.setuid(OPERATOR_ID)

    done = subprocess.run(
        ["cat", str(path)],
        preexec_fn=drop,
        capture_output=True,
        check=False,
        cwd="/",
    )
    return done.returncode


def test_mode_0440_with_the_fs_group_is_readable_by_the_operator_and_0400_is_not() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test creates files for another uid: run it as root (CI does)")
    with tempfile.TemporaryDirectory(prefix="hangwatch-mode-") as tmp:
        Path(tmp).chmod(0o755)  # traversable by the other uid, as a kubelet's volume dir
        _check_modes(Path(tmp) / "tls.key")


def _check_modes(key: Path) -> None:
    key.write_text("secret")
    os.chown(key, 0, OPERATOR_ID)  # the kubelet: owner root, group = the pod's fsGroup
    key.chmod(SECRET_MODE)
    assert _read_as_operator(key) == 0
    key.chmod(0o400)
    assert _read_as_operator(key) != 0
