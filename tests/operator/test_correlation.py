"""Correlation across a policy's pods: outage, node network fault, silent sidecars.

Covers `correlation.correlate` as a pure function: every answering pod cut off is an
outage (verdicts kept, no node blamed); the pods of one node all cut off (at least
`nodeFaultMinPods`, 2 by default) while pods on two other nodes reach the brokers make
that node faulty and those pods `node_network_fault` (reason names brokers and
witnesses); one cut-off pod never blames its node by default (the cordon walk: one pod
per node), unless the policy lowers the minimum to 1; witnesses on one other node are
not enough; a node with one cut-off and one healthy pod is not faulty; cut-off pods on
every node is an outage, not a fault of each node; a single-node policy cannot blame
its node; a silent sidecar has no
verdict, is counted as `sidecar_unreachable`, and neither proves nor disproves a fault;
terminating pods are present but not watched; counts list every verdict; a pod is cut
off by its sidecar's verdict or by its broker list (all brokers failing).
"""

from __future__ import annotations

import pytest

from hangwatch.contracts import Verdict
from hangwatch_operator.correlation import SIDECAR_UNREACHABLE, correlate
from hangwatch_operator.sidecar_status import BrokerReach, PodReport, SidecarReport
from tests.operator.builders import NOW, findings, pod, report
from tests.operator.builders import reports as make_reports

CUT = Verdict.CLUSTER_UNREACHABLE
OK = Verdict.HEALTHY


def test_every_answering_pod_cut_off_is_an_outage_not_a_node_fault() -> None:
    result = findings(
        (pod("e1", node="a"), CUT), (pod("e2", node="b"), CUT), (pod("e3", node="b"), None)
    )
    assert result.outage
    assert result.faulty_nodes == {}
    assert [f.verdict for f in result.pods] == [CUT, CUT, None]


def test_one_node_cut_off_while_another_reaches_kafka_is_a_node_network_fault() -> None:
    result = findings(
        (pod("e1", node="a"), CUT),
        (pod("e2", node="a"), CUT),
        (pod("e3", node="b"), OK),
        (pod("e4", node="b"), Verdict.PRODUCER_HUNG),
        (pod("e5", node="c"), OK),
    )
    assert not result.outage
    assert set(result.faulty_nodes) == {"a"}
    assert "2 pod(s) on node a reach none of kafka-0:9092" in result.faulty_nodes["a"]
    assert "on node(s) b, c reach the cluster" in result.faulty_nodes["a"]
    by_name = {f.pod.name: f for f in result.pods}
    assert by_name["e1"].verdict is Verdict.NODE_NETWORK_FAULT
    assert by_name["e1"].reported is CUT
    assert by_name["e1"].reasons[0] == result.faulty_nodes["a"]
    assert by_name["e4"].verdict is Verdict.PRODUCER_HUNG


def test_a_node_with_one_healthy_pod_is_not_at_fault() -> None:
    result = findings(
        (pod("e1", node="a"), CUT), (pod("e2", node="a"), OK), (pod("e3", node="b"), OK)
    )
    assert result.faulty_nodes == {} and not result.outage
    assert result.with_verdict(CUT)[0].pod.name == "e1"


def test_two_of_four_nodes_cut_off_blames_both_nodes() -> None:
    result = findings(
        *[(pod(f"a{i}", node="a"), CUT) for i in range(2)],
        *[(pod(f"b{i}", node="b"), CUT) for i in range(3)],
        (pod("c1", node="c"), OK),
        (pod("d1", node="d"), OK),
    )
    assert set(result.faulty_nodes) == {"a", "b"}


def test_one_cut_off_pod_never_blames_its_node_by_default() -> None:
    """The cordon walk: one pod per node, one of them cut off, everyone else fine."""
    walk = [(pod(f"e{i}", node=f"n{i}"), CUT if i == 0 else OK) for i in range(10)]
    result = findings(*walk)
    assert result.faulty_nodes == {} and not result.outage
    assert result.with_verdict(CUT)[0].pod.name == "e0"
    lowered = correlate(make_reports(*walk), node_fault_min_pods=1)
    assert set(lowered.faulty_nodes) == {"n0"}, "a policy may lower nodeFaultMinPods to 1"


def test_witnesses_on_one_other_node_are_not_enough() -> None:
    cut = [(pod(f"a{i}", node="a"), CUT) for i in range(3)]
    one_witness_node = findings(*cut, *[(pod(f"b{i}", node="b"), OK) for i in range(5)])
    assert one_witness_node.faulty_nodes == {}
    two = findings(*cut, (pod("b1", node="b"), OK), (pod("c1", node="c"), OK))
    assert set(two.faulty_nodes) == {"a"}


def test_single_node_policy_cannot_blame_its_node() -> None:
    result = findings((pod("e1", node="a"), CUT), (pod("e2", node="a"), CUT))
    assert result.outage and result.faulty_nodes == {}


def test_silent_sidecars_neither_prove_nor_disprove_a_node_fault() -> None:
    result = findings((pod("e1", node="a"), CUT), (pod("e2", node="b"), None))
    assert result.outage  # the only answering pod is cut off; the silent one proves nothing
    silent = correlate([PodReport(pod("e9", node="b"), error="no answer within 2 s")])
    assert not silent.outage
    (finding,) = silent.pods
    assert finding.verdict is None and finding.unobservable and not finding.unhealthy
    assert finding.error == "no answer within 2 s"
    assert silent.counts()[SIDECAR_UNREACHABLE] == 1


def test_terminating_pods_are_present_but_not_watched() -> None:
    leaving = pod("e1", terminating=True)
    result = correlate([PodReport(leaving), PodReport(pod("e2"), report(OK))])
    assert result.present == {"jobs/e1", "jobs/e2"}
    assert [f.pod.name for f in result.watched] == ["e2"]
    assert result.counts()[SIDECAR_UNREACHABLE] == 0


def test_counts_list_every_verdict_and_unknown_is_not_unhealthy() -> None:
    result = findings((pod("e1"), Verdict.UNKNOWN), (pod("e2"), Verdict.PRODUCER_HUNG))
    counts = result.counts()
    assert set(counts) == {str(v) for v in Verdict} | {SIDECAR_UNREACHABLE}
    assert (counts["unknown"], counts["producer_hung"], counts["healthy"]) == (1, 1, 0)
    assert [f.unhealthy for f in result.pods] == [False, True]


@pytest.mark.parametrize(
    ("verdict", "reachabilities", "cut_off"),
    [
        (Verdict.CLUSTER_UNREACHABLE, ("ok",), True),  # the sidecar's verdict wins
        (Verdict.BROKER_DEGRADED, ("timeout", "refused"), True),  # no broker answers
        (Verdict.BROKER_DEGRADED, ("timeout", "ok"), False),
        (Verdict.UNKNOWN, (), False),  # not probed yet: no evidence either way
    ],
)
def test_a_pod_is_cut_off_by_its_verdict_or_its_broker_list(
    verdict: Verdict, reachabilities: tuple[str, ...], cut_off: bool
) -> None:
    brokers = tuple(BrokerReach(f"k{i}:9092", r) for i, r in enumerate(reachabilities))
    status = SidecarReport(verdict, NOW, (), brokers, NOW)
    assert status.cut_off is cut_off
