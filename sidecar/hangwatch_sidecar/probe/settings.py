"""What a probe is pointed at and how long it may wait: endpoints, bootstrap parsing, settings.

Fed by `hangwatch probe` (command-line flags and `-X` properties) and by the sidecar
(policy bootstrap, timeouts and the Secret-backed client configuration). Used by
`endpoints` (per-broker probes) and `metadata` (the metadata client). Invalid input
raises `ProbeConfigError`, which the command line turns into one line and exit code 3.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from hangwatch.errors import UsageError
from hangwatch_producer.secrets import REDACTED, is_secret_key, redact

MAX_TIMEOUT_MS = 300_000
"""Upper bound for any probe timeout: a probe that waits longer than 5 minutes is not a probe."""

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
"""`security.protocol` values that put TLS on the wire."""

_SCHEME = re.compile(r"^[A-Za-z_]+://")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
"""A DNS name as resolvers take it (internationalised names in their ASCII form)."""


class ProbeConfigError(UsageError):
    """The bootstrap list, a timeout or the client configuration of a probe is invalid."""


@dataclass(frozen=True, order=True)
class Endpoint:
    """A `host:port` a client can dial: a bootstrap entry or an advertised broker."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """One `host:port` (`[v6]:port`, optional `PROTOCOL://` prefix as librdkafka allows)."""
    entry = _SCHEME.sub("", text.strip(), count=1)
    if not entry:
        raise ProbeConfigError(f"empty entry in bootstrap list {text!r}")
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ProbeConfigError(f"malformed bootstrap entry {text!r} (expected [ipv6]:port)")
        port_text = rest[1:]
    else:
        host, sep, port_text = entry.rpartition(":")
        if not sep:
            raise ProbeConfigError(f"bootstrap entry {text!r} has no port (expected host:port)")
        if ":" in host:
            raise ProbeConfigError(f"IPv6 address in {text!r} needs brackets: [addr]:port")
    if not (_HOSTNAME.match(host) or is_ip_address(host)):
        raise ProbeConfigError(
            f"malformed host in bootstrap entry {text!r} (a DNS name in ASCII, or an IP address)"
        )
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ProbeConfigError(f"port in bootstrap entry {text!r} must be 1..65535")
    return Endpoint(host.lower(), int(port_text))


def parse_bootstrap(text: str) -> tuple[Endpoint, ...]:
    """A comma-separated bootstrap list, duplicates dropped, order kept."""
    if not text.strip():
        raise ProbeConfigError("the bootstrap list is empty (expected host:port[,host:port...])")
    return tuple(dict.fromkeys(parse_endpoint(part) for part in text.split(",")))


def is_ip_address(host: str) -> bool:
    """True for an IPv4 or IPv6 literal (no DNS lookup needed)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class ProbeSettings:
    """How one probe run behaves; shared by `hangwatch probe` and the sidecar."""

    connect_timeout_ms: int = 2000
    """Budget for DNS resolution plus TCP connect of one endpoint. A healthy connect takes
    milliseconds even across zones; 2 s tolerates a congested network, while a dead or
    blackholed host costs exactly this much (S3), far below producers' 10-30 s defaults."""

    request_timeout_ms: int = 3000
    """Budget for the TLS handshake plus the ApiVersions round trip, and for the metadata
    fetch. Healthy brokers answer in milliseconds; 3 s leaves room for a GC pause before a
    broker that accepted TCP is called unresponsive."""

    client_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """librdkafka properties for the metadata client (security, SASL, TLS). The TLS part
    also shapes the raw per-broker probe. Empty means plaintext, librdkafka's default.
    Kept out of repr because it may hold secrets."""

    client_id: str = "hangwatch-probe"
    """Sent with every request so broker logs and quotas tell probe traffic from producers."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout_ms", "request_timeout_ms"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_TIMEOUT_MS:
                flag = name.replace("_", "-")
                raise ProbeConfigError(f"--{flag} must be 1..{MAX_TIMEOUT_MS}, got {value}")
        if "bootstrap.servers" in self.client_config:
            raise ProbeConfigError(
                "give the bootstrap list with --bootstrap, not bootstrap.servers"
            )

    @property
    def connect_timeout_s(self) -> float:
        return self.connect_timeout_ms / 1000

    @property
    def request_timeout_s(self) -> float:
        return self.request_timeout_ms / 1000

    @property
    def security_protocol(self) -> str:
        """`security.protocol` in upper case; PLAINTEXT when unset."""
        return self.client_config.get("security.protocol", "PLAINTEXT").upper()

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    def redacted_config(self) -> dict[str, object]:
        """The client configuration with secret values replaced, safe to print or log."""
        return redact(self.client_config)

    def scrub(self, text: str) -> str:
        """`text` with every secret value of the client configuration replaced."""
        for key, value in self.client_config.items():
            if value and is_secret_key(key):
                text = text.replace(value, REDACTED)
        return text
