"""The socket view's smallest write and smallest request, as Kafka's own encoder writes them.

`sockets.classify` tells a write from other traffic by size: sends smaller than the
smallest Produce request that carries a record cannot hold a write. Its constants are
checked here against the kafka-clients jar of each of the lab's Kafka lines
(tests/sidecar/java/SmallestRequests.java: every Produce version the jar knows, one record
with neither key nor value, a one-character topic, a null client id; ApiVersions v0):

- 3.9.2 (Produce v0-v11): the smallest write of any version is `MIN_WRITE_BYTES` (65, v0
  and v1), of v3 onwards `MIN_WRITE_BYTES_V3` (102, v9-v11; v3-v8: 109), ApiVersions v0
  is `MIN_REQUEST_BYTES` (14);
- 4.4.0 (its Produce starts at v3, KIP-896): the smallest is `MIN_WRITE_BYTES_V3` (v9-v12;
  v13, topic ids: 116).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hangwatch_lab import kafkajars
from hangwatch_sidecar.sockets.classify import (
    MIN_REQUEST_BYTES,
    MIN_WRITE_BYTES,
    MIN_WRITE_BYTES_V3,
)

SOURCE = Path(__file__).with_name("java") / "SmallestRequests.java"
RECORDS_4X = ("org.apache.kafka.common.record.", "org.apache.kafka.common.record.internal.")
"""Kafka 4 moved the record classes (MemoryRecords, SimpleRecord, RecordBatch)."""


def _sizes(version: str, scratch: Path) -> dict[tuple[str, int], int]:
    """(api, version) -> bytes on the wire, from the kafka-clients jar of Kafka `version`."""
    lib = kafkajars.ensure_jars(version)
    source = SOURCE.read_text()
    if kafkajars.line_of(version) != "3":
        source = source.replace(*RECORDS_4X)
    src, out = scratch / "src", scratch / "out"
    src.mkdir()
    (src / SOURCE.name).write_text(source)
    classpath = f"{lib}/*"
    subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", classpath, str(src / SOURCE.name)],
        check=True,
        timeout=300,
    )
    done = subprocess.run(
        ["java", "-cp", f"{out}:{classpath}", "SmallestRequests"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    sizes = {}
    for line in done.stdout.splitlines():
        api, api_version, size = line.split()
        sizes[(api, int(api_version))] = int(size)
    return sizes


@pytest.mark.parametrize("line", ["3", "4"])
def test_the_smallest_write_and_request_are_what_kafka_encodes(line: str, tmp_path: Path) -> None:
    version = kafkajars.legacy_version() if line == "3" else kafkajars.default_version()
    sizes = _sizes(version, tmp_path)
    produce = {v: size for (api, v), size in sizes.items() if api == "produce"}
    assert produce, sizes
    assert min(size for v, size in produce.items() if v >= 3) == MIN_WRITE_BYTES_V3, produce
    if line == "3":
        assert min(produce) == 0, produce
        assert min(produce.values()) == MIN_WRITE_BYTES, produce
    else:
        assert min(produce) == 3, produce  # Produce v0-v2 gone from the client (KIP-896)
    assert sizes[("api_versions", 0)] == MIN_REQUEST_BYTES, sizes
