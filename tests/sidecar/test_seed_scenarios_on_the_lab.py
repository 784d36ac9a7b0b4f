"""Every seed incident, replayed on the real lab, reaches its verdict after the fault.

Each scenario runs a real producer process (the hangwatch wrapper) against the lab, on
the engine the scenario's demo row uses (Apache Kafka for S0, S3 and the S2 control;
librdkafka's mock for the protocol faults of S1 and S2 and for S4, whose fault is in the
producer), the sidecar's own evaluation loop on its normal cadence, and injects the
fault once the sidecar reports the baseline. Covered (timing: 1 s probe
interval, 1 s connect timeout, stall 5 s, heartbeat 4 s; each fault is watched for
twice its bound in `hangwatch_demo.scenarios` + 10 s, and the detection times next to
those bounds are measured by `benchmarks/detection.py`, not asserted here):

- S0 all brokers blackholed mid-stream -> cluster_unreachable (bound: 2 intervals +
  connect timeout);
- S1 every write refused as not-leader while the cluster is healthy, with dead
  bootstrap entries -> metadata_stale (baseline broker_degraded names the dead entries);
- S2 a 1.5 s election after which the producer's batches are never answered ->
  producer_hung (bound: stall + 1 interval after its last delivery);
- S2 control: a 1.5 s election the producer recovers from -> never producer_hung;
- S3 one broker blackholed, one refusing -> broker_degraded naming `timeout` and
  `refused`, the refusing broker by its node id although it left the metadata;
- S4 user code blocks the producer's poll thread -> heartbeat stops ->
  producer_hung (bound: heartbeat + 1 interval);
- control: a healthy producer under load for `SOAK_SECONDS` (4.5 minutes: 54 stall
  periods, 270 probe rounds) -> only healthy.
"""

from __future__ import annotations

import dataclasses

import pytest

from hangwatch.contracts import Verdict
from hangwatch_demo.harness import run_scenario
from hangwatch_demo.scenarios import SCENARIOS

FAULTS = [
    "s0-blackholed-cluster",
    "s1-stale-metadata",
    "s2-stuck-after-election",
    "s3-one-dead-host",
    "s4-blocked-io-thread",
]


@pytest.mark.parametrize("name", FAULTS)
def test_fault_reaches_its_verdict(name: str, kernel_faults: None) -> None:
    scenario = SCENARIOS[name]
    result = run_scenario(scenario)
    assert result.verdict is scenario.expect, (result.changes, result.reasons)
    assert result.detected_seconds is not None
    assert result.ok


def test_s3_names_the_blackholed_and_the_refused_broker(kernel_faults: None) -> None:
    result = run_scenario(SCENARIOS["s3-one-dead-host"])
    text = " ".join(result.reasons)
    assert "is timeout" in text and "is refused" in text, result.reasons
    # the refusing broker dropped out of the metadata, as a down Kafka broker does,
    # but it is still named as the broker it was
    assert "(node 2, gone from the cluster's metadata) is refused" in text, result.reasons
    assert "bootstrap entry" not in text, result.reasons


def test_s2_control_a_real_election_never_becomes_a_restart_verdict() -> None:
    # Apache Kafka. Before the election grace counted from the disagreement itself, the
    # sidecar called this recovery metadata_stale in 3 of 6 runs by hand (the producer had
    # last refreshed its metadata 6-9 s before the leaders moved); after, 0 of 8
    # (tests/sidecar/test_verdict_precedence.py has the rule, this the real election).
    result = run_scenario(SCENARIOS["s2-election-recovers"])
    seen = {verdict for _, verdict in result.changes}
    assert "producer_hung" not in seen and "metadata_stale" not in seen, result.changes
    assert result.verdict is Verdict.HEALTHY
    assert result.ok


SOAK_SECONDS = 270.0
"""The soak's watch at the scenarios' timing (`hangwatch_demo.scenarios.Timing`): 270 probe
rounds, 54 stall periods and 54 of the sidecar's metadata refreshes, under load; short
enough that the test, with its lab's start, stays under the suite's five minutes per
test on a loaded machine (a 300 s watch took 5 min 04 s in the cold run of 2026-12-02)."""


@pytest.mark.timeout(420)
def test_healthy_producer_under_load_through_the_soak_is_only_healthy() -> None:
    soak = dataclasses.replace(SCENARIOS["healthy"], bound=lambda _t: SOAK_SECONDS)
    result = run_scenario(soak)
    assert result.changes == [], f"verdict left healthy: {result.changes} {result.reasons}"
    assert result.verdict is Verdict.HEALTHY and result.ok
