"""Invalid producer configuration fails at once with a one-line UsageError naming the problem.

Covered (the cluster is never contacted, no thread is left behind):
- missing bootstrap list, acks=0, an unbounded or non-numeric message timeout (under
  either alias), both aliases set at once, options the wrapper cannot honour
  (`stats_cb`, `delivery.report.only.error`), a non-callable callback, two default
  delivery callbacks, statistics turned off while telemetry is on, a configuration
  that is not a dict;
- errors librdkafka itself reports (unknown property, acks incompatible with
  idempotence) are turned into the same UsageError;
- invalid `ProducerSettings` values;
- `send()` on a closed producer raises `ProducerError`.
"""

from __future__ import annotations

from typing import Any

import pytest

from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch_lab import Lab
from hangwatch_pipeline import ProducerError, ProducerSettings, producer

from .producer_helpers import FAST, producer_threads

pytestmark = pytest.mark.usefixtures("producer_env")

BOOT = {"bootstrap.servers": "127.0.0.1:1"}


def noop(*args: Any) -> None:
    """A callback that does nothing."""


CASES = [
    ({}, "needs 'bootstrap.servers'"),
    ({**BOOT, "acks": 0}, "acks=0 gives no acknowledgement"),
    ({**BOOT, "message.timeout.ms": 0}, "message.timeout.ms must be > 0"),
    ({**BOOT, "delivery.timeout.ms": "0"}, "message.timeout.ms must be > 0"),
    ({**BOOT, "message.timeout.ms": "soon"}, "message.timeout.ms must be an integer"),
    ({**BOOT, "message.timeout.ms": 1, "delivery.timeout.ms": 1}, "sets both"),
    ({**BOOT, "stats_cb": noop}, "'stats_cb' is not supported"),
    ({**BOOT, "delivery.report.only.error": True}, "'delivery.report.only.error' is not"),
    ({**BOOT, "on_delivery": "print"}, "'on_delivery' must be callable"),
    ({**BOOT, "statistics.interval.ms": 0}, "statistics.interval.ms=0 stops the telemetry"),
    ({**BOOT, "no.such.property": 1}, 'No such configuration property: "no.such.property"'),
    ({**BOOT, "acks": 1}, "`acks` must be set to `all` when `enable.idempotence` is true"),
]


@pytest.mark.parametrize(("conf", "message"), CASES, ids=[m for _, m in CASES])
def test_bad_configuration_is_a_one_line_usage_error(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        producer(conf, FAST)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == ExitCode.USAGE
    assert not producer_threads()


def test_configuration_must_be_a_dict() -> None:
    with pytest.raises(UsageError, match="must be a dict, got list"):
        producer([("bootstrap.servers", "x:1")], FAST)  # type: ignore[arg-type]


def test_two_default_delivery_callbacks_are_refused() -> None:
    with pytest.raises(UsageError, match="both as an argument and in the configuration"):
        producer({**BOOT, "on_delivery": noop}, FAST, on_delivery=noop)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("message_timeout_ms", -5, "must be a number >= 0"),
        ("message_timeout_ms", 0, "0 means no limit"),
        ("acks", "0", "acks=0 gives no acknowledgement"),
        ("telemetry_max_bytes", 1024, "telemetry_max_bytes must be >= 16384"),
        ("queue_full_timeout_seconds", "soon", "must be a number >= 0"),
    ],
)
def test_bad_settings_are_usage_errors(field: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ProducerSettings(**{field: value})


def test_send_after_close_is_refused(lab: Lab) -> None:
    p = producer({"bootstrap.servers": lab.bootstrap}, FAST)
    p.close()
    p.close()  # idempotent
    with pytest.raises(ProducerError, match="closed producer"):
        p.send("t", "late")
