"""Stage 5 of the operator benchmark: the real API server (`--stages kube`).

Not run by default: it needs the kube tier's build (scripts/build-kube.sh). A fresh
control plane of that tier (etcd, kube-apiserver, kube-controller-manager), the CRD,
50 nodes and `--pods` executor pods as the webhook injects them, created through the
API server bound to their node and reported Running with pod IP 127.0.0.1 through
`pods/status` by this benchmark (no kubelet), 100 per real sidecar server; then an
operator with the admin's credentials: the time until the policy's status counts every
pod as watched, and, over three rounds, its RSS, mean poll of all sidecars and CPU.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes import client as kube_client

from hangwatch_testing.kube.cluster import ROOT, LocalCluster, local_cluster
from hangwatch_testing.kube.fleet import ensure_node
from hangwatch_testing.kube.release import admin_api
from hangwatch_testing.kube.spark import ensure_namespace
from hangwatch_testing.remediation_cluster import (
    BROKERS,
    FakeSidecar,
    remediating_operator,
    watched_executor,
)
from hangwatch_testing.structural import policy_document
from operator_stages.common import PODS_PER_SIDECAR, done, progress, wait_until
from operator_stages.fleet import measure_rounds

KUBE_NODES = 50
KUBE_WRITERS = 8
"""Threads creating the pods (each its own client): a kubelet per node reports its pods."""


@dataclass(frozen=True)
class AdminKubeconfig:
    """The control plane's admin kubeconfig, for `running_hangwatch_operator`."""

    cluster: LocalCluster

    def write_kubeconfig(self, path: Path) -> Path:
        return self.cluster.admin_kubeconfig


def store_on_apiserver(stack: ExitStack, cluster: LocalCluster, pods: int) -> None:
    """The CRD, 50 nodes, one policy and `pods` executor pods as the webhook injects them,
    created through the API server bound to their node, then Running with pod IP
    127.0.0.1 through `pods/status` (no kubelet here: the benchmark plays it), 100 pods per
    real sidecar server (its port the pod's `hangwatch` port)."""
    cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    crd = "crd/producerhealthpolicies.hangwatch.dev"
    cluster.kubectl("wait", "--for", "condition=established", crd, "--timeout", "60s")
    ensure_namespace(cluster, "fleet")
    for node in range(KUBE_NODES):
        ensure_node(cluster, f"node-{node}")
    policy = policy_document(
        "fleet", "writers", list(BROKERS), safety={"maxActionsPerApplicationPerHour": 1000}
    )
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy))
    sidecars = []
    for _ in range(max(1, pods // PODS_PER_SIDECAR)):
        sidecar = FakeSidecar().start()
        stack.callback(sidecar.close)
        sidecars.append(sidecar)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    running = {
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "hostIP": "127.0.0.1",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
    }
    stored = [0]
    failed: list[str] = []

    def write(indices: range) -> None:
        with admin_api(cluster) as api:
            core = kube_client.CoreV1Api(api)
            for index in indices:
                port = sidecars[index % len(sidecars)].port
                body = watched_executor(policy, index + 1, port, node=f"node-{index % KUBE_NODES}")
                del body["status"], body["metadata"]["uid"]
                try:
                    core.create_namespaced_pod("fleet", cast(Any, body), _preload_content=False)
                    name = body["metadata"]["name"]
                    core.patch_namespaced_pod_status(name, "fleet", running, _preload_content=False)
                except kube_client.ApiException as exc:
                    failed.append(f"{body['metadata']['name']}: {exc.status} {exc.reason}")
                    return
                stored[0] += 1

    writers = [
        threading.Thread(target=write, args=(range(start, pods, KUBE_WRITERS),), daemon=True)
        for start in range(KUBE_WRITERS)
    ]
    for writer in writers:
        writer.start()
    while any(writer.is_alive() for writer in writers):
        progress(f"kube: {stored[0]}/{pods} pods stored and Running")
        time.sleep(1)
    if failed:
        raise SystemExit(f"benchmark: pods not stored on the API server: {failed[0]}")
    done(f"kube: {pods} pods stored and Running")


def bench_kube(stack: ExitStack, workdir: Path, pods: int) -> dict[str, Any]:
    """A fresh control plane (etcd, kube-apiserver, kube-controller-manager: the kube
    tier's) holding `pods` pods, then a fresh operator watching them: time to watch them
    all, then three rounds (RSS, mean poll of all sidecars, CPU)."""
    cluster = stack.enter_context(local_cluster())
    stored_at = time.monotonic()
    store_on_apiserver(stack, cluster, pods)
    stored_in = time.monotonic() - stored_at
    started = time.monotonic()
    operator, metrics_port = stack.enter_context(  # the sidecars' timeout: the default
        remediating_operator(AdminKubeconfig(cluster), workdir, status_timeout_seconds=2.0)
    )

    def watched() -> bool:
        got = cluster.kubectl("get", "phpolicy", "writers", "-n", "fleet", "-o", "json")
        return bool(json.loads(got.stdout).get("status", {}).get("watched") == pods)

    wait_until("every pod watched (real API server)", watched, operator)
    watched_after = time.monotonic() - started
    done(f"kube: {pods} pods watched {watched_after:.1f} s after the operator started")
    (steady,) = measure_rounds([(operator, metrics_port)], f"kube: {pods} pods")
    return {
        "stored_in": stored_in,
        "watched_after": watched_after,
        **steady.figures(),
        "load": os.getloadavg()[0],
    }


def report_kube(kube: dict[str, Any], idle: float, pods: int) -> None:
    per_pod = (kube["steady"] - idle) * 1024 / pods
    print(
        f"real API server, {pods} pods (stored and Running in {kube['stored_in']:.0f} s): "
        f"every pod watched {kube['watched_after']:.1f} s after the operator started; "
        f"operator RSS {kube['steady']:.0f} MiB (max {kube['max']:.0f}): {per_pod:.1f} KiB "
        f"per pod over the idle {idle:.0f} MiB; mean poll of all sidecars "
        f"{kube['mean_poll_all'] * 1000:.0f} ms; operator CPU {kube['operator_cpu']:.0%} of a "
        f"core, load average {kube['load']:.1f}"
    )
