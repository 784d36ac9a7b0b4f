"""Turns probe results into the verdict engine's `ClusterObservation` (pure).

Fed by the loop with the endpoint probes of this round and the latest cluster
metadata (which may be older: metadata is fetched on a slower cadence). Leaderless
partitions and topics follow the one definition in `probe.types` (`is_leaderless`,
`ELECTION_ERRORS`), which `hangwatch probe` uses too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hangwatch.acceptance import MinInsync
from hangwatch_sidecar.evidence import BrokerObservation, ClusterObservation, TopicPartition
from hangwatch_sidecar.probe.settings import Endpoint
from hangwatch_sidecar.probe.types import (
    ELECTION_ERRORS,
    UNKNOWN_TOPIC,
    ClusterMetadata,
    EndpointProbe,
    PartitionState,
)


def _latency_ms(probe: EndpointProbe) -> float | None:
    stages = [probe.connect_ms, probe.tls_ms, probe.api_versions_ms]
    if probe.connect_ms is None:
        return None
    return round(sum(s for s in stages if s is not None), 3)


def observe_cluster(
    at: float,
    bootstrap: Sequence[Endpoint],
    probes: Sequence[EndpointProbe],
    metadata: ClusterMetadata | None,
    metadata_error: str | None = None,
    known_nodes: Mapping[Endpoint, int] | None = None,
    *,
    all_topics: bool = False,
    metadata_age_seconds: float | None = None,
    written: frozenset[str] = frozenset(),
    min_insync: Mapping[str, MinInsync] | None = None,
) -> ClusterObservation:
    """One round's observation from endpoint probes and the latest metadata.

    `known_nodes`: every address metadata ever advertised, with its node id. A broker
    that went down drops out of the metadata (as in Kafka) but keeps its name: its
    observation is not advertised, yet carries the node id it last had. `all_topics`:
    the metadata was asked for every topic (so a topic it does not list is absent);
    `metadata_age_seconds`: how long ago it was fetched; `written`: the topics the pod's
    producers write, whose partitions (replicas, ISR) and `min_insync` (DescribeConfigs)
    the observation keeps for judging the cluster's acceptance."""
    node_of = {b.endpoint: b.id for b in metadata.brokers} if metadata else {}
    former = known_nodes or {}
    boot = set(bootstrap)
    brokers = tuple(
        BrokerObservation(
            address=str(p.endpoint),
            reachability=p.reachability,
            node_id=node_of.get(p.endpoint, former.get(p.endpoint)),
            in_bootstrap=p.endpoint in boot,
            advertised=p.endpoint in node_of if metadata else True,
            latency_ms=_latency_ms(p),
            detail=p.detail,
        )
        for p in probes
    )
    leaders: dict[TopicPartition, int] = {}
    leaderless: set[TopicPartition] = set()
    leaderless_topics: set[str] = set()
    absent: set[str] = set()
    partitions: dict[str, tuple[PartitionState, ...]] = {}
    for topic in metadata.topics if metadata else ():
        if topic.error == UNKNOWN_TOPIC:
            absent.add(topic.name)
            continue
        if topic.name in written:
            partitions[topic.name] = topic.partitions
        if topic.error in ELECTION_ERRORS:
            leaderless_topics.add(topic.name)
        for part in topic.partitions:
            leaders[(topic.name, part.partition)] = part.leader
            if part.leaderless:
                leaderless.add((topic.name, part.partition))
    return ClusterObservation(
        at=at,
        brokers=brokers,
        metadata_ok=metadata is not None,
        leaders=leaders,
        leaderless=frozenset(leaderless),
        leaderless_topics=frozenset(leaderless_topics),
        error=metadata_error or None,
        absent_topics=frozenset(absent),
        listed_all_topics=all_topics and metadata is not None,
        listed_topics=frozenset(t.name for t in metadata.topics if t.name not in absent)
        if metadata
        else frozenset(),
        metadata_age_seconds=metadata_age_seconds if metadata else None,
        partitions=partitions,
        min_insync={t: m for t, m in (min_insync or {}).items() if t in written},
    )


def endpoints_to_probe(
    bootstrap: Sequence[Endpoint], metadata: ClusterMetadata | None
) -> list[Endpoint]:
    """Bootstrap entries first, then brokers the cluster advertises that are not in it."""
    known = list(dict.fromkeys(bootstrap))
    extra = (
        [b.endpoint for b in metadata.brokers if b.endpoint not in set(known)] if metadata else []
    )
    return known + extra
