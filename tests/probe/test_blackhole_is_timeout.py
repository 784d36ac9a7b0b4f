"""A blackholed broker (kernel DROP, a dead host: S0/S3) is a `timeout`, not a hang.

Covers:
- the blackholed broker is classified `timeout` after about the connect timeout, while
  the other brokers answer `ok`; the run is `degraded` (exit 1);
- partitions it leads are reported as `leader_unreachable` (writes to them stall);
- every broker blackholed: `unavailable` (exit 2), `cluster_unreachable` first, and the
  metadata fetch returns a `timeout` failure instead of hanging (how long it takes is
  measured by `benchmarks/probe.py`).
"""

from __future__ import annotations

from hangwatch.contracts import ExitCode, Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.report import Health, Severity

from .helpers import CONNECT_MS, broker_endpoint, codes, probe_lab, row


def test_blackholed_broker_times_out_others_answer(lab: Lab, kernel_faults: None) -> None:
    for partition, leader in enumerate((2, 1, 3)):
        lab.move_leader("t", partition, leader)
    lab.blackhole(2)

    result, assessment = probe_lab(lab, topics=("t",))

    dead = row(assessment, broker_endpoint(lab, 2))
    assert dead.reachability is Reachability.TIMEOUT
    assert dead.broker_id == 2
    assert dead.probe.connect_ms is not None
    assert dead.probe.connect_ms >= CONNECT_MS * 0.9  # it waited for the connect timeout
    assert dead.probe.api_versions_ms is None
    for broker in (1, 3):
        assert row(assessment, broker_endpoint(lab, broker)).reachability is Reachability.OK
    assert assessment.health is Health.DEGRADED
    assert assessment.exit_code == ExitCode.DEGRADED
    assert {"broker_unreachable", "leader_unreachable"} <= codes(assessment)
    stalled = [f for f in assessment.findings if f.code == "leader_unreachable"]
    assert stalled[0].message.startswith("topic t: partition 0 led by broker 2, which")
    assert result.metadata.metadata is not None


def test_every_broker_blackholed_is_unavailable(lab: Lab, kernel_faults: None) -> None:
    for broker in lab.brokers:
        lab.blackhole(broker)

    result, assessment = probe_lab(lab)

    assert {r.reachability for r in assessment.rows} == {Reachability.TIMEOUT}
    assert assessment.health is Health.UNAVAILABLE
    assert assessment.exit_code == ExitCode.UNAVAILABLE
    first = assessment.findings[0]
    assert (first.severity, first.code) == (Severity.CRITICAL, "cluster_unreachable")
    assert result.metadata.metadata is None
    assert result.metadata.failure is Reachability.TIMEOUT
    assert "metadata_failed" in codes(assessment)
