"""Writes the cluster refuses are never called a restart-class verdict.

On the lab's real Apache Kafka (the default 4.x; `hangwatch_testing.clients.refusals`),
for the hangwatch wrapper (telemetry on) and a plain confluent-kafka producer (no
telemetry), each writing from its start into a refusal a restart cannot clear (a write
the client refuses at once is retried after a pause, as Spark retries the task), while
a real `hangwatch sidecar` process watches (stall 5 s) until 20 s past the producer's
first error:

- message too large (`max.message.bytes` 200, 1 KiB records): MSG_SIZE_TOO_LARGE;
- topic authorization failed (a SASL user with no ACL on the topic);
- SASL login failed (a wrong password);
- unknown topic with automatic creation off (librdkafka names it once
  topic.metadata.propagation.max.ms, 30 s, has passed);

each: the producer met the refusal (its own errors name it), and the sidecar never said
`producer_hung` or `metadata_stale` (pod or producer verdict), whose policy default is a
restart; for the wrapper, whose telemetry carries the error code, the sidecar says
`writes_rejected` (issue 29's verdict for writes the cluster refuses) and its reasons or
evidence name the error. A plain producer outside Spark shows the sidecar no error at
all (no telemetry; the broker answers every request), so only the first holds for it. A
`producer_byte_rate` quota that throttles: the broker throttled the producer, it kept
delivering after the first throttle, and the sidecar said only `healthy` (after its
first round's `unknown`). S1's sticky not-leader, which a restart does clear, still
restarts: tests/sidecar/test_seed_scenarios_on_the_lab.py (metadata_stale) and the demo.

The wrapper's unknown topic is judged from the sidecar's own metadata (the topic absent)
before librdkafka names any error, its forbidden topic from the error of sends refused
at once (counted in its telemetry), and its quota from the broker's throttle reports in
its telemetry (docs/sidecar.md "Which refusals are restarted, and why").
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hangwatch_lab import Lab
from hangwatch_testing.clients.refusals import (
    PRODUCER_KINDS,
    REFUSALS,
    RESTART_CLASS,
    check_throttled_and_healthy,
    refusals_lab,
    watch_refusal,
)

pytestmark = pytest.mark.xdist_group("kafka-engine")

REFUSED = ("too-large", "not-authorized", "login-failed", "unknown-topic")


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with refusals_lab() as running:
        yield running


@pytest.mark.parametrize(("refusal", "kind"), [(r, k) for r in REFUSED for k in PRODUCER_KINDS])
def test_a_refused_write_is_never_a_restart_verdict(lab: Lab, refusal: str, kind: str) -> None:
    case = REFUSALS[refusal]
    seen = watch_refusal(lab, case, kind)
    assert seen.first_error_seconds is not None, f"the producer met no refusal: {seen.describe()}"
    assert any(case.error in error for error in seen.errors), seen.describe()
    assert not seen.verdicts & RESTART_CLASS, seen.describe()
    if kind == "wrapper":  # its telemetry carries the error code
        assert "writes_rejected" in seen.verdicts, seen.describe()
        assert case.error in seen.sidecar_text(), seen.describe()


@pytest.mark.parametrize("kind", PRODUCER_KINDS)
def test_a_throttling_quota_stays_healthy(lab: Lab, kind: str) -> None:
    seen = watch_refusal(lab, REFUSALS["quota"], kind)
    check_throttled_and_healthy(seen)
