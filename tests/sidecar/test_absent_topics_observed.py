"""What the sidecar's metadata says of topics that do not exist, as the verdict engine
sees it (`observing.observe_cluster`): a topic asked by name and answered
UNKNOWN_TOPIC_OR_PART is absent; when every topic was asked for, a topic the metadata
does not list is absent; without metadata nothing is absent; the metadata's age rides
along (a rule may only trust it if fetched after a producer's wait began).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hangwatch_sidecar.observing import observe_cluster
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC, ClusterMetadata, TopicState


def _metadata(*topics: tuple[str, str | None]) -> ClusterMetadata:
    return ClusterMetadata("c", 1, (), tuple(TopicState(n, e, ()) for n, e in topics))


def test_a_topic_asked_by_name_and_unknown_is_absent() -> None:
    seen = observe_cluster(
        1.0, [], [], _metadata(("orders", None), ("ghost", UNKNOWN_TOPIC)), metadata_age_seconds=2.0
    )
    assert seen.absent_for(frozenset({"orders", "ghost", "other"})) == ["ghost"]
    assert seen.metadata_age_seconds == 2.0 and "ghost" not in seen.leaderless_topics


def test_every_topic_asked_for_and_one_not_listed_is_absent() -> None:
    seen = observe_cluster(1.0, [], [], _metadata(("orders", None)), all_topics=True)
    assert seen.absent_for(frozenset({"orders", "ghost"})) == ["ghost"]


def test_without_metadata_nothing_is_absent() -> None:
    seen = observe_cluster(1.0, [], [], None, all_topics=True, metadata_age_seconds=2.0)
    assert seen.absent_for(frozenset({"ghost"})) == [] and seen.metadata_age_seconds is None


@given(
    st.dictionaries(st.text(min_size=1, max_size=20), st.sampled_from([None, UNKNOWN_TOPIC])),
    st.frozensets(st.text(min_size=1, max_size=20), max_size=5),
    st.booleans(),
)
def test_absent_is_what_the_metadata_says(
    topics: dict[str, str | None], asked: frozenset[str], all_topics: bool
) -> None:
    seen = observe_cluster(1.0, [], [], _metadata(*topics.items()), all_topics=all_topics)
    for topic in seen.absent_for(asked):
        assert topic in asked
        assert topics.get(topic, UNKNOWN_TOPIC) == UNKNOWN_TOPIC  # unknown, or not listed
        assert all_topics or topic in topics
    for topic, error in topics.items():
        if topic in asked:
            assert (topic in seen.absent_for(asked)) == (error == UNKNOWN_TOPIC)
