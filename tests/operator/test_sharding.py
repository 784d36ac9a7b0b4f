"""Shards of the watched pods among replicas, owned through Leases: the pure rules.

Covers `sharding`: `shard_of` is stable and in range, and spreads uids evenly;
`preferred_holder` picks one of the live replicas and moves only the shards of a
replica that leaves; `holds` trusts a Lease only while it names the replica and is
younger than its duration minus the clock margin.

Hypothesis: for any uids and any Leases, a pod is judged by at most one replica;
a simulation of replicas following `plan_leases` against an API server that lets one
writer win each Lease update (all replicas read, then all write, in any order, with
clocks apart by less than the margin), with replicas killed and started at any steps:
no shard is ever held by two live replicas at once, none is left without a live holder
longer than one Lease duration plus two renewal steps after the last kill (a replica
joining costs a shard at most one step), and once nothing changes every shard is held
by exactly one live replica.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_operator.sharding import (
    CLOCK_MARGIN_SECONDS,
    Lease,
    Step,
    holds,
    owned,
    plan_leases,
    preferred_holder,
    shard_of,
)

SHARDS = 8
DURATION = 15.0
STEP_SECONDS = 2.0
"""Each replica runs `plan_leases` this often (a renewal step)."""


def test_shard_of_is_stable_in_range_and_even() -> None:
    uids = [f"uid-{i}" for i in range(8000)]
    counts = Counter(shard_of(uid, SHARDS) for uid in uids)
    assert set(counts) == set(range(SHARDS))
    assert max(counts.values()) < 1.2 * 8000 / SHARDS
    assert [shard_of(u, SHARDS) for u in uids[:50]] == [shard_of(u, SHARDS) for u in uids[:50]]
    with pytest.raises(ValueError, match="at least 1"):
        shard_of("x", 0)


def test_a_replica_leaving_moves_only_its_own_shards() -> None:
    three = {s: preferred_holder(s, ["a", "b", "c"]) for s in range(64)}
    two = {s: preferred_holder(s, ["a", "b"]) for s in range(64)}
    assert {s for s in range(64) if three[s] != two[s]} == {s for s in range(64) if three[s] == "c"}
    assert preferred_holder(0, []) is None


def test_a_lease_is_trusted_until_its_duration_minus_the_margin() -> None:
    lease = Lease("a", renewed=100.0, duration=DURATION)
    assert holds("a", lease, 100.0 + DURATION - CLOCK_MARGIN_SECONDS - 0.01)
    assert not holds("a", lease, 100.0 + DURATION - CLOCK_MARGIN_SECONDS)
    assert not holds("b", lease, 101.0)
    assert not lease.free(100.0 + DURATION - 0.01) and lease.free(100.0 + DURATION)
    assert Lease("", 100.0, DURATION).free(100.0)


@settings(max_examples=200)
@given(
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=30),
    st.dictionaries(
        st.integers(0, SHARDS - 1),
        st.builds(Lease, st.sampled_from(["", "a", "b", "c"]), st.floats(0, 100), st.just(15.0)),
    ),
    st.floats(0, 130),
)
def test_any_pod_is_judged_by_at_most_one_replica(
    uids: list[str], leases: dict[int, Lease], now: float
) -> None:
    for uid in uids:
        judges = [r for r in ("a", "b", "c") if shard_of(uid, SHARDS) in owned(r, leases, now)]
        assert len(judges) <= 1


@dataclass
class Replica:
    name: str
    skew: float
    alive: bool = True
    mine: dict[int, float] = field(default_factory=dict)
    """Shards whose Lease this replica wrote last, with the renewTime it wrote."""

    def judges(self, shard: int, now: float) -> bool:
        renewed = self.mine.get(shard)
        return (
            self.alive
            and renewed is not None
            and holds(self.name, Lease(self.name, renewed, DURATION), now + self.skew)
        )


@dataclass
class Server:
    """Leases with a version each; an update wins only against the version it read."""

    leases: dict[int, tuple[Lease, int]] = field(default_factory=dict)
    members: dict[str, float] = field(default_factory=dict)

    def write(self, shard: int, lease: Lease, read_version: int) -> bool:
        current = self.leases.get(shard, (None, 0))[1]
        if current != read_version:
            return False
        self.leases[shard] = (lease, current + 1)
        return True


def run_step(server: Server, replicas: list[Replica], order: list[int], now: float) -> None:
    alive = [r for r in replicas if r.alive]
    for replica in alive:
        server.members[replica.name] = now + replica.skew
    reads = {
        r.name: (dict(server.leases), {m for m, t in server.members.items() if now < t + DURATION})
        for r in alive
    }
    turns = sorted(range(len(alive)), key=lambda i: (order[i % len(order)], i))
    for replica in (alive[i] for i in turns):  # every live replica, in the drawn order
        read, live = reads[replica.name]
        clock = now + replica.skew
        leases = {s: lease for s, (lease, _) in read.items()}
        for shard, step in plan_leases(replica.name, live, leases, SHARDS, clock).items():
            version = read.get(shard, (None, 0))[1]
            if step is Step.RELEASE:
                replica.mine.pop(shard, None)  # stops judging first, then clears the Lease
                server.write(shard, Lease("", clock, DURATION), version)
            elif server.write(shard, Lease(replica.name, clock, DURATION), version):
                replica.mine[shard] = clock
            else:
                replica.mine.pop(shard, None)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["step", "step", "step", "kill", "start"]),
        st.lists(st.integers(0, 5), min_size=1, max_size=5),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150)
@given(EVENTS, st.lists(st.floats(-0.9, 0.9), min_size=6, max_size=6))
def test_replicas_following_plan_leases_hold_every_shard_once(
    events: list[tuple[str, list[int]]], skews: list[float]
) -> None:
    server = Server()
    replicas = [Replica(f"r{i}", skews[i]) for i in range(3)]
    now = 0.0
    last_kill = 0.0
    unheld_since: dict[int, float] = {}

    def check() -> None:
        live = [r for r in replicas if r.alive]
        for shard in range(SHARDS):
            judges = [r.name for r in live if r.judges(shard, now)]
            assert len(judges) <= 1, (shard, judges, now)
            if judges or not live:
                unheld_since.pop(shard, None)
            else:
                began = max(unheld_since.setdefault(shard, now), last_kill)
                assert now - began <= DURATION + 2 * STEP_SECONDS, (shard, began, now)

    for kind, order in events:
        if kind == "kill":
            live = [r for r in replicas if r.alive]
            if len(live) > 1:
                live[order[0] % len(live)].alive = False
                last_kill = now
        elif kind == "start" and len(replicas) < 6:
            replicas.append(Replica(f"r{len(replicas)}", skews[len(replicas)]))
        now += STEP_SECONDS
        run_step(server, replicas, order, now)
        check()
    for _ in range(int(2 * DURATION / STEP_SECONDS) + 2):  # nothing changes any more
        now += STEP_SECONDS
        run_step(server, replicas, [0, 1, 2, 3, 4, 5], now)
        check()
    live = [r for r in replicas if r.alive]
    for shard in range(SHARDS):
        judges = [r.name for r in live if r.judges(shard, now)]
        assert judges == [preferred_holder(shard, [r.name for r in live])], (shard, judges)
