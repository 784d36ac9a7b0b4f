"""Worst-case time-to-error of a Go sarama SyncProducer whose brokers are all blackholed.

Seed S0: with the connection up, a blackholed broker fails the in-flight produce on
`Net.WriteTimeout`; with `Producer.Retry.Max >= 1` the retry abandons the broker and
re-resolves the partition leader through one `client.RefreshMetadata`, which walks the
seed brokers in turn (each connect waits `Net.DialTimeout`) and repeats the walk
`Metadata.Retry.Max` more times after `Metadata.Retry.Backoff`. When the refresh fails
the message is returned with that error. Sources: the seed write-up and sarama's
`async_producer.go` (`partitionProducer.updateLeader` -> `breaker.Run` ->
`client.RefreshMetadata`) and `client.go` (`tryRefreshMetadata`, `any`,
`resurrectDeadBrokers`). The seed credits the 4 connects to the partition producer's
breaker (`breaker.New(3, 1, 10*time.Second)`), but that breaker runs the refresh once
and only opens after 3 failures: the repeats are `Metadata.Retry.Max` (default 3).

Defaults are sarama's `NewConfig()`; durations use Go syntax (`30s`, `100ms`, `1m30s`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hangwatch.time_to_error.client_config import boolean, canonical_keys, duration, integer
from hangwatch.time_to_error.estimate import (
    ClientSettingsError,
    ConfigFinding,
    Term,
    dead_broker_refresh,
    retries_over_budget,
    seconds_text,
)
from hangwatch_producer.wire.telemetry import ACKS_ALL, acks_value

CLIENT = "sarama"

DEFAULTS = {
    "Net.DialTimeout": "30s",
    "Net.ReadTimeout": "30s",
    "Net.WriteTimeout": "30s",
    "Producer.Timeout": "10s",
    "Producer.Retry.Max": "3",
    "Producer.Retry.Backoff": "100ms",
    "Metadata.Retry.Max": "3",
    "Metadata.Retry.Backoff": "250ms",
    "Metadata.RefreshFrequency": "10m",
    "Metadata.Timeout": "0",
    "Producer.Idempotent": "false",
}
"""sarama's documented defaults for the settings the model reads."""

KNOWN_KEYS = frozenset(
    {
        *DEFAULTS,
        "Addrs",
        "ClientID",
        "RackID",
        "ChannelBufferSize",
        "ApiVersionsRequest",
        "Version",
        "Admin.Retry.Max",
        "Admin.Retry.Backoff",
        "Admin.Timeout",
        "Net.MaxOpenRequests",
        "Net.KeepAlive",
        "Net.LocalAddr",
        "Net.ResolveCanonicalBootstrapServers",
        "Net.TLS.Enable",
        "Net.Proxy.Enable",
        "Net.SASL.Enable",
        "Net.SASL.Mechanism",
        "Net.SASL.Version",
        "Net.SASL.Handshake",
        "Net.SASL.AuthIdentity",
        "Net.SASL.User",
        "Net.SASL.Password",
        "Net.SASL.SCRAMAuthzID",
        "Metadata.Full",
        "Metadata.AllowAutoTopicCreation",
        "Metadata.SingleFlight",
        "Producer.MaxMessageBytes",
        "Producer.RequiredAcks",
        "Producer.Compression",
        "Producer.CompressionLevel",
        "Producer.Transaction.ID",
        "Producer.Transaction.Timeout",
        "Producer.Transaction.Retry.Max",
        "Producer.Transaction.Retry.Backoff",
        "Producer.Return.Successes",
        "Producer.Return.Errors",
        "Producer.Flush.Bytes",
        "Producer.Flush.Messages",
        "Producer.Flush.Frequency",
        "Producer.Flush.MaxMessages",
        "Producer.Retry.MaxBufferLength",
        "Producer.Retry.MaxBufferBytes",
    }
)
"""sarama `Config` fields (dotted paths); `Addrs` is the address list given to the producer."""

ALIASES = {"bootstrap.servers": "Addrs"}
IGNORED_PREFIXES = ("Consumer.", "Net.SASL.GSSAPI.", "Net.SASL.OAuth", "Net.TLS.Config")
"""Fields that exist in sarama but never affect a producer's time-to-error."""

BOOTSTRAP_KEY = "Addrs"


@dataclass(frozen=True)
class SaramaSettings:
    """The sarama settings that decide how long a send to a blackholed cluster waits."""

    dial_timeout_seconds: float
    """Net.DialTimeout (30s): one TCP connect to a dead host waits this long."""
    read_timeout_seconds: float
    """Net.ReadTimeout (30s): a written request whose reply never comes waits this long."""
    write_timeout_seconds: float
    """Net.WriteTimeout (30s): the in-flight produce to a blackholed broker fails after this."""
    producer_timeout_seconds: float
    """Producer.Timeout (10s): the broker's wait for acks; it never fires for a dead broker."""
    producer_retry_max: int
    """Producer.Retry.Max (3): 0 returns the first error; >= 1 retries through a refresh."""
    producer_retry_backoff_seconds: float
    """Producer.Retry.Backoff (100ms): sleep before the retry re-resolves the leader."""
    metadata_retry_max: int
    """Metadata.Retry.Max (3): extra walks over the seed brokers when a refresh fails."""
    metadata_retry_backoff_seconds: float
    """Metadata.Retry.Backoff (250ms): sleep between those walks."""
    metadata_refresh_frequency_seconds: float
    """Metadata.RefreshFrequency (10m): periodic background refresh; 0 disables it."""
    metadata_timeout_seconds: float
    """Metadata.Timeout (0 = off): newer sarama stops starting walks after this."""
    idempotent: bool
    """Producer.Idempotent (false): seed S2's hang happened with it on."""


def canonical(config: Mapping[str, str]) -> dict[str, str]:
    """`config` with keys spelled as sarama's fields; unknown keys are an error."""
    return canonical_keys(config, KNOWN_KEYS, ALIASES, CLIENT, IGNORED_PREFIXES)


REQUIRED_ACKS = {"waitforall": ACKS_ALL, "waitforlocal": 1, "noresponse": 0}
"""sarama's `RequiredAcks` constants by name (any case) -> Kafka's acks."""


def acks(config: Mapping[str, str]) -> int:
    """The producer's acks (-1: all): `Producer.RequiredAcks` by constant name or number,
    all when `Producer.Idempotent` is set (sarama requires it), else sarama's default,
    WaitForLocal (1)."""
    c = canonical(config)
    if boolean(c, "Producer.Idempotent", default=False):
        return ACKS_ALL
    raw = c.get("Producer.RequiredAcks", "WaitForLocal").strip()
    found = REQUIRED_ACKS.get(raw.lower(), acks_value(raw))
    if found is None:
        raise ClientSettingsError(
            f"Producer.RequiredAcks must be WaitForAll, WaitForLocal, NoResponse or a number, "
            f"got {raw[:40]!r}"
        )
    return found


def parse_settings(config: Mapping[str, str]) -> SaramaSettings:
    """Typed settings from sarama-style `Section.Field=value` strings (defaults filled in)."""
    c = canonical(config)
    d = DEFAULTS
    return SaramaSettings(
        dial_timeout_seconds=duration(c, "Net.DialTimeout", d["Net.DialTimeout"], positive=True),
        read_timeout_seconds=duration(c, "Net.ReadTimeout", d["Net.ReadTimeout"], positive=True),
        write_timeout_seconds=duration(c, "Net.WriteTimeout", d["Net.WriteTimeout"], positive=True),
        producer_timeout_seconds=duration(c, "Producer.Timeout", d["Producer.Timeout"], True),
        producer_retry_max=integer(c, "Producer.Retry.Max", int(d["Producer.Retry.Max"])),
        producer_retry_backoff_seconds=duration(
            c, "Producer.Retry.Backoff", d["Producer.Retry.Backoff"]
        ),
        metadata_retry_max=integer(c, "Metadata.Retry.Max", int(d["Metadata.Retry.Max"])),
        metadata_retry_backoff_seconds=duration(
            c, "Metadata.Retry.Backoff", d["Metadata.Retry.Backoff"]
        ),
        metadata_refresh_frequency_seconds=duration(
            c, "Metadata.RefreshFrequency", d["Metadata.RefreshFrequency"]
        ),
        metadata_timeout_seconds=duration(c, "Metadata.Timeout", d["Metadata.Timeout"]),
        idempotent=boolean(c, "Producer.Idempotent", default=False),
    )


def _s(seconds: float) -> str:
    """Seconds in Go's duration syntax: `100ms`, `3s`, `1.5s`, `10m`, `2h`."""
    if 0 < seconds < 1:
        return f"{round(seconds * 1000, 6):g}ms"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _refresh_terms(s: SaramaSettings, brokers: int) -> tuple[Term, ...]:
    walks = s.metadata_retry_max + 1
    dials = Term(
        "metadata refresh connects",
        walks * brokers * s.dial_timeout_seconds,
        "(Metadata.Retry.Max + 1) x brokers x Net.DialTimeout",
        f"({s.metadata_retry_max} + 1) x {brokers} x {_s(s.dial_timeout_seconds)}",
        ("Metadata.Retry.Max", "Net.DialTimeout", BOOTSTRAP_KEY),
    )
    backoffs = Term(
        "metadata retry backoffs",
        s.metadata_retry_max * s.metadata_retry_backoff_seconds,
        "Metadata.Retry.Max x Metadata.Retry.Backoff",
        f"{s.metadata_retry_max} x {_s(s.metadata_retry_backoff_seconds)}",
        ("Metadata.Retry.Max", "Metadata.Retry.Backoff"),
    )
    cap = s.metadata_timeout_seconds + s.dial_timeout_seconds
    if s.metadata_timeout_seconds == 0 or cap >= dials.seconds + backoffs.seconds:
        return (dials, backoffs)
    capped = Term(
        "metadata refresh, cut by Metadata.Timeout",
        cap,
        "Metadata.Timeout + Net.DialTimeout",
        f"{_s(s.metadata_timeout_seconds)} + {_s(s.dial_timeout_seconds)} (a connect under way)",
        ("Metadata.Timeout", "Net.DialTimeout"),
    )
    return (capped,)


def terms(s: SaramaSettings, brokers: int) -> tuple[Term, ...]:
    """The waits in order: failed in-flight produce, then (when retrying) the refresh."""
    first = Term(
        "in-flight produce fails",
        s.write_timeout_seconds,
        "Net.WriteTimeout",
        _s(s.write_timeout_seconds),
        ("Net.WriteTimeout",),
    )
    if s.producer_retry_max == 0:
        return (first,)
    backoff = Term(
        "producer retry backoff",
        s.producer_retry_backoff_seconds,
        "Producer.Retry.Backoff",
        _s(s.producer_retry_backoff_seconds),
        ("Producer.Retry.Backoff",),
    )
    return (first, backoff, *_refresh_terms(s, brokers))


def _retry_assumptions(s: SaramaSettings, brokers: int) -> tuple[str, ...]:
    if s.producer_retry_max == 0:
        return ("Producer.Retry.Max=0: the first error is returned, no metadata refresh",)
    return (
        "a retry re-resolves the leader once: one RefreshMetadata connects to each of the "
        f"{brokers} seed broker(s) in turn, Metadata.Retry.Max + 1 times; when it fails the "
        "message gets that error, whatever Producer.Retry.Max (>= 1) says",
        "one broker: seed S0's 3 s + 4 x 30 s = 123 s, plus the backoffs the seed leaves out; "
        "three brokers: more than the >195 s a real sarama 1.22.1 SyncProducer stayed silent",
        "not counted: once the seeds are exhausted sarama may also try brokers registered from "
        "earlier metadata (client.any), up to brokers x Net.DialTimeout more",
    )


def assumptions(s: SaramaSettings, brokers: int) -> tuple[str, ...]:
    """What the sarama model takes for granted, printed with every estimate."""
    return (
        "model of sarama's SyncProducer (async_producer.go, client.go); every broker is "
        "blackholed after the connection was up, so connects time out instead of being refused",
        "the in-flight produce fails on Net.WriteTimeout, as measured in seed S0 (Retry.Max=0 "
        f"reported after 3 s); if the kernel takes the write and only the reply is lost, "
        f"Net.ReadTimeout ({_s(s.read_timeout_seconds)}) applies instead",
        *_retry_assumptions(s, brokers),
        f"Producer.Timeout ({_s(s.producer_timeout_seconds)}) is the broker's wait for acks "
        "and never fires when the broker is unreachable",
    )


def findings(
    s: SaramaSettings, parts: tuple[Term, ...], brokers: int, budget_seconds: float | None
) -> tuple[ConfigFinding, ...]:
    """Risky settings of this configuration (its worst-case `parts`), worst first."""
    retry_path = parts[1:]
    refresh = s.metadata_refresh_frequency_seconds
    return (
        *retries_over_budget(
            sum(t.seconds for t in retry_path),
            "Producer.Retry.Max >= 1 retries through a metadata refresh: "
            + " + ".join(t.formula for t in retry_path),
            sum(t.seconds for t in parts),
            budget_seconds,
            "nothing caps it: lower Net.DialTimeout or Metadata.Retry.Max, set Metadata.Timeout, "
            "or set Producer.Retry.Max=0 and retry in the application",
        ),
        *dead_broker_refresh(
            brokers,
            f"Net.DialTimeout ({seconds_text(s.dial_timeout_seconds)})",
            refresh if refresh > 0 else None,
            "Metadata.RefreshFrequency",
            "sarama moves a failed seed broker aside until every seed has failed, so it mostly "
            "stalls once per dead seed.",
        ),
    )


def notes(s: SaramaSettings) -> tuple[str, ...]:
    """Waits no setting bounds: the blocking API, and seed S2's idempotent hang."""
    found = [
        "SyncProducer.SendMessage has no per-call timeout: the caller waits the whole worst case"
    ]
    if s.idempotent:
        found.append(
            "Producer.Idempotent=true: in seed S2 (a leader election) sarama's SendMessages "
            "returned from its retries without answering every message and hung forever; no "
            "setting bounds that, only a watchdog around the call"
        )
    return tuple(found)
