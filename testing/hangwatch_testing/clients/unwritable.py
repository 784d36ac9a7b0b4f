"""Issue 43's ISR case, by a real producer, watched by real sidecars, on Apache Kafka.

A topic with replication factor 3 and `min.insync.replicas` 3 (`refusals.ISR_TOPIC`, on
the refusal controls' 3-broker lab, `refusals.refusals_lab`), a producer writing to it
with `acks=all` (every kind's default), then one broker stopped (`Lab.down`: Kafka's
controlled shutdown): the two brokers left answer every Produce with NOT_ENOUGH_REPLICAS,
which the clients retry quietly until their own delivery timeout. `watch_unwritable`
runs one producer kind (`refusals.ProducerRun`: a plain confluent-kafka producer, the
wrapper outside Spark, or Spark's own Kafka sink on a real executor) next to one real
`hangwatch sidecar` process per view of it, and records, in three phases:

- `control`: every broker up, until the producer has delivered and `control_seconds`
  more (the same topic accepts: the sidecars must say `healthy`);
- `fault`: broker 3 stopped, for `fault_seconds` (several stall thresholds: long enough
  for any restart rule to fire);
- `back`: broker 3 started again (`Lab.restore`: returned once it serves), until the
  producer has delivered again after it and every sidecar says `healthy` again, or
  `recover_seconds`.

Spark's sink runs once with hangwatch's reporter loaded into its Java client and is
watched by two sidecars at once: one reading the reporter's telemetry (`spark-telemetry`)
and one with an empty telemetry directory (`spark`: what a sidecar knows of the sink
without the jar; the reporter changes nothing the sink does). Everything stops on every
path; the broker is started again whatever happened.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hangwatch_lab import Lab
from hangwatch_testing.clients.refusals import (
    ISR_TOPIC,
    SPARK,
    SPARK_TELEMETRY,
    ProducerRun,
    Refusal,
)
from hangwatch_testing.clients.runs import SidecarProcess, SidecarTiming

STOPPED_BROKER = 3
ISR_CASE = Refusal(
    "unwritable",
    ISR_TOPIC,
    "NOT_ENOUGH_REPLICAS",
    rate=40.0,
    message_timeout_ms=20_000,
    rows=20,
)
"""How the producers write: 40 messages a second (Spark: 20 rows a write), every kind's
default acks (all), a 20 s delivery timeout (librdkafka's message.timeout.ms, the Java
client's delivery.timeout.ms): the refusal outlasts it, so the producers' own errors come
before the broker is back."""
WRITE_INTERVAL_SECONDS = 5.0
"""The plain producer's declared write interval (the producer-pod setup: a policy's
`detection.expectedWriteIntervalSeconds`)."""
PHASES = ("control", "fault", "back")
NAMED = ("topic isr", "ISR 2 of 3", "min.insync.replicas 3", f"broker {STOPPED_BROKER}")
"""What a sidecar's reasons must name in the fault: the topic, the ISR against
min.insync.replicas, the broker out of the ISR."""


@dataclass
class Seen:
    """What one sidecar said; times in seconds from the start of the watch."""

    view: str
    changes: list[tuple[float, str, str, list[str]]] = field(default_factory=list)
    """(seconds, phase, verdict, reasons) at every change of the sidecar's verdict."""
    producer_verdicts: dict[str, set[str]] = field(default_factory=dict)
    """Phase -> every per-producer verdict /status showed in it."""
    final: dict[str, Any] = field(default_factory=dict)
    fault_status: dict[str, Any] = field(default_factory=dict)
    """The last /status of the fault phase."""

    def verdicts(self, phase: str) -> set[str]:
        """Every verdict of the pod and its producers reported in `phase`."""
        pod = {v for _, p, v, _ in self.changes if p == phase}
        before = [v for _, p, v, _ in self.changes if PHASES.index(p) < PHASES.index(phase)]
        if before:  # the verdict the phase began with
            pod.add(before[-1])
        return pod | self.producer_verdicts.get(phase, set())

    def reasons(self, verdict: str) -> list[str]:
        return [r for _, _, v, reasons in self.changes if v == verdict for r in reasons]

    def describe(self) -> str:
        return f"{self.view}: {[(t, p, v, r[:2]) for t, p, v, r in self.changes]}"


@dataclass
class Watched:
    """One producer through the ISR case."""

    kind: str
    engine: str
    seen: dict[str, Seen]
    """View (the producer kind, or `spark` / `spark-telemetry`) -> what its sidecar said."""
    delivered: dict[str, int] = field(default_factory=dict)
    """Phase -> what the producer had delivered when the phase ended."""
    errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    """Phase -> how long it lasted."""

    def describe(self) -> str:
        return (
            f"{self.kind} on {self.engine}: delivered {self.delivered}, phases "
            f"{self.seconds}, errors {self.errors[:2]}; "
            + "; ".join(s.describe() for s in self.seen.values())
        )


def _views(kind: str) -> tuple[str, ...]:
    return (SPARK_TELEMETRY, SPARK) if kind == SPARK_TELEMETRY else (kind,)


def watch_unwritable(
    lab: Lab,
    kind: str,
    *,
    timing: SidecarTiming | None = None,
    control_seconds: float = 5.0,
    fault_seconds: float = 30.0,
    recover_seconds: float = 90.0,
    start_seconds: float = 90.0,
) -> Watched:
    """`kind` (`confluent-kafka`, `wrapper` or `spark-telemetry`) through the ISR case
    (the module's docstring), one sidecar per view of it."""
    timing = timing or SidecarTiming()
    with tempfile.TemporaryDirectory(prefix="hangwatch-unwritable-") as tmp:
        producer = ProducerRun(kind, ISR_CASE, lab.bootstrap, Path(tmp))
        sidecars: dict[str, SidecarProcess] = {}
        try:
            sidecars = _start_sidecars(lab, kind, producer, timing, Path(tmp))
            watched = Watched(kind, lab.engine_description, {v: Seen(v) for v in sidecars})
            _run(lab, watched, producer, sidecars, control_seconds, fault_seconds,
                 recover_seconds, start_seconds)  # fmt: skip
            return watched
        finally:
            for sidecar in sidecars.values():
                sidecar.stop()
            producer.stop()
            lab.restore(STOPPED_BROKER)


def _start_sidecars(
    lab: Lab, kind: str, producer: ProducerRun, timing: SidecarTiming, work: Path
) -> dict[str, SidecarProcess]:
    sidecars: dict[str, SidecarProcess] = {}
    if kind == SPARK_TELEMETRY:
        executor = producer.spark_executor().sidecar_argv()
        empty = work / "no-telemetry"
        empty.mkdir()
        for view, telemetry in ((SPARK_TELEMETRY, producer.telemetry), (SPARK, empty)):
            sidecars[view] = SidecarProcess(
                lab.bootstrap, telemetry, timing, *executor, topics=ISR_TOPIC
            )
        return sidecars
    extra = ["--socket-process", str(producer.proc.pid)]
    if kind == "confluent-kafka":  # a producer pod: its policy declares a write interval
        extra += ["--expected-write-interval-seconds", str(WRITE_INTERVAL_SECONDS)]
    sidecars[kind] = SidecarProcess(
        lab.bootstrap, producer.telemetry, timing, *extra, topics=ISR_TOPIC
    )
    return sidecars


def _run(
    lab: Lab,
    watched: Watched,
    producer: ProducerRun,
    sidecars: dict[str, SidecarProcess],
    control_seconds: float,
    fault_seconds: float,
    recover_seconds: float,
    start_seconds: float,
) -> None:
    started = time.monotonic()
    last: dict[str, str] = {}
    phase, phase_at, delivered_since = "control", started, None

    def poll() -> int:
        for view, sidecar in sidecars.items():
            doc = sidecar.status()
            seen = watched.seen[view]
            seen.final = doc
            if phase == "fault":
                seen.fault_status = doc
            if doc["verdict"] != last.get(view):
                last[view] = str(doc["verdict"])
                elapsed = round(time.monotonic() - started, 2)
                seen.changes.append((elapsed, phase, last[view], list(doc["reasons"])))
            verdicts = seen.producer_verdicts.setdefault(phase, set())
            verdicts.update(str(a.get("verdict")) for a in (doc.get("producers") or {}).values())
        errors, _, delivered = producer.report()
        watched.errors = errors
        if producer.proc.poll() is not None:
            raise RuntimeError(f"the {producer.kind} producer exited: {watched.describe()}")
        return delivered

    def end(name: str, delivered: int) -> None:
        watched.delivered[name] = delivered
        watched.seconds[name] = round(time.monotonic() - phase_at, 2)

    while True:  # control: every broker up
        delivered = poll()
        now = time.monotonic()
        if delivered and delivered_since is None:
            delivered_since = now
        if delivered_since is not None and now - delivered_since >= control_seconds:
            healthy = all(last.get(v) == "healthy" for v in sidecars)
            if healthy or now - delivered_since >= control_seconds + 30:
                break
        if now - started > start_seconds + control_seconds + 30:
            raise RuntimeError(f"no delivery before the fault: {watched.describe()}")
        time.sleep(0.5)
    end("control", delivered)
    lab.down(STOPPED_BROKER)
    phase, phase_at = "fault", time.monotonic()
    while time.monotonic() - phase_at < fault_seconds:
        delivered = poll()
        time.sleep(0.5)
    end("fault", delivered)
    lab.restore(STOPPED_BROKER)
    phase, phase_at = "back", time.monotonic()
    at_restore = delivered
    while time.monotonic() - phase_at < recover_seconds:
        delivered = poll()
        if delivered > at_restore and all(last.get(v) == "healthy" for v in sidecars):
            break
        time.sleep(0.5)
    end("back", delivered)


def acceptance_of(status: dict[str, Any], topic: str = ISR_TOPIC) -> dict[str, Any]:
    """The topic's entry of a /status document's `cluster.acceptance` ({} when absent)."""
    for entry in (status.get("cluster") or {}).get("acceptance") or []:
        if entry.get("topic") == topic:
            return dict(entry)
    return {}


def said(seen: Seen, words: Sequence[str]) -> bool:
    """Whether the sidecar's reasons or latest evidence carry every one of `words`."""
    text = json.dumps([seen.changes, seen.fault_status.get("latest")])
    return all(w in text for w in words)
