"""kopf handlers for remediation: the watched pods, an index of cordons, a daemon per policy.

Thin by design. `start_remediation` (startup) builds the shared `remediation.Runtime`
(Kubernetes API client), starts `pod_watch.PodWatch` (its
own list and watch of every pod the webhook labelled `hangwatch.dev/policy`: a kopf
index of thousands of pods takes minutes to start, see `pod_store`) and serves the
operator's /metrics; `hangwatch_cordons` indexes nodes hangwatch cordoned;
`remediate_policy` is a daemon per ProducerHealthPolicy that runs
`remediation.PolicyRemediation.round` once per probe interval until the policy is deleted or
this replica stops leading (kopf peering pauses every handler of a standby replica),
from the first complete list of the pods on. With sharding (`OperatorSettings.shards`
above 0) start-up also starts `replica_leases.ReplicaLeases`, kopf peering is off, and
each round gets only the pods of the shards this replica holds (and the keys of the
others, whose operations in progress count against `maxConcurrent`), and a look at the
pod store's present pods, so that a plan within the round leaves out pods gone since
it began.
Loaded together with `webhook` by `hangwatch operator` (`operator_cli`), or with
`kopf run -m hangwatch_operator.webhook -m hangwatch_operator.handlers`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import kopf
from prometheus_client import start_http_server

from hangwatch_operator import operator_metrics
from hangwatch_operator.kube_api import KubeApi
from hangwatch_operator.pod_watch import PodWatch
from hangwatch_operator.policies import GROUP, PLURAL, VERSION
from hangwatch_operator.policy_watch import watch_plan
from hangwatch_operator.remediation import PolicyRemediation, Runtime
from hangwatch_operator.replica_leases import ReplicaLeases
from hangwatch_operator.settings import OperatorSettings, SettingsError
from hangwatch_operator.watched import CORDONED_LABEL, CordonedNode, cordoned_node
from hangwatch_operator.webhook import SETTINGS_KEY

RUNTIME_KEY = "hangwatch_remediation"
"""Memo key of the `Started` remediation runtime."""
LIST_WAIT_STEP_SECONDS = 0.2
"""How often a policy's daemon looks whether the pods are listed (or it is stopped)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Started:
    """What startup created and cleanup must close."""

    runtime: Runtime
    metrics_server: Any | None
    pods: PodWatch
    leases: ReplicaLeases | None


def operator_settings(memo: kopf.Memo) -> OperatorSettings:
    """Settings from the memo (set by `hangwatch operator` or tests), else the environment."""
    try:
        settings = memo.get(SETTINGS_KEY) or OperatorSettings.from_environ(os.environ)
    except SettingsError as exc:  # a retry cannot fix the environment
        raise kopf.PermanentError(f"invalid operator settings: {exc}") from exc
    if not isinstance(settings, OperatorSettings):
        raise kopf.PermanentError(f"memo[{SETTINGS_KEY!r}] must be OperatorSettings")
    return settings


@kopf.on.startup()
async def start_remediation(memo: kopf.Memo, settings: kopf.OperatorSettings, **_: Any) -> None:
    """Watch the labelled pods and nodes, connect to the API server, serve /metrics."""
    # Server-side selector: the API server sends only hangwatch's cordoned nodes, not
    # every node of the cluster (kopf's filters are local).
    settings.watching.label_selectors["", "v1", "nodes"] = CORDONED_LABEL
    ours = operator_settings(memo)
    started = memo.get(RUNTIME_KEY)
    if isinstance(started, Started):  # a retried start-up keeps what it started
        return
    pods = PodWatch(await KubeApi.connect(), watch_plan(ours.watch_namespaces), ours.sidecar_port)
    pods.start()
    leases = None
    if ours.shards:
        leases = ReplicaLeases(
            await KubeApi.connect(),
            ours.operator_namespace,
            ours.replica_identity or socket.gethostname(),
            ours.shards,
            ours.lease_duration_seconds,
            ours.lease_renew_seconds,
        )
        leases.start()
        log.info("Sharding: %d shards, replica %s.", ours.shards, leases.identity)
    api = await KubeApi.connect()
    server = None
    if ours.metrics_port:
        server, _thread = start_http_server(
            ours.metrics_port,
            addr=ours.metrics_listen_address,
            registry=operator_metrics.REGISTRY,
        )
        log.info("Operator metrics on :%d/metrics.", ours.metrics_port)
    memo[RUNTIME_KEY] = Started(Runtime(ours, api, leases=leases), server, pods, leases)


@kopf.on.cleanup()
async def stop_remediation(memo: kopf.Memo, **_: Any) -> None:
    started = memo.get(RUNTIME_KEY)
    if not isinstance(started, Started):
        return
    await started.pods.stop()
    if started.leases is not None:
        await started.leases.stop()
        await started.leases.api.close()
    await started.runtime.api.close()
    if started.metrics_server is not None:
        started.metrics_server.shutdown()
        started.metrics_server.server_close()


@kopf.index("", "v1", "nodes", labels={CORDONED_LABEL: kopf.PRESENT})
def hangwatch_cordons(body: kopf.Body, **_: Any) -> dict[str, CordonedNode]:
    """Policy key -> the nodes it cordoned (from the node's annotations)."""
    node = cordoned_node(body)
    return {} if node is None else {node.policy_key: node}


@kopf.daemon(GROUP, VERSION, PLURAL, id="remediation", cancellation_timeout=10.0, backoff=10.0)
async def remediate_policy(
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: kopf.Memo,
    stopped: kopf.DaemonStopped,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    hangwatch_cordons: kopf.Index[str, CordonedNode] | None = None,
    **_: Any,
) -> None:
    """Poll, decide, act and report for one policy until it is deleted or we stop leading."""
    started = memo.get(RUNTIME_KEY)
    if not isinstance(started, Started) or hangwatch_cordons is None:
        raise kopf.TemporaryError("remediation runtime not started yet", delay=1)
    if not started.pods.ready.is_set():
        logger.info("Waiting for the first complete list of the labelled pods.")
    leases = started.leases
    while not started.pods.ready.is_set() or (leases is not None and not leases.ready.is_set()):
        # never a round on half a list, nor before this replica knows its shards
        if stopped:
            return
        await stopped.wait(LIST_WAIT_STEP_SECONDS)
    remediation = PolicyRemediation(started.runtime, namespace or "", name, body.get("status"))
    store = started.pods.store

    def present() -> set[str]:
        return {pod.key for pod in store.pods(remediation.namespace, name)}

    try:
        while not stopped:
            began = time.monotonic()
            pods = started.pods.store.pods(remediation.namespace, name)
            elsewhere: frozenset[str] = frozenset()
            if leases is not None:
                owned = leases.owned()
                elsewhere = frozenset(p.key for p in pods if not leases.judges(p.uid, owned))
                pods = [pod for pod in pods if leases.judges(pod.uid, owned)]
            cordons = [node for store in hangwatch_cordons.values() for node in store]
            interval = await remediation.round(
                body,
                pods,
                cordons,
                logger,
                elsewhere,
                present,
            )
            await stopped.wait(max(0.0, interval - (time.monotonic() - began)))
    finally:
        operator_metrics.forget_policy(remediation.key)
        if leases is not None:
            leases.forget(remediation.key)
