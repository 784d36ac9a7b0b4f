"""`hangwatch demo`: replay the seed failures on a real local Kafka cluster and show the outcome.

Thin: picks scenarios, starts the demo's Spark application (`spark_cluster`), runs
each scenario with `runner.run_demo_scenario` (progress on stderr), then prints the
table (or `--json`). Exit 0 when every scenario behaved as expected (the right verdict
detected at all, restarts exactly where they help, none during an outage or election,
0 lost events), 1 otherwise; how fast each verdict came is shown beside its bound
(`detect s`, `bound s`), a timing, not a failure. Ctrl-C and SIGTERM stop cleanly:
Spark (driver, executor JVMs, Python workers), the sidecars and every lab (with its
kernel rules) are stopped.

`--report DIR` records the run as it goes (`report.recorder`: DIR/events.jsonl) and
writes DIR/report.html with a timeline per scenario at the end, its path printed last
(on stderr with `--json`, whose stdout stays one JSON document). A DIR that cannot be
written fails at once, before Spark starts (exit 3). A write that fails later, or a
report that cannot be written at the end: the results are printed all the same, then
one line naming the file, exit 3. Interrupted (Ctrl-C, SIGTERM): the report of the
scenarios that finished is written before the demo stops.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError, UsageError, one_line
from hangwatch_demo.report.recorder import Recorder
from hangwatch_demo.report.report_cli import load_writer
from hangwatch_demo.scenarios import DEMO_ORDER, ON_REQUEST, SCENARIOS, Timing
from hangwatch_lab import netfilter
from hangwatch_sidecar.probe.metadata import RDKAFKA_LOG

if TYPE_CHECKING:
    from hangwatch_demo.row_scoring import DemoRow
    from hangwatch_demo.spark_cluster import LocalSparkCluster


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        default=[],
        help=f"run only these (repeatable): {', '.join(DEMO_ORDER)}; on request only: "
        f"{', '.join(ON_REQUEST)}",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each scenario's work directory (sidecar logs, decisions, read-back; the "
        "sidecars' last /status without the wrapper) and Spark's (executor logs, producer "
        "telemetry) under DIR",
    )
    add_report_option(parser)


def add_report_option(parser: argparse.ArgumentParser) -> None:
    """`--report DIR` (the demo's and the fault-replaying benchmarks')."""
    parser.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        default=None,
        help="record the run in DIR/events.jsonl and write DIR/report.html with one timeline "
        "PNG per scenario (`hangwatch report DIR` rebuilds it)",
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(rows: list[DemoRow]) -> str:
    """The results as an aligned text table, then what went wrong in rows that failed."""
    columns = [
        ("scenario", [r.scenario for r in rows], "<"),
        ("producer", [r.producer for r in rows], "<"),
        ("engine", [r.engine for r in rows], "<"),
        ("fault injected", [r.fault_short for r in rows], "<"),
        ("verdict", [r.verdict for r in rows], "<"),
        ("detect s", [_seconds(r.detect_seconds) for r in rows], ">"),
        ("bound s", [_seconds(r.detect_bound_seconds) for r in rows], ">"),
        ("action (or why none)", [r.action for r in rows], "<"),
        ("flowing again s", [_seconds(r.progress_again_seconds) for r in rows], ">"),
        ("events", [str(r.events) for r in rows], ">"),
        ("lost", [str(r.lost) for r in rows], ">"),
        ("dupes", [str(r.duplicates) for r in rows], ">"),
        ("ok", ["yes" if r.ok else "NO" for r in rows], "<"),
    ]
    widths = [max(len(head), *(len(v) for v in values)) for head, values, _ in columns]

    def line(cells: list[str]) -> str:
        return "  ".join(
            f"{cell:{align}{width}}"
            for cell, width, (_, _, align) in zip(cells, widths, columns, strict=True)
        ).rstrip()

    lines = [line([head for head, _, _ in columns]), "-" * (sum(widths) + 2 * len(widths) - 2)]
    lines += [line([values[i] for _, values, _ in columns]) for i in range(len(rows))]
    for r in rows:
        if not r.ok:
            why = r.problems or [f"expected {r.expected}; saw {r.verdict}; {r.action}"]
            lines.append(f"{r.scenario}: NOT AS EXPECTED: {'; '.join(why)}")
    return "\n".join(lines)


def _create_keep_dir(keep: Path) -> None:
    """Create `--keep DIR` (and its parents) now, so a bad path fails before Spark starts."""
    try:
        keep.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--keep {keep}: cannot create the directory ({exc.strerror})") from None
    except ValueError as exc:  # e.g. an embedded NUL
        raise UsageError(f"--keep {keep!r}: {exc}") from None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _keep_spark_logs(cluster: LocalSparkCluster, keep: Path) -> None:
    """Copy the executors' work directories (logs, telemetry) and Spark's log under `keep`."""
    target = keep / "spark"
    shutil.copytree(cluster.work_root, target / "work", symlinks=True, dirs_exist_ok=True)
    driver_log = cluster.root / "spark-driver.log"
    if driver_log.exists():
        shutil.copy2(driver_log, target / driver_log.name)


def finish_report(
    recorder: Recorder, interrupted: bool = False, stream: TextIO | None = None
) -> str | None:
    """Close the run's record and write its report; the line that went wrong (None: the
    report's path was printed on `stream`, stdout by default)."""
    recorder.close(interrupted)
    if recorder.directory is None:
        return None
    if recorder.error is not None:
        return recorder.error
    try:
        target = load_writer()(recorder.directory)
    except HangwatchError as exc:
        return one_line(str(exc))
    print(f"report: {target.absolute()}", file=stream or sys.stdout, flush=True)
    return None


def run(args: argparse.Namespace) -> int:
    names = args.scenario or list(DEMO_ORDER)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise UsageError(
            f"unknown scenario {unknown[0]!r} (choose from {', '.join(DEMO_ORDER + ON_REQUEST)})"
        )
    if args.keep:
        _create_keep_dir(args.keep)
    if (reason := netfilter.available()) is not None:
        raise UsageError(f"the demo injects kernel faults: {reason}")
    if args.report is not None:
        load_writer()  # matplotlib is there: found now, not after the run
    # Fail before Spark starts when the report cannot be written there.
    recorder = Recorder.open(args.report, "demo") if args.report else Recorder.off()
    stream = sys.stderr if args.json else sys.stdout
    try:
        code = _run(args, names, recorder)
    except KeyboardInterrupt:
        # The scenarios finished so far are in the record: their report is written.
        problem = finish_report(recorder, interrupted=True, stream=stream)
        if problem:
            _say(f"hangwatch demo: error: {problem}")
        raise
    except BaseException:
        recorder.close(interrupted=True)  # the run failed before any result: no report
        raise
    problem = finish_report(recorder, stream=stream)
    if problem:
        _say(f"hangwatch demo: error: {problem}")
        return ExitCode.USAGE
    return code


def _run(args: argparse.Namespace, names: list[str], recorder: Recorder) -> int:
    try:
        # pyspark and aiohttp only when the demo runs (help and usage errors need neither)
        from hangwatch_demo.row_scoring import as_dict  # noqa: PLC0415
        from hangwatch_demo.runner import run_demo_scenario  # noqa: PLC0415
        from hangwatch_demo.spark_cluster import (  # noqa: PLC0415
            EXECUTORS,
            MASTER,
            local_spark_cluster,
        )
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the demo needs pyspark and aiohttp ({exc.name} not found): "
            "pip install 'hangwatch[demo]' (make demo installs everything)"
        ) from None
    logs.configure("demo", level="WARNING")
    # Failed connects during the faults are the point of the demo, not news.
    RDKAFKA_LOG.setLevel(logging.CRITICAL)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    timing = Timing()
    started = time.monotonic()
    rows: list[DemoRow] = []
    with tempfile.TemporaryDirectory(prefix="hangwatch-demo-spark-", dir=args.keep) as root:
        _say(f"starting Spark ({MASTER}: {EXECUTORS} executor JVMs) for the reference pipeline")
        # Spark's Kafka sink's jars only when a scenario writes through it
        connector = any(SCENARIOS[n].producer == "jvm" for n in names)
        with local_spark_cluster(Path(root), lambda m: _say(f"      {m}"), connector) as cluster:
            for i, name in enumerate(names, start=1):
                s = SCENARIOS[name]
                _say(
                    f"[{i}/{len(names)}] {name} (lab engine {s.engine}, producer {s.producer}): "
                    f"{s.fault}"
                )
                row = run_demo_scenario(
                    SCENARIOS[name],
                    timing,
                    cluster,
                    lambda m: _say(f"      {m}"),
                    args.keep,
                    recorder,
                )
                rows.append(row)
            if args.keep:
                _keep_spark_logs(cluster, args.keep)
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
