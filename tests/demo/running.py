"""Runs the real `hangwatch demo` command for the demo tests, and reads its rows (not a
test module)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hangwatch.contracts import Operation
from hangwatch.verdicts import VERDICTS
from hangwatch_lab import netfilter


def run_demo(
    *scenarios: str, keep: Path, timeout_seconds: float = 280
) -> tuple[dict[str, dict[str, Any]], int]:
    """The scenarios' rows by name and the demo's pid; asserts exit 0, a row for each
    scenario and no other, and that no kernel rule of the demo's is left behind."""
    args = [a for name in scenarios for a in ("--scenario", name)]
    with subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "demo", *args, "--json", "--keep", str(keep)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out, err = proc.communicate(timeout=timeout_seconds)
    assert proc.returncode == 0, _failure(out, err, keep)
    assert netfilter.list_chains(proc.pid) == [], "the demo left kernel rules behind"
    rows = {r["scenario"]: r for r in json.loads(out)["scenarios"]}
    assert sorted(rows) == sorted(scenarios), (sorted(rows), scenarios)
    return rows, proc.pid


RESTART_VERDICTS = frozenset(
    str(parts.verdict)
    for parts in VERDICTS
    if parts.default_actions and Operation.RESTART in parts.default_actions
)
"""The verdicts on which the operator restarts an executor by default (from the one
declaration, hangwatch.verdicts.VERDICTS)."""


def verdicts_seen(row: dict[str, Any]) -> set[str]:
    """Every verdict some sidecar reported after the fault (a row's `changes`, each
    (seconds, "<executor> <verdict>"))."""
    return {change.split(" ", 1)[1] for _, change in row["changes"]}


def assert_never_restarted(name: str, row: dict[str, Any]) -> None:
    """A control's row: no restart verdict, no restart, at most an alert that it was
    silent, and every event written."""
    assert not verdicts_seen(row) & RESTART_VERDICTS, (name, row["changes"])
    assert row["restarts"] == 0 and row["action"] in ("none", "alert only (producer_silent)"), row
    assert row["ok"] and row["lost"] == 0 and row["events"] > 100, row


def _failure(out: str, err: str, keep: Path) -> str:
    """What a failed demo run says: each row's outcome, every failing row's problems, its
    sidecars' log lines in short and its reasons (from its JSON), else the end of its
    stderr."""
    try:
        rows = json.loads(out)["scenarios"]
    except (ValueError, KeyError, TypeError):
        return f"no JSON table; stderr ends:\n{err[-3000:]}"
    lines = [
        f"{r['scenario']}: ok={r['ok']} verdict={r['verdict']} action={r['action']} "
        f"lost={r['lost']} not_started={r.get('not_started')}"
        for r in rows
    ]
    for r in rows:
        if not r["ok"]:
            lines.append(f"{r['scenario']} problems: {r['problems']}")
            lines.extend(sidecar_log_lines(keep, r["scenario"]))
            lines.append(f"{r['scenario']} reasons: {r['reasons']}")
            lines.append(f"{r['scenario']} changes: {r['changes']}")
    return "\n".join(lines)


LOGGED = ("verdict", "error", "source", "spark_available", "tasks")
"""The fields of a sidecar's log line kept in a failure's summary (reasons are long and
already in the row)."""
TOLD = ("verdict", "view")
"""Log messages kept in a failure's summary: verdict changes and each view coming and
going (Spark's, the Python stacks'), which say what a sidecar could see."""


def sidecar_log_lines(keep: Path, scenario: str, limit: int = 8) -> list[str]:
    """A kept scenario's sidecar logs in short: of each, the last `limit` lines that tell
    a verdict or a view's change, as `<sidecar> <time> <message> <field>=<value>...`, so a
    failure says what each sidecar saw without the logs."""
    out = []
    for log in sorted(keep.glob(f"hangwatch-demo-{scenario}-*/sidecar-*.log")):
        told = []
        for raw in log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(raw)
                message = str(entry.get("msg", ""))
                fields = " ".join(f"{k}={entry[k]}" for k in LOGGED if k in entry)
                line = f"{str(entry.get('ts', ''))[11:23]} {message} {fields}"
            except (ValueError, AttributeError, TypeError):
                message, line = raw, raw
            if any(word in message for word in TOLD):
                told.append(f"  {log.stem}: {line[:200]}")
        out.extend(told[-limit:])
    for status in sorted(keep.glob(f"hangwatch-demo-{scenario}-*/sidecar-*.status.json")):
        out.append(f"  {status.name.split('.')[0]} last /status: {_spark_seen(status)}")
    return out


def _spark_seen(status: Path) -> str:
    """What a sidecar's last /status says of Spark's view: available or why not, tasks,
    and each Kafka producer thread's activity and how long it held."""
    try:
        doc = json.loads(status.read_text())
        spark = doc.get("spark") or {}
        threads = ", ".join(
            f"{t.get('role')} {t.get('activity')} {t.get('held_seconds', 0):.0f}s"
            for t in spark.get("producer_threads") or []
        )
        return (
            f"verdict={doc.get('verdict')} spark available={spark.get('available')} "
            f"error={spark.get('error')} tasks={spark.get('tasks_total')} "
            f"producer threads=[{threads}]"
        )[:300]
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        return f"unreadable ({exc})"
