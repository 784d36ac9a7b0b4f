"""The Kafka producer wrapper PySpark tasks use: at-least-once per task, with telemetry.

Inside `foreachPartition`, `mapPartitions` or `foreachBatch` a job writes::

    with hangwatch_producer.producer({"bootstrap.servers": brokers}) as p:
        for row in rows:
            p.send("events", row.value, key=row.key)

Leaving the block flushes within a bounded time and raises `DeliveryFailed` (counts
and first errors) unless every message was acknowledged, so Spark retries the task
and nothing is dropped silently. An exception inside the block purges what is still
queued and propagates unchanged (the task fails and is retried).

`HangwatchProducer` owns the librdkafka client, its poll thread, `send`, `flush` and
`close`; three parts of its own do the rest:

* the *delivery ledger* (`hangwatch_producer.ledger`, pure) counts what was enqueued,
  acknowledged and failed, keeps the first errors, and says whether a task's messages
  are proven delivered;
* the *callback runner* (`hangwatch_producer.callbacks`) runs the job's callbacks on
  their own thread;
* the *telemetry publisher* (`hangwatch_producer.publisher`) writes the telemetry
  file from a snapshot (`hangwatch_producer.snapshot`, pure) after each statistics
  event, on its own thread.

Threads and the callback rule (the lesson of incident S4, where a delivery callback
called a blocking send on the client's only I/O thread):

* the *poll thread* is the only thread that calls librdkafka's poll. It runs the
  wrapper's own delivery, error and statistics callbacks, which only record
  outcomes in the ledger and hand statistics to the publisher; nothing the wrapper
  runs there blocks;
* the job's callbacks (`on_delivery`, `error_cb`, `throttle_cb`) never run on the
  poll thread: they are queued to the runner's *callback thread*. A job callback that
  blocks (or even calls `send()` and `flush()`, the S4 pattern) delays only later job
  callbacks; delivery and the heartbeat go on, and telemetry reports the stuck
  callback (`callbacks.pending`, `callbacks.running_seconds`);
* the publisher's *telemetry thread* writes the telemetry file after each statistics
  event and logs delivery and client errors (each code at most once a minute).

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
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from confluent_kafka import (
    KafkaError,
    KafkaException,
    Message,
    Producer,
    ThrottleEvent,
    libversion,
)

from hangwatch_producer import telemetry
from hangwatch_producer.callbacks import CallbackRunner
from hangwatch_producer.errors import HangwatchError, UsageError
from hangwatch_producer.ledger import Counters, DeliveryLedger, ErrorLogThrottle
from hangwatch_producer.publisher import TelemetryPublisher, open_file, producer_facts
from hangwatch_producer.secrets import is_secret_key
from hangwatch_producer.settings import (
    EffectiveConfig,
    ProducerSettings,
    build_config,
    default_client_id,
)
from hangwatch_producer.snapshot import Snapshot, build_snapshot

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Optional[KafkaError], Message], None]
"""`on_delivery(err, msg)`: err is None on success; runs on the wrapper's callback thread."""

ERROR_LOG_INTERVAL_SECONDS = 60.0
"""The same client error code is logged at most once per this interval (with a count)."""

THREAD_ROLES = ("poll", "telemetry", "callbacks")
"""Each producer's threads are named `hangwatch-<role>-<n>`, n its number (`thread_name`)."""

_numbers = itertools.count(1)


def thread_name(role: str, number: int) -> str:
    """The name of producer `number`'s thread doing `role` (one of `THREAD_ROLES`)."""
    return f"hangwatch-{role}-{number}"


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
        pid = os.getpid()
        telemetry_dir = self.settings.resolved_telemetry_dir()
        config = build_config(
            conf,
            self.settings,
            telemetry_on=telemetry_dir is not None,
            client_id=default_client_id(pid, self.number),
        )
        if on_delivery is not None and "on_delivery" in config.callbacks:
            raise UsageError("on_delivery is given both as an argument and in the configuration")
        secrets = [str(v) for k, v in config.properties.items() if is_secret_key(k) and v]
        self._scrub = functools.partial(telemetry.scrub, secrets=secrets)
        flush = self.settings.flush_timeout_seconds
        self._flush_timeout = config.message_timeout_seconds + 5.0 if flush is None else flush
        self._ledger = DeliveryLedger(
            lock=threading.Lock(),
            clock=time.time,
            scrub=self._scrub,
            max_recorded_errors=self.settings.max_recorded_errors,
        )
        self._error_log = ErrorLogThrottle(ERROR_LOG_INTERVAL_SECONDS)
        self._callbacks = CallbackRunner(thread_name("callbacks", self.number))
        self._progress = threading.Event()  # set by the poll thread when it served events
        self._stop_poll = threading.Event()
        self._state = "running"
        self._closed = False
        started_ts = time.time()
        user_default = on_delivery or config.callbacks.get("on_delivery")
        self._default_delivery: DeliveryCallback = (
            self._ledger.record_report
            if user_default is None
            else functools.partial(self._on_delivery_then, user_default)
        )
        self._user_error_cb = config.callbacks.get("error_cb")
        try:
            self._producer = Producer(self._rdkafka_conf(config, telemetry_dir is not None))
        except KafkaException as exc:
            reason = self._scrub(_error_text(exc))
            raise UsageError(f"invalid producer configuration: {reason}") from None
        self._facts = producer_facts(
            config,
            self.settings,
            pid=pid,
            number=self.number,
            flush_timeout_seconds=self._flush_timeout,
            started_ts=started_ts,
            librdkafka=str(libversion()[0]),
        )
        self._publisher = TelemetryPublisher(
            open_file(telemetry_dir, pid, self.number, self.settings.telemetry_enabled),
            self._snapshot,
            max_bytes=self.settings.telemetry_max_bytes,
            housekeeping=self._log_errors,
            thread_name=thread_name("telemetry", self.number),
        )
        self._publisher.publish_now()
        self._poll_thread = threading.Thread(
            target=self._poll_loop, name=thread_name("poll", self.number), daemon=True
        )
        self._poll_thread.start()
        self._publisher.start()
        if user_default is not None or config.callbacks:
            self._callbacks.start()
        log.info(
            "producer open",
            extra={
                "client_id": self._facts.identity["client_id"],
                "bootstrap": self._facts.bootstrap,
                "telemetry_path": str(self.telemetry_path) if self.telemetry_path else None,
            },
        )

    def _rdkafka_conf(self, config: EffectiveConfig, with_stats: bool) -> dict[str, Any]:
        rdkafka_conf: dict[str, Any] = {
            **config.properties,
            **config.passthrough,
            "on_delivery": self._default_delivery,
            "error_cb": self._on_error,
        }
        rdkafka_conf["throttle_cb"] = functools.partial(
            self._on_throttle, config.callbacks.get("throttle_cb")
        )
        if with_stats:
            rdkafka_conf["stats_cb"] = self._on_stats
        return rdkafka_conf

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
            self._callbacks.start()
            callback = functools.partial(self._on_delivery_then, on_delivery)
        kwargs: dict[str, Any] = {"on_delivery": callback}
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = dict(headers)
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        self._ledger.enqueue()
        try:
            self._produce(topic, value, key, kwargs)
        except BaseException:
            self._ledger.withdraw()
            raise
        self._ledger.taken(topic)

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
        return self._ledger.counters(in_queue=0 if self._closed else len(self._producer))

    @property
    def telemetry_path(self) -> Path | None:
        """The telemetry file of this producer, None when telemetry is off."""
        return self._publisher.path

    @property
    def telemetry_failures(self) -> int:
        """How many telemetry writes failed (each failure after the first is not logged)."""
        return self._publisher.failures

    @property
    def config(self) -> dict[str, Any]:
        """The effective librdkafka configuration, secrets redacted (as in telemetry)."""
        return dict(self._facts.config)

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

    def __len__(self) -> int:
        return self.counters().in_queue

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
                    self._ledger.queue_full_wait()
                    deadline = now + self.settings.queue_full_timeout_seconds
                elif now >= deadline:
                    raise self._failure(
                        f"local producer queue stayed full for "
                        f"{self.settings.queue_full_timeout_seconds:g} s"
                    ) from None
                self._progress.clear()  # set by the poll thread when reports free room
                self._progress.wait(min(deadline - now, 0.01))
            except KafkaException as exc:
                if exc.args and isinstance(exc.args[0], KafkaError):
                    self._ledger.record_refused(exc.args[0], topic)
                reason = self._scrub(_error_text(exc))
                raise self._failure(f"message to {topic!r} rejected: {reason}") from None

    def _wait_settled(self, deadline: float) -> bool:
        while True:
            self._progress.clear()
            if self._ledger.outstanding <= 0:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._progress.wait(min(remaining, 0.05))

    def _drain(self, flush_deadline: float) -> tuple[bool, bool]:
        callback_deadline: float | None = None
        while True:
            settled = self._wait_settled(flush_deadline)
            if callback_deadline is None:
                callback_deadline = time.monotonic() + self.settings.callback_drain_timeout_seconds
                flush_deadline = max(flush_deadline, callback_deadline)
            drained = self._callbacks.wait_drained(callback_deadline)
            if not (settled and drained) or self._ledger.outstanding <= 0:
                return settled, drained

    def _failure(self, reason: str) -> DeliveryFailed:
        return DeliveryFailed(reason, self.counters(), list(self._ledger.errors))

    def _delivery_failure(self, settled: bool, timeout: float) -> DeliveryFailed | None:
        reason = self._ledger.failure_reason(settled, timeout)
        return None if reason is None else self._failure(reason)

    def _callback_failure(self, drained: bool) -> CallbackError | None:
        runner = self._callbacks
        if not drained:
            return CallbackError(
                f"{runner.pending} on_delivery callbacks still pending after "
                f"{self.settings.callback_drain_timeout_seconds:g} s (one is blocked)"
            )
        if runner.first_error is not None:
            err = CallbackError(
                f"{runner.errors} on_delivery callbacks raised; first: "
                f"{type(runner.first_error).__name__}: {runner.first_error}"
            )
            err.__cause__ = runner.first_error
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
        self._callbacks.stop()
        self._publisher.stop()

    # -- the poll thread and the callbacks it runs: record and hand over, never block ----------
    def _poll_loop(self) -> None:
        poll, interval = self._producer.poll, self.settings.poll_interval_seconds
        while not self._stop_poll.is_set():
            try:
                if poll(interval):
                    self._progress.set()
            except Exception:  # a bug in a callback must not end the heartbeat silently
                log.exception("error while serving producer callbacks")

    def _on_delivery_then(
        self, user: DeliveryCallback, err: KafkaError | None, msg: Message
    ) -> None:
        self._callbacks.dispatch(user, err, msg)  # queued before it counts as settled
        self._ledger.record_report(err, msg)

    def _on_error(self, err: KafkaError) -> None:
        self._ledger.record_client_error(err)
        if self._user_error_cb is not None:
            self._callbacks.dispatch(self._user_error_cb, err)

    def _on_throttle(self, user: Callable[..., Any] | None, event: ThrottleEvent) -> None:
        self._ledger.record_throttle(str(event.broker_name), float(event.throttle_time))
        if user is not None:
            self._callbacks.dispatch(user, event)

    def _on_stats(self, stats_json: str) -> None:
        self._publisher.on_stats(stats_json)

    # -- the telemetry thread ---------------------------------------------------------------
    def _snapshot(self, seq: int, stats_received_ts: float | None) -> Snapshot:
        monotonic = time.monotonic()
        return build_snapshot(
            self._facts,
            seq=seq,
            state=self._state,
            counters=self.counters(),
            ledger=self._ledger,
            callbacks=self._callbacks.status(monotonic),
            ts=time.time(),
            monotonic=monotonic,
            stats_received_ts=stats_received_ts,
        )

    def _log_errors(self) -> None:
        now = time.monotonic()
        for code, reason, client_error in self._ledger.take_error_events():
            suppressed = self._error_log.admit(code, now)
            if suppressed is None:
                continue
            kind = "kafka client error" if client_error else "message delivery failed"
            log.warning(kind, extra={"code": code, "reason": reason, "suppressed": suppressed})


def _error_text(exc: KafkaException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.str() if isinstance(arg, KafkaError) else str(arg)
