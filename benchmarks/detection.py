"""Detection benchmark: how fast hangwatch reaches each seed verdict, and what it costs.

Part 1 replays every fault scenario of `hangwatch_demo.scenarios` several times on the
lab (real producer process writing through the wrapper, real sidecar loop) and prints,
per scenario, the lab engine, the seconds from fault to verdict (median, max) next to
the producer's own time to its first error with the same configuration ("never" if it
reported none within the run). `--engine scenario` (the default) runs each scenario on
the engine its demo row uses: Apache Kafka wherever a real cluster can stage the fault,
librdkafka's mock where only a protocol fault can (S1's refused writes, S2's unanswered
batch); `--engine mock` or `kafka` runs them all on one engine and marks the faults that
engine cannot make. The rows of Spark's own sink (`jvm-*`) need Spark and are measured
by `hangwatch demo`.

Part 2 runs a real `hangwatch sidecar` process at a 1 s probe interval next to 8
producer processes for a while and prints its CPU share of one core and peak RSS, on
Apache Kafka unless `--engine mock`. Targets: under 2 % of one core, under 80 MB.
Prints the machine first.

With `--report DIR`, part 1's runs are recorded as the demo records its scenarios
(`hangwatch_demo.report`: one scenario per run, named `<scenario> #<run>`) and DIR gets
the HTML report with a timeline per run, its path printed last.

    python benchmarks/detection.py [--repeats 3] [--cost-seconds 60] [--engine scenario]
        [--scenario NAME ...] [--skip-cost] [--report DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from machine import add_engine_option, describe, reported, run_report, unwind_on_sigterm

from hangwatch.child_processes import stop_process
from hangwatch.errors import HangwatchError, one_line
from hangwatch_demo.demo_cli import add_report_option
from hangwatch_demo.harness import run_scenario, workload
from hangwatch_demo.report.recorder import Recorder
from hangwatch_demo.scenarios import SCENARIOS, TOPIC, Timing
from hangwatch_lab import Lab, kafkajars
from hangwatch_testing.processes import SidecarCost, sidecar_command

MEASURED = [n for n, s in SCENARIOS.items() if not s.control and s.producer != "jvm"]
"""The scenarios part 1 replays: the faults, without the rows of Spark's own sink."""

ERROR_WAIT = 40.0
"""How long after the fault the producer's own first error is waited for ("never" beyond)."""


def _fmt(values: list[float | None]) -> tuple[str, str]:
    known = [v for v in values if v is not None]
    if len(known) < len(values) or not known:
        return ("never" if not known else f"{statistics.median(known):.1f}*"), "never"
    return f"{statistics.median(known):.1f}", f"{max(known):.1f}"


def detection(repeats: int, recorder: Recorder, engine: str, only: list[str]) -> None:
    timing = Timing()
    print(
        f"\npart 1: fault to verdict, {repeats} runs each (probe interval "
        f"{timing.probe_interval_seconds:g} s, stall {timing.stall_seconds:g} s, heartbeat "
        f"{timing.heartbeat_seconds:g} s, producer message.timeout.ms "
        f"{timing.producer_message_timeout_ms})"
    )
    header = (
        f"{'scenario':29} {'engine':6} {'verdict':20} {'median s':>9} {'max s':>7} {'bound s':>8}"
    )
    print(header + f"  {'producer 1st error s (median, max)':>34}")
    print(f"(producer errors are waited for up to {ERROR_WAIT:.0f} s after the fault)")
    print(f"(engine kafka: Apache Kafka {kafkajars.default_version()}, the lab's default)")
    for name in [n for n in MEASURED if not only or n in only]:
        scenario = SCENARIOS[name]
        on = scenario.engine if engine == "scenario" else engine
        detected: list[float | None] = []
        first_error: list[float | None] = []
        try:
            for i in range(repeats):
                print(f"  ... {name} run {i + 1}/{repeats}", file=sys.stderr, flush=True)
                result = run_scenario(
                    scenario,
                    timing,
                    producer_error_wait_seconds=ERROR_WAIT,
                    recorder=recorder,
                    label=f"{name} #{i + 1}",
                    engine=on,
                )
                detected.append(result.detected_seconds)
                first_error.append(result.producer_first_error_seconds)
        except HangwatchError as exc:  # a fault this engine cannot make
            print(f"{name:29} {on:6} not run: {one_line(str(exc))}", flush=True)
            continue
        med, mx = _fmt(detected)
        err_med, err_max = _fmt(first_error)
        print(
            f"{name:29} {on:6} {scenario.expect!s:20} {med:>9} {mx:>7} "
            f"{scenario.bound(timing):>8.1f}  {err_med + ', ' + err_max:>34}",
            flush=True,
        )
    print("(jvm-* rows, Spark's own Kafka sink: measured by `hangwatch demo`)")


def cost(seconds: float, engine: str, producers: int = 8) -> None:
    print(
        f"\npart 2: sidecar cost, 1 s probe interval, {producers} producer processes, "
        f"{seconds:.0f} s, lab engine {engine}"
    )
    with (
        Lab(brokers=3, topics={TOPIC: 6}, engine=engine) as lab,
        tempfile.TemporaryDirectory() as tmp,
        ExitStack() as stack,
    ):
        telemetry = Path(tmp)
        for _ in range(producers):
            stack.enter_context(
                workload(lab.bootstrap, telemetry, telemetry / "never", Timing(), rate=100.0)
            )
        sidecar = subprocess.Popen(
            sidecar_command(lab.bootstrap, TOPIC, telemetry, "--probe-interval-seconds", "1"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stack.callback(stop_process, sidecar, 10)
        time.sleep(5)  # start-up (imports, first rounds) is not steady state
        meter = SidecarCost(sidecar.pid)
        while meter.elapsed_seconds() < seconds:
            time.sleep(5)
            print(
                f"  ... {meter.elapsed_seconds():.0f}/{seconds:.0f} s", file=sys.stderr, flush=True
            )
        summary = meter.summary()
    print(summary)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cost-seconds", type=float, default=60.0)
    parser.add_argument("--skip-cost", action="store_true", help="part 1 only")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=MEASURED,
        default=[],
        metavar="NAME",
        help=f"part 1 for this scenario only (repeatable): {', '.join(MEASURED)}",
    )
    add_engine_option(parser, "scenario", "scenario")
    add_report_option(parser)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    recorder = run_report(args.report, "detection benchmark")

    def work() -> None:
        detection(args.repeats, recorder, args.engine, args.scenario)
        if not args.skip_cost:
            cost(args.cost_seconds, "mock" if args.engine == "mock" else "kafka")

    return reported(recorder, work)


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
