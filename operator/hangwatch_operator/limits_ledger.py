"""The cluster-wide ledger of disruptive operations, kept in one Lease's annotation: pure.

With sharding (`OperatorSettings.shards` above 0) several replicas decide at once, each
for the pods of the shards it holds (`sharding`). The limits that count operations
across pods and nodes (`maxActionsPerApplicationPerHour`, `podCooldownSeconds`,
`maxConcurrent`, `maxCordonedNodes` and the operator's `max_cordoned_nodes`) must count
every replica's operations, not one replica's memory. So, before a replica carries out
a round's disruptive operations, it reads the ledger (the `hangwatch-limits` Lease),
decides with the ledger's entries merged into its history (`merged`), and adds
its own (`appended`) with a replace conditional on the resourceVersion it read. Of two
replicas deciding at once one write fails (HTTP 409) and that replica decides again
from the ledger the other one wrote, so no operation is carried out that the limits,
counted across replicas, would have suppressed. `remediation` does the I/O.

An entry is a `status.recentActions` entry (`reporting.record_entry`, read back with
`history.record_from_entry`) without its message, plus the policy and the replica
that wrote it. Entries are kept for the rate limit's hour, at most `LEDGER_MAX`.
Dry runs are not entered (they act on nothing; each replica counts its own).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hangwatch_operator.decisions import RATE_WINDOW_SECONDS
from hangwatch_operator.history import (
    PENDING_CORDON_SECONDS,
    ActionRecord,
    History,
    record_from_entry,
)
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.reporting import record_entry
from hangwatch_operator.watched import CordonedNode

LIMITS_LEASE = "hangwatch-limits"
ACTIONS_ANNOTATION = "hangwatch.dev/actions"
LEDGER_MAX = 400
"""Entries kept (newest): at about 250 bytes each, well inside the 256 KiB the API
server allows for an object's annotations."""


@dataclass(frozen=True)
class Entry:
    """One disruptive operation some replica carried out (or is about to)."""

    policy_key: str
    replica: str
    record: ActionRecord


def entered(record: ActionRecord) -> bool:
    """Whether a record counts across replicas: an operation on a pod or node that was
    carried out or tried (alerts, suppressed decisions and dry runs are not)."""
    return record.operation is not Operation.ALERT and record.outcome in {
        Outcome.ACTED,
        Outcome.FAILED,
    }


def decode(text: object) -> tuple[Entry, ...]:
    """The ledger from its annotation, newest first; malformed entries are left out
    (anyone allowed to update Leases can write it: it never raises)."""
    if not isinstance(text, str):
        return ()
    try:
        raw = json.loads(text)
    except ValueError:
        return ()
    entries = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, Mapping):
            continue
        key, replica = item.get("policy"), item.get("replica")
        if not isinstance(key, str) or "/" not in key or not isinstance(replica, str):
            continue
        record = record_from_entry(item, key.split("/", 1)[0])
        if record is not None and entered(record):
            entries.append(Entry(key, replica, record))
        if len(entries) >= LEDGER_MAX:
            break
    return tuple(sorted(entries, key=lambda e: -e.record.time))


def encode(entries: Iterable[Entry], now: float) -> str:
    """The annotation for `entries` (newest first), without those older than an hour."""
    kept: list[dict[str, Any]] = []
    for entry in sorted(entries, key=lambda e: -e.record.time):
        if now - entry.record.time >= RATE_WINDOW_SECONDS or len(kept) >= LEDGER_MAX:
            break
        item = record_entry(dataclasses.replace(entry.record, message=""))
        item.pop("message", None)
        kept.append({**item, "policy": entry.policy_key, "replica": entry.replica})
    return json.dumps(kept, separators=(",", ":"))


def appended(
    entries: Sequence[Entry], policy_key: str, replica: str, records: Iterable[ActionRecord]
) -> tuple[Entry, ...]:
    """The ledger with `replica`'s new `records` for `policy_key` (the entered ones)."""
    new = [Entry(policy_key, replica, r) for r in records if entered(r)]
    return (*new, *entries)


def merged(history: History, entries: Sequence[Entry], policy_key: str) -> History:
    """`history` with the ledger's entries of `policy_key`: what the limits count, as if
    this replica had carried them out itself. Its own entries too: a replica whose
    container restarted keeps its name (the pod's) but not its memory. An operation then
    shows twice (as remembered, and as entered, without its message); every limit counts
    distinct pods or nodes, so a twin never counts twice."""
    known = set(history.records)  # merged in an earlier round (records are values)
    found = [e.record for e in entries if e.policy_key == policy_key and e.record not in known]
    if not found:
        return history
    records = sorted((*found, *history.records), key=lambda r: -r.time)
    return dataclasses.replace(history, records=tuple(records))


def pending_cordons(entries: Sequence[Entry], now: float) -> list[CordonedNode]:
    """Nodes a replica cordoned so recently that the node watch may not show them yet
    (as `history.CordonLedger` within one replica), unless uncordoned since."""
    cordons: dict[str, CordonedNode] = {}
    for entry in reversed(entries):  # oldest first: a later uncordon undoes a cordon
        record = entry.record
        if record.node is None or now - record.time >= PENDING_CORDON_SECONDS:
            continue
        if record.operation is Operation.CORDON_NODE and record.outcome is Outcome.ACTED:
            cordons[record.node] = CordonedNode(record.node, entry.policy_key, record.time)
        elif record.operation is Operation.UNCORDON_NODE:
            cordons.pop(record.node, None)
    return list(cordons.values())
