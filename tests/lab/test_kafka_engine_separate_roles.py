"""The kafka engine with controllers apart from the brokers (`controllers=N`).

One cluster of 2 controller-only KRaft nodes and 3 broker-only nodes serves the module,
started once (5 JVMs: the smallest shape with more than one controller whose shrink
leaves most bootstrap entries dead; S1's own 3 + 5 runs in benchmarks/incidents.py). The
tests run in order; the last shrinks it for good. Covers: the controllers and the brokers
are separate JVMs with their own `process.roles`, the voter list names the controllers
only; the controllers paused (SIGSTOP) and continued in the background; clients see
the 3 brokers only (controllers have no client listener) and produce and consume
through them; a broker stopped leaves the quorum whole (its leader still one
of the controllers, the cluster still served) and comes back; a shrink may remove most
brokers (3 -> 1, 2 bootstrap entries dead), which combined mode refuses, while the
quorum stays whole; bad `controllers` values are usage errors (`--controllers` on the
mock: test_lab_cli.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from hangwatch.errors import LabError, UsageError
from hangwatch_lab import Lab, netfilter
from hangwatch_lab.kafka import CONTROLLER_ID_BASE, KafkaLab, run_state
from hangwatch_lab.lab import BrokerState
from hangwatch_testing.kafka_clients import processes_with, round_trip
from tests.lab.clients import connect_outcome

pytestmark = pytest.mark.xdist_group("kafka-engine")
"""Real clusters take a core each while they start: the kafka-engine modules share one worker."""

CONTROLLERS = (CONTROLLER_ID_BASE + 1, CONTROLLER_ID_BASE + 2)
BROKERS = [1, 2, 3]


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaLab]:
    with Lab(brokers=len(BROKERS), topics={"t": 3}, engine="kafka", controllers=2) as lab:
        assert isinstance(lab, KafkaLab)
        yield lab
        data_dir = lab.data_dir
    assert data_dir is not None and processes_with(str(data_dir)) == []  # every JVM gone
    assert netfilter.available() is not None or netfilter.drop_rule_count(os.getpid()) == 0


def _brokers_listed(lab: KafkaLab, brokers: list[int]) -> list[int]:
    bootstrap = ",".join(lab.brokers[b].address for b in brokers)
    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10)
    return sorted(md.brokers)


def _setting(pid: int, key: str) -> str:
    """`key` in the config a node's JVM was started with (its last argument)."""
    config = Path(Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")[-1].decode())
    found = re.search(rf"^{re.escape(key)}=(.*)$", config.read_text(), re.MULTILINE)
    assert found, (config, key)
    return found.group(1)


def test_controllers_and_brokers_are_separate_jvms_and_clients_see_the_brokers(
    cluster: KafkaLab,
) -> None:
    controllers, brokers = cluster.controller_pids(), cluster.broker_pids()
    assert sorted(controllers) == list(CONTROLLERS)
    assert sorted(brokers) == BROKERS
    assert cluster.data_dir is not None
    jvms = processes_with(str(cluster.data_dir))
    assert sorted(jvms) == sorted([*controllers.values(), *brokers.values()])
    assert len(set(jvms)) == len(CONTROLLERS) + len(BROKERS)
    assert {_setting(pid, "process.roles") for pid in controllers.values()} == {"controller"}
    assert {_setting(pid, "process.roles") for pid in brokers.values()} == {"broker"}
    voters = {_setting(pid, "controller.quorum.voters") for pid in jvms}
    assert len(voters) == 1  # every node has the same list: the controllers', each once
    assert sorted(int(v.split("@")[0]) for v in voters.pop().split(",")) == list(CONTROLLERS)
    assert _brokers_listed(cluster, [1]) == BROKERS  # no controller among them
    assert cluster.active_controller() in CONTROLLERS
    assert len(round_trip(cluster.bootstrap, "t", 10)) == 10
    assert "3 brokers, 2 controllers" in cluster.status().description


def test_a_broker_stopped_leaves_the_quorum_whole(cluster: KafkaLab) -> None:
    leader = cluster.active_controller()
    pid = cluster.broker_pids()[1]
    cluster.down(1)
    assert run_state(pid) == "gone"
    assert cluster.alive()  # the controllers and the other brokers run on
    assert cluster.active_controller() in CONTROLLERS
    assert len(round_trip(cluster.brokers[2].address, "t", 5)) == 5
    assert cluster.controller_pids()[leader] > 0
    cluster.restore(1)
    assert 1 in _brokers_listed(cluster, [2])
    assert len(round_trip(cluster.bootstrap, "t", 5)) == 5


def test_the_controllers_paused_and_continued_in_the_background(cluster: KafkaLab) -> None:
    """The field corpus's librdkafka trigger (a KRaft controller's long pause): every
    controller-only JVM stopped at once, the brokers untouched and still serving, the
    controllers continued after the pause on their own, the pause recorded."""
    pids = cluster.controller_pids()
    brokers = cluster.broker_pids()
    cluster.pause_controllers(3.0)
    try:
        assert {run_state(pid) for pid in pids.values()} == {"T"}
        assert "T" not in {run_state(pid) for pid in brokers.values()}
        with pytest.raises(LabError, match="already paused"):
            cluster.pause_controllers(1.0)
    finally:
        cluster.restore()  # waits for the pause to end, on every path
    assert cluster.elections_under_way() == []
    assert "T" not in {run_state(pid) for pid in pids.values()}
    (result,) = [r for r in cluster.election_results if r.get("fault") == "controller-pause"]
    assert result["fault_seconds"] >= 3.0, result
    assert cluster.active_controller() in CONTROLLERS
    assert len(round_trip(cluster.bootstrap, "t", 5)) == 5


def test_a_shrink_may_leave_most_bootstrap_entries_dead(
    cluster: KafkaLab, kernel_faults: None
) -> None:
    """Runs last: brokers 2 and 3 never come back."""
    removed = [cluster.brokers[b] for b in (2, 3)]
    cluster.shrink(1)
    assert _brokers_listed(cluster, [1]) == [1]
    for state in removed:
        assert state.address in cluster.bootstrap.split(",")
        assert connect_outcome(state.port, timeout_seconds=1.0) == "timeout"
        assert cluster.status().brokers[state.id - 1]["condition"] == "removed+blackhole"
    assert cluster.active_controller() in CONTROLLERS
    assert sorted(cluster.controller_pids()) == list(CONTROLLERS)
    assert cluster.alive()
    assert len(round_trip(cluster.bootstrap, "t", 5)) == 5


def test_combined_mode_still_keeps_a_majority_of_brokers() -> None:
    """Checked before any work, so a lab never started shows it."""
    lab = KafkaLab(brokers=5, topics={"t": 3})
    lab.brokers = {i: BrokerState(id=i, host="127.0.0.1", port=9000 + i) for i in range(1, 6)}
    with pytest.raises(UsageError, match="without a majority"):
        lab.shrink(2)


@pytest.mark.parametrize("count", [-1, 6])
def test_a_bad_controller_count_is_a_usage_error(count: int) -> None:
    with pytest.raises(UsageError, match="--controllers must be between 0"):
        KafkaLab(brokers=3, topics={}, controllers=count)
