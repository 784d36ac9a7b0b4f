"""`hangwatch report DIR`: rebuild the HTML report and timelines of a kept run.

DIR is a directory `hangwatch demo --report DIR` (or a benchmark's `--report DIR`)
wrote: its `events.jsonl` is read (every line checked: a malformed one is one line
naming it, exit 3) and the report written beside it; the page's path is printed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError


def load_writer() -> Callable[[Path], Path]:
    """`writing.write_report`, imported only when a report is written (it needs matplotlib;
    help and usage errors do not): a one-line error when matplotlib is missing."""
    try:
        from hangwatch_demo.report.writing import write_report  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the report needs matplotlib ({exc.name} not found): pip install 'hangwatch[report]'"
        ) from None
    return write_report


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, metavar="DIR", help="a run's report directory")


def run(args: argparse.Namespace) -> int:
    print(load_writer()(args.directory).absolute())
    return ExitCode.OK
