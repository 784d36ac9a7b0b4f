"""Shards of the watched pods among operator replicas, owned through Leases: pure rules.

Wired by `replica_leases` (the I/O: list, create and replace the Leases) when the
operator's `shards` setting is above 0; tested on their own (tests/operator/
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

- Which replicas are live: each replica renews a Lease of its own
  (`member_lease_name`) every step; one not renewed for its duration is gone
  (`live_replicas`). The same Lease carries the replica's tally per policy (pods it
  judged, unhealthy ones: `encode_tally`), which the others add to theirs, so the
  unhealthy share is the cluster's, not one replica's; and its pods per verdict
  (`COUNTS_ANNOTATION`, `encode_counts`), which the writer of each policy's status adds
  to its own, so the status describes the whole fleet.
- Leases are read from and written as API bodies with `read_lease` and `lease_body`.

Pure: times come in as arguments; nothing reads the cluster or the clock.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hangwatch_operator.watched import parse_time

LEASE_PREFIX = "hangwatch-shard-"
MEMBER_PREFIX = "hangwatch-replica-"
LEASE_LABEL = "hangwatch.dev/lease"
"""Label of every Lease hangwatch's replicas use; its value is one of `LeaseKind`."""
TALLY_ANNOTATION = "hangwatch.dev/tally"
"""On a replica's own Lease: `{"<namespace>/<policy>": [judged, unhealthy]}`."""
COUNTS_ANNOTATION = "hangwatch.dev/verdict-counts"
"""On a replica's own Lease: `{"<namespace>/<policy>": {"<verdict>": pods, ...}}`, the
policy's `status.verdictCounts` over the pods that replica judged."""
TALLY_MAX_POLICIES = 1000
COUNTS_MAX_KEYS = 32
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


def member_lease_name(identity: str) -> str:
    return f"{MEMBER_PREFIX}{identity}"


class LeaseKind(enum.StrEnum):
    SHARD = "shard"
    REPLICA = "replica"
    LIMITS = "limits"
    """The one Lease whose annotation is the cluster-wide ledger of disruptive
    operations (`limits_ledger`); never held, only updated with compare-and-swap."""


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


def read_lease(body: Any) -> Lease | None:
    """A Lease from its API body; None when its spec is not one hangwatch can trust
    (no renewTime or duration: free for the taking, as an expired one)."""
    spec = body.get("spec") if isinstance(body, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    renewed = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    holder = spec.get("holderIdentity") or ""
    if renewed is None or not isinstance(duration, int) or not isinstance(holder, str):
        return None
    return Lease(holder, renewed, float(duration))


def microtime(seconds: float) -> str:
    """A Lease's MicroTime (RFC 3339, microseconds, UTC)."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(
    name: str,
    kind: LeaseKind,
    holder: str,
    now: float,
    duration: int,
    *,
    resource_version: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The body to create a Lease, or with `resource_version` to replace it only if no one
    wrote it since it was read (the API server answers 409 otherwise)."""
    metadata: dict[str, Any] = {"name": name, "labels": {LEASE_LABEL: str(kind)}}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"leaseDurationSeconds": duration, "renewTime": microtime(now)}
    spec["holderIdentity"] = holder
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def live_replicas(members: Mapping[str, Lease], now: float) -> frozenset[str]:
    """The replicas whose own Lease is not expired (`members`: identity -> its Lease)."""
    return frozenset(identity for identity, lease in members.items() if not lease.free(now))


Tally = tuple[int, int]
"""(pods judged, of which unhealthy) of one policy by one replica."""


def encode_tally(tallies: Mapping[str, Tally]) -> str:
    return json.dumps(
        {key: list(value) for key, value in sorted(tallies.items())}, separators=(",", ":")
    )


def decode_tally(text: object) -> dict[str, Tally]:
    """A replica's published tally; anything malformed is left out (never raises)."""
    tallies: dict[str, Tally] = {}
    for key, value in _per_policy(text):
        if (
            isinstance(value, list)
            and len(value) == 2
            and all(type(v) is int and v >= 0 for v in value)
            and value[1] <= value[0]
        ):
            tallies[key] = (value[0], value[1])
    return tallies


def _per_policy(text: object) -> list[tuple[str, Any]]:
    """The (policy, value) pairs of an annotation holding a JSON object, at most
    `TALLY_MAX_POLICIES`; none when it is not one."""
    if not isinstance(text, str):
        return []
    try:
        raw = json.loads(text)
    except ValueError:
        return []
    return list(raw.items())[:TALLY_MAX_POLICIES] if isinstance(raw, dict) else []


def summed(tallies: Iterable[Mapping[str, Tally]], policy_key: str) -> Tally:
    """Pods judged and unhealthy for `policy_key` over `tallies`."""
    judged = unhealthy = 0
    for tally in tallies:
        found = tally.get(policy_key, (0, 0))
        judged += found[0]
        unhealthy += found[1]
    return judged, unhealthy


Counts = dict[str, int]
"""Pods per verdict (and `sidecar_unreachable`) of one policy by one replica."""


def encode_counts(counts: Mapping[str, Mapping[str, int]]) -> str:
    return json.dumps(
        {key: dict(value) for key, value in sorted(counts.items())}, separators=(",", ":")
    )


def decode_counts(text: object) -> dict[str, Counts]:
    """A replica's published verdict counts; anything malformed is left out (never raises)."""
    out: dict[str, Counts] = {}
    for key, value in _per_policy(text):
        if isinstance(value, dict) and len(value) <= COUNTS_MAX_KEYS:
            out[key] = {k: v for k, v in value.items() if type(v) is int and v >= 0}
    return out


def summed_counts(counts: Iterable[Mapping[str, Counts]], policy_key: str) -> Counts:
    """Pods per verdict for `policy_key` over `counts`."""
    total: Counts = {}
    for published in counts:
        for verdict, pods in published.get(policy_key, {}).items():
            total[verdict] = total.get(verdict, 0) + pods
    return total
