"""A plain confluent-kafka (librdkafka) producer at the field corpus's versions.

Runs in the client's own virtualenv (hangwatch_testing.clients.build: `confluent-kafka`
pinned by `<version>.txt`, nothing else): no hangwatch code. `produce` writes `rate`
messages a second (no key: librdkafka's default partitioner spreads them over the
partitions), serves delivery reports with `poll`, and emits one progress line per event
through `emit`: {"ts": <unix seconds>, "event": "start" | "ack" | "error" | "fatal", ...}
(the incidents' progress protocol, testing/clients/incidents/README.md). As a program
(a producer pod) the lines go to stdout; inside Spark a PySpark task imports this module
from the same directory and emits into a file (hangwatch_testing.incidents.spark_task).

    python librdkafka_producer.py --brokers B --topic T [--rate 20] [-X key=value ...]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable

import confluent_kafka

Emit = Callable[..., None]


def stdout_emit(event: str, **fields: object) -> None:
    print(json.dumps({"ts": time.time(), "event": event, **fields}), flush=True)


def produce(
    bootstrap: str,
    topic: str,
    rate: float,
    conf: dict[str, str],
    emit: Emit,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Writes until `stop()`; every delivery report and local error goes to `emit`."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **conf})
    emit("start", client=f"confluent-kafka {confluent_kafka.version()[0]}",
         librdkafka=confluent_kafka.libversion()[0])  # fmt: skip

    def delivered(err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message) -> None:
        if err is None:
            emit("ack", partition=msg.partition(), offset=msg.offset())
        else:
            emit("error", error=str(err), partition=msg.partition())

    period, n = 1.0 / rate, 0
    next_at = time.monotonic()
    while not stop():
        try:
            producer.produce(topic, value=b"%d" % n, on_delivery=delivered)
            n += 1
        except BufferError as exc:  # the local queue is full: produce() refuses
            emit("error", error=f"produce: {exc}")
        except confluent_kafka.KafkaException as exc:
            emit("fatal", error=str(exc))
            return
        next_at += period
        while (wait := next_at - time.monotonic()) > 0:
            producer.poll(min(wait, 0.1))
        producer.poll(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("-X", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.X)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    produce(args.brokers, args.topic, args.rate, conf, stdout_emit, lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
