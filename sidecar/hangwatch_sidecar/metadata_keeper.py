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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.probe.metadata import MetadataClient
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.probe.types import ClusterMetadata

log = logging.getLogger(__name__)


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

    def fetch(self, now: float, fresh: bool = False) -> None:
        """Metadata through the kept client; a new client after a failure, and when
        `fresh` (brokers failed last round)."""
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
        if self.new_client_each_fetch:
            self.close()
        if result.metadata is not None:
            self.metadata, self.fetched_ts = result.metadata, self.wall()
            self.known_nodes.update({b.endpoint: b.id for b in result.metadata.brokers})
        else:
            self.metadata = None
            self.close()
        self.error = result.error or None

    def close(self) -> None:
        """Close the kept client (the next fetch opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None
