"""Three operator replicas sharing the watched pods through Leases, on the real API server.

The release is upgraded with `operator.sharding.enabled=true` (12 shards, Leases of
10 s renewed every 2 s: real `helm upgrade`, so the Lease RBAC is the chart's and each
replica runs as the chart's ServiceAccount, with `--standalone` and its pod name as
its identity, as the Deployment renders them). Replica 0 serves the webhook on the
Service's port, the others on ports of their own (one host). Two policies, 240
executor pods on three nodes, each with a real sidecar status server on its own
loopback pod IP. Covered:

- every shard's Lease is held by exactly one live replica, and every pod is judged by
  exactly one replica: each replica's `hangwatch_operator_watched_pods` per policy is
  the number of the policy's pods in the shards it holds, and they add up to all pods;
  the policy's status (written by the holder of shard 0) counts all of them, with the
  other replicas' published counts;
- the limits hold across replicas: with `maxActionsPerApplicationPerHour: 2` (and
  `maxConcurrent: 10`), six hung pods of one application spread over the replicas'
  shards get exactly two deletions in all (the others suppressed by the rate limit, on
  whichever replica judges them); with the default `maxConcurrent: 1`, two hung pods
  judged by two replicas get one deletion: the pod deleted stays in the cluster,
  terminating (no kubelet here), and the other replica's restart is suppressed as
  `max_concurrent` (another replica's restart in progress) until it is gone;
- a replica killed with SIGKILL: its shards are held by the two others (the time is
  printed; checked last, against the Lease's duration plus three renewal steps: the
  bound is one step from the victim's last renewal, which precedes the kill by up to a
  step, and the test polls), its pods are judged again (watched pods add up to all
  again), and a pod of one of its former shards that hangs afterwards is deleted by
  its new holder;
- no pod is deleted twice (audit log) nor gets two HangwatchRestart Events.
"""

from __future__ import annotations

import functools
import gc
import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.sharding import LEASE_PREFIX, read_lease, shard_of
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.kube.cluster import LocalCluster, free_port
from hangwatch_testing.kube.fleet import Fleet, RunningPod, ensure_node, launch, set_verdicts
from hangwatch_testing.kube.release import NAMESPACE, OPERATOR_USER, HelmRelease, running_operator
from hangwatch_testing.remediation_cluster import scrape

pytestmark = pytest.mark.xdist_group("kube")

SHARDS = 12
LEASE_SECONDS = 10
RENEW_SECONDS = 2
SHARDING = {
    "operator": {
        "replicas": 3,
        "sharding": {
            "enabled": True,
            "shards": SHARDS,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewSeconds": RENEW_SECONDS,
        },
    }
}
NODES = ["shard-a", "shard-b", "shard-c"]
PODS_PER_POLICY = 120
RATE_CAPPED = "capped"
"""Namespace of the policy whose application may lose 2 executors an hour."""
FREE = "uncapped"


@dataclass
class Replica:
    name: str
    run: OperatorRun
    metrics_port: int

    def watched(self, policy_key: str) -> float:
        key = ("hangwatch_operator_watched_pods", (("policy", policy_key),))
        return scrape(self.metrics_port).get(key, 0.0)


@dataclass
class Sharded:
    cluster: LocalCluster
    replicas: dict[str, Replica]
    fleets: dict[str, Fleet]
    killed: set[str]

    def holders(self) -> dict[int, str]:
        """Shard -> holder of its Lease, for the Leases not expired by the API server's
        view of time (renewTime + duration ahead of now)."""
        done = self.cluster.kubectl("get", "leases", "-n", NAMESPACE, "-o", "json")
        now = time.time()
        held = {}
        for item in json.loads(done.stdout)["items"]:
            name = item["metadata"]["name"]
            lease = read_lease(item)
            if name.startswith(LEASE_PREFIX) and lease is not None and not lease.free(now):
                held[int(name.removeprefix(LEASE_PREFIX))] = lease.holder
        return held

    def live(self) -> dict[str, Replica]:
        return {n: r for n, r in self.replicas.items() if n not in self.killed}

    def partitioned(self, namespace: str, gone: frozenset[str] = frozenset()) -> bool:
        """Every shard held by one live replica, and each live replica judging exactly
        the policy's pods in its shards (so together: every pod, once); `gone`: the
        pods deleted (terminating: not judged)."""
        holders = self.holders()
        if set(holders) != set(range(SHARDS)) or not set(holders.values()) <= set(self.live()):
            return False
        pods = [p for p in self.fleets[namespace].pods if p.name not in gone]
        want = Counter(holders[shard_of(p.uid, SHARDS)] for p in pods)
        got = {n: r.watched(f"{namespace}/writers") for n, r in self.live().items()}
        return all(got[n] == want.get(n, 0) for n in got)

    def status(self, namespace: str) -> dict[str, Any]:
        done = self.cluster.kubectl("get", "phpolicy", "writers", "-n", namespace, "-o", "json")
        status: dict[str, Any] = json.loads(done.stdout).get("status") or {}
        return status

    def counts_every_pod(self, namespace: str) -> bool:
        """Whether the policy's status counts every pod of the fleet, healthy."""
        status = self.status(namespace)
        counts = status.get("verdictCounts") or {}
        return bool(
            status.get("watched") == PODS_PER_POLICY and counts.get("healthy") == PODS_PER_POLICY
        )

    def events(self, namespace: str, reason: str) -> list[dict[str, Any]]:
        done = self.cluster.kubectl(
            "get", "events", "-n", namespace, f"--field-selector=reason={reason}", "-o", "json"
        )
        items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
        return items

    def deleted(self, namespace: str) -> list[str]:
        """Names of the pods the operator deleted in `namespace` (audit log), repeats kept."""
        time.sleep(0.3)  # batched audit writes
        return [
            e["objectRef"]["name"]
            for e in self.cluster.audit_events()
            if e["user"]["username"] == OPERATOR_USER
            and e["verb"] == "delete"
            and e.get("objectRef", {}).get("resource") == "pods"
            and e["objectRef"].get("namespace") == namespace
        ]

    def any_run(self) -> OperatorRun:
        return next(iter(self.live().values())).run


@pytest.fixture(scope="module")
def sharded(
    cluster: LocalCluster, release: HelmRelease, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Sharded]:
    before = release.values
    release.upgrade(SHARDING)
    for node in NODES:
        ensure_node(cluster, node)
    workdir = tmp_path_factory.mktemp("sharding")
    fleets: dict[str, Fleet] = {}
    with ExitStack() as stack:
        stack.callback(release.upgrade, before)
        stack.callback(
            cluster.kubectl, "delete", "leases", "-n", NAMESPACE, "-l", "hangwatch.dev/lease"
        )
        replicas = {}
        for index in range(3):
            name = f"hangwatch-operator-s{index}"
            port = {} if index == 0 else {"HANGWATCH_OPERATOR_WEBHOOK_PORT": str(free_port())}
            run, command = stack.enter_context(running_operator(cluster, workdir, name, (), **port))
            replicas[name] = Replica(name, run, command.metrics_port)
        for replica in replicas.values():
            replica.run.wait_for_log("Activity 'start_remediation' succeeded")
        state = Sharded(cluster, replicas, fleets, set())
        state.any_run().wait_for(
            "every shard held, by three replicas",
            lambda: len(h := state.holders()) == SHARDS and len(set(h.values())) == 3,
        )
        for namespace, spec in (
            (
                RATE_CAPPED,
                {"safety": {"maxActionsPerApplicationPerHour": 2, "maxConcurrent": 10}},
            ),
            (FREE, {}),
        ):
            nodes = [NODES[i % len(NODES)] for i in range(PODS_PER_POLICY)]
            fleet = launch(cluster, namespace, nodes, release.sidecar_port, spec)
            stack.callback(fleet.close)
            fleets[namespace] = fleet
        yield state


def test_every_pod_is_judged_by_exactly_one_replica(sharded: Sharded) -> None:
    for namespace in (RATE_CAPPED, FREE):
        sharded.any_run().wait_for(
            f"the pods of {namespace} partitioned among the replicas' shards",
            functools.partial(sharded.partitioned, namespace),
        )
        counts = {n: r.watched(f"{namespace}/writers") for n, r in sharded.replicas.items()}
        assert sum(counts.values()) == PODS_PER_POLICY, counts
        assert all(c > 0 for c in counts.values()), counts  # three replicas share the work
        sharded.any_run().wait_for(
            f"the status of {namespace}'s policy counting the whole fleet",
            functools.partial(sharded.counts_every_pod, namespace),
        )
        (ready,) = [c for c in sharded.status(namespace)["conditions"] if c["type"] == "Ready"]
        assert "by 2 other replica(s)" in ready["message"], ready


def test_the_rate_limit_holds_across_replicas(sharded: Sharded) -> None:
    holders = sharded.holders()
    by_replica: dict[str, list[RunningPod]] = {}
    for pod in sharded.fleets[RATE_CAPPED].pods:
        by_replica.setdefault(holders[shard_of(pod.uid, SHARDS)], []).append(pod)
    assert len(by_replica) == 3, by_replica.keys()
    hung = [pod for pods in by_replica.values() for pod in pods[:2]]  # 2 on each replica
    set_verdicts(hung, Verdict.PRODUCER_HUNG)
    run = sharded.any_run()
    run.wait_for("two hung pods deleted", lambda: len(sharded.deleted(RATE_CAPPED)) >= 2)
    run.wait_for(
        "every hung pod decided (deleted, or suppressed by the rate limit)",
        lambda: (
            (
                {
                    e["involvedObject"]["name"]
                    for e in sharded.events(RATE_CAPPED, "HangwatchSuppressed")
                }
                | set(sharded.deleted(RATE_CAPPED))
            )
            >= {p.name for p in hung}
        ),
    )
    time.sleep(3 * RENEW_SECONDS)  # a few more rounds on every replica
    deleted = sharded.deleted(RATE_CAPPED)
    assert len(deleted) == 2 and set(deleted) <= {p.name for p in hung}, deleted
    suppressed = sharded.events(RATE_CAPPED, "HangwatchSuppressed")
    assert any("maxActionsPerApplicationPerHour 2" in e["message"] for e in suppressed), [
        e["message"] for e in suppressed
    ]
    restarts = Counter(
        e["involvedObject"]["name"] for e in sharded.events(RATE_CAPPED, "HangwatchRestart")
    )
    assert set(restarts) == set(deleted) and set(restarts.values()) == {1}, restarts


def test_max_concurrent_holds_across_replicas(sharded: Sharded) -> None:
    # a shard may be between holders (handed to its preferred replica): wait for all
    sharded.any_run().wait_for(
        "every shard held", lambda: set(sharded.holders()) == set(range(SHARDS))
    )
    holders = sharded.holders()
    fleet = sharded.fleets[FREE]
    first_of: dict[str, RunningPod] = {}
    for pod in fleet.pods:
        first_of.setdefault(holders[shard_of(pod.uid, SHARDS)], pod)
    hung = list(first_of.values())[:2]  # judged by two replicas
    set_verdicts(hung, Verdict.PRODUCER_HUNG)
    run = sharded.any_run()
    run.wait_for("one hung pod deleted", lambda: len(sharded.deleted(FREE)) >= 1)
    (gone,) = sharded.deleted(FREE)
    (waiting,) = [p for p in hung if p.name != gone]
    run.wait_for(
        "the other suppressed: a restart in progress on another replica's pod",
        lambda: any(
            e["involvedObject"]["name"] == waiting.name
            and "on other replicas' pods (maxConcurrent 1)" in e["message"]
            for e in sharded.events(FREE, "HangwatchSuppressed")
        ),
    )
    time.sleep(3 * RENEW_SECONDS)  # a few more rounds on every replica
    assert sharded.deleted(FREE) == [gone]
    # Leave no restart in progress nor a hung pod for the next test.
    set_verdicts([waiting], Verdict.HEALTHY)
    sharded.cluster.kubectl(
        "delete", "pod", "-n", FREE, gone, "--grace-period=0", "--force", "--wait=true"
    )


# Found under CI load, twice: after the SIGKILL, a few fake sidecars' accepted sockets
# from the killed replica were garbage-collected unclosed (ResourceWarning at this test's
# teardown). CPython 3.11's `_accept_connection2` swallows an error while it builds the
# transport of a connection and never closes its socket; not proven to be the path, and
# open in the note. The takeover is what this test checks; the leaked sockets are
# collected here, inside this filter, not in whichever test runs next.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_killed_replicas_shards_are_taken_over(sharded: Sharded) -> None:
    victim_name = "hangwatch-operator-s1"
    victim = sharded.replicas[victim_name]
    before = sharded.holders()
    theirs = {s for s, h in before.items() if h == victim_name}
    assert theirs
    victim.run.process.kill()  # SIGKILL: no release of its Leases
    victim.run.process.wait(10)
    killed_at = time.monotonic()
    sharded.killed.add(victim_name)
    run = sharded.any_run()
    run.wait_for(
        "every shard held by the two live replicas",
        lambda: set(h := sharded.holders()) == set(range(SHARDS)) and victim_name not in h.values(),
    )
    took = time.monotonic() - killed_at
    print(f"shards {sorted(theirs)} of the killed replica taken over in {took:.1f} s")
    for namespace in (RATE_CAPPED, FREE):
        run.wait_for(
            f"the pods of {namespace} judged by the two live replicas",
            functools.partial(
                sharded.partitioned, namespace, frozenset(sharded.deleted(namespace))
            ),
        )
    # A pod of the killed replica's shards that hangs now is restarted by its new holder.
    fleet = sharded.fleets[FREE]
    earlier = sharded.deleted(FREE)  # by test_max_concurrent_holds_across_replicas
    restarted = [e["involvedObject"]["name"] for e in sharded.events(FREE, "HangwatchRestart")]
    (orphan, *_) = [
        p for p in fleet.pods if shard_of(p.uid, SHARDS) in theirs and p.name not in earlier
    ]
    set_verdicts([orphan], Verdict.PRODUCER_HUNG)
    run.wait_for("the orphaned hung pod deleted", lambda: orphan.name in sharded.deleted(FREE))
    time.sleep(3 * RENEW_SECONDS)
    assert sharded.deleted(FREE) == [*earlier, orphan.name]
    restarts = [e["involvedObject"]["name"] for e in sharded.events(FREE, "HangwatchRestart")]
    assert sorted(restarts) == sorted([*restarted, orphan.name])
    assert took <= LEASE_SECONDS + RENEW_SECONDS + 2 * RENEW_SECONDS, took
    gc.collect()  # see the filter above
