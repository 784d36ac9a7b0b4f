"""A plain confluent-kafka producer (no hangwatch wrapper): one of the real-client workloads.

    python -m hangwatch_testing.clients.plain_producer --bootstrap B --topic T [--rate 50]
        [--burst-seconds 0 --idle-seconds 0] [--wedge-file PATH] [--acks all]
        [--value-bytes N] [-X key=value ...]

Writes `--rate` messages per second; with `--burst-seconds`/`--idle-seconds` it
alternates bursts with idle periods (the producer stays open and idle, as between
micro-batches). `--wedge-file`: once that file exists, the next delivery callback blocks
forever on the producer's own poll thread, the S4 pattern of a user callback that waits
on the producer itself. Prints `ok <delivered>` every second and `error <reason>` for
each failed delivery (the client's own first error is what the harness times), flushed;
with `-X`, librdkafka properties (a SASL login, a client.id a quota names), and
`--value-bytes` pads each value. Client-level errors print as `client-error <reason>`
(a failed SASL login; not a failed delivery) and each throttle the broker reports as
`throttled <ms>`. `--retry-refused`: a write the client refuses at once (an unknown or
forbidden topic) prints `error <reason>` and is retried after 0.5 s instead of ending
the process.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from hangwatch.properties import add_properties_argument, parse_assignments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst-seconds", type=float, default=0.0)
    parser.add_argument("--idle-seconds", type=float, default=0.0)
    parser.add_argument("--wedge-file", default="")
    parser.add_argument("--acks", default="all")
    parser.add_argument("--message-timeout-ms", type=int, default=0, help="0: librdkafka's")
    parser.add_argument("--value-bytes", type=int, default=0, help="pad each value to N bytes")
    parser.add_argument(
        "--retry-refused",
        action="store_true",
        help="a write the client refuses at once is printed as an error and retried after "
        "0.5 s instead of ending the process",
    )
    add_properties_argument(parser, "kafka", "librdkafka property (repeatable)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    wedge = Path(args.wedge_file) if args.wedge_file else None
    delivered = [0]

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            print(f"error {err.name()}: {err.str()}", flush=True)
        else:
            delivered[0] += 1
        if wedge is not None and wedge.exists():
            threading.Event().wait()  # blocks the poll thread forever (S4)

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "linger.ms": 5,
        "log_level": 0,
        # client-level errors (a failed SASL login) and throttling, never counted as a
        # failed delivery: `client-error`, `throttled <ms>`
        "error_cb": lambda err: print(f"client-error {err.name()}: {err.str()}", flush=True),
        "throttle_cb": lambda event: print(
            f"throttled {event.throttle_time * 1000:.0f}", flush=True
        ),
        **parse_assignments(args.kafka),
    }
    if args.message_timeout_ms:
        conf["message.timeout.ms"] = args.message_timeout_ms
    producer = Producer(conf)
    _run(producer, args, stop, on_delivery, delivered)
    producer.flush(2)
    return 0


def _run(
    producer: Producer, args: Any, stop: threading.Event, on_delivery: Any, delivered: list[int]
) -> None:
    started = last_report = time.monotonic()
    sent = 0
    cycle = args.burst_seconds + args.idle_seconds
    while not stop.is_set():
        now = time.monotonic()
        bursting = not cycle or (now - started) % cycle < args.burst_seconds
        due = int((now - started) * args.rate) if bursting else sent
        while bursting and sent < due:
            try:
                value = (b"m%d" % sent).ljust(args.value_bytes, b".")
                producer.produce(args.topic, value, on_delivery=on_delivery)
            except BufferError:
                print("error queue full", flush=True)
                break
            except KafkaException as exc:  # refused at once: an unknown or forbidden topic
                if not args.retry_refused:
                    raise
                err = exc.args[0]
                print(f"error {err.name()}: {err.str()}", flush=True)
                stop.wait(0.5)  # as a job retries a failed write
                break
            sent += 1
        if not bursting:
            started_offset = int((now - started) * args.rate)
            sent = max(sent, started_offset)  # idle time sends nothing, resumes at rate
        producer.poll(0.02)
        if now - last_report >= 1.0:
            print(f"ok {delivered[0]}", flush=True)
            last_report = now
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
