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

`maxConcurrent` counts, besides the replica's own operations in progress, the other
replicas' (`in_progress`): a restart or decommission entered as acted on a pod another
replica judges and still in the cluster, unless the same attempt was entered again as
failed (`failed_after`: a replica that enters an operation and then fails to carry it
out says so, `ActionRecord.attempt`).

Dry runs are entered too, so that a dry run obeys the limits across replicas as the
real run would (its report is what the real run would have done): the rate limit counts
the pods dry runs would have restarted, and `maxConcurrent` counts another replica's
dry run as in progress while that replica still would carry it out. A dry run starts
no cooldown (the pod is not gone: the same decision comes again next round), so the
replica enters it again each round: `appended` keeps one dry-run entry per policy,
target and operation, the first record (so `merged` adds it once) with the time it was
last entered (`Entry.seen`), and `in_progress` counts it while that is younger than
`DRY_RUN_FRESH_ROUNDS` of the policy's rounds.

An entry is a `status.recentActions` entry (`reporting.record_entry`, read back with
`history.record_from_entry`) without its message, plus the policy, the replica that
wrote it and, for a dry run entered again, `seen`. Entries are kept for the rate
limit's hour, at most `LEDGER_MAX`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hangwatch_operator.decisions import RATE_WINDOW_SECONDS
from hangwatch_operator.history import (
    PENDING_CORDON_SECONDS,
    ActionRecord,
    History,
    record_from_entry,
)
from hangwatch_operator.operations import DISRUPTIVE, Operation, Outcome
from hangwatch_operator.reporting import record_entry
from hangwatch_operator.watched import CordonedNode, format_time, parse_time

LIMITS_LEASE = "hangwatch-limits"
ACTIONS_ANNOTATION = "hangwatch.dev/actions"
LEDGER_MAX = 400
"""Entries kept (newest): at about 250 bytes each, well inside the 256 KiB the API
server allows for an object's annotations."""
DRY_RUN_FRESH_ROUNDS = 2
"""Another replica's dry run counts as in progress while it entered it again within this
many of the policy's rounds (one round missed, e.g. a slow poll, does not drop it)."""


@dataclass(frozen=True)
class Entry:
    """One disruptive operation some replica carried out (or is about to)."""

    policy_key: str
    replica: str
    record: ActionRecord
    seen: float | None = None
    """A dry run's: when it was last entered (None: at `record.time`)."""

    @property
    def last_seen(self) -> float:
        return self.record.time if self.seen is None else self.seen


def entered(record: ActionRecord) -> bool:
    """Whether a record counts across replicas: an operation on a pod or node that was
    carried out, tried, or would have been (dry run); alerts and suppressed decisions
    are not."""
    return record.operation is not Operation.ALERT and record.outcome in {
        Outcome.ACTED,
        Outcome.FAILED,
        Outcome.DRY_RUN,
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
            entries.append(Entry(key, replica, record, parse_time(item.get("seen"))))
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
        item |= {"policy": entry.policy_key, "replica": entry.replica}
        if entry.seen is not None:
            item["seen"] = format_time(entry.seen)
        kept.append(item)
    return json.dumps(kept, separators=(",", ":"))


def appended(
    entries: Sequence[Entry], policy_key: str, replica: str, records: Iterable[ActionRecord]
) -> tuple[Entry, ...]:
    """The ledger with `replica`'s new `records` for `policy_key` (the entered ones); a
    dry run already entered (same policy, target and operation) is entered again: its
    first record kept, seen now."""
    kept = list(entries)
    new = []
    for record in records:
        if not entered(record):
            continue
        if record.outcome is Outcome.DRY_RUN:
            found = next(
                (i for i, e in enumerate(kept) if _same_dry_run(e, policy_key, record)), None
            )
            if found is not None:
                kept[found] = Entry(policy_key, replica, kept[found].record, record.time)
                continue
        new.append(Entry(policy_key, replica, record))
    return (*new, *kept)


def _same_dry_run(entry: Entry, policy_key: str, record: ActionRecord) -> bool:
    return (
        entry.policy_key == policy_key
        and entry.record.outcome is Outcome.DRY_RUN
        and entry.record.target == record.target
        and entry.record.operation is record.operation
    )


def failed_after(records: Iterable[ActionRecord]) -> list[ActionRecord]:
    """Of a round's carried-out decisions as they ended, the ones to enter again as
    failed (they were entered as acted before being carried out)."""
    return [r for r in records if entered(r) and r.outcome is Outcome.FAILED]


def in_progress(
    entries: Sequence[Entry],
    policy_key: str,
    elsewhere: Collection[str],
    now: float,
    fresh_seconds: float,
) -> frozenset[str]:
    """The pods of `policy_key` another replica judges (`elsewhere`: their keys, pods still
    in the cluster) on which a disruptive operation is in progress: entered as acted and
    not as failed since (until the pod is gone), or a dry run entered again within
    `fresh_seconds` (while that replica still would carry it out)."""
    ours = [e for e in entries if e.policy_key == policy_key]
    failed = {e.record.attempt for e in ours if e.record.outcome is Outcome.FAILED}
    busy = set()
    for entry in ours:
        record = entry.record
        if record.operation not in DISRUPTIVE or record.pod is None or record.pod not in elsewhere:
            continue
        acted = record.outcome is Outcome.ACTED and record.attempt not in failed
        fresh = 0 <= now - entry.last_seen < fresh_seconds
        if acted or (record.outcome is Outcome.DRY_RUN and fresh):
            busy.add(record.pod)
    return frozenset(busy)


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
        if (
            record.node is None
            or record.outcome is Outcome.DRY_RUN
            or now - record.time >= PENDING_CORDON_SECONDS
        ):
            continue
        if record.operation is Operation.CORDON_NODE and record.outcome is Outcome.ACTED:
            cordons[record.node] = CordonedNode(record.node, entry.policy_key, record.time)
        elif record.operation is Operation.UNCORDON_NODE:
            cordons.pop(record.node, None)
    return list(cordons.values())


def entered_elsewhere(
    entries: Sequence[Entry], policy_key: str, identity: str
) -> list[ActionRecord]:
    """The operations of `policy_key` other replicas entered (newest first), for the
    policy's status; their message names the replica (its Event has the details)."""
    return [
        dataclasses.replace(
            e.record, message=f"entered by operator replica {e.replica}; its Event has the details"
        )
        for e in entries
        if e.policy_key == policy_key and e.replica != identity
    ]
