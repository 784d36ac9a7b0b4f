"""The cluster refusing writes to a topic is said once per topic, never acted on a pod.

Pure (`sidecar_status`, `correlation`, `decisions`, `reporting`, `rounds`): one broker's
maintenance under `min.insync.replicas` refuses every executor of every job writing the
topic at once, and each pod's sidecar says `partitions_unwritable`. Covers:

- the topics a pod names come from its latest assessment's evidence, else from
  `cluster.acceptance` (evidence cut for size); odd evidence (not a list, entries that
  are not objects, names that are no topic, partitions that are no ids) is skipped, and
  any JSON at all gives topic names, partition ids and text or nothing (hypothesis);
- the pods are grouped by topic (a pod naming two topics counts in both; pods naming
  none are grouped under ""; at most `MAX_TOPICS` topics, the rest under
  `MORE_TOPICS`);
- one `alert` per topic, naming its pods and the first pod's reason, never one per pod,
  never a restart or a decommission, whatever other pods do; a policy that does not
  alert for it says nothing; an unchanged topic is not reported again until the repeat;
- the Event is about the policy; `status.recentActions` names the topic and
  `status.unwritableTopics` lists each topic once, with its pods and since when.
"""

from __future__ import annotations

import dataclasses

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_operator.correlation import MAX_TOPICS, MORE_TOPICS, correlate
from hangwatch_operator.decisions import decide
from hangwatch_operator.history import History, record_from_entry
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.reporting import build_status, involved_object, record_entry
from hangwatch_operator.rounds import plan_round, settle_round
from hangwatch_operator.sidecar_status import (
    MAX_TOPIC_CHARS,
    MAX_UNWRITABLE_TOPICS,
    PodReport,
    UnwritableTopic,
    parse_status,
    unwritable_topics,
)

from .builders import NOW, pod, policy, report

U = Verdict.PARTITIONS_UNWRITABLE
REASON = (
    "topic orders: partitions 0, 1, 2 refuse acks=all writes: ISR 2 of 3 replicas, below "
    "min.insync.replicas 3 (the topic's own); out of the ISR: broker 3"
)


def status_doc(
    evidence: object = None, acceptance: list[dict[str, object]] | None = None
) -> dict[str, object]:
    latest = {"verdict": "partitions_unwritable", "reasons": [REASON], "evidence": {}}
    if evidence is not None:
        latest["evidence"] = {status.UNWRITABLE_TOPICS: evidence}
    return {
        "schema": 1,
        "verdict": "partitions_unwritable",
        "since": NOW - 120,
        "reasons": [REASON],
        "latest": latest,
        "cluster": {"acceptance": acceptance or []},
        "sidecar": {"evaluated_ts": NOW - 1},
    }


def named(*topics: str) -> list[dict[str, object]]:
    return [
        {"topic": t, "partitions": [0, 1, 2], "reason": REASON.replace("orders", t)} for t in topics
    ]


def unwritable_report(name: str, *topics: str, node: str = "node-a") -> PodReport:
    parsed = parse_status(status_doc(named(*topics)), now=NOW, stale_after_seconds=60)
    return PodReport(pod(name, node=node), parsed)


def test_the_topics_come_from_the_evidence_else_the_acceptance_odd_entries_skipped() -> None:
    parsed = parse_status(status_doc(named("orders", "audit")), now=NOW, stale_after_seconds=60)
    assert [t.topic for t in parsed.unwritable] == ["orders", "audit"]
    assert parsed.unwritable[0].partitions == (0, 1, 2)
    odd = [
        "orders", {"topic": ""}, {"topic": "x" * 250}, {"topic": 3},
        {"topic": "ok", "partitions": [1, -1, True, "2", 2.0, 4], "reason": 7},
    ]  # fmt: skip
    assert unwritable_topics(msgspec.convert(status_doc(odd), status.StatusDocument)) == (
        UnwritableTopic("ok", (1, 4), ""),
    )
    cut = status_doc(None, [{"topic": "orders", "unwritable": [0, 2], "reason": REASON},
                            {"topic": "fine"}, {"topic": "shrunk", "in_doubt": [1]}])  # fmt: skip
    found = unwritable_topics(msgspec.convert(cut, status.StatusDocument))
    assert [(t.topic, t.partitions) for t in found] == [("orders", (0, 2)), ("shrunk", (1,))]


def test_pods_are_grouped_by_topic_and_those_naming_none_together() -> None:
    found = correlate(
        [
            unwritable_report("exec-1", "orders"),
            unwritable_report("exec-2", "orders", "audit"),
            PodReport(pod("exec-3"), report(U)),  # its sidecar names no topic
            PodReport(pod("exec-4"), report(Verdict.HEALTHY)),
        ]
    )
    assert sorted(found.unwritable) == ["", "audit", "orders"]
    assert [p.pod.name for p in found.unwritable["orders"].pods] == ["exec-1", "exec-2"]
    assert found.unwritable["orders"].reason == REASON
    assert found.unwritable["orders"].since == NOW - 120
    assert found.unwritable[""].reason == "sidecar says partitions_unwritable"


def test_more_topics_than_the_bound_are_grouped_together() -> None:
    many = [f"t{i:03}" for i in range(MAX_TOPICS + 5)]
    found = correlate(
        [unwritable_report("exec-1", *many[:30]), unwritable_report("exec-2", *many[30:])]
    )
    assert len(found.unwritable) == MAX_TOPICS + 1 and MORE_TOPICS in found.unwritable


def test_one_alert_per_topic_never_a_pod_action() -> None:
    reports = [unwritable_report(f"exec-{i}", "orders", node=f"node-{i}") for i in range(6)]
    reports.append(PodReport(pod("exec-9"), report(Verdict.PRODUCER_HUNG)))
    decisions = decide(correlate(reports), policy(), History(), NOW)
    topics = [d for d in decisions if d.verdict is U]
    assert [(d.operation, d.outcome, d.topic, d.pod) for d in topics] == [
        (Operation.ALERT, Outcome.ACTED, "orders", None)
    ]
    assert topics[0].reasons == (REASON, "6 pod(s) write it (exec-0, exec-1, exec-2 and 3 more)")
    assert topics[0].target == "topic/orders"
    others = [d for d in decisions if d.verdict is not U]
    assert {d.pod.name for d in others if d.pod is not None} == {"exec-9"}


def test_a_policy_that_does_not_alert_for_it_says_nothing() -> None:
    quiet = policy(actions={"partitionsUnwritable": []})
    assert decide(correlate([unwritable_report("exec-1", "orders")]), quiet, History(), NOW) == []


def test_the_event_is_the_policys_and_the_status_lists_each_topic_once() -> None:
    writers = policy()
    reports = [unwritable_report(f"exec-{i}", "orders") for i in range(3)]
    plan = plan_round(reports, writers, History(), NOW, policy_key="jobs/writers")
    settled = settle_round(plan, [])
    assert len(settled.events) == 1
    event = settled.events[0]
    assert event.involved["kind"] == "ProducerHealthPolicy" and event.reason == "HangwatchAlert"
    assert "partitions_unwritable" in event.message and "3 pod(s)" in event.message
    assert involved_object(settled.reported[0], writers)["name"] == "writers"
    entry = record_entry(settled.records[0])
    assert (
        entry["topic"] == "orders"
        and entry["summary"] == "alert topic orders (partitions_unwritable)"
    )
    again = record_from_entry(entry, "jobs")
    assert again is not None and again.topic == "orders" and again.target == "topic/orders"
    built = build_status(
        previous=None, findings=plan.findings, gates=plan.gates, policy=writers,
        records=settled.records, generation=1, now=NOW,
    )  # fmt: skip
    assert built["unwritableTopics"] == [
        {"topic": "orders", "partitions": [0, 1, 2], "watchedPods": 3,
         "since": "2027-01-15T07:58:00Z", "reason": REASON}
    ]  # fmt: skip
    # the next round: the same topic, unchanged, is not reported again
    later = plan_round(reports, writers, settled.history, NOW + 10, policy_key="jobs/writers")
    assert settle_round(later, []).events == ()


def test_a_topic_that_changes_pods_is_still_one_decision() -> None:
    first = decide(correlate([unwritable_report("exec-1", "orders")]), policy(), History(), NOW)
    more = decide(
        correlate([unwritable_report("exec-1", "orders"), unwritable_report("exec-2", "orders")]),
        policy(), History(), NOW,
    )  # fmt: skip
    assert [d.key for d in first] == [d.key for d in more] == ["topic/orders#alert"]
    assert dataclasses.replace(first[0], reasons=()).signature == more[0].signature


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=40,
)


@given(
    st.one_of(
        json_values,
        st.lists(
            st.fixed_dictionaries(
                {"topic": json_values, "partitions": json_values, "reason": json_values}
            ),
            max_size=8,
        ),
    )
)
def test_any_evidence_a_sidecar_sends_is_topics_or_nothing(evidence: object) -> None:
    """The evidence is another program's JSON: whatever it holds, the topics read from it
    are names a topic can have, partition ids and text, at most `MAX_UNWRITABLE_TOPICS`."""
    doc = msgspec.convert(status_doc(evidence), status.StatusDocument)
    for found in unwritable_topics(doc):
        assert isinstance(found.topic, str) and 0 < len(found.topic) <= MAX_TOPIC_CHARS
        assert all(type(p) is int and p >= 0 for p in found.partitions)
        assert isinstance(found.reason, str)
    assert len(unwritable_topics(doc)) <= MAX_UNWRITABLE_TOPICS
