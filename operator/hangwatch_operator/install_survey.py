"""`hangwatch check`'s reading of a cluster: the objects and live probes it judges.

Thin by design: every call here reads (or dry-runs) and stores what came back in an
`install_checks.Survey`, which `install_checks` judges. Reads go through the official
Kubernetes client's connection (kubeconfig, or the pod's service account), as plain
JSON. Three live probes, each bounded by `timeout_seconds`:

- the webhook's TLS endpoint at its Service's ClusterIP (reachable from inside the
  cluster, or wherever the Service network routes): one handshake to see the
  certificate it presents, one verifying it against the configuration's caBundle for
  the Service's DNS name, as the API server does. Out of reach, the Secret the
  operator mounts stands in for what it serves.
- per valid policy, a server-side dry run (`dryRun=All`, nothing is stored) of an
  executor pod that policy selects, restricted-compliant itself: the API server calls
  the webhook with its own TLS verification and then runs Pod Security admission on
  the injected pod, so the answer shows the whole admission chain;
- each running injected pod's `/status` through the API server's pod proxy (at most
  `max_sidecars`), which needs no route to the pod network.

A failing read of one object is a finding (kept in the survey), never a crash; only
an API server that cannot be reached at all ends the command (`ClusterUnreachableError`).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
import yaml
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes import client, config

from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError, UsageError
from hangwatch_operator.helm_release import decode_release
from hangwatch_operator.injection import POLICY_LABEL, PORT_NAME, SIDECAR_CONTAINER
from hangwatch_operator.install_model import (
    CRD_NAME,
    MONITORING_CRDS,
    OPERATOR_COMPONENT,
    TLS_VOLUME,
    Answer,
    DryRun,
    Presented,
    Survey,
    ca_bundle,
    labels_for,
    operator_settings,
    our_webhook,
    parsed_policies,
    pull_secret_names,
    service_hostname,
)
from hangwatch_operator.policies import (
    GROUP,
    PLURAL,
    PRODUCER_LABEL,
    PRODUCER_LABEL_VALUE,
    SPARK_ROLE_LABEL,
    VERSION,
    Policy,
)

HELM_OWNER = "owner=helm"
PART_OF = "app.kubernetes.io/part-of=hangwatch"
"""On every object the chart renders."""
DRY_RUN_CONTAINER = "spark-kubernetes-executor"
EXECUTOR_UID = 185
"""The user Spark's images run executors as."""


class ClusterUnreachableError(HangwatchError):
    """The API server does not answer (exit 2): nothing can be checked."""

    exit_code = ExitCode.UNAVAILABLE


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class Cluster:
    """Plain JSON requests over the Kubernetes client's authenticated connection."""

    def __init__(self, api: client.ApiClient, timeout_seconds: float) -> None:
        self._api = api
        self.timeout = timeout_seconds

    @classmethod
    def connect(cls, kubeconfig: str | None, timeout_seconds: float) -> Cluster:
        configuration = client.Configuration()
        try:
            if kubeconfig is None:
                try:
                    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                except config.ConfigException:
                    config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, client_configuration=configuration
                )
        except (config.ConfigException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError,
                AttributeError) as exc:  # fmt: skip
            where = kubeconfig or "KUBECONFIG / ~/.kube/config / service account"
            raise UsageError(f"no usable Kubernetes credentials in {where}: {exc}") from None
        return cls(client.ApiClient(configuration), timeout_seconds)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> tuple[int, bytes]:
        url_path = f"{path}?{urlencode(query)}" if query else path
        try:
            _, url, headers, payload, _ = self._api.param_serialize(
                method,
                url_path,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
            )
            response = self._api.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=self.timeout
            )
            raw = response.read()  # type: ignore[no-untyped-call]
            return int(response.status), bytes(raw or b"")
        except (urllib3.exceptions.HTTPError, OSError, client.ApiException) as exc:
            raise ApiError(0, f"no answer from the API server: {exc}") from None

    def get(self, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """The object at `path`; None if it does not exist; `ApiError` otherwise."""
        status, raw = self.request("GET", path, query)
        if status == 404:
            return None
        return _json(status, raw)

    def items(self, path: str, query: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        found = self.get(path, query)
        items = (found or {}).get("items") or []
        return [i for i in items if isinstance(i, dict)]


def _json(status: int, raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        parsed = {}
    if status >= 400:
        message = parsed.get("message") if isinstance(parsed, dict) else None
        raise ApiError(status, str(message or raw[:200].decode(errors="replace")))
    return parsed if isinstance(parsed, dict) else {}


def survey(
    cluster: Cluster,
    namespace: str,
    *,
    max_sidecars: int,
    timeout_seconds: float,
    progress: Callable[[str], None] = lambda _: None,
) -> Survey:
    """Everything `install_checks.run_checks` judges, read from `cluster`."""
    try:
        version = cluster.get("/version") or {}
    except ApiError as exc:
        raise ClusterUnreachableError(f"the API server does not answer: {exc}") from None
    found = Survey(namespace=namespace, server_version=str(version.get("gitVersion", "?")))
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    progress("the CRD and the Helm release")
    found.crd = _get(cluster, f"{crds}/{CRD_NAME}")
    _release(cluster, found)
    progress("the operator and its webhook")
    selector = f"{PART_OF},{OPERATOR_COMPONENT}"
    deployments = _items(cluster, f"/apis/apps/v1/namespaces/{namespace}/deployments", selector)
    found.deployment = deployments[0] if deployments else None
    found.webhook_configurations = list(
        _items(cluster, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
    )
    services = _items(cluster, f"/api/v1/namespaces/{namespace}/services")
    found.services = {str(s["metadata"]["name"]): s for s in services}
    found.tls_secret = _tls_secret(cluster, found)
    found.presented = _presented(found, timeout_seconds)
    progress("the policies and their pods")
    try:
        found.policies = list(cluster.items(f"/apis/{GROUP}/{VERSION}/{PLURAL}"))
    except ApiError as exc:
        if found.crd is not None:
            found.policies_problem = f"cannot list the policies: {exc}"
    namespaces = sorted({str((p.get("metadata") or {}).get("namespace")) for p in found.policies})
    for ns in namespaces:
        found.namespaces[ns] = _get(cluster, f"/api/v1/namespaces/{ns}") or {}
        found.pods[ns] = _watchable_pods(cluster, ns)
    for _, policy in parsed_policies(found):
        if isinstance(policy, Policy):
            progress(f"a dry-run executor pod for policy {policy.namespace}/{policy.name}")
            found.dry_runs[f"{policy.namespace}/{policy.name}"] = _dry_run(cluster, found, policy)
    _answers(cluster, found, max_sidecars, progress)
    progress("monitoring CRDs and pull secrets")
    found.crds_present = frozenset(
        crd for crd in MONITORING_CRDS.values() if _get(cluster, f"{crds}/{crd}") is not None
    )
    for crd in sorted(found.crds_present):
        plural, group = crd.split(".", 1)
        objects = _items(cluster, f"/apis/{group}/v1/{plural}", PART_OF)
        found.monitoring_objects[crd] = len(objects)
    _pull_secrets(cluster, found)
    found.now = time.time()
    return found


def _get(cluster: Cluster, path: str) -> dict[str, Any] | None:
    """The object at `path`, or None when absent or refused (a finding for the checks)."""
    try:
        return cluster.get(path)
    except ApiError:
        return None


def _watchable_pods(cluster: Cluster, namespace: str) -> list[Mapping[str, Any]]:
    """The pods of `namespace` a policy can cover: Spark's (`spark-role`) and those that
    opted in as producers, each once."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    producers = f"{PRODUCER_LABEL}={PRODUCER_LABEL_VALUE}"
    found: dict[str, Mapping[str, Any]] = {}
    for selector in (SPARK_ROLE_LABEL, producers):
        for pod in _items(cluster, path, selector):
            found.setdefault(str((pod.get("metadata") or {}).get("name")), pod)
    return list(found.values())


def _items(cluster: Cluster, path: str, selector: str = "") -> list[dict[str, Any]]:
    """The items at `path` (with a label selector), or none when refused."""
    try:
        return cluster.items(path, {"labelSelector": selector} if selector else None)
    except ApiError:
        return []


def _release(cluster: Cluster, found: Survey) -> None:
    path = f"/api/v1/namespaces/{found.namespace}/secrets"
    try:
        secrets = cluster.items(path, {"labelSelector": HELM_OWNER})
    except ApiError as exc:
        found.release_problem = f"cannot read Helm's release Secrets in {found.namespace}: {exc}"
        return
    releases = []
    for secret in secrets:
        try:
            release = decode_release(str((secret.get("data") or {}).get("release", "")))
        except ValueError:
            continue
        meta = (release.get("chart") or {}).get("metadata") or {}
        if meta.get("name") == "hangwatch":
            releases.append(release)
    deployed = [r for r in releases if (r.get("info") or {}).get("status") == "deployed"]
    newest = sorted(deployed or releases, key=lambda r: int(r.get("version") or 0))
    found.release = newest[-1] if newest else None
    if found.release is None:
        found.release_problem = f"no Helm release of chart hangwatch in {found.namespace}"


def _tls_secret(cluster: Cluster, found: Survey) -> dict[str, Any] | None:
    spec = (((found.deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    volume = next((v for v in spec.get("volumes") or [] if v.get("name") == TLS_VOLUME), None)
    name = ((volume or {}).get("secret") or {}).get("secretName")
    if not name:
        return None
    return _get(cluster, f"/api/v1/namespaces/{found.namespace}/secrets/{name}")


def _presented(found: Survey, timeout_seconds: float) -> Presented | None:
    hook = our_webhook(found)
    if hook is None:
        return None
    ref = (hook[1].get("clientConfig") or {}).get("service") or {}
    service = found.services.get(str(ref.get("name")))
    ip = ((service or {}).get("spec") or {}).get("clusterIP")
    if not ip or ip == "None":
        return None
    port = int(ref.get("port", 443))
    address = f"{ip}:{port}"
    hostname = service_hostname(hook[1])
    try:
        plain = ssl.create_default_context()
        plain.check_hostname, plain.verify_mode = False, ssl.CERT_NONE
        leaf = _handshake(plain, ip, port, hostname, timeout_seconds)
    except (OSError, ssl.SSLError) as exc:
        return Presented(address, error=f"no TLS handshake with {address}: {exc}")
    try:
        pem = "".join(
            ssl.DER_cert_to_PEM_cert(c.public_bytes(Encoding.DER)) for c in ca_bundle(hook[1])
        )
        verifying = ssl.create_default_context(cadata=pem)
        _handshake(verifying, ip, port, hostname, timeout_seconds)
    except (OSError, ssl.SSLError, ValueError) as exc:
        return Presented(address, leaf, verified=False, error=str(exc))
    return Presented(address, leaf, verified=True)


def _handshake(
    context: ssl.SSLContext, ip: str, port: int, hostname: str, timeout: float
) -> bytes | None:
    with (
        socket.create_connection((ip, port), timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=hostname) as tls,
    ):
        return tls.getpeercert(binary_form=True)


def _dry_run(cluster: Cluster, found: Survey, policy: Policy) -> DryRun:
    settings = operator_settings(found.deployment)
    security = {
        "runAsNonRoot": True,
        "runAsUser": EXECUTOR_UID,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "hangwatch-check-",
            "namespace": policy.namespace,
            "labels": labels_for(policy),
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": DRY_RUN_CONTAINER,
                    "image": settings.sidecar_image,
                    "securityContext": security,
                }
            ],
        },
    }
    path = f"/api/v1/namespaces/{policy.namespace}/pods"
    try:
        status, raw = cluster.request("POST", path, {"dryRun": "All"}, pod)
        return DryRun(_json(status, raw), status=status)
    except ApiError as exc:
        return DryRun(None, error=str(exc), status=exc.status)


def _answers(
    cluster: Cluster, found: Survey, max_sidecars: int, progress: Callable[[str], None]
) -> None:
    asked = 0
    for ns, pods in sorted(found.pods.items()):
        for pod in pods:
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            if POLICY_LABEL not in (meta.get("labels") or {}):
                continue
            if (pod.get("status") or {}).get("phase") != "Running" or asked >= max_sidecars:
                continue
            containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            sidecar = next((c for c in containers if c.get("name") == SIDECAR_CONTAINER), None)
            if sidecar is None:
                continue
            port = next(
                (
                    p.get("containerPort")
                    for p in sidecar.get("ports") or []
                    if p.get("name") == PORT_NAME
                ),
                None,
            )
            asked += 1
            progress(f"sidecar {ns}/{meta.get('name')} ({asked})")
            proxy = (
                f"/api/v1/namespaces/{ns}/pods/{quote(str(meta.get('name')))}:{port}/proxy/status"
            )
            try:
                status, raw = cluster.request("GET", proxy)
            except ApiError:
                found.answers[f"{ns}/{meta.get('name')}"] = Answer(
                    None, f"no answer through the API server's pod proxy in {cluster.timeout:g} s"
                )
                continue
            error = "" if status == 200 else f"HTTP {status} {raw[:120].decode(errors='replace')}"
            found.answers[f"{ns}/{meta.get('name')}"] = Answer(raw if not error else None, error)


def _pull_secrets(cluster: Cluster, found: Survey) -> None:
    for ns, pods in found.pods.items():
        for pod in pods:
            account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
            key = f"{ns}/{account}"
            if key not in found.service_accounts:
                path = f"/api/v1/namespaces/{ns}/serviceaccounts/{account}"
                found.service_accounts[key] = _get(cluster, path) or {}
    for key in sorted(pull_secret_names(found)):
        ns, name = key.split("/", 1)
        try:
            found.secrets_present[key] = (
                cluster.get(f"/api/v1/namespaces/{ns}/secrets/{name}") is not None
            )
        except ApiError:
            found.secrets_present[key] = True  # not readable here: not known to be absent
