"""Public names shared by every component (README: Contracts; docs/architecture.md).

Users put these strings in alerts, dashboards and scripts: change them only with a
reason written in the README's changelog. The sidecar produces verdicts and
reachability classes, the operator consumes them, the chart's alert rules and the
dashboard match on them. Each verdict's other parts (its `spec.actions` field, default
actions, colour, alerts, dashboard panel, docs line) are declared once in
`hangwatch.verdicts`.
"""

from __future__ import annotations

from enum import StrEnum

METRIC_PREFIX = "hangwatch_"
"""Every Prometheus metric hangwatch exports starts with this prefix."""


class Verdict(StrEnum):
    """One pod's (or producer's) health verdict, as reported in /status, metrics and Events."""

    HEALTHY = "healthy"
    BROKER_DEGRADED = "broker_degraded"
    CLUSTER_UNREACHABLE = "cluster_unreachable"
    LEADER_ELECTION = "leader_election"
    METADATA_STALE = "metadata_stale"
    PRODUCER_HUNG = "producer_hung"
    PRODUCER_SILENT = "producer_silent"
    """Every connection of the pod to brokers silent while Spark runs a task, and nothing
    shows whether the producer is stuck or the task is busy elsewhere (computing, reading
    its input): silence alone. Alert only by default: a restart needs positive evidence."""
    WRITES_REJECTED = "writes_rejected"
    """The cluster refuses the producer's writes for a reason the next client meets again
    (a record above the topic's limit, a missing ACL, refused credentials, a topic that
    does not exist): `hangwatch.kafka_errors` says which. Alert only: a restart cannot
    help, so policies may not restart or decommission for it."""
    PARTITIONS_UNWRITABLE = "partitions_unwritable"
    """The cluster refuses writes to partitions the pod's producers write, for its own
    reason: their ISR below `min.insync.replicas` (a producer with `acks=all`), their
    leader's log directory failed, or the producers report NOT_ENOUGH_REPLICAS or
    KAFKA_STORAGE_ERROR. Alert only: a new executor meets the same refusal."""
    UNKNOWN = "unknown"
    NODE_NETWORK_FAULT = "node_network_fault"
    """Added by the operator only: pods on one node fail while pods elsewhere succeed."""


class Operation(StrEnum):
    """What an operator decision does: the values of a policy's `spec.actions` (but
    `uncordonNode`, which hangwatch decides itself) and of the `action` label of the
    operator's metrics. `hangwatch_operator.operations` holds the rest of the decision
    vocabulary; a verdict's default actions (`hangwatch.verdicts`) are these."""

    RESTART = "restart"
    DECOMMISSION = "decommission"
    CORDON_NODE = "cordonNode"
    UNCORDON_NODE = "uncordonNode"
    ALERT = "alert"


class Reachability(StrEnum):
    """How a broker answered a probe from this pod."""

    OK = "ok"
    REFUSED = "refused"
    TIMEOUT = "timeout"
    """Blackholed: the SYN or the request went unanswered."""
    UNRESPONSIVE = "unresponsive"
    """TCP accepted, but the Kafka request was never answered."""
    DNS_ERROR = "dns_error"
    TLS_ERROR = "tls_error"
    AUTH_ERROR = "auth_error"


class ExitCode:
    """Exit codes shared by every `hangwatch` command."""

    OK = 0
    DEGRADED = 1
    """Something is wrong but work can go on (or a check failed its budget)."""
    UNAVAILABLE = 2
    USAGE = 3
    """Bad input or configuration: a one-line error was printed."""
    UNVERIFIABLE = 4
    """The check ran to the end but cannot decide: what it would have checked is gone
    (e.g. records deleted by retention before `pipeline verify` read them)."""
