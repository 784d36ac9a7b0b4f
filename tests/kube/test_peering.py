"""Two operator replicas with kopf peering on the real API server: exactly one acts.

Both replicas run as the chart configures them (`--peering hangwatch`, the chart's
ClusterKopfPeering), with the chart's
ServiceAccount token (priorities fixed so that replica 0, on the webhook Service's port,
is the standby). Covered: one replica pauses in favour of the other, both keep
their keep-alives in the ClusterKopfPeering's status; a `producer_hung` pod is deleted
exactly once (one delete in the audit log) and only the leading replica logs the
restart and writes the policy's status.

Known bug shown here (strict xfail): a replica on standby keeps serving admission (the
Service sends it half of the requests) but kopf freezes its indexes while paused, so a
policy created after it paused is unknown to it and the executors it admits get no
sidecar. Worse, a replica that starts while the other leads never fills its indexes at
all (seen here before the fixture let replica 0 lead first): it injects nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from hangwatch.contracts import Verdict
from hangwatch_testing.emulated_cluster import OperatorRun
from tests.kube.cluster import LocalCluster, free_port
from tests.kube.fleet import (
    Fleet,
    ensure_node,
    launch,
    policy_body,
    set_verdicts,
    wait_for_policy_status,
)
from tests.kube.release import OPERATOR_USER, HelmRelease, running_operator
from tests.kube.spark import container_names, ensure_namespace, submit_application

pytestmark = pytest.mark.xdist_group("kube")

NAMESPACE = "peering"
PAUSED = "Pausing operations in favour of"


@pytest.fixture(scope="module")
def replicas(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[OperatorRun]]:
    workdir = tmp_path_factory.mktemp("peering")
    ensure_node(cluster, "node-a")
    # The policy exists before the replicas start: see the xfail test below for why.
    ensure_namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy_body(NAMESPACE)))
    with ExitStack() as stack:
        runs = []
        for index in range(2):
            # Two processes cannot both listen on the Service's port here (one host); a
            # cluster gives each pod its own IP. The second serves its webhook elsewhere.
            port = {} if index == 0 else {"HANGWATCH_OPERATOR_WEBHOOK_PORT": str(free_port())}
            # Fixed priorities (the chart leaves them random) make replica 0, the one on
            # the Service's port, the standby: the admission path of the known bug below.
            priority = ("--priority", str(100 + index))
            run, _ = stack.enter_context(
                running_operator(cluster, workdir, f"hangwatch-operator-p{index}", priority, **port)
            )
            runs.append(run)
            if index == 0:
                # Replica 0 leads alone first, so its indexes are filled before it pauses:
                # a replica that starts as a standby never fills them (see below).
                wait_for_policy_status(cluster, NAMESPACE, "writers")
        runs[0].wait_for("both keep-alives", lambda: len(_peers(cluster)) == 2)
        runs[0].wait_for("replica 0 paused", lambda: PAUSED in runs[0].log())
        yield runs


def _peers(cluster: LocalCluster) -> dict[str, int]:
    """Peer id -> priority, from the ClusterKopfPeering's keep-alives."""
    done = cluster.kubectl("get", "clusterkopfpeering", "hangwatch", "-o", "json")
    status = json.loads(done.stdout).get("status") or {}
    return {peer: int(entry["priority"]) for peer, entry in status.items()}


def test_both_replicas_keep_alive_and_the_lower_one_pauses(
    cluster: LocalCluster, replicas: list[OperatorRun]
) -> None:
    peers = _peers(cluster)
    assert sorted(peers.values()) == [100, 101], peers
    assert {p.split("@")[0] for p in peers} == {"hangwatch-operator-p0", "hangwatch-operator-p1"}
    assert "Resuming operations" not in replicas[0].log().split(PAUSED)[-1]
    assert PAUSED not in replicas[1].log()


def test_exactly_one_replica_restarts_a_hung_pod(
    cluster: LocalCluster, release: HelmRelease, replicas: list[OperatorRun], tmp_path: Path
) -> None:
    fleet: Fleet = launch(cluster, NAMESPACE, ["node-a"] * 3, release.sidecar_port)
    try:
        follower, leader = replicas  # priorities 100 and 101
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
        assert "restart" not in follower.log() and f"{NAMESPACE}/writers" not in follower.log()
    finally:
        fleet.close()


@pytest.mark.xfail(
    strict=True,
    reason="known bug: a standby replica's policy index is frozen by kopf peering, so it "
    "admits executors of a policy created after it paused without the sidecar",
)
def test_a_standby_replica_injects_pods_of_a_policy_created_after_it_paused(
    cluster: LocalCluster, replicas: list[OperatorRun]
) -> None:
    assert "Resuming operations" not in replicas[0].log().split(PAUSED)[-1]  # standby
    namespace = "peering-late"
    ensure_namespace(cluster, namespace)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(policy_body(namespace)))
    time.sleep(2.0)  # far longer than a watch event takes to arrive
    _, (executor,) = submit_application(cluster, namespace, 1, suffix="-late")
    assert "hangwatch-sidecar" in container_names(executor)
