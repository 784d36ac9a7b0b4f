"""The Kafka engine's faults, each with a real cause: brokers stopped, frozen, restored,
leaders moved, elections by the controller, the controllers paused, and shrinks
(`KafkaFaults`).
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time

from confluent_kafka import KafkaException

from hangwatch.errors import LabError, UsageError
from hangwatch_lab.kafka.nodes import (
    POLL_SECONDS,
    Node,
    run_state,
)
from hangwatch_lab.kafka.tools import KafkaTools
from hangwatch_lab.lab import BrokerState, down_cause

log = logging.getLogger(__name__)

ELECTION_GRACE_SECONDS = 60.0
"""How long past its planned end an election may go without new leaders before the frozen
broker is continued anyway (its result then says `leaderless_seconds: None`)."""

ELECTION_CAUSES = ("freeze", "kill")
"""How `election` takes the leader away: SIGSTOP (a pause; connections hang) or SIGKILL
(a crash; connections reset)."""

CONTROLLER_PAUSE = "controllers"
"""`pause_controllers`'s entry among the faults under way (`elections_under_way`)."""
PAUSE_WATCH_SECONDS = 10.0
"""How long after the controllers are continued `pause_controllers` goes on reading the
metadata for partitions without a leader (the brokers fenced, then unfenced)."""

DEAD_MODES = ("blackhole", "refused", "frozen")
"""How a broker removed by `shrink` looks to a client that still dials it: a host gone
from the network (SYNs dropped), a closed port, or a frozen process (TCP accepted, never
answered)."""


class KafkaFaults(KafkaTools):
    """Faults on brokers (never on controllers), and the elections' background threads."""

    def _live(self, broker: int, fault: str) -> tuple[BrokerState, Node]:
        state = self._broker(broker)
        if state.removed:
            raise LabError(f"broker {broker} was removed by shrink; {fault} does not apply")
        return state, self._nodes[broker]

    def down(self, broker: int, how: str | None = None) -> None:
        """Stop the broker's process, port closed: `how` `stop` (SIGTERM: Kafka's controlled
        shutdown, up to the stop timeout) or `kill` (SIGKILL: a crash, at once)."""
        how = down_cause(how)
        state, node = self._live(broker, "down")
        if state.down:
            return
        state.down = True  # first: `alive()` must not take the stopping broker for a crash
        self._stop(node, kill=how == "kill")
        state.pid = 0
        log.info("fault down", extra={"broker": broker, "how": how})

    def unresponsive(self, broker: int) -> None:
        """Freeze the broker's JVM (SIGSTOP): TCP still accepted and acknowledged, no answer."""
        state, node = self._live(broker, "unresponsive")
        if state.down or node.proc is None:
            raise LabError(f"broker {broker} is down; restore it before freezing it")
        self._freeze(node)
        log.info("fault unresponsive", extra={"broker": broker, "pid": node.proc.pid})

    def restore(self, broker: int | None = None) -> None:
        """Undo every fault on `broker` (or all): rules removed, frozen JVMs continued,
        stopped brokers started again on their ports and data, and waited for.
        Brokers removed by `shrink` stay removed."""
        if broker is not None and self._broker(broker).removed:
            raise LabError(f"broker {broker} was removed by shrink; it does not come back")
        targets = [self._broker(broker)] if broker is not None else list(self.brokers.values())
        targets = [s for s in targets if not s.removed]
        if broker is None:
            for thread in list(self._election_threads.values()):
                thread.join(timeout=60)
        restarted = set()
        for state in targets:
            with self._lock:
                self._blackholes.remove(state.port)
            state.blackholed = False
            state.refused = False
            if state.frozen:
                self._continue(state.id)
                restarted.add(state.id)
            if state.down:
                self._require_free_ports(self._nodes[state.id], f"restarting broker {state.id}")
                self._spawn(self._nodes[state.id])
                state.down = False
                restarted.add(state.id)
        if restarted:  # started again or continued: back once it serves again
            self._wait_ready(restarted, f"restoring broker(s) {sorted(restarted)}")
        log.info("restore", extra={"broker": broker if broker is not None else "all"})

    def move(self, broker: int) -> str:
        """The broker back on a new address under the same name (a pod restarted on a new
        IP): stopped (SIGTERM, Kafka's controlled shutdown), its listener advertised by
        hostname bound on the next named address, the lab's hosts file saying so, started
        again and waited for. Needs `hostnames`; returns the new address."""
        if not self.settings.hostnames:
            raise UsageError("move needs a lab whose brokers have names (hostnames=True)")
        _, node = self._live(broker, "move")
        self.down(broker)
        node.generation += 1
        node.config.write_text(self._properties(node, self._voters))
        self._write_hosts()
        log.info("fault move", extra={"broker": broker, "address": node.named_host})
        self.restore(broker)
        return node.named_host

    def fix_certificates(self) -> None:
        """Every broker's TLS listener presents a certificate the lab's clients trust (the
        certificate fixed): its keystore replaced by the one the lab's CA signed, then
        each broker restarted (SIGTERM, started again, waited for). Needs `tls`."""
        if self.tls_material is None:
            raise UsageError("fix_certificates needs a lab with a TLS listener (tls=...)")
        shutil.copyfile(self.tls_material.signed_by("trusted"), self.tls_material.keystore)
        for broker, state in self.brokers.items():
            if not state.removed:
                self.down(broker)
                self.restore(broker)
        log.info("fault fix-certificates", extra={"brokers": sorted(self.brokers)})

    def move_leader(self, topic: str, partition: int, broker: int) -> None:
        """A real leader move: `broker` first in the replica list, then a preferred election."""
        self._live(broker, "leader")
        self._lead_from(topic, [partition], broker)
        log.info("fault leader", extra={"topic": topic, "partition": partition, "broker": broker})

    def election(self, topic: str, seconds: float, how: str | None = None) -> None:
        """A real election on every partition of `topic`.

        The topic's leaders are first gathered on one broker that is not the active
        controller (reassignment + preferred election), then that broker is frozen
        (`how="freeze"`, SIGSTOP: a GC pause or hung disk; connections stay open and
        unanswered) or killed (`how="kill"`, SIGKILL: a crash; connections reset, no
        controlled shutdown). The controller fences it after the session timeout and
        elects new leaders from the in-sync replicas; when `seconds` have passed and the
        election is over, the broker is continued (or started again on its port and
        data) and rejoins as a follower (leaders stay where the election put them:
        automatic rebalancing is off). The measured time the partitions' leader was
        unavailable is in `election_results`.
        """
        how = how or "freeze"
        if how not in ELECTION_CAUSES:
            raise UsageError(f"--how must be one of {', '.join(ELECTION_CAUSES)}, got {how!r}")
        if topic not in self.topics:
            raise UsageError(f"unknown topic {topic!r} (lab topics: {', '.join(self.topics)})")
        minimum = self.settings.session_timeout_ms / 1000
        if not minimum <= seconds <= 3600:
            raise UsageError(
                f"election seconds must be in [{minimum:g}, 3600] on the kafka engine (a frozen "
                f"leader is fenced after the {minimum:g} s session timeout), got {seconds}"
            )
        if self.broker_count < 2:
            raise UsageError("an election needs at least 2 brokers")
        with self._lock:
            if topic in self._election_threads:
                raise LabError(f"an election on {topic} is already under way")
            self._election_threads[topic] = threading.current_thread()  # reserved
        try:
            controller = self.active_controller()
            candidates = [
                b.id for b in self.brokers.values() if b.condition == "up" and b.id != controller
            ]
            if not candidates:
                raise LabError("no healthy broker besides the active controller to fence")
            victim = candidates[0]
            partitions = list(range(self.topics[topic]))
            self._lead_from(topic, partitions, victim)
            node = self._nodes[victim]
            assert node.proc is not None
            frozen_at = time.monotonic()
            if how == "freeze":
                self._freeze(node)
            else:
                self.brokers[victim].down = True  # before the kill: not a crash
                node.proc.kill()
                node.proc.wait()
                self.brokers[victim].pid = 0
        except BaseException:
            with self._lock:
                self._election_threads.pop(topic, None)
            raise
        thread = threading.Thread(
            target=self._run_election,
            args=(topic, victim, controller, seconds, frozen_at, how),
            name=f"election-{topic}",
            daemon=True,
        )
        with self._lock:
            self._election_threads[topic] = thread
        thread.start()
        log.info(
            "fault election",
            extra={
                "topic": topic,
                "seconds": seconds,
                "how": how,
                "broker": victim,
                "controller": controller,
            },
        )

    def _run_election(
        self, topic: str, victim: int, controller: int, seconds: float, frozen_at: float, how: str
    ) -> None:
        others = ",".join(b.address for b in self.brokers.values() if b.condition == "up")
        elected_at: float | None = None
        leaders: dict[int, int] = {}
        give_up = frozen_at + seconds + ELECTION_GRACE_SECONDS
        try:
            while not self._closed.is_set():
                now = time.monotonic()
                if elected_at is None and now > give_up:
                    log.warning(
                        "no election seen; bringing the broker back", extra={"topic": topic}
                    )
                    break
                if elected_at is None:
                    try:
                        md = self._metadata(others, timeout=1.0)
                        parts = md.topics[topic].partitions
                        if parts and all(p.leader not in (-1, victim) for p in parts.values()):
                            elected_at = time.monotonic()
                            leaders = {p: part.leader for p, part in parts.items()}
                    except KafkaException:  # a metadata request during the election
                        pass
                if elected_at is not None and now - frozen_at >= seconds:
                    break
                self._closed.wait(POLL_SECONDS)
        finally:
            fault_seconds = time.monotonic() - frozen_at
            if not self._closed.is_set():
                self._bring_back(victim)
            result = {
                "topic": topic,
                "how": how,
                "broker": victim,
                "active_controller": controller,
                "fault_seconds": round(fault_seconds, 3),
                "leaderless_seconds": round(elected_at - frozen_at, 3) if elected_at else None,
                "new_leaders": leaders,
            }
            with self._lock:
                self.election_results.append(result)
                self._election_threads.pop(topic, None)
            log.info("election over", extra=result)

    def _bring_back(self, broker: int) -> None:
        """After an election: continue the frozen broker, or start the killed one again."""
        state = self.brokers[broker]
        if state.frozen:
            self._continue(broker)
        elif state.down:
            try:
                node = self._nodes[broker]
                self._require_free_ports(node, f"restarting broker {broker} after the election")
                self._spawn(node)
                state.down = False
                self._wait_ready({broker}, f"restarting broker {broker} after the election")
            except (LabError, OSError) as exc:
                log.error("broker not restarted", extra={"broker": broker, "error": str(exc)})

    def elections_under_way(self) -> list[str]:
        return sorted(self._election_threads)

    def pause_controllers(self, seconds: float) -> None:
        """Pause every controller-only node's JVM (SIGSTOP, a long GC pause of the KRaft
        quorum) for `seconds`, then continue them, in the background: longer than the
        session timeout, the controllers find every broker's session expired when they
        run again and fence the brokers (their partitions' leader -1) until their next
        heartbeats. The brokers themselves are never touched. `restore` and `close` wait
        for or continue the controllers on every path. The result (in
        `election_results`, `fault: controller-pause`) says how long the partitions of
        the lab's topics had no leader, as the brokers' metadata showed it."""
        if not self.settings.controllers:
            raise UsageError("pausing the controllers needs controller-only nodes (--controllers)")
        if not 0 < seconds <= 3600:
            raise UsageError(f"controller pause seconds must be in (0, 3600], got {seconds}")
        with self._lock:
            if CONTROLLER_PAUSE in self._election_threads:
                raise LabError("the controllers are already paused")
            nodes = [n for n in self._controller_nodes.values() if n.proc is not None]
            thread = threading.Thread(
                target=self._run_pause, args=(nodes, seconds), name="controller-pause", daemon=True
            )
            self._election_threads[CONTROLLER_PAUSE] = thread
        paused_at = time.monotonic()
        try:
            for node in nodes:
                assert node.proc is not None
                node.proc.send_signal(signal.SIGSTOP)
            for node in nodes:
                assert node.proc is not None
                while run_state(node.proc.pid) != "T" and time.monotonic() - paused_at < 10:
                    time.sleep(0.01)
        except BaseException:
            self._continue_controllers(nodes)
            with self._lock:
                self._election_threads.pop(CONTROLLER_PAUSE, None)
            raise
        thread.start()
        log.info("fault controller-pause", extra={"seconds": seconds, "controllers": len(nodes)})

    @staticmethod
    def _continue_controllers(nodes: list[Node]) -> None:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)

    def _run_pause(self, nodes: list[Node], seconds: float) -> None:
        paused_at = time.monotonic()
        leaderless: list[float] = []
        try:
            self._closed.wait(seconds)
        finally:
            self._continue_controllers(nodes)
        resumed_at = time.monotonic()
        try:
            while not self._closed.is_set() and time.monotonic() - resumed_at < PAUSE_WATCH_SECONDS:
                try:
                    md = self._metadata(timeout=1.0)
                    parts = [
                        p
                        for t in self.topics
                        if t in md.topics
                        for p in md.topics[t].partitions.values()
                    ]
                    if any(p.leader == -1 for p in parts):
                        leaderless.append(time.monotonic() - paused_at)
                except KafkaException:
                    pass
                self._closed.wait(POLL_SECONDS * 4)
        finally:
            result = {
                "fault": "controller-pause",
                "fault_seconds": round(resumed_at - paused_at, 3),
                "leaderless_seen": len(leaderless),
                "leaderless_from_to": (
                    [round(leaderless[0], 2), round(leaderless[-1], 2)] if leaderless else None
                ),
            }
            with self._lock:
                self.election_results.append(result)
                self._election_threads.pop(CONTROLLER_PAUSE, None)
            log.info("controller pause over", extra=result)

    def shrink(self, to: int, dead: str = "blackhole") -> None:
        """Decommission brokers to+1..N the way operators do: every partition reassigned
        away from them, then each stopped for good. Their addresses stay in the bootstrap
        string, dead: `blackhole` (packets dropped: a host gone), `refused` (port closed)
        or `frozen` (process frozen instead of stopped: TCP accepted, never answered)."""
        if dead not in DEAD_MODES:
            raise UsageError(f"--dead must be one of {', '.join(DEAD_MODES)}, got {dead!r}")
        live = [b.id for b in self.brokers.values() if not b.removed]
        if not 1 <= to < len(live):
            raise UsageError(f"--to must be between 1 and {len(live) - 1}, got {to}")
        if not self.settings.controllers and to <= self.broker_count // 2:
            raise UsageError(
                f"--to {to} would leave the {self.broker_count} KRaft voters without a majority "
                f"(every node is also a controller): keep at least {self.broker_count // 2 + 1}"
            )
        keep = sorted(live)[:to]
        removed = sorted(live)[to:]
        for b in keep:
            if self.brokers[b].condition != "up":
                raise LabError(
                    f"broker {b} stays but is {self.brokers[b].condition}; restore it first"
                )
        md = self._metadata()
        assignment: dict[tuple[str, int], list[int]] = {}
        for name, topic in md.topics.items():
            for p, part in topic.partitions.items():
                if not set(part.replicas) & set(removed):
                    continue
                replicas = [r for r in part.replicas if r in keep]
                spare = [b for b in keep if b not in replicas]
                while len(replicas) < min(len(part.replicas), to) and spare:
                    replicas.append(spare.pop(0))
                assignment[(name, p)] = replicas
        if assignment:
            self._reassign(assignment)
        for b in removed:
            state, node = self.brokers[b], self._nodes[b]
            state.removed = True  # first: `alive()` must not take the stopping broker for a crash
            if dead == "frozen":
                self._freeze(node)
            else:
                self._stop(node)
                state.pid = 0
                with self._lock:
                    self._blackholes.hold(state.port)
                if dead == "blackhole":
                    self.blackhole(b)
        self._wait_shrunk(set(keep))
        log.info("fault shrink", extra={"to": to, "removed": removed, "dead": dead})

    def _wait_shrunk(self, keep: set[int]) -> None:
        """Until every kept broker's own metadata has listed exactly `keep` for two
        session timeouts in a row. Each learns of the removed brokers' fencing from the
        metadata log in its own time (one that still listed a removed broker after
        another had dropped it failed a fresh-clone run), and a removed broker was listed
        again after every kept broker had dropped it (another fresh-clone run; the cause
        was not established). The controller fences or unfences a broker on its heartbeats
        and their absence within a session timeout, so a view held for two of them, with
        the removed brokers' processes gone, is taken as final."""
        settle_seconds = 2 * self.settings.session_timeout_ms / 1000
        deadline = time.monotonic() + 60
        last = "no answer yet"
        agreed_since: float | None = None
        while True:
            try:
                views = {b: set(self._metadata(self.brokers[b].address, 1.0).brokers) for b in keep}
                lagging = {b: sorted(v) for b, v in views.items() if v != keep}
                if lagging:
                    agreed_since = None
                    last = "; ".join(f"broker {b} lists {v}" for b, v in sorted(lagging.items()))
                else:
                    now = time.monotonic()
                    agreed_since = now if agreed_since is None else agreed_since
                    if now - agreed_since >= settle_seconds:
                        return
            except KafkaException as exc:
                agreed_since = None
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                beyond = sorted(keep)
                raise LabError(f"shrink: metadata still lists brokers beyond {beyond} ({last})")
            time.sleep(0.2)
