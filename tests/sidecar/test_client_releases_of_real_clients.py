"""Known-bad releases read from the real clients the suite builds, as the sidecar reads a
process holding the pod's connections to brokers (issue 43 item 4).

Each client is built by `hangwatch_testing.clients.build` (setup builds them all; a
missing one is built here) and shown to `releases.processes.ProcessReleases` as a /proc
entry whose `exe` (a Go client), `cmdline` and `root` (a Java one) are the client's: the
release at its affected version is named with its published hang, the same client at
its fixed release is not:

- sarama v1.37.2 -> sarama#2377; v1.38.0, the fix, named by nothing; v1.31.0 and v1.32.0
  -> sarama#2150 (and #2377); v1.33.0, 2150's fix -> #2377 only;
- kafka-go v0.3.6 -> kafka-go#451; v0.3.7, the fix, v0.3.5 (which the report suspected;
  its writer is v0.3.7's, docs/incidents.md) and v0.4.8 by nothing;
- kafkajs 1.14.0 (its package.json, from the script's folder) -> kafkajs#918; 1.15.0, the
  fix, by nothing;
- kafka-clients 3.9.2 read from a classpath's `lib/*` (a release, no hang of the table).
"""

from __future__ import annotations

from pathlib import Path

from hangwatch_sidecar.releases.advise import advise
from hangwatch_sidecar.releases.processes import ProcessReleases
from hangwatch_testing.clients.build import binary, built
from tests.sidecar.test_client_releases import fake_process


def _named(proc: Path, inodes: set[int]) -> dict[str, set[str]]:
    releases = ProcessReleases(60.0, clock=lambda: 0.0, proc=proc)
    return {
        f"{a.client} {a.version}": {*a.seen_in, a.hang.id}
        for a in advise(releases.sightings(inodes))
    }


GO_CLIENTS = {
    "sarama-v1.37.2": {"sarama#2377"},
    "sarama-v1.38.0": set(),
    "sarama-v1.31.0": {"sarama#2150", "sarama#2377"},
    "sarama-v1.32.0": {"sarama#2150", "sarama#2377"},
    "sarama-v1.33.0": {"sarama#2377"},
    "kafka-go-v0.3.5": set(),  # suspected by the report; its writer is v0.3.7's
    "kafka-go-v0.3.6": {"kafka-go#451"},
    "kafka-go-v0.3.7": set(),
    "kafka-go-v0.4.8": set(),
}
"""Each Go client of the suite -> the hangs its release is named by."""


def test_go_clients_at_their_affected_and_fixed_releases(tmp_path: Path) -> None:
    for pid, client in enumerate(GO_CLIENTS, 100):
        fake_process(tmp_path, pid, 9000 + pid, exe=str(binary(client)), cmdline=b"producer\0")
        releases = ProcessReleases(60.0, clock=lambda: 0.0, proc=tmp_path)
        found = releases.sightings({9000 + pid})
        version = client.rsplit("-", 1)[1]
        assert [s.version for s in found] == [version], client  # read from its build
        named = {a.hang.id for a in advise(found)}
        assert named == GO_CLIENTS[client], client
    assert _named(tmp_path, {9100})["sarama v1.37.2"] == {
        "sarama#2377",
        "process 100 (Go build information)",
    }


def test_kafkajs_at_its_affected_and_fixed_releases(tmp_path: Path) -> None:
    for pid, client in enumerate(("kafkajs-1.14.0", "kafkajs-1.15.0"), 200):
        fake_process(
            tmp_path, pid, 9000 + pid, cwd=str(built(client)), root="/",
            cmdline=b"node\0--no-warnings\0producer.js\0",
        )  # fmt: skip
    assert _named(tmp_path, {9200, 9201}) == {
        "kafkajs 1.14.0": {"kafkajs#918", "process 200 (kafkajs package.json)"}
    }


def test_a_java_client_from_its_classpath(tmp_path: Path) -> None:
    java = built("kafka-clients-3.9.2")
    cmdline = f"java\0-cp\0{java}/classes:{java}/lib/*\0HealthyProducer\0".encode()
    fake_process(tmp_path, 300, 9300, root="/", cmdline=cmdline)
    releases = ProcessReleases(60.0, clock=lambda: 0.0, proc=tmp_path)
    assert {(s.client, s.version) for s in releases.sightings({9300})} == {
        ("kafka-clients", "3.9.2")
    }
