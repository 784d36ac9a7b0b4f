"""A real client, a real `hangwatch sidecar` process with an empty telemetry directory, the lab.

`run` starts the lab, the client's workload and a sidecar process (its own code, its
own process, nothing of the client's shared with it but the network namespace), waits
for the baseline verdict, injects the fault and polls /status every `poll_seconds`,
recording each verdict change with its time since the fault, until the expected verdict
appears (or, for controls, for the whole watch). The client's own first error after the
fault is recorded next to it. Everything stops on the way out (no process, no rule left).
`on_each_broker` and `on_the_leader` turn a lab fault into the fault of a run.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangwatch.child_processes import stop_process
from hangwatch_demo.sidecars import announced_port
from hangwatch_lab import Lab
from hangwatch_testing.clients.workloads import Rhythm, Workload
from hangwatch_testing.processes import sidecar_command
from hangwatch_testing.waiting import wait_for

TOPIC = "t"
PARTITIONS = 3


def on_each_broker(fault: Callable[[Lab, int], None]) -> Callable[[Lab], None]:
    """`fault` (e.g. `Lab.blackhole`) applied to every broker of the lab."""

    def apply(lab: Lab) -> None:
        for broker in lab.brokers:
            _bound(lab, fault)(broker)

    return apply


def _bound(lab: Lab, fault: Callable[[Lab, int], None]) -> Callable[[int], None]:
    """`fault` as the lab's engine implements it: `Lab.stall_produce` names the base
    class's (which only says which engine makes the fault), the engine's own overrides it."""
    method: Callable[[int], None] = getattr(lab, fault.__name__)
    return method


def on_the_leader(
    fault: Callable[[Lab, int], None], named: list[str] | None = None
) -> Callable[[Lab], None]:
    """`fault` applied to the leader of partition 0 of TOPIC; its address is appended to
    `named` (when given), for the test to look for in the verdict's reasons."""

    def apply(lab: Lab) -> None:
        metadata = lab.admin().list_topics(TOPIC, timeout=10)
        broker = int(metadata.topics[TOPIC].partitions[0].leader)
        if named is not None:
            named.append(lab.brokers[broker].address)
        _bound(lab, fault)(broker)

    return apply


@dataclass(frozen=True)
class SidecarTiming:
    """Sidecar settings for these runs (short, so a run takes seconds)."""

    probe_interval_seconds: float = 1.0
    stall_seconds: float = 5.0
    connect_timeout_ms: int = 1000
    request_timeout_ms: int = 1000
    hysteresis_intervals: int = 2
    probe_mode: str = "passive-first"
    fresh_connect_interval_seconds: float = 300.0

    def argv(self) -> list[str]:
        return [
            *("--probe-interval-seconds", str(self.probe_interval_seconds)),
            *("--stall-seconds", str(self.stall_seconds)),
            *("--heartbeat-seconds", str(self.stall_seconds)),
            *("--connect-timeout-ms", str(self.connect_timeout_ms)),
            *("--request-timeout-ms", str(self.request_timeout_ms)),
            *("--hysteresis-intervals", str(self.hysteresis_intervals)),
            *("--probe-mode", self.probe_mode),
            *("--fresh-connect-interval-seconds", str(self.fresh_connect_interval_seconds)),
        ]


class SidecarProcess:
    """`hangwatch sidecar` as its own process; `status()` reads its /status."""

    def __init__(
        self,
        bootstrap: str,
        telemetry_dir: Path,
        timing: SidecarTiming,
        *extra: str,
        topics: str = TOPIC,
        prefix: Sequence[str] = (),
    ) -> None:
        """`prefix`: what the sidecar's command runs under (e.g. a hosts file of its own:
        `hangwatch_lab.kafka.names.in_hosts_namespace`)."""
        self._dir = tempfile.TemporaryDirectory(prefix="hangwatch-sidecar-")
        self.log_path = Path(self._dir.name) / "sidecar.log"
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [
                    *prefix,
                    *sidecar_command(bootstrap, topics, telemetry_dir, *timing.argv(), *extra),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.port: int = wait_for(
            lambda: announced_port(self.log_path),
            30.0,
            "the sidecar's port",
            give_up=lambda: self.proc.poll() is not None,
            context=lambda: self.log_path.read_text(errors="replace")[-2000:],
        )

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status", timeout=5) as r:
            doc: dict[str, Any] = json.load(r)
            return doc

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self._dir.cleanup()


@dataclass
class Run:
    """What one run saw."""

    client: str
    fault: str
    changes: list[tuple[float, str, list[str]]] = field(default_factory=list)
    """(seconds since the fault, verdict, reasons) at every change of the reported verdict."""
    baseline: str = ""
    detected_seconds: float | None = None
    client_error_seconds: float | None = None
    client_error: str = ""
    final: dict[str, Any] = field(default_factory=dict)
    fault_wall: float = 0.0
    """Wall-clock time of the fault (the report's time axis starts there)."""
    engine: str = ""
    """The lab's Kafka engine and version."""

    @property
    def verdicts(self) -> set[str]:
        return {v for _, v, _ in self.changes} | {self.baseline}

    def describe(self) -> str:
        shown = [(t, v, r[:2]) for t, v, r in self.changes]
        return f"{self.client} / {self.fault}: baseline {self.baseline}, changes {shown}"


@contextmanager
def lab_client_sidecar(
    client: str,
    rhythm: Rhythm | None = None,
    timing: SidecarTiming | None = None,
    wedge: Path | None = None,
    extra_clients: tuple[str, ...] = (),
) -> Iterator[tuple[Lab, Workload, SidecarProcess]]:
    """The lab, a workload of `client` (plus `extra_clients` argv run alongside, e.g. a
    consumer) and a sidecar process with an empty telemetry directory."""
    with (
        Lab(brokers=3, topics={TOPIC: PARTITIONS}) as lab,
        tempfile.TemporaryDirectory(prefix="hangwatch-real-client-") as tmp,
    ):
        telemetry = Path(tmp) / "telemetry"
        telemetry.mkdir()  # stays empty: these clients write no telemetry
        workload = Workload(client, lab.bootstrap, TOPIC, rhythm, wedge)
        others = [
            subprocess.Popen(
                [part.replace("{bootstrap}", lab.bootstrap) for part in argv.split()],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for argv in extra_clients
        ]
        sidecar = None
        try:
            sidecar = SidecarProcess(lab.bootstrap, telemetry, timing or SidecarTiming())
            yield lab, workload, sidecar
        finally:
            if sidecar is not None:
                sidecar.stop()
            workload.stop()
            for other in others:
                other.terminate()
                other.wait(10)
            assert not any(telemetry.iterdir()), "a real client wrote telemetry?"


def wait_baseline(sidecar: SidecarProcess, workload: Workload, timeout: float = 45.0) -> str:
    """Waits until the sidecar reports healthy with the client connected; the verdict."""
    deadline = time.monotonic() + timeout
    verdict = ""
    while time.monotonic() < deadline:
        doc = sidecar.status()
        verdict = str(doc["verdict"])
        connected = (doc.get("sockets") or {}).get("connections_total", 0) > 0
        if verdict == "healthy" and connected:
            return verdict
        if workload.proc.poll() is not None:
            raise RuntimeError(f"{workload.client} exited during the baseline")
        time.sleep(0.25)
    raise RuntimeError(f"no healthy baseline with {workload.client} in {timeout} s: {verdict}")


def watch(
    run: Run,
    sidecar: SidecarProcess,
    workload: Workload,
    fault_at: float,
    *,
    expect: str | None,
    seconds: float,
    poll_seconds: float = 0.25,
    error_wait_seconds: float = 0.0,
) -> Run:
    """Polls /status until `expect` is reported (None: for the whole `seconds`)."""
    last = run.baseline
    while time.monotonic() - fault_at < seconds:
        doc = sidecar.status()
        if doc["verdict"] != last:
            last = doc["verdict"]
            run.changes.append((round(time.monotonic() - fault_at, 2), last, doc["reasons"]))
        run.final = doc
        if expect is not None and last == expect:
            run.detected_seconds = run.changes[-1][0]
            break
        time.sleep(poll_seconds)
    deadline = fault_at + max(error_wait_seconds, time.monotonic() - fault_at)
    while workload.error_after(fault_at) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    error = workload.error_after(fault_at)
    if error is not None:
        run.client_error_seconds, run.client_error = error
    return run


def run(
    client: str,
    fault: str,
    inject: Callable[[Lab], None],
    *,
    expect: str | None,
    seconds: float,
    rhythm: Rhythm | None = None,
    timing: SidecarTiming | None = None,
    error_wait_seconds: float = 0.0,
    extra_clients: tuple[str, ...] = (),
) -> Run:
    """One client through one fault; `expect` None: a control watched for `seconds`."""
    with lab_client_sidecar(client, rhythm, timing, extra_clients=extra_clients) as (
        lab,
        workload,
        sidecar,
    ):
        result = Run(
            client, fault, baseline=wait_baseline(sidecar, workload), engine=lab.engine_description
        )
        fault_at, result.fault_wall = time.monotonic(), time.time()
        inject(lab)
        return watch(
            result,
            sidecar,
            workload,
            fault_at,
            expect=expect,
            seconds=seconds,
            error_wait_seconds=error_wait_seconds,
        )
