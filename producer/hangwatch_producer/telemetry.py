"""The producer telemetry file: identity, document builder, statistics trimming and writer.

The producer wrapper's telemetry publisher (`hangwatch_producer.publisher`) feeds this
module: at every librdkafka statistics event its thread takes a `Snapshot`
(`hangwatch_producer.snapshot`) of the producer and calls
`encode_document(snapshot, raw_statistics, max_bytes)`, a pure function, then
`TelemetryFile.write()` replaces the file atomically. The hangwatch sidecar reads
these files; the document's types, bounds and file names are `hangwatch_producer.wire.telemetry`
(one definition for both sides), `docs/telemetry.md` is the prose. Everything except
`TelemetryFile`, `warn_once` and `spark_task_identity` is pure and tested without Kafka.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hangwatch_producer import telemetry_files
from hangwatch_producer.secrets import REDACTED
from hangwatch_producer.snapshot import Snapshot
from hangwatch_producer.wire import telemetry as wire
from hangwatch_producer.wire.telemetry import (
    DETAIL_LEVELS,
    MAX_LIST,
    MAX_STRING,
    MINIMAL_LIST,
    SCHEMA_VERSION,
    WireFormatError,
)

__all__ = [
    "DETAIL_LEVELS",
    "MAX_LIST",
    "MAX_STRING",
    "MINIMAL_LIST",
    "SCHEMA_VERSION",
]

log = logging.getLogger(__name__)

_TOTALS = ("txerrs", "req_timeouts")
"""Statistics the wrapper sums over all brokers."""
_NESTED = ("eos", "brokers", "topics")
_TOP_LEVEL = tuple(
    name for name in wire.field_names(wire.Statistics) if name not in (*_TOTALS, *_NESTED)
)
_EOS = wire.field_names(wire.Eos)
_BROKER_MINIMAL = ("name", "nodeid", "state")
_BROKER = tuple(name for name in wire.field_names(wire.BrokerStats) if name != "rtt")
_RTT = wire.field_names(wire.Rtt)
_PARTITION_COMPACT = ("leader", "msgq_cnt", "xmit_msgq_cnt", "msgs_inflight")
_PARTITION = wire.field_names(wire.PartitionStats)
_QUEUE_COUNTS = ("msgq_cnt", "xmit_msgq_cnt", "msgs_inflight")


def environment_identity(environ: Mapping[str, str]) -> dict[str, Any]:
    """Pod, namespace, node, application and executor ids from the environment (None if unset)."""

    def env(*names: str) -> str | None:
        for name in names:
            if value := environ.get(name):
                return value[:MAX_STRING]
        return None

    return {
        "pod": env("HANGWATCH_POD_NAME"),
        "namespace": env("HANGWATCH_POD_NAMESPACE"),
        "node": env("HANGWATCH_NODE_NAME"),
        "application_id": env("SPARK_APPLICATION_ID"),
        "executor_id": env("SPARK_EXECUTOR_ID", "HANGWATCH_EXECUTOR_ID"),
    }


def producer_identity(
    environ: Mapping[str, str],
    task: Mapping[str, Any] | None,
    *,
    pid: int,
    number: int,
    client_id: str,
    hostname: str,
) -> dict[str, Any]:
    """The `identity` object of the document (docs/telemetry.md), from its sources."""
    identity = environment_identity(environ)
    task_fields = dict(task) if task is not None else None
    app_from_task = task_fields.pop("application_id", None) if task_fields is not None else None
    identity["application_id"] = identity["application_id"] or app_from_task
    identity.update(
        hostname=hostname[:MAX_STRING],
        pid=pid,
        producer=number,
        client_id=client_id[:MAX_STRING],
        task=task_fields,
    )
    return identity


def spark_task_identity() -> dict[str, Any] | None:
    """The running Spark task (stage, partition, attempt), None outside a Spark task.

    pyspark is only consulted when the process already imported it (a Python worker
    has), so the wrapper never imports pyspark itself.
    """
    pyspark = sys.modules.get("pyspark")
    task_context = getattr(pyspark, "TaskContext", None)
    if task_context is None:
        return None
    try:
        ctx = task_context.get()
        if ctx is None:
            return None
        return {
            "stage": ctx.stageId(),
            "partition": ctx.partitionId(),
            "attempt": ctx.attemptNumber(),
            "task_attempt_id": ctx.taskAttemptId(),
            "application_id": ctx.getLocalProperty("spark.app.id"),
        }
    except (AttributeError, TypeError, ValueError, RuntimeError) as exc:
        log.debug("no Spark task context", extra={"error": str(exc)})
        return None


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced by the redaction marker, cut to MAX_STRING."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text[:MAX_STRING]


def json_safe_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Configuration values as bounded JSON scalars (anything else becomes its type name)."""
    return {
        str(key)[:MAX_STRING]: _json_scalar(value)
        for key, value in sorted(config.items())[: wire.MAX_CONFIG_ENTRIES]
    }


def _json_scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value[: wire.MAX_CONFIG_VALUE]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return f"<{type(value).__name__}>"


def _pick(source: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source}


def trim_statistics(raw: Mapping[str, Any], level: str = "full") -> dict[str, Any] | None:
    """librdkafka statistics without histograms, reduced to `level` (see DETAIL_LEVELS).

    full: top level, eos, per broker state/queues/errors and rtt summary, per partition
    leader/queues/counters; compact: partitions keep leader and queue counts only;
    topics: partitions are replaced by per-topic sums and the list of leaderless
    partitions; brokers: brokers keep name, nodeid and state only; minimal: None.
    """
    if level == "minimal":
        return None
    brokers = raw.get("brokers") or {}
    stats = _pick(raw, _TOP_LEVEL)
    stats["txerrs"] = sum(int(b.get("txerrs", 0)) for b in brokers.values())
    stats["req_timeouts"] = sum(int(b.get("req_timeouts", 0)) for b in brokers.values())
    if isinstance(raw.get("eos"), Mapping):
        stats["eos"] = _pick(raw["eos"], _EOS)
    stats["brokers"] = {name: _trim_broker(b, level) for name, b in brokers.items()}
    stats["topics"] = {name: _trim_topic(t, level) for name, t in (raw.get("topics") or {}).items()}
    return stats


def _trim_broker(broker: Mapping[str, Any], level: str) -> dict[str, Any]:
    if level == "brokers":
        return _pick(broker, _BROKER_MINIMAL)
    out = _pick(broker, _BROKER)
    if isinstance(broker.get("rtt"), Mapping):
        out["rtt"] = _pick(broker["rtt"], _RTT)
    return out


def _trim_topic(topic: Mapping[str, Any], level: str) -> dict[str, Any]:
    out = _pick(topic, ("topic", "age", "metadata_age"))
    partitions: Mapping[str, Mapping[str, Any]] = topic.get("partitions") or {}
    if level in ("full", "compact"):
        keys = _PARTITION if level == "full" else _PARTITION_COMPACT
        out["partitions"] = {pid: _pick(p, keys) for pid, p in partitions.items()}
        return out
    real = [p for pid, p in partitions.items() if pid != "-1"]
    out["partition_count"] = len(real)
    leaderless = sorted(int(p.get("partition", -1)) for p in real if p.get("leader", -1) < 0)
    out["leaderless_count"] = len(leaderless)
    out["leaderless"] = leaderless[:MAX_LIST]
    for key in _QUEUE_COUNTS:
        out[key] = sum(int(p.get(key, 0)) for p in partitions.values())
    return out


def document(
    snapshot: Snapshot, stats: Mapping[str, Any] | None, detail: str = "full"
) -> wire.TelemetryDocument:
    """The typed telemetry document for a snapshot and trimmed statistics.

    Raises `WireFormatError` when a part is out of the contract's bounds (a caller then
    tries a lower detail level).
    """
    minimal = detail == "minimal"
    list_cap = MINIMAL_LIST if minimal else MAX_LIST
    errors = sorted(snapshot.error_counts.items(), key=lambda kv: -kv[1])[:list_cap]
    as_is = ("seq", "ts", "monotonic", "started_ts", "interval_seconds", "state")
    return wire.TelemetryDocument(
        **{name: getattr(snapshot, name) for name in as_is},
        detail=detail,
        identity=wire.part(wire.Identity, dict(snapshot.identity)),
        counters=wire.part(wire.Counters, dict(snapshot.counters)),
        last_delivery_ts=snapshot.last_delivery_ts,
        last_error=wire.part(wire.LastError, dict(snapshot.last_error))
        if snapshot.last_error
        else None,
        error_counts={code[:MAX_STRING]: count for code, count in errors},
        errors=[
            wire.ErrorSeen(
                code=e.code[:MAX_STRING],
                topic=e.topic[:MAX_STRING],
                count=e.count,
                first_ts=e.first_ts,
                last_ts=e.last_ts,
            )
            for e in snapshot.errors_seen[:list_cap]
        ],
        throttle=None
        if snapshot.throttle is None
        else wire.Throttle(
            count=snapshot.throttle.count,
            last_ts=snapshot.throttle.last_ts,
            last_seconds=snapshot.throttle.last_seconds,
            broker=snapshot.throttle.broker[:MAX_STRING],
        ),
        callbacks=wire.part(wire.Callbacks, dict(snapshot.callbacks)),
        bootstrap=[a[:MAX_STRING] for a in snapshot.bootstrap[:list_cap]],
        topics=[t[:MAX_STRING] for t in sorted(snapshot.topics)[:list_cap]],
        topic_count=len(snapshot.topics),
        wrapper=wire.part(wire.Wrapper, dict(snapshot.wrapper)),
        config=None if minimal else wire.part(wire.ConfigMap, dict(snapshot.config)),
        acks=wire.acks_of(dict(snapshot.config)),
        stats_received_ts=snapshot.stats_received_ts,
        stats=None if stats is None else wire.part(wire.Statistics, stats),
    )


def build_document(
    snapshot: Snapshot, stats: Mapping[str, Any] | None, detail: str = "full"
) -> dict[str, Any]:
    """The telemetry document (schema SCHEMA_VERSION) as JSON values (see `document`)."""
    return wire.to_builtins(document(snapshot, stats, detail))


def encode_document(
    snapshot: Snapshot, raw_stats: Mapping[str, Any] | None, max_bytes: int
) -> bytes:
    """The document as compact JSON bytes, detail dropped level by level until <= max_bytes.

    A level whose parts break the contract's bounds (an unexpected statistics value) is
    skipped like one that is too large.
    """
    problem = ""
    for level in DETAIL_LEVELS:
        stats = None if raw_stats is None else trim_statistics(raw_stats, level)
        try:
            data = wire.encode(document(snapshot, stats, level))
        except WireFormatError as exc:
            problem = f"telemetry document at detail {level} is invalid: {exc}"
            continue
        if len(data) <= max_bytes:
            return data
        problem = f"minimal telemetry document is {len(data)} bytes > {max_bytes}"
    raise ValueError(problem)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str, **fields: Any) -> bool:
    """Log `message` as a warning the first time `key` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    log.warning(message, extra=fields)
    return True


class TelemetryFile:
    """One producer's telemetry file, replaced atomically (temp file + rename in the same dir).

    Next to it, `<name>.lock` is held with flock(LOCK_EX) for the producer's lifetime: the
    sidecar tells a live producer from a crashed one by trying to take that lock (the
    kernel drops it when the process dies, across containers sharing the volume). When it
    first takes its lock, it removes the files of producers that died without closing
    (their lock is free): the sidecar only reads. A failed write is logged once per
    directory and process (`warn_once`) and retried at the next statistics event:
    telemetry problems never stop the producer.
    """

    def __init__(self, directory: str, name: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / name
        self.lock_path = self.directory / wire.lock_name(wire.key_of(name) or name)
        self._tmp = self.directory / wire.temp_name(name)
        self._lock_fd: int | None = None
        self.writes = 0
        self.failures = 0

    def _hold_lock(self) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(self.lock_path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        self._lock_fd = fd

    def write(self, data: bytes) -> bool:
        """Replace the file with `data`; False (after one warning per process) on failure."""
        try:
            if self._lock_fd is None:
                # The leaf directory is created (never its parents): a relative
                # directory in each Spark standalone executor's own work directory.
                self.directory.mkdir(exist_ok=True)
                self._hold_lock()
                self._remove_dead_producers()
            with open(self._tmp, "wb") as fh:
                fh.write(data)
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.failures += 1
            warn_once(
                f"telemetry:{self.directory}",
                "cannot write producer telemetry; producing continues without it",
                telemetry_dir=str(self.directory),
                problem=self._problem(exc),
            )
            return False
        self.writes += 1
        return True

    def _remove_dead_producers(self) -> None:
        """The files of producers that died without closing go when the next one opens."""
        removed = telemetry_files.remove_dead_producers(self.directory)
        if removed:
            log.info(
                "removed the telemetry of producers that exited without closing",
                extra={"telemetry_dir": str(self.directory), "producers": removed},
            )

    def _problem(self, exc: OSError) -> str:
        if not self.directory.exists():
            return "directory does not exist"
        if not self.directory.is_dir():
            return "not a directory"
        return f"{type(exc).__name__}: {exc.strerror or exc}"

    def remove(self) -> None:
        """Delete the file, any leftover temp file, then the lock file, and release the lock."""
        mine = (
            (self.path, self._tmp)
            if self._lock_fd is None
            else (self.path, self._tmp, self.lock_path)
        )
        telemetry_files.remove_files(*mine)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
