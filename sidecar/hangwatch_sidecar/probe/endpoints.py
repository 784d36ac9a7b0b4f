"""The probing engine: how every bootstrap entry and advertised broker answers from here.

Fed by `hangwatch probe` and by the sidecar's probe loop with a bootstrap list, topics
and `ProbeSettings`. For each endpoint it resolves DNS, dials TCP (and TLS when the
security protocol asks for it) and sends a raw Kafka ApiVersions v0 request, classifying
the outcome as a `Reachability` with per-stage latencies. All endpoints are probed in
parallel and the metadata fetch runs at the same time, so a run costs about the largest
timeout, never the sum (S1). Results are frozen dataclasses; judging them is the job of
the pure `report` module.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

from hangwatch.contracts import Reachability
from hangwatch_sidecar.probe.metadata import MetadataClient
from hangwatch_sidecar.probe.settings import (
    Endpoint,
    ProbeConfigError,
    ProbeSettings,
    is_ip_address,
)
from hangwatch_sidecar.probe.tls import tls_context
from hangwatch_sidecar.probe.types import ClusterMetadata, EndpointProbe, ProbeResult

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())  # library logging: silent unless the caller configures it

API_VERSIONS_KEY = 18
FETCH_KEY = 1
MAX_RESPONSE_BYTES = 1 << 20
"""An ApiVersions answer is a few hundred bytes; a bigger length prefix is not Kafka."""
_TLS_RECORD_TYPES = frozenset({0x15, 0x16})  # alert, handshake: a TLS listener answering
_UNREACHABLE = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN})
_AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


class _Failed(Exception):
    """One probe stage failed with this reachability class (internal control flow)."""

    def __init__(self, reachability: Reachability, detail: str) -> None:
        super().__init__(detail)
        self.reachability = reachability
        self.detail = detail


# -- single endpoint ---------------------------------------------------------------------------
@contextmanager
def _timed(stages: dict[str, float], name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        stages[name] = round((time.perf_counter() - start) * 1000, 3)


def _probe(
    endpoint: Endpoint,
    reachability: Reachability,
    detail: str,
    addresses: tuple[str, ...],
    stages: dict[str, float],
    began: float,
    fetch_min_version: int | None = None,
) -> EndpointProbe:
    """The probe of `endpoint` with the stages timed so far, ending now."""
    return EndpointProbe(
        endpoint,
        reachability,
        detail,
        addresses,
        dns_ms=stages.get("dns_ms"),
        connect_ms=stages.get("connect_ms"),
        tls_ms=stages.get("tls_ms"),
        api_versions_ms=stages.get("api_versions_ms"),
        span=(began, time.monotonic()),
        fetch_min_version=fetch_min_version,
    )


def _remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _resolve(endpoint: Endpoint, deadline: float, budget_ms: int) -> Sequence[_AddrInfo]:
    """getaddrinfo bounded by the deadline (a stuck resolver must not stall the probe)."""
    if is_ip_address(endpoint.host):
        return socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    outcome: list[Sequence[_AddrInfo] | OSError] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            outcome.append(
                socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
            )
        except OSError as exc:
            outcome.append(exc)
        done.set()

    threading.Thread(target=lookup, name="hangwatch-dns", daemon=True).start()
    if not done.wait(_remaining(deadline)):
        raise _Failed(
            Reachability.DNS_ERROR, f"no DNS answer for {endpoint.host} in {budget_ms} ms"
        )
    result = outcome[0]
    if isinstance(result, OSError):
        reason = result.strerror or str(result)
        raise _Failed(Reachability.DNS_ERROR, f"cannot resolve {endpoint.host}: {reason}")
    if not result:
        raise _Failed(Reachability.DNS_ERROR, f"{endpoint.host} resolves to no address")
    return result


def _connect(infos: Sequence[_AddrInfo], deadline: float, budget_ms: int) -> socket.socket:
    """TCP connect to the first address that accepts, all attempts within the deadline."""
    last: OSError = TimeoutError()
    for family, kind, proto, _, sockaddr in infos:
        if _remaining(deadline) <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(_remaining(deadline))
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    if isinstance(last, TimeoutError):
        raise _Failed(
            Reachability.TIMEOUT,
            f"TCP connect got no answer in {budget_ms} ms (host down, blackholed or firewalled)",
        )
    if isinstance(last, ConnectionRefusedError):
        raise _Failed(Reachability.REFUSED, "connection refused (nothing listens on the port)")
    if last.errno in _UNREACHABLE:
        raise _Failed(Reachability.TIMEOUT, f"host unreachable: {last.strerror}")
    raise _Failed(Reachability.REFUSED, f"connect failed: {last.strerror or last}")


def _tls_handshake(
    context: ssl.SSLContext, sock: socket.socket, host: str, deadline: float, budget_ms: int
) -> ssl.SSLSocket:
    tls = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    try:
        tls.settimeout(_remaining(deadline))
        tls.do_handshake()
    except TimeoutError:
        tls.close()
        raise _Failed(
            Reachability.UNRESPONSIVE, f"TCP accepted, TLS handshake unanswered in {budget_ms} ms"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        tls.close()
        hint = " (plaintext listener?)" if not isinstance(exc, ssl.SSLError) else ""
        raise _Failed(Reachability.TLS_ERROR, f"TLS handshake failed: {exc}{hint}") from None
    return tls


def _recv_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        sock.settimeout(_remaining(deadline) or 1e-6)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError(errno.ECONNRESET, "connection closed by the broker")
        data += chunk
    return bytes(data)


def api_versions_request(correlation_id: int, client_id: str) -> bytes:
    """A length-prefixed ApiVersions v0 request frame (header v1, empty body)."""
    cid = client_id.encode()
    header = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(header)) + header


def lowest_version(body: bytes, api_key: int) -> int | None:
    """The lowest version of `api_key` an ApiVersions v0 answer lists (`body`: what
    follows its correlation id: an error code, then [api key, lowest, highest] per API);
    None when the answer carries an error, does not list the API, or is not such an
    answer."""
    if len(body) < 6:
        return None
    error, count = struct.unpack_from(">hi", body, 0)
    if error != 0 or not 0 <= count <= (len(body) - 6) // 6:
        return None
    for i in range(count):
        key, lowest, highest = struct.unpack_from(">hhh", body, 6 + 6 * i)
        if key == api_key:
            return lowest if 0 <= lowest <= highest else None
    return None


def _api_versions(
    sock: socket.socket, deadline: float, budget_ms: int, client_id: str, hint: str
) -> int | None:
    """One ApiVersions v0 round trip; the lowest Fetch version the broker lists (None: not
    said), or `_Failed`."""
    correlation_id = int.from_bytes(os.urandom(4), "big") >> 1
    try:
        sock.settimeout(_remaining(deadline) or 1e-6)
        sock.sendall(api_versions_request(correlation_id, client_id))
        prefix = _recv_exact(sock, 4, deadline)
        if prefix[0] in _TLS_RECORD_TYPES:
            raise _Failed(Reachability.TLS_ERROR, "answered with TLS: check security.protocol")
        size = struct.unpack(">i", prefix)[0]
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise _Failed(Reachability.UNRESPONSIVE, f"answer is not Kafka (length {size})")
        answered = struct.unpack(">i", _recv_exact(sock, 4, deadline))[0]
        body = _recv_exact(sock, size - 4, deadline)  # all of it: a kept connection starts clean
    except TimeoutError:
        raise _Failed(
            Reachability.UNRESPONSIVE, f"TCP accepted, no Kafka answer in {budget_ms} ms"
        ) from None
    except ssl.SSLError as exc:
        raise _Failed(Reachability.TLS_ERROR, f"TLS failure during request: {exc}") from None
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise _Failed(
            Reachability.UNRESPONSIVE, f"TCP accepted, then {reason} before a Kafka answer{hint}"
        ) from None
    if answered != correlation_id:
        raise _Failed(Reachability.UNRESPONSIVE, "answer has a wrong correlation id")
    return lowest_version(body, FETCH_KEY)


def probe_endpoint(
    endpoint: Endpoint, settings: ProbeSettings, tls: ssl.SSLContext | None = None
) -> EndpointProbe:
    """DNS, TCP connect, optional TLS handshake and one ApiVersions round trip, classified.

    Takes at most connect_timeout_ms + request_timeout_ms; never raises for network faults.
    Pass `tls.tls_context(settings)` when the settings ask for TLS.
    """
    probe, sock = probe_endpoint_and_keep(endpoint, settings, tls)
    if sock is not None:
        sock.close()
    return probe


def probe_endpoint_and_keep(
    endpoint: Endpoint, settings: ProbeSettings, tls: ssl.SSLContext | None = None
) -> tuple[EndpointProbe, socket.socket | None]:
    """As `probe_endpoint`, and the connection stays open when the probe succeeded (the
    caller owns it: ask again on it with `probe_kept_connection`, close it when done)."""
    stages: dict[str, float] = {}
    addresses: tuple[str, ...] = ()
    began = time.monotonic()
    deadline = began + settings.connect_timeout_s
    try:
        with _timed(stages, "dns_ms"):
            infos = _resolve(endpoint, deadline, settings.connect_timeout_ms)
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
        with _timed(stages, "connect_ms"):
            sock = _connect(infos, deadline, settings.connect_timeout_ms)
        with ExitStack() as cleanup:
            cleanup.callback(sock.close)
            deadline = time.monotonic() + settings.request_timeout_s
            if tls is not None:
                with _timed(stages, "tls_ms"):
                    sock = _tls_handshake(
                        tls, sock, endpoint.host, deadline, settings.request_timeout_ms
                    )
                cleanup.callback(sock.close)
            with _timed(stages, "api_versions_ms"):
                hint = "" if tls else " (a TLS listener? check security.protocol)"
                fetch = _api_versions(
                    sock, deadline, settings.request_timeout_ms, settings.client_id, hint
                )
            cleanup.pop_all()
    except _Failed as failed:
        detail = settings.scrub(failed.detail)
        return _probe(endpoint, failed.reachability, detail, addresses, stages, began), None
    return _probe(endpoint, Reachability.OK, "", addresses, stages, began, fetch), sock


def _unacknowledged(sock: socket.socket) -> tuple[int, int] | None:
    """(unacked segments, consecutive retransmissions) of `sock` from the kernel's tcp_info."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except (OSError, AttributeError):
        return None
    if len(raw) < 28:
        return None
    retransmits = raw[2]
    unacked = struct.unpack_from("I", raw, 24)[0]
    return unacked, retransmits


def probe_kept_connection(
    sock: socket.socket, endpoint: Endpoint, settings: ProbeSettings, addresses: tuple[str, ...]
) -> EndpointProbe:
    """One ApiVersions round trip on a connection kept from an earlier probe, classified.

    No answer within the request timeout: `timeout` (blackholed) when the request is
    not even acknowledged by TCP, else `unresponsive`. A connection the broker closed is
    `unresponsive` with that detail: the caller connects afresh to classify the broker.
    The caller closes the socket when the probe failed."""
    stages: dict[str, float] = {}
    began = time.monotonic()
    deadline = began + settings.request_timeout_s
    try:
        with _timed(stages, "api_versions_ms"):
            fetch = _api_versions(
                sock, deadline, settings.request_timeout_ms, settings.client_id, ""
            )
    except _Failed as failed:
        tcp = _unacknowledged(sock)
        reachability, detail = failed.reachability, failed.detail
        if "no Kafka answer" in detail and tcp is not None and tcp[0] > 0:
            reachability = Reachability.TIMEOUT
            detail = (
                f"request on the kept connection not acknowledged by TCP in "
                f"{settings.request_timeout_ms} ms ({tcp[1]} retransmissions): blackholed"
            )
        detail = settings.scrub(detail)
        return _probe(endpoint, reachability, detail, addresses, stages, began)
    return _probe(endpoint, Reachability.OK, "", addresses, stages, began, fetch)


# -- whole cluster -----------------------------------------------------------------------------
def advertised_only(
    bootstrap: Sequence[Endpoint], metadata: ClusterMetadata | None
) -> list[Endpoint]:
    """Advertised broker endpoints not already in the bootstrap list (probed once metadata came)."""
    if metadata is None:
        return []
    known = set(bootstrap)
    return [b.endpoint for b in metadata.brokers if b.endpoint not in known]


def _probe_in_parallel(
    stack: ExitStack,
    endpoints: Sequence[Endpoint],
    settings: ProbeSettings,
    tls: ssl.SSLContext | None,
) -> list[EndpointProbe]:
    """Start one thread per endpoint now; the returned list fills when `stack` closes."""
    results: list[EndpointProbe] = []
    if not endpoints:
        return results
    pool = stack.enter_context(
        ThreadPoolExecutor(len(endpoints), thread_name_prefix="hangwatch-probe")
    )
    futures = [pool.submit(probe_endpoint, e, settings, tls) for e in endpoints]
    stack.callback(lambda: results.extend(f.result() for f in futures))
    return results


def probe_cluster(
    bootstrap: Sequence[Endpoint],
    topics: Sequence[str] = (),
    settings: ProbeSettings | None = None,
) -> ProbeResult:
    """Probe every bootstrap entry and advertised broker in parallel, and fetch metadata;
    with `topics`, their `min.insync.replicas` (DescribeConfigs, at most
    `metadata.MAX_DESCRIBED_TOPICS`) at the same time as the metadata.

    Raises `ProbeConfigError` for an empty bootstrap list, an empty topic name or a client
    configuration librdkafka rejects (before any network traffic); network faults are
    results, never exceptions. `topics` empty means: metadata of all topics.
    """
    settings = settings or ProbeSettings()
    bootstrap = tuple(dict.fromkeys(bootstrap))
    topics = tuple(dict.fromkeys(topics))
    if not bootstrap:
        raise ProbeConfigError("the bootstrap list is empty")
    if any(not t.strip() for t in topics):
        raise ProbeConfigError("topic names must not be empty")
    started_at, started = time.time(), time.perf_counter()
    tls = tls_context(settings)
    with MetadataClient(bootstrap, settings) as client, ExitStack() as waves:
        # The metadata request goes first: queued before the first connection is up, it
        # is answered at once (see MetadataClient.fetch).
        pool = waves.enter_context(ThreadPoolExecutor(2, thread_name_prefix="hangwatch-meta"))
        pending = pool.submit(client.fetch, topics)
        described = pool.submit(client.describe_min_insync, topics)
        first = _probe_in_parallel(waves, bootstrap, settings, tls)
        metadata = pending.result()
        extra = advertised_only(bootstrap, metadata.metadata)
        later = _probe_in_parallel(waves, extra, settings, tls)
        min_insync = described.result()
    elapsed_ms = (time.perf_counter() - started) * 1000
    log.debug("probe done", extra={"endpoints": len(bootstrap) + len(extra), "ms": elapsed_ms})
    return ProbeResult(
        bootstrap=bootstrap,
        topics=topics,
        endpoints=tuple(first + later),
        metadata=metadata,
        settings=settings,
        started_at=started_at,
        elapsed_ms=elapsed_ms,
        min_insync=min_insync,
    )
