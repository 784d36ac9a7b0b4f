"""What the socket view means for the pod's verdict: findings the verdict engine weighs (pure).

Fed by the rules (`round.Round`) with the round's `SocketObservation`, whether the cluster is
healthy from this pod (every advertised broker answers the sidecar, metadata came,
no partition is leaderless), the stall threshold, and `spark_task_running`: Spark's
view of this executor (True: a task of this executor runs now; False: none; None:
not known). Each finding names the connection, broker or task it rests on.

- a request `unanswered` on a live connection past the stall threshold: while the
  cluster is healthy and the request has waited longer than the producers' own request
  timeout -> `producer_hung` (S2: a client that still waits on a request it should have
  abandoned); shorter than that timeout -> `broker_degraded` naming the broker (Kafka
  lets a broker hold a Produce until the request's timeout: with `acks=all` it waits for
  its in-sync replicas, so a frozen or slow follower holds every write while every broker
  answers the sidecar's probes; sarama v1.38.0 through a real election waited 6.3 s and
  went on); while some broker fails, or when the connection's own broker fails the
  sidecar's probes (a removed broker, frozen, left in the bootstrap list: evidence
  against that broker, not the producer, which kafka-go v0.4.8 showed by moving on by
  itself) -> `broker_degraded` too, never a producer fault;
- the pod's own connections to a broker `blackholed` or their connects unanswered ->
  `broker_degraded` naming the broker (S0, S3; `cluster_unreachable` comes from the
  probes, these corroborate);
- silence: every connection idle past the stall threshold while Spark runs a task of
  this executor -> `producer_silent` (S4's candidate, but also a task that computes or
  reads its input between writes): silence alone never restarts anything; the verdict
  engine's evidence ladder (`ladder`) upgrades it to `producer_hung` on positive
  evidence or clears it; silence with no task, or with Spark's view unknown, is just an
  idle pod - unless someone declared how often the pod's producers write at least
  (`write_interval_seconds`, a policy's `detection.expectedWriteIntervalSeconds`): then
  no write sent for longer than that interval is `producer_silent` too, with no Spark
  view at all (a producer service; S2's sarama v1.37.2, which after a real election
  keeps nothing outstanding and sends nothing more), except while Spark's view says no
  task of this executor runs (an executor between tasks writes nothing, rightly). That
  silence is the classifier's memory of the pod's last write (`types.WriteMemory`): it
  goes on counting when the brokers close the idle connections or none is left, and
  sends too small to hold a write (a metadata refresh, a reconnect's handshake) do not
  end it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hangwatch.contracts import Verdict
from hangwatch_sidecar.sockets.types import ConnectionEvidence, Pattern, SocketObservation

MAX_NAMED = 5
"""Connections named in one reason at most (the rest are counted)."""

TIMEOUT_MARGIN_SECONDS = 5.0
"""How far past its request timeout a client may still hold a request before the socket
view calls it stuck: clients act on their timeouts on their own cadence (librdkafka scans
for timed-out requests once a second, then drops the connection; sarama's read deadline
and the Java client's poll act at once) and the sidecar measures a wait once per round.
kcat waited "30 s" on a request when librdkafka's 30 s timeout had not yet been acted on."""


@dataclass(frozen=True)
class SocketFinding:
    """One conclusion from the socket view, with the connections and brokers it names."""

    verdict: Verdict
    reason: str
    connections: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    past_write_interval: bool = False
    """A silence finding measured against the declared write interval (not against a
    running Spark task): the silence itself has held for the whole interval."""


def _names(connections: tuple[ConnectionEvidence, ...]) -> str:
    shown = ", ".join(c.connection for c in connections[:MAX_NAMED])
    more = len(connections) - MAX_NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _unanswered(
    view: SocketObservation,
    stall_seconds: float,
    request_timeout_seconds: float,
    cluster_healthy: bool,
    failing_brokers: frozenset[str] = frozenset(),
    throttle_seconds: float | None = None,
) -> list[SocketFinding]:
    found = []
    by_broker: dict[str, list[ConnectionEvidence]] = defaultdict(list)
    for c in view.by_pattern(Pattern.UNANSWERED):
        by_broker[c.broker].append(c)
    for broker, conns in sorted(by_broker.items()):
        longest = max(c.waiting_seconds or 0.0 for c in conns)
        quota = throttle_seconds is not None and longest <= throttle_seconds + stall_seconds
        if quota and cluster_healthy and broker not in failing_brokers:
            continue  # a broker's quota holds the pod's requests: slow, not a fault
        what = (
            f"connection {_names(tuple(conns))} to broker {broker}: a request unanswered for "
            f"{longest:.0f} s (threshold {stall_seconds:.0f} s), acknowledged by the broker's "
            "TCP, no Kafka answer"
        )
        if broker in failing_brokers:
            reason = (
                f"{what}, and the sidecar's probes find that broker failing: evidence "
                "against the broker, not the producer"
            )
            verdict = Verdict.BROKER_DEGRADED
        elif cluster_healthy and longest > request_timeout_seconds + TIMEOUT_MARGIN_SECONDS:
            reason = (
                f"{what}, past the producers' request timeout ({request_timeout_seconds:.0f} s "
                f"+ {TIMEOUT_MARGIN_SECONDS:.0f} s) "
                "while every broker answers the sidecar's probes: the client still waits on "
                "a request it should have given up"
            )
            verdict = Verdict.PRODUCER_HUNG
        elif cluster_healthy:
            reason = (
                f"{what}, within the producers' request timeout ({request_timeout_seconds:.0f} s), "
                "while every broker answers the sidecar's probes: a broker may hold a write "
                "that long (acks=all waits for its in-sync replicas), not yet a producer fault"
            )
            verdict = Verdict.BROKER_DEGRADED
        else:
            reason = f"{what}, while some brokers fail: not judged a producer fault"
            verdict = Verdict.BROKER_DEGRADED
        found.append(SocketFinding(verdict, reason, tuple(c.connection for c in conns), (broker,)))
    return found


def _blackholed(view: SocketObservation) -> list[SocketFinding]:
    found = []
    by_broker: dict[str, list[ConnectionEvidence]] = defaultdict(list)
    for c in view.by_pattern(Pattern.BLACKHOLED, Pattern.CONNECT_UNANSWERED):
        by_broker[c.broker].append(c)
    for broker, conns in sorted(by_broker.items()):
        syn = [c for c in conns if c.pattern is Pattern.CONNECT_UNANSWERED]
        data = [c for c in conns if c.pattern is Pattern.BLACKHOLED]
        parts = []
        if data:
            worst = max(c.retransmits for c in data)
            parts.append(
                f"data unacknowledged on {_names(tuple(data))} ({worst} retransmissions in a row)"
            )
        if syn:
            parts.append(f"connects unanswered past a second ({_names(tuple(syn))})")
        reason = (
            f"the pod's own connections to broker {broker}: "
            + "; ".join(parts)
            + (" (blackholed from the producer's side)")
        )
        found.append(
            SocketFinding(
                Verdict.BROKER_DEGRADED, reason, tuple(c.connection for c in conns), (broker,)
            )
        )
    return found


def _write_silence(view: SocketObservation) -> float | None:
    """Seconds since the pod's connections last sent something that can hold a write,
    counted across closed connections and reconnects (`types.WriteMemory`), while no
    connection has a request outstanding or a connect under way; None when no connection
    of the pod was seen yet (or, with no memory, none is open)."""
    if not view.quiet_for_writes:
        return None
    if view.writes is None:
        return view.silent_seconds
    return view.writes.last_write_seconds


def _write_silence_reason(view: SocketObservation, silent: float, interval: float) -> str:
    writes = view.writes
    open_now = len(view.connections)
    reason = (
        f"the pod's connections to brokers have been silent for {silent:.0f} s (nothing "
        f"sent that can hold a write), longer than the expected write interval "
        f"({interval:.0f} s: its producers write at least that often): they send nothing "
        f"(blocked, or nothing to send); {open_now} connection(s) open"
    )
    if writes is not None and writes.closed:
        reason += f", {writes.closed} closed since its last write"
    if writes is not None and writes.not_writes:
        reason += (
            f"; {writes.not_writes} send(s) since then too small to hold a write (metadata "
            "requests, reconnects' handshakes)"
        )
    return reason


def _silence(
    view: SocketObservation,
    stall_seconds: float,
    cluster_healthy: bool,
    spark_task_running: bool | None,
    write_interval_seconds: float | None,
) -> list[SocketFinding]:
    if not cluster_healthy:
        return []
    silent = view.silent_seconds
    writes_silent = _write_silence(view) if write_interval_seconds is not None else None
    past_write_interval = False
    if spark_task_running is True and silent is not None and silent >= stall_seconds:
        reason = (
            f"every connection of the pod to brokers ({len(view.connections)}) has been "
            f"silent for {silent:.0f} s (threshold {stall_seconds:.0f} s) while Spark runs a "
            "task of this executor: its producer sends nothing (blocked, or the task is busy "
            "elsewhere)"
        )
    elif (
        write_interval_seconds is not None
        and writes_silent is not None
        and spark_task_running is not False
        and writes_silent >= write_interval_seconds
    ):
        reason = _write_silence_reason(view, writes_silent, write_interval_seconds)
        past_write_interval = True
    else:
        return []
    brokers = tuple(sorted({c.broker for c in view.connections}))
    return [
        SocketFinding(
            Verdict.PRODUCER_SILENT,
            reason,
            tuple(c.connection for c in view.connections),
            brokers,
            past_write_interval,
        )
    ]


def judge_sockets(
    view: SocketObservation | None,
    *,
    stall_seconds: float,
    cluster_healthy: bool,
    request_timeout_seconds: float,
    spark_task_running: bool | None = None,
    failing_brokers: frozenset[str] = frozenset(),
    write_interval_seconds: float | None = None,
    throttle_seconds: float | None = None,
) -> tuple[SocketFinding, ...]:
    """Findings from the socket view, most severe first (none when it is unavailable).
    `failing_brokers`: the addresses the sidecar's probes found failing this round;
    `request_timeout_seconds`: the producers' own request timeout;
    `write_interval_seconds`: how often the pod's producers write at least (None: not
    said); `throttle_seconds`: the longest throttle time a broker's quota gave a producer
    of the pod whose wait it still explains (None: none is throttled) - a request
    unanswered no longer than that plus `stall_seconds` is the quota's, not a finding."""
    if view is None or not view.available:
        return ()
    findings = _unanswered(
        view,
        stall_seconds,
        request_timeout_seconds,
        cluster_healthy,
        failing_brokers,
        throttle_seconds,
    )
    findings += _silence(
        view, stall_seconds, cluster_healthy, spark_task_running, write_interval_seconds
    )
    findings += _blackholed(view)
    order = {Verdict.PRODUCER_HUNG: 0, Verdict.PRODUCER_SILENT: 1, Verdict.BROKER_DEGRADED: 2}
    return tuple(sorted(findings, key=lambda f: order.get(f.verdict, 9)))


def failed_connects_reason(view: SocketObservation | None, refusing: list[str]) -> str | None:
    """A sentence when the pod's clients failed connects while entries refuse (S1), else None.

    The namespace counter cannot say where a connect went, so it only corroborates
    what the probes found (`refusing`: addresses the sidecar found refusing)."""
    if view is None or not view.available or not refusing or not view.failed_connects:
        return None
    return (
        f"the pod's clients failed {view.failed_connects} connects in the last "
        f"{view.failed_connects_seconds:.0f} s, with {', '.join(refusing[:MAX_NAMED])} refusing: "
        "the producer is dialing dead entries"
    )
