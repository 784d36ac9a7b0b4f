"""The fleet the scale, replicas and kube stages share: pods stored in the emulator
before an operator starts, and what each operator does over three poll rounds (RSS,
mean time to poll its sidecars, CPU, pods judged), read from its metrics."""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass

from measuring import rss_mib

from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.processes import cpu_seconds
from hangwatch_testing.remediation_cluster import (
    PODS,
    POLICIES,
    FakeSidecar,
    RemediationCluster,
    TimedSidecar,
    scrape,
    stored_policy,
    watched_executor,
)
from operator_stages.common import PODS_PER_SIDECAR, done, progress


def store_fleet(
    stack: ExitStack, cluster: RemediationCluster, pods: int, flips: int = 0
) -> list[tuple[str, FakeSidecar]]:
    """`pods` pods stored before any operator starts (kmock answers each request in time
    linear in its object count, so creating them through its HTTP API one by one would
    take minutes), 100 per real sidecar server; `flips` of them, spread over the list and
    over the nodes (so over any order a round reads them in, not all read last), with a
    sidecar of their own, returned (name, sidecar) for the verdict-to-action flips."""
    policy = stored_policy("fleet", "writers", safety={"maxActionsPerApplicationPerHour": 1000})
    sidecars = []
    for _ in range(max(1, (pods - flips) // PODS_PER_SIDECAR)):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        sidecars.append(sidecar)
    step = pods // max(1, flips)
    flipped = {k * step + (k * 5) % step for k in range(flips)}
    own = []
    for index in range(pods):
        if index in flipped:
            sidecar = TimedSidecar(clock=time.perf_counter).start()
            stack.callback(sidecar.close)
        else:
            sidecar = sidecars[index % len(sidecars)]
        body = watched_executor(policy, index + 1, sidecar.port, node=f"node-{index % 50}")
        cluster.put(PODS, "fleet", body["metadata"]["name"], body)
        if index in flipped:
            own.append((body["metadata"]["name"], sidecar))
        if index % 500 == 0:
            progress(f"scale: {index}/{pods} pods stored")
    cluster.put(POLICIES, "fleet", "writers", policy)
    return own


@dataclass
class Steady:
    """One operator process over three poll rounds at scale."""

    rss: list[float]
    mean_poll_all: float
    operator_cpu: float
    judged: float

    @property
    def steady(self) -> float:
        return statistics.median(self.rss)

    def figures(self) -> dict[str, float]:
        """The steady RSS (median), its maximum, the mean poll of all sidecars and the
        operator's CPU, as the scale and kube stages report them."""
        return {
            "steady": self.steady,
            "max": max(self.rss),
            "mean_poll_all": self.mean_poll_all,
            "operator_cpu": self.operator_cpu,
        }


def measure_rounds(operators: list[tuple[OperatorRun, int]], what: str) -> list[Steady]:
    """Each operator's RSS (sampled every second), mean time to poll all its sidecars and
    CPU over the three poll rounds after the next round of the slowest one starts."""
    rounds_key = ("hangwatch_operator_poll_rounds_total", (("policy", "fleet/writers"),))
    count = ("hangwatch_operator_status_poll_duration_seconds_count", ())
    total = ("hangwatch_operator_status_poll_duration_seconds_sum", ())
    watched = ("hangwatch_operator_watched_pods", (("policy", "fleet/writers"),))
    firsts = [scrape(port).get(rounds_key, 0.0) for _, port in operators]
    for (_, port), first in zip(operators, firsts, strict=True):
        while scrape(port).get(rounds_key, 0.0) < first + 1:  # from a round's start
            time.sleep(0.1)
    before = [scrape(port) for _, port in operators]
    cpu_before = [cpu_seconds(run.process.pid) for run, _ in operators]
    began = time.monotonic()
    samples: list[list[float]] = [[] for _ in operators]
    while any(
        scrape(port).get(rounds_key, 0.0) < first + 4
        for (_, port), first in zip(operators, firsts, strict=True)
    ):
        for (run, _), rss in zip(operators, samples, strict=True):
            rss.append(rss_mib(run.process.pid))
        progress(f"{what}: RSS {', '.join(f'{r[-1]:.0f}' for r in samples)} MiB")
        time.sleep(1)
    wall = time.monotonic() - began
    done(f"{what}: {len(samples[0])} samples over 3 poll rounds")
    results = []
    for index, (run, port) in enumerate(operators):
        after = scrape(port)
        polls = after[count] - before[index][count]
        results.append(
            Steady(
                rss=samples[index],
                mean_poll_all=(after[total] - before[index][total]) / polls,
                operator_cpu=(cpu_seconds(run.process.pid) - cpu_before[index]) / wall,
                judged=after.get(watched, 0.0),
            )
        )
    return results
