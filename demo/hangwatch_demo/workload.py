"""A producer process for scenarios: sends at a steady rate through the hangwatch wrapper.

Run as `python -m hangwatch_demo.workload --bootstrap B --topic T --rate R
--telemetry-dir D [--wedge-file F]`. It keeps sending until SIGTERM, then flushes
(bounded) and exits. With `--wedge-file`, a logging handler passed to the client —
which confluent-kafka runs on the producer's poll thread — blocks forever once that
file exists: user code waiting on the client's own I/O thread, the structure of
seed S4 (there a delivery callback called a blocking send). The process lives, its
messages stay pending and its telemetry heartbeat stops.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from hangwatch import logs
from hangwatch_pipeline import ProducerError, ProducerSettings, producer

log = logging.getLogger("hangwatch_demo.workload")


class WedgeOnFile(logging.Handler):
    """Blocks the thread that logs through it, forever, once `path` exists."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.forever = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.path.exists():
            self.forever.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hangwatch_demo.workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=200.0, help="messages per second")
    parser.add_argument("--telemetry-dir", required=True)
    parser.add_argument("--wedge-file", type=Path)
    parser.add_argument("--message-timeout-ms", type=int, default=20000)
    args = parser.parse_args(argv)
    logs.configure("workload")
    os.environ["HANGWATCH_TELEMETRY_DIR"] = args.telemetry_dir
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    conf: dict[str, object] = {"bootstrap.servers": args.bootstrap}
    if args.wedge_file:
        client_log = logging.getLogger("hangwatch_demo.workload.rdkafka")
        client_log.propagate = False
        client_log.setLevel(logging.DEBUG)
        client_log.addHandler(WedgeOnFile(args.wedge_file))
        conf.update({"logger": client_log, "debug": "msg"})
    settings = ProducerSettings(
        message_timeout_ms=args.message_timeout_ms, flush_timeout_seconds=2.0
    )
    sent = 0
    started = time.monotonic()
    p = producer(conf, settings)
    try:
        while not stop.is_set():
            due = int((time.monotonic() - started) * args.rate)
            while sent < due and not stop.is_set():
                p.send(args.topic, f"{os.getpid()}-{sent}".encode(), key=str(sent).encode())
                sent += 1
            stop.wait(0.01)
    finally:
        try:
            p.close(timeout_seconds=1.0)
        except ProducerError as exc:
            # A scenario ends workloads that may still have unacknowledged messages.
            log.info("workload closed with unacknowledged messages", extra={"error": str(exc)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
