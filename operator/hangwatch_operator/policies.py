"""ProducerHealthPolicy objects: parsed into typed, validated values, and matched to pods.

Fed by the kopf index in `webhook` (one body per policy, as the API server stored it,
defaults applied) and by tests (bare dicts, defaults missing). `parse_policy` repeats
the checks the CRD schema cannot express (requests above limits) and the ones the
operator relies on, so an object stored before a schema change cannot slip through.
`matching_policy` decides which policy, if any, covers a pod. Pure: no I/O, no kopf.

The numeric bounds (`INTEGER_BOUNDS`, `MAX_UNHEALTHY_SHARE`) and the bootstrap entry
pattern (`BOOTSTRAP_ENTRY`) are the CRD schema's, written once here for the operator;
a test walks the schema and checks that each is the same and that `parse_policy`
accepts exactly what the API server accepts, so an edit to one side fails the build.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeVar

from hangwatch.contracts import Verdict
from hangwatch.defaults import POLICY
from hangwatch.verdicts import VERDICTS
from hangwatch_operator.operations import DISRUPTIVE, POLICY_OPERATIONS, Operation
from hangwatch_operator.settings import InjectionMode

GROUP = "hangwatch.dev"
VERSION = "v1alpha1"
PLURAL = "producerhealthpolicies"
KIND = "ProducerHealthPolicy"

SPARK_ROLE_LABEL = "spark-role"
"""Set by Spark on every pod it creates: `driver` or `executor`."""
PRODUCER_LABEL = "hangwatch.dev/producer"
"""Opt-in of a pod that is not Spark's (a producer service's Deployment or StatefulSet
pod): `"true"` lets the webhook inject it and makes its role `producer`. A pod that
also carries `spark-role` keeps its Spark role (the webhook never sees it twice)."""
PRODUCER_LABEL_VALUE = "true"


class InvalidPolicyError(ValueError):
    """A ProducerHealthPolicy spec is invalid; the message names the field."""


class Role(StrEnum):
    """Which pods a policy covers: Spark's by their `spark-role` label, `producer` the
    pods that opted in with `PRODUCER_LABEL` (`pod_role`)."""

    EXECUTOR = "executor"
    DRIVER = "driver"
    PRODUCER = "producer"


def pod_role(labels: Mapping[str, str]) -> str | None:
    """The role of a pod with `labels`: its `spark-role` when it has one (whatever the
    producer label says), else `producer` when it opted in, else None."""
    spark = labels.get(SPARK_ROLE_LABEL)
    if spark is not None:
        return spark
    if labels.get(PRODUCER_LABEL) == PRODUCER_LABEL_VALUE:
        return Role.PRODUCER.value
    return None


ACTION_FIELDS: dict[str, Verdict] = {
    parts.action_field: parts.verdict for parts in VERDICTS if parts.action_field is not None
}
"""`spec.actions` field -> the verdict it configures (`healthy` needs no action), from
each verdict's declaration (`hangwatch.verdicts`)."""

DEFAULT_ACTIONS: dict[Verdict, tuple[Operation, ...]] = {
    parts.verdict: parts.default_actions for parts in VERDICTS if parts.default_actions is not None
}
"""Same defaults as the CRD (`hangwatch.verdicts`): restart only where a restart is the fix
(S1, S2, S4) and the evidence says so; silence alone (`producer_silent`) alerts
(docs/evidence-ladder.md), and writes the cluster refuses for a reason the next client
meets again (`writes_rejected`) alert: the CRD forbids restarting or decommissioning for
them."""

PORT_PATTERN = (
    "([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
)
"""1..65535 without leading zeros: the ports the sidecar's bootstrap parser accepts."""
_H = "[0-9A-Fa-f]{1,4}"
IPV6_PATTERN = "|".join(
    [
        f"({_H}:){{7}}{_H}",
        f"({_H}:){{1,7}}:",
        f"({_H}:){{1,6}}:{_H}",
        f"({_H}:){{1,5}}(:{_H}){{1,2}}",
        f"({_H}:){{1,4}}(:{_H}){{1,3}}",
        f"({_H}:){{1,3}}(:{_H}){{1,4}}",
        f"({_H}:){{1,2}}(:{_H}){{1,5}}",
        f"{_H}:(:{_H}){{1,6}}",
        f":((:{_H}){{1,7}}|:)",
    ]
)
"""An IPv6 address in hexadecimal groups, `::` compression included (no embedded IPv4,
no zone): only addresses the sidecar parses as IPv6."""
HOST_PATTERN = "[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?"
"""A DNS name (or IPv4 address) of at most 253 characters, as the sidecar takes it."""
BOOTSTRAP_ENTRY = f"^(\\[({IPV6_PATTERN})\\]|{HOST_PATTERN}):{PORT_PATTERN}$"
"""`spec.kafka.bootstrapServers[]`: `host:port` or `[ipv6]:port` (the CRD's `pattern`)."""
INTEGER_BOUNDS: dict[str, tuple[int, int]] = {
    "probes.probeIntervalSeconds": (1, 300),
    "probes.connectTimeoutSeconds": (1, 60),
    "probes.requestTimeoutSeconds": (1, 60),
    "probes.freshConnectIntervalSeconds": (10, 86400),
    "detection.stallSeconds": (5, 3600),
    "detection.heartbeatSeconds": (5, 3600),
    "detection.metadataMaxAgeSeconds": (30, 86400),
    "detection.electionGraceSeconds": (1, 600),
    "detection.producerRequestTimeoutSeconds": (1, 3600),
    "detection.expectedWriteIntervalSeconds": (2, 86400),
    "detection.timeToErrorBudgetSeconds": (1, 3600),
    "actions.autoUncordon.healthyForSeconds": (60, 86400),
    "safety.maxConcurrent": (1, 100),
    "safety.maxActionsPerApplicationPerHour": (0, 1000),
    "safety.podCooldownSeconds": (0, 86400),
    "safety.maxCordonedNodes": (0, 100),
    "safety.nodeFaultMinPods": (1, 1000),
}
"""Every integer field under `spec` -> its inclusive (minimum, maximum), as in the CRD."""
ITEM_BOUNDS: dict[str, tuple[int, int]] = {
    "socketView.ports[]": (1, 65535),
    "socketView.uids[]": (0, 4294967294),
}
"""Every integer list item under `spec` -> its inclusive (minimum, maximum), as in the CRD."""
MAX_LIST_ITEMS = 32
"""`spec.socketView.ports` and `.uids` hold at most this many entries (the CRD's maxItems)."""
MAX_UNHEALTHY_SHARE = (0.0, 1.0)
"""`spec.safety.maxUnhealthyShare` lies in (minimum, maximum]: above 0, at most 1."""
NODE_FAULT_MIN_PODS = 2
"""Default `safety.nodeFaultMinPods`: one pod is never enough to blame its node (whoever
runs that pod decides what its sidecar sees); the CRD's default says the same."""
UNCORDON_HEALTHY_FOR_SECONDS = 900
"""Default `actions.autoUncordon.healthyForSeconds`: a quarter of an hour without a fault
on the node (a flapping link shows again within minutes) before it takes pods again."""

_E = TypeVar("_E", bound=StrEnum)
_BOOTSTRAP = re.compile(BOOTSTRAP_ENTRY)
_NO_RESTART = frozenset(
    p.verdict for p in VERDICTS if p.default_actions is not None and not p.restart_may_help
)
"""Verdicts a restart cannot help (the cluster at fault, a refusal the next client meets
again, nothing judged): policies may not restart or decommission for them."""
_NODE_FAULTS = frozenset(p.verdict for p in VERDICTS if p.node_at_fault)
"""Verdicts a policy may cordon the node for."""
_NODE_FIELDS = " or ".join(f for f, v in ACTION_FIELDS.items() if v in _NODE_FAULTS)
_SECRET_PROPERTY = re.compile(r"^(sasl|ssl)\.[a-z0-9]+(\.[a-z0-9]+)*$")
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{s + "i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
}


@dataclass(frozen=True)
class Requirement:
    """One `matchExpressions` entry of a label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector; empty matches every pod."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True)
class SecretProperty:
    """A Kafka client property whose value comes from a key of a Secret."""

    client_property: str
    secret_name: str
    secret_key: str

    @property
    def env_name(self) -> str:
        """`sasl.password` -> `HANGWATCH_KAFKA_SASL_PASSWORD`."""
        return kafka_env_name(self.client_property)


@dataclass(frozen=True)
class KafkaTarget:
    """Which Kafka cluster the sidecar probes and how it authenticates."""

    bootstrap_servers: tuple[str, ...]
    topics: tuple[str, ...] = ()
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    secret_properties: tuple[SecretProperty, ...] = ()


@dataclass(frozen=True)
class Probes:
    """`spec.probes`: the sidecar's probe rhythm and patience."""

    probe_interval_seconds: int = POLICY.probe_interval_seconds
    connect_timeout_seconds: int = 2
    request_timeout_seconds: int = 3
    fresh_connect_interval_seconds: int = 300


@dataclass(frozen=True)
class SocketView:
    """`spec.socketView`: the sidecar's view of the pod's own connections to brokers."""

    enabled: bool = True
    ports: tuple[int, ...] = ()
    uids: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProcessView:
    """`spec.processView`: the sidecar may read the executor's Python threads (py-spy),
    which needs ptrace (SYS_PTRACE): opt-in, and only where the namespace's Pod Security
    level is privileged (`hangwatch.pod_security`)."""

    enabled: bool = False


@dataclass(frozen=True)
class Detection:
    """`spec.detection`: thresholds that turn evidence into a verdict (defaults:
    `hangwatch.defaults.POLICY`, equal to the CRD's)."""

    stall_seconds: int = POLICY.stall_seconds
    heartbeat_seconds: int = POLICY.heartbeat_seconds
    metadata_max_age_seconds: int = POLICY.metadata_max_age_seconds
    election_grace_seconds: int = POLICY.election_grace_seconds
    producer_request_timeout_seconds: int = POLICY.producer_request_timeout_seconds
    time_to_error_budget_seconds: int = POLICY.time_to_error_budget_seconds
    expected_write_interval_seconds: int | None = None
    """How often the pods' producers write at least (None: not said, no default): silence
    past it is `producer_silent` without Spark's view (`sockets.judge`)."""


@dataclass(frozen=True)
class Actions:
    """`spec.actions`: what the operator may do per verdict."""

    by_verdict: Mapping[Verdict, tuple[Operation, ...]] = field(
        default_factory=lambda: dict(DEFAULT_ACTIONS)
    )
    auto_uncordon: bool = True
    """On by default: a cordon that nobody lifts outlives its cause and keeps costing
    capacity (and one tenant's pods must not take a node away for good)."""
    uncordon_healthy_for_seconds: int = UNCORDON_HEALTHY_FOR_SECONDS


@dataclass(frozen=True)
class SafetyLimits:
    """`spec.safety`: limits that keep remediation from making things worse."""

    dry_run: bool = False
    max_concurrent: int = 1
    max_unhealthy_share: float = 0.5
    max_actions_per_application_per_hour: int = 6
    pod_cooldown_seconds: int = 600
    allow_driver_deletion: bool = False
    max_cordoned_nodes: int = 1
    """Nodes this policy may hold cordoned at once (the operator has its own cap across
    every policy, `OperatorSettings.max_cordoned_nodes`)."""
    node_fault_min_pods: int = NODE_FAULT_MIN_PODS
    """Cut-off pods a node needs before it is blamed for a network fault."""


@dataclass(frozen=True)
class SidecarSpec:
    """`spec.sidecar`: image, injection mode and resources of the sidecar."""

    image: str | None = None
    image_pull_policy: str | None = None
    injection_mode: InjectionMode = InjectionMode.AUTO
    requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": "50m", "memory": "64Mi"})
    limits: Mapping[str, str] = field(default_factory=lambda: {"memory": "128Mi"})


@dataclass(frozen=True)
class Policy:
    """One ProducerHealthPolicy, validated; field names mirror the CRD in snake_case."""

    name: str
    namespace: str
    kafka: KafkaTarget
    selector: LabelSelector = field(default_factory=LabelSelector)
    roles: frozenset[Role] = frozenset({Role.EXECUTOR})
    probes: Probes = field(default_factory=Probes)
    detection: Detection = field(default_factory=Detection)
    actions: Actions = field(default_factory=Actions)
    safety: SafetyLimits = field(default_factory=SafetyLimits)
    sidecar: SidecarSpec = field(default_factory=SidecarSpec)
    socket_view: SocketView = field(default_factory=SocketView)
    process_view: ProcessView = field(default_factory=ProcessView)
    uid: str = field(default="", compare=False)
    """The object's metadata.uid (Events about the policy name it); empty in tests."""


def kafka_env_name(prop: str) -> str:
    """The sidecar's environment variable for a librdkafka property."""
    return "HANGWATCH_KAFKA_" + re.sub(r"[^A-Za-z0-9]", "_", prop).upper()


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (`500m`, `128Mi`, `2`) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise InvalidPolicyError(f"{text!r} is not a resource quantity (e.g. 50m, 128Mi)")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]


def parse_policy(body: Mapping[str, Any]) -> Policy:
    """A typed Policy from a ProducerHealthPolicy body; `InvalidPolicyError` names the field.

    Never raises anything else: a body of the wrong shape (a list where an object belongs,
    an object where a string does) is an invalid policy too, not a crash of the round.
    """
    try:
        return _parse(body)
    except InvalidPolicyError:
        raise
    except (TypeError, AttributeError, ValueError) as exc:
        raise InvalidPolicyError(f"malformed ProducerHealthPolicy: {exc}") from exc


def _parse(body: Mapping[str, Any]) -> Policy:
    if not isinstance(body, Mapping):
        raise InvalidPolicyError("a ProducerHealthPolicy must be an object")
    meta = body.get("metadata") or {}
    spec = _section(body, "spec")
    return _check(
        Policy(
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or ""),
            uid=str(meta.get("uid") or ""),
            selector=_selector(spec.get("selector") or {}),
            roles=frozenset(_enum_list(spec, "roles", Role, [Role.EXECUTOR])),
            kafka=_kafka(_section(spec, "kafka")),
            probes=Probes(**_ints(spec, "probes", Probes())),
            detection=Detection(
                **_ints(spec, "detection", Detection()),
                expected_write_interval_seconds=_optional_integer(
                    _section(spec, "detection"), "detection.expectedWriteIntervalSeconds"
                ),
            ),
            actions=_actions(_section(spec, "actions")),
            safety=_safety(_section(spec, "safety")),
            sidecar=_sidecar(_section(spec, "sidecar")),
            socket_view=_socket_view(_section(spec, "socketView")),
            process_view=ProcessView(
                _flag(_section(spec, "processView"), "processView.enabled", False)
            ),
        )
    )


def _socket_view(section: Mapping[str, Any]) -> SocketView:
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidPolicyError("spec.socketView.enabled must be true or false")
    lists = {}
    for key in ("ports", "uids"):
        low, most = ITEM_BOUNDS[f"socketView.{key}[]"]
        values = section.get(key) or []
        if not isinstance(values, list) or len(values) > MAX_LIST_ITEMS:
            raise InvalidPolicyError(
                f"spec.socketView.{key} must be a list of at most {MAX_LIST_ITEMS}"
            )
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= most:
                raise InvalidPolicyError(
                    f"spec.socketView.{key}: {value!r} is not in {low}..{most}"
                )
        lists[key] = tuple(values)
    return SocketView(enabled, lists["ports"], lists["uids"])


def matching_policy(pod: Mapping[str, Any], policies: Iterable[Policy]) -> Policy | None:
    """The policy covering `pod` (first by name if several do), or None.

    A policy covers a pod in its own namespace whose labels match its selector and
    whose role (`pod_role`) is one of its roles. Opt-out is `injection`'s business.
    """
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    namespace = meta.get("namespace")
    role = pod_role(labels)
    candidates = [
        p
        for p in policies
        if (not namespace or p.namespace == namespace)
        and role in {r.value for r in p.roles}
        and p.selector.matches(labels)
    ]
    return min(candidates, key=lambda p: p.name, default=None)


def _check(policy: Policy) -> Policy:
    """The CRD's cross-field (CEL) rules, and requests above limits, which CEL cannot check."""
    interval = policy.probes.probe_interval_seconds
    for name in ("stall_seconds", "heartbeat_seconds", "metadata_max_age_seconds"):
        if getattr(policy.detection, name) <= interval:
            raise InvalidPolicyError(
                f"spec.detection.{_camel(name)} must be longer than "
                f"spec.probes.probeIntervalSeconds ({interval})"
            )
    written = policy.detection.expected_write_interval_seconds
    if written is not None and written <= interval:
        raise InvalidPolicyError(
            "spec.detection.expectedWriteIntervalSeconds must be longer than "
            f"spec.probes.probeIntervalSeconds ({interval})"
        )
    probes = policy.probes
    if probes.connect_timeout_seconds + probes.request_timeout_seconds > interval:
        raise InvalidPolicyError(
            "spec.probes: connectTimeoutSeconds + requestTimeoutSeconds must not exceed "
            f"probeIntervalSeconds ({interval})"
        )
    if policy.safety.allow_driver_deletion and Role.DRIVER not in policy.roles:
        raise InvalidPolicyError("spec.safety.allowDriverDeletion needs 'driver' in spec.roles")
    sidecar = policy.sidecar
    for res, limit in sidecar.limits.items():
        request = sidecar.requests.get(res)
        if request is not None and parse_quantity(request) > parse_quantity(limit):
            raise InvalidPolicyError(
                f"spec.sidecar.resources.requests.{res} ({request}) exceeds the limit ({limit})"
            )
    return policy


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _integer(section: Mapping[str, Any], path: str, default: int) -> int:
    """`spec.<path>` (its last part read from `section`) within the CRD's bounds."""
    value = section.get(path.rsplit(".", 1)[-1], default)
    low, high = INTEGER_BOUNDS[path]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidPolicyError(
            f"spec.{path} must be an integer in {low}..{high}, got {_shown(value)}"
        )
    return value


def _flag(section: Mapping[str, Any], path: str, default: bool) -> bool:
    value = section.get(path.rsplit(".", 1)[-1], default)
    if not isinstance(value, bool):
        raise InvalidPolicyError(f"spec.{path} must be true or false, got {_shown(value)}")
    return value


def _section(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidPolicyError(f"{key} must be an object")
    return value


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _ints(spec: Mapping[str, Any], key: str, defaults: Probes | Detection) -> dict[str, int]:
    section = _section(spec, key)
    return {
        name: _integer(section, f"{key}.{_camel(name)}", default)
        for name, default in dataclasses.asdict(defaults).items()
        if default is not None  # optional, no default: read on its own (`_optional_integer`)
    }


def _optional_integer(section: Mapping[str, Any], path: str) -> int | None:
    """`spec.<path>` when set (within the CRD's bounds), None when left out."""
    if section.get(path.rsplit(".", 1)[-1]) is None:
        return None
    return _integer(section, path, 0)


def _enum_list(section: Mapping[str, Any], key: str, kind: type[_E], default: list[_E]) -> list[_E]:
    raw = section.get(key)
    if raw is None:
        return default
    if not isinstance(raw, list):
        raise InvalidPolicyError(f"{key} must be a list, got {_shown(raw)}")
    try:
        return [kind(v) for v in raw]
    except ValueError as exc:
        raise InvalidPolicyError(f"{key}: {exc}") from exc


def _selector(raw: Mapping[str, Any]) -> LabelSelector:
    exprs = []
    for expr in raw.get("matchExpressions") or []:
        op = expr.get("operator")
        values = tuple(expr.get("values") or ())
        if op not in {"In", "NotIn", "Exists", "DoesNotExist"}:
            raise InvalidPolicyError(f"spec.selector: unknown operator {op!r}")
        if (op in {"In", "NotIn"}) != bool(values):
            raise InvalidPolicyError(f"spec.selector: {op} needs values only with In/NotIn")
        exprs.append(Requirement(str(expr.get("key")), op, values))
    return LabelSelector(dict(raw.get("matchLabels") or {}), tuple(exprs))


def _kafka(raw: Mapping[str, Any]) -> KafkaTarget:
    servers = tuple(str(s) for s in raw.get("bootstrapServers") or ())
    if not servers:
        raise InvalidPolicyError("spec.kafka.bootstrapServers needs at least one host:port")
    for server in servers:
        if not _BOOTSTRAP.match(server):
            raise InvalidPolicyError(
                f"spec.kafka.bootstrapServers: {_shown(server)} is not host:port with a port "
                "in 1..65535"
            )
    security = _section(raw, "security")
    protocol = str(security.get("protocol", "PLAINTEXT"))
    mechanism = security.get("saslMechanism")
    if protocol.startswith("SASL_") != (mechanism is not None):
        raise InvalidPolicyError(
            "spec.kafka.security.saslMechanism is required with, and only with, a SASL_ protocol"
        )
    secrets = []
    for ref in security.get("fromSecrets") or []:
        prop = str(ref.get("property", ""))
        key_ref = ref.get("secretKeyRef") or {}
        if not _SECRET_PROPERTY.match(prop) or not key_ref.get("name") or not key_ref.get("key"):
            raise InvalidPolicyError(f"spec.kafka.security.fromSecrets: invalid entry {prop!r}")
        secrets.append(SecretProperty(prop, str(key_ref["name"]), str(key_ref["key"])))
    return KafkaTarget(
        bootstrap_servers=servers,
        topics=tuple(str(t) for t in raw.get("topics") or ()),
        security_protocol=protocol,
        sasl_mechanism=None if mechanism is None else str(mechanism),
        secret_properties=tuple(secrets),
    )


def _actions(raw: Mapping[str, Any]) -> Actions:
    by_verdict = dict(DEFAULT_ACTIONS)
    for key, verdict in ACTION_FIELDS.items():
        actions = tuple(_enum_list(raw, key, Operation, list(DEFAULT_ACTIONS[verdict])))
        if not POLICY_OPERATIONS.issuperset(actions):
            refused = sorted(set(actions) - POLICY_OPERATIONS)
            raise InvalidPolicyError(f"spec.actions.{key}: {', '.join(refused)} is not an action")
        if Operation.CORDON_NODE in actions and verdict not in _NODE_FAULTS:
            raise InvalidPolicyError(f"spec.actions.{key}: cordonNode is for {_NODE_FIELDS}")
        if verdict in _NO_RESTART and DISRUPTIVE & set(actions):
            raise InvalidPolicyError(f"spec.actions.{key}: restarting adds churn, use alert")
        if set(actions) >= DISRUPTIVE:
            raise InvalidPolicyError(
                f"spec.actions.{key}: restart and decommission exclude each other"
            )
        by_verdict[verdict] = actions
    uncordon = _section(raw, "autoUncordon")
    defaults = Actions()
    return Actions(
        by_verdict=by_verdict,
        auto_uncordon=_flag(uncordon, "actions.autoUncordon.enabled", defaults.auto_uncordon),
        uncordon_healthy_for_seconds=_integer(
            uncordon,
            "actions.autoUncordon.healthyForSeconds",
            defaults.uncordon_healthy_for_seconds,
        ),
    )


def _safety(raw: Mapping[str, Any]) -> SafetyLimits:
    defaults = SafetyLimits()
    share = raw.get("maxUnhealthyShare", defaults.max_unhealthy_share)
    low, high = MAX_UNHEALTHY_SHARE
    if isinstance(share, bool) or not isinstance(share, int | float) or not low < share <= high:
        raise InvalidPolicyError(
            f"spec.safety.maxUnhealthyShare must be in ({low:g}, {high:g}], got {_shown(share)}"
        )
    return SafetyLimits(
        dry_run=_flag(raw, "safety.dryRun", defaults.dry_run),
        max_concurrent=_integer(raw, "safety.maxConcurrent", defaults.max_concurrent),
        max_unhealthy_share=float(share),
        max_actions_per_application_per_hour=_integer(
            raw,
            "safety.maxActionsPerApplicationPerHour",
            defaults.max_actions_per_application_per_hour,
        ),
        pod_cooldown_seconds=_integer(
            raw, "safety.podCooldownSeconds", defaults.pod_cooldown_seconds
        ),
        allow_driver_deletion=_flag(
            raw, "safety.allowDriverDeletion", defaults.allow_driver_deletion
        ),
        max_cordoned_nodes=_integer(raw, "safety.maxCordonedNodes", defaults.max_cordoned_nodes),
        node_fault_min_pods=_integer(raw, "safety.nodeFaultMinPods", defaults.node_fault_min_pods),
    )


def _sidecar(raw: Mapping[str, Any]) -> SidecarSpec:
    defaults = SidecarSpec()
    resources = _section(raw, "resources")
    try:
        mode = InjectionMode(raw.get("injectionMode", "auto"))
    except ValueError as exc:
        raise InvalidPolicyError(f"spec.sidecar.injectionMode: {exc}") from exc
    requests = {k: str(v) for k, v in (resources.get("requests") or defaults.requests).items()}
    limits = {k: str(v) for k, v in (resources.get("limits") or defaults.limits).items()}
    for quantity in (*requests.values(), *limits.values()):
        parse_quantity(quantity)
    return SidecarSpec(
        image=raw.get("image"),
        image_pull_policy=raw.get("imagePullPolicy"),
        injection_mode=mode,
        requests=requests,
        limits=limits,
    )


def stale_after_seconds(policy: Policy) -> float:
    """A /status older than three probe rounds plus their timeouts comes from a wedged loop."""
    probes = policy.probes
    return (
        3.0 * probes.probe_interval_seconds
        + probes.connect_timeout_seconds
        + (probes.request_timeout_seconds)
    )
