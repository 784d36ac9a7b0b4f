"""False-restart benchmark: a soak of healthy but irregular Spark work, and the real hangs.

Part 1 (the soak): for each producer kind (plain confluent-kafka client, hangwatch's
wrapper) the demo's Spark application runs one pipeline run for `--minutes` whose
tasks pause after every 300 events for a random 0.2x-10x the stall threshold,
alternately computing (CPU-bound user code) and waiting on slow input (idle), while
the lab runs a 1.5 s leader election every 90-150 s. Sidecars and the operator's code
judge and act with the policy defaults (`--timing policy`: 10 s probes, 60 s stall,
30 s heartbeat) or the demo's fast settings (`--timing demo`). Counted: restarts (the
target is 0), and every verdict change away from healthy, by verdict (alerts).

Part 2 (side by side): the hangs under the same settings - a plain producer whose
delivery callback blocks, the wrapper's blocked poll thread, a plain producer's request
unanswered after an election (the broker's, `broker_degraded`, until the producers'
request timeout has passed; the client usually gives it up first) - with the seconds
from fault to verdict.

Part 3 (refusals): writes the cluster refuses for a reason a restart cannot clear, on
the lab's real Apache Kafka (`hangwatch_testing.clients.refusals`: a topic whose
max.message.bytes is 200 written with 1 KiB records, a topic that does not exist with
automatic creation off, ...), by each producer kind of `--refusal-producers` (the
wrapper, a plain confluent-kafka producer, Spark's own Kafka sink), a real sidecar
process watching with the same probe interval and stall threshold until 3 stall periods
past the producer's first error. A refusal the sidecar calls `producer_hung` or
`metadata_stale` (pod or producer verdict: the verdicts whose policy default is a
restart) is a false restart: the next executor meets the same refusal.

    python benchmarks/false_restarts.py [--minutes 10] [--timing policy|demo]
        [--producers plain,wrapper] [--no-hangs | --hangs NAME,...]
        [--refusals too-large,unknown-topic] [--refusal-producers wrapper,confluent-kafka,spark]

`--producers ''` runs no soak (only the hang rows), `--refusals ''` no refusal rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from machine import describe, unwind_on_sigterm

from hangwatch.contracts import Verdict
from hangwatch.defaults import POLICY
from hangwatch_demo.row_scoring import DemoRow
from hangwatch_demo.runner import run_demo_scenario
from hangwatch_demo.scenarios import (
    RESTART_VERDICTS,
    SCENARIOS,
    TOPIC,
    Context,
    Scenario,
    Timing,
)
from hangwatch_demo.spark_cluster import local_spark_cluster
from hangwatch_demo.spark_tasks import Pause
from hangwatch_producer.settings import ProducerSettings
from hangwatch_testing.clients.refusals import (
    ALL_KINDS,
    REFUSALS,
    RESTART_CLASS,
    Watched,
    refusals_lab,
    watch_refusal,
)
from hangwatch_testing.clients.runs import SidecarTiming

REFUSED = ("too-large", "unknown-topic")
"""The refusal rows run by default (of `REFUSALS` but the quota, which is no refusal)."""
HANGS = ("plain-s4-blocked-callback", "s4-blocked-io-thread", "plain-s2-stuck-after-election")
ELECTION_SECONDS = 1.5
ELECTION_EVERY = (90.0, 150.0)


def policy_timing() -> Timing:
    return Timing(
        probe_interval_seconds=float(POLICY.probe_interval_seconds),
        stall_seconds=float(POLICY.stall_seconds),
        heartbeat_seconds=float(POLICY.heartbeat_seconds),
        metadata_max_age_seconds=float(POLICY.metadata_max_age_seconds),
        election_grace_seconds=float(POLICY.election_grace_seconds),
        spark_interval_seconds=15.0,
        # The wrapper's own default, not the demo's 10 s: with 10 s the client gave up on
        # a wedged task (flush = message timeout + 5 s) before the policy's 30 s heartbeat
        # threshold, and its telemetry went with the task, so S4 ended healthy.
        producer_message_timeout_ms=ProducerSettings().message_timeout_ms,
    )


def _elections(seconds: float) -> object:
    """A fault function: short elections every 90-150 s until `seconds` have passed
    (a bounded background thread; it ends on its own)."""

    def inject(ctx: Context) -> None:
        end = time.monotonic() + seconds

        def loop() -> None:
            draw = random.Random(7)
            while True:
                wait = draw.uniform(*ELECTION_EVERY)
                if time.monotonic() + wait + ELECTION_SECONDS >= end:
                    return
                time.sleep(wait)
                try:
                    ctx.lab.election(TOPIC, ELECTION_SECONDS)
                except Exception:  # noqa: BLE001 - the lab closed: the soak is over
                    return

        threading.Thread(target=loop, name="soak-elections", daemon=True).start()

    return inject


def soak(producer: str, minutes: float, timing: Timing) -> Scenario:
    seconds = minutes * 60
    return Scenario(
        f"soak-{producer}",
        "soak",
        f"{producer}: pauses of 0.2-10x the stall threshold, computing and waiting, "
        f"and a {ELECTION_SECONDS} s election every 90-150 s, for {minutes:g} min",
        _elections(seconds),  # type: ignore[arg-type]
        Verdict.HEALTHY,
        lambda t: seconds,
        control=True,
        forbidden=RESTART_VERDICTS,
        label=f"soak {minutes:g} min",
        producer=producer,
        pause=Pause(
            every_events=300,
            seconds=0.2 * timing.stall_seconds,
            max_seconds=10 * timing.stall_seconds,
            kind="mixed",
            budget_seconds=seconds,
        ),
        watch_seconds=seconds,
    )


def _alerts(row: DemoRow) -> Counter[str]:
    return Counter(c.split(" ", 1)[1] for _, c in row.changes if not c.endswith(" healthy"))


def refusal_rows(refusals: list[str], kinds: list[str], timing: Timing) -> list[Watched]:
    """Part 3: each refusal by each producer kind on one refusals lab (module docstring)."""
    sidecar = SidecarTiming(
        probe_interval_seconds=timing.probe_interval_seconds,
        stall_seconds=timing.stall_seconds,
        connect_timeout_ms=timing.connect_timeout_ms,
        request_timeout_ms=timing.request_timeout_ms,
        hysteresis_intervals=timing.hysteresis_intervals,
    )
    rows = []
    with refusals_lab() as lab:
        for refusal in refusals:
            for kind in kinds:
                print(f"refusal: {refusal} by {kind}", file=sys.stderr, flush=True)
                seen = watch_refusal(
                    lab,
                    REFUSALS[refusal],
                    kind,
                    timing=sidecar,
                    after_error_seconds=3 * timing.stall_seconds,
                    error_timeout_seconds=None if kind == "spark" else 90.0,
                )
                print(f"      {seen.describe()}", file=sys.stderr, flush=True)
                rows.append(seen)
    return rows


def _print_refusals(rows: list[Watched]) -> int:
    """The refusal table; the number of rows with a restart-class verdict."""
    print("\nrefusal        producer         error met  verdicts (in order; producer verdicts)")
    false = 0
    for row in rows:
        verdicts = [v for _, v, _ in row.changes]
        restart = bool(row.verdicts & RESTART_CLASS)
        false += restart
        met = "-" if row.first_error_seconds is None else f"{row.first_error_seconds:.1f} s"
        mark = "  FALSE RESTART" if restart else ""
        print(
            f"{row.refusal:<14} {row.producer:<16} {met:>9}  {' > '.join(verdicts)}; "
            f"{sorted(row.producer_verdicts)}{mark}"
        )
        named = [r for _, v, rs in row.changes if v == "writes_rejected" for r in rs[:1]]
        if named:
            print(f"  writes_rejected: {named[0][:200]}")
    return false


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--timing", choices=("policy", "demo"), default="policy")
    parser.add_argument(
        "--producers", default="plain,wrapper", help="soak producer kinds; empty: no soak"
    )
    parser.add_argument("--no-hangs", action="store_true")
    parser.add_argument(
        "--hangs", default=",".join(HANGS), help=f"hang rows to run (of {', '.join(HANGS)})"
    )
    parser.add_argument(
        "--message-timeout-ms",
        type=int,
        help="the producers' message.timeout.ms (default: the wrapper's default at policy "
        "timing, the demo's at demo timing; librdkafka's own default is 300000)",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep each row's sidecar logs and status there (a new directory)"
    )
    parser.add_argument(
        "--refusals",
        default=",".join(REFUSED),
        help=f"refusal rows to run (of {', '.join(r for r in REFUSALS if r != 'quota')}); "
        "empty: none",
    )
    parser.add_argument(
        "--refusal-producers",
        default=",".join(ALL_KINDS),
        help=f"producer kinds of the refusal rows (of {', '.join(ALL_KINDS)})",
    )
    return parser


def main() -> int:
    parser = _parser()
    args = parser.parse_args()
    refusals = [r for r in args.refusals.split(",") if r]
    refusal_kinds = [k for k in args.refusal_producers.split(",") if k]
    wrong = sorted(set(refusals) - (set(REFUSALS) - {"quota"})) + sorted(
        set(refusal_kinds) - set(ALL_KINDS)
    )
    if wrong:
        parser.error(f"unknown refusal rows or producer kinds: {', '.join(wrong)}")
    producers = [p for p in args.producers.split(",") if p]
    chosen = [] if args.no_hangs else [h for h in args.hangs.split(",") if h]
    unknown = sorted(set(chosen) - set(HANGS))
    if unknown:
        parser.error(f"unknown hang rows {', '.join(unknown)}: choose from {', '.join(HANGS)}")
    if args.keep is not None:
        if args.keep.exists():
            parser.error(f"--keep {args.keep}: already exists (give a new directory)")
        args.keep.mkdir(parents=True)
    timing = policy_timing() if args.timing == "policy" else Timing()
    if args.message_timeout_ms is not None:
        if args.message_timeout_ms < 1:
            parser.error("--message-timeout-ms must be at least 1")
        timing = dataclasses.replace(timing, producer_message_timeout_ms=args.message_timeout_ms)
    print(f"machine: {describe()}")
    print(
        f"timing: {args.timing} (probe {timing.probe_interval_seconds:g} s, stall "
        f"{timing.stall_seconds:g} s, heartbeat {timing.heartbeat_seconds:g} s, producers' "
        f"message.timeout.ms {timing.producer_message_timeout_ms})",
        flush=True,
    )
    say = lambda m: print(f"      {m}", file=sys.stderr, flush=True)  # noqa: E731
    soaks: list[DemoRow] = []
    hangs: list[DemoRow] = []
    refused = refusal_rows(refusals, refusal_kinds, timing) if refusals else []
    if producers or chosen:  # the demo's Spark application only when a row needs it
        with (
            tempfile.TemporaryDirectory(prefix="hangwatch-soak-") as root,
            local_spark_cluster(Path(root), say) as cluster,
        ):
            for producer in producers:
                scenario = soak(producer, args.minutes, timing)
                print(f"soak: {scenario.fault}", file=sys.stderr, flush=True)
                soaks.append(run_demo_scenario(scenario, timing, cluster, say, args.keep))
            for name in chosen:
                print(f"hang: {name}", file=sys.stderr, flush=True)
                hangs.append(run_demo_scenario(SCENARIOS[name], timing, cluster, say, args.keep))
    print("\nsoak                 minutes  restarts  alerts (verdict changes away from healthy)")
    for row in soaks:
        alerts = ", ".join(f"{v} x{n}" for v, n in sorted(_alerts(row).items())) or "none"
        print(f"{row.scenario:<20} {args.minutes:7g}  {row.restarts:8d}  {alerts}")
        for problem in row.problems:
            print(f"  problem: {problem}")
    if hangs:
        print("\nhang                            verdict         detect s  action")
        for row in hangs:
            detect = "-" if row.detect_seconds is None else f"{row.detect_seconds:.1f}"
            print(f"{row.scenario:<31} {row.verdict:<15} {detect:>8}  {row.action}")
            print(f"  verdict changes: {row.changes}")
            for problem in row.problems:
                print(f"  problem: {problem}")
    restarts = sum(r.restarts for r in soaks)
    if refused:
        restarts += _print_refusals(refused)
    print(f"\nfalse restarts: {restarts} (target 0)")
    return 0 if restarts == 0 else 1


if __name__ == "__main__":
    unwind_on_sigterm()
    sys.exit(main())
