"""Issue 43's ISR case on Apache Kafka: the cluster's refusal, never a restart verdict.

On the refusal controls' 3-broker lab (`hangwatch_testing.clients.refusals.refusals_lab`,
the default 4.x), topic `isr` has three replicas and `min.insync.replicas` 3; broker 3
is stopped (Kafka's controlled shutdown) and started again
(`hangwatch_testing.clients.unwritable.watch_unwritable`). Covers:

- a plain confluent-kafka producer (no telemetry, acks=all, as a producer pod with a
  declared write interval) next to a real sidecar (stall 5 s): with every broker up the
  sidecar says `healthy` (the control); with broker 3 stopped it says
  `partitions_unwritable` naming the topic, the partitions, the ISR against
  min.insync.replicas and the broker out of the ISR, and never `producer_hung` or
  `metadata_stale` (pod or producer); once the broker is back the producer delivers
  again and the sidecar says `healthy` again;
- `hangwatch probe --topic isr`: with every broker up, `no_replica_to_spare`; with broker
  3 stopped, `partitions_unwritable` with the ISR against min.insync.replicas;
- `hangwatch config-check --topic isr` for the producer's configuration: the same topic
  read from the cluster warns `no-replica-to-spare`, and `partitions-unwritable` with
  broker 3 stopped; a producer with acks=1 is not warned.

Spark's own Kafka sink through the same case (with and without hangwatch's telemetry in
its Java client) is in tests/sidecar/test_spark_sink_refusals.py (the Spark tests' group);
the wrapper in a PySpark task, with the operator and 0 lost once the broker is back, is
the demo's `isr-broker-down` row (tests/demo).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from hangwatch.contracts import ExitCode
from hangwatch_lab import Lab
from hangwatch_testing.clients.refusals import ISR_TOPIC, RESTART_CLASS, refusals_lab
from hangwatch_testing.clients.unwritable import (
    NAMED,
    STOPPED_BROKER,
    acceptance_of,
    said,
    watch_unwritable,
)
from hangwatch_testing.processes import run_hangwatch

pytestmark = pytest.mark.xdist_group("kafka-engine")


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with refusals_lab() as running:
        yield running


@pytest.mark.timeout(420)
def test_a_plain_producer_through_the_isr_case_is_the_clusters_refusal(lab: Lab) -> None:
    watched = watch_unwritable(lab, "confluent-kafka")
    seen = watched.seen["confluent-kafka"]
    print(watched.describe())
    assert seen.verdicts("control") <= {"unknown", "healthy"}, watched.describe()
    assert "partitions_unwritable" in seen.verdicts("fault"), watched.describe()
    assert said(seen, NAMED), watched.describe()
    entry = acceptance_of(seen.fault_status)
    assert entry["unwritable"] == [0, 1, 2] and entry["out_of_isr"] == [STOPPED_BROKER]
    assert entry["min_insync_replicas"] == 3 and entry["source"] == "topic"
    for phase in ("control", "fault", "back"):
        assert not seen.verdicts(phase) & RESTART_CLASS, (phase, watched.describe())
    assert watched.delivered["back"] > watched.delivered["fault"], watched.describe()
    assert seen.changes[-1][2] == "healthy", watched.describe()


def _probe(lab: Lab) -> tuple[int, dict[str, object]]:
    done = run_hangwatch("probe", "-b", lab.bootstrap, "-t", ISR_TOPIC, "--json", timeout=60)
    return done.returncode, json.loads(done.stdout)


def _check(lab: Lab, *settings: str) -> tuple[int, dict[str, object]]:
    done = run_hangwatch(
        "config-check", "--client", "librdkafka", "-X", f"bootstrap.servers={lab.bootstrap}",
        *settings, "--topic", ISR_TOPIC, "--json", timeout=60,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def _codes(document: dict[str, object], key: str) -> list[str]:
    return [str(f["code"]) for f in document[key]]  # type: ignore[attr-defined]


@pytest.mark.timeout(300)
def test_probe_and_config_check_read_the_topics_acceptance(lab: Lab) -> None:
    code, probed = _probe(lab)
    assert "no_replica_to_spare" in _codes(probed, "findings"), probed["findings"]
    assert probed["acceptance"][0]["min_insync_replicas"] == 3  # type: ignore[index]
    code, checked = _check(lab)
    assert code == ExitCode.OK and _codes(checked, "warnings")[-1:] == ["no-replica-to-spare"]
    code, checked = _check(lab, "-X", "acks=1")
    assert "no-replica-to-spare" not in _codes(checked, "warnings")
    try:
        lab.down(STOPPED_BROKER)
        code, probed = _probe(lab)
        assert code == ExitCode.DEGRADED
        refused = [f for f in probed["findings"] if f["code"] == "partitions_unwritable"]  # type: ignore[attr-defined]
        assert refused and all(w in refused[0]["message"] for w in NAMED), probed["findings"]
        code, checked = _check(lab)
        assert "partitions-unwritable" in _codes(checked, "warnings"), checked["warnings"]
        assert checked["topics"][0]["unwritable"] == [0, 1, 2]  # type: ignore[index]
    finally:
        lab.restore(STOPPED_BROKER)
