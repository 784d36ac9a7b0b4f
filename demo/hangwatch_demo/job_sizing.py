"""How long a scenario is watched and how its pipeline run is sized to outlast it.

The run is paced (`RATE_PER_SECOND`) and sized to cover the baseline, the watch and a
tail; a run whose end is the "fault" covers the baseline and the tail only; pausing and
streaming runs are sized in pauses and micro-batches. What a scenario's producer is
configured with is the scenario's (`Scenario.producer_conf`).
"""

from __future__ import annotations

import math
import secrets

from hangwatch_demo import spark_tasks
from hangwatch_demo.scenarios import TOPIC, Scenario, Timing
from hangwatch_demo.spark_cluster import (
    EXECUTORS,
)
from hangwatch_pipeline.run_options import (
    SINK_CONNECTOR,
    SINK_CONNECTOR_STREAMING,
    SINK_WRAPPER,
    RunOptions,
)

RATE_PER_SECOND = 200.0
"""Events per second the pipeline writes (split over the two executors' tasks)."""


BASELINE_ALLOWANCE_SECONDS = 4.0
"""Job time budgeted before the fault per second of probe interval (tasks start, sidecars
see them deliver over a few rounds)."""


SETTLE_SECONDS = 3.0
"""After the operator acted, how long the watch goes on (the next rounds' decisions)."""


TAIL_SECONDS = 3.0
"""Job time budgeted after the watch (events flowing again). The job is sized to end
soon after the scenario: a stalled task keeps it running through the fault anyway."""


CONTROL_WATCH_SECONDS = 10.0
"""How long controls (healthy, S2's recovering election) are watched for wrong actions."""


def watch_seconds(scenario: Scenario, timing: Timing) -> float:
    if scenario.control:
        return scenario.watch_seconds or min(scenario.bound(timing), CONTROL_WATCH_SECONDS)
    return detect_bound(scenario, timing) + SETTLE_SECONDS


def detect_bound(scenario: Scenario, timing: Timing) -> float:
    """The scenario's detection bound (`Scenario.bound`, for a verdict taken in the
    sidecar's own round) plus two probe intervals: the sidecar is a separate process
    whose rounds run on their own phase, and the operator sees a verdict at its next
    poll of `/status`."""
    return scenario.bound(timing) + 2 * timing.probe_interval_seconds


def job_options(scenario: Scenario, timing: Timing, bootstrap: str) -> RunOptions:
    """The pipeline run of a scenario: long enough to cover the baseline, watch and tail;
    for a run whose end is the "fault", the baseline allowance and tail only."""
    # The baseline takes a few probe rounds: at the policy's 10 s probes a run sized for
    # 1 s probes ended before its fault took hold (the soak benchmark's S4 and S2 rows).
    allowance = BASELINE_ALLOWANCE_SECONDS * timing.probe_interval_seconds
    seconds = allowance + watch_seconds(scenario, timing) + TAIL_SECONDS
    if scenario.idles_after_run:
        seconds = allowance + TAIL_SECONDS
    producer_conf = {"message.timeout.ms": str(timing.producer_message_timeout_ms)}
    producer_conf |= scenario.producer_conf
    sink, sink_options = SINK_WRAPPER, {}
    if scenario.producer == spark_tasks.JVM:
        # Spark's sink: its JVM producer's own settings (`kafka.*`), no librdkafka's
        sink = SINK_CONNECTOR_STREAMING if scenario.trigger_seconds else SINK_CONNECTOR
        producer_conf, sink_options = {}, dict(scenario.producer_conf)
    events, partitions = int(RATE_PER_SECOND * seconds), None
    if scenario.pause is not None:
        # One task per executor, each pausing after every `every_events` of its events
        # (paced sending catches up after a pause): enough pauses to cover the watch.
        budget = scenario.pause.budget_seconds
        pauses = math.ceil(seconds / scenario.pause.mean_seconds) + 1
        if budget:  # pauses stop at the budget: enough for the longest draw sequence
            pauses = math.ceil(budget / scenario.pause.seconds) + 1
        partitions = EXECUTORS
        events = EXECUTORS * scenario.pause.every_events * pauses
    if scenario.trigger_seconds:
        # A micro-batch every trigger interval (one task per executor), enough to cover it
        partitions = EXECUTORS
        events = scenario.rows_per_batch * (math.ceil(seconds / scenario.trigger_seconds) + 1)
    return RunOptions(
        bootstrap=bootstrap,
        topic=TOPIC,
        events=events,
        partitions=partitions,
        rate_per_second=RATE_PER_SECOND,
        run_id=f"demo-{scenario.name}-{secrets.token_hex(2)}",
        producer_conf=producer_conf,
        sink=sink,
        sink_options=sink_options,
    )
