"""The operator's Prometheus metrics: one registry, fixed names the chart's alerts use.

Updated by `remediation` (decisions, suppressions, actions, pod gauges, poll
durations), by `webhook` (admission requests), by `policy_watch` (the policies the
webhook knows, whether its watch works) and by `handlers` (cordoned nodes);
served by `handlers` on `OperatorSettings.metrics_port`. Names and labels are a
public contract (README: Contracts): change them only with a changelog entry.
`policy` labels are `<namespace>/<name>`. Counters count *reported* decisions (the
ones that also became Events), so an unchanged suppression is counted again only when
it is reported again (`renotify_seconds`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hangwatch.contracts import Verdict
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Outcome

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


def set_pod_gauges(policy: str, watched: int, counts: Mapping[str, int], unreachable: int) -> None:
    WATCHED.labels(policy).set(watched)
    SIDECAR_UNREACHABLE.labels(policy).set(unreachable)
    for verdict in UNHEALTHY_VERDICTS:
        UNHEALTHY.labels(policy, str(verdict)).set(counts.get(str(verdict), 0))


def forget_policy(policy: str) -> None:
    """Drop a deleted policy's gauges (counters stay: they are totals)."""
    for gauge in (WATCHED, SIDECAR_UNREACHABLE):
        with contextlib.suppress(KeyError):
            gauge.remove(policy)
    for verdict in UNHEALTHY_VERDICTS:
        with contextlib.suppress(KeyError):
            UNHEALTHY.remove(policy, str(verdict))
