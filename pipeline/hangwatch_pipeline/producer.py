"""The Kafka producer wrapper PySpark tasks use: at-least-once per task, with telemetry.

Inside `foreachPartition`, `mapPartitions` or `foreachBatch` a job writes::

    with hangwatch_pipeline.producer({"bootstrap.servers": brokers}) as p:
        for row in rows:
            p.send("events", row.value, key=row.key)

Leaving the block flushes within a bounded time and raises `DeliveryFailed` (counts
and first errors) unless every message was acknowledged, so Spark retries the task
and nothing is dropped silently. An exception inside the block purges what is still
queued and propagates unchanged (the task fails and is retried).

Threads and the callback rule (the lesson of incident S4, where a delivery callback
called a blocking send on the client's only I/O thread):

* the *poll thread* is the only thread that calls librdkafka's poll. It runs the
  wrapper's own delivery, error and statistics callbacks, which only record
  outcomes and copy data; nothing the wrapper runs there blocks;
* the job's callbacks (`on_delivery`, `error_cb`, `throttle_cb`) never run on the
  poll thread: they are queued to a separate *callback thread*. A job callback that
  blocks (or even calls `send()` and `flush()`, the S4 pattern) delays only later job
  callbacks; delivery and the heartbeat go on, and telemetry reports the stuck
  callback (`callbacks.pending`, `callbacks.running_seconds`);
* the *telemetry thread* writes the telemetry file after each statistics event.

Heartbeat contract (what the sidecar relies on): the telemetry file is refreshed, and
its `seq` increases, once per `statistics.interval.ms` *only while the poll thread
serves librdkafka's queue*. A healthy idle producer keeps refreshing it. If anything
blocks the poll thread (librdkafka itself, the GIL held for long, or a `logger` /
`oauth_cb` the job passed through, which confluent-kafka runs there), the file stops
changing while the process lives: that is the `producer_hung` heartbeat signal.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from hangwatch import __version__
from hangwatch.errors import HangwatchError, UsageError
from hangwatch.secrets import is_secret_key, redact
from hangwatch.wire import telemetry as wire
from hangwatch_pipeline import telemetry
from hangwatch_pipeline.settings import (
    EffectiveConfig,
    ProducerSettings,
    build_config,
    default_client_id,
)

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[KafkaError | None, Message], None]
"""`on_delivery(err, msg)`: err is None on success; runs on the wrapper's callback thread."""

ERROR_LOG_INTERVAL_SECONDS = 60.0
"""The same client error code is logged at most once per this interval (with a count)."""

_numbers = itertools.count(1)


class ProducerError(HangwatchError):
    """A producer of a Spark task could not guarantee its messages were delivered."""


class DeliveryFailed(ProducerError):
    """Some messages were not acknowledged: the task must fail so that Spark retries it."""

    def __init__(self, reason: str, counters: Counters, errors: list[str]) -> None:
        self.reason = reason
        self.counters = counters
        self.errors = errors
        distinct = collections.Counter(errors)
        shown = [e if n == 1 else f"{e} (x{n})" for e, n in list(distinct.items())[:3]]
        first = f"; first errors: {'; '.join(shown)}" if errors else ""
        super().__init__(
            f"{reason}: {counters.unacknowledged} unacknowledged and {counters.failed} failed "
            f"of {counters.enqueued} messages (delivered {counters.delivered}){first}"
        )


class CallbackError(ProducerError):
    """The job's own delivery callbacks raised, or had not finished when the producer closed."""


@dataclass(frozen=True)
class Counters:
    """Message counts of one producer (see docs/telemetry.md, `counters`)."""

    enqueued: int
    """Messages accepted by `send()`."""
    delivered: int
    """Messages acknowledged by the cluster."""
    failed: int
    """Messages whose delivery report was an error (timed out, rejected, purged)."""
    in_queue: int
    """librdkafka's `len(producer)`: queued, in flight, or reports not yet served."""
    queue_full_waits: int
    """`send()` calls that found the local queue full and had to wait."""

    @property
    def unacknowledged(self) -> int:
        """Messages with no delivery report yet."""
        return self.enqueued - self.delivered - self.failed


def producer(
    conf: Mapping[str, Any],
    settings: ProducerSettings | None = None,
    *,
    on_delivery: DeliveryCallback | None = None,
) -> HangwatchProducer:
    """A started producer; use it as a context manager (see the module docstring)."""
    return HangwatchProducer(conf, settings, on_delivery=on_delivery)


class HangwatchProducer:
    """A confluent-kafka producer with bounded timeouts, delivery accounting and telemetry."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        settings: ProducerSettings | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        self.settings = settings or ProducerSettings()
        self.number = next(_numbers)
        self._pid = os.getpid()
        telemetry_dir = self.settings.resolved_telemetry_dir()
        config = build_config(
            conf,
            self.settings,
            telemetry_on=telemetry_dir is not None,
            client_id=default_client_id(self._pid, self.number),
        )
        if on_delivery is not None and "on_delivery" in config.callbacks:
            raise UsageError("on_delivery is given both as an argument and in the configuration")
        self._secrets = [str(v) for k, v in config.properties.items() if is_secret_key(k) and v]
        self._config_view = telemetry.json_safe_config(redact(config.properties))
        self._bootstrap = config.bootstrap
        self._interval = config.statistics_interval_seconds
        flush = self.settings.flush_timeout_seconds
        self._flush_timeout = config.message_timeout_seconds + 5.0 if flush is None else flush
        self._init_state()
        user_default = on_delivery or config.callbacks.get("on_delivery")
        self._default_delivery: Callable[[KafkaError | None, Message], None] = (
            self._on_delivery
            if user_default is None
            else functools.partial(self._on_delivery_then, user_default)
        )
        self._user_error_cb = config.callbacks.get("error_cb")
        try:
            self._producer = Producer(self._rdkafka_conf(config, telemetry_dir is not None))
        except KafkaException as exc:
            reason = telemetry.scrub(_error_text(exc), self._secrets)
            raise UsageError(f"invalid producer configuration: {reason}") from None
        self._identity = telemetry.producer_identity(
            os.environ,
            telemetry.spark_task_identity(),
            pid=self._pid,
            number=self.number,
            client_id=str(config.properties["client.id"]),
            hostname=socket.gethostname(),
        )
        self._file = self._open_file(telemetry_dir)
        self._publish(None)
        self._poll_thread = self._thread(self._poll_loop, "poll")
        self._background = self._thread(self._background_loop, "telemetry")
        if user_default is not None or config.callbacks:
            self._start_callback_thread()
        log.info(
            "producer open",
            extra={
                "client_id": self._identity["client_id"],
                "bootstrap": self._bootstrap,
                "telemetry_path": str(self.telemetry_path) if self.telemetry_path else None,
            },
        )

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._progress = threading.Event()
        self._stop_poll = threading.Event()
        self._stop_background = threading.Event()
        self._stats_event = threading.Event()
        self._enqueued = self._delivered = self._failed = self._queue_full_waits = 0
        self._errors: list[str] = []
        self._error_counts: dict[str, int] = {}
        self._error_events: collections.deque[tuple[str, str, bool]]
        self._error_events = collections.deque(maxlen=1000)
        self._error_logged: dict[str, tuple[float, int]] = {}
        self._last_delivery_ts: float | None = None
        self._last_error: dict[str, Any] | None = None
        self._topics: set[str] = set()
        self._stats: tuple[str, float] | None = None
        self._seq = 0
        self._state = "running"
        self._closed = False
        self._started_ts = time.time()
        self._callbacks: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None]
        self._callbacks = queue.SimpleQueue()
        self._cb_queued = self._cb_done = self._cb_errors = 0
        self._cb_running_since: float | None = None
        self._cb_first_error: BaseException | None = None
        self._cb_thread: threading.Thread | None = None

    def _rdkafka_conf(self, config: EffectiveConfig, with_stats: bool) -> dict[str, Any]:
        rdkafka_conf: dict[str, Any] = {
            **config.properties,
            **config.passthrough,
            "on_delivery": self._default_delivery,
            "error_cb": self._on_error,
        }
        if "throttle_cb" in config.callbacks:
            user_throttle = config.callbacks["throttle_cb"]
            rdkafka_conf["throttle_cb"] = lambda event: self._dispatch(user_throttle, event)
        if with_stats:
            rdkafka_conf["stats_cb"] = self._on_stats
        return rdkafka_conf

    def _open_file(self, telemetry_dir: str | None) -> telemetry.TelemetryFile | None:
        if telemetry_dir is not None:
            name = wire.file_name(self._pid, self.number)
            # Relative: to this process's working directory now (a Spark standalone
            # executor's own work directory), whatever the job does with its cwd later.
            return telemetry.TelemetryFile(os.path.abspath(telemetry_dir), name)
        if self.settings.telemetry_enabled:
            telemetry.warn_once(
                "telemetry:<unset>",
                "HANGWATCH_TELEMETRY_DIR is not set: producer telemetry is off, "
                "producing continues",
            )
        return None

    # -- public API ---------------------------------------------------------------------------
    def send(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        *,
        partition: int | None = None,
        headers: Mapping[str, str | bytes | None] | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> None:
        """Queue one message; waits (bounded) while the local queue is full, never drops it.

        Raises `DeliveryFailed` when the queue stays full for `queue_full_timeout_seconds`
        or librdkafka rejects the message outright (e.g. too large, unknown partition).
        """
        if self._closed:
            raise ProducerError("send() on a closed producer")
        callback = self._default_delivery
        if on_delivery is not None:
            self._start_callback_thread()
            callback = functools.partial(self._on_delivery_then, on_delivery)
        kwargs: dict[str, Any] = {"on_delivery": callback}
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = dict(headers)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        with self._lock:
            self._enqueued += 1
        try:
            self._produce(topic, value, key, kwargs)
        except BaseException:
            with self._lock:
                self._enqueued -= 1
            raise
        self._topics.add(topic)

    def flush(self, timeout_seconds: float | None = None) -> None:
        """Wait until every message sent so far has a delivery report; raise unless all succeeded.

        Safe to call from a job callback (it waits on the poll thread, never polls itself).
        """
        timeout = self._flush_timeout if timeout_seconds is None else timeout_seconds
        settled = self._wait_settled(time.monotonic() + timeout)
        failure = self._delivery_failure(settled, timeout)
        if failure is not None:
            raise failure

    def close(self, timeout_seconds: float | None = None) -> None:
        """Flush (bounded), wait for the job's callbacks, stop threads, remove the telemetry file.

        Raises `DeliveryFailed` unless every message was acknowledged, `CallbackError` if a
        job callback raised or is still running. The producer is shut down either way.
        """
        if self._closed:
            return
        self._state = "closing"
        timeout = self._flush_timeout if timeout_seconds is None else timeout_seconds
        settled = False
        try:
            settled, drained = self._drain(time.monotonic() + timeout)
            failure = self._delivery_failure(settled, timeout) or self._callback_failure(drained)
        finally:
            self._shutdown(purge=not settled)
        log.info("producer closed", extra={"counters": asdict(self.counters()), "ok": not failure})
        if failure is not None:
            raise failure

    def counters(self) -> Counters:
        """The current message counts."""
        in_queue = 0 if self._closed else len(self._producer)
        return Counters(
            self._enqueued, self._delivered, self._failed, in_queue, self._queue_full_waits
        )

    @property
    def telemetry_path(self) -> Path | None:
        """The telemetry file of this producer, None when telemetry is off."""
        return self._file.path if self._file else None

    @property
    def telemetry_failures(self) -> int:
        """How many telemetry writes failed (each failure after the first is not logged)."""
        return self._file.failures if self._file else 0

    @property
    def config(self) -> dict[str, Any]:
        """The effective librdkafka configuration, secrets redacted (as in telemetry)."""
        return dict(self._config_view)

    def __enter__(self) -> HangwatchProducer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Close (raising on undelivered messages); after a failure, purge and re-raise it."""
        if exc_type is None:
            self.close()
        elif not self._closed:
            log.warning(
                "task failed inside the producer block: purging unsent messages",
                extra={"error": exc_type.__name__, "counters": asdict(self.counters())},
            )
            self._shutdown(purge=True)

    # -- sending and waiting ------------------------------------------------------------------
    def _produce(self, topic: str, value: Any, key: Any, kwargs: dict[str, Any]) -> None:
        deadline: float | None = None
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                now = time.monotonic()
                if deadline is None:
                    self._queue_full_waits += 1
                    deadline = now + self.settings.queue_full_timeout_seconds
                elif now >= deadline:
                    raise self._failure(
                        f"local producer queue stayed full for "
                        f"{self.settings.queue_full_timeout_seconds:g} s"
                    ) from None
                self._progress.clear()  # set by the poll thread when reports free room
                self._progress.wait(min(deadline - now, 0.01))
            except KafkaException as exc:
                reason = telemetry.scrub(_error_text(exc), self._secrets)
                raise self._failure(f"message to {topic!r} rejected: {reason}") from None

    def _outstanding(self) -> int:
        return self._enqueued - self._delivered - self._failed

    def _wait_settled(self, deadline: float) -> bool:
        while True:
            self._progress.clear()
            if self._outstanding() <= 0:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._progress.wait(min(remaining, 0.05))

    def _wait_callbacks(self, deadline: float) -> bool:
        while self._cb_queued > self._cb_done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(remaining, 0.01))
        return True

    def _drain(self, flush_deadline: float) -> tuple[bool, bool]:
        callback_deadline: float | None = None
        while True:
            settled = self._wait_settled(flush_deadline)
            if callback_deadline is None:
                callback_deadline = time.monotonic() + self.settings.callback_drain_timeout_seconds
                flush_deadline = max(flush_deadline, callback_deadline)
            drained = self._wait_callbacks(callback_deadline)
            if not (settled and drained) or self._outstanding() <= 0:
                return settled, drained

    def _failure(self, reason: str) -> DeliveryFailed:
        return DeliveryFailed(reason, self.counters(), list(self._errors))

    def _delivery_failure(self, settled: bool, timeout: float) -> DeliveryFailed | None:
        if self._failed:
            return self._failure("delivery failed")
        if not settled:
            return self._failure(f"not acknowledged within {timeout:g} s")
        return None

    def _callback_failure(self, drained: bool) -> CallbackError | None:
        pending = self._cb_queued - self._cb_done
        if not drained:
            return CallbackError(
                f"{pending} on_delivery callbacks still pending after "
                f"{self.settings.callback_drain_timeout_seconds:g} s (one is blocked)"
            )
        if self._cb_first_error is not None:
            err = CallbackError(
                f"{self._cb_errors} on_delivery callbacks raised; first: "
                f"{type(self._cb_first_error).__name__}: {self._cb_first_error}"
            )
            err.__cause__ = self._cb_first_error
            return err
        return None

    def _shutdown(self, purge: bool) -> None:
        self._closed = True
        self._state = "closing"
        if purge:
            self._producer.purge(in_queue=True, in_flight=True, blocking=True)
            self._wait_settled(time.monotonic() + 2.0)  # serve the purge reports
        self._stop_poll.set()
        self._poll_thread.join(self.settings.poll_interval_seconds + 5.0)
        if len(self._producer) == 0:
            self._producer.close()
        if self._cb_thread is not None:
            self._callbacks.put(None)
            if self._cb_thread is not threading.current_thread():  # close() from a callback
                self._cb_thread.join(0.5)
        self._stop_background.set()
        self._stats_event.set()  # wake it now rather than at its next timed check
        self._background.join(5.0)
        if self._file is not None:
            self._file.remove()

    # -- threads ------------------------------------------------------------------------------
    def _thread(self, target: Callable[[], None], role: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"hangwatch-{role}-{self.number}")
        thread.daemon = True
        thread.start()
        return thread

    def _poll_loop(self) -> None:
        poll, interval = self._producer.poll, self.settings.poll_interval_seconds
        while not self._stop_poll.is_set():
            try:
                if poll(interval):
                    self._progress.set()
            except Exception:  # a bug in a callback must not end the heartbeat silently
                log.exception("error while serving producer callbacks")

    def _start_callback_thread(self) -> None:
        with self._lock:
            if self._cb_thread is None:
                self._cb_thread = self._thread(self._callback_loop, "callbacks")

    def _callback_loop(self) -> None:
        while (item := self._callbacks.get()) is not None:
            fn, args = item
            self._cb_running_since = time.monotonic()
            try:
                fn(*args)
            except Exception as exc:  # the job's code: recorded and raised at close
                self._cb_errors += 1
                if self._cb_first_error is None:
                    self._cb_first_error = exc
                log.exception("on_delivery callback raised")
            finally:
                self._cb_running_since = None
                self._cb_done += 1

    def _dispatch(self, fn: Callable[..., Any], *args: Any) -> None:
        self._cb_queued += 1
        self._callbacks.put((fn, args))

    def _background_loop(self) -> None:
        while not self._stop_background.is_set():
            if self._stats_event.wait(0.25):
                self._stats_event.clear()
                if self._stats is not None and not self._stop_background.is_set():
                    self._publish(self._stats)
            self._log_errors()
        self._log_errors()

    # -- callbacks on the poll thread: record only, never block -----------------------------
    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self._delivered += 1
            self._last_delivery_ts = time.time()
            return
        self._failed += 1
        code = err.name()
        self._error_counts[code] = self._error_counts.get(code, 0) + 1
        reason = telemetry.scrub(err.str(), self._secrets)
        self._last_error = {"code": code, "reason": reason, "ts": time.time(), "fatal": err.fatal()}
        if len(self._errors) < self.settings.max_recorded_errors:
            part = msg.partition()
            where = f"[{part}]" if part is not None and part >= 0 else " (no partition yet)"
            self._errors.append(f"{msg.topic()}{where}: {code}: {reason}")
        self._error_events.append((code, reason, False))

    def _on_delivery_then(
        self, user: DeliveryCallback, err: KafkaError | None, msg: Message
    ) -> None:
        self._dispatch(user, err, msg)  # queued before it counts as settled: close waits for it
        self._on_delivery(err, msg)

    def _on_error(self, err: KafkaError) -> None:
        code = err.name()
        reason = telemetry.scrub(err.str(), self._secrets)
        self._error_counts[code] = self._error_counts.get(code, 0) + 1
        self._last_error = {"code": code, "reason": reason, "ts": time.time(), "fatal": err.fatal()}
        self._error_events.append((code, reason, True))
        if self._user_error_cb is not None:
            self._dispatch(self._user_error_cb, err)

    def _on_stats(self, stats_json: str) -> None:
        self._stats = (stats_json, time.time())
        self._stats_event.set()

    # -- telemetry thread ---------------------------------------------------------------------
    def _publish(self, stats: tuple[str, float] | None) -> None:
        if self._file is None:
            return
        raw: dict[str, Any] | None = None
        if stats is not None:
            try:
                raw = json.loads(stats[0])
            except ValueError:
                log.debug("unparsable librdkafka statistics ignored")
        snapshot = self._snapshot(None if stats is None else stats[1])
        try:
            data = telemetry.encode_document(snapshot, raw, self.settings.telemetry_max_bytes)
        except ValueError as exc:
            telemetry.warn_once(f"telemetry-size:{self._file.directory}", str(exc))
            return
        self._file.write(data)

    def _snapshot(self, stats_ts: float | None) -> telemetry.Snapshot:
        self._seq += 1
        counters = asdict(self.counters())
        counters["unacknowledged"] = self._outstanding()
        running = self._cb_running_since
        return telemetry.Snapshot(
            seq=self._seq,
            ts=time.time(),
            monotonic=time.monotonic(),
            started_ts=self._started_ts,
            interval_seconds=self._interval,
            state=self._state,
            identity=self._identity,
            counters=counters,
            last_delivery_ts=self._last_delivery_ts,
            last_error=self._last_error,
            error_counts=dict(self._error_counts),
            callbacks={
                "pending": self._cb_queued - self._cb_done,
                "running_seconds": None if running is None else time.monotonic() - running,
                "completed": self._cb_done,
                "errors": self._cb_errors,
            },
            config=self._config_view,
            wrapper={
                "version": __version__,
                "flush_timeout_seconds": self._flush_timeout,
                "queue_full_timeout_seconds": self.settings.queue_full_timeout_seconds,
                "callback_drain_timeout_seconds": self.settings.callback_drain_timeout_seconds,
            },
            bootstrap=self._bootstrap,
            topics=list(self._topics),
            stats_received_ts=stats_ts,
        )

    def _log_errors(self) -> None:
        now = time.monotonic()
        while self._error_events:
            code, reason, client_error = self._error_events.popleft()
            last = self._error_logged.get(code)
            if last is not None and now - last[0] < ERROR_LOG_INTERVAL_SECONDS:
                self._error_logged[code] = (last[0], last[1] + 1)
                continue
            suppressed = last[1] if last else 0
            self._error_logged[code] = (now, 0)
            kind = "kafka client error" if client_error else "message delivery failed"
            log.warning(kind, extra={"code": code, "reason": reason, "suppressed": suppressed})

    def __len__(self) -> int:
        return self.counters().in_queue


def _error_text(exc: KafkaException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.str() if isinstance(arg, KafkaError) else str(arg)
