"""Spark's executor failure budget, from the driver's REST answers (pure).

Spark 3.5 and later count the executors that fail (`ExecutorFailureTracker`) and, on
Kubernetes and YARN, end the application with exit code 11
(EXCEED_MAX_EXECUTOR_FAILURES) once *more than* `spark.executor.maxNumFailures` failed
within `spark.executor.failuresValidityInterval`. Restarting a wedged executor deletes
its pod: one more failure. So the sidecar reports the remaining budget and the
operator refuses a restart that would exhaust it (`hangwatch_operator.decisions`).

Spark's defaults (3.5 to 4.x, `ExecutorFailureTracker.maxNumExecutorFailures`):
- `spark.executor.maxNumFailures`: max(3, 2 x N) with N = the executor count the
  application may reach: `spark.streaming.dynamicAllocation.maxExecutors` when DStream
  dynamic allocation is on, else `spark.dynamicAllocation.maxExecutors` (default
  unbounded: the budget is then unbounded too) when dynamic allocation is on, else
  `spark.executor.instances` (default 0, so 3);
- `spark.executor.failuresValidityInterval`: unset, failures never expire.
Before 3.5 only YARN had such a limit (`spark.yarn.max.executor.failures`): on
Kubernetes nothing ends the application, and `max_failures` is None.

Inputs are the driver's answers (another program's JSON): `/api/v1/version`,
`/applications/<app>/environment` (`sparkProperties`: [name, value] pairs) and
`/applications/<app>/allexecutors` (dead executors too: `isActive`, `removeTime`,
`removeReason`). A wrong type, an absurd number or a malformed time is an
`AnswerError` (one line), never a wrong budget. Dead executors count as failures unless
Spark says they were decommissioned: when unsure, hangwatch counts more failures, and
refuses a restart sooner, never later.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hangwatch.wire.status import FailureBudget
from hangwatch_sidecar.spark.answers import AnswerError

MAX_FAILURES = "spark.executor.maxNumFailures"
VALIDITY_INTERVAL = "spark.executor.failuresValidityInterval"
FIRST_COUNTING_VERSION = (3, 5)
"""The first Spark that counts executor failures outside YARN."""
MAX_PROPERTIES = 10_000
MAX_EXECUTORS = 100_000
INT_MAX = 2**31 - 1
MAX_SECONDS = 1e9
"""Longest interval taken (the bound of a duration in /status)."""
_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})(?:\.\d{1,4})?(?:[-+.][0-9A-Za-z.+-]{0,64})?$")
_TIME = re.compile(r"^(\d{1,18})\s*(us|ms|s|m|min|h|d)?$")
_TIME_UNITS = {
    "us": 1e-6, "ms": 1e-3, None: 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
    "d": 86400.0,
}  # fmt: skip
_REMOVE_TIME = "%Y-%m-%dT%H:%M:%S.%f"


@dataclass(frozen=True)
class BudgetSettings:
    """What the application's settings say about its failure budget."""

    spark_version: str
    max_failures: int | None
    """None: this Spark ends no application for executor failures."""
    configured: bool
    validity_seconds: float | None


def spark_version(doc: Any) -> tuple[str, tuple[int, int]]:
    """The driver's Spark version from `/api/v1/version` (`{"spark": "4.2.0"}`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("spark"), str):
        raise AnswerError("version: spark is not a string")
    text: str = doc["spark"]
    match = _VERSION.match(text)
    if match is None:
        raise AnswerError(f"version: {text[:40]!r} is not a Spark version")
    return text, (int(match.group(1)), int(match.group(2)))


def spark_properties(doc: Any) -> dict[str, str]:
    """The application's Spark properties from `/environment`."""
    if not isinstance(doc, dict):
        raise AnswerError("environment: not a JSON object")
    pairs = doc.get("sparkProperties")
    if not isinstance(pairs, list) or len(pairs) > MAX_PROPERTIES:
        raise AnswerError("environment: sparkProperties is not a list of properties")
    found: dict[str, str] = {}
    for pair in pairs:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(x, str) and len(x) <= 4096 for x in pair)
        ):
            raise AnswerError("environment: a Spark property is not a [name, value] pair")
        found[pair[0]] = pair[1]
    return found


MAX_CLASSPATH_ENTRIES = 10_000
"""Classpath entries of an `/environment` answer read at most."""


def classpath_entries(doc: Any) -> tuple[str, ...]:
    """The application's classpath entries from `/environment` (`classpathEntries`: [path,
    source] pairs; a jar added with `--packages` is a `spark://` URL); what is not such a
    pair is left out (the answer's other parts are judged by `spark_properties`)."""
    pairs = doc.get("classpathEntries") if isinstance(doc, dict) else None
    if not isinstance(pairs, list):
        return ()
    return tuple(
        pair[0][:4096]
        for pair in pairs[:MAX_CLASSPATH_ENTRIES]
        if isinstance(pair, list) and pair and isinstance(pair[0], str)
    )


def _int(props: Mapping[str, str], name: str, default: int) -> int:
    text = props.get(name)
    if text is None:
        return default
    if not re.fullmatch(r"-?\d{1,10}", text.strip()) or not -INT_MAX - 1 <= int(text) <= INT_MAX:
        raise AnswerError(f"environment: {name}={text[:40]!r} is not an int")
    return int(text)


def _enabled(props: Mapping[str, str], name: str) -> bool:
    return props.get(name, "false").strip().lower() == "true"


def default_max_failures(props: Mapping[str, str]) -> int:
    """Spark's own default of `spark.executor.maxNumFailures` for these settings."""
    if _enabled(props, "spark.streaming.dynamicAllocation.enabled"):
        executors = _int(props, "spark.streaming.dynamicAllocation.maxExecutors", INT_MAX)
    elif _enabled(props, "spark.dynamicAllocation.enabled"):
        executors = _int(props, "spark.dynamicAllocation.maxExecutors", INT_MAX)
    else:
        executors = _int(props, "spark.executor.instances", 0)
    return max(3, INT_MAX if executors > INT_MAX // 2 else 2 * executors)


def parse_seconds(name: str, text: str) -> float:
    """A Spark time setting (`30s`, `1h`, `500` = milliseconds) in seconds."""
    match = _TIME.match(text.strip().lower())
    if match is None:
        raise AnswerError(f"environment: {name}={text[:40]!r} is not a time")
    seconds = int(match.group(1)) * _TIME_UNITS[match.group(2)]
    if seconds > MAX_SECONDS:  # /status carries durations up to 10^9 s
        raise AnswerError(f"environment: {name}={text[:40]!r} is out of range")
    return seconds


def budget_settings(version: tuple[str, tuple[int, int]], environment: Any) -> BudgetSettings:
    """The budget's settings from the version and `/environment` answers."""
    text, number = version
    props = spark_properties(environment)
    if number < FIRST_COUNTING_VERSION:
        return BudgetSettings(text, None, False, None)
    configured = MAX_FAILURES in props
    limit = _int(props, MAX_FAILURES, 0) if configured else default_max_failures(props)
    validity = props.get(VALIDITY_INTERVAL)
    seconds = None if validity is None else parse_seconds(VALIDITY_INTERVAL, validity)
    return BudgetSettings(text, max(0, limit), configured, seconds)


def remove_time(text: str) -> float:
    """Epoch seconds of Spark's `removeTime` (`2026-05-09T10:15:00.123GMT`)."""
    stamp = text.removesuffix("GMT").removesuffix("Z")
    try:
        parsed = datetime.datetime.strptime(stamp, _REMOVE_TIME)
    except ValueError:
        raise AnswerError(f"allexecutors: removeTime {text[:40]!r} is not a time") from None
    return parsed.replace(tzinfo=datetime.UTC).timestamp()


def failed_executors(doc: Any, now: float, validity_seconds: float | None) -> int:
    """Executors of `/allexecutors` that ended (not decommissioned), within the interval."""
    if not isinstance(doc, list) or len(doc) > MAX_EXECUTORS:
        raise AnswerError("allexecutors: not a list of executors")
    failed = 0
    for entry in doc:
        if not isinstance(entry, dict) or not isinstance(entry.get("isActive", True), bool):
            raise AnswerError("allexecutors: an executor is not an object with isActive")
        if entry.get("id") == "driver" or entry.get("isActive", True):
            continue
        reason = entry.get("removeReason") or ""
        if not isinstance(reason, str):
            raise AnswerError("allexecutors: removeReason is not a string")
        if "decommission" in reason.lower():
            continue
        if validity_seconds is not None:
            removed = entry.get("removeTime")
            if not isinstance(removed, str):
                raise AnswerError("allexecutors: a dead executor has no removeTime")
            if remove_time(removed) < now - validity_seconds:
                continue
        failed += 1
    return failed


def failure_budget(settings: BudgetSettings, failures: int) -> FailureBudget:
    """The budget as /status carries it."""
    limit = settings.max_failures
    return FailureBudget(
        spark_version=settings.spark_version,
        max_failures=limit,
        configured=settings.configured,
        validity_seconds=settings.validity_seconds,
        failures=failures,
        remaining=None if limit is None or limit >= INT_MAX else max(-INT_MAX, limit - failures),
    )
