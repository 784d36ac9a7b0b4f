"""What every benchmark prints first: the machine its figures were measured on; the
`--report DIR` plumbing of the benchmarks that replay faults; and the `--engine` option
of the benchmarks that run a lab (which engine a figure came from is printed with it).

Benchmarks run as scripts (`python benchmarks/NAME.py`), so this sibling module is
importable as `machine`.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from hangwatch.errors import HangwatchError, one_line
from hangwatch_demo.demo_cli import finish_report
from hangwatch_demo.report.recorder import Recorder, cpu_model
from hangwatch_lab import ENGINES

__all__ = ["add_engine_option", "cpu_model", "describe", "report_problem", "run_report"]


def describe() -> str:
    """`N CPUs, model; Python x.y.z`."""
    return f"{os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}"


def unwind_on_sigterm() -> None:
    """SIGTERM ends a benchmark as `sys.exit(143)` does: every `with` and `finally` stops
    what it started (brokers, JVMs, sidecars, kernel rules), where Python's default ends
    the process at once and leaves them running. Called before `main` by each
    benchmark's `__main__` block; `run_report` turns SIGTERM into KeyboardInterrupt
    instead, to write the report of what finished."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def run_report(directory: Path | None, source: str) -> Recorder:
    """The run's recorder (`--report DIR`), or one that records nothing. A directory that
    cannot be written: one line naming it, exit 3, before anything runs."""
    if directory is None:
        return Recorder.off()

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # SIGTERM too writes the report of what finished

    signal.signal(signal.SIGTERM, on_term)
    try:
        return Recorder.open(directory, source)
    except HangwatchError as exc:
        print(f"{Path(sys.argv[0]).name}: error: {one_line(str(exc))}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None


def reported(recorder: Recorder, work: Callable[[], None]) -> int:
    """Run `work`, then finish the run's report: exit 0, or 3 when the report could not
    be written. Interrupted (Ctrl-C, or SIGTERM through `run_report`): the report of what
    finished is written and the benchmark ends with 130 and one line, no traceback."""
    try:
        work()
    except KeyboardInterrupt:
        report_problem(finish_report(recorder, interrupted=True))
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        return 130
    return 3 if report_problem(finish_report(recorder)) else 0


def report_problem(problem: str | None) -> bool:
    """Print the report's problem (if any) in one line; True when there was one."""
    if problem:
        print(f"{Path(sys.argv[0]).name}: error: {problem}", file=sys.stderr)
    return problem is not None


def add_engine_option(parser: argparse.ArgumentParser, default: str, *extra: str) -> None:
    """`--engine`: the lab engine the benchmark runs on (`extra`: choices of its own)."""
    choices = [*extra, *ENGINES]
    parser.add_argument(
        "--engine",
        choices=choices,
        default=default,
        help=f"lab engine: {', '.join(choices)} (default {default})",
    )
