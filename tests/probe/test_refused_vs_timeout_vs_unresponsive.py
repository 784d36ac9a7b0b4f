"""The probe tells a closed port, a dead host, a wedged broker and a bad name apart.

Covers, in one run against the real lab:
- a stopped broker (port closed) is `refused`, answered before the blackholed broker's
  connect timeout ran out (it waited for no timeout);
- a blackholed broker is `timeout` after the connect timeout (S3: a closed port answers
  at once, a dead IP costs the full timeout);
- a broker that accepts TCP but never answers Kafka requests is `unresponsive` after the
  request timeout, with its connect latency measured;
- an unresolvable host is a `dns_error` result, not an exception;
- a hostname alias of a broker (localhost) is probed through DNS and matched to the
  advertised broker, so it is not reported as a foreign bootstrap entry.
"""

from __future__ import annotations

from hangwatch.contracts import Reachability
from hangwatch_lab import Lab
from hangwatch_sidecar.probe.settings import Endpoint

from .helpers import CONNECT_MS, REQUEST_MS, broker_endpoint, codes, probe_lab, row


def test_each_fault_has_its_own_class(lab: Lab, kernel_faults: None) -> None:
    lab.down(1)
    lab.blackhole(2)
    lab.unresponsive(3)

    _, assessment = probe_lab(lab)

    refused = row(assessment, broker_endpoint(lab, 1))
    timeout = row(assessment, broker_endpoint(lab, 2))
    wedged = row(assessment, broker_endpoint(lab, 3))
    assert refused.reachability is Reachability.REFUSED
    assert timeout.reachability is Reachability.TIMEOUT
    assert timeout.probe.connect_ms is not None and timeout.probe.connect_ms >= CONNECT_MS * 0.9
    # the refused and the wedged broker's TCP answers came while the blackholed broker's
    # connect was still waiting (the three probes run at the same time)
    assert refused.probe.span is not None and timeout.probe.span is not None
    assert refused.probe.span[1] < timeout.probe.span[1]
    assert (
        refused.probe.connect_ms is not None and refused.probe.connect_ms < timeout.probe.connect_ms
    )
    assert wedged.reachability is Reachability.UNRESPONSIVE
    assert (
        wedged.probe.connect_ms is not None and wedged.probe.connect_ms < timeout.probe.connect_ms
    )
    assert wedged.probe.api_versions_ms is not None
    assert wedged.probe.api_versions_ms >= REQUEST_MS * 0.9
    assert "no Kafka answer" in wedged.detail


def test_unresolvable_host_is_a_dns_error_result(lab: Lab) -> None:
    _, assessment = probe_lab(lab, extra="broker-0.hangwatch.invalid:9092")

    bad = row(assessment, Endpoint("broker-0.hangwatch.invalid", 9092))
    assert bad.reachability is Reachability.DNS_ERROR
    assert bad.probe.connect_ms is None
    assert "dead_bootstrap_entry" in codes(assessment)


def test_hostname_alias_of_a_broker_counts_as_advertised(lab: Lab) -> None:
    port = lab.brokers[1].port
    _, assessment = probe_lab(lab, extra=f"localhost:{port}")

    alias = row(assessment, Endpoint("localhost", port))
    assert alias.reachability is Reachability.OK
    assert "127.0.0.1" in alias.probe.addresses
    assert (alias.broker_id, alias.advertised) == (1, True)
    assert codes(assessment) == set()
