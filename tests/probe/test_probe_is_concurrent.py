"""A probe costs about the largest timeout, never the sum (the S1 lesson).

Shown by order, not by wall-clock bounds (`benchmarks/probe.py` measures the times):
each endpoint's probe records when it started and ended (`EndpointProbe.span`), and
probes that overlap ran at the same time.

Covers:
- two blackholed brokers and one wedged broker in the bootstrap list: the three probes
  overlap, so the whole run is shorter than their sum;
- a long dead bootstrap list (blackholed and closed ports): every probe started before
  the blackholed one ended, so the dead entries wait for nothing;
- advertised brokers missing from the bootstrap list are probed once metadata arrives,
  also in parallel: two blackholed ones overlap (one connect timeout, not two).
"""

from __future__ import annotations

from collections.abc import Iterable

from hangwatch.contracts import Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.endpoints import probe_cluster
from hangwatch_sidecar.probe.report import assess
from hangwatch_sidecar.probe.settings import parse_bootstrap
from hangwatch_sidecar.probe.types import EndpointProbe

from .helpers import FAST, broker_endpoint, probe_lab, refused_port, row


def _span(probe: EndpointProbe) -> tuple[float, float]:
    assert probe.span is not None, probe
    return probe.span


def _overlap(probes: Iterable[EndpointProbe]) -> bool:
    """Every probe started before any of them ended: they all ran at the same time."""
    spans = [_span(p) for p in probes]
    return max(start for start, _ in spans) < min(end for _, end in spans)


def test_faulty_brokers_cost_the_largest_timeout_not_the_sum(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(1)
    lab.blackhole(2)
    lab.unresponsive(3)

    result, assessment = probe_lab(lab)

    assert {r.reachability for r in assessment.rows} == {
        Reachability.TIMEOUT,
        Reachability.UNRESPONSIVE,
    }
    assert _overlap(result.endpoints), [p.span for p in result.endpoints]
    each = sum(end - start for start, end in map(_span, result.endpoints))
    assert result.elapsed_ms / 1000 < each


def test_long_dead_bootstrap_list_does_not_delay(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(2)
    dead = ",".join(f"127.0.0.1:{refused_port()}" for _ in range(6))

    result, assessment = probe_lab(lab, extra=dead)

    assert len(result.endpoints) == 9
    assert sum(r.ok for r in assessment.rows) == 2
    blackholed = row(assessment, broker_endpoint(lab, 2)).probe
    assert blackholed.reachability is Reachability.TIMEOUT
    _, dead_ended = _span(blackholed)
    assert max(start for start, _ in map(_span, result.endpoints)) < dead_ended


def test_advertised_brokers_are_probed_after_metadata(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(2)
    lab.blackhole(3)

    result = probe_cluster(parse_bootstrap(str(broker_endpoint(lab, 1))), (), FAST)
    assessment = assess(result)

    assert [p.endpoint for p in result.endpoints] == [broker_endpoint(lab, b) for b in (1, 2, 3)]
    assert row(assessment, broker_endpoint(lab, 1)).reachability is Reachability.OK
    late = [row(assessment, broker_endpoint(lab, b)) for b in (2, 3)]
    for broker, found in zip((2, 3), late, strict=True):
        assert (found.in_bootstrap, found.advertised, found.broker_id) == (False, True, broker)
        assert found.reachability is Reachability.TIMEOUT
    assert _overlap(r.probe for r in late), [r.probe.span for r in late]
