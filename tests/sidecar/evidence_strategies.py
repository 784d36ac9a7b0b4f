"""Hypothesis strategies of one round's evidence, for the verdict engine's property tests.

Every source the rules read, generated around the thresholds the tests use (`THRESHOLDS`):
the cluster as probed (brokers of every reachability class, members and dead bootstrap
entries, leaders, leaderless partitions, absent topics, metadata ages), producers' telemetry
with and without its quirks (unusable documents, exited and unknown liveness, the Java
reporter, refusals and clearing errors, batch splits, throttles, leader disagreements),
the socket view (every connection pattern, unavailable), Spark's view (threads in every
activity, stragglers, failed attempts with refusals and other errors, a local JVM dump,
unavailable) and the Python stacks (threads in callbacks, in flush, outside).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hangwatch.contracts import Reachability
from hangwatch_sidecar.evidence import (
    BrokerObservation,
    ClusterObservation,
    ErrorObserved,
    ProducerObservation,
    SplitsObserved,
)
from hangwatch_sidecar.pystacks.judge import HeldThread, HeldView
from hangwatch_sidecar.pystacks.types import Place, StackView, ThreadPlace
from hangwatch_sidecar.sockets.types import (
    ConnectionEvidence,
    Pattern,
    SocketObservation,
    TcpState,
)
from hangwatch_sidecar.spark.types import (
    Activity,
    ExecutorCounts,
    FailedAttempt,
    ProducerThread,
    RunningTask,
    SparkView,
    StagePeers,
    TaskThread,
    ThreadObservation,
    ThreadRole,
)

THRESHOLDS: dict[str, Any] = {
    "stall_seconds": 30.0,
    "heartbeat_seconds": 15.0,
    "metadata_max_age_seconds": 60.0,
    "election_grace_seconds": 15.0,
    "producer_request_timeout_seconds": 20.0,
}
"""The thresholds every generated round is judged with (with and without a declared write
interval: `thresholds`)."""

EDGES = (0.0, 0.5, 1.0, 14.0, 15.0, 16.0, 20.0, 26.0, 29.0, 30.0, 31.0, 45.0, 61.0, 200.0)
"""Seconds on and around each threshold (stall, heartbeat, grace, request timeout + 5 s,
metadata age)."""
TOPICS = ("t", "u")
ADDRESSES = ("10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092", "dead:9092")
CODES = (
    "MSG_SIZE_TOO_LARGE",
    "MESSAGE_TOO_LARGE",
    "TOPIC_AUTHORIZATION_FAILED",
    "_AUTHENTICATION",
    "NOT_LEADER_FOR_PARTITION",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "_UNKNOWN_TOPIC",
    "_MSG_TIMED_OUT",
    "NOT_ENOUGH_REPLICAS",
    "NO_SUCH_ERROR",
)
"""Refusals the next client meets again, errors a restart clears, unknown-topic errors
(classified by the cluster's metadata), errors that depend, the cluster's, and a name no
table has."""
FAILURES = (
    "org.apache.kafka.common.errors.RecordTooLargeException: The message is 2000 bytes",
    "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized",
    "org.apache.kafka.common.errors.TimeoutException: Expiring 2 record(s)",
    "java.lang.IllegalStateException: not Kafka's",
)

seconds = st.one_of(st.sampled_from(EDGES), st.floats(0.0, 400.0, allow_nan=False))
maybe_seconds = st.one_of(st.none(), seconds)
partitions = st.tuples(st.sampled_from(TOPICS), st.integers(0, 2))
leaders = st.dictionaries(partitions, st.integers(-1, 3), max_size=4)
topic_sets = st.frozensets(st.sampled_from(TOPICS), max_size=2)


def mostly(usual: Any, *others: Any) -> st.SearchStrategy[Any]:
    """`usual` three times as often as each of `others` (each a strategy or a value).
    (`st.one_of` would not do: it draws each distinct branch alike.)"""
    choices = [o if isinstance(o, st.SearchStrategy) else st.just(o) for o in (usual, *others)]
    return st.integers(0, len(others) + 2).flatmap(lambda i: choices[max(0, i - 2)])


def thresholds() -> st.SearchStrategy[dict[str, Any]]:
    """`THRESHOLDS`, with no write interval or a 20 s one."""
    return st.sampled_from([None, 20.0]).map(
        lambda interval: {**THRESHOLDS, "expected_write_interval_seconds": interval}
    )


brokers = st.lists(
    st.builds(
        BrokerObservation,
        address=st.sampled_from(ADDRESSES),
        reachability=mostly(Reachability.OK, st.sampled_from(Reachability)),
        node_id=st.one_of(st.none(), st.integers(1, 3)),
        in_bootstrap=st.booleans(),
        advertised=mostly(True, False),
        latency_ms=st.one_of(st.none(), st.just(1.5)),
        detail=st.sampled_from(["", "connection refused"]),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda b: b.address,
).map(tuple)

probed = st.builds(
    ClusterObservation,
    at=st.just(100.0),
    brokers=mostly(
        (BrokerObservation("10.0.0.1:9092", Reachability.OK, 1),),
        brokers,
        brokers,
        st.just(()),
    ),
    metadata_ok=mostly(True, False),
    leaders=leaders,
    leaderless=mostly(frozenset(), st.frozensets(partitions, max_size=2)),
    leaderless_topics=mostly(frozenset(), st.frozensets(st.sampled_from(TOPICS), max_size=1)),
    absent_topics=topic_sets,
    listed_all_topics=st.booleans(),
    listed_topics=topic_sets,
    metadata_age_seconds=maybe_seconds,
)
clusters = st.integers(0, 7).flatmap(lambda i: probed if i else st.none())
"""A probe round seven times in eight."""

errors = st.builds(
    ErrorObserved,
    code=st.sampled_from(CODES),
    topic=st.sampled_from(("", *TOPICS)),
    count=st.integers(1, 50),
    last_age_seconds=seconds,
    first_age_seconds=maybe_seconds,
    first_ts=st.one_of(st.none(), st.just(1.7e9)),
    source=st.sampled_from(["", "batches split"]),
)

splits = st.one_of(
    st.none(),
    st.builds(
        SplitsObserved,
        count=st.integers(1, 9000),
        last_age_seconds=seconds,
        first_age_seconds=seconds,
        first_ts=st.just(1.7e9),
    ),
)

PRODUCER: dict[str, st.SearchStrategy[Any]] = {
    "key": st.sampled_from(["producer-1-1", "producer-2-1", "producer-3-1"]),
    "pid": st.integers(1, 3),
    "alive": mostly(True, False, None),
    "pending": st.sampled_from([0, 100]),
    "delivered_total": st.integers(0, 10),
    "failed_total": st.integers(0, 10),
    "topics": topic_sets,
    "heartbeat_age_seconds": mostly(1.0, seconds),
    "progress_age_seconds": maybe_seconds,
    "pending_seconds": seconds,
    "failing_seconds": seconds,
    "leaders": leaders,
    "answered_age_seconds": maybe_seconds,
    "awaiting_responses": mostly(0, 1, 2),
    "metadata_age_seconds": maybe_seconds,
    "disagreeing_seconds": seconds,
    "identity": st.sampled_from([{}, {"client_id": "orders", "spark_task": "3"}]),
    "errors": mostly((), st.lists(errors, max_size=3).map(tuple)),
    "throttle_age_seconds": maybe_seconds,
    "throttle_seconds": mostly(0.0, 1.5, 30.0),
    "problem": mostly(None, "telemetry is not JSON"),
    "java": mostly(False, True),
    "counts_pending": st.booleans(),
    "splits": splits,
}
"""Each field of a producer's observation, anything its telemetry may say."""
STALLED: dict[str, st.SearchStrategy[Any]] = {
    **PRODUCER,
    "alive": st.just(True),
    "pending": st.just(100),
    "heartbeat_age_seconds": st.just(1.0),
    "progress_age_seconds": st.sampled_from([None, 31.0, 200.0]),
    "pending_seconds": st.sampled_from([31.0, 45.0, 200.0]),
    "throttle_seconds": st.just(0.0),
    "problem": st.none(),
    "java": st.just(False),
    "errors": st.just(()),
}
"""A live wrapper producer whose messages have waited past the stall threshold with no
delivery: how it was answered (or not), its metadata and its failures vary."""

some_producers = st.lists(
    st.one_of(
        st.builds(ProducerObservation, **PRODUCER), st.builds(ProducerObservation, **STALLED)
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda p: p.key,
).map(tuple)

producers = mostly(some_producers, ())
"""One to three producers with telemetry, three times in four."""

connections = st.builds(
    ConnectionEvidence,
    connection=st.sampled_from([f"10.0.0.9:{port}" for port in (40000, 40001, 40002)]),
    broker=st.sampled_from(ADDRESSES),
    pattern=mostly(Pattern.IDLE, Pattern.UNANSWERED, st.sampled_from(Pattern)),
    state=st.sampled_from([TcpState.ESTABLISHED, TcpState.SYN_SENT]),
    uid=st.just(185),
    waiting_seconds=maybe_seconds,
    quiet_seconds=seconds,
    last_received_seconds=maybe_seconds,
    unacked=st.integers(0, 2),
    retransmits=st.integers(0, 6),
    backoff=st.integers(0, 3),
).map(lambda c: ConnectionEvidence(**{**vars(c), "connection": f"{c.connection}->{c.broker}"}))

sockets = mostly(
    st.builds(
        SocketObservation,
        at=st.just(100.0),
        connections=st.lists(connections, max_size=3, unique_by=lambda c: c.connection).map(tuple),
        failed_connects=st.one_of(st.none(), st.integers(0, 5)),
        failed_connects_seconds=st.sampled_from([0.0, 5.0]),
        error=mostly(None, "netlink unavailable"),
    ),
    None,
)

tasks = st.builds(
    lambda tid, running, straggler, failed, attempt: RunningTask(
        TaskThread(
            tid,
            f"Executor task launch worker for task 1.{attempt} in stage 3.0 (TID {tid})",
            3,
            0,
            1,
            attempt,
        ),
        running,
        StagePeers(3, 0, 20, 5, 10, failed, 0, 2.0),
        straggler,
    ),
    st.sampled_from([7, 8]),
    seconds,
    st.booleans(),
    st.integers(0, 2),
    st.integers(0, 1),
)

threads = st.builds(
    lambda role, activity, held, task_id, inner: ThreadObservation(
        ProducerThread(
            51 if role is ThreadRole.NETWORK else 41,
            "kafka-producer-network-thread | orders"
            if role is ThreadRole.NETWORK
            else f"Executor task launch worker for task 1.0 in stage 3.0 (TID {task_id})",
            role,
            activity,
            "WAITING",
            "org.apache.kafka.clients.producer.KafkaProducer.send",
            user_frame="com.example.Cb.onCompletion" if activity is Activity.IN_CALLBACK else None,
            task_id=None if role is ThreadRole.NETWORK else task_id,
            inner=inner,
        ),
        held,
    ),
    st.sampled_from(ThreadRole),
    st.sampled_from(Activity),
    seconds,
    st.sampled_from([7, 8]),
    st.sampled_from([None, None, Activity.FLUSHING]),
)

attempts = st.builds(
    FailedAttempt,
    task_id=st.sampled_from([5, 6]),
    stage_id=st.just(3),
    stage_attempt=st.just(0),
    index=st.sampled_from([1, 2]),
    attempt=st.integers(0, 3),
    error=st.sampled_from(FAILURES),
    ended_ts=st.one_of(st.none(), st.just(1.7e9)),
    seen_at=st.sampled_from([-100.0, 0.0, 90.0, 100.0]),
)

sparks = st.one_of(
    st.none(),
    st.builds(
        SparkView,
        at=st.just(100.0),
        available=mostly(True, False),
        error=st.sampled_from([None, "driver unreachable"]),
        tasks=st.lists(tasks, max_size=2, unique_by=lambda t: t.task.task_id).map(tuple),
        threads=st.lists(threads, max_size=3).map(tuple),
        counts=st.one_of(
            st.none(), st.builds(ExecutorCounts, st.integers(0, 1), st.just(0), st.just(3))
        ),
        source=st.sampled_from(["driver", "jvm"]),
        spark_executor=st.booleans(),
        failed_attempts=st.lists(attempts, max_size=2).map(tuple),
        completed_tasks=mostly(2, None, 0),
    ),
)

places = st.builds(
    lambda tid, place, active, call: ThreadPlace(
        pid=77,
        tid=tid,
        name=f"thread-{tid}",
        active=active,
        place=place,
        client_call=call if place is not Place.OUTSIDE else "",
        user_frame="job.py:on_delivery" if place is Place.IN_CALLBACK else "job.py:compute",
        caller="job.py:write" if place is not Place.OUTSIDE else "",
    ),
    st.sampled_from([1, 2]),
    st.sampled_from(Place),
    st.booleans(),
    st.sampled_from(["Producer_flush", "Producer_poll"]),
)

stacks = st.one_of(
    st.none(),
    st.builds(
        lambda held, error: HeldView(
            StackView(100.0, tuple(h.place for h in held), 1, error), tuple(held)
        ),
        st.lists(
            st.builds(HeldThread, places, seconds, st.integers(1, 3)),
            max_size=2,
            unique_by=lambda h: h.place.tid,
        ),
        st.sampled_from([None, None, "py-spy failed"]),
    ),
)

rounds = st.fixed_dictionaries(
    {
        "cluster": clusters,
        "producers": producers,
        "leaderless_since": st.one_of(st.none(), st.sampled_from([50.0, 95.0, 100.0])),
        "topics": topic_sets,
        "sockets": sockets,
        "spark": sparks,
        "spark_task_running": st.sampled_from([None, True, True, False]),
        "stacks": stacks,
    }
)
"""The fields of one `RoundEvidence` (built by the test, for each engine it compares)."""
