"""One replayed row (`hangwatch_testing.incidents.model.Incident`) on a fresh lab, and what it saw.

`replay` starts the row's Apache Kafka lab at the row's Kafka release (3 combined
broker+controller nodes, or brokers beside controller-only nodes when the fault must
remove most brokers), the client, and a real
`hangwatch sidecar` process with an EMPTY telemetry directory whose socket view is
narrowed to the client's process (`--socket-process <pid>`: the brokers' own connections
on the same loopback stay out); it waits for the client's first acknowledgements and the
sidecar's healthy verdict, injects the fault and records, until the watch ends:

- every verdict change of the sidecar's /status with its reasons (the evidence named),
  timed from the fault;
- the client's own view from its JSON lines: its last acknowledgement before the fault,
  its first acknowledgement and first error after it (so how long it stayed silent);
- for a field-corpus row (`Incident.case`), what a restart does: once the watch is over
  the client is stopped and started again on the same lab, and the record says when the
  fresh one first had a write acknowledged.

A lasting fault (`Incident.lasting_fault`: brokers stopped and started again) runs in a
thread beside the watch; the record says when it ended. A row whose client starts
refused (`Incident.starts_failing`: a certificate it does not trust) has no healthy
baseline: the replay waits for the client's first error, and the fault is the cluster's
mending. The client and the sidecar reach the brokers the row's way (`reaching`): by the
lab's bootstrap, by name through the lab's hosts file (`Incident.named_brokers`), or
over TLS trusting the lab's CA (`Incident.tls`).

Everything stops on the way out, on every path: the client, the sidecar, the lab (its
JVMs, rules and data directory).
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangwatch.child_processes import stop_process
from hangwatch.errors import LabError
from hangwatch_lab import Lab
from hangwatch_lab.kafka import names
from hangwatch_testing.clients.refusals import (
    SPARK_READY_SECONDS,
    SPARK_STOP_SECONDS,
    SparkExecutor,
)
from hangwatch_testing.clients.runs import PARTITIONS, TOPIC, SidecarProcess, SidecarTiming
from hangwatch_testing.incidents.model import LAB_CA, Incident, Where
from hangwatch_testing.waiting import wait_for

WINDOW_SECONDS = 5.0
"""The width of `Replay.acks_per_window`'s windows."""
BASELINE_SECONDS = 5.0
"""The healthy stretch before the fault whose acknowledgement rate is the baseline: the
fault comes only once the client has been acknowledged for this long."""
RESTART_WATCH_SECONDS = 45.0
"""How long a field-corpus row's restarted client is given to have a write acknowledged
(a fresh client learns the cluster first: seconds on a loaded machine)."""


class ClientProcess:
    """A running incident client and what its JSON lines said (monotonic times); a Spark
    row's driver (`spark_task`) also says where its executor is (`spark_executor`)."""

    def __init__(self, argv: list[str], log_path: Path, spark: bool = False) -> None:
        self.acks: list[float] = []
        self.errors: list[tuple[float, str]] = []
        self.ready: SparkExecutor | None = None
        self._grace = SPARK_STOP_SECONDS if spark else 5.0
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            start_new_session=spark,  # the driver's JVMs share its session
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.monotonic()
            if line.startswith("ready "):
                ui, app, executor, pid = line.split()[1:5]
                self.ready = SparkExecutor(ui, app, executor, int(pid))
                continue
            try:
                event: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "ack":
                self.acks.append(now)
            elif event.get("event") in ("error", "fatal"):
                self.errors.append((now, str(event.get("error", ""))[:300]))

    def acked_since(self, moment: float) -> int:
        return sum(1 for at in list(self.acks) if at >= moment)

    def errors_since(self, moment: float) -> int:
        return sum(1 for at, _ in list(self.errors) if at >= moment)

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time without an acknowledgement between `start` and `end`."""
        marks = [start, *(at for at in list(self.acks) if start <= at <= end), end]
        return max(b - a for a, b in itertools.pairwise(marks))

    def first_error_after(self, moment: float) -> tuple[float, str] | None:
        return next(((at, e) for at, e in list(self.errors) if at >= moment), None)

    def spark_executor(self) -> SparkExecutor:
        """The Spark row's executor, once its driver has said where it is."""
        found: SparkExecutor = wait_for(
            lambda: self.ready,
            SPARK_READY_SECONDS,
            "the Spark row's executor",
            interval=0.5,
            give_up=lambda: self.proc.poll() is not None,
        )
        return found

    def stop(self) -> None:
        stop_process(self.proc, self._grace)
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


WRITE_FIGURES = ("closed_since_write", "not_writes_since_write", "last_write_seconds")
"""The /status `sockets` figures of the sidecar's memory of the pod's writes."""


@dataclass
class Replay:
    """What one replay saw; times in seconds from the fault."""

    incident: str
    baseline: str = ""
    changes: list[tuple[float, str, list[str]]] = field(default_factory=list)
    """(seconds from the fault, verdict, reasons) at each change of the sidecar's verdict."""
    last_ack_before_fault: float | None = None
    """Seconds before the fault of the client's last acknowledgement."""
    first_ack_after: float | None = None
    last_ack_after: float | None = None
    first_error_after: float | None = None
    first_error: str = ""
    acks_after: int = 0
    errors_after: int = 0
    acks_per_second_before: float = 0.0
    """Acknowledgements per second over the BASELINE_SECONDS before the fault."""
    acks_per_second_after: float = 0.0
    """Acknowledgements per second over the watch."""
    longest_pause: float = 0.0
    """The longest time without an acknowledgement during the watch (S3's latency spikes)."""
    watched_seconds: float = 0.0
    election: dict[str, Any] = field(default_factory=dict)
    spark: dict[str, Any] | None = None
    """The sidecar's last /status `spark` (its thread-dump view: Spark's or the local JVM's)."""
    acks_per_window: list[int] = field(default_factory=list)
    """Acknowledgements in each WINDOW_SECONDS of the watch, from the fault on."""
    error_kinds: dict[str, int] = field(default_factory=dict)
    """The client's own errors after the fault: text (first 120 characters) -> count."""
    advisories: set[str] = field(default_factory=set)
    """The published hangs (`hangwatch.known_hangs` ids) the sidecar's /status named for
    the client's release during the watch."""
    socket_peaks: dict[str, float] = field(default_factory=dict)
    """The highest each figure of the sidecar's memory of writes (/status `sockets`:
    `WRITE_FIGURES`) reached during the watch: connections closed and sends too small to
    hold a write since the last write, and the silence of writes itself."""
    witness_changes: list[tuple[float, str, list[str]]] = field(default_factory=list)
    """Like `changes`, of the second sidecar with other flags (`replay_started_after`'s
    `witness_args`), when there was one."""
    client_exit: int | None = None
    """The client's exit code when its process ended by itself during the watch."""
    fault_ended_after: float | None = None
    """A lasting fault: seconds from its start to its end (the cluster whole again)."""
    restarted_first_ack: float | None = None
    """A field-corpus row: seconds from the client's restart after the watch to the fresh
    client's first acknowledgement (None: none within RESTART_WATCH_SECONDS, or not
    restarted: `restarted`)."""
    restarted: bool = False

    def first(self, verdict: str) -> float | None:
        return next((t for t, v, _ in self.changes if v == verdict), None)

    @property
    def verdicts(self) -> list[str]:
        return [v for _, v, _ in self.changes]

    def silent_seconds(self) -> float:
        """How long the client acknowledged nothing after the fault (the whole watch when
        it never did again)."""
        return self.first_ack_after if self.first_ack_after is not None else self.watched_seconds

    def describe(self) -> str:
        shown = [(t, v, r[:2]) for t, v, r in self.changes]
        return (
            f"{self.incident}: baseline {self.baseline}, changes {shown}, first ack after "
            f"{self.first_ack_after}, last ack after {self.last_ack_after}, first error after "
            f"{self.first_error_after} "
            f"({self.first_error[:120]}), acks/errors after {self.acks_after}/"
            f"{self.errors_after}, longest pause {self.longest_pause} s, acks/s before/after "
            f"{self.acks_per_second_before}/{self.acks_per_second_after}"
            + (f", errors {self.error_kinds}" if self.error_kinds else "")
            + (f", socket view's peaks {self.socket_peaks}" if self.socket_peaks else "")
            + (
                f", witness changes {[(t, v, r[:2]) for t, v, r in self.witness_changes]}"
                if self.witness_changes
                else ""
            )
            + (f", fault ended at {self.fault_ended_after}" if self.fault_ended_after else "")
            + (
                f", restarted: first ack {self.restarted_first_ack} s after the restart"
                if self.restarted
                else ""
            )
        )


BASELINE_DEADLINE_SECONDS = 90.0
"""How long a client may take to be acknowledged for BASELINE_SECONDS with the sidecar
healthy (a Spark row's from its executor's registration: its task and Python worker)."""


def _wait_baseline(sidecar: SidecarProcess, client: ClientProcess, started: float) -> str:
    deadline = time.monotonic() + BASELINE_DEADLINE_SECONDS
    verdict = ""
    while time.monotonic() < deadline:
        if client.proc.poll() is not None:
            raise RuntimeError(f"the client exited during the baseline: {client.errors[-3:]}")
        doc = sidecar.status()
        verdict = str(doc["verdict"])
        connected = (doc.get("sockets") or {}).get("connections_total", 0) > 0
        acking = client.acks and time.monotonic() - client.acks[0] >= BASELINE_SECONDS
        if verdict == "healthy" and connected and acking and client.acked_since(started) >= 3:
            return verdict
        time.sleep(0.25)
    raise RuntimeError(
        f"no healthy baseline in {BASELINE_DEADLINE_SECONDS:.0f} s (verdict {verdict!r}, "
        f"{client.errors[-2:]})"
    )


REFUSED_SECONDS = 3.0
"""A row whose client starts refused (`Incident.starts_failing`): how long after its first
error the fault (the mending) comes."""


def _wait_refused(sidecar: SidecarProcess, client: ClientProcess) -> str:
    """Until the client has been refused (its first error) for REFUSED_SECONDS, alive;
    the sidecar's verdict then."""
    deadline = time.monotonic() + BASELINE_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if client.proc.poll() is not None:
            raise RuntimeError(f"the client exited while refused: {client.errors[-3:]}")
        verdict = str(sidecar.status()["verdict"])
        if client.errors and time.monotonic() - client.errors[0][0] >= REFUSED_SECONDS:
            return verdict
        time.sleep(0.25)
    raise RuntimeError(f"the client was not refused within {BASELINE_DEADLINE_SECONDS:.0f} s")


LAB_STARTS = 2
"""Attempts at starting a replay's cluster: a start that fails (seen: the topic's creation
answered "Broker handle destroyed", about 1 start in 15 on a loaded machine) is no
measurement of the client, so the cluster is started afresh once, said on stderr."""


@contextmanager
def started_lab(incident: Incident) -> Iterator[Lab]:
    shape: dict[str, Any] = {"controllers": incident.controllers} if incident.controllers else {}
    if incident.broker_configs:
        shape["broker_configs"] = dict(incident.broker_configs)
    if incident.named_brokers:
        shape["hostnames"] = True
    if incident.tls:
        shape["tls"] = incident.tls
    for attempt in range(1, LAB_STARTS + 1):
        lab = Lab(
            brokers=incident.brokers,
            topics={TOPIC: PARTITIONS},
            engine="kafka",
            kafka_version=incident.kafka_version,
            **shape,
        )
        try:
            lab.start()
        except LabError as exc:
            lab.close()
            print(f"lab start failed ({exc}); attempt {attempt}/{LAB_STARTS}", file=sys.stderr)
            if attempt == LAB_STARTS:
                raise
            continue
        try:
            yield lab
        finally:
            lab.close()
        return


def replay(
    incident: Incident,
    timing: SidecarTiming | None = None,
    *,
    watch_seconds: float | None = None,
    sidecar_args: tuple[str, ...] = (),
    restart_if: Callable[[Replay], bool] | None = None,
) -> Replay:
    """One replay of `incident` on a fresh Apache Kafka lab (see the module doc);
    `watch_seconds`: instead of the incident's own watch; `sidecar_args`: more flags of
    the sidecar (e.g. the local JVM's thread dumps); `restart_if`: the client is
    restarted (a row with a `case`) only when this holds of the watched replay (a race
    that did not reproduce has nothing for a restart to fix). An incident whose client
    starts after the fault: one fresh start (`replay_started_after`)."""
    if incident.client_after_fault:
        watch = incident.watch_seconds if watch_seconds is None else watch_seconds
        return replay_started_after([incident], 1, watch, timing, sidecar_args)[0]
    with (
        started_lab(incident) as lab,
        tempfile.TemporaryDirectory(prefix="hangwatch-incident-") as tmp,
    ):
        scratch = Path(tmp)
        started = time.monotonic()
        with _client_and_sidecar(incident, lab, scratch, 0, timing, sidecar_args) as (
            client,
            sidecar,
            _,
        ):
            verdict = (
                _wait_refused(sidecar, client)
                if incident.starts_failing
                else _wait_baseline(sidecar, client, started)
            )
            result = Replay(incident.id, baseline=verdict)
            fault_at = time.monotonic()
            if client.acks:
                result.last_ack_before_fault = round(fault_at - client.acks[-1], 2)
            baseline = client.acked_since(fault_at - BASELINE_SECONDS)
            result.acks_per_second_before = round(baseline / BASELINE_SECONDS, 1)
            watch = incident.watch_seconds if watch_seconds is None else watch_seconds
            with _fault(incident, lab, scratch) as ended:
                _watch(result, sidecar, client, fault_at, watch)
            if ended:
                result.fault_ended_after = round(ended[0] - fault_at, 2)
            results = getattr(lab, "election_results", [])
            if results:
                result.election = dict(results[-1])
        if incident.case is not None and (restart_if is None or restart_if(result)):
            result.restarted = True
            result.restarted_first_ack = _restart(incident, lab, scratch / "restarted")
        return result


@contextmanager
def _fault(incident: Incident, lab: Lab, scratch: Path) -> Iterator[list[float]]:
    """Applies the row's fault: at once, or (a lasting fault) in a thread while the
    caller's block watches; yields a list that holds the fault's end (monotonic) once
    a lasting fault is over, and on the way out waits for it and raises what it raised."""
    ended: list[float] = []
    if not incident.lasting_fault:
        incident.inject(lab, scratch)
        yield ended
        return
    failed: list[BaseException] = []

    def run() -> None:
        try:
            incident.inject(lab, scratch)
        except BaseException as exc:  # noqa: BLE001 - handed to the replay's thread
            failed.append(exc)
        ended.append(time.monotonic())

    worker = threading.Thread(target=run, name=f"fault-{incident.id}", daemon=True)
    worker.start()
    try:
        yield ended
    finally:
        worker.join()
    if failed:
        raise failed[0]


def _restart(incident: Incident, lab: Lab, scratch: Path) -> float | None:
    """The client started again on the same lab (what restarting its pod does): seconds to
    its first acknowledgement (a Spark row's from its new executor's registration), None
    when none came within RESTART_WATCH_SECONDS. `scratch`: the fresh client's own."""
    scratch.mkdir()
    spark = incident.where is Where.SPARK
    bootstrap, prefix, _ = reaching(incident, lab, scratch)
    client = ClientProcess(
        [*prefix, *incident.command(bootstrap, scratch)], scratch / "restarted.log", spark
    )
    try:
        if spark:
            client.spark_executor()
        started = time.monotonic()
        while time.monotonic() - started < RESTART_WATCH_SECONDS:
            if client.acks:
                return round(client.acks[0] - started, 2)
            if client.proc.poll() is not None:
                return None
            time.sleep(0.25)
        return None
    finally:
        client.stop()


def reaching(incident: Incident, lab: Lab, scratch: Path) -> tuple[str, list[str], list[str]]:
    """How the row's client and sidecar reach the brokers: (the bootstrap list, the prefix
    of their commands, the sidecar's more flags). By name (`Incident.named_brokers`): the
    listeners advertised by hostname, each process with the lab's hosts file as its
    /etc/hosts. Over TLS (`Incident.tls`): the TLS listeners, the lab's CA copied into
    `scratch` (`LAB_CA`) for the client, the sidecar's librdkafka trusting it too. Else
    the lab's bootstrap, nothing more."""
    if incident.named_brokers:
        if lab.hosts_file is None:
            raise LabError(f"{incident.id}: the lab's brokers have no names (hostnames)")
        return lab.named_bootstrap, names.in_hosts_namespace(lab.hosts_file), []
    if incident.tls:
        if lab.tls_ca is None:
            raise LabError(f"{incident.id}: the lab has no TLS listener (tls)")
        shutil.copyfile(lab.tls_ca, scratch / LAB_CA)
        ca = f"ssl.ca.location={scratch / LAB_CA}"
        return lab.tls_bootstrap, [], ["-X", "security.protocol=ssl", "-X", ca]
    return lab.bootstrap, [], []


@contextmanager
def _client_and_sidecar(
    incident: Incident,
    lab: Lab,
    scratch: Path,
    start: int,
    timing: SidecarTiming | None,
    sidecar_args: tuple[str, ...],
    witness_args: tuple[str, ...] | None = None,
) -> Iterator[tuple[ClientProcess, SidecarProcess, SidecarProcess | None]]:
    """The incident's client (its `start`-th on this lab) and a sidecar watching its
    process with an EMPTY telemetry directory (the incidents' clients write none), and,
    with `witness_args`, a second sidecar watching the same client with those flags
    instead of `sidecar_args` (another setting judged on the very same start); all
    stopped on the way out."""
    telemetry = scratch / "telemetry"
    telemetry.mkdir(exist_ok=True)
    log_path = scratch / f"client-{start}.log"
    spark = incident.where is Where.SPARK
    bootstrap, prefix, reach = reaching(incident, lab, scratch)
    client = ClientProcess([*prefix, *incident.command(bootstrap, scratch)], log_path, spark)
    sidecars: list[SidecarProcess] = []
    try:
        watched = (
            client.spark_executor().sidecar_argv()
            if spark
            else ["--socket-process", str(client.proc.pid)]
        )
        for extra in (sidecar_args, *(() if witness_args is None else (witness_args,))):
            sidecars.append(
                SidecarProcess(
                    bootstrap,
                    telemetry,
                    timing or SidecarTiming(),
                    *watched,
                    *incident.sidecar_args,
                    *reach,
                    *extra,
                    prefix=prefix,
                )
            )
        yield client, sidecars[0], (sidecars[1] if len(sidecars) > 1 else None)
    finally:
        for sidecar in sidecars:
            sidecar.stop()
        client.stop()
        assert not any(telemetry.iterdir()), "an incident client wrote telemetry?"


def replay_started_after(
    incidents: Sequence[Incident],
    starts: int,
    watch_seconds: float,
    timing: SidecarTiming | None = None,
    sidecar_args: tuple[str, ...] = (),
    witness_args: tuple[str, ...] | None = None,
) -> list[Replay]:
    """The incidents' fault first, then `starts` rounds of fresh clients on the same
    faulted lab, one client of each incident per round, one after another, each watched
    for `watch_seconds` from its start by its own sidecar (the fault is already there:
    no healthy baseline) and, with `witness_args`, by a second sidecar with those flags
    (`Replay.witness_changes`). For clients whose bug needs the fault before they learn
    the cluster (kafka-go v0.4.8 keeps the error of a failed FIRST metadata request: S1
    with the client started after the shrink), and their controls on the same cluster.
    The incidents share one lab and one fault (the first's). The records in start order,
    each named `<incident>#<round>`."""
    first = incidents[0]
    shape = (first.brokers, first.controllers, first.kafka_version, first.fault)
    for other in incidents[1:]:
        if (other.brokers, other.controllers, other.kafka_version, other.fault) != shape:
            raise ValueError(f"{other.id} needs another lab or fault than {first.id}")
    results = []
    with (
        started_lab(first) as lab,
        tempfile.TemporaryDirectory(prefix="hangwatch-incident-") as tmp,
    ):
        scratch = Path(tmp)
        first.inject(lab, scratch)
        for n, incident in enumerate(i for _ in range(starts) for i in incidents):
            round_ = n // len(incidents) + 1
            print(f"{incident.id}: fresh client {round_}/{starts}", file=sys.stderr, flush=True)
            started_at = time.monotonic()
            with _client_and_sidecar(
                incident, lab, scratch, n, timing, sidecar_args, witness_args
            ) as (client, sidecar, witness):
                result = Replay(f"{incident.id}#{round_}", baseline="")
                _watch(result, sidecar, client, started_at, watch_seconds, witness)
            results.append(result)
    return results


def _watch(
    result: Replay,
    sidecar: SidecarProcess,
    client: ClientProcess,
    fault_at: float,
    seconds: float,
    witness: SidecarProcess | None = None,
) -> None:
    last = result.baseline
    witnessed = result.baseline
    while (elapsed := time.monotonic() - fault_at) < seconds:
        doc = sidecar.status()
        result.spark = doc.get("spark")
        sockets = doc.get("sockets") or {}
        result.advisories |= {str(a.get("hang")) for a in doc.get("advisories") or []}
        for key in WRITE_FIGURES:
            if (value := sockets.get(key)) is not None:
                result.socket_peaks[key] = max(result.socket_peaks.get(key, 0.0), float(value))
        if doc["verdict"] != last:
            last = str(doc["verdict"])
            result.changes.append((round(elapsed, 2), last, list(doc["reasons"])))
        if witness is not None:
            seen = witness.status()
            if seen["verdict"] != witnessed:
                witnessed = str(seen["verdict"])
                result.witness_changes.append((round(elapsed, 2), witnessed, list(seen["reasons"])))
        error = client.first_error_after(fault_at)
        if error is not None and result.first_error_after is None:
            result.first_error_after, result.first_error = round(error[0] - fault_at, 2), error[1]
        acks = [at for at in list(client.acks) if at >= fault_at]
        if acks and result.first_ack_after is None:
            result.first_ack_after = round(acks[0] - fault_at, 2)
        if (code := client.proc.poll()) is not None:
            result.client_exit = code
            break
        time.sleep(0.25)
    end = time.monotonic()
    result.watched_seconds = round(end - fault_at, 2)
    result.acks_after = client.acked_since(fault_at)
    if result.acks_after:
        result.last_ack_after = round(client.acks[-1] - fault_at, 2)
    result.errors_after = client.errors_since(fault_at)
    windows = int((end - fault_at) // WINDOW_SECONDS) + 1
    result.acks_per_window = [0] * windows
    for at in list(client.acks):
        if fault_at <= at <= end:
            result.acks_per_window[int((at - fault_at) // WINDOW_SECONDS)] += 1
    for at, text in list(client.errors):
        if at >= fault_at:
            key = text[:120]
            result.error_kinds[key] = result.error_kinds.get(key, 0) + 1
    result.longest_pause = round(client.longest_pause(fault_at, end), 2)
    result.acks_per_second_after = round(result.acks_after / (end - fault_at), 1)
