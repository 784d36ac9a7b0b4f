"""The driver's REST answers, checked and turned into typed values (pure).

Fed by `spark.client` with decoded JSON from the driver's `/api/v1` (an answer that is
not JSON never gets here). Each function returns a value or raises `AnswerError` with
one line naming what is wrong: the driver is another program, and a wrong type, a
negative or absurd count or a missing field must not reach the verdict engine.

- `/applications` -> the application ids the driver serves;
- `/applications/<app>/stages/<stage>/<attempt>?details=false` -> `StagePeers` counts;
- `.../taskSummary?quantiles=0.5` -> the median duration of the stage's finished tasks;
- `/applications/<app>/executors` -> this executor's `ExecutorCounts` (used only when
  no thread dump can be had); `/allexecutors` -> its failed task count;
- `/applications/<app>/stages?status=active&status=failed` -> the stage attempts with
  failed tasks; `.../taskList?status=FAILED` -> this executor's `FailedAttempt`s.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator
from typing import Any

from hangwatch_sidecar.spark.types import MAX_ERROR_CHARS, ExecutorCounts, FailedAttempt, StagePeers

MAX_COUNT = 2**53
"""Counts beyond this are not counts (JSON's exact integer range)."""
MAX_SECONDS = 10 * 365 * 24 * 3600.0
"""Durations beyond ten years are not durations."""
MAX_IDS = 1024
"""Application or executor entries read from one list at most."""


class AnswerError(ValueError):
    """A REST answer that is not what Spark sends (one line)."""


def _object(doc: Any, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise AnswerError(f"{what}: not a JSON object")
    return doc


def _objects(doc: Any, what: str) -> Iterator[dict[str, Any]]:
    """The first `MAX_IDS` entries of a JSON list, each checked to be an object as it is
    reached; AnswerError at once when `doc` is not a list."""
    if not isinstance(doc, list):
        raise AnswerError(f"{what}: not a JSON list")
    return (_object(entry, what) for entry in doc[:MAX_IDS])


def _count(doc: dict[str, Any], key: str, what: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_COUNT:
        raise AnswerError(f"{what}: {key} is not a count ({type(value).__name__})")
    return value


def _text(doc: dict[str, Any], key: str, what: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise AnswerError(f"{what}: {key} is not a short string")
    return value


def application_ids(doc: Any) -> list[str]:
    """Ids of the applications listed by `/applications`."""
    return [_text(a, "id", "applications") for a in _objects(doc, "applications")]


def stage_peers(doc: Any) -> StagePeers:
    """A stage attempt's counts from `/stages/<stage>/<attempt>?details=false`."""
    what = "stage"
    stage = _object(doc, what)
    return StagePeers(
        stage_id=_count(stage, "stageId", what),
        attempt=_count(stage, "attemptId", what),
        tasks=_count(stage, "numTasks", what),
        active=_count(stage, "numActiveTasks", what),
        complete=_count(stage, "numCompleteTasks", what),
        failed=_count(stage, "numFailedTasks", what),
        killed=_count(stage, "numKilledTasks", what),
    )


def median_duration_seconds(doc: Any) -> float:
    """The median duration of a stage's successful tasks from `taskSummary?quantiles=0.5`
    (Spark reports milliseconds)."""
    what = "task summary"
    summary = _object(doc, what)
    durations = summary.get("duration")
    if not isinstance(durations, list) or len(durations) != 1:
        raise AnswerError(f"{what}: duration is not one quantile")
    (value,) = durations
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AnswerError(f"{what}: duration is not a number")
    seconds = float(value) / 1000.0
    if not math.isfinite(seconds) or not 0.0 <= seconds <= MAX_SECONDS:
        raise AnswerError(f"{what}: duration {value!r} is out of range")
    return seconds


def executor_counts(doc: Any, executor_id: str) -> ExecutorCounts:
    """This executor's task counts from the `/executors` list; AnswerError when it is not
    listed."""
    counts = listed_counts(doc, executor_id, "executors")
    if counts is None:
        raise AnswerError(
            f"executors: executor {executor_id} is not listed (gone, or not yet added)"
        )
    return counts


def listed_counts(doc: Any, executor_id: str, what: str = "allexecutors") -> ExecutorCounts | None:
    """This executor's task counts from `/executors` or `/allexecutors` (`what` names the
    list in errors); None when it is not listed."""
    for executor in _objects(doc, what):
        if executor.get("id") == executor_id:
            return ExecutorCounts(
                active_tasks=_count(executor, "activeTasks", what),
                failed_tasks=_count(executor, "failedTasks", what),
                completed_tasks=_count(executor, "completedTasks", what),
            )
    return None


def stages_with_failures(doc: Any) -> list[tuple[int, int]]:
    """(stage, attempt) of the listed stages that have failed tasks, newest first."""
    what = "stages"
    found = []
    for stage in _objects(doc, what):
        if _count(stage, "numFailedTasks", what) > 0:
            found.append((_count(stage, "stageId", what), _count(stage, "attemptId", what)))
    return sorted(found, reverse=True)


def _ended(task: dict[str, Any], what: str) -> float | None:
    """`launchTime` (`2026-05-09T10:15:00.123GMT`) + `duration` (ms) in Unix seconds."""
    launched = task.get("launchTime")
    if not isinstance(launched, str):
        return None
    stamp = launched.removesuffix("GMT").removesuffix("Z")
    try:
        at = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        raise AnswerError(f"{what}: launchTime {launched[:40]!r} is not a time") from None
    duration = task.get("duration", 0)
    if isinstance(duration, bool) or not isinstance(duration, int) or not 0 <= duration < MAX_COUNT:
        raise AnswerError(f"{what}: duration is not a count")
    return at.replace(tzinfo=datetime.UTC).timestamp() + min(duration / 1000.0, MAX_SECONDS)


def failed_attempts(
    doc: Any, executor_id: str, stage: tuple[int, int]
) -> tuple[FailedAttempt, ...]:
    """This executor's failed attempts from a stage's `taskList?status=FAILED`."""
    what = "task list"
    found = []
    for task in _objects(doc, what):
        if task.get("executorId") != executor_id or task.get("status") != "FAILED":
            continue
        error = task.get("errorMessage", "")
        if not isinstance(error, str):
            raise AnswerError(f"{what}: errorMessage is not a string")
        found.append(
            FailedAttempt(
                task_id=_count(task, "taskId", what),
                stage_id=stage[0],
                stage_attempt=stage[1],
                index=_count(task, "index", what),
                attempt=_count(task, "attempt", what),
                error=error[:MAX_ERROR_CHARS],
                ended_ts=_ended(task, what),
            )
        )
    return tuple(found)
