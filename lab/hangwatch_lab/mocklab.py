"""The lab's mock engine: librdkafka's mock Kafka cluster in a child process plus the faults
injected into it.

`Lab(..., engine="mock")` (the default) builds a `MockLab`. It starts
`hangwatch_lab.mockserver` as a child process, talks to it over pipes, keeps the
kernel blackhole rules in this process (so they are removed even when the mock
crashes), and remembers every fault so `status()` and `restore()` can report and
undo them.
"""

from __future__ import annotations

import atexit
import json
import logging
import subprocess
import sys
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, Producer, libversion

from hangwatch.errors import LabError, UsageError
from hangwatch_lab import netfilter
from hangwatch_lab.lab import UNRESPONSIVE_RTT_MS, BrokerState, Lab, down_cause
from hangwatch_lab.mock import API_KEYS

log = logging.getLogger(__name__)

ELECTION_ERROR_BUDGET = 100_000
"""Produce requests failed with NOT_LEADER_FOR_PARTITION while an election lasts."""

START_TIMEOUT_SECONDS = 30.0

STALL_REQUESTS = 1
"""Produce requests a stalled broker swallows. One is enough: responses on a connection are
ordered, so every later request on that connection waits behind it forever."""

DRAIN_TOPIC = "__hangwatch_lab_drain"


def error_code(name: str) -> int:
    """Kafka error code for a name such as `NOT_LEADER_FOR_PARTITION`."""
    code = getattr(KafkaError, name.upper(), None)
    if not isinstance(code, int):
        raise UsageError(f"unknown Kafka error name {name!r} (e.g. NOT_LEADER_FOR_PARTITION)")
    return code


class MockLab(Lab):
    """A running mock cluster with `brokers` brokers and the given topics (name -> partitions)."""

    engine = "mock"

    @property
    def engine_description(self) -> str:
        return f"librdkafka mock cluster {libversion()[0]}"

    def __init__(
        self,
        brokers: int = 3,
        topics: dict[str, int] | None = None,
        engine: str = "mock",
        **kafka_only: object,
    ) -> None:
        if kafka_only:
            raise UsageError(
                f"{', '.join(sorted(kafka_only))}: the kafka engine's options; the mock "
                "(librdkafka's protocol emulation) has no Kafka version, topic configs, "
                "authorizer or quotas"
            )
        if not 1 <= brokers <= 32:
            raise UsageError(f"--brokers must be between 1 and 32, got {brokers}")
        super().__init__(brokers, topics)
        self._proc: subprocess.Popen[str] | None = None
        self._elections: dict[str, threading.Timer] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        """Each partition's leader as the lab set it (the mock's own first choice is
        random, so the lab sets every leader itself and an election can move each one)."""

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> MockLab:
        """Start the mock cluster child and create the topics; returns self."""
        netfilter.remove_stale_chains()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hangwatch_lab.mockserver", str(self.broker_count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        atexit.register(self.close)
        hello = self._read_line(START_TIMEOUT_SECONDS)
        self.bootstrap = hello["bootstrap"]
        for i, addr in enumerate(self.bootstrap.split(","), start=1):
            host, port = addr.rsplit(":", 1)
            self.brokers[i] = BrokerState(id=i, host=host, port=int(port))
        replication = min(3, self.broker_count)
        for name, parts in self.topics.items():
            self._call("create_topic", topic=name, partitions=parts, replication=replication)
            for partition in range(parts):
                self._set_leader(name, partition, partition % self.broker_count + 1)
        log.info("lab up", extra={"bootstrap": self.bootstrap, "mock_pid": self._proc.pid})
        return self

    def close(self) -> None:
        """Undo every kernel rule, stop timers and the mock; safe to call more than once."""
        with self._lock:
            for timer in self._elections.values():
                timer.cancel()
            self._elections.clear()
            self._blackholes.close()
            proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.close)
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
            log.info("lab down", extra={"bootstrap": self.bootstrap})

    @property
    def mock_pid(self) -> int:
        return self._proc.pid if self._proc else 0

    def alive(self) -> bool:
        """True while the mock cluster process runs."""
        return self._proc is not None and self._proc.poll() is None

    # -- child protocol ----------------------------------------------------------------------
    def _read_line(self, timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise LabError("the lab is not running")
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            code = proc.poll()
            if code is None:
                raise LabError(f"the mock cluster did not answer within {timeout:.0f} s")
            raise LabError(f"the mock cluster process exited (code {code})")
        reply: dict[str, Any] = json.loads(result[0])
        return reply

    def _call(self, op: str, **params: Any) -> dict[str, Any]:
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.poll() is not None:
                code = proc.poll() if proc else None
                raise LabError(f"the mock cluster is not running (exit code {code})")
            try:
                proc.stdin.write(json.dumps({"op": op, **params}) + "\n")
                proc.stdin.flush()
            except BrokenPipeError as exc:
                raise LabError(f"the mock cluster process exited (code {proc.poll()})") from exc
            reply = self._read_line(10.0)
        if not reply.get("ok"):
            raise LabError(str(reply.get("error", "mock command failed")))
        return reply

    # -- faults ------------------------------------------------------------------------------
    def down(self, broker: int, how: str | None = None) -> None:
        """Close the broker's connections and refuse new ones (a stopped process, port
        closed); `how` (stop or kill) looks the same on the mock."""
        down_cause(how)
        state = self._broker(broker)
        self._call("set_down", broker=broker)
        state.down = True
        log.info("fault down", extra={"broker": broker})

    def unresponsive(self, broker: int) -> None:
        """Accept TCP but never answer Kafka requests (a wedged broker)."""
        self.rtt(broker, UNRESPONSIVE_RTT_MS)

    def rtt(self, broker: int, rtt_ms: int) -> None:
        """Delay every response of the broker by `rtt_ms` milliseconds."""
        if rtt_ms < 0:
            raise UsageError(f"RTT must be >= 0 ms, got {rtt_ms}")
        state = self._broker(broker)
        self._call("set_rtt", broker=broker, rtt_ms=rtt_ms)
        state.rtt_ms = rtt_ms
        log.info("fault rtt", extra={"broker": broker, "rtt_ms": rtt_ms})

    def stall_produce(self, broker: int) -> None:
        """The broker's next Produce request is never answered; everything else works.

        Responses on a connection are ordered, so the producer connection that carried
        that request stays wedged forever, while the cluster looks healthy from outside
        (ApiVersions, Metadata and new connections are answered) and a restarted client
        delivers at once: the S2 situation, a client that lost a batch after an election.
        `restore` drains the stall if no request consumed it yet.
        """
        state = self._broker(broker)
        self._call(
            "push_broker_delays",
            broker=broker,
            api_key=API_KEYS["produce"],
            count=STALL_REQUESTS,
            rtt_ms=UNRESPONSIVE_RTT_MS,
        )
        state.produce_stalled = True
        log.info("fault stall-produce", extra={"broker": broker})

    def _drain_produce_stall(self, state: BrokerState) -> None:
        """Consume the broker's pushed Produce delays with throwaway requests."""
        self._set_leader(DRAIN_TOPIC, 0, state.id)
        drain = Producer(
            {
                "bootstrap.servers": state.address,
                "linger.ms": 0,
                "batch.num.messages": 1,
                "max.in.flight.requests.per.connection": 1_000_000,
                "acks": 1,
                "log_level": 0,
                "enable.idempotence": False,
                "message.timeout.ms": 60_000,
            }
        )
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                left = int(
                    self._call("broker_stack_count", broker=state.id, api_key=API_KEYS["produce"])[
                        "count"
                    ]
                )
                if left == 0:
                    break
                for _ in range(min(left, 500)):
                    drain.produce(DRAIN_TOPIC, b"drain", partition=0)
                drain.poll(0.05)
            else:
                raise LabError(f"could not drain the produce stall of broker {state.id}")
        finally:
            drain.purge()
            drain.flush(0)
        state.produce_stalled = False

    def request_errors(self, api: str, error: str, count: int) -> None:
        """Fail the next `count` requests of type `api` (e.g. produce) with Kafka error `error`."""
        if api not in API_KEYS:
            raise UsageError(f"unknown request type {api!r} (choose from {', '.join(API_KEYS)})")
        if count < 1:
            raise UsageError(f"--count must be >= 1, got {count}")
        self._call("push_request_errors", api_key=API_KEYS[api], errors=[error_code(error)] * count)
        log.info("fault request errors", extra={"api": api, "error": error, "count": count})

    def move_leader(self, topic: str, partition: int, broker: int) -> None:
        """Make `broker` the leader of `topic`/`partition`."""
        self._broker(broker)
        self._set_leader(topic, partition, broker)

    def _set_leader(self, topic: str, partition: int, broker: int) -> None:
        self._call("set_leader", topic=topic, partition=partition, broker=broker)
        self._leaders[(topic, partition)] = broker

    def election(self, topic: str, seconds: float, how: str | None = None) -> None:
        """Leaderless partitions of `topic` for `seconds`, then leaders move (an election, S2).

        While it lasts, metadata reports LEADER_NOT_AVAILABLE for the topic and produce
        requests fail with NOT_LEADER_FOR_PARTITION; when it ends every partition's
        leader moves to another broker. (A real leaderless partition crashes the mock.)
        """
        if how is not None:
            raise self._needs("election --how", "kafka", "the mock's election takes no broker away")
        if topic not in self.topics:
            raise UsageError(f"unknown topic {topic!r} (lab topics: {', '.join(self.topics)})")
        if not 0 < seconds <= 3600:
            raise UsageError(f"election seconds must be in (0, 3600], got {seconds}")
        with self._lock:
            if topic in self._elections:
                raise LabError(f"an election on {topic} is already under way")
            self._call("set_topic_error", topic=topic, error=KafkaError.LEADER_NOT_AVAILABLE)
            self._call(
                "push_request_errors",
                api_key=API_KEYS["produce"],
                errors=[KafkaError.NOT_LEADER_FOR_PARTITION] * ELECTION_ERROR_BUDGET,
            )
            timer = threading.Timer(seconds, self._end_election, args=(topic,))
            timer.daemon = True
            self._elections[topic] = timer
            timer.start()
        log.info("fault election", extra={"topic": topic, "seconds": seconds})

    def _end_election(self, topic: str) -> None:
        with self._lock:
            if topic not in self._elections or not self.alive():
                self._elections.pop(topic, None)
                return
            self._call("clear_request_errors", api_key=API_KEYS["produce"])
            self._call("set_topic_error", topic=topic, error=0)
            for partition in range(self.topics[topic]):
                # the next broker: a different one whenever there are two or more
                leader = self._leaders[(topic, partition)] % self.broker_count + 1
                self._set_leader(topic, partition, leader)
            # Over only once the leaders have moved: `status().elections` empties after that.
            self._elections.pop(topic, None)
        log.info("election over: leaders moved", extra={"topic": topic})

    def restore(self, broker: int | None = None) -> None:
        """Undo every fault on `broker`, or on all brokers and topics when None."""
        targets = [self._broker(broker)] if broker is not None else list(self.brokers.values())
        for state in targets:
            with self._lock:
                self._blackholes.remove(state.port)
            state.blackholed = False
            state.refused = False
            if state.down:
                self._call("set_up", broker=state.id)
                state.down = False
            if state.rtt_ms:
                self._call("set_rtt", broker=state.id, rtt_ms=0)
                state.rtt_ms = 0
            if state.produce_stalled:
                self._drain_produce_stall(state)
        if broker is None:
            with self._lock:
                pending = list(self._elections)
                for topic in pending:
                    self._elections.pop(topic).cancel()
                    self._call("set_topic_error", topic=topic, error=0)
                for api_key in API_KEYS.values():
                    self._call("clear_request_errors", api_key=api_key)
        log.info("restore", extra={"broker": broker if broker is not None else "all"})

    def elections_under_way(self) -> list[str]:
        return sorted(self._elections)
