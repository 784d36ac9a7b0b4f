"""A probe costs about the largest timeout, never the sum (the S1 lesson).

Covers:
- two blackholed brokers and one wedged broker in the bootstrap list: the whole run ends
  within about max(connect, request) timeout, not their sum;
- a long dead bootstrap list (blackholed and closed ports) does not delay the answer;
- advertised brokers missing from the bootstrap list are probed once metadata arrives,
  also in parallel: a blackholed one costs one connect timeout on top of nothing.
"""

from __future__ import annotations

from hangwatch.contracts import Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_cluster
from hangwatch_sidecar.probe.report import assess
from hangwatch_sidecar.probe.settings import parse_bootstrap

from .helpers import (
    CONNECT_MS,
    FAST,
    REQUEST_MS,
    broker_endpoint,
    probe_lab,
    refused_port,
    row,
)

SLACK = 1.3
"""Allowed overhead over the largest timeout (thread start, client setup, loaded CI)."""


def test_faulty_brokers_cost_the_largest_timeout_not_the_sum(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(1)
    lab.blackhole(2)
    lab.unresponsive(3)

    result, assessment = probe_lab(lab)

    assert {r.reachability for r in assessment.rows} == {
        Reachability.TIMEOUT,
        Reachability.UNRESPONSIVE,
    }
    assert result.elapsed_ms < max(CONNECT_MS, REQUEST_MS) * SLACK
    assert result.elapsed_ms < (2 * CONNECT_MS + REQUEST_MS) / 2


def test_long_dead_bootstrap_list_does_not_delay(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(2)
    dead = ",".join(f"127.0.0.1:{refused_port()}" for _ in range(6))

    result, assessment = probe_lab(lab, extra=dead)

    assert len(result.endpoints) == 9
    assert sum(r.ok for r in assessment.rows) == 2
    assert result.elapsed_ms < CONNECT_MS * SLACK


def test_advertised_brokers_are_probed_after_metadata(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(3)

    result = probe_cluster(parse_bootstrap(str(broker_endpoint(lab, 1))), (), FAST)
    assessment = assess(result)

    assert [p.endpoint for p in result.endpoints] == [broker_endpoint(lab, b) for b in (1, 2, 3)]
    late = row(assessment, broker_endpoint(lab, 3))
    assert (late.in_bootstrap, late.advertised, late.broker_id) == (False, True, 3)
    assert late.reachability is Reachability.TIMEOUT
    assert row(assessment, broker_endpoint(lab, 2)).reachability is Reachability.OK
    assert result.elapsed_ms < CONNECT_MS * SLACK
