"""Stage 2 of the operator benchmark: verdict to action.

A real sidecar status server flips from `healthy` to `producer_hung`; the time until
kmock's Kubernetes emulator no longer has the pod (the operator deleted it), repeated
`--flips` times with a fresh pod each time, beside four healthy neighbours (one hung
pod of five is no storm). Policy probe interval 2 s (the CRD's smallest valid one).
Target: p99 under one status-poll interval plus 1 s. `flip_to_deletion` is the one
flip, which the scale stage repeats at fleet scale.
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack

from measuring import percentile

from hangwatch.contracts import Verdict
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.remediation_cluster import (
    FAST,
    PODS,
    POLICIES,
    FakeSidecar,
    RemediationCluster,
    TimedSidecar,
    stored_policy,
    watched_executor,
)
from operator_stages.common import done, progress, wait_until

FLIP_INTERVAL_SECONDS = 2


def bench_flips(
    cluster: RemediationCluster, operator: OperatorRun, stack: ExitStack, flips: int
) -> list[float]:
    policy = stored_policy(
        "flips", "writers", **FAST, safety={"maxActionsPerApplicationPerHour": 1000}
    )
    for index in range(1, 5):  # healthy neighbours: one hung pod of five is no storm
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        cluster.create(PODS, "flips", watched_executor(policy, index, sidecar.port))
    cluster.create(POLICIES, "flips", policy)
    latencies = []
    for flip in range(flips):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        pod = watched_executor(policy, 100 + flip, sidecar.port)
        name = pod["metadata"]["name"]
        cluster.create(PODS, "flips", pod)
        wait_until(
            "the new pod polled",
            lambda: cluster.policy_status("flips", "writers").get("watched") == 5,
            operator,
        )
        time.sleep(FLIP_INTERVAL_SECONDS * (flip % 4) / 4)  # flip at different poll phases
        latencies.append(flip_to_deletion(cluster, operator, "flips", name, sidecar)[0])
        progress(f"verdict to action: {flip + 1}/{flips}, last {latencies[-1]:.2f} s")
    done(f"verdict to action: {flips} flips")
    return latencies


def flip_to_deletion(
    cluster: RemediationCluster,
    operator: OperatorRun,
    namespace: str,
    name: str,
    sidecar: FakeSidecar,
) -> tuple[float, float | None]:
    """Seconds from the pod's sidecar saying `producer_hung` until the pod is gone, and
    (for a `TimedSidecar`) from its first answer saying so until the pod is gone: the
    operator's part once it has read the verdict, without the wait for that read."""
    flipped = time.perf_counter()
    sidecar.set(Verdict.PRODUCER_HUNG, reasons=("benchmark flip",))
    wait_until(
        "the hung pod deleted",
        lambda: cluster.get(PODS, namespace, name) is None,
        operator,
    )
    gone = time.perf_counter()
    read = None
    if isinstance(sidecar, TimedSidecar):
        read = next((gone - t for t in list(sidecar.answered) if t >= flipped), None)
    return gone - flipped, read


def report_flips(flips: list[float]) -> None:
    budget = FLIP_INTERVAL_SECONDS + 1.0
    p99 = percentile(flips, 0.99)
    print(
        f"verdict to action (probe interval {FLIP_INTERVAL_SECONDS} s, {len(flips)} flips): "
        f"p50 {statistics.median(flips):.2f} s, p99 {p99:.2f} s, min {min(flips):.2f} s"
    )
    print(f"  target p99 < interval + 1 s = {budget:.0f} s: {'met' if p99 < budget else 'MISSED'}")
