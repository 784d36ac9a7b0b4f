"""What the cluster metadata reveals: dead bootstrap entries, elections, missing topics.

Covers:
- a bootstrap entry that the cluster does not advertise and that does not answer (S1:
  a shrunk cluster) is a `dead_bootstrap_entry` warning, the run is degraded;
- a healthy cluster probed through one bootstrap entry: all advertised brokers are
  probed and the run is healthy (exit 0) with broker ids, leaders and ISR reported;
- during a leader election (topic error LEADER_NOT_AVAILABLE, S2) the topic's partitions
  are `leaderless_partitions`; once the election is over the same probe is healthy;
- a requested topic that does not exist is `topic_missing`, and probing it does not
  create it (allow.auto.create.topics is off for the probe's client);
- a stopped broker disappears from the advertised list: its bootstrap entry is reported
  as dead and the partitions it still leads as `leader_unreachable`.
"""

from __future__ import annotations

import time

from hangwatch.contracts import ExitCode, Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_cluster
from hangwatch_sidecar.probe.report import Health, assess
from hangwatch_sidecar.probe.settings import Endpoint, parse_bootstrap

from .helpers import FAST, broker_endpoint, codes, probe_lab, refused_port, row


def test_dead_bootstrap_entry_not_advertised(lab: Lab) -> None:
    port = refused_port()

    _, assessment = probe_lab(lab, extra=f"127.0.0.1:{port}")

    dead = row(assessment, Endpoint("127.0.0.1", port))
    assert (dead.in_bootstrap, dead.advertised, dead.broker_id) == (True, False, None)
    assert dead.reachability is Reachability.REFUSED
    assert assessment.health is Health.DEGRADED
    (finding,) = assessment.findings
    assert finding.code == "dead_bootstrap_entry"
    assert finding.subject == f"127.0.0.1:{port}"


def test_healthy_cluster_through_one_bootstrap_entry(lab: Lab) -> None:
    result = probe_cluster(parse_bootstrap(str(broker_endpoint(lab, 2))), ("t",), FAST)
    assessment = assess(result)

    assert assessment.health is Health.HEALTHY
    assert assessment.exit_code == ExitCode.OK
    assert assessment.findings == ()
    assert sorted(r.broker_id or 0 for r in assessment.rows) == [1, 2, 3]
    metadata = result.metadata.metadata
    assert metadata is not None
    assert [b.id for b in metadata.brokers] == [1, 2, 3]
    (topic,) = metadata.topics
    assert topic.name == "t"
    assert [p.partition for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader in (1, 2, 3) and p.isr == p.replicas for p in topic.partitions)
    assert sum(r.leader_of for r in assessment.rows) == 3


def test_election_makes_partitions_leaderless_until_it_ends(lab: Lab) -> None:
    lab.election("t", 1.0)

    _, during = probe_lab(lab, topics=("t",))

    assert during.health is Health.DEGRADED
    (finding,) = during.findings
    assert finding.code == "leaderless_partitions"
    assert "partitions 0, 1, 2" in finding.message
    assert "LEADER_NOT_AVAILABLE" in finding.message

    deadline = time.monotonic() + 10
    after = during
    while after.findings and time.monotonic() < deadline:
        _, after = probe_lab(lab, topics=("t",))
    assert after.health is Health.HEALTHY


def test_missing_topic_is_reported_and_not_created(lab: Lab) -> None:
    _, assessment = probe_lab(lab, topics=("t", "no-such-topic"))

    assert codes(assessment) == {"topic_missing"}
    assert assessment.findings[0].subject == "no-such-topic"
    result, _ = probe_lab(lab)
    assert result.metadata.metadata is not None
    assert [t.name for t in result.metadata.metadata.topics] == ["t"]


def test_stopped_broker_is_a_dead_bootstrap_entry(lab: Lab) -> None:
    for partition, leader in enumerate((3, 1, 3)):
        lab.move_leader("t", partition, leader)
    lab.down(3)

    _, assessment = probe_lab(lab)

    stopped = row(assessment, broker_endpoint(lab, 3))
    assert stopped.reachability is Reachability.REFUSED
    assert (stopped.broker_id, stopped.advertised) == (None, False)
    assert codes(assessment) == {"dead_bootstrap_entry", "leader_unreachable"}
    (stalled,) = [f for f in assessment.findings if f.code == "leader_unreachable"]
    assert "partitions 0, 2 led by broker 3, which the cluster does not advertise" in (
        stalled.message
    )
    assert assessment.health is Health.DEGRADED
