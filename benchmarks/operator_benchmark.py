"""Benchmark of the operator: webhook throughput, verdict-to-action latency, memory at scale.

Everything runs on loopback, measured in one run on this machine, one stage after the
other (each a module of benchmarks/operator_stages/, whose docstring says what it
measures and its target):

1. `webhook`: the injection webhook over HTTPS, open loop at rising rates, on the
   direct route and on kopf's admission path: throughput at saturation (target: p99
   under 10 ms at 500/s);
2. `flips`: verdict to action, a sidecar flipped to `producer_hung` until its pod is
   gone (target: p99 under one status-poll interval plus 1 s);
3. `scale`: an operator over `--pods` stored pods: time to watch them all, RSS per pod,
   mean poll of all sidecars, CPU, then verdict to action at that scale;
4. `replicas`: `--replicas` operators sharing the same fleet through shard Leases;
5. `kube` (not run by default: it needs the kube tier's build, scripts/build-kube.sh):
   one operator over `--pods` pods on the real API server.

    python benchmarks/operator_benchmark.py [--seconds 10] [--settle 70]
                                            [--paths direct,kopf] [--flips 20]
                                            [--pods 2000] [--scale-flips 10]
                                            [--replicas 3]
                                            [--stages webhook,flips,scale,replicas,kube]

`--paths direct` alone measures `/inject-sidecar` only (e.g. on an older checkout,
where that path is kopf's). Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from machine import describe, unwind_on_sigterm
from measuring import rss_mib
from operator_stages import flips, kube, replicas, scale, webhook
from operator_stages.common import metrics_up, operator_on, wait_until

from hangwatch_testing.ports import free_port
from hangwatch_testing.remediation_cluster import POLICIES, RemediationCluster, stored_policy

STAGES = ("webhook", "flips", "scale", "replicas", "kube")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=10.0, help="per webhook rate")
    parser.add_argument("--paths", default="direct,kopf", help="webhook paths: direct, kopf")
    parser.add_argument(
        "--settle",
        type=float,
        default=70.0,
        help="seconds from the webhook's first answer to the first measurement "
        "(past the operator's start-up, into its steady state)",
    )
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--scale-flips", type=int, default=10, help="flips at --pods pods")
    parser.add_argument("--replicas", type=int, default=3, help="for the replicas stage")
    parser.add_argument(
        "--stages",
        default=",".join(name for name in STAGES if name != "kube"),
        help="of webhook, flips, scale, replicas, kube (kube: not by default, it needs "
        "scripts/build-kube.sh)",
    )
    args = parser.parse_args()
    args.paths = [name for name in args.paths.split(",") if name]
    if not args.paths or set(args.paths) - set(webhook.PATHS):
        parser.error(f"--paths: a comma-separated list of {', '.join(webhook.PATHS)}")
    args.stages = [name for name in args.stages.split(",") if name]
    if not args.stages or set(args.stages) - set(STAGES):
        parser.error(f"--stages: a comma-separated list of {', '.join(STAGES)}")
    return args


def main() -> int:
    args = arguments()
    paths, stages = args.paths, args.stages
    print(f"machine: {describe()}")
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    webhook_port, metrics_port = free_port(), free_port()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        cluster = stack.enter_context(RemediationCluster())
        cluster.create(POLICIES, "spark-jobs", stored_policy("spark-jobs", "writers"))
        workdirs = [Path(tmp) / name for name in ("webhook", "first", "second", "third", "kube")]
        for workdir in workdirs:
            workdir.mkdir()
        print("measuring (progress on stderr)", file=sys.stderr)
        if "webhook" in stages:
            hook = webhook.bench_webhook(cluster, workdirs[0], paths, args.seconds, args.settle)
        operator, _ = stack.enter_context(
            operator_on(cluster, workdirs[1], webhook_port, metrics_port)
        )
        wait_until("metrics served", lambda: metrics_up(metrics_port), operator)
        time.sleep(2)  # let start-up settle before reading the idle footprint
        idle = rss_mib(operator.process.pid)
        if "flips" in stages:
            flip_latencies = flips.bench_flips(cluster, operator, stack, args.flips)
        if "scale" in stages:
            with ExitStack() as scale_stack:  # the single replica stops before the three start
                memory = scale.bench_memory(scale_stack, workdirs[2], args.pods, args.scale_flips)
        if "replicas" in stages:
            fleet = replicas.bench_replicas(stack, workdirs[3], args.pods, args.replicas)
        if "kube" in stages:
            with ExitStack() as kube_stack:
                on_apiserver = kube.bench_kube(kube_stack, workdirs[4], args.pods)
    if "webhook" in stages:
        webhook.report_webhook(hook, args.seconds)
    if "flips" in stages:
        flips.report_flips(flip_latencies)
    if "scale" in stages:
        scale.report_scale(memory, idle, args.pods)
    if "replicas" in stages:
        replicas.report_replicas(fleet, idle, args.pods)
    if "kube" in stages:
        kube.report_kube(on_apiserver, idle, args.pods)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
