"""Which partitions of the written topics the cluster refuses writes to, and why (pure).

Fed with one round's `ClusterObservation` (the written topics' partitions from the
metadata the sidecar already fetches: leader, replicas, ISR, error; and each topic's
`min.insync.replicas` from DescribeConfigs, `metadata_keeper`). For each written topic
it says which partitions refuse a producer's writes for the cluster's own reason:

- `below`: the ISR is smaller than `min.insync.replicas` (`hangwatch.acceptance.refuses`):
  every `acks=all` write is answered NOT_ENOUGH_REPLICAS (a broker stopped for
  maintenance, a follower fallen behind; or a `min.insync.replicas` above the
  replication factor, which refuses every such write for good);
- `storage`: the metadata names KAFKA_STORAGE_ERROR for the partition (its leader's log
  directory failed; confluent-kafka's metadata carries no offline-replica list, so this
  and the producers' own reports are what shows it);
- `in_doubt`: the topic's `min.insync.replicas` is not known (DescribeConfigs refused by
  an ACL, a broker without it, no answer yet) and the ISR is smaller than the replicas:
  the cluster may refuse `acks=all` writes there. Not a finding on its own (it is no
  proof of a refusal): the verdict takes it only where a producer is stuck, so that a
  restart is held back and no alert is raised for every under-replicated partition.

Partitions without a leader are left to the election rule (`leader_election`). The
verdict engine's `partitions_unwritable` rule and /status read this module;
`hangwatch probe` reads the same judgement of its own metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hangwatch.acceptance import MIN_INSYNC_FROM_TOPIC, MinInsync, refuses
from hangwatch.wire import status
from hangwatch_sidecar.probe.types import PartitionState

STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
"""librdkafka's (and Apache Kafka's) name of a partition whose leader's log directory failed."""

SHOWN = 10
"""Partitions and brokers a reason lists at most (the rest are counted)."""


@dataclass(frozen=True)
class TopicAcceptance:
    """One written topic: its partitions and what the cluster accepts there."""

    topic: str
    partitions: tuple[PartitionState, ...]
    min_insync: MinInsync | None
    """None: DescribeConfigs has not been asked for the topic yet."""

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def below(self) -> tuple[PartitionState, ...]:
        """Partitions with a leader whose ISR is below `min.insync.replicas`."""
        need = self.min_insync.value if self.min_insync is not None else None
        if need is None:
            return ()
        return tuple(p for p in self.partitions if not p.leaderless and refuses(len(p.isr), need))

    @property
    def storage(self) -> tuple[PartitionState, ...]:
        """Partitions the metadata says KAFKA_STORAGE_ERROR for."""
        return tuple(p for p in self.partitions if p.error == STORAGE_ERROR)

    @property
    def in_doubt(self) -> tuple[PartitionState, ...]:
        """Under-replicated partitions with a leader, `min.insync.replicas` unknown."""
        if self.min_insync is not None and self.min_insync.known:
            return ()
        return tuple(p for p in self.partitions if not p.leaderless and p.under_replicated)

    @property
    def refused(self) -> tuple[PartitionState, ...]:
        """Partitions refusing `acks=all` writes (`below` or `storage`), by id."""
        return self.refusing(holds=True)

    def refusing(self, *, holds: bool) -> tuple[PartitionState, ...]:
        """Partitions refusing a producer's writes, by id: `storage`, and `below` when the
        producer `holds` to min.insync.replicas (`acks=all`)."""
        ids = {p.partition for p in (*(self.below if holds else ()), *self.storage)}
        return tuple(p for p in self.partitions if p.partition in ids)

    def out_of_isr(self, partitions: Iterable[PartitionState] | None = None) -> tuple[int, ...]:
        """The replicas that are not in the ISR of `partitions` (default: the refused and
        the doubtful ones): the brokers that left."""
        chosen = (*self.refused, *self.in_doubt) if partitions is None else tuple(partitions)
        return tuple(sorted({r for p in chosen for r in p.replicas if r not in p.isr}))


def acceptance(
    partitions: Mapping[str, Sequence[PartitionState]],
    min_insync: Mapping[str, MinInsync],
    topics: Iterable[str],
) -> list[TopicAcceptance]:
    """Each of `topics` the metadata lists, with its partitions and `min.insync.replicas`."""
    return [
        TopicAcceptance(t, tuple(partitions[t]), min_insync.get(t))
        for t in sorted(set(topics))
        if t in partitions
    ]


def ids_text(ids: Sequence[int]) -> str:
    """`partition 0` / `partitions 0, 1 and 4 more`."""
    shown = ", ".join(str(i) for i in ids[:SHOWN])
    more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return f"partition{'s' if len(ids) > 1 else ''} {shown}{more}"


def brokers_text(ids: Sequence[int], addresses: Mapping[int, str]) -> str:
    """`broker 3 (127.0.0.1:9094: refused)`, each broker as the probes last saw it."""
    named = [f"broker {b}" + (f" ({addresses[b]})" if b in addresses else "") for b in ids[:SHOWN]]
    more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return ", ".join(named) + more


def _isr_text(partitions: Sequence[PartitionState]) -> str:
    sizes = sorted({len(p.isr) for p in partitions})
    replicas = max(len(p.replicas) for p in partitions)
    size = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    first = partitions[0]
    example = f"; {first.partition}: {list(first.isr)} of {list(first.replicas)}"
    return f"ISR {size} of {replicas} replicas{example if len(partitions) == 1 else ''}"


def min_insync_text(known: MinInsync) -> str:
    """`min.insync.replicas 3 (the topic's own)` / `(the brokers' default)`."""
    whose = "the topic's own" if known.source == MIN_INSYNC_FROM_TOPIC else "the brokers' default"
    return f"min.insync.replicas {known.value} ({whose})"


def refused_reason(
    found: TopicAcceptance, addresses: Mapping[int, str], *, holds: bool = True
) -> str:
    """The sentence naming the refused partitions, the ISR against min.insync.replicas and
    the brokers out of the ISR (empty when none is refused); `holds`: for a producer held
    to min.insync.replicas (`acks=all`), else only a failed log directory refuses."""
    parts = []
    below, storage = (found.below if holds else ()), found.storage
    if below and found.min_insync is not None:
        ids = [p.partition for p in below]
        clause = (
            f"{ids_text(ids)} refuse acks=all writes: {_isr_text(below)}, below "
            f"{min_insync_text(found.min_insync)}"
        )
        if found.min_insync.value is not None and found.min_insync.value > found.replication_factor:
            clause += (
                f", above the replication factor {found.replication_factor}: no ISR can reach it"
            )
        parts.append(clause)
    if storage:
        parts.append(
            f"{ids_text([p.partition for p in storage])} answer {STORAGE_ERROR} (the leader's "
            "log directory failed)"
        )
    if not parts:
        return ""
    left = found.out_of_isr(found.refusing(holds=holds))
    gone = f"; out of the ISR: {brokers_text(left, addresses)}" if left else ""
    return f"topic {found.topic}: " + "; ".join(parts) + gone


def doubt_reason(found: TopicAcceptance, addresses: Mapping[int, str]) -> str:
    """The sentence for under-replicated partitions whose acceptance is not known."""
    doubtful = found.in_doubt
    if not doubtful:
        return ""
    why = found.min_insync.problem if found.min_insync is not None else "not asked yet"
    left = found.out_of_isr(doubtful)
    gone = f"; out of the ISR: {brokers_text(left, addresses)}" if left else ""
    return (
        f"topic {found.topic}: {ids_text([p.partition for p in doubtful])} under-replicated "
        f"({_isr_text(doubtful)}) and min.insync.replicas unknown ({why}): the cluster may "
        f"refuse acks=all writes there{gone}"
    )


def to_status(found: TopicAcceptance, addresses: Mapping[int, str]) -> status.TopicAcceptance:
    """The topic's acceptance as /status (and `hangwatch probe --json`) show it."""
    known = found.min_insync
    return status.TopicAcceptance(
        topic=found.topic,
        partitions=len(found.partitions),
        replication_factor=found.replication_factor,
        min_insync_replicas=None if known is None else known.value,
        source="" if known is None else known.source,
        problem="not asked yet" if known is None else known.problem or None,
        unwritable=[p.partition for p in found.refused],
        in_doubt=[p.partition for p in found.in_doubt],
        out_of_isr=list(found.out_of_isr()),
        reason=refused_reason(found, addresses) or doubt_reason(found, addresses),
    )
