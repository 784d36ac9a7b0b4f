"""Small builders for the pure remediation tests: pods, sidecar reports, findings, policies.

Not a test module. Everything here is plain data for `correlation.correlate`,
`decisions.decide` and `history`; times are fake (`NOW`), never the clock.
"""

from __future__ import annotations

from typing import Any

from hangwatch.contracts import Reachability, Verdict
from hangwatch_operator.correlation import Findings, correlate
from hangwatch_operator.policies import Policy, parse_policy
from hangwatch_operator.sidecar_status import BrokerReach, PodReport, SidecarReport
from hangwatch_operator.watched import WatchedPod

NOW = 1_800_000_000.0
BROKERS = ("kafka-0:9092", "kafka-1:9092", "kafka-2:9092")


def pod(
    name: str,
    *,
    node: str = "node-a",
    role: str = "executor",
    app: str = "spark-app-1",
    terminating: bool = False,
    hook: bool = False,
) -> WatchedPod:
    return WatchedPod(
        namespace="jobs",
        name=name,
        uid=f"uid-{name}",
        policy="writers",
        role=role,
        node=node,
        ip="10.0.0.1",
        port=9477,
        application_id=app,
        executor_id=name.rsplit("-", 1)[-1],
        terminating=terminating,
        decommission_hook=hook,
    )


def report(verdict: Verdict, *, reachable: bool = True, since: float = NOW - 120) -> SidecarReport:
    reach = Reachability.OK if reachable else Reachability.TIMEOUT
    return SidecarReport(
        verdict=verdict,
        since=since,
        reasons=(f"sidecar says {verdict}",),
        brokers=tuple(BrokerReach(b, str(reach)) for b in BROKERS),
        evaluated_ts=NOW - 1,
    )


def reports(
    *entries: tuple[WatchedPod, Verdict | None] | tuple[WatchedPod, Verdict, bool],
) -> list[PodReport]:
    """(pod, verdict[, reachable]) -> reports; verdict None means the sidecar did not answer."""
    out = []
    for entry in entries:
        the_pod, verdict, *rest = entry
        if verdict is None:
            out.append(PodReport(the_pod, error="no answer within 2 s"))
        else:
            reachable = rest[0] if rest else verdict is not Verdict.CLUSTER_UNREACHABLE
            out.append(PodReport(the_pod, report(verdict, reachable=reachable)))
    return out


def findings(*entries: Any) -> Findings:
    return correlate(reports(*entries))


def policy(**spec: Any) -> Policy:
    """A parsed policy; `spec` sections override the defaults (e.g. safety={...})."""
    body = {
        "metadata": {"name": "writers", "namespace": "jobs"},
        "spec": {"kafka": {"bootstrapServers": list(BROKERS)}, **spec},
    }
    return parse_policy(body)


def fleet(
    count: int, verdict: Verdict = Verdict.HEALTHY, *, start: int = 1, node: str = "node-a"
) -> list[tuple[WatchedPod, Verdict]]:
    return [(pod(f"exec-{i}", node=node), verdict) for i in range(start, start + count)]
