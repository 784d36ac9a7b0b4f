"""Two operator replicas with kopf peering on the real API server: one acts, both inject.

Both replicas run as the chart configures them (`--peering hangwatch`, the chart's
ClusterKopfPeering), with the chart's ServiceAccount token; priorities are fixed so
that replica 1 leads and replica 0, on the webhook Service's port (the one the API
server calls), is the standby. Replica 1 starts first and leads; replica 0 starts while
it leads, as in a rolling update or after a rescheduled pod, so kopf pauses it from its
first moment and never fills its indexes.

Covered: replica 0 pauses in favour of replica 1 and never resumes, both keep their
keep-alives in the ClusterKopfPeering's status; replica 0's webhook listens only once
it has listed the policies (the chart's readiness probe connects to that port) and,
although it never led, injects executors of a policy that existed before it started
(its metrics count the injection, the leader's count none: the standby answered); a
policy created after the standby paused is injected by it, a change of that policy's
spec reaches it (the sidecar gets the new probe interval) and its deletion too (no
sidecar afterwards); a `producer_hung` pod is deleted exactly once (one delete in the
audit log) and only the leading replica logs the restart and writes the policy's
status.

Found by this tier before the webhook had a policy watch of its own: kopf freezes a
paused replica's indexes, so the standby admitted executors of a later policy without
the sidecar, and a replica that started as a standby injected nothing at all.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.injection import SIDECAR_CONTAINER
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster
from hangwatch_testing.kube.fleet import (
    Fleet,
    ensure_node,
    launch,
    policy_body,
    set_verdicts,
    wait_for_policy_status,
)
from hangwatch_testing.kube.release import OPERATOR_USER, HelmRelease, running_operator
from hangwatch_testing.kube.spark import container_names, ensure_namespace, submit_application
from hangwatch_testing.ports import free_port
from hangwatch_testing.remediation_cluster import scrape

pytestmark = pytest.mark.xdist_group("kube")

NAMESPACE = "peering"
PAUSED = "Pausing operations in favour of"


@dataclass(frozen=True)
class Replicas:
    standby: OperatorRun
    """Replica 0: priority 100, on the webhook Service's port, started while 1 leads."""
    leader: OperatorRun
    """Replica 1: priority 101, its webhook on a port of its own."""
    standby_metrics: int
    leader_metrics: int


@pytest.fixture(scope="module")
def replicas(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    workdir = tmp_path_factory.mktemp("peering")
    ensure_node(cluster, "node-a")
    ensure_namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy_body(NAMESPACE)))
    with ExitStack() as stack:
        # Two processes cannot both listen on the Service's port here (one host); a
        # cluster gives each pod its own IP. The leader serves its webhook elsewhere, so
        # every admission the API server asks for is answered by the standby.
        leader, leader_command = stack.enter_context(
            running_operator(
                cluster,
                workdir,
                "hangwatch-operator-p1",
                ("--priority", "101"),
                HANGWATCH_OPERATOR_WEBHOOK_PORT=str(free_port()),
            )
        )
        wait_for_policy_status(cluster, NAMESPACE, "writers")  # replica 1 leads
        standby, standby_command = stack.enter_context(
            running_operator(cluster, workdir, "hangwatch-operator-p0", ("--priority", "100"))
        )
        standby.wait_for("both keep-alives", lambda: len(_peers(cluster)) == 2)
        # With `--peering` (mandatory peering) kopf starts a replica paused and resumes it
        # only when no live peer outranks it: a replica that starts while a higher one
        # leads logs no "Pausing" line, and must never log "Resuming operations".
        standby.wait_for(
            "replica 0 ready (its webhook port accepts connections)",
            lambda: _accepts(release.webhook_port),
        )
        yield Replicas(standby, leader, standby_command.metrics_port, leader_command.metrics_port)


def _accepts(port: int) -> bool:
    """The chart's readiness probe: a TCP connection to the webhook port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _injected(metrics_port: int) -> float:
    key = ("hangwatch_operator_webhook_requests_total", (("result", "injected"),))
    return scrape(metrics_port).get(key, 0.0)


def _peers(cluster: LocalCluster) -> dict[str, int]:
    """Peer id -> priority, from the ClusterKopfPeering's keep-alives."""
    done = cluster.kubectl("get", "clusterkopfpeering", "hangwatch", "-o", "json")
    status = json.loads(done.stdout).get("status") or {}
    return {peer: int(entry["priority"]) for peer, entry in status.items()}


def test_both_replicas_keep_alive_and_the_lower_one_pauses(
    cluster: LocalCluster, replicas: Replicas
) -> None:
    peers = _peers(cluster)
    assert sorted(peers.values()) == [100, 101], peers
    assert {p.split("@")[0] for p in peers} == {"hangwatch-operator-p0", "hangwatch-operator-p1"}
    assert "Resuming operations" not in replicas.standby.log()  # never led
    assert PAUSED not in replicas.leader.log()


def test_a_replica_started_while_the_other_leads_injects(
    cluster: LocalCluster, replicas: Replicas
) -> None:
    standby_before = _injected(replicas.standby_metrics)
    _, (executor,) = submit_application(cluster, NAMESPACE, 1, suffix="-from-standby")
    assert SIDECAR_CONTAINER in container_names(executor)
    assert executor["metadata"]["annotations"]["hangwatch.dev/injected"] == "writers"
    assert _injected(replicas.standby_metrics) == standby_before + 1  # the standby answered
    assert _injected(replicas.leader_metrics) == 0.0
    assert "Resuming operations" not in replicas.standby.log()


def test_exactly_one_replica_restarts_a_hung_pod(
    cluster: LocalCluster, release: HelmRelease, replicas: Replicas, tmp_path: Path
) -> None:
    fleet: Fleet = launch(cluster, NAMESPACE, ["node-a"] * 3, release.sidecar_port)
    try:
        follower, leader = replicas.standby, replicas.leader
        leader.wait_for(
            "3 pods watched",
            lambda: (
                json.loads(
                    cluster.kubectl(
                        "get", "phpolicy", "writers", "-n", NAMESPACE, "-o", "json"
                    ).stdout
                )
                .get("status", {})
                .get("watched")
                == 3
            ),
        )
        hung = fleet.pods[0]
        set_verdicts([hung], Verdict.PRODUCER_HUNG)
        leader.wait_for(
            "the hung pod deleted",
            lambda: (fleet.stored(hung.name) or {}).get("metadata", {}).get("deletionTimestamp"),
        )
        leader.wait_for_log("producer_hung: restart done")
        deletes = [
            e
            for e in cluster.audit_events()
            if e["user"]["username"] == OPERATOR_USER
            and e["verb"] == "delete"
            and e.get("objectRef", {}).get("namespace") == NAMESPACE
        ]
        assert [e["objectRef"]["name"] for e in deletes] == [hung.name]
        # Decisions end with "Policy <namespace>/<name>."; the standby makes none.
        assert "restart" not in follower.log()
        assert f"Policy {NAMESPACE}/writers." not in follower.log()
    finally:
        fleet.close()


def test_a_standby_follows_a_policy_created_changed_and_deleted_after_it_paused(
    cluster: LocalCluster, replicas: Replicas
) -> None:
    standby = replicas.standby
    namespace = "peering-late"
    policy = f"{namespace}/writers"
    ensure_namespace(cluster, namespace)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy_body(namespace)))
    standby.wait_for_log(f"Policy {policy} (generation 1) loaded for injection.")
    _, (executor,) = submit_application(cluster, namespace, 1, suffix="-late")
    assert SIDECAR_CONTAINER in container_names(executor)

    interval = {"spec": {"probes": {"probeIntervalSeconds": 3}}}
    cluster.merge_patch("phpolicy", "writers", namespace, interval)
    standby.wait_for_log(f"Policy {policy} (generation 2) changed for injection.")
    _, (changed,) = submit_application(cluster, namespace, 1, suffix="-changed")
    (sidecar,) = [c for c in changed["spec"]["initContainers"] if c["name"] == SIDECAR_CONTAINER]
    flag = sidecar["args"].index("--probe-interval-seconds")
    assert sidecar["args"][flag + 1] in ("3", "3.0")

    cluster.kubectl("delete", "phpolicy", "writers", "-n", namespace)
    standby.wait_for_log(f"Policy {policy} removed for injection.")
    _, (after,) = submit_application(cluster, namespace, 1, suffix="-deleted")
    assert SIDECAR_CONTAINER not in container_names(after)
    assert "Resuming operations" not in standby.log()
