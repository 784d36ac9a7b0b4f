"""A producer process for scenarios: sends numbered events at a steady rate, at least once.

Run as `python -m hangwatch_demo.workload --bootstrap B --topic T --rate R
--telemetry-dir D --checkpoint F [--wedge-file W] [--value-bytes N] [-X key=value ...]`.
Event values are `ev-<n>`, padded to `--value-bytes` when given; `-X` adds librdkafka
properties (a SASL login, a client.id a quota names). With `--retry-refused`, a send the
client refuses at once (its topic unknown or forbidden: the wrapper raises) is retried
after a pause, as Spark retries the failed task, instead of ending the process.
Like a Spark task it never gives up on an event: a failed delivery is sent again, and
the contiguous prefix of acknowledged events is written to the checkpoint file, from
which a restarted process resumes (duplicates are allowed, losses are not). It keeps
sending until SIGTERM, then flushes (bounded) and exits.

With `--wedge-file`, a logging handler passed to the client — which confluent-kafka
runs on the producer's poll thread — blocks forever once that file exists: user code
waiting on the client's own I/O thread, the structure of seed S4 (there a delivery
callback called a blocking send). The process lives, its telemetry heartbeat stops.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from types import FrameType
from typing import Any

from hangwatch import logs
from hangwatch.properties import add_properties_argument, parse_assignments
from hangwatch_pipeline import ProducerError, ProducerSettings, producer
from hangwatch_producer.wire import telemetry

log = logging.getLogger("hangwatch_demo.workload")

REFUSED_PAUSE_SECONDS = 0.5
"""With --retry-refused: the pause after a send the client refused at once."""


class WedgeOnFile(logging.Handler):
    """Blocks the thread that logs through it, forever, once `path` exists."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.forever = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.block_if_wedged()

    def block_if_wedged(self) -> None:
        """Block the calling thread forever if `path` exists (else return at once)."""
        if self.path.exists():
            self.forever.wait()


class Ledger:
    """Which events were acknowledged, which must be sent again, and the acked prefix."""

    def __init__(self, start: int) -> None:
        self.prefix = start
        self.acked: set[int] = set()
        self.retry: deque[int] = deque()
        self.lock = threading.Lock()

    def outcome(self, number: int, ok: bool) -> None:
        with self.lock:
            if not ok:
                self.retry.append(number)
                return
            self.acked.add(number)
            while self.prefix in self.acked:
                self.acked.discard(self.prefix)
                self.prefix += 1

    def next_retry(self) -> int | None:
        with self.lock:
            return self.retry.popleft() if self.retry else None


def _throttle_logger(every_seconds: float = 1.0) -> Any:
    """A `throttle_cb` logging `throttled` (the broker, its throttle time) when a broker
    delays this producer for a quota, at most once per `every_seconds`."""
    last = [0.0]

    def on_throttle(event: Any) -> None:
        now = time.monotonic()
        if event.throttle_time > 0 and now - last[0] >= every_seconds:
            last[0] = now
            log.info(
                "throttled",
                extra={
                    "broker": event.broker_name,
                    "throttle_ms": round(event.throttle_time * 1000),
                },
            )

    return on_throttle


def read_checkpoint(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_checkpoint(path: Path, value: int) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(str(value))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hangwatch_demo.workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second")
    parser.add_argument("--telemetry-dir", required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--wedge-file", type=Path)
    parser.add_argument("--message-timeout-ms", type=int, default=10000)
    parser.add_argument("--value-bytes", type=int, default=0, help="pad each value to N bytes")
    parser.add_argument(
        "--retry-refused",
        action="store_true",
        help="a send the client refuses at once (an unknown or forbidden topic) is retried "
        f"after {REFUSED_PAUSE_SECONDS:g} s, as Spark retries a failed task, instead of "
        "ending the process",
    )
    add_properties_argument(parser, "kafka", "librdkafka property (repeatable)")
    args = parser.parse_args(argv)
    logs.configure("workload")
    os.environ[telemetry.DIR_ENV] = args.telemetry_dir
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap, **parse_assignments(args.kafka)}
    if args.wedge_file:
        client_log = logging.getLogger("hangwatch_demo.workload.rdkafka")
        client_log.propagate = False
        client_log.setLevel(logging.DEBUG)
        client_log.addHandler(WedgeOnFile(args.wedge_file))
        conf.update({"logger": client_log, "debug": "msg"})
    conf["throttle_cb"] = _throttle_logger()
    settings = ProducerSettings(
        message_timeout_ms=args.message_timeout_ms, flush_timeout_seconds=2.0
    )
    ledger = Ledger(read_checkpoint(args.checkpoint))
    _run(args, conf, settings, ledger, stop)
    write_checkpoint(args.checkpoint, ledger.prefix)
    return 0


def _run(
    args: argparse.Namespace,
    conf: dict[str, Any],
    settings: ProducerSettings,
    ledger: Ledger,
    stop: threading.Event,
) -> None:
    first = next_number = ledger.prefix
    started, last_checkpoint = time.monotonic(), 0.0
    p = producer(conf, settings)

    def send(number: int) -> None:
        try:
            p.send(
                args.topic,
                f"ev-{number}".ljust(args.value_bytes, ".").encode(),
                key=str(number).encode(),
                on_delivery=lambda err, _msg: ledger.outcome(number, err is None),
            )
        except ProducerError as exc:
            if not args.retry_refused:
                raise
            # as Spark retries a failed task: the event again, after a pause
            log.warning("send refused; retrying", extra={"error": str(exc)[:300]})
            ledger.outcome(number, False)
            stop.wait(REFUSED_PAUSE_SECONDS)

    try:
        while not stop.is_set():
            due = first + int((time.monotonic() - started) * args.rate)
            while (again := ledger.next_retry()) is not None:
                send(again)
            while next_number < due and not stop.is_set():
                send(next_number)
                next_number += 1
            if time.monotonic() - last_checkpoint > 0.5:
                write_checkpoint(args.checkpoint, ledger.prefix)
                last_checkpoint = time.monotonic()
            stop.wait(0.01)
    finally:
        try:
            p.close(timeout_seconds=2.0)
        except ProducerError as exc:
            # Unacknowledged events are not lost: the checkpoint stops before them.
            log.info("workload closed with unacknowledged events", extra={"error": str(exc)})


if __name__ == "__main__":
    sys.exit(main())
