"""The `Lab`: a local Kafka cluster that tests, benchmarks and the demo break on purpose.

Two engines sit behind the one interface. `mock` (the default, `hangwatch_lab.mocklab`)
is librdkafka's in-process emulation of the Kafka protocol: it starts in a fraction of
a second and can make faults only a protocol emulation can (one Produce never
answered, errors pushed onto requests, response delays). `kafka`
(`hangwatch_lab.kafka`) is a real Apache Kafka cluster (the current 4.x by default,
`kafka_version="3.9.2"` for pre-2.1 clients) whose faults have real causes (processes
stopped or frozen, elections by the controller, reassignments) and which can hold what a
control needs (topic configs, automatic topic creation off, SASL users and ACLs, client
quotas).

`Lab(brokers, topics, engine=...)` returns the engine's class; callers use it as a
context manager. This module is the base and knows no engine: the engines' modules
import it, each engine's class registers itself with `Lab` when defined, and
`hangwatch_lab.engines` (imported by the package) is the one module above them that
loads both. It holds what both share: broker states, the status record, kernel
blackholes (iptables rules kept in this process, so they go even when a broker or the
mock crashes) and the faults an engine cannot make.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from confluent_kafka.admin import AdminClient

from hangwatch.errors import LabError, UsageError
from hangwatch_lab import netfilter

log = logging.getLogger(__name__)

ENGINES = ("mock", "kafka")
"""Lab engines: `mock` (librdkafka's protocol emulation, the default) and `kafka` (Apache Kafka)."""

DEFAULT_ENGINE = "mock"
"""The mock stays the default: it starts in well under a second and needs neither Java nor
the jars, and most tests exercise hangwatch's own logic, not a broker's behaviour."""

DOWN_CAUSES = ("stop", "kill")
"""How `down` takes a broker away: `stop` (SIGTERM: Kafka's controlled shutdown, the
default) or `kill` (SIGKILL: a crash, no controlled shutdown; on the kafka engine the way
to take a whole cluster down at once, since the last broker of a KRaft quorum cannot
finish a controlled shutdown). The mock closes the broker's port at once either way."""


def down_cause(how: str | None) -> str:
    """`how` checked against `DOWN_CAUSES` (None: `stop`)."""
    how = how or "stop"
    if how not in DOWN_CAUSES:
        raise UsageError(f"--how for down must be one of {', '.join(DOWN_CAUSES)}, got {how!r}")
    return how


UNRESPONSIVE_RTT_MS = 3_600_000
"""An hour of RTT: the mock broker accepts TCP and reads requests but never answers in time."""


@dataclass
class BrokerState:
    """One broker of the lab and the faults currently applied to it."""

    id: int
    host: str
    port: int
    down: bool = False
    blackholed: bool = False
    refused: bool = False
    """Every packet to its port answered with a TCP reset (`Lab.refuse`)."""
    rtt_ms: int = 0
    produce_stalled: bool = False
    frozen: bool = False
    """kafka engine: the JVM is stopped with SIGSTOP."""
    removed: bool = False
    """kafka engine: decommissioned by `shrink`, never comes back."""
    pid: int = 0
    """kafka engine: the broker's JVM (0 while it is stopped)."""

    @property
    def condition(self) -> str:
        """`up`, `down`, `blackhole`, `refuse`, `unresponsive`, `removed`, `rtt=<ms>ms` or
        `stall-produce`."""
        if self.removed:  # how a client dialing it sees it: dropped, frozen or refused
            return "removed+" + (
                "blackhole" if self.blackholed else "frozen" if self.frozen else "refused"
            )
        if self.blackholed:
            return "blackhole"
        if self.refused:
            return "refuse"
        if self.down:
            return "down"
        if self.frozen or self.rtt_ms >= UNRESPONSIVE_RTT_MS:
            return "unresponsive"
        if self.rtt_ms:
            return f"rtt={self.rtt_ms}ms"
        if self.produce_stalled:
            return "stall-produce"
        return "up"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class LabStatus:
    """What `hangwatch lab status` shows and the control endpoint returns."""

    bootstrap: str
    mock_pid: int
    alive: bool
    brokers: list[dict[str, Any]]
    topics: dict[str, int]
    elections: list[str] = field(default_factory=list)
    chain: str | None = None
    engine: str = DEFAULT_ENGINE
    election_results: list[dict[str, Any]] = field(default_factory=list)
    """kafka engine: each finished election, with how long its partitions lacked a leader."""
    description: str = ""
    """The engine and its version (`Apache Kafka 4.4.0 (KRaft, 3 nodes)`)."""


class Lab:
    """A running lab cluster: `Lab(brokers, topics, engine="mock"|"kafka")` builds the
    engine's subclass; use it as a context manager."""

    engine = DEFAULT_ENGINE

    _engines: ClassVar[dict[str, type[Lab]]] = {}
    """Engine name -> its class: each engine's class registers itself when defined
    (`__init_subclass__`); `hangwatch_lab.engines` imports them all."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "engine" in cls.__dict__:
            Lab._engines[cls.engine] = cls

    @classmethod
    def engine_class(cls, engine: str) -> type[Lab]:
        """The `Lab` subclass of an engine name."""
        if engine not in ENGINES:
            raise UsageError(f"unknown lab engine {engine!r} (choose from {', '.join(ENGINES)})")
        if engine not in Lab._engines:
            raise LabError(f"lab engine {engine!r} not loaded (import hangwatch_lab.engines)")
        return Lab._engines[engine]

    @property
    def engine_description(self) -> str:
        """The Kafka engine behind this lab and its version, as run reports record it."""
        raise NotImplementedError

    def __new__(
        cls,
        brokers: int = 3,
        topics: dict[str, int] | None = None,
        engine: str = DEFAULT_ENGINE,
        **options: Any,
    ) -> Lab:
        chosen = Lab.engine_class(engine) if cls is Lab else cls
        instance: Lab = object.__new__(chosen)
        return instance

    def __init__(
        self,
        brokers: int = 3,
        topics: dict[str, int] | None = None,
        engine: str = DEFAULT_ENGINE,
        **options: Any,
    ) -> None:
        self.broker_count = brokers
        self.topics = dict(topics or {})
        for name, parts in self.topics.items():
            if not name or parts < 1:
                raise UsageError(f"invalid topic {name!r}:{parts} (need name:partitions >= 1)")
        self.brokers: dict[int, BrokerState] = {}
        self.bootstrap = ""
        self.tls_bootstrap = ""
        """kafka engine with `tls`: the brokers' TLS listeners."""
        self.tls_ca: Path | None = None
        """kafka engine with `tls`: the CA certificate (PEM) clients of the TLS listeners
        trust."""
        self.named_bootstrap = ""
        """kafka engine with `hostnames`: the brokers' listeners advertised by hostname."""
        self.hosts_file: Path | None = None
        """kafka engine with `hostnames`: the lab's hosts file, where each broker's name
        is (`hangwatch_lab.kafka.names`)."""
        self._lock = threading.RLock()
        self._blackholes = netfilter.Blackholes()
        self.election_results: list[dict[str, Any]] = []

    # -- lifecycle (each engine) -------------------------------------------------------------
    def start(self) -> Lab:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def mock_pid(self) -> int:
        """The mock cluster's process (0 on the kafka engine: see `broker_pids`)."""
        return 0

    def broker_pids(self) -> dict[int, int]:
        """Broker id -> its process id, where each broker is a process of its own."""
        return {}

    def _broker(self, broker: int) -> BrokerState:
        if broker not in self.brokers:
            raise UsageError(f"no broker {broker} (brokers are 1..{self.broker_count})")
        return self.brokers[broker]

    # -- faults both engines make the same way ------------------------------------------------
    def blackhole(self, broker: int) -> None:
        """Drop every packet to and from the broker in the kernel (a dead host, S0/S3)."""
        state = self._broker(broker)
        with self._lock:
            self._blackholes.add(state.port)
        state.blackholed = True
        log.info("fault blackhole", extra={"broker": broker, "port": state.port})

    def refuse(self, broker: int) -> None:
        """Answer every packet to the broker's port with a TCP reset in the kernel (a
        firewall's REJECT): clients' connections to it are reset at their next packet and
        their connects refused, while the broker runs on. Undone by `restore`."""
        state = self._broker(broker)
        with self._lock:
            self._blackholes.refuse(state.port)
        state.refused = True
        log.info("fault refuse", extra={"broker": broker, "port": state.port})

    def withhold_answers(self, broker: int, pid: int) -> list[int]:
        """The broker stops answering one client: its data to the connections process
        `pid` has open to it is dropped in the kernel, its TCP acknowledgements let
        through, so that client's requests are acknowledged and never answered (a leader
        frozen for it alone, which keeps its leadership and serves everyone else, new
        connections included). Undone by `restore`. Returns the connections' local ports."""
        state = self._broker(broker)
        ports = netfilter.connection_ports(pid, state.port)
        if not ports:
            raise LabError(f"process {pid} has no connection to broker {broker}")
        with self._lock:
            self._blackholes.withhold(state.port, ports)
        log.info("fault withhold-answers", extra={"broker": broker, "pid": pid, "ports": ports})
        return ports

    # -- faults each engine makes its own way -------------------------------------------------
    def down(self, broker: int, how: str | None = None) -> None:
        raise NotImplementedError

    def unresponsive(self, broker: int) -> None:
        raise NotImplementedError

    def election(self, topic: str, seconds: float, how: str | None = None) -> None:
        raise NotImplementedError

    def move_leader(self, topic: str, partition: int, broker: int) -> None:
        raise NotImplementedError

    def restore(self, broker: int | None = None) -> None:
        raise NotImplementedError

    def elections_under_way(self) -> list[str]:
        """Topics whose election has not ended yet."""
        return []

    # -- faults only one engine can make -------------------------------------------------------
    def _needs(self, fault: str, engine: str, why: str) -> UsageError:
        return UsageError(f"fault {fault} needs --engine {engine} ({why})")

    def pause_controllers(self, seconds: float) -> None:
        raise self._needs("pause-controllers", "kafka", "the mock cluster has no controllers")

    def rtt(self, broker: int, rtt_ms: int) -> None:
        raise self._needs("rtt", "mock", "a real broker cannot be told to delay its answers")

    def stall_produce(self, broker: int) -> None:
        raise self._needs(
            "stall-produce", "mock", "a real broker cannot be told to leave one Produce unanswered"
        )

    def request_errors(self, api: str, error: str, count: int) -> None:
        raise self._needs(
            "request-errors", "mock", "a real broker cannot be told to fail requests on demand"
        )

    def shrink(self, to: int, dead: str = "blackhole") -> None:
        raise self._needs("shrink", "kafka", "the mock cannot reassign partitions")

    def move(self, broker: int) -> str:
        raise self._needs("move", "kafka", "the mock's brokers have no names")

    def fix_certificates(self) -> None:
        raise self._needs("fix-certificates", "kafka", "the mock has no TLS listener")

    # -- what controls need (the kafka engine only) --------------------------------------------
    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        raise UsageError("create_topic needs --engine kafka (the mock ignores topic configs)")

    def alter_topic(self, name: str, configs: dict[str, str | None]) -> None:
        raise UsageError("alter_topic needs --engine kafka (the mock ignores topic configs)")

    def grant(
        self, user: str, topic: str, operations: tuple[str, ...] = ("WRITE", "DESCRIBE")
    ) -> None:
        raise UsageError("grant needs --engine kafka (the mock has no SASL users or authorizer)")

    def set_quota(self, client_id: str, **quota: float) -> None:
        raise UsageError("set_quota needs --engine kafka (the mock does not enforce client quotas)")

    # -- observation -------------------------------------------------------------------------
    def status(self) -> LabStatus:
        """Brokers with their condition, topics, elections under way."""
        return LabStatus(
            bootstrap=self.bootstrap,
            mock_pid=self.mock_pid,
            alive=self.alive(),
            brokers=[{**asdict(b), "condition": b.condition} for b in self.brokers.values()],
            topics=dict(self.topics),
            elections=self.elections_under_way(),
            chain=self._blackholes.chain if self._blackholes.active else None,
            engine=self.engine,
            election_results=list(self.election_results),
            description=self.engine_description,
        )

    def admin(self, **conf: Any) -> AdminClient:
        """An AdminClient on the lab (for tests that look at metadata)."""
        return AdminClient({"bootstrap.servers": self.bootstrap, **conf})
