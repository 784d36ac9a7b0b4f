"""The Kafka engine's nodes: their settings, files and processes, before any cluster.

What every other module of the engine builds on and nothing of it builds on them: the
JVM options and timeouts, the logging templates, SASL and authorizer settings, a node's
files (`Node`), the one thread that starts every JVM (`Spawner`, for PR_SET_PDEATHSIG),
loopback ports, a new cluster id, the telling line of a broker's log, the run state
of a process and the cleanup of data directories a killed lab left.
"""

from __future__ import annotations

import base64
import os
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hangwatch.errors import LabSetupError
from hangwatch_lab import netfilter
from hangwatch_lab.kafka import names

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

STOP_TIMEOUT_SECONDS = 30.0

POLL_SECONDS = 0.05

DATA_PREFIX = "hangwatch-kafka-"

CONTROLLER_ID_BASE = 100
"""Controller-only nodes are ids 101, 102, ... (brokers keep 1..M, the ids clients see)."""

MAX_CONTROLLERS = 5

DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL")
"""Prefix of every broker command: util-linux's setpriv sets PR_SET_PDEATHSIG=SIGKILL and
execs the JVM, so the broker is killed when the thread that started it goes away."""


class Spawner:
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
class Node:
    """One KRaft node's files and process."""

    id: int
    port: int
    """The client (PLAINTEXT) listener's port (0: a controller-only node has none)."""
    controller_port: int
    """The CONTROLLER listener's port (0: a broker-only node has none)."""
    dir: Path
    sasl_port: int = 0
    """The SASL_PLAINTEXT listener's port (0: none)."""
    tls_port: int = 0
    """The TLS listener's port (0: none; `KafkaSettings.tls`)."""
    named_port: int = 0
    """The listener advertised by hostname's port (0: none; `KafkaSettings.hostnames`)."""
    generation: int = 1
    """Which life of the broker's named address (`names.named_address`): 1 as started,
    each `move` the next."""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def named_host(self) -> str:
        """The loopback address the listener advertised by hostname binds ("" without one)."""
        return names.named_address(self.id, self.generation) if self.named_port else ""

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


def find_java() -> str:
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


def free_ports(count: int) -> list[int]:
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


def port_in_use(port: int) -> bool:
    """True when something listens on 127.0.0.1:port (a broker could not bind it)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def write_in_place(path: Path, text: str) -> None:
    """`text` as the whole of `path`, written into the same file (same inode, created when
    missing): a bind mount of it sees the new text, where a rename would leave it the old."""
    with path.open("a+") as out:
        out.seek(0)
        out.truncate()
        out.write(text)


def run_state(pid: int) -> str:
    """The kernel's run state of `pid` (R, S, D, T for stopped, ...), `gone` once it is."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, never starting
    with "-" (kafka-storage's argument parser would take it for an option: "argument
    --cluster-id/-t: expected one argument", 1 start in 64; Kafka's own Uuid.randomUuid
    skips those ids too)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def log_cause(log_file: Path) -> str:
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

SASL_LISTENER = "SASL_PLAINTEXT"

SASL_MECHANISM = "PLAIN"

LAB_SUPER_USER = "User:ANONYMOUS"
"""The principal of the PLAINTEXT and controller listeners: the lab's own admin work, the
brokers' replication and the controllers run as it, so it is the authorizer's super user;
ACLs apply to the SASL listener's users."""

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""Kafka's authorizer under KRaft (ACLs kept in the metadata log)."""
