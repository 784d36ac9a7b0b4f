"""What the cluster accepts on the written topics, judged from what crosses the trust
boundary: a broker's DescribeConfigs answer (`min.insync.replicas`), its metadata (leader,
replicas, ISR, error per partition, any lists at all) and a producer's acks setting.

Pure (`hangwatch.acceptance`, `hangwatch_sidecar.probe.acceptance`, the answer parser of
`probe.metadata`); hypothesis feeds odd answers and odd ISR lists: nothing raises, a
value is taken only when it is a whole number a broker can mean, and a partition is
called refused only by the arithmetic.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hangwatch.acceptance import (
    MAX_MIN_INSYNC,
    MIN_INSYNC_FROM_BROKER,
    MIN_INSYNC_FROM_TOPIC,
    MinInsync,
    brokers_tolerated,
    holds_to_min_insync,
    parse_min_insync,
)
from hangwatch_producer.wire.telemetry import ACKS_ALL, MAX_ACKS, acks_of, acks_value
from hangwatch_sidecar.probe.acceptance import (
    TopicAcceptance,
    acceptance,
    doubt_reason,
    refused_reason,
    to_status,
)
from hangwatch_sidecar.probe.metadata import describe_problem, min_insync_from_answer
from hangwatch_sidecar.probe.types import PartitionState

TOPIC_OWN = 1  # confluent-kafka's ConfigSource.DYNAMIC_TOPIC_CONFIG
BROKER_DEFAULT = 5  # ConfigSource.DEFAULT_CONFIG


def entry(value: Any, source: Any = TOPIC_OWN) -> SimpleNamespace:
    """A DescribeConfigs entry as confluent-kafka gives it (`value`, `source`)."""
    return SimpleNamespace(value=value, source=source)


def part(
    partition: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), **kw: Any
) -> PartitionState:
    return PartitionState(partition, kw.pop("leader", 1), replicas, isr, kw.pop("error", None))


def test_a_brokers_answer_is_taken_only_as_a_whole_number_from_one() -> None:
    assert parse_min_insync("3") == 3 and parse_min_insync(" 2 ") == 2
    for odd in ("0", "-1", "3.0", "three", "", "٣", "99999999999", None, True, 2.0, [3]):
        assert parse_min_insync(odd) is None, odd
    assert min_insync_from_answer({"min.insync.replicas": entry("3")}) == MinInsync(
        3, MIN_INSYNC_FROM_TOPIC
    )
    assert min_insync_from_answer({"min.insync.replicas": entry("1", BROKER_DEFAULT)}) == MinInsync(
        1, MIN_INSYNC_FROM_BROKER
    )
    unknown = min_insync_from_answer({"min.insync.replicas": entry("x" * 500)})
    assert unknown.value is None and len(unknown.problem) < 120
    assert "no min.insync.replicas" in min_insync_from_answer({}).problem
    assert "DESCRIBE_CONFIGS" in describe_problem("TOPIC_AUTHORIZATION_FAILED")
    assert "0.11" in describe_problem("_UNSUPPORTED_FEATURE")
    assert describe_problem("SOMETHING_NEW") == "DescribeConfigs failed: SOMETHING_NEW"


@given(
    st.one_of(
        st.none(),
        st.text(max_size=30),
        st.integers(),
        st.dictionaries(
            st.text(max_size=25),
            st.one_of(
                st.none(),
                st.builds(
                    entry,
                    st.one_of(st.none(), st.text(max_size=20), st.integers(), st.floats()),
                    st.one_of(st.integers(-2, 10), st.none(), st.text(max_size=3)),
                ),
            ),
            max_size=5,
        ),
    )
)
def test_any_answer_is_a_min_insync_in_range_or_unknown_with_why(answer: Any) -> None:
    found = min_insync_from_answer(answer)
    if found.value is None:
        assert found.problem and not found.known
    else:
        assert 1 <= found.value <= MAX_MIN_INSYNC
        assert found.source in (MIN_INSYNC_FROM_TOPIC, MIN_INSYNC_FROM_BROKER)


@given(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.floats()))
def test_any_acks_setting_is_a_number_kafka_takes_or_unknown(value: Any) -> None:
    acks = acks_value(value)
    assert acks is None or ACKS_ALL <= acks <= MAX_ACKS
    if isinstance(value, str) and value.strip().lower() == "all":
        assert acks == ACKS_ALL


def test_acks_from_a_configuration_and_who_is_held_to_min_insync() -> None:
    assert acks_of({"acks": "all"}) == acks_of({"request.required.acks": "-1"}) == ACKS_ALL
    assert acks_of({"acks": "1", "enable.idempotence": True}) == ACKS_ALL  # forced by the client
    assert acks_of({"acks": 1}) == 1 and acks_of({}) is None and acks_of(None) is None
    assert holds_to_min_insync(None) and holds_to_min_insync(ACKS_ALL)
    assert not holds_to_min_insync(1) and not holds_to_min_insync(0)
    assert brokers_tolerated(3, 3) == 0 and brokers_tolerated(3, 2) == 1
    assert brokers_tolerated(2, 3) == 0


def test_the_isr_case_names_the_partitions_the_isr_against_min_insync_and_who_left() -> None:
    found = TopicAcceptance(
        "orders", tuple(part(p, (1, 2)) for p in range(3)), MinInsync(3, MIN_INSYNC_FROM_TOPIC)
    )
    assert [p.partition for p in found.refused] == [0, 1, 2] and found.out_of_isr() == (3,)
    reason = refused_reason(found, {3: "10.0.0.3:9092: refused"})
    assert reason == (
        "topic orders: partitions 0, 1, 2 refuse acks=all writes: ISR 2 of 3 replicas, below "
        "min.insync.replicas 3 (the topic's own); out of the ISR: broker 3 (10.0.0.3:9092: "
        "refused)"
    )
    shown = to_status(found, {})
    assert (shown.unwritable, shown.out_of_isr, shown.min_insync_replicas) == ([0, 1, 2], [3], 3)
    assert not doubt_reason(found, {})


def test_a_full_isr_accepts_and_min_insync_above_the_replicas_refuses_for_good() -> None:
    healthy = TopicAcceptance("t", (part(0, (1, 2, 3)),), MinInsync(3, MIN_INSYNC_FROM_TOPIC))
    assert not healthy.refused and not healthy.in_doubt and not refused_reason(healthy, {})
    impossible = TopicAcceptance(
        "t", (part(0, (1, 2), replicas=(1, 2)),), MinInsync(3, MIN_INSYNC_FROM_BROKER)
    )
    assert "above the replication factor 2" in refused_reason(impossible, {})
    assert "the brokers' default" in refused_reason(impossible, {})


def test_leaderless_partitions_are_the_elections_and_a_storage_error_refuses() -> None:
    found = TopicAcceptance(
        "t",
        (
            part(0, (), leader=-1),
            part(1, (1, 2, 3), error="KAFKA_STORAGE_ERROR"),
            part(2, (1,)),
        ),
        MinInsync(2, MIN_INSYNC_FROM_TOPIC),
    )
    assert [p.partition for p in found.below] == [2]
    assert [p.partition for p in found.refused] == [1, 2]
    assert "KAFKA_STORAGE_ERROR" in refused_reason(found, {})


def test_an_unknown_min_insync_makes_a_shrunk_isr_a_doubt_never_a_refusal() -> None:
    why = "DescribeConfigs refused: ... (TOPIC_AUTHORIZATION_FAILED)"
    found = TopicAcceptance(
        "t", (part(0, (1, 2)), part(1, (1, 2, 3))), MinInsync(None, problem=why)
    )
    assert not found.refused and [p.partition for p in found.in_doubt] == [0]
    assert why in doubt_reason(found, {}) and "may refuse" in doubt_reason(found, {})
    never_asked = TopicAcceptance("t", (part(0, (1,)),), None)
    assert "not asked yet" in doubt_reason(never_asked, {})
    assert to_status(never_asked, {}).problem == "not asked yet"


def test_only_the_listed_written_topics_are_judged() -> None:
    found = acceptance(
        {"t": (part(0, (1, 2)),), "other": ()}, {"t": MinInsync(2, "topic")}, ["t", "absent"]
    )
    assert [t.topic for t in found] == ["t"]


ids = st.integers(-3, 12)


@given(
    st.lists(
        st.builds(
            PartitionState,
            st.integers(-1, 1000),
            ids,
            st.lists(ids, max_size=6).map(tuple),
            st.lists(ids, max_size=8).map(tuple),
            st.one_of(
                st.none(), st.sampled_from(["KAFKA_STORAGE_ERROR", "LEADER_NOT_AVAILABLE", "X"])
            ),
        ),
        max_size=12,
    ),
    st.one_of(
        st.none(),
        st.builds(MinInsync, st.one_of(st.none(), st.integers(1, 5)), st.just("topic")),
    ),
)
def test_odd_isr_lists_never_break_the_judgement(
    partitions: list[PartitionState], known: MinInsync | None
) -> None:
    """ISR lists longer than the replicas, with brokers that are not replicas, duplicates,
    negative ids, empty replicas: the judgement stays within the partitions listed, names
    only replicas as out of the ISR, and every text is built without error."""
    found = TopicAcceptance("t", tuple(partitions), known)
    listed = {p.partition for p in partitions}
    assert {p.partition for p in found.refused} <= listed
    assert set(found.out_of_isr()) <= {r for p in partitions for r in p.replicas}
    assert not (found.below and known is None)  # a storage error refuses whatever it is
    assert not (found.in_doubt and known is not None and known.known)
    for p in found.below:
        assert known is not None and known.value is not None and len(p.isr) < known.value
        assert not p.leaderless
    text = refused_reason(found, {}) or doubt_reason(found, {})
    assert (text.startswith("topic t: ")) if (found.refused or found.in_doubt) else not text
    to_status(found, {1: "a:1: ok"})
