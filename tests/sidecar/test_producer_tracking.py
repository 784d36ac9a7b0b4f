"""The tracker turns successive telemetry snapshots into ages of heartbeat and progress.

Covers: first sight takes ages from the document's own timestamps (a restarted
sidecar still sees an old hang); the heartbeat age grows while `seq` stands still and
resets when it moves; progress resets when `delivered` grows; pending time counts
only while messages stay pending; failures without deliveries start the failing
clock and a delivery stops it; leaders and metadata age come from the statistics;
forgotten producers lose their memory.
"""

from __future__ import annotations

from typing import Any

from hangwatch_producer.wire.telemetry import TelemetryDocument, from_builtins
from hangwatch_sidecar.tracking import ProducerTracker

WALL = 1_800_000_000.0


def doc(
    seq: int,
    delivered: int = 0,
    failed: int = 0,
    pending: int = 0,
    ts: float = WALL,
    last_delivery: float | None = None,
    **extra: Any,
) -> TelemetryDocument:
    return from_builtins(
        {
            "schema": 1,
            "seq": seq,
            "ts": ts,
            "last_delivery_ts": last_delivery,
            "identity": {"pid": 77, "pod": "exec-1", "executor_id": "1"},
            "counters": {
                "enqueued": delivered + failed + pending,
                "delivered": delivered,
                "failed": failed,
                "in_queue": pending,
                "unacknowledged": pending,
            },
            "topics": ["t"],
            **extra,
        }
    )


def test_first_sight_uses_the_documents_own_timestamps() -> None:
    tracker = ProducerTracker()
    obs = tracker.observe(
        "p",
        doc(5, delivered=10, pending=3, ts=WALL - 40, last_delivery=WALL - 50),
        True,
        now=1000.0,
        wall_now=WALL,
    )
    assert obs.heartbeat_age_seconds == 40.0
    assert obs.progress_age_seconds == 50.0
    assert obs.pending_seconds == 0.0, "pending history is unknown: never accuse at first sight"
    assert obs.pid == 77 and obs.identity["pod"] == "exec-1"


def test_heartbeat_ages_while_seq_stands_still() -> None:
    tracker = ProducerTracker()
    tracker.observe("p", doc(1), True, now=0.0, wall_now=WALL)
    assert (
        tracker.observe("p", doc(1), True, now=10.0, wall_now=WALL + 10).heartbeat_age_seconds
        == 10.0
    )
    assert (
        tracker.observe("p", doc(2), True, now=11.0, wall_now=WALL + 11).heartbeat_age_seconds
        == 0.0
    )


def test_progress_and_pending_clocks() -> None:
    tracker = ProducerTracker()
    tracker.observe("p", doc(1, delivered=5, pending=2, last_delivery=WALL), True, 0.0, WALL)
    stuck = tracker.observe("p", doc(2, delivered=5, pending=2), True, 20.0, WALL + 20)
    assert stuck.progress_age_seconds == 20.0 and stuck.pending_seconds == 20.0
    moving = tracker.observe("p", doc(3, delivered=6, pending=2), True, 21.0, WALL + 21)
    assert moving.progress_age_seconds == 0.0 and moving.pending_seconds == 21.0
    drained = tracker.observe("p", doc(4, delivered=8, pending=0), True, 22.0, WALL + 22)
    assert drained.pending_seconds == 0.0


def test_failures_without_deliveries_start_the_failing_clock() -> None:
    tracker = ProducerTracker()
    tracker.observe("p", doc(1, delivered=5), True, 0.0, WALL)
    tracker.observe("p", doc(2, delivered=5, failed=3), True, 5.0, WALL + 5)
    assert (
        tracker.observe("p", doc(3, delivered=5, failed=9), True, 40.0, WALL + 40).failing_seconds
        == 35.0
    )
    assert (
        tracker.observe("p", doc(4, delivered=6, failed=9), True, 41.0, WALL + 41).failing_seconds
        == 0.0
    )


def test_leaders_and_metadata_age_come_from_statistics() -> None:
    stats = {
        "topics": {
            "t": {
                "metadata_age": 12000,
                "partitions": {"0": {"leader": 1}, "1": {"leader": 3}, "-1": {"leader": -1}},
            }
        }
    }
    obs = ProducerTracker().observe("p", doc(1, stats=stats), True, 0.0, WALL)
    assert obs.leaders == {("t", 0): 1, ("t", 1): 3}
    assert obs.metadata_age_seconds == 12.0


def test_forget_drops_memory_of_gone_producers() -> None:
    tracker = ProducerTracker()
    tracker.observe("a", doc(1), True, 0.0, WALL)
    tracker.observe("b", doc(1), True, 0.0, WALL)
    tracker.forget({"b"})
    assert len(tracker) == 1


def test_responses_and_awaited_requests_come_from_broker_statistics() -> None:
    def stats(responses: int, waiting: int) -> dict[str, Any]:
        return {
            "brokers": {
                "b1": {"rx": responses, "waitresp_cnt": waiting},
                "b2": {"rx": 10, "waitresp_cnt": 0},
            }
        }

    tracker = ProducerTracker()
    first = tracker.observe("p", doc(1, stats=stats(4, 0)), True, 0.0, WALL)
    assert first.answered_age_seconds is None
    grown = tracker.observe("p", doc(2, stats=stats(9, 2)), True, 3.0, WALL + 3)
    # b1 answered since the last document: its two waiting requests are in flight, not stuck
    assert grown.answered_age_seconds == 0.0 and grown.awaiting_responses == 0
    still = tracker.observe("p", doc(3, stats=stats(9, 2)), True, 7.0, WALL + 7)
    assert still.answered_age_seconds == 4.0 and still.awaiting_responses == 2


def test_a_wedged_broker_counts_as_awaiting_while_others_answer() -> None:
    def stats(b1: int, b2: int) -> dict[str, Any]:
        return {
            "brokers": {
                "b1": {"rx": b1, "waitresp_cnt": 1},
                "b2": {"rx": b2, "waitresp_cnt": 1},
            }
        }

    tracker = ProducerTracker()
    assert tracker.observe("p", doc(1, stats=stats(5, 5)), True, 0.0, WALL).awaiting_responses == 2
    both = tracker.observe("p", doc(2, stats=stats(5, 8)), True, 1.0, WALL + 1)
    assert both.answered_age_seconds == 0.0 and both.awaiting_responses == 1  # b1 is wedged
