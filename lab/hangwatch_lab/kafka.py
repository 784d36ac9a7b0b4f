"""The lab's real engine: an Apache Kafka cluster (KRaft), 3 combined broker+controller
nodes by default, or `controllers` controller-only nodes apart from the brokers.

`KafkaLab` starts one JVM per node from the jars `hangwatch_lab.kafkajars` resolved
(`kafka_version`: by default the current 4.x; 3.9, the last line that still serves the
incidents' 0.8.2/0.11 clients, on request), on loopback ports the kernel picked, each
with its own formatted storage under one temporary directory. Readiness is observed,
never slept for: the lab is up when a metadata request lists every broker (which needs a
controller quorum and every broker registered and unfenced) and every topic partition
has a leader.

Roles: by default (`controllers=0`) every node is both broker and controller (KRaft's
combined mode), so the quorum needs a majority of the brokers: a shrink keeps more than
half of them. With `controllers=N` the lab starts N controller-only nodes
(`process.roles=controller`, node ids `CONTROLLER_ID_BASE`+1..N, no client listener) and
the brokers as broker-only nodes (`process.roles=broker`, ids 1..M): brokers can then be
stopped or removed down to one while the quorum stays whole, as in a cluster whose
controllers run apart (every managed Kafka service). Faults address brokers only; the
controllers are never a fault's target and stop with the lab.

Faults have real causes: a `down` broker is a process stopped with SIGTERM (Kafka's
own controlled shutdown) and `restore` starts it again on the same ports and data;
`unresponsive` freezes the JVM (SIGSTOP: the kernel still accepts and acknowledges,
nothing answers); `blackhole` drops its packets (iptables, as on the mock); an
`election` freezes the broker that leads every partition of a topic (not the active
controller) until the controller fences it and elects new leaders; `leader` is a real
reassignment plus preferred election with Kafka's own tools; `shrink` reassigns every
partition away from the removed brokers and stops them for good. Protocol-only faults
(`stall-produce`, `request-errors`, `rtt`) belong to the mock engine.

What a control needs from a cluster, each real: topics created with their own configs
(`topic_configs`, `create_topic`: e.g. `max.message.bytes`), automatic topic creation off
(`auto_create_topics=False`), SASL/PLAIN users on a second listener per broker whose
writes Kafka's StandardAuthorizer checks against ACLs (`sasl_users`, `grant`; the
PLAINTEXT listener's principal, User:ANONYMOUS, is the super user the lab's own admin
work, the brokers and the controllers run as), and client quotas (`set_quota`, Kafka's
own ConfigCommand), which the brokers enforce by throttling.

Every JVM is started from one long-lived thread with PR_SET_PDEATHSIG=SIGKILL, so
the brokers die with the lab process even when it is SIGKILLed; `close` kills them
and removes the data directory on every other exit path.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
)
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._metadata import ClusterMetadata
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic

from hangwatch.errors import LabError, LabSetupError, UsageError
from hangwatch_lab import kafkajars, netfilter
from hangwatch_lab.lab import BrokerState, Lab, down_cause

log = logging.getLogger(__name__)

HOST = "127.0.0.1"

BROKER_HEAP = "256m"
"""Maximum heap per broker JVM: a test cluster's few small topics need far less than the
1 GB Kafka's scripts default to."""

JVM_OPTIONS = (
    "-Xms32m",
    f"-Xmx{BROKER_HEAP}",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:MaxMetaspaceSize=160m",
    "-Djava.awt.headless=true",
)
"""Small heap, one GC thread and the quick JIT tier: three brokers share two cores with
the tests that drive them."""

TOOL_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

SESSION_TIMEOUT_MS = 1500
"""`broker.session.timeout.ms`: how long the controller waits for a broker's heartbeat
before fencing it and electing new leaders for its partitions, hence how long an
election caused by a frozen leader lasts (managed Kafka services elect in 1-2 s; Kafka's
default is 9 s)."""

HEARTBEAT_INTERVAL_MS = 250
"""`broker.heartbeat.interval.ms`, well below the session timeout."""

READY_TIMEOUT_SECONDS = 180.0
"""How long a cluster (or one restarted broker) may take to become ready."""

TOOL_TIMEOUT_SECONDS = 120.0
ELECTION_GRACE_SECONDS = 60.0
"""How long past its planned end an election may go without new leaders before the frozen
broker is continued anyway (its result then says `leaderless_seconds: None`)."""
STOP_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05
TRANSIENT_ADMIN_ERRORS = frozenset(
    {
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
    }
)
"""Admin request errors of a cluster still forming (or of a replaced bootstrap
connection): the request is sent again."""

ELECTION_CAUSES = ("freeze", "kill")
"""How `election` takes the leader away: SIGSTOP (a pause; connections hang) or SIGKILL
(a crash; connections reset)."""

DEAD_MODES = ("blackhole", "refused", "frozen")
"""How a broker removed by `shrink` looks to a client that still dials it: a host gone
from the network (SYNs dropped), a closed port, or a frozen process (TCP accepted, never
answered)."""

DATA_PREFIX = "hangwatch-kafka-"

CONTROLLER_ID_BASE = 100
"""Controller-only nodes are ids 101, 102, ... (brokers keep 1..M, the ids clients see)."""

MAX_CONTROLLERS = 5

DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL")
"""Prefix of every broker command: util-linux's setpriv sets PR_SET_PDEATHSIG=SIGKILL and
execs the JVM, so the broker is killed when the thread that started it goes away."""


class _Spawner:
    """Starts broker JVMs from one thread that lives as long as the lab.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so brokers
    restarted from a control-endpoint request thread would die with that request;
    starting every broker here ties them to the lab's lifetime instead.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], list[Any], threading.Event] | None] = (
            queue.Queue()
        )
        self._thread = threading.Thread(target=self._run, name="kafka-lab-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, box, done = job
            try:
                box.append(fn())
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                box.append(exc)  # raised in the caller's thread
            done.set()

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        box: list[Any] = []
        done = threading.Event()
        self._jobs.put((lambda: subprocess.Popen([*DIE_WITH_PARENT, *args], **kwargs), box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        proc: subprocess.Popen[bytes] = box[0]
        return proc

    def close(self) -> None:
        self._jobs.put(None)


@dataclass
class _Node:
    """One KRaft node's files and process."""

    id: int
    port: int
    """The client (PLAINTEXT) listener's port (0: a controller-only node has none)."""
    controller_port: int
    """The CONTROLLER listener's port (0: a broker-only node has none)."""
    dir: Path
    sasl_port: int = 0
    """The SASL_PLAINTEXT listener's port (0: none)."""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def roles(self) -> str:
        """`process.roles`: broker, controller or both."""
        return ",".join(
            role
            for role, port in (("broker", self.port), ("controller", self.controller_port))
            if port
        )

    @property
    def config(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"


def _java() -> str:
    """`$JAVA_HOME/bin/java` when JAVA_HOME is set (as Kafka's own scripts do), else `java`."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise LabSetupError(
                f"starting the Kafka engine: JAVA_HOME={home} has no bin/java; point JAVA_HOME "
                "at a Java 17+ runtime or unset it"
            )
        return str(java)
    found = shutil.which("java")
    if found is None:
        raise LabSetupError(
            "starting the Kafka engine: java not found; install a Java 17+ runtime "
            "(apt-get install openjdk-17-jre-headless) or use --engine mock"
        )
    return found


def _free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports the kernel picked (held open together, then freed)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((HOST, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


START_ATTEMPTS = 3
"""Starts of a cluster on kernel-picked ports: another process may bind a port the lab
picked before the node that was to listen on it does (the kernel freed it between the
pick and the bind: a race no choice of port avoids), so a start is made again on new
ports, at most this many times in all. Ports a caller fixed are never retried."""


class PortTakenError(LabSetupError):
    """A port the lab picked was taken before its node listened on it."""


def _port_in_use(port: int) -> bool:
    """True when something listens on 127.0.0.1:port (a broker could not bind it)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def run_state(pid: int) -> str:
    """The kernel's run state of `pid` (R, S, D, T for stopped, ...), `gone` once it is."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, never starting
    with "-" (kafka-storage's argument parser would take it for an option: "argument
    --cluster-id/-t: expected one argument", 1 start in 64; Kafka's own Uuid.randomUuid
    skips those ids too)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _cause(log_file: Path) -> str:
    """The most telling line of a broker's log: the first ERROR/FATAL or exception."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in lines:
        if "Address already in use" in line:
            return "Address already in use"
    for line in lines:
        if re.search(r"\b(ERROR|FATAL)\b|Exception|Error:", line):
            return line.strip()[:300]
    return lines[-1].strip()[:300] if lines else "empty log"


def remove_stale_data_dirs() -> list[Path]:
    """Remove data directories of Kafka labs whose process is gone (a SIGKILLed lab)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{DATA_PREFIX}*"):
        match = re.match(rf"{DATA_PREFIX}(\d+)-", path.name)
        if match and not netfilter.pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


LOG4J = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.storage=WARN
log4j.logger.kafka.log=WARN
"""

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = warn
logger.storage.name = org.apache.kafka.storage
logger.storage.level = warn
logger.log.name = kafka.log
logger.log.level = warn
"""
"""Kafka 4's logging (log4j 2, properties syntax): the same levels as `LOG4J`'s."""

TOOLS_LOG4J = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
"""

CONFIG_COMMAND = {
    "3": "kafka.admin.ConfigCommand",
    "4": "org.apache.kafka.tools.ConfigCommand",
}
"""Kafka's ConfigCommand (`kafka-configs.sh`) per line: 4.0 moved it from core to tools."""

SASL_LISTENER = "SASL_PLAINTEXT"
SASL_MECHANISM = "PLAIN"
LAB_SUPER_USER = "User:ANONYMOUS"
"""The principal of the PLAINTEXT and controller listeners: the lab's own admin work, the
brokers' replication and the controllers run as it, so it is the authorizer's super user;
ACLs apply to the SASL listener's users."""

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's authorizer under KRaft (ACLs kept in the metadata log)."""

TOPIC_OPERATIONS = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER")
"""The topic operations `grant` accepts (names of Kafka's AclOperation)."""

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
"""The client quotas `set_quota` accepts (Kafka's quota config names)."""


class KafkaLab(Lab):
    """A running Apache Kafka cluster of `brokers` KRaft nodes with the given topics:
    combined broker+controller nodes, or broker-only nodes beside `controllers`
    controller-only ones."""

    engine = "kafka"

    @property
    def engine_description(self) -> str:
        if self.controllers:
            return (
                f"Apache Kafka {self.kafka_version} (KRaft, {self.broker_count} brokers, "
                f"{self.controllers} controllers)"
            )
        return f"Apache Kafka {self.kafka_version} (KRaft, {self.broker_count} nodes)"

    def __init__(
        self,
        brokers: int = 3,
        topics: dict[str, int] | None = None,
        engine: str = "kafka",
        *,
        ports: list[int] | None = None,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        ready_timeout_seconds: float = READY_TIMEOUT_SECONDS,
        host: str = HOST,
        kafka_version: str | None = None,
        topic_configs: dict[str, dict[str, str]] | None = None,
        auto_create_topics: bool = True,
        sasl_users: dict[str, str] | None = None,
        controllers: int = 0,
    ) -> None:
        super().__init__(brokers, topics)
        if not 0 <= controllers <= MAX_CONTROLLERS:
            raise UsageError(
                f"--controllers must be between 0 (every broker also a controller) and "
                f"{MAX_CONTROLLERS}, got {controllers}"
            )
        self.controllers = controllers
        """Controller-only nodes (0: KRaft's combined mode, every broker a controller)."""
        self.kafka_version = kafka_version or kafkajars.default_version()
        """The Apache Kafka release the cluster runs (`4.x.y` or `3.9.z`)."""
        self.kafka_line = kafkajars.line_of(self.kafka_version)
        unknown = sorted(set(topic_configs or {}) - set(self.topics))
        if unknown:
            raise UsageError(f"topic configs for topics the lab does not create: {unknown}")
        self.topic_configs = {t: dict(c) for t, c in (topic_configs or {}).items()}
        self.auto_create_topics = auto_create_topics
        for user, password in (sasl_users or {}).items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", user):
                raise UsageError(f"invalid SASL user name {user!r} (letters, digits, _ . -)")
            # written into the broker's JAAS line: no quote, backslash, semicolon or space
            if not re.fullmatch(r'[^"\\;\s]{1,128}', password):
                raise UsageError(
                    f"invalid password for SASL user {user!r} (1-128 characters, none of "
                    "quote, backslash, semicolon or whitespace)"
                )
        self.sasl_users = dict(sasl_users or {})
        self.sasl_bootstrap = ""
        """The SASL_PLAINTEXT listeners (empty without `sasl_users`): clients there are
        authenticated and authorized against the ACLs."""
        if not 1 <= brokers <= 9:
            raise UsageError(
                f"--brokers must be between 1 and 9 on the kafka engine, got {brokers}"
            )
        if ports is not None and len(ports) != brokers:
            raise UsageError(f"need one client port per broker ({brokers}), got {len(ports)}")
        if session_timeout_ms < 4 * HEARTBEAT_INTERVAL_MS:
            raise UsageError(
                f"the session timeout must be at least {4 * HEARTBEAT_INTERVAL_MS} ms "
                f"(4 heartbeats), got {session_timeout_ms}"
            )
        if ready_timeout_seconds <= 0:
            raise UsageError(f"the ready timeout must be > 0 s, got {ready_timeout_seconds}")
        self.host = host
        """The address the brokers' client listeners bind and advertise (loopback unless
        clients elsewhere, e.g. pods on a node's bridge, must reach them; the controller
        listeners stay on loopback)."""
        self.session_timeout_ms = session_timeout_ms
        self.ready_timeout_seconds = ready_timeout_seconds
        self.start_seconds = 0.0
        self.election_results: list[dict[str, Any]] = []
        self._fixed_ports = ports
        self._nodes: dict[int, _Node] = {}
        """The brokers' nodes (combined broker+controller nodes without `controllers`)."""
        self._controller_nodes: dict[int, _Node] = {}
        """Controller-only nodes, by node id (empty in combined mode)."""
        self.data_dir: Path | None = None
        """The cluster's configs, logs and data (`$TMPDIR/hangwatch-kafka-<pid>-*`), removed
        by `close`."""
        self._java = ""
        self._lib: Path | None = None
        self._spawner: _Spawner | None = None
        self._closed = threading.Event()
        self._election_threads: dict[str, threading.Thread] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> KafkaLab:
        """Resolve the jars if needed, format and start every node, wait until ready."""
        started = time.monotonic()
        netfilter.remove_stale_chains()
        remove_stale_data_dirs()
        self._java = _java()
        self._lib = kafkajars.ensure_jars(self.kafka_version)
        atexit.register(self.close)
        try:
            self._start_nodes_retrying()
            self._create_topics(self.topics)
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - started
        log.info(
            "lab up",
            extra={
                "engine": "kafka",
                "version": self.kafka_version,
                "bootstrap": self.bootstrap,
                "seconds": round(self.start_seconds, 1),
            },
        )
        return self

    def _start_nodes_retrying(self) -> None:
        """`_start_nodes`, again on new ports (`START_ATTEMPTS`) when a port it picked was
        taken before its node listened on it; with fixed ports, the error at once."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_nodes()
                return
            except PortTakenError as exc:
                if self._fixed_ports or attempt == START_ATTEMPTS:
                    raise
                log.warning(
                    "a port was taken while starting; starting again on new ports",
                    extra={"attempt": attempt, "error": str(exc)},
                )
                self._discard_nodes()
                self._nodes.clear()
                self._controller_nodes.clear()
                self.brokers.clear()

    def _discard_nodes(self) -> None:
        """Kill every node's JVM (frozen ones woken first), end their spawner, remove
        their files: a failed start's, or the lab's at `close` (which keeps the nodes'
        records for what reads them after)."""
        nodes = list(self._all_nodes().values())
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)
                node.proc.kill()
        for node in nodes:
            if node.proc is not None:
                node.proc.wait()
        if self._spawner is not None:
            self._spawner.close()
            self._spawner = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _start_nodes(self) -> None:
        n = self.broker_count
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{DATA_PREFIX}{os.getpid()}-"))
        log4j2 = self.kafka_line != "3"
        (self.data_dir / "tools-log4j.properties").write_text(
            TOOLS_LOG4J2 if log4j2 else TOOLS_LOG4J
        )
        (self.data_dir / "log4j.properties").write_text(LOG4J2 if log4j2 else LOG4J)
        client_ports = self._fixed_ports or []
        sasl = n if self.sasl_users else 0
        quorum = self.controllers or n
        picked = _free_ports(n + quorum + sasl - len(client_ports))
        client_ports = client_ports or picked[:n]
        controller_ports = picked[len(picked) - quorum - sasl : len(picked) - sasl]
        sasl_ports = picked[len(picked) - sasl :]
        for c in range(1, self.controllers + 1):
            cid = CONTROLLER_ID_BASE + c
            controller = _Node(cid, 0, controller_ports[c - 1], self.data_dir / f"controller{c}")
            self._require_free_ports(controller, f"starting controller {cid}")
            controller.dir.mkdir()
            self._controller_nodes[cid] = controller
        for i in range(1, n + 1):
            node = _Node(
                i,
                client_ports[i - 1],
                0 if self.controllers else controller_ports[i - 1],
                self.data_dir / f"node{i}",
                sasl_port=sasl_ports[i - 1] if sasl else 0,
            )
            self._require_free_ports(node, f"starting broker {i}")
            node.dir.mkdir()
            self._nodes[i] = node
            self.brokers[i] = BrokerState(id=i, host=self.host, port=node.port)
        self.bootstrap = ",".join(b.address for b in self.brokers.values())
        self.sasl_bootstrap = ",".join(
            f"{self.host}:{node.sasl_port}" for node in self._nodes.values() if node.sasl_port
        )
        voters = ",".join(
            f"{i}@{HOST}:{node.controller_port}"
            for i, node in self._all_nodes().items()
            if node.controller_port
        )
        for node in self._all_nodes().values():
            node.config.write_text(self._properties(node, voters))
        log.info(
            "formatting storage",
            extra={"brokers": n, "controllers": self.controllers, "dir": str(self.data_dir)},
        )
        self._format_storage()
        self._spawner = _Spawner()
        for controller in self._controller_nodes.values():
            self._spawn(controller)
        for node in self._nodes.values():
            self._spawn(node)
        log.info("waiting for every broker to be listed by every broker", extra={"brokers": n})
        self._wait_ready(set(self._nodes), "starting the cluster")

    def _all_nodes(self) -> dict[int, _Node]:
        """Every node by id: the controller-only ones first, then the brokers."""
        return {**self._controller_nodes, **self._nodes}

    @staticmethod
    def _require_free_ports(node: _Node, step: str) -> None:
        for port in (node.port, node.controller_port, node.sasl_port):
            if not port:
                continue
            if _port_in_use(port):
                raise PortTakenError(
                    f"{step}: port {HOST}:{port} is in use; stop what listens there "
                    "(or let the kernel pick the ports of a new lab)"
                )

    def _properties(self, node: _Node, voters: str) -> str:
        replication = min(3, self.broker_count)
        listeners = [f"PLAINTEXT://{self.host}:{node.port}"] if node.port else []
        if node.sasl_port:
            listeners.append(f"{SASL_LISTENER}://{self.host}:{node.sasl_port}")
        controller = [f"CONTROLLER://{HOST}:{node.controller_port}"] if node.controller_port else []
        broker: dict[str, Any] = (
            {"advertised.listeners": ",".join(listeners), "inter.broker.listener.name": "PLAINTEXT"}
            if node.port
            else {}
        )
        props: dict[str, Any] = {
            "process.roles": node.roles,
            "node.id": node.id,
            "controller.quorum.voters": voters,
            "listeners": ",".join([*listeners, *controller]),
            **broker,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": (
                f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{SASL_LISTENER}:{SASL_LISTENER}"
            ),
            "log.dirs": node.dir / "data",
            "broker.session.timeout.ms": self.session_timeout_ms,
            "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "auto.leader.rebalance.enable": "false",
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "num.partitions": 3,
            "default.replication.factor": replication,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": replication,
            "offsets.topic.num.partitions": 3,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.replica.fetchers": 1,
            "num.recovery.threads.per.data.dir": 1,
            "background.threads": 2,
            "log.cleaner.enable": "false",
            "unclean.leader.election.enable": "false",
        }
        if self.sasl_users:
            users = " ".join(f'user_{u}="{p}"' for u, p in sorted(self.sasl_users.items()))
            props |= {
                "authorizer.class.name": AUTHORIZER,
                "super.users": LAB_SUPER_USER,
                "sasl.enabled.mechanisms": SASL_MECHANISM,
                f"listener.name.{SASL_LISTENER.lower()}.plain.sasl.jaas.config": (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
                ),
            }
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _java_command(
        self, options: tuple[str, ...], main: str, *args: str, tools: bool
    ) -> list[str]:
        assert self.data_dir is not None and self._lib is not None
        log4j = self.data_dir / ("tools-log4j.properties" if tools else "log4j.properties")
        setting = "log4j.configuration" if self.kafka_line == "3" else "log4j2.configurationFile"
        return [
            self._java,
            *options,
            f"-D{setting}=file:{log4j}",
            "-cp",
            f"{self._lib}/*",
            main,
            *args,
        ]

    def _format_storage(self) -> None:
        cluster_id = _cluster_id()
        procs: dict[int, subprocess.Popen[bytes]] = {}
        failures = []
        try:
            for i, node in self._all_nodes().items():
                procs[i] = subprocess.Popen(
                    self._java_command(
                        TOOL_OPTIONS,
                        "kafka.tools.StorageTool",
                        "format",
                        # one argument: an id may start with "-", which argparse would
                        # take for an option ("expected one argument")
                        f"--cluster-id={cluster_id}",
                        "-c",
                        str(node.config),
                        tools=True,
                    ),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            for i, proc in procs.items():
                try:
                    out, _ = proc.communicate(timeout=TOOL_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, _ = proc.communicate()
                if proc.returncode != 0:
                    lines = out.decode(errors="replace").strip().splitlines() or ["no output"]
                    failures.append(f"node {i}: {lines[-1][:200]}")
        finally:  # interrupted (Ctrl-C while starting): no formatter outlives the lab
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if failures:
            raise LabSetupError(
                f"formatting Kafka storage failed ({'; '.join(failures)}); "
                "check the Java version (17+) and the jars (python3 -m hangwatch_lab.kafkajars)"
            )

    def _spawn(self, node: _Node) -> None:
        assert self._spawner is not None
        with node.log_file.open("ab") as out:
            node.proc = self._spawner.popen(
                self._java_command(JVM_OPTIONS, "kafka.Kafka", str(node.config), tools=False),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if node.port:
            self.brokers[node.id].pid = node.proc.pid
        log.info("node started", extra={"node": node.id, "roles": node.roles, "pid": node.proc.pid})

    def _metadata(self, bootstrap: str | None = None, timeout: float = 2.0) -> ClusterMetadata:
        admin = AdminClient(
            {
                "bootstrap.servers": bootstrap or self._healthy_bootstrap(),
                "log_level": 0,
                "socket.connection.setup.timeout.ms": int(timeout * 1000),
            }
        )
        return admin.list_topics(timeout=timeout)

    def _healthy_bootstrap(self) -> str:
        """Addresses of brokers that should answer (not down, frozen, blackholed or removed)."""
        healthy = [b.address for b in self.brokers.values() if b.condition == "up"]
        if not healthy:
            raise LabError("no broker of the lab is up; restore one first")
        return ",".join(healthy)

    def _wait_ready(self, ids: set[int], step: str) -> None:
        """Until every reachable broker's own metadata lists every registered broker,
        `ids` included (each broker learns of the others one by one)."""
        deadline = time.monotonic() + self.ready_timeout_seconds
        last = "no answer yet"
        while True:
            for i in ids:
                self._check_running(i, step)
            for cid in self._controller_nodes:
                self._check_running(cid, step)
            registered = ids | {
                b.id for b in self.brokers.values() if not (b.down or b.removed or b.frozen)
            }
            try:
                for b in self.brokers.values():
                    if b.condition != "up":
                        continue
                    listed = set(self._metadata(b.address, timeout=1.0).brokers)
                    if not registered <= listed:
                        last = f"broker {b.id} lists brokers {sorted(listed)}"
                        break
                else:
                    return
            except KafkaException as exc:  # while the cluster forms
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                raise LabSetupError(
                    f"{step}: brokers {sorted(ids)} not ready within "
                    f"{self.ready_timeout_seconds:g} s ({last}); the machine may be "
                    "overloaded: retry, or raise --ready-timeout"
                )
            time.sleep(0.2)

    def _check_running(self, node_id: int, step: str) -> None:
        node = self._all_nodes()[node_id]
        if node.proc is not None and node.proc.poll() is not None:
            cause = _cause(node.log_file)
            ports = " or ".join(str(p) for p in (node.port, node.controller_port) if p)
            hint = (
                f"port {HOST}:{ports} was taken; retry"
                if "Address already in use" in cause
                else "see the cause above"
            )
            kind = "broker" if node.port else "controller"
            error = PortTakenError if "Address already in use" in cause else LabSetupError
            raise error(
                f"{step}: {kind} {node_id} exited (code {node.proc.returncode}): {cause}; {hint}"
            )

    def _create_topics(self, topics: dict[str, int]) -> None:
        """Create `topics` (each with its `topic_configs`), again for those whose request
        failed transiently: the admin client replaces its bootstrap connections by the
        brokers it learns of, and a request in flight on a replaced one fails with
        `_DESTROY_BROKER` (seen in about one start in ten on a loaded machine). A topic the
        first try created already exists on the next."""
        if not topics:
            return
        replication = min(3, self.broker_count)
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        pending = dict(topics)
        deadline = time.monotonic() + 60
        while pending:
            futures = admin.create_topics(
                [
                    NewTopic(name, parts, replication, config=self.topic_configs.get(name, {}))
                    for name, parts in pending.items()
                ],
                operation_timeout=30,
            )
            for name, future in futures.items():
                try:
                    future.result(timeout=60)
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else None
                    code = error.code() if isinstance(error, KafkaError) else None
                    if code == KafkaError.TOPIC_ALREADY_EXISTS:
                        pass
                    elif code in TRANSIENT_ADMIN_ERRORS and time.monotonic() < deadline:
                        continue
                    else:
                        raise LabError(f"creating topic {name} failed: {exc}") from None
                pending.pop(name)
            if pending:
                time.sleep(0.5)
        self._wait_leaders(set(topics), "creating topics")

    # -- what controls need: topic configs, ACLs, quotas ---------------------------------------
    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        """Create one more topic with its own configs (e.g. `{"max.message.bytes": "200"}`),
        returned once every broker shows a leader for each of its partitions. A config Kafka
        refuses is a LabError naming it."""
        if not name or partitions < 1:
            raise UsageError(f"invalid topic {name!r}:{partitions} (need name:partitions >= 1)")
        if name in self.topics:
            raise UsageError(f"topic {name!r} exists already")
        self.topic_configs[name] = dict(configs or {})
        try:
            self._create_topics({name: partitions})
        except BaseException:
            self.topic_configs.pop(name, None)
            raise
        self.topics[name] = partitions
        log.info(
            "topic created", extra={"topic": name, "partitions": partitions, **(configs or {})}
        )

    def alter_topic(self, name: str, configs: dict[str, str | None]) -> None:
        """Change a running topic's configs (`{"max.message.bytes": "200"}`; None removes the
        override, back to the broker's default), returned once every broker describes the
        topic with them (each applies them from the metadata log in its own time). A config
        Kafka refuses is a LabError naming it."""
        if name not in self.topics:
            raise UsageError(f"no topic {name!r} in this lab (topics: {', '.join(self.topics)})")
        if not configs:
            raise UsageError("alter_topic needs at least one config")
        entries = [
            ConfigEntry(
                key,
                value,
                incremental_operation=AlterConfigOpType.DELETE
                if value is None
                else AlterConfigOpType.SET,
            )
            for key, value in configs.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        try:
            admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        except KafkaException as exc:
            raise LabError(f"altering topic {name} ({configs}) failed: {exc}") from None
        deadline = time.monotonic() + 60
        for state in self.brokers.values():
            if state.condition != "up":
                continue
            one = AdminClient({"bootstrap.servers": state.address, "log_level": 0})
            while not self._configs_applied(one, name, configs):
                if time.monotonic() > deadline:
                    raise LabError(f"broker {state.id} did not apply {configs} to {name} in 60 s")
                time.sleep(POLL_SECONDS * 4)
        self.topic_configs.setdefault(name, {}).update(
            {k: v for k, v in configs.items() if v is not None}
        )
        for key in (k for k, v in configs.items() if v is None):
            self.topic_configs[name].pop(key, None)
        log.info("topic altered", extra={"topic": name, "configs": configs})

    @staticmethod
    def _configs_applied(admin: AdminClient, name: str, configs: dict[str, str | None]) -> bool:
        """Whether `admin`'s broker describes topic `name` with `configs` (None: no override,
        the value is the broker's default)."""
        resource = ConfigResource(ResourceType.TOPIC, name)
        try:
            described = admin.describe_configs([resource])[resource].result(timeout=10)
        except KafkaException:
            return False
        for key, value in configs.items():
            entry = described.get(key)
            if entry is None:
                return False
            if value is None and ConfigSource(entry.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                return False
            if value is not None and entry.value != value:
                return False
        return True

    def grant(
        self, user: str, topic: str, operations: tuple[str, ...] = ("WRITE", "DESCRIBE")
    ) -> None:
        """Allow SASL user `user` the `operations` on `topic` (literal ACLs, any host), returned
        once every broker's authorizer lists them (each learns them from the metadata log in
        its own time). Other users and other topics stay denied."""
        if user not in self.sasl_users:
            users = ", ".join(sorted(self.sasl_users)) or "none; start it with sasl_users"
            raise UsageError(f"no SASL user {user!r} in this lab (users: {users})")
        bad = [op for op in operations if op not in TOPIC_OPERATIONS]
        if bad or not operations:
            raise UsageError(
                f"ACL operations must be among {', '.join(TOPIC_OPERATIONS)}, "
                f"got {list(operations)}"
            )
        principal = f"User:{user}"
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                principal,
                "*",
                AclOperation[op],
                AclPermissionType.ALLOW,
            )
            for op in operations
        ]
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        for future in admin.create_acls(bindings).values():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                raise LabError(
                    f"granting {', '.join(operations)} on {topic} to {user} failed: {exc}"
                ) from None
        wanted = {AclOperation[op] for op in operations}
        query = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        deadline = time.monotonic() + 60
        for state in self.brokers.values():
            if state.condition != "up":
                continue
            one = AdminClient({"bootstrap.servers": state.address, "log_level": 0})
            while True:
                try:
                    listed = {b.operation for b in one.describe_acls(query).result(timeout=10)}
                    if wanted <= listed:
                        break
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    raise LabError(
                        f"broker {state.id} did not list the ACLs for {user} on {topic} within 60 s"
                    )
                time.sleep(POLL_SECONDS * 4)
        log.info(
            "acls granted", extra={"user": user, "topic": topic, "operations": list(operations)}
        )

    def set_quota(self, client_id: str, **quota: float) -> None:
        """Set client quotas for a client id with Kafka's own ConfigCommand, e.g.
        `set_quota("slow", producer_byte_rate=2048)`: the brokers delay their answers to
        that client (and tell it how long: the throttle time) once it goes over."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", client_id):
            raise UsageError(f"invalid client id {client_id!r} (letters, digits, _ . -)")
        bad = sorted(set(quota) - set(QUOTA_KEYS))
        if bad or not quota:
            raise UsageError(f"quotas must be among {', '.join(QUOTA_KEYS)}, got {sorted(quota)}")
        if any(not value > 0 for value in quota.values()):
            raise UsageError(f"quota values must be > 0, got {quota}")
        settings = ",".join(f"{key}={value:g}" for key, value in sorted(quota.items()))
        self._tool(
            CONFIG_COMMAND[self.kafka_line],
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "--alter",
            "--add-config",
            settings,
            "--entity-type",
            "clients",
            "--entity-name",
            client_id,
        )
        log.info("quota set", extra={"client_id": client_id, **quota})

    def _wait_leaders(
        self,
        topics: set[str],
        step: str,
        accept: Callable[[str, int, Any], bool] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Until every healthy broker's own metadata shows every partition of `topics` with
        a leader (and satisfying `accept`): brokers learn metadata changes one by one, so
        asking one of them is not enough."""
        deadline = time.monotonic() + timeout
        last = "no metadata yet"
        while True:
            try:
                lagging = [
                    f"broker {b.id}: {waiting}"
                    for b in self.brokers.values()
                    if b.condition == "up"
                    and (waiting := self._unsettled(self._metadata(b.address), topics, accept))
                ]
                if not lagging:
                    return
                last = lagging[0]
            except KafkaException as exc:
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                raise LabError(f"{step}: not done within {timeout:.0f} s ({last})")
            time.sleep(POLL_SECONDS * 4)

    @staticmethod
    def _unsettled(
        md: ClusterMetadata, topics: set[str], accept: Callable[[str, int, Any], bool] | None
    ) -> str:
        """What in `md` is not there yet: missing topics, leaderless or unaccepted partitions."""
        missing = [t for t in topics if t not in md.topics or md.topics[t].error]
        pending = [
            f"{t}/{p}"
            for t in topics
            if t not in missing
            for p, part in md.topics[t].partitions.items()
            if part.leader < 0 or (accept is not None and not accept(t, p, part))
        ]
        return ", ".join((missing + pending)[:5])

    def close(self) -> None:
        """Kill every broker JVM, remove kernel rules and the data directory; idempotent."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._blackholes.close()
            had_nodes = bool(self._all_nodes())
        for thread in list(self._election_threads.values()):
            thread.join(timeout=5)
        self._discard_nodes()
        atexit.unregister(self.close)
        if had_nodes:
            log.info("lab down", extra={"engine": "kafka", "bootstrap": self.bootstrap})

    def alive(self) -> bool:
        """True while every broker that should run (not down, not removed) and every
        controller-only node runs."""
        if self._closed.is_set() or not self._nodes:
            return False
        controllers = list(self._controller_nodes.values())
        return all(
            node.proc is not None and node.proc.poll() is None
            for node in [*controllers, *self._nodes.values()]
            if node.id in self._controller_nodes
            or (not self.brokers[node.id].down and not self.brokers[node.id].removed)
        )

    def controller_pids(self) -> dict[int, int]:
        """Controller-only node id -> JVM pid, for those whose process exists (empty in
        combined mode)."""
        return {
            i: node.proc.pid
            for i, node in self._controller_nodes.items()
            if node.proc is not None and node.proc.poll() is None
        }

    def broker_pids(self) -> dict[int, int]:
        """Broker id -> JVM pid, for brokers whose process exists."""
        return {
            i: node.proc.pid
            for i, node in self._nodes.items()
            if node.proc is not None and node.proc.poll() is None
        }

    # -- tools -------------------------------------------------------------------------------
    def _tool(self, main: str, *args: str) -> str:
        """Run one of Kafka's own admin tools against the healthy brokers; its stdout."""
        command = self._java_command(TOOL_OPTIONS, main, *args, tools=True)
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            raise LabError(
                f"{main.rsplit('.', 1)[-1]} did not finish within {TOOL_TIMEOUT_SECONDS:.0f} s"
            ) from None
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
            raise LabError(
                f"{main.rsplit('.', 1)[-1]} failed (exit {proc.returncode}): {lines[-1][:300]}"
            )
        return proc.stdout

    def active_controller(self) -> int:
        """The node id of the KRaft quorum's leader (the active controller)."""
        out = self._tool(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "describe",
            "--status",
        )
        found = re.search(r"LeaderId:\s*(\d+)", out)
        if not found:
            raise LabError(f"could not read the active controller from: {out.strip()[:200]}")
        return int(found.group(1))

    def _reassign(self, assignment: dict[tuple[str, int], list[int]]) -> None:
        """Move partitions to the given replica lists (ReassignPartitionsCommand) and wait."""
        assert self.data_dir is not None
        plan = {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": replicas}
                for (t, p), replicas in sorted(assignment.items())
            ],
        }
        path = self.data_dir / f"reassign-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(plan))
        self._tool(
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "--reassignment-json-file",
            str(path),
            "--execute",
        )
        topics = {t for t, _ in assignment}
        self._wait_leaders(
            topics,
            "reassigning partitions",
            accept=lambda t, p, part: (
                (t, p) not in assignment
                or (
                    list(part.replicas) == assignment[(t, p)]
                    and set(part.isrs) <= set(part.replicas)
                )
            ),
            timeout=120,
        )

    def _preferred_election(self, partitions: list[tuple[str, int]]) -> None:
        """Make each partition's first replica its leader (LeaderElectionCommand, preferred)."""
        assert self.data_dir is not None
        path = self.data_dir / f"elect-{time.monotonic_ns()}.json"
        path.write_text(
            json.dumps({"partitions": [{"topic": t, "partition": p} for t, p in partitions]})
        )
        try:
            self._tool(
                "org.apache.kafka.tools.LeaderElectionCommand",
                "--bootstrap-server",
                self._healthy_bootstrap(),
                "--election-type",
                "preferred",
                "--path-to-json-file",
                str(path),
            )
        except LabError as exc:
            # A partition already led by its preferred replica is reported as an error.
            if "already elected" not in str(exc).lower() and "ELECTION_NOT_NEEDED" not in str(exc):
                raise

    def _lead_from(self, topic: str, partitions: list[int], broker: int) -> None:
        """Make `broker` the leader of the partitions: it goes first in their replica
        lists (a real reassignment), then a preferred election."""
        md = self._metadata()
        if topic not in md.topics:
            raise UsageError(f"unknown topic {topic!r}")
        assignment = {}
        for p in partitions:
            part = md.topics[topic].partitions.get(p)
            if part is None:
                raise UsageError(f"topic {topic} has no partition {p}")
            replicas = [r for r in part.replicas if r != broker]
            if broker not in part.replicas and replicas:
                replicas.pop()  # keep the replication factor
            assignment[(topic, p)] = [broker, *replicas]
        self._reassign(assignment)
        self._preferred_election(list(assignment))
        self._wait_leaders(
            {topic},
            f"electing broker {broker} leader of {topic}",
            accept=lambda t, p, part: p not in partitions or part.leader == broker,
        )

    # -- faults ------------------------------------------------------------------------------
    def _live(self, broker: int, fault: str) -> tuple[BrokerState, _Node]:
        state = self._broker(broker)
        if state.removed:
            raise LabError(f"broker {broker} was removed by shrink; {fault} does not apply")
        return state, self._nodes[broker]

    def down(self, broker: int, how: str | None = None) -> None:
        """Stop the broker's process, port closed: `how` `stop` (SIGTERM: Kafka's controlled
        shutdown, up to the stop timeout) or `kill` (SIGKILL: a crash, at once)."""
        how = down_cause(how)
        state, node = self._live(broker, "down")
        if state.down:
            return
        state.down = True  # first: `alive()` must not take the stopping broker for a crash
        self._stop(node, kill=how == "kill")
        state.pid = 0
        log.info("fault down", extra={"broker": broker, "how": how})

    def _stop(self, node: _Node, kill: bool = False) -> None:
        """End the broker's JVM: SIGTERM (a controlled shutdown, SIGKILL after the stop
        timeout) or, with `kill`, SIGKILL at once (a crash)."""
        proc = node.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)
        self.brokers[node.id].frozen = False
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def unresponsive(self, broker: int) -> None:
        """Freeze the broker's JVM (SIGSTOP): TCP still accepted and acknowledged, no answer."""
        state, node = self._live(broker, "unresponsive")
        if state.down or node.proc is None:
            raise LabError(f"broker {broker} is down; restore it before freezing it")
        self._freeze(node)
        log.info("fault unresponsive", extra={"broker": broker, "pid": node.proc.pid})

    def _freeze(self, node: _Node) -> None:
        """SIGSTOP the broker's JVM and return once the kernel shows it stopped (every
        thread of a process stops on its own schedule, not when the signal is sent)."""
        assert node.proc is not None
        node.proc.send_signal(signal.SIGSTOP)
        self.brokers[node.id].frozen = True
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while run_state(node.proc.pid) != "T":
            if time.monotonic() > deadline:
                raise LabError(f"broker {node.id} (pid {node.proc.pid}) did not stop on SIGSTOP")
            time.sleep(0.01)

    def _continue(self, broker: int) -> None:
        state, node = self.brokers[broker], self._nodes[broker]
        if state.frozen and node.proc is not None:
            node.proc.send_signal(signal.SIGCONT)
        state.frozen = False

    def restore(self, broker: int | None = None) -> None:
        """Undo every fault on `broker` (or all): rules removed, frozen JVMs continued,
        stopped brokers started again on their ports and data, and waited for.
        Brokers removed by `shrink` stay removed."""
        if broker is not None and self._broker(broker).removed:
            raise LabError(f"broker {broker} was removed by shrink; it does not come back")
        targets = [self._broker(broker)] if broker is not None else list(self.brokers.values())
        targets = [s for s in targets if not s.removed]
        if broker is None:
            for thread in list(self._election_threads.values()):
                thread.join(timeout=60)
        restarted = set()
        for state in targets:
            with self._lock:
                self._blackholes.remove(state.port)
            state.blackholed = False
            if state.frozen:
                self._continue(state.id)
                restarted.add(state.id)
            if state.down:
                self._require_free_ports(self._nodes[state.id], f"restarting broker {state.id}")
                self._spawn(self._nodes[state.id])
                state.down = False
                restarted.add(state.id)
        if restarted:  # started again or continued: back once it serves again
            self._wait_ready(restarted, f"restoring broker(s) {sorted(restarted)}")
        log.info("restore", extra={"broker": broker if broker is not None else "all"})

    def move_leader(self, topic: str, partition: int, broker: int) -> None:
        """A real leader move: `broker` first in the replica list, then a preferred election."""
        self._live(broker, "leader")
        self._lead_from(topic, [partition], broker)
        log.info("fault leader", extra={"topic": topic, "partition": partition, "broker": broker})

    def election(self, topic: str, seconds: float, how: str | None = None) -> None:
        """A real election on every partition of `topic`.

        The topic's leaders are first gathered on one broker that is not the active
        controller (reassignment + preferred election), then that broker is frozen
        (`how="freeze"`, SIGSTOP: a GC pause or hung disk; connections stay open and
        unanswered) or killed (`how="kill"`, SIGKILL: a crash; connections reset, no
        controlled shutdown). The controller fences it after the session timeout and
        elects new leaders from the in-sync replicas; when `seconds` have passed and the
        election is over, the broker is continued (or started again on its port and
        data) and rejoins as a follower (leaders stay where the election put them:
        automatic rebalancing is off). The measured time the partitions' leader was
        unavailable is in `election_results`.
        """
        how = how or "freeze"
        if how not in ELECTION_CAUSES:
            raise UsageError(f"--how must be one of {', '.join(ELECTION_CAUSES)}, got {how!r}")
        if topic not in self.topics:
            raise UsageError(f"unknown topic {topic!r} (lab topics: {', '.join(self.topics)})")
        minimum = self.session_timeout_ms / 1000
        if not minimum <= seconds <= 3600:
            raise UsageError(
                f"election seconds must be in [{minimum:g}, 3600] on the kafka engine (a frozen "
                f"leader is fenced after the {minimum:g} s session timeout), got {seconds}"
            )
        if self.broker_count < 2:
            raise UsageError("an election needs at least 2 brokers")
        with self._lock:
            if topic in self._election_threads:
                raise LabError(f"an election on {topic} is already under way")
            self._election_threads[topic] = threading.current_thread()  # reserved
        try:
            controller = self.active_controller()
            candidates = [
                b.id for b in self.brokers.values() if b.condition == "up" and b.id != controller
            ]
            if not candidates:
                raise LabError("no healthy broker besides the active controller to fence")
            victim = candidates[0]
            partitions = list(range(self.topics[topic]))
            self._lead_from(topic, partitions, victim)
            node = self._nodes[victim]
            assert node.proc is not None
            frozen_at = time.monotonic()
            if how == "freeze":
                self._freeze(node)
            else:
                self.brokers[victim].down = True  # before the kill: not a crash
                node.proc.kill()
                node.proc.wait()
                self.brokers[victim].pid = 0
        except BaseException:
            with self._lock:
                self._election_threads.pop(topic, None)
            raise
        thread = threading.Thread(
            target=self._run_election,
            args=(topic, victim, controller, seconds, frozen_at, how),
            name=f"election-{topic}",
            daemon=True,
        )
        with self._lock:
            self._election_threads[topic] = thread
        thread.start()
        log.info(
            "fault election",
            extra={
                "topic": topic,
                "seconds": seconds,
                "how": how,
                "broker": victim,
                "controller": controller,
            },
        )

    def _run_election(
        self, topic: str, victim: int, controller: int, seconds: float, frozen_at: float, how: str
    ) -> None:
        others = ",".join(b.address for b in self.brokers.values() if b.condition == "up")
        elected_at: float | None = None
        leaders: dict[int, int] = {}
        give_up = frozen_at + seconds + ELECTION_GRACE_SECONDS
        try:
            while not self._closed.is_set():
                now = time.monotonic()
                if elected_at is None and now > give_up:
                    log.warning(
                        "no election seen; bringing the broker back", extra={"topic": topic}
                    )
                    break
                if elected_at is None:
                    try:
                        md = self._metadata(others, timeout=1.0)
                        parts = md.topics[topic].partitions
                        if parts and all(p.leader not in (-1, victim) for p in parts.values()):
                            elected_at = time.monotonic()
                            leaders = {p: part.leader for p, part in parts.items()}
                    except KafkaException:  # a metadata request during the election
                        pass
                if elected_at is not None and now - frozen_at >= seconds:
                    break
                self._closed.wait(POLL_SECONDS)
        finally:
            fault_seconds = time.monotonic() - frozen_at
            if not self._closed.is_set():
                self._bring_back(victim)
            result = {
                "topic": topic,
                "how": how,
                "broker": victim,
                "active_controller": controller,
                "fault_seconds": round(fault_seconds, 3),
                "leaderless_seconds": round(elected_at - frozen_at, 3) if elected_at else None,
                "new_leaders": leaders,
            }
            with self._lock:
                self.election_results.append(result)
                self._election_threads.pop(topic, None)
            log.info("election over", extra=result)

    def _bring_back(self, broker: int) -> None:
        """After an election: continue the frozen broker, or start the killed one again."""
        state = self.brokers[broker]
        if state.frozen:
            self._continue(broker)
        elif state.down:
            try:
                node = self._nodes[broker]
                self._require_free_ports(node, f"restarting broker {broker} after the election")
                self._spawn(node)
                state.down = False
                self._wait_ready({broker}, f"restarting broker {broker} after the election")
            except (LabError, OSError) as exc:
                log.error("broker not restarted", extra={"broker": broker, "error": str(exc)})

    def elections_under_way(self) -> list[str]:
        return sorted(self._election_threads)

    def shrink(self, to: int, dead: str = "blackhole") -> None:
        """Decommission brokers to+1..N the way operators do: every partition reassigned
        away from them, then each stopped for good. Their addresses stay in the bootstrap
        string, dead: `blackhole` (packets dropped: a host gone), `refused` (port closed)
        or `frozen` (process frozen instead of stopped: TCP accepted, never answered)."""
        if dead not in DEAD_MODES:
            raise UsageError(f"--dead must be one of {', '.join(DEAD_MODES)}, got {dead!r}")
        live = [b.id for b in self.brokers.values() if not b.removed]
        if not 1 <= to < len(live):
            raise UsageError(f"--to must be between 1 and {len(live) - 1}, got {to}")
        if not self.controllers and to <= self.broker_count // 2:
            raise UsageError(
                f"--to {to} would leave the {self.broker_count} KRaft voters without a majority "
                f"(every node is also a controller): keep at least {self.broker_count // 2 + 1}"
            )
        keep = sorted(live)[:to]
        removed = sorted(live)[to:]
        for b in keep:
            if self.brokers[b].condition != "up":
                raise LabError(
                    f"broker {b} stays but is {self.brokers[b].condition}; restore it first"
                )
        md = self._metadata()
        assignment: dict[tuple[str, int], list[int]] = {}
        for name, topic in md.topics.items():
            for p, part in topic.partitions.items():
                if not set(part.replicas) & set(removed):
                    continue
                replicas = [r for r in part.replicas if r in keep]
                spare = [b for b in keep if b not in replicas]
                while len(replicas) < min(len(part.replicas), to) and spare:
                    replicas.append(spare.pop(0))
                assignment[(name, p)] = replicas
        if assignment:
            self._reassign(assignment)
        for b in removed:
            state, node = self.brokers[b], self._nodes[b]
            state.removed = True  # first: `alive()` must not take the stopping broker for a crash
            if dead == "frozen":
                self._freeze(node)
            else:
                self._stop(node)
                state.pid = 0
                with self._lock:
                    self._blackholes.hold(state.port)
                if dead == "blackhole":
                    self.blackhole(b)
        self._wait_shrunk(set(keep))
        log.info("fault shrink", extra={"to": to, "removed": removed, "dead": dead})

    def _wait_shrunk(self, keep: set[int]) -> None:
        """Until every kept broker's own metadata has listed exactly `keep` for two
        session timeouts in a row. Each learns of the removed brokers' fencing from the
        metadata log in its own time (one that still listed a removed broker after
        another had dropped it failed a fresh-clone run), and a removed broker was listed
        again after every kept broker had dropped it (another fresh-clone run; the cause
        was not established). The controller fences or unfences a broker on its heartbeats
        and their absence within a session timeout, so a view held for two of them, with
        the removed brokers' processes gone, is taken as final."""
        settle_seconds = 2 * self.session_timeout_ms / 1000
        deadline = time.monotonic() + 60
        last = "no answer yet"
        agreed_since: float | None = None
        while True:
            try:
                views = {b: set(self._metadata(self.brokers[b].address, 1.0).brokers) for b in keep}
                lagging = {b: sorted(v) for b, v in views.items() if v != keep}
                if lagging:
                    agreed_since = None
                    last = "; ".join(f"broker {b} lists {v}" for b, v in sorted(lagging.items()))
                else:
                    now = time.monotonic()
                    agreed_since = now if agreed_since is None else agreed_since
                    if now - agreed_since >= settle_seconds:
                        return
            except KafkaException as exc:
                agreed_since = None
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                beyond = sorted(keep)
                raise LabError(f"shrink: metadata still lists brokers beyond {beyond} ({last})")
            time.sleep(0.2)
