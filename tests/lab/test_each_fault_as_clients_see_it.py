"""Each lab fault as real, independent clients experience it.

Covers: `down` refuses connections; `blackhole` times out new connects (kernel DROP)
and stalls a producer's established connections until its own timeout; `refuse` resets
an established connection at its next request and refuses new connects while the broker
runs on, until `restore`; `unresponsive`
accepts TCP but never answers ApiVersions; `rtt` delays answers; `election` makes
metadata report LEADER_NOT_AVAILABLE and fails produce requests, then leaders move
and producing works; `request-errors` fails the next N produce requests with the
named error; `withhold-answers` leaves one process's requests acknowledged and
unanswered while the broker serves new connections; `restore` brings every broker
back; kcat (librdkafka's CLI, Debian package) sees refused vs. timed-out brokers the
same way.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer

from hangwatch.errors import LabError
from hangwatch_lab import Lab
from tests.lab.clients import (
    API_VERSIONS_V0,
    api_versions_answered,
    connect_outcome,
    produce,
)


def test_down_refuses_connections(lab: Lab) -> None:
    lab.down(2)
    assert connect_outcome(lab.brokers[2].port) == "refused"
    assert connect_outcome(lab.brokers[1].port) == "connected"
    assert lab.status().brokers[1]["condition"] == "down"


def test_blackhole_times_out_connects(lab: Lab, kernel_faults: None) -> None:
    lab.blackhole(3)
    started = time.monotonic()
    assert connect_outcome(lab.brokers[3].port, timeout_seconds=1.0) == "timeout"
    assert time.monotonic() - started >= 0.9
    assert connect_outcome(lab.brokers[1].port) == "connected"


def test_blackhole_stalls_established_producer_until_its_timeout(
    lab: Lab, kernel_faults: None
) -> None:
    assert produce(lab.bootstrap, 5, timeout_seconds=10) == [None] * 5
    for broker in lab.brokers:
        lab.blackhole(broker)
    started = time.monotonic()
    outcomes = produce(lab.bootstrap, 3, timeout_seconds=15, **{"message.timeout.ms": 3000})
    elapsed = time.monotonic() - started
    assert len(outcomes) == 3
    assert all(o is not None and o.code() == KafkaError._MSG_TIMED_OUT for o in outcomes)
    assert elapsed >= 2.5, "a blackholed cluster cannot fail faster than the client's own timeout"


def test_refuse_resets_established_connections_and_refuses_connects(
    lab: Lab, kernel_faults: None
) -> None:
    with socket.create_connection(("127.0.0.1", lab.brokers[2].port), timeout=2) as live:
        lab.refuse(2)
        assert lab.status().brokers[1]["condition"] == "refuse"
        with pytest.raises(ConnectionResetError):
            live.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            live.recv(8)  # the reset arrives as the answer to the request
    assert connect_outcome(lab.brokers[2].port) == "refused"
    assert connect_outcome(lab.brokers[1].port) == "connected"
    lab.restore(2)
    assert lab.status().chain is None
    assert api_versions_answered(lab.brokers[2].port), "served again once restored"


def test_unresponsive_accepts_tcp_but_never_answers(lab: Lab) -> None:
    assert api_versions_answered(lab.brokers[1].port)
    lab.unresponsive(1)
    assert connect_outcome(lab.brokers[1].port) == "connected"
    assert not api_versions_answered(lab.brokers[1].port, timeout_seconds=1.5)
    assert lab.status().brokers[0]["condition"] == "unresponsive"


def test_rtt_delays_every_answer(lab: Lab) -> None:
    lab.rtt(2, 400)
    started = time.monotonic()
    assert api_versions_answered(lab.brokers[2].port, timeout_seconds=3)
    assert time.monotonic() - started >= 0.35


def test_election_is_leaderless_then_leaders_move(lab: Lab) -> None:
    admin = lab.admin(log_level=0)
    before = {
        p: m.leader for p, m in admin.list_topics("t", timeout=5).topics["t"].partitions.items()
    }
    warm = Producer(
        {"bootstrap.servers": lab.bootstrap, "linger.ms": 0, "retries": 0, "log_level": 0}
    )
    outcomes: list[KafkaError | None] = []
    warm.produce("t", b"before", partition=0, callback=lambda e, _m: outcomes.append(e))
    warm.flush(5)
    assert outcomes == [None]
    lab.election("t", seconds=2.0)
    during = admin.list_topics("t", timeout=5).topics["t"]
    assert during.error is not None and during.error.code() == KafkaError.LEADER_NOT_AVAILABLE
    # A producer that cached the old leader is refused (NOT_LEADER_FOR_PARTITION, which
    # librdkafka retries regardless of `retries`) until the election ends.
    started = time.monotonic()
    warm.produce("t", b"during", partition=0, callback=lambda e, _m: outcomes.append(e))
    warm.flush(10)
    assert outcomes == [None, None]
    assert time.monotonic() - started >= 1.5, "delivered before the election ended"
    deadline = time.monotonic() + 10
    while lab.status().elections and time.monotonic() < deadline:
        time.sleep(0.05)
    # The election is over once its leaders are set; a client's next metadata request can
    # still be answered with the old ones for a moment (seen twice in ~40 full runs), so
    # the moved leaders are asked for again for up to 5 s.
    moved_by = time.monotonic() + 5
    while True:
        after = admin.list_topics("t", timeout=5).topics["t"]
        leaders = {p: m.leader for p, m in after.partitions.items()}
        if leaders != before or time.monotonic() > moved_by:
            break
        time.sleep(0.1)
    assert after.error is None
    assert leaders != before
    assert produce(lab.bootstrap, 3, timeout_seconds=10) == [None] * 3


def test_fresh_client_waits_for_a_leader_during_an_election(lab: Lab) -> None:
    lab.election("t", seconds=2.0)
    started = time.monotonic()
    outcomes = produce(lab.bootstrap, 1, timeout_seconds=10, retries=0)
    assert outcomes == [None]
    assert time.monotonic() - started >= 1.5, "delivered before the election ended"


def test_request_errors_fail_exactly_the_next_requests(lab: Lab) -> None:
    lab.request_errors("produce", "NOT_ENOUGH_REPLICAS", 1)
    first = produce(lab.bootstrap, 1, timeout_seconds=5, retries=0)
    assert first[0] is not None and first[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert produce(lab.bootstrap, 1, timeout_seconds=5, retries=0) == [None]


def test_restore_all_brings_every_broker_back(lab: Lab, kernel_faults: None) -> None:
    lab.down(1)
    lab.blackhole(2)
    lab.unresponsive(3)
    lab.restore()
    assert [b["condition"] for b in lab.status().brokers] == ["up", "up", "up"]
    assert all(api_versions_answered(b.port) for b in lab.brokers.values())
    assert produce(lab.bootstrap, 3, timeout_seconds=15) == [None] * 3


def _kcat_metadata(address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kcat", "-L", "-b", address, "-m", "2", "-X", "socket.connection.setup.timeout.ms=1500"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_kcat_sees_refused_and_blackholed_brokers(lab: Lab, kernel_faults: None) -> None:
    ok = _kcat_metadata(lab.brokers[1].address)
    assert ok.returncode == 0 and "3 brokers" in ok.stdout
    lab.down(2)
    lab.blackhole(3)
    refused = _kcat_metadata(lab.brokers[2].address)
    assert refused.returncode != 0 and "Connection refused" in refused.stderr
    blackholed = _kcat_metadata(lab.brokers[3].address)
    assert blackholed.returncode != 0
    assert "Connection refused" not in blackholed.stderr
    assert "timed out" in blackholed.stderr.lower() or "timeout" in blackholed.stderr.lower()


def _delivering_producer(
    lab: Lab, partition: int, broker: int
) -> tuple[Producer, list[KafkaError | None]]:
    """A producer whose first message to `partition`, now led by `broker`, was delivered
    (its connection to that broker is open); its delivery outcomes list."""
    lab.move_leader("t", partition, broker)
    live = Producer({"bootstrap.servers": lab.bootstrap, "linger.ms": 0, "log_level": 0})
    outcomes: list[KafkaError | None] = []
    live.produce("t", b"before", partition=partition, callback=lambda e, _m: outcomes.append(e))
    live.flush(5)
    assert outcomes == [None]
    return live, outcomes


def test_stall_produce_wedges_the_live_producer_but_not_a_new_one(lab: Lab) -> None:
    partition = 0
    live, outcomes = _delivering_producer(lab, partition, broker=2)
    lab.stall_produce(2)
    assert lab.status().brokers[1]["condition"] == "stall-produce"
    for _ in range(5):
        live.produce("t", b"x", partition=partition, callback=lambda e, _m: outcomes.append(e))
    live.flush(4)
    assert outcomes == [None], "the wedged producer must complete nothing"
    assert len(live) == 5
    assert api_versions_answered(lab.brokers[2].port), "the broker itself still answers"
    restarted = produce(lab.bootstrap, 3, timeout_seconds=10)
    assert restarted == [None] * 3, "a new client (a restart) delivers at once"
    live.purge()
    live.flush(0)


def test_withhold_answers_wedges_one_clients_connections_until_restore(
    lab: Lab, kernel_faults: None
) -> None:
    """The broker keeps serving everyone else (a new connection of this same process
    included); the live producer's requests are acknowledged and never answered, and
    once the rules go the broker's retransmitted answers complete them."""
    partition = 0
    live, outcomes = _delivering_producer(lab, partition, broker=2)
    ports = lab.withhold_answers(2, os.getpid())
    assert ports and lab.status().chain is not None
    for _ in range(5):
        live.produce("t", b"x", partition=partition, callback=lambda e, _m: outcomes.append(e))
    live.flush(4)
    assert outcomes == [None], "the client whose answers are withheld must complete nothing"
    assert api_versions_answered(lab.brokers[2].port), "a new connection is answered"
    lab.restore(2)
    assert lab.status().chain is None
    live.flush(30)
    assert outcomes == [None] * 6, "the answers arrive once the rules are gone"


def test_withhold_answers_needs_a_connection(lab: Lab, kernel_faults: None) -> None:
    with pytest.raises(LabError, match="has no connection to broker 1"):
        lab.withhold_answers(1, os.getpid())
