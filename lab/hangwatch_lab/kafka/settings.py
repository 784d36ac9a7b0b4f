"""The kafka engine's settings: one typed, checked object for what a cluster is started with.

`Lab(brokers, topics, engine="kafka", **options)` (and `KafkaLab(...)`) takes the fields
of `KafkaSettings` as keyword options (`KafkaSettings.of`: an unknown one is a usage
error naming it); the engine reads them from `lab.settings`. A field is checked when the
object is made, and against the cluster's brokers and topics by `check`, each refusal a
one-line usage error. Adding a setting is one field here (its unit in its name), its
check, and where the engine uses it. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hangwatch.errors import UsageError
from hangwatch_lab import kafkajars
from hangwatch_lab.kafka.nodes import (
    HEARTBEAT_INTERVAL_MS,
    HOST,
    MAX_CONTROLLERS,
    READY_TIMEOUT_SECONDS,
    SESSION_TIMEOUT_MS,
)
from hangwatch_lab.kafka.tls import TLS_MODES

MAX_BROKERS = 9
"""The most brokers the kafka engine starts (each a JVM of its own)."""
BROKER_CONFIG_KEY = re.compile(r"[a-z][a-z0-9.]{0,127}")
BROKER_CONFIG_VALUE = re.compile(r"[^\r\n\\]{0,256}")
"""What a broker property may be: written into server.properties as `key=value`."""


@dataclass(frozen=True)
class KafkaSettings:
    """How a kafka-engine cluster is started (besides its brokers and topics)."""

    ports: tuple[int, ...] | None = None
    """Each broker's client port, fixed (None: ports the kernel picks, and a start that
    finds one taken meanwhile tries new ones)."""
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    """`broker.session.timeout.ms`: how long a silent broker stays registered."""
    ready_timeout_seconds: float = READY_TIMEOUT_SECONDS
    """How long a start waits for every broker listed and every partition led."""
    host: str = HOST
    """The address the brokers' client listeners bind and advertise (loopback unless
    clients elsewhere, e.g. pods on a node's bridge, must reach them; the controller
    listeners stay on loopback)."""
    kafka_version: str = field(default_factory=kafkajars.default_version)
    """The Apache Kafka release the cluster runs (`4.x.y` or `3.9.z`; None or empty when
    made: the current 4.x)."""
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Topic -> the configs it is created with (e.g. `max.message.bytes`)."""
    auto_create_topics: bool = True
    """`auto.create.topics.enable`."""
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    """User -> password on a SASL/PLAIN listener per broker, whose writes the brokers'
    authorizer checks against ACLs (none: no such listener)."""
    controllers: int = 0
    """Controller-only nodes (0: KRaft's combined mode, every broker a controller)."""
    broker_configs: Mapping[str, str] = field(default_factory=dict)
    """More properties of every broker's server.properties (e.g. the brokers'
    `connections.max.idle.ms`), over the lab's own."""
    tls: str = ""
    """A TLS listener per broker too (`hangwatch_lab.kafka.tls`), whose certificate the
    CA the lab hands its clients signed (`trusted`) or another one (`untrusted`: every
    client's handshake fails until `fix_certificates`); empty: none."""
    hostnames: bool = False
    """Every broker also serves clients on a listener advertised by hostname, bound on a
    loopback address of its own, the names in the lab's hosts file (`hangwatch_lab.kafka.
    names`): so a broker can come back on a new address under the same name (`move`)."""

    def __post_init__(self) -> None:
        if not 0 <= self.controllers <= MAX_CONTROLLERS:
            raise UsageError(
                f"--controllers must be between 0 (every broker also a controller) and "
                f"{MAX_CONTROLLERS}, got {self.controllers}"
            )
        object.__setattr__(self, "kafka_version", self.kafka_version or kafkajars.default_version())
        kafkajars.line_of(self.kafka_version)  # a version of neither line: a usage error
        object.__setattr__(self, "ports", None if self.ports is None else tuple(self.ports))
        object.__setattr__(
            self, "topic_configs", {t: dict(c) for t, c in self.topic_configs.items()}
        )
        for user, password in self.sasl_users.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", user):
                raise UsageError(f"invalid SASL user name {user!r} (letters, digits, _ . -)")
            # written into the broker's JAAS line: no quote, backslash, semicolon or space
            if not re.fullmatch(r'[^"\\;\s]{1,128}', password):
                raise UsageError(
                    f"invalid password for SASL user {user!r} (1-128 characters, none of "
                    "quote, backslash, semicolon or whitespace)"
                )
        object.__setattr__(self, "sasl_users", dict(self.sasl_users))
        for key, value in self.broker_configs.items():
            if not BROKER_CONFIG_KEY.fullmatch(key) or not BROKER_CONFIG_VALUE.fullmatch(value):
                raise UsageError(
                    f"invalid broker config {key!r}={value!r} (a key of letters, digits and "
                    "dots; a value on one line)"
                )
        object.__setattr__(self, "broker_configs", dict(self.broker_configs))
        if self.tls not in TLS_MODES:
            raise UsageError(f"tls must be one of {TLS_MODES}, got {self.tls!r}")
        if self.session_timeout_ms < 4 * HEARTBEAT_INTERVAL_MS:
            raise UsageError(
                f"the session timeout must be at least {4 * HEARTBEAT_INTERVAL_MS} ms "
                f"(4 heartbeats), got {self.session_timeout_ms}"
            )
        if self.ready_timeout_seconds <= 0:
            raise UsageError(f"the ready timeout must be > 0 s, got {self.ready_timeout_seconds}")

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> KafkaSettings:
        """The settings the keyword `options` of `Lab(..., engine="kafka", **options)`
        give; an option that is no field of the settings is a usage error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise UsageError(
                f"unknown kafka engine option {', '.join(unknown)} (the options: "
                f"{', '.join(sorted(names))})"
            )
        given = {k: v for k, v in options.items() if not (k == "kafka_version" and v is None)}
        return cls(**given)

    @property
    def kafka_line(self) -> str:
        """The line of `kafka_version`: `4` or `3`."""
        return kafkajars.line_of(self.kafka_version)

    def check(self, brokers: int, topics: Mapping[str, int]) -> None:
        """Refuse (a one-line usage error) settings that do not fit a cluster of `brokers`
        brokers creating `topics`."""
        unknown = sorted(set(self.topic_configs) - set(topics))
        if unknown:
            raise UsageError(f"topic configs for topics the lab does not create: {unknown}")
        if not 1 <= brokers <= MAX_BROKERS:
            raise UsageError(
                f"--brokers must be between 1 and {MAX_BROKERS} on the kafka engine, got {brokers}"
            )
        if self.ports is not None and len(self.ports) != brokers:
            raise UsageError(f"need one client port per broker ({brokers}), got {len(self.ports)}")
