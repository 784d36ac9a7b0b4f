"""Benchmark: what the native sidecar adds to an executor pod's start on a real node.

The node tier's single-node cluster (`hangwatch_testing.node.cluster`: the release
scripts/build-kube.sh builds, containerd, runc, the CNI bridge) runs `--pods` executor
pods, created one after the other as Spark's driver creates them (owned by a real
driver pod), in two phases measured in one run:

1. without hangwatch: nothing installed;
2. with the native sidecar: the chart installed by real Helm, the operator running as
   its ServiceAccount, a policy covering the pods, so every pod is admitted through
   the webhook and starts the sidecar (an init container with `restartPolicy: Always`)
   before the executor.

The executor container runs a Python process in the hangwatch image (no Spark image is
needed to measure the pod's start). For each pod: from the create request to the
executor container running, and to the pod Ready (the sidecar's readiness probe
included), as the client sees it (the pod is read every 100 ms), p50 and p99. Each
pod is deleted once Ready (the node's 2 cores hold about 13 executors with sidecars).

    python benchmarks/pod_startup.py [--pods 20]

Needs the cached build (`make kube`) and the image tools (`scripts/setup.sh`). Progress
on stderr, results on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe, unwind_on_sigterm
from measuring import percentile

from hangwatch_operator.helm_release import merge_values
from hangwatch_testing.kube.readme import helm_install
from hangwatch_testing.kube.release import CHART, HelmRelease, running_operator
from hangwatch_testing.node.cluster import NodeCluster, node_cluster
from hangwatch_testing.node.components import NodeUnavailableError
from hangwatch_testing.node.images import hangwatch_image_in
from hangwatch_testing.node.workloads import (
    NAMESPACE,
    create_pod,
    ensure_namespace,
    executor_for,
    policy,
    read_pod,
    submit_driver,
    wait_operator_ready,
)

EXECUTOR_SCRIPT = """
import os, signal, time
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
time.sleep(3600)
"""
POLL_SECONDS = 0.1
WAIT_SECONDS = 300.0


def _running(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return any("running" in (s.get("state") or {}) for s in statuses)


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def start_pods(
    node: NodeCluster, image: str, phase: str, pods: int, injected: bool
) -> tuple[list[float], list[float]]:
    """Seconds from each create request to its executor running, and to the pod Ready."""
    driver = submit_driver(node, f"-{phase}")
    to_running: list[float] = []
    to_ready: list[float] = []
    for exec_id in range(1, pods + 1):
        body = executor_for(node, driver, exec_id, image, EXECUTOR_SCRIPT, suffix=f"-{phase}")
        started = time.perf_counter()
        stored = create_pod(node, body)
        has_sidecar = bool(stored["spec"].get("initContainers"))
        if has_sidecar != injected:
            raise SystemExit(f"pod {stored['metadata']['name']}: sidecar {has_sidecar}")
        name = stored["metadata"]["name"]
        running_at = 0.0
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            pod = read_pod(node, name)
            now = time.perf_counter() - started
            if not running_at and _running(pod):
                running_at = now
            if _ready(pod):
                to_running.append(running_at or now)
                to_ready.append(now)
                break
            time.sleep(POLL_SECONDS)
        else:
            status = json.dumps(read_pod(node, name).get("status"))[:3000]
            raise SystemExit(f"pod {name} not Ready in {WAIT_SECONDS:.0f} s: {status}")
        print(f"{phase}: pod {exec_id}/{pods} Ready in {to_ready[-1]:.2f} s", file=sys.stderr)
        # one pod at a time: a 2-core node holds about 13 executors with their sidecars
        node.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", 0)
    return to_running, to_ready


def line(label: str, values: list[float], base: list[float] | None) -> str:
    p50, p99 = statistics.median(values), percentile(values, 0.99)
    extra = f" (+{p50 - statistics.median(base):.2f} s)" if base is not None else ""
    return f"  {label:<44} p50 {p50:6.2f} s{extra}   p99 {p99:6.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20, help="executor pods per phase")
    args = parser.parse_args()
    if args.pods < 1:
        parser.error("--pods must be at least 1")
    print(f"machine: {describe()}", file=sys.stderr)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as tmp,
            node_cluster() as node,
        ):
            print("node Ready; building the hangwatch image", file=sys.stderr)
            with hangwatch_image_in(node) as image:
                ensure_namespace(node)
                start_pods(node, image, "warm-up", 2, injected=False)  # not measured
                print("phase 1: without hangwatch", file=sys.stderr)
                without = start_pods(node, image, "plain", args.pods, injected=False)
                repository, tag = image.rsplit(":", 1)
                release = HelmRelease(node, CHART)
                image_values = {"repository": repository, "tag": tag}
                release.install(
                    merge_values(
                        helm_install().values,
                        {"image": image_values, "sidecar": {"image": image_values}},
                    )
                )
                path = f"/apis/hangwatch.dev/v1alpha1/namespaces/{NAMESPACE}/producerhealthpolicies"
                node.create(path, policy("startup", f"{node.node_ip}:9"))
                with running_operator(node, Path(tmp)) as (run, _):
                    wait_operator_ready(run, node, release, NAMESPACE, "startup")
                    print("phase 2: with the native sidecar", file=sys.stderr)
                    native = start_pods(node, image, "native", args.pods, injected=True)
                version = node.get("/version")["gitVersion"]
    except NodeUnavailableError as exc:
        print(f"pod start-up benchmark: {exc}", file=sys.stderr)
        return 1
    print(f"machine: {describe()}")
    print(f"executor pod start on Kubernetes {version}, {args.pods} pods per phase, sequential:")
    print(line("create -> executor running, without hangwatch", without[0], None))
    print(line("create -> executor running, native sidecar", native[0], without[0]))
    print(line("create -> pod Ready, without hangwatch", without[1], None))
    print(line("create -> pod Ready, native sidecar", native[1], without[1]))
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
