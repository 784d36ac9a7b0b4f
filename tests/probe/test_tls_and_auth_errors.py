"""TLS and authentication problems are `tls_error` / `auth_error`, with the reason.

A TLS terminator in front of a real lab broker (stdlib `ssl`, one certificate made with
the `openssl` command) stands in for a TLS listener; the Kafka answers come from the lab.

Covers:
- SSL with the right CA: `ok`, with the TLS handshake timed separately;
- an unknown CA, a certificate for another host: `tls_error` naming the cause; turning
  hostname checks or verification off (librdkafka properties) makes them `ok`;
- a listener that requires a client certificate: `tls_error` without one, `ok` with
  ssl.certificate.location/ssl.key.location or the inline ssl.*.pem properties;
- plaintext against a TLS listener and SSL against a plaintext broker: `tls_error`;
  the whole cluster probed with SSL over plaintext brokers is unavailable (exit 2);
- SASL that the brokers cannot do is `auth_error` (via the metadata client).
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch.contracts import ExitCode, Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_endpoint
from hangwatch_sidecar.probe.report import assess
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.probe.tls import tls_context
from hangwatch_sidecar.probe.types import EndpointProbe

from .helpers import probe_lab


def _make_certificate(directory: Path, san: str) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=hangwatch-test", "-addext",
         f"subjectAltName={san}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _read_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class TlsFront:
    """Terminates TLS and relays one Kafka request/response per connection to a broker."""

    def __init__(self, context: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        self.context = context
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    with (
                        self.context.wrap_socket(conn, server_side=True) as tls,
                        socket.create_connection(self.upstream, timeout=5) as broker,
                    ):
                        broker.sendall(_read_frame(tls))
                        tls.sendall(_read_frame(broker))
                except (OSError, ConnectionError):
                    continue

    def close(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.listener.close()
        self.thread.join(timeout=10)


@pytest.fixture
def certs(tmp_path: Path) -> tuple[Path, Path]:
    return _make_certificate(tmp_path, "DNS:localhost,IP:127.0.0.1")


def _front(lab: Lab, cert: Path, key: Path, client_ca: Path | None = None) -> TlsFront:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return TlsFront(context, (lab.brokers[1].host, lab.brokers[1].port))


@pytest.fixture
def front(lab: Lab, certs: tuple[Path, Path]) -> Iterator[TlsFront]:
    server = _front(lab, *certs)
    yield server
    server.close()


def _probe(port: int, host: str = "localhost", **config: str) -> EndpointProbe:
    settings = ProbeSettings(
        connect_timeout_ms=800,
        request_timeout_ms=800,
        client_config={"security.protocol": "SSL", **config},
    )
    return probe_endpoint(Endpoint(host, port), settings, tls_context(settings))


def test_tls_with_the_right_ca_is_ok(front: TlsFront, certs: tuple[Path, Path]) -> None:
    probe = _probe(front.port, **{"ssl.ca.location": str(certs[0])})

    assert probe.reachability is Reachability.OK, probe.detail
    assert probe.tls_ms is not None and probe.api_versions_ms is not None


def test_unknown_ca_is_tls_error_unless_verification_is_off(front: TlsFront) -> None:
    probe = _probe(front.port)

    assert probe.reachability is Reachability.TLS_ERROR
    assert "certificate verify failed" in probe.detail
    unchecked = _probe(front.port, **{"enable.ssl.certificate.verification": "false"})
    assert unchecked.reachability is Reachability.OK, unchecked.detail


def test_certificate_for_another_host(lab: Lab, tmp_path: Path) -> None:
    cert, key = _make_certificate(tmp_path, "DNS:kafka.example.com")
    server = _front(lab, cert, key)
    try:
        wrong = _probe(server.port, **{"ssl.ca.location": str(cert)})
        lenient = _probe(
            server.port,
            **{"ssl.ca.location": str(cert), "ssl.endpoint.identification.algorithm": "none"},
        )
    finally:
        server.close()

    assert wrong.reachability is Reachability.TLS_ERROR
    assert "match" in wrong.detail
    assert lenient.reachability is Reachability.OK, lenient.detail


def test_client_certificate_required(lab: Lab, certs: tuple[Path, Path]) -> None:
    cert, key = certs
    server = _front(lab, cert, key, client_ca=cert)
    ca = {"ssl.ca.location": str(cert)}
    try:
        anonymous = _probe(server.port, **ca)
        by_file = _probe(
            server.port,
            **ca,
            **{"ssl.certificate.location": str(cert), "ssl.key.location": str(key)},
        )
        inline = _probe(
            server.port,
            **ca,
            **{"ssl.certificate.pem": cert.read_text(), "ssl.key.pem": key.read_text()},
        )
    finally:
        server.close()

    assert anonymous.reachability is not Reachability.OK
    assert by_file.reachability is Reachability.OK, by_file.detail
    assert inline.reachability is Reachability.OK, inline.detail


def test_plaintext_against_tls_listener(front: TlsFront) -> None:
    settings = ProbeSettings(connect_timeout_ms=800, request_timeout_ms=800)

    probe = probe_endpoint(Endpoint("127.0.0.1", front.port), settings)

    assert probe.reachability is not Reachability.OK
    assert "check security.protocol" in probe.detail


def test_ssl_against_plaintext_cluster_is_unavailable(lab: Lab) -> None:
    settings = ProbeSettings(
        connect_timeout_ms=800, request_timeout_ms=800, client_config={"security.protocol": "SSL"}
    )

    result, assessment = probe_lab(lab, settings=settings)

    assert {r.reachability for r in assessment.rows} == {Reachability.TLS_ERROR}
    assert all(r.probe.tls_ms is not None for r in assessment.rows)
    assert result.metadata.failure is Reachability.TLS_ERROR
    assert assessment.exit_code == ExitCode.UNAVAILABLE


def test_sasl_the_brokers_cannot_do_is_auth_error(lab: Lab) -> None:
    settings = ProbeSettings(
        connect_timeout_ms=800,
        request_timeout_ms=800,
        client_config={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "probe",
            "sasl.password": "probe",
        },
    )

    result = probe_lab(lab, settings=settings)[0]
    assessment = assess(result)

    assert all(p.ok for p in result.endpoints), "ApiVersions is answered before SASL"
    assert {r.reachability for r in assessment.rows} == {Reachability.AUTH_ERROR}
    assert result.metadata.failure is Reachability.AUTH_ERROR
    assert "SASL" in assessment.rows[0].detail
