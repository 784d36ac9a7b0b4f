"""The demo's actuation: what the operator's round decided, carried out on the local Spark
application, and noted for the table and the report.

A restart kills the executor's JVM (SIGTERM, SIGKILL after a grace period); Spark
launches a replacement and runs the lost tasks again. Nothing else is possible here (no
nodes to cordon, no decommission hook). What a scenario's first restart undoes in the
lab is the scenario's (`Scenario.on_first_restart`).
"""

from __future__ import annotations

import time
from dataclasses import replace

from hangwatch import kafka_errors
from hangwatch.contracts import Verdict
from hangwatch_demo.scenario_run import ScenarioRun, resumed
from hangwatch_operator.decisions import Decision
from hangwatch_operator.operations import Operation, Outcome
from hangwatch_operator.sidecar_status import PodReport

RESTART_GRACE_SECONDS = 2.0


def carry_out(run: ScenarioRun, decision: Decision) -> Decision:
    """The demo's actuation: a restart kills the executor's JVM; nothing else is possible
    here (no nodes to cordon, no decommission hook), so anything else fails."""
    if decision.operation is Operation.RESTART:
        return replace(decision, note=restart(run, decision))
    return replace(decision, outcome=Outcome.FAILED, note=f"the demo cannot {decision.operation}")


def restart(run: ScenarioRun, decision: Decision) -> str:
    assert decision.pod is not None
    executor = next(
        (e for e in run.setup.cluster.executors() if e.id == decision.pod.executor_id), None
    )
    pid = executor.pid if executor else "-"
    run.say(
        f"operator restarts {decision.pod.name} ({decision.verdict}): "
        f"killing executor JVM pid {pid}"
    )
    if executor is not None:
        run.setup.cluster.kill(executor, RESTART_GRACE_SECONDS)
    undone = run.setup.scenario.on_first_restart
    if undone is not None and not run.restarted and run.context is not None:
        undone(run.context)
    note = f"executor JVM pid {pid} killed"
    run.setup.record.action(time.time(), str(decision.operation), "acted", decision.pod.name, note)
    if run.setup.scenario.restart_helps:
        run.fault_ends(f"{decision.pod.name} restarted: a new client")
    run.restarted.append((decision.pod.name, str(decision.verdict)))
    if run.restart_at is None:
        run.restart_at = round(time.monotonic() - run.fault_at, 2)
    resumed(run)
    run.actions.append(f"restart {decision.pod.name} ({decision.verdict})")
    return note


def operate(run: ScenarioRun, reports: list[PodReport]) -> None:
    """One operator round on these reports: restarts happen, the rest is noted."""
    for decision in run.setup.operator.decide(reports, time.time(), lambda d: carry_out(run, d)):
        who = decision.pod.name if decision.pod else "-"
        if decision.topic is not None:  # said once per topic, whichever pods write it
            who = f"topic {decision.topic}"
        if decision.operation is Operation.ALERT:
            subject = alert_subject(decision.verdict, decision.reasons, decision.topic)
            note = f"alert {who} ({subject})"
        elif decision.outcome is Outcome.ACTED and decision.operation is Operation.RESTART:
            continue
        elif decision.outcome is Outcome.SUPPRESSED:
            note = f"{decision.operation} {who} suppressed: {decision.suppression}"
        else:
            note = f"{decision.operation} {who} {decision.outcome}"
        if note not in run.actions:
            run.actions.append(note)
            why = [str(decision.suppression or ""), decision.limit, decision.note]
            named = decision.verdict in NAMED_REFUSALS and decision.reasons
            run.setup.record.action(
                time.time(),
                str(decision.operation),
                str(decision.outcome),
                decision.pod.name if decision.pod else None,
                "; ".join(w for w in why if w)
                or f"verdict {decision.verdict}" + (f": {decision.reasons[0]}" if named else ""),
            )
            run.say(f"operator: {note}" + (f" - {decision.limit}" if decision.limit else ""))


NAMED_REFUSALS = frozenset({Verdict.WRITES_REJECTED, Verdict.PARTITIONS_UNWRITABLE})
"""Verdicts whose alert is recorded with the sidecar's first reason (what is refused)."""


def alert_subject(verdict: Verdict, reasons: tuple[str, ...], topic: str | None = None) -> str:
    """What an alert is about in the table: its verdict, for writes the cluster refuses
    the Kafka error the sidecar's first reason names (`kafka_errors`), for a topic the
    cluster refuses writes to (said once per topic) the topic."""
    if topic is not None:
        return f"{verdict}: topic {topic}"
    if verdict is Verdict.WRITES_REJECTED and reasons:
        named = kafka_errors.classify_message(reasons[0])
        if named is not None:
            return f"{verdict}: {named.exception}"
    return str(verdict)
