"""The Kafka engine's processes: a cluster's nodes configured, formatted, started,
waited for, stopped, frozen and continued (`KafkaProcesses`, the engine's first layer).

It holds every piece of the engine's state (`__init__`), its settings
(`KafkaSettings`) among them: the layers above it - admin work, Kafka's tools, faults,
and the engine itself - add behaviour only.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._metadata import ClusterMetadata

from hangwatch.child_processes import stop_process
from hangwatch.errors import LabError, LabSetupError
from hangwatch_lab.kafka import names, nodes, tls
from hangwatch_lab.kafka.names import NAMED_LISTENER
from hangwatch_lab.kafka.nodes import (
    AUTHORIZER,
    CONTROLLER_ID_BASE,
    DATA_PREFIX,
    HEARTBEAT_INTERVAL_MS,
    HOST,
    JVM_OPTIONS,
    LAB_SUPER_USER,
    LOG4J,
    LOG4J2,
    SASL_LISTENER,
    SASL_MECHANISM,
    START_ATTEMPTS,
    STOP_TIMEOUT_SECONDS,
    TOOL_OPTIONS,
    TOOL_TIMEOUT_SECONDS,
    TOOLS_LOG4J,
    TOOLS_LOG4J2,
    Node,
    PortTakenError,
    Spawner,
    log_cause,
    new_cluster_id,
    port_in_use,
    run_state,
)
from hangwatch_lab.kafka.settings import KafkaSettings
from hangwatch_lab.kafka.tls import TLS_LISTENER
from hangwatch_lab.lab import BrokerState, Lab

log = logging.getLogger(__name__)


class KafkaProcesses(Lab):
    """The nodes of a Kafka cluster and their JVMs: the state every layer shares."""

    @property
    def engine_description(self) -> str:
        if self.settings.controllers:
            return (
                f"Apache Kafka {self.settings.kafka_version} (KRaft, {self.broker_count} brokers, "
                f"{self.settings.controllers} controllers)"
            )
        return f"Apache Kafka {self.settings.kafka_version} (KRaft, {self.broker_count} nodes)"

    def __init__(
        self,
        brokers: int = 3,
        topics: dict[str, int] | None = None,
        engine: str = "kafka",
        **options: Any,
    ) -> None:
        """`options`: the fields of `KafkaSettings` (`KafkaSettings.of`)."""
        super().__init__(brokers, topics)
        self.settings = KafkaSettings.of(options)
        self.settings.check(brokers, self.topics)
        self.topic_configs = {t: dict(c) for t, c in self.settings.topic_configs.items()}
        """Each topic's configs as the lab set them (at its creation, then `alter_topic`)."""
        self.sasl_bootstrap = ""
        """The SASL_PLAINTEXT listeners (empty without `sasl_users`): clients there are
        authenticated and authorized against the ACLs."""
        self._voters = ""
        self.tls_material: tls.Material | None = None
        self.start_seconds = 0.0
        self.election_results: list[dict[str, Any]] = []
        self._nodes: dict[int, Node] = {}
        """The brokers' nodes (combined broker+controller nodes without `controllers`)."""
        self._controller_nodes: dict[int, Node] = {}
        """Controller-only nodes, by node id (empty in combined mode)."""
        self.data_dir: Path | None = None
        """The cluster's configs, logs and data (`$TMPDIR/hangwatch-kafka-<pid>-*`), removed
        by `close`."""
        self._java = ""
        self._lib: Path | None = None
        self._spawner: Spawner | None = None
        self._closed = threading.Event()
        self._election_threads: dict[str, threading.Thread] = {}
        self._class_sharing: tuple[str, ...] = ()
        """The class-data archive's mapping for every JVM of the lab (`classdata`), found
        once when the lab starts."""
        self.jvm_extra_options: tuple[str, ...] = ()
        """More options for the broker JVMs started from now on (after the class-data
        archive's mapping and `nodes.JVM_OPTIONS`)."""

    def _start_nodes_retrying(self) -> None:
        """`_start_nodes`, again on new ports (`START_ATTEMPTS`) when a port it picked was
        taken before its node listened on it; with fixed ports, the error at once."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_nodes()
                return
            except PortTakenError as exc:
                if self.settings.ports or attempt == START_ATTEMPTS:
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
        log4j2 = self.settings.kafka_line != "3"
        (self.data_dir / "tools-log4j.properties").write_text(
            TOOLS_LOG4J2 if log4j2 else TOOLS_LOG4J
        )
        (self.data_dir / "log4j.properties").write_text(LOG4J2 if log4j2 else LOG4J)
        client_ports = list(self.settings.ports or [])
        sasl = n if self.settings.sasl_users else 0
        named = n if self.settings.hostnames else 0
        secure = n if self.settings.tls else 0
        quorum = self.settings.controllers or n
        picked = nodes.free_ports(n + quorum + sasl + named + secure - len(client_ports))
        named_ports = [picked.pop() for _ in range(named)]
        tls_ports = [picked.pop() for _ in range(secure)]
        client_ports = client_ports or picked[:n]
        controller_ports = picked[len(picked) - quorum - sasl : len(picked) - sasl]
        sasl_ports = picked[len(picked) - sasl :]
        for c in range(1, self.settings.controllers + 1):
            cid = CONTROLLER_ID_BASE + c
            controller = Node(cid, 0, controller_ports[c - 1], self.data_dir / f"controller{c}")
            self._require_free_ports(controller, f"starting controller {cid}")
            controller.dir.mkdir()
            self._controller_nodes[cid] = controller
        for i in range(1, n + 1):
            node = Node(
                i,
                client_ports[i - 1],
                0 if self.settings.controllers else controller_ports[i - 1],
                self.data_dir / f"node{i}",
                sasl_port=sasl_ports[i - 1] if sasl else 0,
                named_port=named_ports[i - 1] if named else 0,
                tls_port=tls_ports[i - 1] if secure else 0,
            )
            self._require_free_ports(node, f"starting broker {i}")
            node.dir.mkdir()
            self._nodes[i] = node
            self.brokers[i] = BrokerState(id=i, host=self.settings.host, port=node.port)
        self.bootstrap = ",".join(b.address for b in self.brokers.values())
        self.sasl_bootstrap = ",".join(
            f"{self.settings.host}:{node.sasl_port}"
            for node in self._nodes.values()
            if node.sasl_port
        )
        if secure:
            self.tls_material = tls.make_material(self.data_dir / "tls", self.settings.tls)
            self.tls_ca = self.tls_material.ca
            self.tls_bootstrap = ",".join(
                f"{self.settings.host}:{node.tls_port}" for node in self._nodes.values()
            )
        self.named_bootstrap = ",".join(
            f"{names.hostname(node.id)}:{node.named_port}"
            for node in self._nodes.values()
            if node.named_port
        )
        if named:
            self.hosts_file = self.data_dir / "hosts"
            self._write_hosts()
        self._voters = ",".join(
            f"{i}@{HOST}:{node.controller_port}"
            for i, node in self._all_nodes().items()
            if node.controller_port
        )
        for node in self._all_nodes().values():
            node.config.write_text(self._properties(node, self._voters))
        log.info(
            "formatting storage",
            extra={
                "brokers": n,
                "controllers": self.settings.controllers,
                "dir": str(self.data_dir),
            },
        )
        self._format_storage()
        self._spawner = Spawner()
        for controller in self._controller_nodes.values():
            self._spawn(controller)
        for node in self._nodes.values():
            self._spawn(node)
        log.info("waiting for every broker to be listed by every broker", extra={"brokers": n})
        self._wait_ready(set(self._nodes), "starting the cluster")

    def _write_hosts(self) -> None:
        """The lab's hosts file: the machine's /etc/hosts and each broker's name at its
        named address now, written in place (a bind mount of it sees the new text)."""
        assert self.hosts_file is not None
        machine = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
        text = names.hosts_text(machine, {i: n.named_host for i, n in self._nodes.items()})
        nodes.write_in_place(self.hosts_file, text)

    def _all_nodes(self) -> dict[int, Node]:
        """Every node by id: the controller-only ones first, then the brokers."""
        return {**self._controller_nodes, **self._nodes}

    @staticmethod
    def _require_free_ports(node: Node, step: str) -> None:
        ports = (node.port, node.controller_port, node.sasl_port, node.named_port, node.tls_port)
        for port in ports:
            if not port:
                continue
            if port_in_use(port):
                raise PortTakenError(
                    f"{step}: port {HOST}:{port} is in use; stop what listens there "
                    "(or let the kernel pick the ports of a new lab)"
                )

    def _properties(self, node: Node, voters: str) -> str:
        replication = min(3, self.broker_count)
        listeners = [f"PLAINTEXT://{self.settings.host}:{node.port}"] if node.port else []
        if node.sasl_port:
            listeners.append(f"{SASL_LISTENER}://{self.settings.host}:{node.sasl_port}")
        if node.tls_port:
            listeners.append(f"{TLS_LISTENER}://{self.settings.host}:{node.tls_port}")
        advertised = list(listeners)
        if node.named_port:
            listeners.append(f"{NAMED_LISTENER}://{node.named_host}:{node.named_port}")
            advertised.append(f"{NAMED_LISTENER}://{names.hostname(node.id)}:{node.named_port}")
        controller = [f"CONTROLLER://{HOST}:{node.controller_port}"] if node.controller_port else []
        broker: dict[str, Any] = (
            {
                "advertised.listeners": ",".join(advertised),
                "inter.broker.listener.name": "PLAINTEXT",
            }
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
                f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{SASL_LISTENER}:{SASL_LISTENER},"
                f"{NAMED_LISTENER}:PLAINTEXT,{TLS_LISTENER}:{TLS_LISTENER}"
            ),
            "log.dirs": node.dir / "data",
            "broker.session.timeout.ms": self.settings.session_timeout_ms,
            "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "auto.leader.rebalance.enable": "false",
            "auto.create.topics.enable": str(self.settings.auto_create_topics).lower(),
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
        if node.tls_port:
            assert self.tls_material is not None
            props |= tls.listener_properties(self.tls_material)
        if node.port:
            props |= self.settings.broker_configs
        if self.settings.sasl_users:
            users = " ".join(f'user_{u}="{p}"' for u, p in sorted(self.settings.sasl_users.items()))
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
        setting = (
            "log4j.configuration" if self.settings.kafka_line == "3" else "log4j2.configurationFile"
        )
        return [
            self._java,
            *self._class_sharing,
            *options,
            f"-D{setting}=file:{log4j}",
            "-cp",
            f"{self._lib}/*",
            main,
            *args,
        ]

    def _format_storage(self) -> None:
        cluster_id = new_cluster_id()
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

    def _spawn(self, node: Node) -> None:
        assert self._spawner is not None
        with node.log_file.open("ab") as out:
            node.proc = self._spawner.popen(
                self._java_command(
                    (*JVM_OPTIONS, *self.jvm_extra_options),
                    "kafka.Kafka",
                    str(node.config),
                    tools=False,
                ),
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
        deadline = time.monotonic() + self.settings.ready_timeout_seconds
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
                    f"{self.settings.ready_timeout_seconds:g} s ({last}); the machine may be "
                    "overloaded: retry, or raise --ready-timeout"
                )
            time.sleep(0.2)

    def _check_running(self, node_id: int, step: str) -> None:
        node = self._all_nodes()[node_id]
        if node.proc is not None and node.proc.poll() is not None:
            cause = log_cause(node.log_file)
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

    def _stop(self, node: Node, kill: bool = False) -> None:
        """End the broker's JVM: SIGTERM (a controlled shutdown, SIGKILL after the stop
        timeout) or, with `kill`, SIGKILL at once (a crash)."""
        proc = node.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)
        self.brokers[node.id].frozen = False
        if kill:
            proc.kill()
        stop_process(proc, STOP_TIMEOUT_SECONDS)

    def _freeze(self, node: Node) -> None:
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
