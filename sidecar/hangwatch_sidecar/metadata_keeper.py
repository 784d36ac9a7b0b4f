"""The sidecar's cluster metadata: one kept metadata client, and when to ask it.

`MetadataKeeper.due` says whether a round fetches metadata: the first round; every
metadata interval; at once when anything looks wrong (a broker failing, a partition
leaderless, the last fetch failed), when a producer's leaders began to disagree with
ours after our last fetch (ours may be the old ones), and once when a producer's
messages have waited half the stall threshold since before our last fetch (so that,
before any stall verdict, the sidecar knows whether the cluster has the topics at all).
`fetch` asks through the kept client, replaced after a failure or when brokers failed
last round (a kept client may still send to one of them); probe mode `fresh` takes a
new client every fetch. Every address the metadata ever advertised is remembered with
its node id, for naming brokers that left.

After a fetch, the same client asks DescribeConfigs for the `min.insync.replicas` of the
written topics the metadata lists (one request for all of them, at most
`MAX_DESCRIBED_TOPICS`) when a topic was never described, when its answer is older than
`CONFIGS_REFRESH_SECONDS`, or, while one of its partitions is under-replicated, older
than the metadata interval: a value that rarely changes costs one request every five
minutes, and is confirmed when it starts to matter. A failed answer is kept with why
(a missing ACL does not go away by asking every round) and asked again on the same
cadence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from hangwatch.acceptance import MinInsync
from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.probe.metadata import MetadataClient
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC, ClusterMetadata

log = logging.getLogger(__name__)

CONFIGS_REFRESH_SECONDS = 300.0
"""How long a topic's `min.insync.replicas`, as DescribeConfigs said it, is used before it
is asked again (sooner while a partition of the topic is under-replicated)."""


class MetadataKeeper:
    """The latest metadata, its error and age, and the client that fetched it."""

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        probe_settings: ProbeSettings,
        topics: Iterable[str],
        *,
        interval_seconds: float,
        stall_seconds: float,
        new_client_each_fetch: bool,
        wall: Callable[[], float],
    ) -> None:
        self.bootstrap = tuple(bootstrap)
        self.probe_settings = probe_settings
        self.topics = sorted(topics)
        self.interval_seconds = interval_seconds
        self.stall_seconds = stall_seconds
        self.new_client_each_fetch = new_client_each_fetch
        self.wall = wall
        self.metadata: ClusterMetadata | None = None
        self.known_nodes: dict[Endpoint, int] = {}
        """Every address the metadata ever advertised, with its node id (for naming)."""
        self.error: str | None = None
        self.fetched_at: float | None = None
        """The loop's clock at the start of the round whose fetch last got an answer (None:
        never): a failed fetch leaves it, so the metadata's age keeps growing."""
        self.fetched_ts: float | None = None
        """The wall clock when metadata was last received."""
        self.requests = 0
        self.clients = 0
        self.min_insync: dict[str, MinInsync] = {}
        """The written topics' `min.insync.replicas` as DescribeConfigs last said it."""
        self.described_at: dict[str, float] = {}
        """The loop's clock when each topic was last described."""
        self.describe_requests = 0
        self._client: MetadataClient | None = None

    def age_seconds(self, now: float) -> float | None:
        return None if self.fetched_at is None else now - self.fetched_at

    def due(
        self,
        now: float,
        previous: ClusterObservation | None,
        producers: Sequence[ProducerObservation] = (),
        disagreeing_since: Iterable[float] = (),
    ) -> bool:
        """Whether this round fetches (the module's docstring says when)."""
        fetched = self.fetched_at
        if fetched is None:
            return True
        half = self.stall_seconds / 2
        if any(
            p.pending > 0 and p.pending_seconds > half and fetched < now - p.pending_seconds
            for p in producers
        ):
            return True
        if now - fetched >= self.interval_seconds:
            return True
        if any(since > fetched for since in disagreeing_since):
            return True
        if previous is None:
            return False
        looks_wrong = bool(previous.failing) or bool(previous.leaderless_for(frozenset()))
        return looks_wrong or not previous.metadata_ok

    def fetch(self, now: float, fresh: bool = False, written: Iterable[str] = ()) -> None:
        """Metadata through the kept client; a new client after a failure, and when
        `fresh` (brokers failed last round); then the `written` topics' configs when due
        (`describe_due`)."""
        if fresh:
            self.close()
        try:
            if self._client is None:
                self._client = MetadataClient(self.bootstrap, self.probe_settings)
                self.clients += 1
            result = self._client.fetch(self.topics)
            self.requests += 1
        except Exception as exc:  # noqa: BLE001 - a failing client must not stop the loop
            self.close()
            self.error = f"metadata client failed: {type(exc).__name__}"
            log.warning("metadata fetch failed", extra={"error": str(exc)[:200]})
            return
        self.fetched_at = now
        if result.metadata is not None:
            self.metadata, self.fetched_ts = result.metadata, self.wall()
            self.known_nodes.update({b.endpoint: b.id for b in result.metadata.brokers})
            self._describe(now, frozenset(written))
        else:
            self.metadata = None
            self.close()
        if self.new_client_each_fetch:
            self.close()
        self.error = result.error or None

    def describe_due(self, now: float, written: frozenset[str]) -> list[str]:
        """The written topics the metadata lists whose `min.insync.replicas` is due (the
        module's docstring says when)."""
        listed = {
            t.name: t
            for t in (self.metadata.topics if self.metadata else ())
            if t.error != UNKNOWN_TOPIC
        }
        due = []
        for topic in sorted(written & listed.keys()):
            at = self.described_at.get(topic)
            doubt = any(p.under_replicated for p in listed[topic].partitions)
            if (
                at is None
                or now - at >= CONFIGS_REFRESH_SECONDS
                or (doubt and now - at >= self.interval_seconds)
            ):
                due.append(topic)
        return due

    def _describe(self, now: float, written: frozenset[str]) -> None:
        """Ask for the due topics' configs; forget topics no longer written."""
        for gone in set(self.min_insync) - written:
            self.min_insync.pop(gone, None)
            self.described_at.pop(gone, None)
        due = self.describe_due(now, written)
        if not due or self._client is None:
            return
        try:
            found = self._client.describe_min_insync(due)
        except Exception as exc:  # noqa: BLE001 - a failing client must not stop the loop
            problem = f"DescribeConfigs failed: {type(exc).__name__}"
            found = {t: MinInsync(None, problem=problem) for t in due}
        self.describe_requests += 1
        self.min_insync.update(found)
        self.described_at.update(dict.fromkeys(due, now))

    def close(self) -> None:
        """Close the kept client (the next fetch opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None
