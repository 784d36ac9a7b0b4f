"""What the real-Kafka lab tests and benchmarks/kafka_engine.py share: the process
table, the protocol versions a broker serves, metadata through one broker only, and a
produce-then-consume round trip with confluent-kafka."""

from __future__ import annotations

import socket
import struct
import time
import uuid
import zlib
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from hangwatch_lab.kafka import run_state


def processes_with(marker: str) -> list[int]:
    """Pids of every process whose command line contains `marker` (the process table)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = run_state(int(entry.name))
        except (OSError, ValueError):
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def api_version_ranges(port: int, timeout_seconds: float = 10.0) -> dict[int, tuple[int, int]]:
    """Kafka API key -> (min, max) version the broker on 127.0.0.1:port serves, from its
    answer to an ApiVersions v0 request (the request every client since 0.10 sends first)."""
    request = struct.pack(">hhih", 18, 0, 7, 2) + b"hw"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_seconds) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(sock, 4))[0]
        body = _read(sock, size)
    correlation, error, count = struct.unpack(">ihi", body[:10])
    assert correlation == 7 and error == 0, (correlation, error)
    ranges = {}
    for i in range(count):
        key, low, high = struct.unpack(">hhh", body[10 + 6 * i : 16 + 6 * i])
        ranges[key] = (low, high)
    return ranges


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def metadata_through(address: str, timeout_seconds: float) -> str:
    """`answered` when the one broker at `address` answers a metadata request within the
    timeout, else the client's error: `Local: Timed out` when nothing answered in time
    (the connection attempt is allowed longer than the request), `Local: Broker transport
    failure` when the connection failed (refused)."""
    admin = AdminClient(
        {
            "bootstrap.servers": address,
            "log_level": 0,
            "socket.connection.setup.timeout.ms": int(timeout_seconds * 3000),
        }
    )
    try:
        admin.list_topics(timeout=timeout_seconds)
    except KafkaException as exc:
        return str(exc.args[0].str() if exc.args else exc)
    return "answered"


def round_trip(bootstrap: str, topic: str, count: int, timeout_seconds: float = 60) -> list[str]:
    """Produce `count` records with acks=all, then consume them back; the values read."""
    delivered: list[KafkaError | None] = []
    tag = uuid.uuid4().hex[:8]
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 0}
    )
    for i in range(count):
        producer.produce(topic, f"{tag}-{i}".encode(), callback=lambda e, _m: delivered.append(e))
    producer.flush(timeout_seconds)
    assert delivered == [None] * count, f"deliveries: {delivered}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lab-test-{tag}",
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + timeout_seconds
    try:
        while time.monotonic() < deadline and len(values) < count:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                value = (msg.value() or b"").decode()
                if value.startswith(tag):
                    values.append(value)
    finally:
        consumer.close()
    return values


def produce_v0(port: int, topic: str, timeout_seconds: float = 10.0) -> int | str:
    """Send one record as the 0.8.2 producer does (Produce v0, a v0 message, acks=1) to the
    broker on 127.0.0.1:port, leader of `topic`'s partition 0; the partition's error code
    in the answer (0: written), or `closed` when the broker closed the connection."""
    body = struct.pack(">bb", 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 2) + b"v0"
    message = struct.pack(">I", zlib.crc32(body)) + body
    message_set = struct.pack(">qi", 0, len(message)) + message
    name = topic.encode()
    request = (
        struct.pack(">hhih", 0, 0, 11, 2)
        + b"hw"
        + struct.pack(">hi", 1, 10_000)  # acks=1, timeout
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, len(message_set))
        + message_set
    )
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_seconds) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        try:
            size = struct.unpack(">i", _read(sock, 4))[0]
        except ConnectionError:
            return "closed"
        answer = _read(sock, size)
    correlation, topics = struct.unpack(">ii", answer[:8])
    assert correlation == 11 and topics == 1, (correlation, topics)
    offset = 8 + 2 + struct.unpack(">h", answer[8:10])[0]
    partitions, index, error = struct.unpack(">iih", answer[offset : offset + 10])
    assert partitions == 1 and index == 0, (partitions, index)
    return int(error)
