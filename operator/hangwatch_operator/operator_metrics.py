"""The operator's Prometheus metrics: one registry, fixed names the chart's alerts use.

Updated by `remediation` (decisions, suppressions, actions, pod gauges, poll
durations), by `webhook` (admission requests), by `policy_watch` (the policies the
webhook knows, whether its watch works) and by `handlers` (cordoned nodes);
served by `handlers` on `OperatorSettings.metrics_port`. Names and labels are a
public contract (README: Contracts): change them only with a changelog entry.
`policy` labels are `<namespace>/<name>`. Counters count *reported* decisions (the
ones that also became Events), so an unchanged suppression is counted again only when
it is reported again (`renotify_seconds`).

`hangwatch_operator_remediation_timestamp_seconds` is what the chart's remediation
alerts notify from: one series per remediation carried out (restart, decommission,
cordonNode), labelled with what a person needs to act on it (`REMEDIATION_LABELS`),
valued with when it happened. A gauge, not a counter: a counter per pod would appear
already at 1, and `increase()` never sees a series' first increment. Each series is
dropped `REMEDIATION_SERIES_SECONDS` after its remediation, so the per-pod labels cost
at most one series per remediation of the last hour (the policies' rate limits bound
that number).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hangwatch.contracts import Verdict
from hangwatch_operator import correlation
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.rounds import Plan, Settled

REGISTRY = CollectorRegistry(auto_describe=True)
"""Only the operator's own metrics (no process collectors from other libraries)."""

DECISIONS = Counter(
    "hangwatch_operator_decisions_total",
    "Decisions reported, by policy, verdict, action and outcome (acted, dry_run, "
    "suppressed, failed).",
    ["policy", "verdict", "action", "outcome"],
    registry=REGISTRY,
)
SUPPRESSIONS = Counter(
    "hangwatch_operator_suppressions_total",
    "Actions a safety limit stopped, by policy and limit (storm, rate_limit, cooldown, "
    "max_cordoned, max_concurrent, cluster_unreachable, leader_election, driver_protected, "
    "failure_budget, dry_run).",
    ["policy", "reason"],
    registry=REGISTRY,
)
ACTIONS = Counter(
    "hangwatch_operator_actions_total",
    "Actions carried out (not dry run, not failed), by policy and action.",
    ["policy", "action"],
    registry=REGISTRY,
)
WATCHED = Gauge(
    "hangwatch_operator_watched_pods",
    "Pods a policy watches (running, not being deleted).",
    ["policy"],
    registry=REGISTRY,
)
UNHEALTHY = Gauge(
    "hangwatch_operator_unhealthy_pods",
    "Watched pods per unhealthy effective verdict.",
    ["policy", "verdict"],
    registry=REGISTRY,
)
SIDECAR_UNREACHABLE = Gauge(
    "hangwatch_operator_sidecar_unreachable_pods",
    "Watched pods whose sidecar did not answer /status in the last poll.",
    ["policy"],
    registry=REGISTRY,
)
POLL_DURATION = Histogram(
    "hangwatch_operator_status_poll_duration_seconds",
    "Time to poll every sidecar of one policy once.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
WEBHOOK_REQUESTS = Counter(
    "hangwatch_operator_webhook_requests_total",
    "Pod admissions seen by the injection webhook, by result (injected, skipped, error, "
    "malformed).",
    ["result"],
    registry=REGISTRY,
)
WEBHOOK_POLICIES = Gauge(
    "hangwatch_operator_webhook_policies",
    "Valid ProducerHealthPolicies this replica's webhook injects for (its own list and "
    "watch, which kopf peering does not pause).",
    registry=REGISTRY,
)
WEBHOOK_POLICY_WATCH_UP = Gauge(
    "hangwatch_operator_webhook_policy_watch_up",
    "1 while the webhook's list and watch of ProducerHealthPolicies works, 0 while it "
    "fails and is retried (the webhook keeps the policies it had).",
    registry=REGISTRY,
)
POD_WATCH_UP = Gauge(
    "hangwatch_operator_pod_watch_up",
    "1 while the operator's list and watch of the labelled pods works, 0 while it fails "
    "and is retried (remediation keeps judging the pods it had).",
    registry=REGISTRY,
)
SHARDS_HELD = Gauge(
    "hangwatch_operator_shards_held",
    "Shards of the watched pods this replica holds the Lease of and judges (with "
    "sharding; 0 without it, or while it holds none).",
    registry=REGISTRY,
)
CORDONED_NODES = Gauge(
    "hangwatch_operator_cordoned_nodes",
    "Nodes currently cordoned by hangwatch (label hangwatch.dev/cordoned).",
    registry=REGISTRY,
)
POLL_ROUNDS = Counter(
    "hangwatch_operator_poll_rounds_total",
    "Poll rounds completed per policy (a stalled count means a stalled poller).",
    ["policy"],
    registry=REGISTRY,
)

UNWRITABLE_TOPIC_PODS = Gauge(
    "hangwatch_operator_unwritable_topic_pods",
    "Watched pods of a policy whose verdict says the cluster refuses writes to a topic "
    "(partitions_unwritable: its ISR below min.insync.replicas, its leader's log "
    "directory failed), one series per policy and topic while it lasts: the chart's "
    "alert says it once per topic, not once per pod.",
    ["policy", "namespace", "topic"],
    registry=REGISTRY,
)

UNNAMED_TOPIC = "(unnamed)"
"""The `topic` label of pods whose sidecars name no topic."""

REMEDIATION_LABELS = (
    "policy",
    "namespace",
    "application",
    "executor",
    "pod",
    "node",
    "verdict",
    "action",
    "broker",
)
"""Labels of `hangwatch_operator_remediation_timestamp_seconds`; the chart's remediation
alerts keep them (tests/chart checks it). `namespace` and `pod` are the executor's: the
chart's ServiceMonitor sets `honorLabels` so the operator pod's own do not replace them."""
REMEDIATIONS = Gauge(
    "hangwatch_operator_remediation_timestamp_seconds",
    "When hangwatch carried out a remediation (restart, decommission, cordonNode), one "
    "series per pod or node acted on, kept for an hour: policy, the executor's namespace, "
    "application, executor and pod, node, verdict, action, and the brokers the pod could "
    "not use (none when it could use them all).",
    REMEDIATION_LABELS,
    registry=REGISTRY,
)
REMEDIATION_OPERATIONS = frozenset(
    {Operation.RESTART, Operation.DECOMMISSION, Operation.CORDON_NODE}
)
"""The operations that notify a person through the remediation alerts."""
REMEDIATION_SERIES_SECONDS = 3600.0
"""How long a remediation's series stays exported."""
NO_BROKER = "none"
"""The `broker` label when the pod could use every broker (Prometheus drops empty labels)."""
BROKERS_NAMED = 3
"""At most this many broker addresses in the `broker` label (the first, sorted)."""

UNHEALTHY_VERDICTS = tuple(v for v in Verdict if v not in {Verdict.HEALTHY, Verdict.UNKNOWN})


def count_decisions(policy: str, decisions: Iterable[Decision]) -> None:
    """Count reported decisions, their suppressions and the actions carried out."""
    for decision in decisions:
        action = str(decision.operation)
        DECISIONS.labels(policy, str(decision.verdict), action, str(decision.outcome)).inc()
        if decision.suppression is not None:
            SUPPRESSIONS.labels(policy, str(decision.suppression)).inc()
        if decision.outcome is Outcome.ACTED:
            ACTIONS.labels(policy, action).inc()


def remediation_labels(policy: str, decision: Decision) -> dict[str, str]:
    """The labels of one remediation's series (the executor's when it is a pod's)."""
    pod = decision.pod
    brokers = decision.brokers[:BROKERS_NAMED]
    return {
        "policy": policy,
        "namespace": pod.namespace if pod is not None else policy.split("/", 1)[0],
        "application": (pod.application_id if pod is not None else None) or "",
        "executor": (pod.executor_id if pod is not None else None) or "",
        "pod": pod.name if pod is not None else "",
        "node": decision.node or "",
        "verdict": str(decision.verdict),
        "action": str(decision.operation),
        "broker": ",".join(brokers) or NO_BROKER,
    }


def mark_remediations(policy: str, decisions: Iterable[Decision], now: float) -> None:
    """Export each remediation carried out at `now`; drop series older than an hour."""
    for decision in decisions:
        if decision.outcome is Outcome.ACTED and decision.operation in REMEDIATION_OPERATIONS:
            REMEDIATIONS.labels(**remediation_labels(policy, decision)).set(now)
    for metric in REMEDIATIONS.collect():
        for sample in metric.samples:
            if sample.value < now - REMEDIATION_SERIES_SECONDS:
                with contextlib.suppress(KeyError):
                    REMEDIATIONS.remove(*(sample.labels[name] for name in REMEDIATION_LABELS))


def measure_round(policy: str, plan: Plan, settled: Settled, cordoned: int | None = None) -> None:
    """Every metric one round of a policy updates (`cordoned`: nodes hangwatch holds
    cordoned across policies, None where the driver has no nodes)."""
    counts = plan.findings.counts()
    watched = len(plan.findings.watched)
    set_pod_gauges(policy, watched, counts, counts[correlation.SIDECAR_UNREACHABLE])
    count_decisions(policy, settled.reported)
    mark_remediations(policy, settled.decisions, plan.now)
    set_unwritable_topics(policy, {t: len(f.pods) for t, f in plan.findings.unwritable.items()})
    if cordoned is not None:
        CORDONED_NODES.set(cordoned)
    POLL_ROUNDS.labels(policy).inc()


def measure_early(policy: str, settled: Settled, now: float) -> None:
    """The metrics of decisions settled before a round's end (`rolling`); the round's
    gauges wait for its end."""
    count_decisions(policy, settled.reported)
    mark_remediations(policy, settled.decisions, now)


def set_pod_gauges(policy: str, watched: int, counts: Mapping[str, int], unreachable: int) -> None:
    WATCHED.labels(policy).set(watched)
    SIDECAR_UNREACHABLE.labels(policy).set(unreachable)
    for verdict in UNHEALTHY_VERDICTS:
        UNHEALTHY.labels(policy, str(verdict)).set(counts.get(str(verdict), 0))


def set_unwritable_topics(policy: str, pods: Mapping[str, int]) -> None:
    """One series per topic the policy's pods say the cluster refuses writes to (topic
    -> pods); the series of topics no longer refused are dropped."""
    namespace = policy.split("/", 1)[0]
    named = {topic or UNNAMED_TOPIC: count for topic, count in pods.items()}
    for metric in UNWRITABLE_TOPIC_PODS.collect():
        for sample in metric.samples:
            labels = sample.labels
            if labels["policy"] == policy and labels["topic"] not in named:
                with contextlib.suppress(KeyError):
                    UNWRITABLE_TOPIC_PODS.remove(policy, labels["namespace"], labels["topic"])
    for topic, count in named.items():
        UNWRITABLE_TOPIC_PODS.labels(policy, namespace, topic).set(count)


def forget_policy(policy: str) -> None:
    """Drop a deleted policy's gauges (counters stay: they are totals)."""
    set_unwritable_topics(policy, {})
    for gauge in (WATCHED, SIDECAR_UNREACHABLE):
        with contextlib.suppress(KeyError):
            gauge.remove(policy)
    for verdict in UNHEALTHY_VERDICTS:
        with contextlib.suppress(KeyError):
            UNHEALTHY.remove(policy, str(verdict))
