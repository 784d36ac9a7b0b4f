"""The lab's Kafka versions: the current 4.x by default, 3.9 on request for old clients.

Covers: the version is a 4.x.y or 3.9.z release, anything else is refused in one line
(exit 3, before anything starts; property-based over arbitrary text); the mock refuses
the kafka engine's options; `hangwatch lab up --engine kafka --kafka-version 3.9.2` runs
that release and says so, and a lab without a version runs the default 4.x. Why 3.9 is
kept: the 0.8.2 producer's request (Produce v0 with a v0 message, the incidents' S3
client) is written by 3.9 and refused by 4.x (the broker closes the connection and logs
UnsupportedVersionException: Kafka 4.0 removed Produce v0-v2, KIP-896, though it still
lists v0 in its ApiVersions answer for librdkafka's sake), and 4.x no longer serves
Fetch before v4 - the floor the sidecar's probe reads to know that no write to such a
broker is smaller than a record batch (`sockets.classify.min_write_bytes`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hangwatch.errors import UsageError
from hangwatch_lab import Lab, kafkajars
from hangwatch_sidecar.probe.endpoints import probe_endpoint
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.sockets.classify import MIN_WRITE_BYTES, MIN_WRITE_BYTES_V3, min_write_bytes
from hangwatch_testing.kafka_clients import api_version_ranges, produce_v0
from hangwatch_testing.processes import run_hangwatch
from tests.lab.clients import lab_cli, lab_command

pytestmark = pytest.mark.xdist_group("kafka-engine")


def _smallest_write(port: int) -> int:
    """The smallest write the sidecar's socket view expects the broker on `port` to take,
    from the Fetch floor its probe reads (`sockets.classify.min_write_bytes`)."""
    probe = probe_endpoint(Endpoint("127.0.0.1", port), ProbeSettings())
    assert probe.ok, probe
    return min_write_bytes([probe.fetch_min_version])


def test_the_default_is_a_4x_release_and_the_kept_one_a_39_release() -> None:
    assert kafkajars.line_of(kafkajars.default_version()) == "4"
    assert kafkajars.legacy_version().startswith("3.9.")
    assert kafkajars.line_of("4.0.0") == "4"
    assert kafkajars.line_of("3.9.1") == "3"


@given(st.text(max_size=20))
def test_anything_but_a_4x_or_39_release_is_one_usage_error(text: str) -> None:
    parts = text.split(".")
    valid = (
        len(parts) == 3
        and all(p.isascii() and p.isdigit() for p in parts)
        and (parts[0] == "4" or parts[:2] == ["3", "9"])
    )
    if valid:
        assert kafkajars.line_of(text) == parts[0]
    else:
        with pytest.raises(
            UsageError, match=r"--kafka-version must be a 4\.x\.y or 3\.9\.z"
        ) as err:
            kafkajars.line_of(text)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--engine", "kafka", "--kafka-version", "3.8.1"), "--kafka-version must be"),
        (("--engine", "kafka", "--kafka-version", "4.4"), "--kafka-version must be"),
        (("--engine", "mock", "--kafka-version", "4.4.0"), "applies to --engine kafka only"),
        (("--engine", "mock", "--no-auto-create-topics"), "applies to --engine kafka only"),
    ],
)
def test_the_cli_refuses_a_bad_version_in_one_line_exit_3(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = run_hangwatch("lab", "--state", str(tmp_path / "s"), "up", *args, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "s").exists()


def test_the_mock_refuses_the_kafka_engines_options() -> None:
    with pytest.raises(UsageError, match="kafka_version: the kafka engine's options"):
        Lab(engine="mock", kafka_version="4.4.0")


def test_39_writes_the_old_producers_request_and_4x_refuses_it(tmp_path: Path) -> None:
    legacy, default = kafkajars.legacy_version(), kafkajars.default_version()
    state = tmp_path / "lab.json"
    with lab_cli(
        state, "--engine", "kafka", "--kafka-version", legacy, "--brokers", "1", "--topics", "old:1"
    ) as (_, bootstrap):
        status = json.loads(lab_command(state, "status", "--json").stdout)
        assert status["description"] == f"Apache Kafka {legacy} (KRaft, 1 nodes)"
        port = int(bootstrap.rsplit(":", 1)[1])
        assert produce_v0(port, "old") == 0
        assert api_version_ranges(port)[1][0] == 0  # Fetch v0 served
        # the sidecar's probe reads that floor: a write to it may be as small as Produce v0's
        assert _smallest_write(port) == MIN_WRITE_BYTES
    with Lab(brokers=1, topics={"old": 1}, engine="kafka") as lab:
        assert lab.engine_description == f"Apache Kafka {default} (KRaft, 1 nodes)"
        port = lab.brokers[1].port
        assert produce_v0(port, "old") == "closed"
        assert api_version_ranges(port)[1][0] >= 4  # Fetch before v4 gone
        assert _smallest_write(port) == MIN_WRITE_BYTES_V3  # no write below a record batch
        assert lab.data_dir is not None
        log = (lab.data_dir / "node1" / "server.log").read_text(errors="replace")
        assert "key 0 (Produce) and unsupported version 0" in log
