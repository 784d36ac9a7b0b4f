"""Known-bad releases, said before they hang: the pod's Kafka client releases and their
published hangs (`hangwatch_sidecar.releases`, issue 43 item 4).

Covered:

- readers on what crosses a trust boundary, each a property over hostile input (any
  bytes or text gives sightings or none, never an error): a Go executable's build
  information (well-formed: the `dep` lines of sarama and kafka-go, a `=>` replacement
  taking its module's place, a header off its 16-byte boundary ignored), a Java command
  line's classpath (`-cp`, `-classpath`, `--class-path=`, `CLASSPATH`), the classpath of
  a Spark driver's `/environment` answer (Ivy's jar names), a package.json, a
  site-packages listing;
- reading a process holding the pod's connections: only processes holding one of them,
  never the sidecar's own (the real clients: test_client_releases_of_real_clients.py);
- advisories: one per release and hang, every place it was seen, bounded; the producers'
  telemetry (the wrapper's librdkafka, the Java reporter's kafka-clients) is a source;
- /status carries them through the wire format and the operator's decoder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.known_hangs import BY_ID
from hangwatch.wire import status
from hangwatch_sidecar.releases.advise import MAX_SOURCES, advise
from hangwatch_sidecar.releases.processes import ProcessReleases
from hangwatch_sidecar.releases.read import (
    GO_BUILDINFO_MAGIC,
    Sighting,
    classpath_of,
    go_modules,
    java_classpath,
    package_json,
    python_dist_info,
)
from hangwatch_sidecar.spark.failures import classpath_entries
from hangwatch_sidecar.state import SidecarState, status_document


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def buildinfo(modinfo: str, offset: int = 64, version: str = "go1.22.1") -> bytes:
    """Bytes holding Go build information with inline strings at `offset`."""
    header = GO_BUILDINFO_MAGIC + bytes([8, 0x2]) + bytes(16)
    strings = b"".join(_varint(len(s.encode())) + s.encode() for s in (version, modinfo))
    return bytes(offset) + header + strings + bytes(32)


MODINFO = (
    "path\texample.com/orders\nmod\texample.com/orders\t(devel)\t\n"
    "dep\tgithub.com/IBM/sarama\tv1.37.2\th1:abc=\n"
    "dep\tgithub.com/segmentio/kafka-go\tv0.4.8\th1:def=\n"
    "=>\tgithub.com/segmentio/kafka-go\tv0.3.6\th1:ghi=\n"
    "dep\tgolang.org/x/net\tv0.17.0\th1:jkl=\n"
)


# -- readers -------------------------------------------------------------------------------------


def test_go_build_information_names_its_kafka_clients_and_their_replacements() -> None:
    found = go_modules(buildinfo(MODINFO), "p")
    assert sorted((s.client, s.version) for s in found) == [
        ("kafka-go", "v0.3.6"),  # the replacement built in
        ("sarama", "v1.37.2"),
    ]
    assert go_modules(buildinfo(MODINFO, offset=70), "p") == []  # off its 16-byte boundary
    assert go_modules(buildinfo(MODINFO)[:90], "p") == []  # cut short


@given(st.binary(max_size=2000), st.integers(0, 200))
def test_any_bytes_with_or_without_a_header_give_sightings_or_none(junk: bytes, at: int) -> None:
    for data in (junk, junk[:at] + GO_BUILDINFO_MAGIC + junk[at:]):
        found = go_modules(data, "p")
        assert all(s.client in ("sarama", "kafka-go") for s in found)


@given(st.lists(st.text(max_size=80), max_size=20), st.lists(st.text(max_size=80), max_size=5))
def test_any_command_line_gives_a_classpath_or_none(argv: list[str], env: list[str]) -> None:
    for entry in classpath_of(argv, env):
        assert isinstance(entry, str)
    for sighting in java_classpath(classpath_of(argv, env), "p"):
        assert sighting.client == "kafka-clients"


def test_a_classpath_from_each_place_a_jvm_takes_it() -> None:
    jars = "/opt/app/classes:/opt/app/lib/kafka-clients-3.9.2.jar:/opt/app/lib/other.jar"
    for argv, env in (
        (["java", "-cp", jars, "Main"], []),
        (["java", "-classpath", jars, "Main"], []),
        (["java", f"--class-path={jars}", "Main"], []),
        (["java", "Main"], ["HOME=/", f"CLASSPATH={jars}"]),
    ):
        found = java_classpath(classpath_of(argv, env), "p")
        assert [(s.client, s.version) for s in found] == [("kafka-clients", "3.9.2")], argv
    url = "spark://driver:7078/jars/kafka-clients-2.1.0.jar"
    assert [s.version for s in java_classpath([url], "p")] == ["2.1.0"]


def test_spark_classpath_entries_name_the_kafka_clients_jar() -> None:
    """The driver's `/environment` answer as Spark 3.5 and 4.x write it: `--packages`
    puts Ivy's names on the classpath as spark:// URLs."""
    environment = {
        "sparkProperties": [["spark.app.name", "orders"]],
        "classpathEntries": [
            ["/opt/spark/jars/spark-core_2.13-4.2.0.jar", "System Classpath"],
            ["spark://driver:7078/jars/org.apache.kafka_kafka-clients-3.9.2.jar", "Added By User"],
            ["spark://driver:7078/jars/org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar",
             "Added By User"],
            "not a pair",
            [7, "not a path"],
        ],
    }  # fmt: skip
    found = java_classpath(classpath_entries(environment), "spark")
    assert [(s.client, s.version) for s in found] == [("kafka-clients", "3.9.2")]
    assert classpath_entries({"classpathEntries": "no"}) == () and classpath_entries([]) == ()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@given(JSON)
def test_any_environment_answer_gives_entries_or_none(doc: object) -> None:
    for entry in java_classpath(classpath_entries({"classpathEntries": doc}), "spark"):
        assert entry.client == "kafka-clients"
    assert all(isinstance(e, str) for e in classpath_entries(doc))


@given(st.binary(max_size=400))
def test_any_package_json_bytes_give_kafkajs_or_none(data: bytes) -> None:
    for sighting in package_json(data, "p"):
        assert sighting.client == "kafkajs"


def test_package_json_and_dist_info() -> None:
    doc = json.dumps({"name": "kafkajs", "version": "1.14.0"}).encode()
    assert [(s.client, s.version) for s in package_json(doc, "p")] == [("kafkajs", "1.14.0")]
    assert package_json(json.dumps({"name": "other", "version": "1.14.0"}).encode(), "p") == []
    assert package_json(json.dumps({"name": "kafkajs", "version": ["x"]}).encode(), "p") == []
    assert package_json(b"[" * 100_000, "p") == []  # nested past any parser's depth
    names = ["six.py", "confluent_kafka", "confluent_kafka-2.8.0.dist-info"]
    assert [(s.client, s.version) for s in python_dist_info(names, "p")] == [
        ("librdkafka", "2.8.0")
    ]


# -- a process holding the pod's connections ---------------------------------------------------


def fake_process(proc: Path, pid: int, inode: int, **links: str | bytes) -> None:
    """A /proc entry of a process holding socket `inode`: `links` names its symlinks
    (exe, cwd, root) and files (cmdline, maps, environ)."""
    entry = proc / str(pid)
    (entry / "fd").mkdir(parents=True)
    os.symlink(f"socket:[{inode}]", entry / "fd" / "7")
    (entry / "stat").write_text(f"{pid} (p) S 1 " + " ".join(["0"] * 18) + " 4242 0\n")
    for name, value in links.items():
        if isinstance(value, bytes):
            (entry / name).write_bytes(value)
        else:
            os.symlink(value, entry / name)


def test_only_processes_holding_the_pods_connections_are_read(tmp_path: Path) -> None:
    go = tmp_path / "producer"
    go.write_bytes(b"\x7fELF" + buildinfo(MODINFO, offset=60))  # the header at 64
    fake_process(tmp_path / "proc", 100, 9100, exe=str(go), cmdline=b"producer\0")
    fake_process(tmp_path / "proc", os.getpid(), 9101, exe=str(go), cmdline=b"producer\0")
    releases = ProcessReleases(60.0, clock=lambda: 0.0, proc=tmp_path / "proc")
    assert releases.sightings({12345}) == ()  # a process holding none of them
    releases = ProcessReleases(60.0, clock=lambda: 0.0, proc=tmp_path / "proc")
    found = releases.sightings({9100, 9101})  # the sidecar's own is never read
    assert {(s.client, s.version, s.source) for s in found} == {
        ("sarama", "v1.37.2", "process 100 (Go build information)"),
        ("kafka-go", "v0.3.6", "process 100 (Go build information)"),
    }


# -- advisories ----------------------------------------------------------------------------------


def test_one_advisory_per_release_and_hang_with_every_place_seen() -> None:
    sightings = [
        Sighting("sarama", "v1.31.0", f"process {i} (Go build information)") for i in range(20)
    ] + [Sighting("sarama", "v1.38.0", "process 99 (Go build information)")]
    found = advise(sightings)
    assert [(a.client, a.version, a.hang.id) for a in found] == [
        ("sarama", "v1.31.0", "sarama#2150"),
        ("sarama", "v1.31.0", "sarama#2377"),
    ]
    assert all(len(a.seen_in) == MAX_SOURCES for a in found)
    assert "fixed in 1.33.0" in found[0].line and BY_ID["sarama#2150"].report in found[0].line
    (open_one,) = advise([Sighting("librdkafka", "2.16.0", "telemetry of producer p")])
    assert open_one.hang.id == "librdkafka#5430" and "open upstream" in open_one.line


def test_status_carries_the_advisories() -> None:
    found = advise([Sighting("sarama", "v1.37.2", "process 7 (Go build information)")])
    doc = status_document(SidecarState(started_ts=1.0, advisories=found))
    decoded = status.decode(status.encode(doc))
    (advisory,) = decoded.advisories
    assert (advisory.client, advisory.version, advisory.hang) == (
        "sarama",
        "v1.37.2",
        "sarama#2377",
    )
    assert advisory.fixed == "1.38.0" and advisory.report.endswith("/issues/2377")
    assert advisory.seen_in == ["process 7 (Go build information)"]
    assert (
        status.decode(status.encode(status_document(SidecarState(started_ts=1.0)))).advisories == []
    )
