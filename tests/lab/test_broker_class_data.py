"""The brokers' class-data archive (`hangwatch_lab.kafka.class_archive`), built as setup
builds it, on the lab's real Kafka.

Covers: the archive maps for real with the brokers' own options and classpath (a JVM
told `-Xshare:on`, which refuses to start on an archive it cannot map, starts); a lab's
broker JVMs are started with it and serve (their command lines name it); building
again is a no-op (the same file, untouched). The CPU it saves is
benchmarks/broker_class_data.py's to measure.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hangwatch_lab import kafkajars
from hangwatch_lab.kafka import KafkaLab
from hangwatch_lab.kafka.class_archive import build
from hangwatch_lab.kafka.classdata import archive_path
from hangwatch_lab.kafka.nodes import JVM_OPTIONS, find_java
from hangwatch_testing.kafka_clients import round_trip

pytestmark = pytest.mark.xdist_group("kafka-engine")


def test_the_archive_maps_with_the_brokers_options_and_serves_a_lab() -> None:
    path = build()
    java, lib = find_java(), kafkajars.lib_dir()
    assert path == archive_path(java, lib)
    built = path.stat().st_mtime_ns
    assert build() == path and path.stat().st_mtime_ns == built  # a no-op once built
    mapped = subprocess.run(
        [java, "-Xshare:on", f"-XX:SharedArchiveFile={path}", *JVM_OPTIONS,
         "-cp", f"{lib}/*", "-version"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    with KafkaLab(brokers=1, topics={"t": 1}) as lab:
        for pid in lab.broker_pids().values():
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            assert f"-XX:SharedArchiveFile={path}" in args, args
        assert len(round_trip(lab.bootstrap, "t", 10)) == 10  # it serves
