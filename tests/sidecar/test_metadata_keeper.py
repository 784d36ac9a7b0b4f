"""When the sidecar fetches cluster metadata, and what a fetch leaves behind
(`MetadataKeeper`; its client replaced by a fake: no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from hangwatch.acceptance import MinInsync
from hangwatch.contracts import Reachability
from hangwatch_sidecar import metadata_keeper
from hangwatch_sidecar.metadata_keeper import CONFIGS_REFRESH_SECONDS, MetadataKeeper
from hangwatch_sidecar.probe.settings import Endpoint, ProbeSettings
from hangwatch_sidecar.probe.types import (
    UNKNOWN_TOPIC,
    BrokerInfo,
    ClusterMetadata,
    MetadataProbe,
    PartitionState,
    TopicState,
)

from .builders import cluster, producer

A, B = Endpoint("10.0.0.1", 9092), Endpoint("10.0.0.2", 9092)


def keeper(*, fresh: bool = False) -> MetadataKeeper:
    return MetadataKeeper(
        (A,),
        ProbeSettings(),
        {"t"},
        interval_seconds=30.0,
        stall_seconds=10.0,
        new_client_each_fetch=fresh,
        wall=lambda: 1_000.0,
    )


class FakeClient:
    """Answers with the next of `answers` (an exception is raised); counts closes."""

    answers: ClassVar[list[MetadataProbe | Exception]] = []
    opened: ClassVar[list[FakeClient]] = []
    described: ClassVar[list[list[str]]] = []
    """The topics of each DescribeConfigs request, in order."""
    refuse_describe: ClassVar[bool] = False

    def __init__(self, bootstrap: Sequence[Endpoint], settings: ProbeSettings) -> None:
        self.closed = False
        FakeClient.opened.append(self)

    def fetch(self, topics: Sequence[str] = ()) -> MetadataProbe:
        answer = FakeClient.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def describe_min_insync(self, topics: Sequence[str]) -> dict[str, MinInsync]:
        FakeClient.described.append(list(topics))
        if FakeClient.refuse_describe:
            raise RuntimeError("the client broke")
        return {t: MinInsync(2, "topic") for t in topics}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    monkeypatch.setattr(metadata_keeper, "MetadataClient", FakeClient)
    FakeClient.answers, FakeClient.opened, FakeClient.described = [], [], []
    FakeClient.refuse_describe = False
    return FakeClient


def answer(*brokers: BrokerInfo, error: str = "") -> MetadataProbe:
    metadata = ClusterMetadata("c", 1, brokers, ()) if brokers else None
    failure = None if brokers else Reachability.TIMEOUT
    return MetadataProbe(metadata, error, failure, (), 1.0)


def test_the_first_round_and_every_interval_fetch() -> None:
    k = keeper()
    assert k.due(0.0, None)
    k.fetched_at = 0.0
    assert not k.due(29.0, cluster())
    assert k.due(30.0, cluster())


def test_anything_wrong_last_round_fetches_at_once() -> None:
    k = keeper()
    k.fetched_at = 0.0
    assert k.due(1.0, cluster(Reachability.TIMEOUT, Reachability.OK))
    assert k.due(1.0, cluster(leaderless_topics=frozenset({"t"})))
    assert not k.due(1.0, None)  # nothing observed yet: the interval decides


def test_a_disagreement_newer_than_our_metadata_fetches_once() -> None:
    k = keeper()
    k.fetched_at = 10.0
    assert k.due(12.0, cluster(), (), [11.0])
    assert not k.due(12.0, cluster(), (), [9.0])  # already fetched after it began


def test_a_wait_of_half_the_stall_threshold_since_before_our_fetch_fetches() -> None:
    k = keeper()
    k.fetched_at = 10.0
    waiting = producer(pending=5, pending_seconds=6.0)  # since 14: fetched before it
    assert k.due(20.0, cluster(), [waiting])
    k.fetched_at = 15.0  # fetched after the wait began: the next wait is another's
    assert not k.due(20.0, cluster(), [waiting])
    assert not k.due(20.0, cluster(), [producer(pending=5, pending_seconds=4.0)])


def test_a_fetch_keeps_its_client_and_remembers_every_node(clients: type[FakeClient]) -> None:
    clients.answers = [answer(BrokerInfo(1, A)), answer(BrokerInfo(2, B))]
    k = keeper()
    k.fetch(5.0)
    k.fetch(40.0)
    assert (k.requests, k.clients, len(clients.opened)) == (2, 1, 1)
    assert k.known_nodes == {A: 1, B: 2}  # broker 1 left; its address still has a name
    assert k.fetched_at == 40.0 and k.fetched_ts == 1_000.0 and k.error is None


def test_a_failed_fetch_drops_its_client_and_keeps_the_old_age(
    clients: type[FakeClient],
) -> None:
    clients.answers = [answer(BrokerInfo(1, A)), RuntimeError("boom"), answer(error="timed out")]
    k = keeper()
    k.fetch(5.0)
    k.fetch(40.0)
    assert k.error == "metadata client failed: RuntimeError"
    assert k.fetched_at == 5.0 and clients.opened[0].closed
    k.fetch(41.0)  # a new client: the answer carries no metadata
    assert (k.metadata, k.error, k.clients) == (None, "timed out", 2)
    assert clients.opened[1].closed  # no metadata: the client is not kept


def test_fresh_probe_mode_and_doubt_take_a_new_client(clients: type[FakeClient]) -> None:
    clients.answers = [answer(BrokerInfo(1, A)) for _ in range(4)]
    fresh = keeper(fresh=True)
    fresh.fetch(1.0)
    fresh.fetch(2.0)
    assert fresh.clients == 2 and all(c.closed for c in clients.opened)
    kept = keeper()
    kept.fetch(3.0)
    kept.fetch(4.0, fresh=True)  # brokers failed last round: not through the kept client
    assert kept.clients == 2 and clients.opened[2].closed and not clients.opened[3].closed


def topics_answer(*, shrunk: bool = False) -> MetadataProbe:
    """Metadata listing topics t and u (3 replicas each; `shrunk`: t's ISR lost broker 3)
    and a topic the cluster does not have."""
    isr = (1, 2) if shrunk else (1, 2, 3)
    topics = (
        TopicState("t", None, (PartitionState(0, 1, (1, 2, 3), isr, None),)),
        TopicState("u", None, (PartitionState(0, 2, (1, 2, 3), (1, 2, 3), None),)),
        TopicState("gone", UNKNOWN_TOPIC, ()),
    )
    return MetadataProbe(ClusterMetadata("c", 1, (BrokerInfo(1, A),), topics), "", None, (), 1.0)


def test_the_written_topics_configs_are_asked_once_then_every_refresh_or_on_doubt(
    clients: type[FakeClient],
) -> None:
    """One DescribeConfigs for every written topic the metadata lists (never one it says
    does not exist); not again within the refresh interval while the ISR is full; again
    after a metadata interval once a partition is under-replicated; and again at the
    refresh interval. Topics no longer written are forgotten."""
    clients.answers = [topics_answer() for _ in range(2)] + [
        topics_answer(shrunk=True) for _ in range(3)
    ]
    k = keeper()
    written = frozenset({"t", "u", "gone"})
    k.fetch(0.0, written=written)
    k.fetch(40.0, written=written)  # nothing due: full ISR, within the refresh interval
    assert clients.described == [["t", "u"]]
    assert k.min_insync == {"t": MinInsync(2, "topic"), "u": MinInsync(2, "topic")}
    k.described_at["t"] = 20.0  # as if asked at 20 s
    k.fetch(49.0, written=written)  # t shrank: asked again once a metadata interval passed
    assert clients.described == [["t", "u"]]
    k.fetch(50.0, written=written)
    assert clients.described == [["t", "u"], ["t"]]
    k.fetch(CONFIGS_REFRESH_SECONDS, written=frozenset({"u"}))  # t is not written any more
    assert clients.described == [["t", "u"], ["t"], ["u"]]
    assert set(k.min_insync) == {"u"} and k.describe_requests == 3


def test_a_failing_describe_is_kept_as_unknown_and_never_stops_the_fetch(
    clients: type[FakeClient],
) -> None:
    clients.answers = [topics_answer(), topics_answer()]
    clients.refuse_describe = True
    k = keeper()
    k.fetch(0.0, written=frozenset({"t"}))
    assert k.metadata is not None and k.error is None
    assert k.min_insync == {"t": MinInsync(None, problem="DescribeConfigs failed: RuntimeError")}
    k.fetch(1.0, written=frozenset({"t"}))  # a missing ACL does not go away by asking again
    assert clients.described == [["t"]]
