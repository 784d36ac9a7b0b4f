"""Real clients without hangwatch's wrapper: fault to verdict next to the client's own error,
and a long healthy run with idle periods (false positives, sidecar CPU and RSS).

Part 1, per client (sarama, kafka-go, kcat, a plain confluent-kafka producer) and fault
(stall-produce: S2's unanswered request; every broker blackholed: S0; the leader
blackholed: S3; every broker down), one run each: the lab, the client, a real
`hangwatch sidecar` process with an EMPTY telemetry directory (1 s probes, 5 s stall,
the default 30 s producer request timeout), the fault; prints the seconds from the
fault to the sidecar's verdict (polled every 0.25 s) next to the seconds to the
client's own first error (waited for up to `--error-wait-seconds`, "none" beyond) and
their ratio, and every verdict change the run saw. A request left unanswered is the
broker's (`broker_degraded`) within the request timeout: the stall-produce runs watch
on for `STALL_WATCH_SECONDS` to show which clients then give the wedged connection up
by themselves and which are `producer_hung` past that timeout.

Part 2: all four clients at once in one "pod" (the same network namespace), each
writing in bursts separated by idle periods (staggered), next to one sidecar with the
production defaults (5 s probes, 30 s stall) for `--healthy-seconds` (600: 10 minutes):
every verdict change is counted (producer_hung must never appear), and the sidecar's
CPU share of one core and peak RSS are measured with the socket view on (targets:
< 2 % of a core, < 80 MB). Prints the machine first. Needs root (iptables faults).

With `--report DIR`, part 1's runs are recorded as the demo records its scenarios
(`hangwatch_demo.report`: one scenario per client and fault, from what the run saw:
the sidecar's verdict changes, the client's own first error, the detection) and DIR
gets the HTML report with a timeline per run, its path printed last.

    python benchmarks/real_clients.py [--error-wait-seconds 40] [--healthy-seconds 600]
        [--faults stall-produce,...] [--report DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from machine import describe, reported, run_report, unwind_on_sigterm

from hangwatch_demo.demo_cli import add_report_option
from hangwatch_demo.report.recorder import Recorder
from hangwatch_lab import Lab
from hangwatch_testing.clients.runs import (
    PARTITIONS,
    TOPIC,
    Run,
    SidecarProcess,
    SidecarTiming,
    on_each_broker,
    on_the_leader,
    run,
)
from hangwatch_testing.clients.workloads import CLIENTS, PROGRAMS, Rhythm, Workload
from hangwatch_testing.processes import SidecarCost

FAULTS: dict[str, tuple[str, Callable[[Lab], None], str]] = {
    "stall-produce": ("S2", on_each_broker(Lab.stall_produce), "broker_degraded"),
    "blackhole-all": ("S0", on_each_broker(Lab.blackhole), "cluster_unreachable"),
    "blackhole-leader": ("S3", on_the_leader(Lab.blackhole), "broker_degraded"),
    "down-all": ("outage", on_each_broker(Lab.down), "cluster_unreachable"),
}


def record_run(recorder: Recorder, result: Run, seed: str, expect: str, bound: float) -> None:
    """One client-and-fault run in the report, from what it saw (times from its fault)."""
    fault = result.fault_wall
    record = recorder.scenario(
        f"{result.client} {result.fault}",
        fault=f"{result.fault} ({seed}), a real {result.client} client without telemetry",
        producer=result.client,
        engine=result.engine,
        expected=expect,
        control=False,
        bound_seconds=bound,
    )
    record.observe(fault, {"sidecar": result.baseline})
    record.fault(fault)
    for seconds, verdict, _reasons in result.changes:
        record.observe(fault + seconds, {"sidecar": verdict})
    if result.detected_seconds is not None:
        record.detected(fault + result.detected_seconds, expect)
    if result.client_error_seconds is not None:
        record.producer_error(fault + result.client_error_seconds, result.client_error)
    got = result.changes[-1][1] if result.changes else result.baseline
    record.row(
        engine=result.engine,
        producer=result.client,
        verdict=got,
        ok=result.detected_seconds is not None,
        detect_seconds=result.detected_seconds,
        action="none (no operator in this run)",
    )


def _changes(result: Run) -> str:
    return ", ".join(f"{t:.1f} {v}" for t, v, _ in result.changes[:5])


def matrix(error_wait: float, recorder: Recorder, faults: list[str]) -> None:
    print(
        f"\npart 1: fault to verdict, empty telemetry (1 s probes, 5 s stall); the client's "
        f"own first error waited for up to {error_wait:.0f} s"
    )
    print(
        f"{'client':16} {'fault':18} {'verdict':20} {'hangwatch s':>11} "
        f"{'client 1st error s':>19} {'ratio':>6}  client's error | verdict changes (s)"
    )
    ratios = []
    for client in CLIENTS:
        for fault in faults:
            seed, inject, expect = FAULTS[fault]
            print(f"  ... {client} {fault}", file=sys.stderr, flush=True)
            stall = fault == "stall-produce"
            result = run(
                client,
                fault,
                inject,
                expect=None if stall else expect,
                seconds=STALL_WATCH_SECONDS if stall else WATCH_SECONDS,
                error_wait_seconds=error_wait,
            )
            if stall:
                result.detected_seconds = next(
                    (t for t, v, _ in result.changes if v == expect), None
                )
            record_run(recorder, result, seed, expect, WATCH_SECONDS)
            got = result.changes[-1][1] if result.changes else result.baseline
            detect = result.detected_seconds
            error = result.client_error_seconds
            ratio = f"{detect / error:.2f}" if detect and error else "-"
            if detect and error:
                ratios.append(detect / error)
            print(
                f"{client:16} {fault + ' (' + seed + ')':18} {got:20} "
                f"{detect if detect is not None else 'never':>11} "
                f"{error if error is not None else 'none':>19} {ratio:>6}  "
                f"{result.client_error[:60]} | {_changes(result)}",
                flush=True,
            )
    if ratios:
        print(f"median ratio hangwatch / client's own error: {statistics.median(ratios):.2f}")


WATCH_SECONDS = 40.0
"""How long part 1 watches for the verdict after each fault (the report's bound)."""

STALL_WATCH_SECONDS = 60.0
"""How long part 1 watches a stall-produce run: past the 30 s request timeout + 5 s."""


def healthy(seconds: float) -> None:
    print(
        f"\npart 2: {len(CLIENTS)} clients in one pod, bursts and idle periods, one sidecar with "
        f"production defaults (5 s probes, 30 s stall), {seconds:.0f} s"
    )
    with (
        Lab(brokers=3, topics={TOPIC: PARTITIONS}) as lab,
        tempfile.TemporaryDirectory() as tmp,
        ExitStack() as stack,
    ):
        telemetry = Path(tmp)
        for i, client in enumerate(CLIENTS):
            rhythm = Rhythm(rate=20.0, burst_seconds=30.0 + 10 * i, idle_seconds=45.0 + 15 * i)
            stack.callback(Workload(client, lab.bootstrap, TOPIC, rhythm).stop)
        timing = SidecarTiming(
            probe_interval_seconds=5.0,
            stall_seconds=30.0,
            connect_timeout_ms=3000,
            request_timeout_ms=3000,
        )
        sidecar = SidecarProcess(lab.bootstrap, telemetry, timing)
        stack.callback(sidecar.stop)
        time.sleep(10)  # start-up is not steady state
        cost = SidecarCost(sidecar.proc.pid)
        seen: Counter[str] = Counter()
        changes: list[tuple[float, str]] = []
        last = None
        connections: list[int] = []
        while cost.elapsed_seconds() < seconds:
            doc = sidecar.status()
            seen[doc["verdict"]] += 1
            connections.append((doc.get("sockets") or {}).get("connections_total", 0))
            if doc["verdict"] != last:
                last = doc["verdict"]
                changes.append((round(cost.elapsed_seconds(), 1), last))
            elapsed = cost.elapsed_seconds()
            if int(elapsed) % 60 == 0:
                print(f"  ... {elapsed:.0f}/{seconds:.0f} s", file=sys.stderr, flush=True)
            time.sleep(1.0)
        summary = cost.summary()
        final = sidecar.status()
    print(f"polls of /status by verdict: {dict(seen)}; changes: {changes}")
    print(
        f"producer_hung seen: {seen.get('producer_hung', 0)} of {sum(seen.values())} polls; "
        f"connections to brokers seen: {min(connections)}..{max(connections)}"
    )
    print(f"{summary}; probe connects {final['sidecar']['probe_connects']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--error-wait-seconds", type=float, default=40.0)
    parser.add_argument("--healthy-seconds", type=float, default=600.0)
    parser.add_argument("--skip-matrix", action="store_true")
    parser.add_argument(
        "--faults", default=",".join(FAULTS), help=f"part 1's faults, of {', '.join(FAULTS)}"
    )
    add_report_option(parser)
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    if unknown := sorted(set(faults) - set(FAULTS)):
        parser.error(f"--faults: unknown {', '.join(unknown)} (one of {', '.join(FAULTS)})")
    print(f"machine: {describe()}")
    recorder = run_report(args.report, "real clients benchmark")
    subprocess.run(
        [sys.executable, "-m", "hangwatch_testing.clients.build", *PROGRAMS.values()],
        check=True,
        stdout=subprocess.DEVNULL,
    )

    def work() -> None:
        if not args.skip_matrix:
            matrix(args.error_wait_seconds, recorder, faults)
        if args.healthy_seconds > 0:
            healthy(args.healthy_seconds)

    return reported(recorder, work)


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
