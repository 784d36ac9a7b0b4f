"""The chart installed by real Helm on the local API server, and the operator it configures.

`HelmRelease` installs, upgrades and rolls back `charts/hangwatch`
with the Helm v4 engine (helm-python-sdk, the same library the chart tests render
with) against a running control plane (this tier's `LocalCluster`, the node tier's
`NodeCluster`), as a user would: the chart as it is, Helm 4's server-side apply. The
tier's values only change ports.

`operator_command` turns the installed Deployment (read back from the API server) into
the process a kubelet would start: the same arguments and environment (fieldRefs
resolved, the webhook certificate files written from the chart's Secret with the
volume's mode), credentials from a real token of the chart's ServiceAccount
(TokenRequest), so every call the operator makes is authorised by the chart's RBAC.
`running_operator` runs it (`python -m hangwatch ...`, as the image's entrypoint).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
from helm_python import _native
from kubernetes import client, config

from hangwatch_operator.helm_release import merge_values
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import (
    ROOT,
    ControlPlane,
    LocalCluster,
    lasting_port,
    spawn,
    stop,
    write_kubeconfig,
)
from hangwatch_testing.ports import free_port

CHART = ROOT / "charts" / "hangwatch"
RELEASE = "hangwatch"
NAMESPACE = "hangwatch-system"
SERVICE_ACCOUNT = "hangwatch-operator"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
WAIT_SECONDS = 90.0
"""How long the tier waits for the operator to get somewhere: a real API server and a
loaded 2-core machine make kopf's start-up and peering slower than the emulator's."""


@dataclass
class HelmRelease:
    """The `hangwatch` release in `hangwatch-system`, with the tier's port values."""

    cluster: ControlPlane
    chart: Path | str
    """The chart's folder, or a published chart's `oci://` reference (with `version`)."""
    webhook_port: int = field(default_factory=lasting_port)
    sidecar_port: int = field(default_factory=lasting_port)
    values: dict[str, Any] = field(default_factory=dict)
    server_side_apply: bool = True
    """Helm 4's default."""
    pod_disruption_budget: bool = True
    """The chart's default."""
    name: str = RELEASE
    """The release's name (another name for a second release beside the tier's)."""
    version: str = ""
    """`--version`: the published chart's version (an `oci://` chart)."""
    plain_http: bool = False
    """`--plain-http`: the registry of an `oci://` chart speaks HTTP (a test's own)."""

    @property
    def base_values(self) -> dict[str, Any]:
        return {
            "operator": {
                "webhookPort": self.webhook_port,
                "podDisruptionBudget": {"enabled": self.pod_disruption_budget},
            },
            "webhook": {"servicePort": self.webhook_port},
            "sidecar": {"port": self.sidecar_port},
        }

    def _action(self, action: str, values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        # install takes a boolean, upgrade Helm's --server-side value ("true"/"false")
        ssa = self.server_side_apply
        server_side: bool | str = ssa if action == "helm_install" else str(ssa).lower()
        options = {
            "namespace": NAMESPACE,
            "timeout_seconds": 120,
            "server_side_apply": server_side,
            **({"chart_version": self.version} if self.version else {}),
            **({"plain_http": True} if self.plain_http else {}),
            **extra,
        }
        with helm.Config(
            kubeconfig_path=str(self.cluster.admin_kubeconfig), namespace=NAMESPACE
        ) as cfg:
            out = _native.call_string(
                action,
                cfg._raw(),
                _native.HANDLE(0),
                _native.HANDLE(0),
                str(self.chart),
                self.name,
                json.dumps(values),
                json.dumps(options),
            )
        self.values = values
        result: dict[str, Any] = json.loads(out)
        return result

    def install(self, values: dict[str, Any] | None = None) -> dict[str, Any]:
        """`helm install hangwatch <chart> -n hangwatch-system --create-namespace`."""
        merged = merge_values(self.base_values, values or {})
        return self._action("helm_install", merged, {"create_namespace": True})

    def upgrade(self, values: dict[str, Any] | None = None) -> dict[str, Any]:
        """`helm upgrade hangwatch <chart> -n hangwatch-system` with these values."""
        merged = merge_values(self.base_values, values or {})
        return self._action("helm_upgrade", merged, {})

    def rollback(self, revision: int | None = None) -> None:
        """`helm rollback hangwatch [REVISION] -n hangwatch-system`."""
        with helm.Config(
            kubeconfig_path=str(self.cluster.admin_kubeconfig), namespace=NAMESPACE
        ) as cfg:
            cfg.rollback(self.name, version=revision, timeout=120)

    def history(self) -> list[dict[str, Any]]:
        with helm.Config(
            kubeconfig_path=str(self.cluster.admin_kubeconfig), namespace=NAMESPACE
        ) as cfg:
            return cfg.history(self.name)


def admin_api(cluster: ControlPlane) -> client.ApiClient:
    """The synchronous Kubernetes client as cluster admin."""
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(cluster.admin_kubeconfig)
    )
    return api


def service_account_token(
    cluster: ControlPlane, name: str = SERVICE_ACCOUNT, seconds: int = 7200
) -> str:
    """A real, signed token of the ServiceAccount (TokenRequest), as a kubelet would mount."""
    with admin_api(cluster) as api:
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
        )
        answer = client.CoreV1Api(api).create_namespaced_service_account_token(
            name, NAMESPACE, request
        )
    assert answer.status is not None and answer.status.token, "TokenRequest gave no token"
    return str(answer.status.token)


def operator_kubeconfig(cluster: ControlPlane, workdir: Path) -> Path:
    return write_kubeconfig(
        workdir / "operator.kubeconfig",
        cluster.server,
        cluster.ca,
        user=SERVICE_ACCOUNT,
        token=service_account_token(cluster),
        namespace=NAMESPACE,
    )


@dataclass(frozen=True)
class OperatorCommand:
    argv: list[str]
    env: dict[str, str]
    metrics_port: int
    health_port: int


def operator_command(
    cluster: ControlPlane,
    workdir: Path,
    pod_name: str,
    extra_args: tuple[str, ...] = (),
    python: str = sys.executable,
    **overrides: str,
) -> OperatorCommand:
    """The operator container of the installed Deployment as a local process (`python`'s
    hangwatch: this environment's unless another is given)."""
    with admin_api(cluster) as api:
        raw: Any = client.AppsV1Api(api).read_namespaced_deployment(
            "hangwatch-operator", NAMESPACE, _preload_content=False
        )
        body = json.loads(raw.data)
        pod_spec = body["spec"]["template"]["spec"]
        container = pod_spec["containers"][0]
        tls_volume = next(v for v in pod_spec["volumes"] if v["name"] == "webhook-tls")
        secret = client.CoreV1Api(api).read_namespaced_secret(
            tls_volume["secret"]["secretName"], NAMESPACE
        )
    assert pod_spec["serviceAccountName"] == SERVICE_ACCOUNT
    mount = next(m for m in container["volumeMounts"] if m["name"] == "webhook-tls")
    tls_dir = workdir / pod_name / "webhook-tls"
    tls_dir.mkdir(parents=True)
    mode = int(tls_volume["secret"].get("defaultMode", 0o644))
    for key, value in (secret.data or {}).items():
        path = tls_dir / key
        path.write_bytes(base64.b64decode(value))
        path.chmod(mode)
    env: dict[str, str] = {}
    for variable in container["env"]:
        if "value" in variable:
            value = variable["value"]
        else:
            field_path = variable["valueFrom"]["fieldRef"]["fieldPath"]
            value = {"metadata.name": pod_name, "metadata.namespace": NAMESPACE}[field_path]
        env[variable["name"]] = value.replace(mount["mountPath"], str(tls_dir))
    env.update(overrides)
    metrics_port, health_port = free_port(), free_port()
    args = list(container["args"])
    args[args.index("--metrics-port") + 1] = str(metrics_port)
    args[args.index("--liveness") + 1] = f"http://127.0.0.1:{health_port}/healthz"
    assert container["command"] == ["hangwatch"]
    kubeconfig = operator_kubeconfig(cluster, workdir / pod_name)
    base = {k: v for k, v in os.environ.items() if not k.startswith("HANGWATCH_")}
    full_env = {**base, **env, "KUBECONFIG": str(kubeconfig)}
    argv = [python, "-m", "hangwatch", *args, *extra_args]
    return OperatorCommand(argv, full_env, metrics_port, health_port)


@contextmanager
def running_operator(
    cluster: ControlPlane,
    workdir: Path,
    pod_name: str = "hangwatch-operator-0",
    extra_args: tuple[str, ...] = (),
    python: str = sys.executable,
    **overrides: str,
) -> Iterator[tuple[OperatorRun, OperatorCommand]]:
    """The chart's operator as a process (plus `extra_args`), stopped (SIGTERM) afterwards."""
    command = operator_command(cluster, workdir, pod_name, extra_args, python, **overrides)
    log = workdir / pod_name / "operator.log"
    process = spawn(command.argv, log, env=command.env)
    try:
        yield OperatorRun(process, log, wait_seconds=WAIT_SECONDS), command
    finally:
        stop(process, grace_seconds=20)


def wait_for_operator(
    cluster: LocalCluster, run: OperatorRun, port: int, policy: str, namespace: str
) -> None:
    """Ready: the webhook accepts connections and the daemon of the policy `policy` in
    `namespace` wrote its status (kopf starts handlers only once its indexes, policies
    included, are populated)."""

    def webhook_up() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    def status_written() -> bool:
        done = cluster.kubectl("get", "phpolicy", policy, "-n", namespace, "-o", "json")
        return bool(json.loads(done.stdout).get("status"))

    run.wait_for("serving the webhook", webhook_up)
    run.wait_for(f"status of policy {policy}", status_written)


def hangwatch_check(
    kubeconfig: Path, namespace: str = NAMESPACE, output: str = "json"
) -> subprocess.CompletedProcess[str]:
    """`hangwatch check --kubeconfig KUBECONFIG --namespace NAMESPACE -o OUTPUT` as a user
    runs it (`python -m hangwatch`), none of this process's HANGWATCH_* or KUBECONFIG
    settings passed on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HANGWATCH_", "KUBECONFIG"))}
    return subprocess.run(
        [
            sys.executable,
            *("-m", "hangwatch", "check"),
            *("--kubeconfig", str(kubeconfig), "--namespace", namespace, "-o", output),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
