"""Kafka's own command-line tools run against the engine: client quotas
(ConfigCommand), the active controller (MetadataQuorumCommand), reassignments and
preferred elections (`KafkaTools`).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time

from hangwatch.errors import LabError, UsageError
from hangwatch_lab.kafka.admin import KafkaAdmin
from hangwatch_lab.kafka.nodes import (
    TOOL_OPTIONS,
    TOOL_TIMEOUT_SECONDS,
)

log = logging.getLogger(__name__)

CONFIG_COMMAND = {
    "3": "kafka.admin.ConfigCommand",
    "4": "org.apache.kafka.tools.ConfigCommand",
}
"""Kafka's ConfigCommand (`kafka-configs.sh`) per line: 4.0 moved it from core to tools."""

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
"""The client quotas `set_quota` accepts (Kafka's quota config names)."""


class KafkaTools(KafkaAdmin):
    """Kafka's admin tools, each a JVM run to its end."""

    def _tool(self, main: str, *args: str) -> str:
        """Run one of Kafka's own admin tools against the healthy brokers; its stdout."""
        command = self._java_command(TOOL_OPTIONS, main, *args, tools=True)
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            raise LabError(
                f"{main.rsplit('.', 1)[-1]} did not finish within {TOOL_TIMEOUT_SECONDS:.0f} s"
            ) from None
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
            raise LabError(
                f"{main.rsplit('.', 1)[-1]} failed (exit {proc.returncode}): {lines[-1][:300]}"
            )
        return proc.stdout

    def set_quota(self, client_id: str, **quota: float) -> None:
        """Set client quotas for a client id with Kafka's own ConfigCommand, e.g.
        `set_quota("slow", producer_byte_rate=2048)`: the brokers delay their answers to
        that client (and tell it how long: the throttle time) once it goes over."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", client_id):
            raise UsageError(f"invalid client id {client_id!r} (letters, digits, _ . -)")
        bad = sorted(set(quota) - set(QUOTA_KEYS))
        if bad or not quota:
            raise UsageError(f"quotas must be among {', '.join(QUOTA_KEYS)}, got {sorted(quota)}")
        if any(not value > 0 for value in quota.values()):
            raise UsageError(f"quota values must be > 0, got {quota}")
        settings = ",".join(f"{key}={value:g}" for key, value in sorted(quota.items()))
        self._tool(
            CONFIG_COMMAND[self.settings.kafka_line],
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "--alter",
            "--add-config",
            settings,
            "--entity-type",
            "clients",
            "--entity-name",
            client_id,
        )
        log.info("quota set", extra={"client_id": client_id, **quota})

    def active_controller(self) -> int:
        """The node id of the KRaft quorum's leader (the active controller)."""
        out = self._tool(
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "describe",
            "--status",
        )
        found = re.search(r"LeaderId:\s*(\d+)", out)
        if not found:
            raise LabError(f"could not read the active controller from: {out.strip()[:200]}")
        return int(found.group(1))

    def _reassign(self, assignment: dict[tuple[str, int], list[int]]) -> None:
        """Move partitions to the given replica lists (ReassignPartitionsCommand) and wait."""
        assert self.data_dir is not None
        plan = {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": replicas}
                for (t, p), replicas in sorted(assignment.items())
            ],
        }
        path = self.data_dir / f"reassign-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(plan))
        self._tool(
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            self._healthy_bootstrap(),
            "--reassignment-json-file",
            str(path),
            "--execute",
        )
        topics = {t for t, _ in assignment}
        self._wait_leaders(
            topics,
            "reassigning partitions",
            accept=lambda t, p, part: (
                (t, p) not in assignment
                or (
                    list(part.replicas) == assignment[(t, p)]
                    and set(part.isrs) <= set(part.replicas)
                )
            ),
            timeout=120,
        )

    def _preferred_election(self, partitions: list[tuple[str, int]]) -> None:
        """Make each partition's first replica its leader (LeaderElectionCommand, preferred)."""
        assert self.data_dir is not None
        path = self.data_dir / f"elect-{time.monotonic_ns()}.json"
        path.write_text(
            json.dumps({"partitions": [{"topic": t, "partition": p} for t, p in partitions]})
        )
        try:
            self._tool(
                "org.apache.kafka.tools.LeaderElectionCommand",
                "--bootstrap-server",
                self._healthy_bootstrap(),
                "--election-type",
                "preferred",
                "--path-to-json-file",
                str(path),
            )
        except LabError as exc:
            # A partition already led by its preferred replica is reported as an error.
            if "already elected" not in str(exc).lower() and "ELECTION_NOT_NEEDED" not in str(exc):
                raise

    def _lead_from(self, topic: str, partitions: list[int], broker: int) -> None:
        """Make `broker` the leader of the partitions: it goes first in their replica
        lists (a real reassignment), then a preferred election."""
        md = self._metadata()
        if topic not in md.topics:
            raise UsageError(f"unknown topic {topic!r}")
        assignment = {}
        for p in partitions:
            part = md.topics[topic].partitions.get(p)
            if part is None:
                raise UsageError(f"topic {topic} has no partition {p}")
            replicas = [r for r in part.replicas if r != broker]
            if broker not in part.replicas and replicas:
                replicas.pop()  # keep the replication factor
            assignment[(topic, p)] = [broker, *replicas]
        self._reassign(assignment)
        self._preferred_election(list(assignment))
        self._wait_leaders(
            {topic},
            f"electing broker {broker} leader of {topic}",
            accept=lambda t, p, part: p not in partitions or part.leader == broker,
        )
