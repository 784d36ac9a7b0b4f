"""`hangwatch demo`: replay the seed failures on a real local Kafka cluster and show the outcome.

Thin: picks scenarios, runs each with `runner.run_demo_scenario` (progress on stderr),
then prints the table (or `--json`). Exit 0 when every scenario behaved as expected
(right verdict in time, no restart during an outage or election, 0 lost events),
1 otherwise. Ctrl-C and SIGTERM stop cleanly: every lab removes its kernel rules and
every producer process is stopped.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch_demo.runner import DemoRow, as_dict, run_demo_scenario
from hangwatch_demo.scenarios import DEMO_ORDER, SCENARIOS, Timing
from hangwatch_lab import netfilter


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        default=[],
        help=f"run only these (repeatable): {', '.join(DEMO_ORDER)}",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each scenario's work directory (telemetry, final sidecar "
        "status, checkpoint) under DIR",
    )


def _table(rows: list[DemoRow]) -> str:
    head = (
        f"{'scenario':26} {'verdict':20} {'detect s':>8}  {'action':36} "
        f"{'flowing again s':>15} {'events':>7} {'lost':>5} {'dupes':>6}  ok"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        detect = "-" if r.detect_seconds is None else f"{r.detect_seconds:.1f}"
        again = "-" if r.progress_again_seconds is None else f"{r.progress_again_seconds:.1f}"
        lines.append(
            f"{r.scenario:26} {r.verdict:20} {detect:>8}  {r.action[:36]:36} "
            f"{again:>15} {r.events:>7} {r.lost:>5} {r.duplicates:>6}  "
            f"{'yes' if r.ok else 'NO'}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    names = args.scenario or list(DEMO_ORDER)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise UsageError(f"unknown scenario {unknown[0]!r} (choose from {', '.join(DEMO_ORDER)})")
    if (reason := netfilter.available()) is not None:
        raise UsageError(f"the demo injects kernel faults: {reason}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    logs.configure("demo", level="WARNING")
    # Failed connects during the faults are the point of the demo, not news.
    logging.getLogger("hangwatch_sidecar.probes.rdkafka").setLevel(logging.CRITICAL)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    timing = Timing()
    started = time.monotonic()
    rows: list[DemoRow] = []
    for i, name in enumerate(names, start=1):
        print(f"[{i}/{len(names)}] {name}: {SCENARIOS[name].fault}", file=sys.stderr, flush=True)
        row = run_demo_scenario(
            SCENARIOS[name],
            timing,
            lambda m: print(f"      {m}", file=sys.stderr, flush=True),
            args.keep,
        )
        rows.append(row)
    elapsed = time.monotonic() - started
    if args.json:
        print(
            json.dumps(
                {"seconds": round(elapsed, 1), "scenarios": [as_dict(r) for r in rows]}, indent=2
            )
        )
    else:
        print(_table(rows))
        print(
            f"\n{len(rows)} scenarios in {elapsed:.0f} s; "
            f"{sum(r.lost for r in rows)} events lost; "
            f"{'all as expected' if all(r.ok for r in rows) else 'SOME NOT AS EXPECTED'}"
        )
    return ExitCode.OK if all(r.ok for r in rows) else ExitCode.DEGRADED
