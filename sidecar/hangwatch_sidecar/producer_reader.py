"""The producers of the pod, as their telemetry files show them, round after round.

`ProducerReader.read` scans the telemetry directory (`telemetry_reader.scan`, bounded
in bytes and files), skips producers that exited without closing (their lock is free:
logged once, ignored) and files nobody has touched for ten heartbeats, turns an
unusable file into a producer of unknown health, and hands each usable document to the
`ProducerTracker` (progress and waits across rounds); it keeps each producer's stated
configuration (for the time-to-error budget) and counts telemetry problems by kind.
`with_disagreement` adds how long each producer's partition leaders have disagreed with
the cluster's metadata.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

from hangwatch_sidecar import budget, telemetry_reader
from hangwatch_sidecar.evidence import ClusterObservation, ProducerObservation
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.telemetry.judge import leader_disagreements
from hangwatch_sidecar.tracking import ProducerTracker

log = logging.getLogger(__name__)


class ProducerReader:
    """The tracking state of the pod's producers between rounds."""

    def __init__(self, settings: SidecarSettings, wall: Callable[[], float]) -> None:
        self.settings = settings
        self.wall = wall
        self.tracker = ProducerTracker()
        self.telemetry_problems: Counter[str] = Counter()
        self.configs: dict[str, Mapping[str, budget.ConfigValue] | None] = {}
        """Each producer's configuration as its latest telemetry states it."""
        self.disagreeing_since: dict[str, float] = {}
        """Per producer, since when its leaders disagree with the cluster's (none: agree)."""
        self._exited: set[str] = set()
        """Producers seen exited whose files are still there (logged once each)."""

    def read(self, now: float) -> list[ProducerObservation]:
        """This round's observation of each producer whose telemetry counts."""
        s = self.settings
        reads, problems = telemetry_reader.scan(
            s.telemetry_path, s.telemetry_max_bytes, s.max_producers
        )
        for problem in problems:
            self.telemetry_problems[str(problem.kind)] += 1
        observations: list[ProducerObservation] = []
        present: set[str] = set()
        self.configs = {}
        for read in reads:
            if read.alive is False:
                self._note_exited(read.key)
                continue
            if read.alive is None and self.wall() - read.mtime > 10 * s.heartbeat_seconds:
                continue
            present.add(read.key)
            if read.doc is None:
                self.telemetry_problems[str(read.kind)] += 1
                observations.append(_unusable(read.key, read.alive, read.problem or "unusable"))
                continue
            observations.append(
                self.tracker.observe(read.key, read.doc, read.alive, now, self.wall())
            )
            self.configs[read.key] = read.doc.config
        self.tracker.forget(present)
        self._exited &= {read.key for read in reads}
        return observations

    def with_disagreement(
        self, cluster: ClusterObservation, producers: list[ProducerObservation], now: float
    ) -> list[ProducerObservation]:
        """Each producer with how long its leaders have disagreed with the cluster's."""
        since: dict[str, float] = {}
        out = []
        for p in producers:
            if leader_disagreements(p, cluster):
                since[p.key] = self.disagreeing_since.get(p.key, now)
                out.append(replace(p, disagreeing_seconds=now - since[p.key]))
            else:
                out.append(p)
        self.disagreeing_since = since
        return out

    def _note_exited(self, key: str) -> None:
        """A producer whose lock is free exited without removing its files: ignored (and
        forgotten), logged once; the next producer opening in the directory removes them."""
        if key not in self._exited:
            self._exited.add(key)
            log.info(
                "producer exited without closing: its telemetry is ignored",
                extra={"producer": key},
            )


def _unusable(key: str, alive: bool | None, problem: str) -> ProducerObservation:
    """A producer whose file cannot be read: no facts, only the `problem`."""
    return ProducerObservation(
        key=key,
        pid=0,
        alive=alive,
        pending=0,
        delivered_total=0,
        failed_total=0,
        topics=frozenset(),
        heartbeat_age_seconds=0.0,
        progress_age_seconds=None,
        pending_seconds=0.0,
        failing_seconds=0.0,
        problem=problem,
    )
