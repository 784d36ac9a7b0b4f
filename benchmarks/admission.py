"""Benchmark: what hangwatch's webhook adds to executor pod creation on a real API server.

The kube tier's control plane (`hangwatch_testing.kube.cluster`: etcd, kube-apiserver
and kube-controller-manager of the release scripts/build-kube.sh builds, on loopback)
admits `--pods` executor pods, created one after the other as Spark's driver creates
them, in three phases measured in one run:

1. without the webhook: nothing of hangwatch installed;
2. with the webhook: the chart installed by real Helm, the operator running as its
   ServiceAccount, a policy covering the pods: the API server calls the webhook over
   HTTPS (the chart's CA) and every pod is stored with the sidecar;
3. operator down: the chart still installed, the operator stopped; failurePolicy
   Ignore admits the pods unchanged (the dial to the Service is refused at once).

Latency is the client's (one kept-alive connection, as a driver has): from the create
request to the stored pod, p50 and p99, after 50 unmeasured pods warm the server up.

    python benchmarks/admission.py [--pods 200]

Needs the cached build (`make kube`). Progress on stderr, results on
stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from machine import describe, unwind_on_sigterm
from measuring import percentile

from hangwatch_testing.kube.cluster import ClusterUnavailableError, LocalCluster, local_cluster
from hangwatch_testing.kube.release import (
    CHART,
    HelmRelease,
    admin_api,
    running_operator,
    wait_for_operator,
)
from hangwatch_testing.kube.spark import (
    container_names,
    create_pod,
    ensure_namespace,
    executor_pod_for,
    submit_application,
)
from hangwatch_testing.structural import EXECUTOR_POLICY

NAMESPACE = "spark-jobs"


def create_executors(cluster: LocalCluster, phase: str, count: int, injected: bool) -> list[float]:
    driver, _ = submit_application(cluster, NAMESPACE, 0, suffix=f"-{phase}")
    seconds = []
    with admin_api(cluster) as api:  # one client: a kept-alive connection, as a driver has
        for exec_id in range(1, count + 1):
            body = executor_pod_for(driver, exec_id, suffix=f"-{phase}")
            stored, elapsed = create_pod(cluster, NAMESPACE, body, api)
            has_sidecar = "hangwatch-sidecar" in container_names(stored)
            if has_sidecar is not injected:
                raise SystemExit(f"{phase}: pod {exec_id} injected={has_sidecar}, not {injected}")
            seconds.append(elapsed)
            if exec_id % 50 == 0:
                print(f"  {phase}: {exec_id}/{count} pods", file=sys.stderr, flush=True)
    return seconds


def line(name: str, seconds: list[float], baseline: list[float] | None) -> str:
    p50, p99 = statistics.median(seconds) * 1e3, percentile(seconds, 0.99) * 1e3
    text = f"  {name:<38} p50 {p50:6.1f} ms   p99 {p99:6.1f} ms"
    if baseline is not None:
        base50, base99 = statistics.median(baseline) * 1e3, percentile(baseline, 0.99) * 1e3
        text += f"   (x{p50 / base50:.2f} p50, {p50 - base50:+.1f} ms; x{p99 / base99:.2f} p99)"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=200, help="executor pods per phase")
    args = parser.parse_args()
    if args.pods < 10:
        parser.error("--pods must be at least 10")
    print(f"machine: {describe()}")
    try:
        with (
            tempfile.TemporaryDirectory(prefix="hangwatch-bench-") as tmp,
            local_cluster() as cluster,
        ):
            work = Path(tmp)
            print("control plane up; phase 1: no webhook", file=sys.stderr)
            ensure_namespace(cluster, NAMESPACE)
            create_executors(cluster, "warm-up", 50, injected=False)  # etcd, caches: not measured
            without = create_executors(cluster, "plain", args.pods, injected=False)
            release = HelmRelease(cluster, CHART)
            release.install()
            cluster.kubectl("apply", "-f", str(EXECUTOR_POLICY))
            with running_operator(cluster, work) as (run, _):
                wait_for_operator(cluster, run, release.webhook_port, "orders-writers", NAMESPACE)
                print("phase 2: through the webhook", file=sys.stderr)
                with_webhook = create_executors(cluster, "webhook", args.pods, injected=True)
            print("phase 3: operator down", file=sys.stderr)
            down = create_executors(cluster, "down", args.pods, injected=False)
            server = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    except ClusterUnavailableError as exc:
        print(f"admission benchmark: {exc}", file=sys.stderr)
        return 1
    print(
        f"executor pod creation through kube-apiserver {server['gitVersion']}, "
        f"{args.pods} pods per phase, sequential:"
    )
    print(line("without the webhook", without, None))
    print(line("with the webhook (sidecar injected)", with_webhook, without))
    print(line("operator down (failurePolicy Ignore)", down, without))
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
