"""hangwatch's telemetry in a real Java client, on real Apache Kafka: the document it writes.

A plain Java `KafkaProducer` (kafka-clients of the Spark 4 connector,
`hangwatch_testing.clients.telemetry_producer`) with `HangwatchTelemetry` as its
interceptor and metrics reporter, on the refusal controls' lab
(`hangwatch_testing.clients.refusals`: a topic whose `max.message.bytes` is 200, a SASL
user). Covers:

- the jar's contract constants are the Python side's (`hangwatch_producer.wire.telemetry`):
  schema, kind, file names, the directory's variable and default, the string and list
  bounds;
- 50 records acknowledged, with the kafka-clients of each supported Spark line's
  connector (3.9.2 for 4.x, 3.4.1 for 3.5; the jar built against each): while the
  producer is open its document decodes with the sidecar's own `decode`, counts 50 sent
  and delivered and none failed, names the Java client (its version: that jar's) and its
  acknowledgements, the topic, this process, no acks (its settings name none); its lock
  is held (a POSIX lock: `lock_state` says alive), and the wrapper's clean-up of dead
  producers leaves a live JVM's files alone; after close both files are gone;
- 1 KiB records to the 200-byte topic: the document shows the broker's refusal, as
  MESSAGE_TOO_LARGE failures or the client's batch splits;
- a SASL login with a wrong password: the failures name SASL_AUTHENTICATION_FAILED and the
  password appears nowhere in the document;
- a link planted at the next document's temporary name (anyone writing the shared volume
  can) is never written through: its target keeps its bytes, the document goes on;
- a JVM killed with SIGKILL: its lock is free at once (`lock_state` says gone), and the
  wrapper's clean-up removes its files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from hangwatch.java_build import kafka_clients
from hangwatch_lab import Lab
from hangwatch_pipeline import kafka_telemetry, spark_kafka
from hangwatch_producer.telemetry_files import lock_state, remove_dead_producers
from hangwatch_producer.wire import telemetry as wire
from hangwatch_testing.clients.refusals import SMALL_LIMIT, USER, refusals_lab
from hangwatch_testing.clients.telemetry_producer import java_producer
from hangwatch_testing.waiting import wait_for

JAVA = kafka_telemetry.JAR.source.read_text()


def _constant(name: str) -> str:
    found = re.search(rf"static final \w+ {name} = (.+?);", JAVA)
    assert found, f"{name} not in {kafka_telemetry.JAR.source.name}"
    return found.group(1).strip('"')


def test_the_jars_contract_is_the_python_sides() -> None:
    assert int(_constant("SCHEMA_VERSION")) == wire.SCHEMA_VERSION
    assert _constant("KIND") == wire.KIND
    assert _constant("FILE_PREFIX") == wire.FILE_PREFIX
    assert _constant("FILE_SUFFIX") == wire.FILE_SUFFIX
    assert _constant("LOCK_SUFFIX") == wire.LOCK_SUFFIX
    assert _constant("TEMP_SUFFIX") == wire.TEMP_SUFFIX
    assert _constant("DIR_ENV") == wire.DIR_ENV
    assert _constant("DEFAULT_DIR") == wire.DEFAULT_DIR
    assert int(_constant("MAX_STRING")) == wire.MAX_STRING
    assert int(_constant("MAX_LIST")) == wire.MAX_LIST
    assert _constant("LIBRARY") == wire.JAVA_CLIENT
    assert kafka_telemetry.CLASS_NAME.rpartition(".")[2] == kafka_telemetry.JAR.source.stem


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with refusals_lab() as running:
        yield running


def _documents(directory: Path) -> dict[str, wire.TelemetryDocument]:
    return {
        p.name: wire.decode(p.read_bytes())
        for p in directory.glob(f"{wire.FILE_PREFIX}*{wire.FILE_SUFFIX}")
    }


def _settled(directory: Path, done: int) -> wire.TelemetryDocument:
    """The one document, once it counts `done` records answered (the next refresh)."""

    def counted() -> wire.TelemetryDocument | None:
        docs = list(_documents(directory).values())
        if len(docs) == 1:
            counters = docs[0].counters
            if counters.delivered + counters.failed >= done:
                return docs[0]
        return None

    found: wire.TelemetryDocument = wait_for(counted, 10, f"a document counting {done}")
    return found


@pytest.mark.timeout(300)
@pytest.mark.parametrize("line", spark_kafka.LINES, ids=lambda line: line.name)
def test_acknowledged_records_are_counted_under_a_held_lock_and_gone_at_close(
    lab: Lab, tmp_path: Path, line: spark_kafka.SparkLine
) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    with java_producer(
        lab.bootstrap, "open", telemetry, count=50, log=tmp_path / "j.log", line=line
    ) as java:
        assert (java.acknowledged, java.failed) == (50, 0)
        doc = _settled(telemetry, 50)
        assert (doc.counters.enqueued, doc.counters.delivered, doc.counters.failed) == (50, 50, 0)
        assert doc.counters.pending == 0 and doc.last_delivery_ts is not None
        assert isinstance(doc.client, wire.Client) and doc.client.library == wire.JAVA_CLIENT
        clients = kafka_clients(spark_kafka.jars(line))
        assert doc.client.acknowledgements and clients.stem.endswith(doc.client.version)
        assert doc.topics == ["open"] and doc.identity.pid == java.proc.pid
        assert doc.errors == [] and doc.splits is msgspec.UNSET and doc.throttle is None
        assert doc.acks is None  # its settings name no acks: the client's default applies
        (name,) = _documents(telemetry)
        lock = telemetry / wire.lock_name(wire.key_of(name) or "")
        assert lock_state(lock) is True
        assert remove_dead_producers(telemetry) == []  # a live JVM's files stay
        assert (telemetry / name).exists()
        java.close()
        assert java.proc.returncode == 0
    assert sorted(p.name for p in telemetry.iterdir()) == []


@pytest.mark.timeout(300)
def test_records_above_the_topics_limit_show_the_refusal(lab: Lab, tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    settings = ["linger.ms=50", "delivery.timeout.ms=8000", "request.timeout.ms=4000"]
    with java_producer(
        lab.bootstrap, "small", telemetry, count=30, value_bytes=5 * SMALL_LIMIT,
        properties=settings, log=tmp_path / "j.log",
    ) as java:  # fmt: skip
        assert java.acknowledged == 0 and java.failed == 30
        doc = _settled(telemetry, 30)
        codes = {e.code for e in doc.errors}
        assert doc.counters.failed == 30 and doc.counters.delivered == 0
        splits = doc.splits.count if isinstance(doc.splits, wire.Splits) else 0
        assert "MESSAGE_TOO_LARGE" in codes or splits > 0
        assert all(e.topic == "small" for e in doc.errors), doc.errors
        java.close()


@pytest.mark.timeout(300)
def test_a_refused_login_is_named_and_its_password_never_written(lab: Lab, tmp_path: Path) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    password = "hunter2-not-the-password"
    login = [
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "delivery.timeout.ms=8000",
        "request.timeout.ms=4000", "max.block.ms=8000",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{password}";',
    ]  # fmt: skip
    with java_producer(
        lab.sasl_bootstrap, "open", telemetry, count=5, properties=login,  # type: ignore[attr-defined]
        log=tmp_path / "j.log",
    ) as java:  # fmt: skip
        assert java.failed == 5
        doc = _settled(telemetry, 5)
        assert {e.code for e in doc.errors} == {"SASL_AUTHENTICATION_FAILED"}, doc.errors
        assert doc.last_error is not None and doc.last_error.code == "SASL_AUTHENTICATION_FAILED"
        raw = b"".join(p.read_bytes() for p in telemetry.iterdir() if p.is_file())
        assert password.encode() not in raw
        java.close()


@pytest.mark.timeout(300)
def test_a_killed_jvm_frees_its_lock_and_the_wrappers_clean_up_removes_its_files(
    lab: Lab, tmp_path: Path
) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    with java_producer(lab.bootstrap, "open", telemetry, count=5, log=tmp_path / "j.log") as java:
        (name,) = _documents(telemetry)
        key = wire.key_of(name) or ""
        assert lock_state(telemetry / wire.lock_name(key)) is True
        java.kill()
        assert lock_state(telemetry / wire.lock_name(key)) is False
        assert remove_dead_producers(telemetry) == [key]
    assert sorted(p.name for p in telemetry.iterdir()) == []


def _refreshed(directory: Path, name: str, seq: int) -> int | None:
    """The document's sequence number once it is past `seq`."""
    now = _documents(directory)[name].seq
    return now if now > seq else None


@pytest.mark.timeout(300)
def test_a_link_planted_at_the_temporary_name_is_never_written_through(
    lab: Lab, tmp_path: Path
) -> None:
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    with java_producer(lab.bootstrap, "open", telemetry, count=5, log=tmp_path / "j.log") as java:
        (name,) = _documents(telemetry)
        planted = telemetry / wire.temp_name(name)
        seq = _documents(telemetry)[name].seq
        for _ in range(3):  # the writer may be between its write and its rename
            planted.unlink(missing_ok=True)
            planted.symlink_to(victim)
            seq = wait_for(lambda last=seq: _refreshed(telemetry, name, last), 10, "a refresh")
        assert victim.read_text() == "precious"
        assert not (telemetry / name).is_symlink()
        java.close()
