"""Shards of the watched pods among operator replicas, owned through Leases: pure rules.

Not wired into the operator yet (one replica leads through kopf peering today); these
are the rules the replicas are to follow, tested on their own (tests/operator/
test_sharding.py), so that the I/O around them stays thin:

- A pod belongs to shard `shard_of(uid, shards)`: a stable hash of its uid, so every
  replica computes the same shard without talking to the others, and a pod never
  changes shard during its life.
- Shard `i` is owned through one coordination.k8s.io Lease (`lease_name`): a replica
  judges and remediates a pod only while `holds` says it holds the pod's shard's Lease,
  i.e. the Lease names it and, by its own clock, its last renewal is younger than the
  Lease's duration minus `CLOCK_MARGIN_SECONDS`. The API server lets one writer win
  each Lease update (resourceVersion preconditions), so two replicas never hold one
  Lease at once, and a replica stops trusting a Lease before anyone else may take it.
- Which live replica *should* hold a shard is `preferred_holder`: rendezvous hashing of
  (shard, replica), so each replica gets about `shards / replicas` shards and a replica
  joining or leaving moves only the shards it gains or loses.
- `plan_leases` is one replica's step (run every `renew_seconds`, well under the Lease
  duration): renew the Leases it holds and should hold; release the ones another live
  replica should hold (after its current round); acquire the ones it should hold that
  are free (released, or expired: their holder died). A dead replica's shards are
  therefore judged again at most one Lease duration plus one renewal step plus one
  poll interval after its last renewal.

Pure: times come in as arguments; nothing reads the cluster or the clock.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LEASE_PREFIX = "hangwatch-shard-"
CLOCK_MARGIN_SECONDS = 2.0
"""A holder stops trusting its Lease this long before it expires, so clocks that
differ by less between replicas never let two replicas judge one shard at once."""


def shard_of(uid: str, shards: int) -> int:
    """The shard of the pod with `uid` among `shards` (0 .. shards - 1)."""
    if shards < 1:
        raise ValueError("shards must be at least 1")
    digest = hashlib.sha256(uid.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def lease_name(shard: int) -> str:
    return f"{LEASE_PREFIX}{shard}"


def preferred_holder(shard: int, replicas: Iterable[str]) -> str | None:
    """The live replica that should hold `shard` (rendezvous hashing), None if none."""
    best: tuple[bytes, str] | None = None
    for replica in replicas:
        weight = hashlib.sha256(f"{shard}/{replica}".encode()).digest()
        if best is None or (weight, replica) > best:
            best = (weight, replica)
    return None if best is None else best[1]


@dataclass(frozen=True)
class Lease:
    """A shard's Lease as read from the API server (holder "" when released)."""

    holder: str
    renewed: float
    """spec.renewTime, unix seconds."""
    duration: float
    """spec.leaseDurationSeconds."""

    def free(self, now: float) -> bool:
        """No one may be judging the shard: released, or expired by `now`."""
        return not self.holder or now >= self.renewed + self.duration


def holds(identity: str, lease: Lease | None, now: float) -> bool:
    """Whether `identity` may judge and remediate the shard of `lease` at `now`."""
    if lease is None or lease.holder != identity:
        return False
    return now < lease.renewed + lease.duration - CLOCK_MARGIN_SECONDS


class Step(enum.StrEnum):
    ACQUIRE = "acquire"
    """Take a free Lease (update with the resourceVersion read: one replica wins)."""
    RENEW = "renew"
    RELEASE = "release"
    """Give the Lease up (holder cleared) after the current round: another replica
    should hold it."""


def plan_leases(
    identity: str,
    live: Iterable[str],
    leases: Mapping[int, Lease],
    shards: int,
    now: float,
) -> dict[int, Step]:
    """What `identity` does with each shard's Lease in this step (shards left out: nothing).

    `live`: the replicas believed alive (their own membership is outside these rules:
    e.g. a Lease per replica); `identity` counts as live. `leases`: every shard's Lease
    as last read (missing: never created, free)."""
    members = set(live) | {identity}
    steps: dict[int, Step] = {}
    for shard in range(shards):
        lease = leases.get(shard)
        preferred = preferred_holder(shard, members) == identity
        if lease is not None and lease.holder == identity and not lease.free(now):
            steps[shard] = Step.RENEW if preferred else Step.RELEASE
        elif preferred and (lease is None or lease.free(now)):
            steps[shard] = Step.ACQUIRE
    return steps


def owned(identity: str, leases: Mapping[int, Lease], now: float) -> frozenset[int]:
    """The shards `identity` may judge at `now`."""
    return frozenset(shard for shard, lease in leases.items() if holds(identity, lease, now))
