"""The time-to-error budget: each producer's own settings against the policy's budget.

Covers: the wrapper's fast settings are within a 60 s budget, librdkafka's default
`message.timeout.ms` (300 s, seed S0's kind of surprise) is over it, a disabled timeout
is unbounded and over, a malformed value or a missing configuration is a problem with a
reason (never an exception); end to end with a real broker and real producer telemetry:
the round reports the producer over budget in /status (`time_to_error`) and in the
metrics while its verdict stays `healthy` (a warning, never a verdict); the budget
comes from the setting the policy passes (`--time-to-error-budget-seconds`).
"""

from __future__ import annotations

import fcntl
import json
import math
import time
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hangwatch.contracts import Verdict
from hangwatch.wire import status
from hangwatch_lab import Lab
from hangwatch_sidecar.budget import check_producer, time_to_error
from hangwatch_sidecar.loop import SidecarLoop
from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.state import status_document
from tests.wire.documents import telemetry

BOOTSTRAP = "10.0.0.1:9092,10.0.0.2:9092,10.0.0.3:9092"


def test_fast_settings_are_within_the_budget() -> None:
    checked = check_producer({"bootstrap.servers": BOOTSTRAP, "message.timeout.ms": 10000}, 60)
    assert not checked.over_budget and checked.problem is None
    assert checked.worst_case_seconds is not None and checked.worst_case_seconds <= 60
    assert "message.timeout.ms" in checked.formula


def test_librdkafkas_default_timeout_is_over_a_60_s_budget() -> None:
    checked = check_producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"}, 60)
    assert checked.over_budget and checked.worst_case_seconds is not None
    assert checked.worst_case_seconds >= 300


def test_a_disabled_timeout_is_unbounded_and_over() -> None:
    checked = check_producer({"bootstrap.servers": BOOTSTRAP, "message.timeout.ms": 0}, 600)
    assert checked.unbounded and checked.over_budget and checked.worst_case_seconds is None


def test_bad_or_missing_configuration_is_a_problem_not_an_exception() -> None:
    malformed = check_producer({"message.timeout.ms": "soon", "enable.idempotence": True}, 60)
    assert malformed.problem is not None and "message.timeout.ms" in malformed.problem
    assert not malformed.over_budget
    assert "no configuration" in (check_producer(None, 60).problem or "")
    summary = time_to_error({"b": {"message.timeout.ms": 0}, "a": None}, 60)
    assert summary.over_budget == ["b"] and list(summary.producers) == ["a", "b"]


def test_a_round_reports_the_producer_over_budget_and_keeps_its_verdict(tmp_path: Path) -> None:
    doc = telemetry()
    now = time.time()
    doc.update(ts=now, last_delivery_ts=now)
    doc["counters"].update(unacknowledged=0, in_queue=0)
    with Lab(brokers=1, topics={"t": 1}) as lab:
        doc["config"] = {"bootstrap.servers": lab.bootstrap, "message.timeout.ms": 120000}
        (tmp_path / "producer-1-1.json").write_text(json.dumps(doc))
        settings = SidecarSettings(
            bootstrap=lab.bootstrap,
            telemetry_dir=str(tmp_path),
            time_to_error_budget_seconds=90,
            hysteresis_intervals=1,
        ).validate()
        loop = SidecarLoop(settings)
        try:
            with (tmp_path / "producer-1-1.lock").open("wb") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
                state = loop.round()
        finally:
            loop.close()
    assert state.assessment is not None
    assert state.assessment.producers["producer-1-1"].verdict is Verdict.HEALTHY
    served = status.decode(status.encode(status_document(state)))
    assert served.time_to_error is not None and served.time_to_error.budget_seconds == 90
    assert served.time_to_error.over_budget == ["producer-1-1"]
    assert served.time_to_error.producers["producer-1-1"].worst_case_seconds == 121.0
    samples = {
        (s.name, s.labels.get("producer")): s.value
        for family in text_string_to_metric_families(
            generate_latest(registry_for(lambda: state)).decode()
        )
        for s in family.samples
    }
    assert samples[("hangwatch_producer_over_time_to_error_budget", "producer-1-1")] == 1.0
    assert samples[("hangwatch_producer_time_to_error_seconds", "producer-1-1")] == 121.0
    assert samples[("hangwatch_time_to_error_budget_seconds", None)] == 90.0
    assert not math.isnan(samples[("hangwatch_time_to_error_budget_seconds", None)])
