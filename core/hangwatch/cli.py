"""The `hangwatch` command: one dispatcher over every component's sub-commands.

Each sub-command lives in its component's package as a module exposing
`register(parser)` (adds its arguments) and `run(args) -> int`. Modules are imported
only when their command runs (help lists them all), so `hangwatch probe` never loads
kopf or pyspark. Errors derived from `HangwatchError` and argument errors become one
line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn, Protocol, cast

from hangwatch import __version__
from hangwatch.contracts import ExitCode
from hangwatch.errors import HangwatchError, one_line

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("hangwatch_demo.demo_cli", "replay the seed failures on a local cluster"),
    "report": ("hangwatch_demo.report.report_cli", "rebuild the HTML report of a kept run"),
    "lab": ("hangwatch_lab.cli", "run a local Kafka-protocol cluster and inject faults"),
    "probe": ("hangwatch_sidecar.probe.cli", "probe brokers and metadata once and report"),
    "sidecar": ("hangwatch_sidecar.sidecar_cli", "watch brokers and producers next to an executor"),
    "config-check": (
        "hangwatch_pipeline.config_check",
        "worst-case time-to-error of a producer configuration",
    ),
    "operator": ("hangwatch_operator.operator_cli", "run the operator against a cluster"),
    "check": ("hangwatch_operator.check_cli", "check a hangwatch install on the current cluster"),
    "pipeline": ("hangwatch_pipeline.pipeline_cli", "run or verify the reference PySpark pipeline"),
}
"""Sub-command name -> (module, one-line help). Components add theirs here."""
STOPPED_CLEANLY_WHILE_STARTING = frozenset({"sidecar"})
"""Commands a kubelet stops with SIGTERM that must exit 0 even when the signal comes
while they still import and parse (a pod deleted seconds after it started): their
`run` installs its own handler only once started, and Python's default action would
end the process with 143, which Spark 4 (`checkAllContainers`) reads as a failed
container of the executor's pod."""


class CommandModule(Protocol):
    """What a sub-command module provides."""

    def register(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit with the usage code."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {one_line(message)}\n")


def _load(name: str) -> CommandModule:
    return cast(CommandModule, importlib.import_module(COMMANDS[name][0]))


def build_parser(only: str | None = None) -> OneLineParser:
    """The parser; only the `only` sub-command's module is imported and registered."""
    parser = OneLineParser(prog="hangwatch", description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--version", action="version", version=f"hangwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, (_, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if only == name:
            _load(name).register(cmd)
    return parser


def _stopped_while_starting(signum: int, frame: object) -> NoReturn:
    raise SystemExit(ExitCode.OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `hangwatch` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any("\x00" in arg for arg in argv):  # an OS argv cannot hold one; a caller's list can
        build_parser().error("an argument contains a NUL byte: no file name or value can")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen not in COMMANDS:
        parser = build_parser()
        if chosen is None:
            parser.parse_args(argv)  # --help and --version exit here
            parser.print_help(sys.stderr)
            return ExitCode.USAGE
        parser.error(f"unknown command {chosen!r} (choose from {', '.join(COMMANDS)})")
    if chosen in STOPPED_CLEANLY_WHILE_STARTING:
        signal.signal(signal.SIGTERM, _stopped_while_starting)
    parser = build_parser(only=chosen)
    args = parser.parse_args(argv)
    try:
        return _load(chosen).run(args)
    except HangwatchError as exc:
        print(f"hangwatch {chosen}: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"hangwatch {chosen}: interrupted", file=sys.stderr)
        return 130
