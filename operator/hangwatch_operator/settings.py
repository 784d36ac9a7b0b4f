"""The operator's one typed settings object, read from `HANGWATCH_OPERATOR_*` variables.

Fed by the chart (environment variables of the operator Deployment), by `hangwatch
operator` (`operator_cli`, with its command-line overrides) or by a test that builds
`OperatorSettings(...)` directly. Read by the webhook handlers (`webhook`), the patch
builder (`injection`), the webhook registration (`webhook_configuration`) and the
remediation handlers (`handlers`, `remediation`, `rounds`: metrics port, sidecar
polling, grace periods, dry run, re-notification, the cap on cordoned nodes).
Per-policy knobs live in the ProducerHealthPolicy (`policies`); these are the
cluster-wide ones an operator installation decides once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, get_origin, get_type_hints

from hangwatch.pod_security import Level
from hangwatch.wire import sidecar_http
from hangwatch_producer.wire.telemetry import DEFAULT_DIR as DEFAULT_TELEMETRY_DIR

ENV_PREFIX = "HANGWATCH_OPERATOR_"
MAX_CORDONED_NODES_LIMIT = 1000
"""Upper bound of `max_cordoned_nodes`: beyond it a cap would not be one."""
"""`sidecar_image` is read from `HANGWATCH_OPERATOR_SIDECAR_IMAGE`, and so on."""
MAX_SHARDS = 1024
"""Upper bound of `shards`: each is a Lease renewed every few seconds."""


class InjectionMode(StrEnum):
    """How the sidecar is added to a pod so that Spark executor pods still finish."""

    AUTO = "auto"
    """Native on API servers that enable native sidecars by default (>= 1.29), else legacy."""
    NATIVE = "native"
    """An init container with `restartPolicy: Always` (KEP-753): kubelet stops it when the
    executor container ends."""
    LEGACY = "legacy"
    """A regular container plus `shareProcessNamespace: true`: the sidecar watches the
    executor's JVM and exits when it is gone."""


class SettingsError(ValueError):
    """An operator setting (environment variable) has a value of the wrong type or range."""


@dataclass(frozen=True)
class OperatorSettings:
    """Cluster-wide operator settings; every field has a `HANGWATCH_OPERATOR_*` variable."""

    sidecar_image: str = "ghcr.io/hangwatch/hangwatch:0.1.0"
    """Image of the injected sidecar when a policy names none: the release the operator
    was built with, so operator and sidecar speak the same /status contract."""

    sidecar_port: int = sidecar_http.PORT
    """Port of the sidecar's /metrics, /status and /healthz (`hangwatch.wire.sidecar_http`,
    which says why 9477)."""

    telemetry_dir: str = DEFAULT_TELEMETRY_DIR
    """Mount path of the shared emptyDir in every container. Under /var/run because it is
    volatile runtime state, and outside Spark's /opt/spark and /var/data trees."""

    injection_mode: InjectionMode = InjectionMode.AUTO
    """Cluster-wide default of `spec.sidecar.injectionMode: auto`. `auto` reads the API
    server version at startup; force `native` on a 1.28 cluster with the SidecarContainers
    gate switched on, or `legacy` where a policy engine rejects init-container
    restartPolicy."""

    native_sidecar_min_minor: int = 29
    """Kubernetes 1.x minor from which `auto` picks native sidecars: the SidecarContainers
    feature is beta and on by default from 1.29 (alpha, off, in 1.28)."""

    legacy_exit_when_gone: str = "ExecutorBackend"
    """Command-line fragment of the process the legacy sidecar waits for before it exits.
    Spark's Kubernetes image starts executors as
    `org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend` (3.x and 4.x
    entrypoint.sh), older and standalone ones as
    `org.apache.spark.executor.CoarseGrainedExecutorBackend`: both end with this. (The
    earlier `org.apache.spark.executor.` missed the first, so a legacy sidecar in a real
    Spark-on-Kubernetes executor pod never exited and the pod never completed.)"""

    webhook_listen_address: str = "0.0.0.0"
    """Where kopf's webhook server listens. All interfaces, because the API server reaches
    the operator through its Service (pod IP)."""

    webhook_port: int = 9443
    """kopf's conventional webhook port; unprivileged, so the operator runs as non-root."""

    webhook_host: str | None = None
    """Host name put into a kopf-managed webhook configuration's URL (local runs); None
    lets kopf use the listen address."""

    webhook_cert_file: Path | None = None
    """Server certificate (PEM) mounted from the chart's Secret. None generates a
    self-signed CA and certificate at startup, which only suits local runs."""

    webhook_key_file: Path | None = None
    """Private key (PEM) of `webhook_cert_file`."""

    webhook_ca_file: Path | None = None
    """CA bundle the API server uses to verify the webhook; needed only when kopf manages
    the webhook configuration itself."""

    webhook_managed_configuration: str | None = None
    """Name of a MutatingWebhookConfiguration kopf creates and keeps in sync (local runs
    against a developer cluster). None: the chart renders it with the short timeout and
    reinvocation policy kopf cannot set (see `webhook_configuration`)."""

    webhook_timeout_seconds: int = 5
    """How long the API server waits for the webhook before ignoring it. Pod creation is
    blocked meanwhile; 5 s covers a GC pause or a slow first TLS handshake while keeping a
    hung operator from stalling Spark's executor allocation rounds."""

    webhook_failure_policy: str = "Ignore"
    """What the API server does when the webhook fails or times out. Ignore: a down
    operator must never stop Spark from starting executors; the pod then simply runs
    unwatched. `Fail` only where running unwatched is worse than not running."""

    pod_security_default: Level = Level.RESTRICTED
    """The Pod Security level the cluster enforces in a namespace without a
    `pod-security.kubernetes.io/enforce` label (the API server's PodSecurity admission
    configuration, which the operator cannot read). Kubernetes' own default is
    `privileged`; hangwatch assumes `restricted` unless told, so a feature a policy opts
    into (the process view) is never injected where it could be refused: set
    `privileged` (chart: `webhook.podSecurityDefault`) if that is what the cluster runs."""

    watch_namespaces: tuple[str, ...] = ()
    """Namespaces (or kopf namespace patterns) the operator serves; empty: all of them.
    `hangwatch operator` sets it from `--namespace` (what it hands kopf); the webhook's
    own list and watch of policies covers the same namespaces. As a variable: the
    patterns separated by spaces (kopf ignores spaces inside a pattern, so write
    `team-*,!team-test` without them)."""

    operator_namespace: str = "hangwatch-system"
    """Namespace of the operator itself, excluded from injection so that the operator's
    own pods never wait on the webhook they serve."""

    metrics_port: int = 9478
    """Port of the operator's Prometheus /metrics; 0 switches the endpoint off. Next to the
    sidecar's 9477 so both are easy to find, and clear of kopf's webhook port 9443."""

    metrics_listen_address: str = "0.0.0.0"
    """Where /metrics listens: all interfaces, because Prometheus scrapes the pod IP."""

    status_timeout_seconds: float = 2.0
    """Patience for one sidecar's /status. The sidecar answers from memory in
    milliseconds; 2 s covers a GC pause or a busy node, and a sidecar slower than that
    is reported as `sidecar_unreachable` instead of stalling the whole poll round."""

    status_poll_concurrency: int = 64
    """Sidecars polled at once per policy. Enough to poll 2,000 executors within one
    probe interval at loopback-to-cluster latencies without opening thousands of sockets."""

    restart_grace_seconds: int = 30
    """Grace period of a `restart` (pod deletion): Kubernetes' own default. A hung
    producer rarely shuts down cleanly, so a longer grace only delays the replacement."""

    dry_run: bool = False
    """Treat every policy as `safety.dryRun: true` (`hangwatch operator --dry-run`): for
    trying the operator on a live cluster before any policy may act."""

    renotify_seconds: int = 600
    """An unchanged decision (e.g. still suppressed by the same limit) is reported again as
    an Event and counted again after this long; changes are reported at once. Ten minutes
    keeps a stuck condition visible in `kubectl get events` (1 h TTL) without flooding it."""

    max_cordoned_nodes: int = 1
    """Nodes hangwatch holds cordoned at once across every policy; 0 never cordons. A
    cordon takes a whole node, with other tenants' pods, out of scheduling, on evidence
    the pods of one policy provide: one node at a time bounds what a wrong (or forged)
    verdict can cost. The chart sets 0 unless `operator.nodeCordoning.enabled`, so the
    operator never tries what its RBAC forbids."""

    shards: int = 0
    """Shards of the watched pods shared among replicas through Leases (`sharding`,
    `replica_leases`); 0 keeps one active replica (kopf peering, the others on standby).
    Above 0 every replica judges and remediates the pods of the shards it holds and kopf
    peering is off. Several per replica you may run (the chart: 32), so that shards move
    in small steps when a replica comes or goes."""

    lease_duration_seconds: int = 15
    """How long a shard's Lease is good for after its last renewal: a dead replica's
    pods are judged again at most this plus `lease_renew_seconds` plus one probe
    interval later. Kubernetes' own leader election uses 15 s."""

    lease_renew_seconds: float = 5.0
    """How often a replica renews its Leases and takes free ones; must leave the Lease's
    duration minus `sharding.CLOCK_MARGIN_SECONDS` for one missed renewal."""

    replica_identity: str = ""
    """This replica's name in the Leases (the chart: the pod's name); empty: the host
    name."""

    def __post_init__(self) -> None:
        for name in ("sidecar_port", "webhook_port"):
            if not 1 <= getattr(self, name) <= 65535:
                raise SettingsError(f"{name} must be 1..65535, got {getattr(self, name)}")
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError(f"metrics_port must be 0..65535, got {self.metrics_port}")
        if self.status_timeout_seconds <= 0 or self.status_poll_concurrency < 1:
            raise SettingsError("status_timeout_seconds and status_poll_concurrency must be > 0")
        if self.restart_grace_seconds < 0 or self.renotify_seconds < 1:
            raise SettingsError("restart_grace_seconds must be >= 0, renotify_seconds >= 1")
        if not 0 <= self.max_cordoned_nodes <= MAX_CORDONED_NODES_LIMIT:
            raise SettingsError(
                f"max_cordoned_nodes must be 0..{MAX_CORDONED_NODES_LIMIT}, "
                f"got {self.max_cordoned_nodes}"
            )
        if not 1 <= self.webhook_timeout_seconds <= 30:
            raise SettingsError("webhook_timeout_seconds must be 1..30 (the API server's range)")
        if self.webhook_failure_policy not in {"Ignore", "Fail"}:
            raise SettingsError("webhook_failure_policy must be Ignore or Fail")
        if not all(isinstance(ns, str) and ns.strip() for ns in self.watch_namespaces):
            raise SettingsError("watch_namespaces must be non-empty names or patterns")
        if not 0 <= self.shards <= MAX_SHARDS:
            raise SettingsError(f"shards must be 0..{MAX_SHARDS}, got {self.shards}")
        if not 0 < 2 * self.lease_renew_seconds <= self.lease_duration_seconds - 2:
            raise SettingsError(
                "lease_renew_seconds must be above 0 and at most half of "
                "lease_duration_seconds minus 2 s (the clock margin)"
            )
        if not self.telemetry_dir.startswith("/"):
            raise SettingsError(f"telemetry_dir must be absolute, got {self.telemetry_dir!r}")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> OperatorSettings:
        """Settings from `HANGWATCH_OPERATOR_<FIELD>` variables; absent ones keep defaults."""
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(ENV_PREFIX + field.name.upper())
            if raw is not None:
                values[field.name] = _convert(field.name, hints[field.name], raw)
        return cls(**values)


def _convert(name: str, hint: Any, raw: str) -> Any:
    """One environment value converted to the field's type; empty means None if allowed."""
    text = raw.strip()
    if get_origin(hint) is tuple:  # words separated by whitespace
        return tuple(text.split())
    optional = type(None) in getattr(hint, "__args__", ())
    if optional and not text:
        return None
    target = next(a for a in getattr(hint, "__args__", (hint,)) if a is not type(None))
    try:
        if target is bool:
            return _boolean(text)
        if target is int:
            return int(text)
        if target is float:
            return float(text)
        if target is InjectionMode:
            return InjectionMode(text.lower())
        if target is Level:
            return Level(text.lower())
        if target is Path:
            return Path(text)

    except ValueError as exc:
        raise SettingsError(f"{ENV_PREFIX}{name.upper()}: {exc}") from exc
    return text


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected true or false, got {text!r}")
