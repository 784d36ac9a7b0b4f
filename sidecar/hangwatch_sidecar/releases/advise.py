"""Advisories: the client releases seen in the pod that have a published hang (pure).

Fed by the sidecar's loop with every `Sighting` of the round (the producers' telemetry,
Spark's classpath, the processes holding the pod's connections to brokers); returns one
`Advisory` per release and hang of `hangwatch.known_hangs`, with every place it was
seen. An advisory is said in /status (`advisories`) and by `hangwatch check`: it never
changes a verdict and never causes an action (the release may never meet its trigger).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hangwatch.known_hangs import KnownHang, advice_line, releases_of
from hangwatch_sidecar.releases.read import Sighting

MAX_SOURCES = 8
"""Places one advisory names at most."""
MAX_ADVISORIES = 32
"""Advisories of one pod at most."""


@dataclass(frozen=True)
class Advisory:
    """A release seen in the pod and one published hang it has."""

    client: str
    version: str
    hang: KnownHang
    seen_in: tuple[str, ...]

    @property
    def line(self) -> str:
        """One line: the release, the hang, its fix and report, where it was seen."""
        hang = self.hang
        advice = advice_line(self.client, self.version, hang.id, hang.what, hang.fixed, hang.report)
        return f"{advice}, seen in {', '.join(self.seen_in)}"


def advise(sightings: Iterable[Sighting]) -> tuple[Advisory, ...]:
    """One advisory per (client, release, hang) among `sightings`, in a stable order."""
    seen: dict[tuple[str, str, str], tuple[KnownHang, list[str]]] = {}
    for sighting in sightings:
        for hang in releases_of(sighting.client, sighting.version):
            key = (sighting.client, sighting.version, hang.id)
            _, sources = seen.setdefault(key, (hang, []))
            if sighting.source not in sources and len(sources) < MAX_SOURCES:
                sources.append(sighting.source)
    return tuple(
        Advisory(client, version, hang, tuple(sources))
        for (client, version, _), (hang, sources) in sorted(seen.items())
    )[:MAX_ADVISORIES]
