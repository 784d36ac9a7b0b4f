"""The seed incidents (docs/incidents.md) as lab scenarios with expected verdicts.

Each `Scenario` names the fault injected into the lab once the workload runs
healthily, the verdict the sidecar must reach (or, for controls, must never reach),
the bound on detection time, and whether restarting the producer is the right fix.
Faults are functions of the running `Context` so they can use the lab and the
workload (e.g. S4 wedges the producer's poll thread). `producer` says what the demo's
Spark tasks write through (`spark_tasks.TASKS`): hangwatch's wrapper (telemetry), or a
plain confluent-kafka client that the sidecar judges from its socket view and Spark's
view alone (the `plain-*` twins of S2 and S4, and an idle control). The refusal rows
(`*-message-too-large`) lower the topic's `max.message.bytes` below every record: writes
the cluster refuses, which a restart cannot fix (`heal` lifts the limit again).

Everything particular to a scenario is in its row, so adding one is adding a row: its
fault and heal, its producer's settings (`producer_conf`: S4's client debug lines, which
reach the wedgeable logger), and what the lab emulates of the client: S1's refusals
lived in the client in the incident, so a new client was the cure; the lab makes them
in the brokers, and `on_first_restart` lifts them when the first executor is
restarted. S4's trigger is a file in the wedged executor's own working directory, so
its replacement starts clean by itself (see `spark_tasks`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hangwatch.contracts import Verdict
from hangwatch_demo import interceptor
from hangwatch_demo.spark_tasks import Pause
from hangwatch_lab import Lab
from hangwatch_lab.kafka.nodes import STOP_TIMEOUT_SECONDS
from hangwatch_pipeline.job import PACED_TASK_SECONDS

TOPIC = "events"
STATS_SECONDS = 1.0
"""The wrapper's statistics (telemetry) interval: evidence is at most this old."""
PARTITIONS = 6


@dataclass(frozen=True)
class Timing:
    """Detection settings used for scenarios (short, so runs take seconds, not minutes)."""

    probe_interval_seconds: float = 1.0
    connect_timeout_ms: int = 1000
    request_timeout_ms: int = 1000
    metadata_interval_seconds: float = 5.0
    stall_seconds: float = 5.0
    heartbeat_seconds: float = 4.0
    metadata_max_age_seconds: float = 90.0
    election_grace_seconds: float = 5.0
    hysteresis_intervals: int = 2
    producer_message_timeout_ms: int = 10000
    spark_interval_seconds: float = 1.0


@dataclass
class Context:
    """What a fault may act on: the lab and the workload's wedge switch."""

    lab: Lab
    wedge_file: Path
    dead_bootstrap: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scenario:
    """One replayable incident (or control)."""

    name: str
    seed: str
    fault: str
    inject: Callable[[Context], None]
    expect: Verdict
    bound: Callable[[Timing], float]
    """Seconds from the fault to the expected verdict (for controls: how long to watch)."""
    control: bool = False
    forbidden: frozenset[Verdict] = frozenset()
    """Verdicts that must never be reported (controls; a refusal's restart verdicts)."""
    restart_helps: bool = False
    dead_bootstrap_entries: int = 0
    baseline: Verdict = Verdict.HEALTHY
    """The verdict before the fault (S1's dead bootstrap entries are already reported)."""
    label: str = ""
    """The fault in a few words (the demo's table)."""
    producer: str = "wrapper"
    """What the tasks write through: `wrapper`, `plain` (a client per task), `plain-cached`
    (a client per Python worker, kept open between runs), `jvm` (Spark's own Kafka sink,
    `spark_tasks.JVM`)."""
    idles_after_run: bool = False
    """The fault is the run's end: its producers stay open and idle, no task running."""
    pause: Pause | None = None
    """Healthy work between writes inside each task (the silence controls)."""
    producer_conf: dict[str, str] = field(default_factory=dict)
    """Client settings of the run on top of the demo's (a long linger)."""
    watch_seconds: float = 0.0
    """Controls: how long to watch (0: the runner's default)."""
    engine: str = "mock"
    """The lab's engine (`hangwatch_lab`): Spark's JVM sink (`producer` `jvm`) needs the
    real Kafka (`kafka`): the Java client cannot talk to librdkafka's mock cluster."""
    trigger_seconds: float = 0.0
    """Above 0: a Structured Streaming query whose micro-batches start every that many
    seconds (`rows_per_batch` rows each) instead of one batch job."""
    rows_per_batch: int = 0
    heal: Callable[[Context], None] | None = None
    """Undoes what `Lab.restore` does not (a topic config): called with it when nothing
    was restarted, and after a restart too (a restart cannot clear such a fault)."""
    topic_configs: dict[str, str] = field(default_factory=dict)
    """The topic's configs the lab creates it with (the kafka engine)."""
    on_first_restart: Callable[[Context], None] | None = None
    """What the operator's first restart of an executor undoes in the lab: the emulation
    of state that lived in the client in the incident, which a new client cleared (S1's
    sticky refusals). None: the fault stays until it is healed."""

    @property
    def injects(self) -> bool:
        """Whether the scenario injects a fault at all (a no-fault control does not)."""
        return self.inject is not _nothing


def lab_options(scenario: Scenario) -> dict[str, object]:
    """The lab's options a scenario needs beyond its engine (its topic's configs)."""
    return {"topic_configs": {TOPIC: scenario.topic_configs}} if scenario.topic_configs else {}


def _s0(ctx: Context) -> None:
    for broker in ctx.lab.brokers:
        ctx.lab.blackhole(broker)


def _s1(ctx: Context) -> None:
    # The producer's cached view is wrong: every broker tells it "not the leader" for
    # partitions the cluster's metadata says it leads, so every write fails while the
    # cluster is healthy (kafka-go's sticky metadata error after the cluster shrank).
    ctx.lab.request_errors("produce", "NOT_LEADER_FOR_PARTITION", 100_000)


def _new_client(ctx: Context) -> None:
    # In the incident the sticky error lived in the client: a new one (the restarted
    # executor's) no longer gets it. The lab emulates it in the brokers, so it lifts it.
    ctx.lab.restore()


def _s2_stuck(ctx: Context) -> None:
    # A 1.5 s election, after which the producer's connections are wedged: leaders are
    # back and answer everyone else, but the producer's in-flight batches never complete.
    ctx.lab.election(TOPIC, 1.5)
    time.sleep(1.6)
    for broker in ctx.lab.brokers:
        ctx.lab.stall_produce(broker)


def _s2_recovers(ctx: Context) -> None:
    ctx.lab.election(TOPIC, 1.5)


def _outage(ctx: Context) -> None:
    # killed, not stopped: the last broker of a KRaft quorum cannot finish a controlled
    # shutdown, so stopping them one by one takes the lab's stop timeout (30 s)
    for broker in ctx.lab.brokers:
        ctx.lab.down(broker, how="kill")


def _s3(ctx: Context) -> None:
    ctx.lab.blackhole(1)
    ctx.lab.down(2)


def _s4(ctx: Context) -> None:
    ctx.wedge_file.touch()


BLACKHOLED_BROKER = 1
"""The broker `jvm-blackholed-broker` blackholes."""


FROZEN_LEADER_SECONDS = 20.0
"""How long `jvm-frozen-leader` keeps the leader frozen (a long GC pause or a hung disk):
past the detection bound, short of the Java client's default request timeout (30 s)."""


def _frozen_leader(ctx: Context) -> None:
    # A real election: the topic's leaders gathered on one broker (not the controller),
    # which is then frozen (SIGSTOP: its kernel still acknowledges, nothing answers); the
    # controller fences it after the session timeout and elects new leaders. The
    # producers' requests already sent to it wait until it is continued.
    ctx.lab.election(TOPIC, FROZEN_LEADER_SECONDS, how="freeze")


def _one_blackholed(ctx: Context) -> None:
    ctx.lab.blackhole(BLACKHOLED_BROKER)


RECORD_LIMIT_BYTES = 200
"""The topic's `max.message.bytes` during `wrapper-message-too-large` (issue 29's case):
below every record the pipeline writes (an event's JSON is about 260 bytes)."""


def _limit_record_size(ctx: Context) -> None:
    # The cluster refuses every batch (MSG_SIZE_TOO_LARGE): a refusal the next client
    # meets again, so a restart cannot help.
    ctx.lab.alter_topic(TOPIC, {"max.message.bytes": str(RECORD_LIMIT_BYTES)})


def _lift_record_limit(ctx: Context) -> None:
    ctx.lab.alter_topic(TOPIC, {"max.message.bytes": None})


ISR_STOPPED_BROKER = 3
"""The broker `isr-broker-down` stops (controlled shutdown, as `hangwatch lab fault down`)."""
ISR_MIN_INSYNC = {"min.insync.replicas": "3"}
"""`isr-broker-down`'s topic config: every replica of the three must be in sync."""


def _isr_broker_down(ctx: Context) -> None:
    # Issue 43's case: every partition's ISR falls to 2 of 3; Lab.restore (after the
    # watch) starts the broker again and the writes go through.
    ctx.lab.down(ISR_STOPPED_BROKER)


def _nothing(ctx: Context) -> None:
    return None


PLAIN = "plain confluent-kafka producer (no wrapper, no telemetry)"


def _no_fault_control(
    name: str,
    seed: str,
    fault: str,
    label: str,
    *,
    producer: str = "wrapper",
    idles_after_run: bool = False,
) -> Scenario:
    """A control without a fault, watched for 20 s: any verdict but `healthy` is wrong."""
    return Scenario(
        name,
        seed,
        fault,
        _nothing,
        Verdict.HEALTHY,
        lambda t: 20.0,
        control=True,
        forbidden=frozenset(set(Verdict) - {Verdict.HEALTHY}),
        label=label,
        producer=producer,
        idles_after_run=idles_after_run,
    )


def _probe_finds_it(t: Timing) -> float:
    """The bound of a fault the probe itself finds (brokers blackholed or down): two probe
    rounds and a connect timeout."""
    return 2 * t.probe_interval_seconds + t.connect_timeout_ms / 1000


PAUSE_STALLS = 3
"""The silence controls pause for this many stall thresholds between writes."""
RESTART_VERDICTS = frozenset({Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE})


def _too_large(
    name: str, producer: str, label: str, who: str, bound: Callable[[Timing], float]
) -> Scenario:
    """Writes the cluster refuses (issue 29): mid-run the topic's limit drops below every
    record; `writes_rejected` naming the error, never a restart verdict, never a restart."""
    return Scenario(
        name,
        "refusal",
        f"{who}the topic's max.message.bytes lowered to {RECORD_LIMIT_BYTES} mid-run: every "
        "record is larger, every write refused MSG_SIZE_TOO_LARGE while every broker answers "
        "(a refusal the next client meets again: alert, never restart)",
        _limit_record_size,
        Verdict.WRITES_REJECTED,
        bound,
        forbidden=RESTART_VERDICTS,
        label=label,
        producer=producer,
        engine="kafka",
        heal=_lift_record_limit,
    )


def _silence_control(
    name: str, fault: str, label: str, producer: str, pause: Pause | None, **kw: object
) -> Scenario:
    """A healthy task that goes silent on purpose: no restart verdict, ever (silence may
    be reported as `producer_silent` only when no source can clear it; the table says)."""
    return Scenario(
        name,
        "silence control",
        fault,
        _nothing,
        Verdict.HEALTHY,
        lambda t: 20.0,
        control=True,
        forbidden=RESTART_VERDICTS,
        label=label,
        producer=producer,
        pause=pause,
        **kw,  # type: ignore[arg-type]
    )


_COMPUTE = Pause(every_events=300, seconds=PAUSE_STALLS * Timing().stall_seconds)
_WAIT = Pause(every_events=300, seconds=PAUSE_STALLS * Timing().stall_seconds, kind="wait")
_WATCH = 2 * _COMPUTE.seconds + 10.0
JVM_SINK = 'Spark\'s Kafka sink (df.write.format("kafka"): the JVM KafkaProducer)'
JVM_STREAM = 'Spark\'s Kafka sink (writeStream.format("kafka"): the JVM KafkaProducer)'
TRIGGER_SECONDS = PAUSE_STALLS * Timing().stall_seconds
"""The streaming controls' trigger interval: the query idles most of it."""
ROWS_PER_BATCH = 600
"""A streaming control's micro-batch: about 3 s of writing at the demo's rate."""
STREAM_WEDGE_TRIGGER_SECONDS = 4.0
"""The wedged streaming query's trigger: a micro-batch about every 4 s, so the wedge
meets an acknowledgement soon after it is set."""


def _streaming_control(name: str, fault: str, label: str, producer: str, **kw: object) -> Scenario:
    """A streaming query idle between micro-batches (a trigger of three stall thresholds):
    its producers have nothing to send and no task runs meanwhile."""
    return _silence_control(
        name,
        f"{fault}: a streaming query whose micro-batches ({ROWS_PER_BATCH} rows) start every "
        f"{TRIGGER_SECONDS:g} s, idle in between",
        label,
        producer,
        None,
        trigger_seconds=TRIGGER_SECONDS,
        rows_per_batch=ROWS_PER_BATCH,
        watch_seconds=_WATCH,
        **kw,
    )


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "s0-blackholed-cluster",
            "S0",
            "every broker blackholed mid-stream",
            _s0,
            Verdict.CLUSTER_UNREACHABLE,
            _probe_finds_it,
            label="all 3 brokers blackholed",
            engine="kafka",
        ),
        Scenario(
            "s1-stale-metadata",
            "S1",
            "dead bootstrap entries; every write refused as not-leader while the "
            "cluster is healthy",
            _s1,
            Verdict.METADATA_STALE,
            lambda t: t.stall_seconds + t.probe_interval_seconds + 2 * STATS_SECONDS,
            restart_helps=True,
            dead_bootstrap_entries=2,
            baseline=Verdict.BROKER_DEGRADED,
            label="every write: NOT_LEADER",
            on_first_restart=_new_client,
        ),
        Scenario(
            "s2-stuck-after-election",
            "S2",
            "1.5 s leader election, then the producer's batches are never answered",
            _s2_stuck,
            Verdict.PRODUCER_HUNG,
            # election + backlog drained before the wedge (a stats interval) + stall + 1 round
            lambda t: 1.6 + STATS_SECONDS + t.stall_seconds + t.probe_interval_seconds,
            restart_helps=True,
            label="election, then batches unanswered",
        ),
        Scenario(
            "s2-election-recovers",
            "S2 control",
            "1.5 s leader election, producer recovers",
            _s2_recovers,
            Verdict.HEALTHY,
            lambda t: 20.0,
            control=True,
            forbidden=frozenset({Verdict.PRODUCER_HUNG, Verdict.METADATA_STALE}),
            label="1.5 s election",
            engine="kafka",
        ),
        Scenario(
            "s3-one-dead-host",
            "S3",
            "broker 1 blackholed, broker 2 refusing",
            _s3,
            Verdict.BROKER_DEGRADED,
            _probe_finds_it,
            label="1 broker blackholed, 1 refusing",
            engine="kafka",
        ),
        Scenario(
            "s4-blocked-io-thread",
            "S4",
            "user code blocks the producer's I/O (poll) thread",
            _s4,
            Verdict.PRODUCER_HUNG,
            # heartbeat threshold + one round + the age of the last heartbeat (stats)
            lambda t: t.heartbeat_seconds + t.probe_interval_seconds + STATS_SECONDS,
            restart_helps=True,
            label="poll thread blocked by user code",
            # client debug lines are what reaches the wedgeable logger on the poll thread
            producer_conf={"debug": "msg"},
        ),
        Scenario(
            "plain-s2-stuck-after-election",
            "S2",
            f"{PLAIN}: 1.5 s leader election, then its batches are never answered",
            _s2_stuck,
            # A request unanswered within the producers' request timeout is the broker's
            # (it may hold a write that long): an alert, no restart; the client gives up
            # on it by its own timeout and Spark re-runs the task.
            Verdict.BROKER_DEGRADED,
            # election + stall (from the unanswered request, seen by the socket view) + 1 round
            lambda t: 1.6 + t.stall_seconds + t.probe_interval_seconds,
            label="plain: election, then unanswered",
            producer="plain",
        ),
        Scenario(
            "plain-s4-blocked-callback",
            "S4",
            f"{PLAIN}: its delivery callback blocks the task's own thread (poll/flush)",
            _s4,
            Verdict.PRODUCER_HUNG,
            # the connections' silence reaches the stall threshold + 1 round + Spark's read
            lambda t: t.stall_seconds + t.probe_interval_seconds + t.spark_interval_seconds,
            restart_helps=True,
            label="plain: delivery callback blocks",
            producer="plain",
        ),
        _no_fault_control(
            "plain-idle-between-runs",
            "control plain",
            f"{PLAIN}, kept open per Python worker: the run ends, it idles past the stall "
            "threshold with no task running",
            "plain: idle between runs",
            producer="plain-cached",
            idles_after_run=True,
        ),
        Scenario(
            "full-outage",
            "outage",
            "every broker's process killed (connections refused): an outage, not a hang",
            _outage,
            Verdict.CLUSTER_UNREACHABLE,
            _probe_finds_it,
            label="all 3 brokers down",
            engine="kafka",
        ),
        Scenario(
            "isr-broker-down",
            "refusal",
            "the topic's min.insync.replicas is 3 of its 3 replicas and broker "
            f"{ISR_STOPPED_BROKER} is stopped (its maintenance): every partition's ISR falls "
            "to 2 and the brokers left refuse every acks=all write NOT_ENOUGH_REPLICAS, which "
            "librdkafka retries until its message timeout (the cluster's refusal: alert, "
            "never restart; the writes go through once the broker is back)",
            _isr_broker_down,
            Verdict.PARTITIONS_UNWRITABLE,
            # at the latest: the lab's longest controlled shutdown, then the probes find
            # the broker gone (the ISR shrank before; the sidecar fetches metadata at once
            # when a broker fails)
            lambda t: STOP_TIMEOUT_SECONDS + _probe_finds_it(t),
            forbidden=RESTART_VERDICTS,
            label=f"min.insync.replicas 3, broker {ISR_STOPPED_BROKER} down",
            engine="kafka",
            topic_configs=ISR_MIN_INSYNC,
        ),
        _no_fault_control("healthy", "control", "no fault", "none"),
        _too_large(
            "wrapper-message-too-large",
            "wrapper",
            f"max.message.bytes {RECORD_LIMIT_BYTES}: too large",
            "",
            # the refusal held for the stall threshold + one round + the telemetry's age
            lambda t: t.stall_seconds + t.probe_interval_seconds + 2 * STATS_SECONDS,
        ),
        _too_large(
            "plain-message-too-large",
            "plain",
            f"plain: max.message.bytes {RECORD_LIMIT_BYTES}",
            f"{PLAIN}, the sidecar reading the error from Spark's record of the failed task "
            "attempt: ",
            # the running task fails at its end (it sends its partition, then flushes), its
            # failed attempt read from Spark's view + one round
            lambda t: PACED_TASK_SECONDS + t.spark_interval_seconds + t.probe_interval_seconds,
        ),
        _silence_control(
            "plain-computes-between-writes",
            f"{PLAIN}: the task computes for {PAUSE_STALLS} stall thresholds after every "
            "300 events (no client call meanwhile)",
            "plain: computes between writes",
            "plain",
            _COMPUTE,
            watch_seconds=_WATCH,
        ),
        _silence_control(
            "plain-waits-on-input",
            f"{PLAIN}: the task waits {PAUSE_STALLS} stall thresholds on slow input after "
            "every 300 events",
            "plain: waits on slow input",
            "plain",
            _WAIT,
            watch_seconds=_WATCH,
        ),
        _silence_control(
            "wrapper-computes-between-writes",
            f"the wrapper: the task computes for {PAUSE_STALLS} stall thresholds after every "
            "300 events",
            "wrapper: computes between writes",
            "wrapper",
            _COMPUTE,
            watch_seconds=_WATCH,
        ),
        _silence_control(
            "plain-long-linger",
            f"{PLAIN} with linger.ms=4000: batches leave every 4 s (below the stall threshold)",
            "plain: linger.ms 4000",
            "plain",
            None,
            producer_conf={"linger.ms": "4000"},
        ),
        _streaming_control(
            "plain-streaming-idle",
            f"{PLAIN} per task, in foreachBatch/foreachPartition",
            "plain: streaming, idle between batches",
            "plain",
        ),
        _streaming_control(
            "wrapper-streaming-idle",
            "the wrapper per task, in foreachBatch/foreachPartition",
            "wrapper: streaming, idle between batches",
            "wrapper",
        ),
        _streaming_control(
            "jvm-streaming-idle",
            JVM_STREAM,
            "JVM sink: streaming, idle between batches",
            "jvm",
            engine="kafka",
        ),
        Scenario(
            "jvm-frozen-leader",
            "S2",
            f"{JVM_SINK}: the topic's leader frozen for {FROZEN_LEADER_SECONDS:g} s; the "
            "controller fences it and elects new leaders, the requests already sent to it "
            "wait for it",
            _frozen_leader,
            Verdict.BROKER_DEGRADED,
            # leaders gathered and frozen, fenced (1.5 s) + the unanswered request's stall
            lambda t: 3.0 + t.stall_seconds + t.probe_interval_seconds,
            label="JVM sink: leader frozen 20 s",
            producer="jvm",
            engine="kafka",
        ),
        Scenario(
            "jvm-blackholed-broker",
            "S3",
            f"{JVM_SINK}: broker {BLACKHOLED_BROKER} blackholed (a dead host: every packet "
            "to and from it dropped)",
            _one_blackholed,
            Verdict.BROKER_DEGRADED,
            _probe_finds_it,
            label="JVM sink: 1 broker blackholed",
            producer="jvm",
            engine="kafka",
        ),
        Scenario(
            "jvm-wedged-interceptor",
            "S4",
            f"{JVM_SINK}: a producer interceptor (the user's `kafka.interceptor.classes`) "
            "blocks the JVM producer's I/O thread in one executor",
            _s4,
            Verdict.PRODUCER_HUNG,
            # the I/O thread inside user code for the heartbeat threshold, seen in a thread
            # dump the sidecar reads every Spark interval, + one round
            lambda t: t.heartbeat_seconds + t.spark_interval_seconds + t.probe_interval_seconds,
            restart_helps=True,
            label="JVM sink: interceptor blocks I/O thread",
            producer="jvm",
            engine="kafka",
            producer_conf={"kafka.interceptor.classes": interceptor.CLASS_NAME},
        ),
        Scenario(
            "jvm-streaming-wedged-interceptor",
            "S4",
            f"{JVM_STREAM}: micro-batches every {STREAM_WEDGE_TRIGGER_SECONDS:g} s; the "
            "user's interceptor blocks the JVM producer's I/O thread in one executor",
            _s4,
            Verdict.PRODUCER_HUNG,
            # the next micro-batch's first acknowledgement, then as the batch wedge
            lambda t: (
                STREAM_WEDGE_TRIGGER_SECONDS
                + t.heartbeat_seconds
                + t.spark_interval_seconds
                + t.probe_interval_seconds
            ),
            restart_helps=True,
            label="JVM stream: interceptor blocks I/O thread",
            producer="jvm",
            engine="kafka",
            producer_conf={"kafka.interceptor.classes": interceptor.CLASS_NAME},
            trigger_seconds=STREAM_WEDGE_TRIGGER_SECONDS,
            rows_per_batch=ROWS_PER_BATCH,
        ),
        Scenario(
            "jvm-election-recovers",
            "S2 control",
            f"{JVM_SINK}: a real 1.5 s leader election (the leader frozen until the "
            "controller fences it), the producer recovers",
            _s2_recovers,
            Verdict.HEALTHY,
            lambda t: 20.0,
            control=True,
            forbidden=RESTART_VERDICTS,
            label="JVM sink: 1.5 s election",
            producer="jvm",
            engine="kafka",
        ),
        _silence_control(
            "jvm-computes-between-writes",
            f"{JVM_SINK}: a Python step upstream of the sink computes for {PAUSE_STALLS} "
            "stall thresholds after every 300 events",
            "JVM sink: computes upstream",
            "jvm",
            _COMPUTE,
            watch_seconds=_WATCH,
            engine="kafka",
        ),
        _silence_control(
            "jvm-waits-on-input",
            f"{JVM_SINK}: a Python step upstream of the sink waits {PAUSE_STALLS} stall "
            "thresholds on slow input after every 300 events",
            "JVM sink: waits on slow input",
            "jvm",
            _WAIT,
            watch_seconds=_WATCH,
            engine="kafka",
        ),
        _silence_control(
            "jvm-long-linger",
            f"{JVM_SINK} with kafka.linger.ms=4000 (kafka.batch.size 1 MiB, so the linger, "
            "not a full batch, sends)",
            "JVM sink: linger.ms 4000",
            "jvm",
            None,
            producer_conf={"kafka.linger.ms": "4000", "kafka.batch.size": "1048576"},
            engine="kafka",
        ),
    )
}


ON_REQUEST = (
    "plain-streaming-idle",
    "wrapper-streaming-idle",
    "jvm-streaming-idle",
    "jvm-computes-between-writes",
    "jvm-waits-on-input",
    "jvm-long-linger",
    "jvm-streaming-wedged-interceptor",
)
"""Run on request (`--scenario`), not by default: the streaming silence controls and
the JVM Kafka sink's silence controls (the default run has the sink's faults and its
election control; `tests/demo` runs these)."""
DEMO_ORDER = (
    "healthy",
    "s0-blackholed-cluster",
    "s1-stale-metadata",
    "s2-stuck-after-election",
    "s2-election-recovers",
    "s3-one-dead-host",
    "s4-blocked-io-thread",
    "full-outage",
    "plain-s2-stuck-after-election",
    "plain-s4-blocked-callback",
    "plain-idle-between-runs",
    "plain-computes-between-writes",
    "plain-waits-on-input",
    "wrapper-computes-between-writes",
    "plain-long-linger",
    "jvm-frozen-leader",
    "jvm-blackholed-broker",
    "jvm-wedged-interceptor",
    "jvm-election-recovers",
    "wrapper-message-too-large",
    "plain-message-too-large",
    "isr-broker-down",
)
"""The order `hangwatch demo` runs scenarios in (the `jvm-*` ones on the real Kafka
engine: Spark's own Kafka sink cannot talk to the mock)."""
