"""Stage 4 of the operator benchmark: replicas sharing one fleet.

The same `--pods` pods in a fresh emulator (with the Leases' compare-and-swap,
`ShardedCluster`), then `--replicas` operators sharing them through 32 shard Leases
(the chart's default, Leases of 15 s renewed every 5 s): the time until the replicas'
`hangwatch_operator_watched_pods` add up to every pod, each one judging some, then,
over three poll rounds of every replica, each replica's RSS (per pod of the fleet,
which each lists, and per pod it judges), its mean time to poll its sidecars, its CPU;
the full poll is the slowest replica's mean. The single replica of the scale stage is
stopped first: the two stages run one after the other in one run.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import kmock

from hangwatch_testing.ports import free_port
from hangwatch_testing.remediation_cluster import (
    VERBS,
    RemediationCluster,
    running_hangwatch_operator,
    scrape,
)
from hangwatch_testing.waiting import wait_for
from operator_stages.common import WAIT_SECONDS, done, progress, webhook_settings
from operator_stages.fleet import Steady, measure_rounds, store_fleet

SHARDS = 32
"""The chart's default `operator.sharding.shards` (and its Lease timing: 15 s, 5 s)."""
LEASES = "coordination.k8s.io/v1/leases"


class LeaseConflict(kmock.KubernetesError):
    """HTTP 409: the Lease was written since it was read, or exists already."""

    status: int = 409
    reason: str = "Conflict"
    message: str = "the object has been modified; please apply your changes to the latest version"


class ShardedCluster(RemediationCluster):
    """The emulator with coordination.k8s.io Leases, for replicas sharing the pods.

    kmock stores what is created but has no PUT and no resourceVersion, so the Leases'
    compare-and-swap (`replica_leases`) is added here as the API server does it: a
    create or replace gets a new resourceVersion, and a replace whose resourceVersion
    is not the stored one is a 409 (a create of an existing Lease is one in kmock)."""

    def _declare(self, emulator: kmock.KubernetesEmulator) -> None:
        super()._declare(emulator)
        emulator.resources[LEASES] = kmock.ResourceInfo(kind="Lease", namespaced=True, verbs=VERBS)
        versions = itertools.count(1)
        path = r"^/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases"

        def created(request: kmock.Request) -> Any:
            namespace = request.url.path.split("/")[5]
            stored = emulator.objects[LEASES, namespace, request.data["metadata"]["name"]]
            stored.patch(
                {"metadata": {"namespace": namespace, "resourceVersion": str(next(versions))}}
            )
            return stored.raw

        def replaced(request: kmock.Request) -> Any:
            parts = request.url.path.split("/")
            key = (LEASES, parts[5], parts[7])
            try:
                stored = emulator.objects[key]
            except KeyError:
                raise kmock.KubernetesObjectNotFoundError() from None
            if stored.deleted:
                raise kmock.KubernetesObjectNotFoundError()
            version = stored.raw["metadata"].get("resourceVersion")
            if request.data["metadata"].get("resourceVersion") != version:
                raise LeaseConflict()
            metadata = {**request.data["metadata"], "namespace": parts[5]}
            emulator.objects[key] = {
                **request.data,
                "metadata": metadata | {"resourceVersion": str(next(versions))},
            }
            return emulator.objects[key].raw

        emulator["post", re.compile(path + r"/?$")] << created
        emulator["put", re.compile(path + r"/[^/]+/?$")] << replaced


def bench_replicas(stack: ExitStack, workdir: Path, pods: int, replicas: int) -> dict[str, Any]:
    """A fresh emulator holding `pods` pods, then `replicas` operators sharing them
    through `SHARDS` shard Leases (the chart's default and Lease timing): the time until
    every pod is judged by one replica, then each replica over three rounds."""
    cluster = stack.enter_context(ShardedCluster())
    store_fleet(stack, cluster, pods)
    watched = ("hangwatch_operator_watched_pods", (("policy", "fleet/writers"),))
    operators = []
    started = time.monotonic()
    for index in range(replicas):
        place = workdir / f"replica-{index}"
        place.mkdir()
        metrics_port = free_port()
        _, settings = webhook_settings(place, free_port())
        settings |= {
            "metrics_listen_address": "127.0.0.1",
            "metrics_port": metrics_port,
            "shards": SHARDS,
            "replica_identity": f"replica-{index}",
        }
        run = stack.enter_context(running_hangwatch_operator(cluster, place, settings))
        operators.append((run, metrics_port))

    def partitioned() -> bool:
        try:
            judged = [scrape(port).get(watched, 0.0) for _, port in operators]
        except OSError:
            return False
        progress(f"replicas: judged {', '.join(f'{j:.0f}' for j in judged)}")
        return sum(judged) == pods and all(judged)

    wait_for(
        partitioned,
        WAIT_SECONDS,
        "every pod judged by one of the replicas",
        interval=0.2,
        give_up=lambda: any(run.process.poll() is not None for run, _ in operators),
        context=lambda: operators[0][0].log()[-3000:],
    )
    watched_after = time.monotonic() - started
    done(f"replicas: {pods} pods judged {watched_after:.1f} s after {replicas} replicas started")
    steady = measure_rounds(operators, f"replicas: {pods} pods")
    return {"watched_after": watched_after, "replicas": steady, "load": os.getloadavg()[0]}


def report_replicas(fleet: dict[str, Any], idle: float, pods: int) -> None:
    replicas: list[Steady] = fleet["replicas"]
    print(
        f"{pods} pods over {len(replicas)} replicas ({SHARDS} shards): every pod judged "
        f"{fleet['watched_after']:.1f} s after the replicas started; full poll (the slowest "
        f"replica's mean) {max(r.mean_poll_all for r in replicas) * 1000:.0f} ms; "
        f"load average {fleet['load']:.1f}"
    )
    for index, replica in enumerate(replicas):
        print(
            f"  replica-{index}: judges {replica.judged:.0f} pods, RSS {replica.steady:.0f} MiB "
            f"(max {max(replica.rss):.0f}): {(replica.steady - idle) * 1024 / pods:.1f} KiB per "
            f"pod of the fleet (each replica lists them all), "
            f"{(replica.steady - idle) * 1024 / max(1.0, replica.judged):.1f} KiB per pod it "
            f"judges; mean poll of its sidecars {replica.mean_poll_all * 1000:.0f} ms; CPU "
            f"{replica.operator_cpu:.0%} of a core"
        )
