"""Runs passive-first probing: the socket view, kept probe connections, fresh connects.

Owned by the sidecar's loop, called once per round with the endpoints to watch. It
reads the pod's own connections to brokers (`sockets.reader` + `sockets.classify`),
lets `probing.plan_probes` (pure) choose each broker's probe, runs the probes
concurrently (no I/O for `passive` and `observed`, one ApiVersions on the kept
connection for `kept`, a new connection for `fresh`), and keeps what the next round
needs: the kept connections, each endpoint's memory, the broker address book the
socket view matches connections against, and counts of the connections and requests
the probes cost the brokers.

A round whose probes waited or failed (something is wrong) does not trust the passive
evidence taken at its start: it reads the socket view again, brokers whose pod
connections are blackholed by then are `timeout`, the others it skipped are probed now
(one ApiVersions on the kept connection), so every broker's state in a bad round is
fresh, as it was when every broker was probed every round.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from hangwatch.contracts import Reachability
from hangwatch_sidecar.probe.endpoints import probe_endpoint_and_keep, probe_kept_connection
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.probe.types import EndpointProbe
from hangwatch_sidecar.probing import (
    EndpointMemory,
    PlannedProbe,
    ProbeMode,
    passive_evidence,
    plan_probes,
)
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.sockets.classify import SocketClassifier, min_write_bytes
from hangwatch_sidecar.sockets.reader import Narrowing, SocketReader
from hangwatch_sidecar.sockets.types import SocketObservation
from hangwatch_sidecar.state import ProbeCounts

SECOND_LOOK_SECONDS = 0.25
"""A round longer than this reads the socket view again before judging the brokers it
skipped on passive evidence (a fault that began just before the round shows there)."""

_Kept = ssl.SSLSocket | socket.socket


class BrokerProber:
    """Probes of one sidecar, passive first; thread-safe for one round at a time."""

    def __init__(
        self,
        settings: SidecarSettings,
        probe_settings: ProbeSettings,
        tls: ssl.SSLContext | None,
        pool: ThreadPoolExecutor,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.probe_settings, self.tls = settings, probe_settings, tls
        self.pool, self.clock = pool, clock
        self.reader = (
            SocketReader(
                Narrowing(
                    settings.socket_port_set,
                    settings.socket_uid_set,
                    settings.socket_process_root,
                )
            )
            if settings.socket_view
            else None
        )
        self.classifier = SocketClassifier()
        self.addresses: dict[str, str] = {}
        """`ip:port` -> broker name (`host:port`), from every probe's DNS answer."""
        self.memory: dict[str, EndpointMemory] = {}
        self.kept: dict[str, _Kept] = {}
        self.keep = settings.probe_mode != "fresh" and not (
            probe_settings.security_protocol.startswith("SASL")
        )
        self.window = min(settings.passive_window_seconds, settings.probe_interval_seconds)
        self.connects: Counter[str] = Counter()
        """New probe connections per broker (fresh connects, failed ones included)."""
        self.requests: Counter[str] = Counter()
        """ApiVersions probe requests per broker."""
        self._lock = threading.Lock()
        self._own_failed_connects = 0
        self.fetch_floors: dict[str, int | None] = {}
        """Broker name -> the lowest Fetch version its last ApiVersions answer listed: how
        small a write to it can be (`sockets.classify.min_write_bytes`)."""

    # -- the socket view ---------------------------------------------------------------------
    def socket_view(self, now: float) -> SocketObservation | None:
        """This moment's view of the pod's connections to the brokers (None: switched off)."""
        if self.reader is None:
            return None
        snapshot = self.reader.snapshot(now, self.addresses.keys())
        with self._lock:
            own, self._own_failed_connects = self._own_failed_connects, 0
        brokers = set(self.addresses.values())
        return self.classifier.observe(
            snapshot,
            self.addresses,
            self.settings.stall_seconds,
            own_failed_connects=own,
            smallest_write=min_write_bytes(self.fetch_floors.get(b) for b in brokers),
        )

    # -- a round -----------------------------------------------------------------------------
    def probe(
        self, endpoints: Sequence[Endpoint], started: float
    ) -> tuple[list[EndpointProbe], dict[str, str], SocketObservation | None]:
        """Every endpoint's probe this round, the brokers judged passively (name -> why), and
        the socket view the verdict should weigh (the freshest taken)."""
        view = self.socket_view(started)
        targets = {str(e): e for e in endpoints}
        plans = plan_probes(
            list(targets),
            self.memory,
            passive_evidence(view, self.window),
            now=started,
            mode=self.settings.probe_mode,
            fresh_connect_interval_seconds=self.settings.fresh_connect_interval_seconds,
            keep_connections=self.keep,
        )
        futures = [
            self.pool.submit(self._probe_one, targets[p.endpoint], p, started) for p in plans
        ]
        probes = [f.result() for f in futures]
        passive = {p.endpoint: p.why for p in plans if p.mode is ProbeMode.PASSIVE}
        waited = self.clock() - started > SECOND_LOOK_SECONDS
        if passive and view is not None and (waited or not all(p.ok for p in probes)):
            view = self.socket_view(self.clock())
            probes = self._second_look(probes, passive, view, started)
        for probe in probes:
            for address in probe.addresses:
                self.addresses[str(Endpoint(address, probe.endpoint.port))] = str(probe.endpoint)
            if probe.api_versions_ms is not None and probe.ok:
                self.fetch_floors[str(probe.endpoint)] = probe.fetch_min_version
        return probes, passive, view

    def _second_look(
        self,
        probes: list[EndpointProbe],
        passive: dict[str, str],
        view: SocketObservation | None,
        started: float,
    ) -> list[EndpointProbe]:
        evidence = passive_evidence(view, self.window)
        out = []
        for probe in probes:
            name = str(probe.endpoint)
            if name not in passive:
                out.append(probe)
                continue
            del passive[name]
            if name in evidence.blackholed:
                remembered = self.memory.get(name)
                if remembered is not None:
                    self.memory[name] = replace(remembered, last_ok=False, observed=1)
                detail = f"not probed: {evidence.blackholed[name]}"
                out.append(replace(probe, reachability=Reachability.TIMEOUT, detail=detail))
            else:  # something is wrong this round: an answer seen before it is not enough
                plan = PlannedProbe(name, ProbeMode.KEPT, "a round with failures probes all")
                out.append(self._probe_one(probe.endpoint, plan, started))
        return out

    def _probe_one(self, endpoint: Endpoint, plan: PlannedProbe, now: float) -> EndpointProbe:
        name = str(endpoint)
        known = tuple(
            a.rsplit(":", 1)[0].strip("[]") for a, b in list(self.addresses.items()) if b == name
        )
        if plan.mode is ProbeMode.PASSIVE:
            return EndpointProbe(endpoint, Reachability.OK, "", known)
        remembered = self.memory.get(name)
        if plan.mode is ProbeMode.OBSERVED and remembered is not None:
            self.memory[name] = replace(remembered, last_ok=False, observed=remembered.observed + 1)
            return EndpointProbe(endpoint, Reachability.TIMEOUT, f"not probed: {plan.why}", known)
        kept = self.kept.pop(name, None)
        if plan.mode is ProbeMode.KEPT and kept is not None and remembered is not None:
            self._count(self.requests, name)
            probe = probe_kept_connection(kept, endpoint, self.probe_settings, known)
            if probe.ok:
                self.kept[name] = kept
                self.memory[name] = replace(remembered, last_ok=True, kept=True, observed=0)
                return probe
            self._close_own(kept)
            if probe.reachability is Reachability.TIMEOUT:
                self.memory[name] = EndpointMemory(False, remembered.last_fresh_at, False)
                return probe
            # closed or reset by the broker: a new connection says what the broker is now
        elif kept is not None:
            self._close_own(kept)
        return self._probe_fresh(endpoint, now)

    def _probe_fresh(self, endpoint: Endpoint, now: float) -> EndpointProbe:
        name = str(endpoint)
        self._count(self.connects, name)
        probe, sock = probe_endpoint_and_keep(endpoint, self.probe_settings, self.tls)
        if probe.api_versions_ms is not None:
            self._count(self.requests, name)
        if probe.connect_ms is not None and probe.tls_ms is None and probe.api_versions_ms is None:
            with self._lock:  # the connect itself failed: the namespace counted it too
                self._own_failed_connects += 1
        if sock is not None and self.keep:
            self.kept[name] = sock
        elif sock is not None:
            self._close_own(sock)
        self.memory[name] = EndpointMemory(probe.ok, now, name in self.kept)
        return probe

    def _close_own(self, sock: socket.socket) -> None:
        """Close one of the sidecar's probe connections, told to the socket view first (its
        TIME_WAIT is the sidecar's, not the pod's)."""
        if self.reader is not None:
            self.reader.closing_own(sock, self.clock())
        sock.close()

    # -- bookkeeping -------------------------------------------------------------------------
    def _count(self, counter: Counter[str], name: str) -> None:
        with self._lock:
            counter[name] += 1

    def counts(self, metadata_requests: int, metadata_clients: int) -> ProbeCounts:
        with self._lock:
            return ProbeCounts(
                connects=dict(self.connects),
                requests=dict(self.requests),
                metadata_requests=metadata_requests,
                metadata_clients=metadata_clients,
            )

    def close(self) -> None:
        for sock in list(self.kept.values()):
            self._close_own(sock)
        self.kept.clear()
