"""`hangwatch lab`: start, drive, inspect and stop the fault lab from a shell.

`lab up [--engine mock|kafka]` runs in the foreground (prints the bootstrap string
first, then where its state is), serves the control endpoint and stops on Ctrl-C,
SIGTERM or `lab down`, removing every kernel rule (and, on the kafka engine, every
broker JVM and data directory) on the way out; a signal while a Kafka cluster is still
starting stops it too. The other sub-commands talk to it
through the state file (see `hangwatch_lab.control`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from hangwatch import logs
from hangwatch.contracts import ExitCode
from hangwatch.errors import LabError, UsageError
from hangwatch_lab import kafkajars
from hangwatch_lab.control import (
    FAULTS,
    ControlClient,
    ControlServer,
    apply_fault,
    default_state_path,
    remove_state,
    write_state,
)
from hangwatch_lab.lab import DEFAULT_ENGINE, ENGINES, Lab


def parse_topics(text: str) -> dict[str, int]:
    """`t:6,u:3` -> {"t": 6, "u": 3}; a bare name gets 3 partitions."""
    topics: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, count = item.partition(":")
        try:
            topics[name] = int(count) if count else 3
        except ValueError:
            raise UsageError(
                f"invalid --topics entry {item!r} (expected name:partitions)"
            ) from None
        if not name or topics[name] < 1:
            raise UsageError(f"invalid --topics entry {item!r} (expected name:partitions >= 1)")
    return topics


def register(parser: argparse.ArgumentParser) -> None:
    state_help = f"state file (default {default_state_path()})"
    parser.add_argument("--state", type=Path, default=None, help=state_help)
    # `--state` is accepted after the action too (`lab up --state PATH`): SUPPRESS keeps
    # an action that does not repeat it from resetting the value given before it.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--state", type=Path, default=argparse.SUPPRESS, help=state_help)
    sub = parser.add_subparsers(dest="lab_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", parents=[after], help="start a cluster and stay up until stopped")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--controllers",
        type=int,
        default=None,
        help="kafka engine: run this many controller-only KRaft nodes apart from the "
        "brokers (process.roles=controller / broker), so brokers can be removed down to "
        "one (default: every broker is also a controller)",
    )
    up.add_argument("--topics", default="", help="topics to create, e.g. events:6,audit:3")
    up.add_argument(
        "--engine",
        choices=ENGINES,
        default=DEFAULT_ENGINE,
        help="mock: librdkafka's protocol emulation (default, instant); "
        "kafka: a real Apache Kafka cluster (KRaft, needs Java; jars resolved once)",
    )
    up.add_argument(
        "--kafka-version",
        default=None,
        help=f"kafka engine: the Apache Kafka release, 4.x.y or 3.9.z (default "
        f"{kafkajars.default_version()}; {kafkajars.legacy_version()} serves clients older "
        "than 2.1, whose protocol versions 4.0 removed)",
    )
    up.add_argument(
        "--no-auto-create-topics",
        action="store_true",
        help="kafka engine: auto.create.topics.enable=false (a write to a topic that does "
        "not exist is refused)",
    )
    up.add_argument(
        "--session-timeout-ms",
        type=int,
        default=None,
        help="kafka engine: broker.session.timeout.ms, how long a frozen leader goes "
        "unnoticed before an election (default 1500)",
    )
    up.add_argument(
        "--ready-timeout",
        type=float,
        default=None,
        help="kafka engine: seconds the cluster may take to become ready (default 180)",
    )
    sub.add_parser("down", parents=[after], help="stop the running lab (removes every kernel rule)")
    status = sub.add_parser(
        "status", parents=[after], help="show brokers, their faults and elections"
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    fault = sub.add_parser("fault", parents=[after], help="inject or undo a fault")
    fault.add_argument("kind", choices=FAULTS, help="the fault")
    fault.add_argument("--broker", type=int, help="broker id (1..N)")
    fault.add_argument("--all", action="store_true", help="with restore: undo every fault")
    fault.add_argument("--ms", type=int, help="rtt: response delay in milliseconds")
    fault.add_argument("--topic", help="election/leader: topic")
    fault.add_argument("--partition", type=int, help="leader: partition")
    fault.add_argument("--seconds", type=float, help="election: how long partitions lack leaders")
    fault.add_argument("--api", default="produce", help="request-errors: request type")
    fault.add_argument("--error", default="NOT_LEADER_FOR_PARTITION", help="Kafka error name")
    fault.add_argument("--count", type=int, default=1, help="request-errors: how many requests")
    fault.add_argument(
        "--how",
        default=None,
        help="election on the kafka engine: freeze (SIGSTOP the leader, default) or kill "
        "(SIGKILL); down: stop (controlled shutdown, default) or kill (a crash)",
    )
    fault.add_argument("--to", type=int, help="shrink: how many brokers remain")
    fault.add_argument(
        "--dead",
        default="blackhole",
        help="shrink: how removed brokers look to clients: blackhole (default), refused, frozen",
    )


def run(args: argparse.Namespace) -> int:
    state_path: Path = args.state or default_state_path()
    if args.lab_command == "up":
        options = {}
        if args.session_timeout_ms is not None:
            if args.engine != "kafka":
                raise UsageError("--session-timeout-ms applies to --engine kafka only")
            options["session_timeout_ms"] = args.session_timeout_ms
        if args.ready_timeout is not None:
            if args.engine != "kafka":
                raise UsageError("--ready-timeout applies to --engine kafka only")
            options["ready_timeout_seconds"] = args.ready_timeout
        if args.kafka_version is not None:
            if args.engine != "kafka":
                raise UsageError("--kafka-version applies to --engine kafka only")
            kafkajars.line_of(args.kafka_version)  # a bad version fails before anything starts
            options["kafka_version"] = args.kafka_version
        if args.controllers is not None:
            if args.engine != "kafka":
                raise UsageError("--controllers applies to --engine kafka only")
            options["controllers"] = args.controllers
        if args.no_auto_create_topics:
            if args.engine != "kafka":
                raise UsageError("--no-auto-create-topics applies to --engine kafka only")
            options["auto_create_topics"] = False
        return _up(args.brokers, parse_topics(args.topics), state_path, args.engine, options)
    client = ControlClient(state_path)
    if args.lab_command == "status":
        _print_status(client.status(), as_json=args.json)
    elif args.lab_command == "fault":
        params = {
            k: getattr(args, k)
            for k in (
                "broker",
                "all",
                "ms",
                "topic",
                "partition",
                "seconds",
                "api",
                "error",
                "count",
                "to",
                "dead",
                "how",
            )
        }
        _print_status(client.fault(args.kind, params)["status"], as_json=False)
    elif args.lab_command == "down":
        client.down()
        _wait_gone(int(client.state["pid"]), timeout_seconds=20)
        print("lab stopped")
    return ExitCode.OK


def _running(pid: int) -> bool:
    """True while `pid` exists and has not exited (a zombie awaiting its parent has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return
        time.sleep(0.1)
    raise LabError(f"lab process {pid} did not stop within {timeout_seconds:.0f} s")


def _print_status(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(status, indent=2))
        return
    engine = status.get("engine", DEFAULT_ENGINE)
    process = f"mock pid {status['mock_pid']}" if engine == "mock" else "one JVM per broker"
    described = f" ({status['description']})" if status.get("description") else ""
    print(
        f"bootstrap {status['bootstrap']}  engine {engine}{described}  {process}  "
        f"{'running' if status['alive'] else 'DEAD'}"
    )
    for broker in status["brokers"]:
        pid = f"  pid {broker['pid']}" if broker.get("pid") else ""
        print(
            f"  broker {broker['id']}  {broker['host']}:{broker['port']:<6} "
            f"{broker['condition']}{pid}"
        )
    topics = ", ".join(f"{name}:{parts}" for name, parts in status["topics"].items())
    print(f"  topics: {topics or '(auto-created on first use)'}")
    if status["elections"]:
        print(f"  elections under way: {', '.join(status['elections'])}")
    for result in status.get("election_results", []):
        print(
            f"  election on {result['topic']}: broker {result['broker']} {result['how']} "
            f"{result['fault_seconds']} s, partitions without a serving leader for "
            f"{result['leaderless_seconds']} s, new leaders {result['new_leaders']}"
        )


def _up(
    brokers: int, topics: dict[str, int], state_path: Path, engine: str, options: dict[str, Any]
) -> int:
    logs.configure("lab")
    stop = {"signal": 0, "up": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["signal"] = signum
        if not stop["up"]:  # still starting: interrupt it (start() stops what it started)
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with Lab(brokers=brokers, topics=topics, engine=engine, **options) as lab:
        stop["up"] = 1
        server = ControlServer(lab)
        server.start()
        try:
            write_state(state_path, lab, server.url)
            print(lab.bootstrap, flush=True)
            process = (
                f"mock pid {lab.mock_pid}"
                if lab.engine == "mock"
                else ("broker pids " + ",".join(str(p) for p in lab.broker_pids().values()))
            )
            print(
                f"# engine {lab.engine} ({lab.engine_description})  state {state_path}  "
                f"control {server.url}  {process}",
                flush=True,
            )
            print("# stop with Ctrl-C or 'hangwatch lab down'", flush=True)
            while not stop["signal"] and not server.stop_requested.is_set():
                if not lab.alive():
                    raise LabError(
                        f"the {lab.engine} cluster lost a process; everything it started "
                        "was stopped and its kernel rules removed"
                    )
                time.sleep(0.2)
        finally:
            server.close()
            remove_state(state_path)
    print("# lab stopped, kernel rules removed", file=sys.stderr, flush=True)
    return ExitCode.OK


__all__ = ["apply_fault", "parse_topics", "register", "run"]
