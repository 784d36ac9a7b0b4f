"""The incidents replayed with their own clients at their own versions, on Apache Kafka.

For each incident (S0 sarama v1.37.2 SyncProducer, S1 kafka-go v0.4.8, S2 sarama v1.37.2
idempotent with v1.38.0 as the control, S3 Kafka 0.8.2.2's Scala producer, S4
kafka-clients 0.11.0.3), `--runs` replays (default 3), each on a fresh 3-broker Apache
Kafka lab (the `kafka` engine; the lab's default 4.x, or 3.9.2 for S3 and S4, whose
clients are older than 2.1, and for S2-interval* and S2-idle*: `Incident.kafka_version`;
S2-idle*'s brokers close connections idle 3 s, `Incident.broker_configs`) next to a real
`hangwatch sidecar`
with an empty telemetry directory, its socket view narrowed to the client's process (1 s
probes, 5 s stall, 1 s timeouts, hysteresis 2; `hangwatch_testing.incidents`).
Prints one line per replay as it ends, then the README's table: did the client reproduce
the write-up's symptom (how long it acknowledged nothing after the fault, its own first
error), the sidecar's first verdict other than healthy, the seconds from the fault to it
(median and max over the runs; and from the client's last acknowledgement, for a client
silent from then on), every other verdict seen, the operator's default action
for each, and the evidence the first verdict named (first run). Needs root (iptables),
Java 17, Maven and Go. Incidents: S0 S1 S1-frozen S1-most-dead S1-most-dead-control
S1-fresh S1-fresh-control S2 S2-control S2-stop S2-stop-control S2-interval
S2-interval-control S2-idle S2-idle-control S3 S4 S4-dump S4-control
(`hangwatch_testing.incidents.catalogue.INCIDENTS`). The S1-most-dead* and S1-fresh* rows
run on 5 brokers beside 3 controllers, shrunk to 2 (`Incident.brokers`,
`controllers`). S1-fresh* start the client after the shrink
(`Incident.client_after_fault`: no healthy baseline): ONE lab for all of them (8 JVMs),
shrunk once, then `--starts` rounds (default 8) of one fresh client of each chosen
S1-fresh* incident, one after another, each watched 30 s from its start by the default
sidecar and by a second one with a declared write interval (`WITNESS_ARGS`); their rows
say in how many starts the client was stuck (no acknowledgement in the watch, its writes
erring), the verdicts of those starts timed from the client's start, and the second
sidecar's. Some rows run the sidecar with a
setting of their own (`Incident.sidecar_args`): S2-interval* and S2-idle* with a declared
write interval (`--expected-write-interval-seconds 10`, a policy's
`detection.expectedWriteIntervalSeconds`), S4-dump with the local JVM's thread dumps
(`--jvm-thread-dumps`, one per second). The first line printed is the machine and its
load.

The field corpus's rows (`Incident.case`: librdkafka issues 5430 and 5080, kafka-go issue
451, sarama issue 2150, kafkajs issue 918, Java kafka-clients' KAFKA-7755 and
KAFKA-20237, ...) run where the reports' clients ran: as producer pods (a declared write
interval), or inside Spark (librdkafka: a PySpark task on a real executor,
`hangwatch_testing.incidents.spark_task`); after each watch they restart their client to
see whether a fresh one writes. KAFKA-20237's client starts refused (a certificate it
does not trust): its runs have no healthy baseline, and their fault is the certificate
fixed. With `--scorecard` their runs are
summed into the scorecard (`hangwatch_testing.incidents.scoring`): the rows replace those
of the same id in the scorecard the run report shows
(demo/hangwatch_demo/report/field-corpus.json), and docs/incidents.md's scorecard
section is rendered again from it.

    python benchmarks/incidents.py [--runs 3] [--starts 8] [--scorecard]
                                   [--incidents S0,S1,S2,S2-control,S3,S4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from machine import describe, unwind_on_sigterm

from hangwatch.contracts import Verdict
from hangwatch.errors import LabError
from hangwatch_lab import kafkajars
from hangwatch_operator.policies import DEFAULT_ACTIONS
from hangwatch_testing.clients.runs import SidecarTiming
from hangwatch_testing.incidents.catalogue import BY_ID, INCIDENTS
from hangwatch_testing.incidents.model import Incident
from hangwatch_testing.incidents.replay import Replay, replay, replay_started_after
from hangwatch_testing.incidents.scoring import score_row, write_scorecard
from hangwatch_testing.incidents.seeds import WRITE_INTERVAL_SECONDS

REPO = Path(__file__).resolve().parents[1]
FRESH_WATCH_SECONDS = 30.0
"""How long each fresh client of S1-fresh* is watched from its start."""
WITNESS_ARGS = ("--expected-write-interval-seconds", str(WRITE_INTERVAL_SECONDS))
"""The second sidecar's setting on every S1-fresh* start: a policy's declared write
interval (`detection.expectedWriteIntervalSeconds`): would `producer_silent` flag a
client stuck on its cached error?"""


def first_alarm(result: Replay) -> tuple[float, str, list[str]] | None:
    """The first verdict change away from healthy (and from `unknown`, a sidecar still
    starting: S1-fresh*): (seconds from the fault, verdict, reasons)."""
    return next((c for c in result.changes if c[1] not in ("healthy", "unknown")), None)


def since_last_ack(result: Replay) -> float | None:
    """Seconds from the client's last acknowledgement to the first alarm, when the client
    acknowledged nothing after the fault past that point (silence: how fast a declared
    write interval turns it into a verdict)."""
    alarm = first_alarm(result)
    last = result.last_ack_after
    if last is None and result.last_ack_before_fault is not None:
        last = -result.last_ack_before_fault
    if alarm is None or last is None or last > alarm[0]:
        return None
    return alarm[0] - last


def reproduced(incident: Incident, result: Replay) -> str:
    """What the client did after the fault, in the table's words."""
    error = result.first_error_after
    said = f"first error at {error:.0f} s" if error is not None else "no error"
    counts = (
        f"{result.acks_after} acks ({result.acks_per_second_after:g}/s; before the fault "
        f"{result.acks_per_second_before:g}/s), {result.errors_after} errors"
    )
    if result.first_ack_after is None:
        return f"silent {result.silent_seconds():.0f} s (whole watch), {said}"
    return (
        f"longest pause {result.longest_pause:.1f} s; {said}; {counts} in "
        f"{result.watched_seconds:.0f} s"
    )


def action(verdict: str) -> str:
    try:
        operations = DEFAULT_ACTIONS.get(Verdict(verdict), ())
    except ValueError:
        return "?"
    return ", ".join(op.value for op in operations) or "none"


def row(incident: Incident, results: list[Replay]) -> str:
    alarms = [first_alarm(r) for r in results]
    verdicts = sorted({v for r in results for _, v, _ in r.changes if v != "healthy"})
    times = [a[0] for a in alarms if a is not None]
    timing = f"{statistics.median(times):.1f} ({max(times):.1f})" if times else "-"
    if len(times) < len(results):
        timing += f", {len(results) - len(times)}/{len(results)} runs healthy throughout"
    quiet = [t for t in (since_last_ack(r) for r in results) if t is not None]
    if quiet:
        timing += f"; from the last ack {statistics.median(quiet):.1f} ({max(quiet):.1f})"
    first = next((a for a in alarms if a is not None), None)
    evidence = "; ".join(first[2][:2])[:160] if first else "-"
    shown = ", ".join(verdicts) or "healthy throughout"
    actions = ", ".join(action(v) for v in verdicts) or "none"
    outcomes = " / ".join(reproduced(incident, r) for r in results)
    kafka = incident.kafka_version or kafkajars.default_version()
    if incident.control:
        outcomes = "control: " + outcomes
    return (
        f"| {incident.id} | {incident.label} | {incident.fault} (Kafka {kafka}) | {outcomes} "
        f"| {shown} | "
        f"{timing} | {actions} | {evidence} |"
    )


def stuck(result: Replay) -> bool:
    """A fresh client stuck from its start: nothing acknowledged in the watch, its writes
    erring (S1's write-up: every write fails while the cluster serves)."""
    return result.acks_after == 0 and result.errors_after > 0


def _verdicts(changes: list[tuple[float, str, list[str]]]) -> str:
    """Each verdict of a start with the seconds from the client's start it came at."""
    return " -> ".join(f"{v} {t:.1f}" for t, v, _ in changes) or "none"


def fresh_row(incident: Incident, results: list[Replay]) -> str:
    """A row of S1-fresh*: how many of the fresh starts stuck, what the stuck ones did and
    what both sidecars said of them (times from the client's start)."""
    hung = [r for r in results if stuck(r)]
    went_on = [r for r in results if not stuck(r)]
    outcomes = f"stuck in {len(hung)} of {len(results)} starts"
    for r in hung:
        kinds = "; ".join(f"{n} x {text}" for text, n in r.error_kinds.items())
        outcomes += (
            f"; {r.incident}: 0 acks in {r.watched_seconds:.0f} s, {r.errors_after} errors "
            f"from {r.first_error_after} s ({kinds[:160]})"
        )
    if went_on:
        firsts = [r.first_ack_after for r in went_on if r.first_ack_after is not None]
        span = f"{min(firsts):.1f}-{max(firsts):.1f}" if firsts else "-"
        outcomes += (
            f"; the other {len(went_on)}: first ack {span} s after the start, "
            f"{sum(r.errors_after for r in went_on)} errors in all"
        )
    if incident.control:
        outcomes = "control: " + outcomes
    judged = hung or results
    shown = " / ".join(f"{r.incident}: {_verdicts(r.changes)}" for r in judged)
    witnessed = " / ".join(f"{r.incident}: {_verdicts(r.witness_changes)}" for r in judged)
    verdicts = sorted({v for r in judged for _, v, _ in r.changes} - {"healthy", "unknown"})
    alarms = [a[0] for a in (first_alarm(r) for r in judged) if a is not None]
    timing = (
        f"{statistics.median(alarms):.1f} ({max(alarms):.1f}) from the client's start"
        if alarms
        else "-"
    )
    first = next((a for a in (first_alarm(r) for r in judged) if a is not None), None)
    evidence = "; ".join(first[2][:2])[:160] if first else "-"
    actions = ", ".join(action(v) for v in verdicts) or "none"
    return (
        f"| {incident.id} | {incident.label} | {incident.fault}, then fresh clients "
        f"(Kafka {incident.kafka_version or kafkajars.default_version()}) | {outcomes} | "
        f"{shown}; with {' '.join(WITNESS_ARGS)}: {witnessed} | {timing} | {actions} | "
        f"{evidence} |"
    )


def _replay(incident: Incident, attempts: int = 3) -> Replay:
    """One replay; a lab that fails to start or to apply the fault is started afresh (up to
    `attempts` times), said on stderr: that is no measurement of the client."""
    for attempt in range(1, attempts + 1):
        try:
            return replay(incident)
        except LabError as exc:
            print(f"  lab error ({exc}); attempt {attempt}/{attempts}", file=sys.stderr)
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _load() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: the numbers depend on it)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--starts", type=int, default=8, help="fresh clients per S1-fresh* incident"
    )
    parser.add_argument("--incidents", default=",".join(i.id for i in INCIDENTS))
    parser.add_argument(
        "--scorecard",
        action="store_true",
        help="sum the field corpus's rows into the run report's scorecard and docs/incidents.md",
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.incidents.split(",") if name not in BY_ID]
    if unknown or args.runs < 1 or args.starts < 1:
        parser.error(
            f"unknown incidents {', '.join(unknown)} (known: {', '.join(BY_ID)})"
            if unknown
            else "--runs and --starts must be at least 1"
        )
    chosen = [BY_ID[name] for name in args.incidents.split(",")]
    print(f"{describe()}; load average {_load()}", flush=True)
    rows: dict[str, str] = {}
    scored = []
    started = time.monotonic()
    fresh = [i for i in chosen if i.client_after_fault]
    if fresh:
        records = replay_started_after(
            fresh, args.starts, FRESH_WATCH_SECONDS, witness_args=WITNESS_ARGS
        )
        for result in records:
            print(
                f"[{time.monotonic() - started:6.0f} s] (load {_load()}): {result.describe()}",
                flush=True,
            )
        for incident in fresh:
            mine = [r for r in records if r.incident.split("#")[0] == incident.id]
            rows[incident.id] = fresh_row(incident, mine)
    for incident in (i for i in chosen if not i.client_after_fault):
        results = []
        for n in range(args.runs):
            result = _replay(incident)
            results.append(result)
            print(
                f"[{time.monotonic() - started:6.0f} s] run {n + 1} (load {_load()}): "
                f"{result.describe()}"
            )
            if result.election:
                print(f"          election: {result.election}", flush=True)
        rows[incident.id] = row(incident, results)
        if incident.case is not None:
            scored.append(score_row(incident, results, SidecarTiming()))
    if args.scorecard and scored:
        measured = (
            f"{describe()}, load average {_load()} at the end, "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}: `python benchmarks/incidents.py "
            f"--runs {args.runs} --scorecard --incidents {','.join(r.row for r in scored)}`."
        )
        for path in write_scorecard(scored, measured, REPO):
            print(f"wrote {path}", flush=True)
    print(
        "\n| incident | client, version | fault (Apache Kafka, 3 KRaft nodes) | "
        "reproduced? (per run) | verdict | fault to verdict, s: median (max) | action | "
        "evidence named |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows[i.id] for i in chosen), flush=True)
    return 0


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
