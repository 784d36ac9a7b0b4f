"""The sidecar's `/status` document (schema 1): docs/sidecar.md is the prose.

The sidecar (`hangwatch_sidecar.state`) builds a `StatusDocument` after every round and
serves `encode(doc)`, which cuts every string, list and object to bounds and the whole
document to `MAX_BYTES`, dropping evidence first: nothing a producer writes into its
telemetry can make the answer too large for the operator. The operator
(`hangwatch_operator.sidecar_status`) reads it with `decode`, which refuses anything
beyond `READ_LIMIT_BYTES`, non-JSON, NaN, a schema it does not know (the version rule in
`hangwatch.wire`) and fields of the wrong type or range. Pure: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from hangwatch_producer.wire.schema import (
    Count,
    Problem,
    Seconds,
    Timestamp,
    WireFormatError,
    clamp,
    decode_object,
    read,
)

SCHEMA_VERSION = 1
SUPPORTED_SCHEMAS = frozenset({1})

MAX_STRING = 1024
"""Reasons, details, names and every other string: at most this many characters."""

MAX_ITEMS = 256
"""Every list and object (brokers, producers, reasons, evidence): at most this many entries."""

MAX_DEPTH = 10
"""Containers nested deeper than this (in evidence) are cut."""

MAX_BYTES = 256 * 1024
"""The largest document a sidecar serves."""

READ_LIMIT_BYTES = 1 << 20
"""The largest answer a reader accepts: anything larger is not a sidecar's."""

SHRINK_STEPS = ((MAX_STRING, MAX_ITEMS, True), (MAX_STRING, MAX_ITEMS, False), (256, 32, False))
"""(string length, entries, keep evidence) tried in order until the document fits."""

LAST_RESORT = (128, 8)
"""Bounds of the last step: without evidence, every list and object of at most 8 entries
of at most 128 characters, the whole document stays far below MAX_BYTES."""

Text = Annotated[str, msgspec.Meta(max_length=MAX_STRING)]
Texts = Annotated[list[Text], msgspec.Meta(max_length=MAX_ITEMS)]
TextMap = Annotated[dict[Text, Text], msgspec.Meta(max_length=MAX_ITEMS)]
Evidence = Annotated[dict[Text, Any], msgspec.Meta(max_length=MAX_ITEMS)]
Milliseconds = Annotated[float, msgspec.Meta(ge=0, le=1e9)]
NodeId = Annotated[int, msgspec.Meta(ge=-1, le=2**31)]


class Assessment(msgspec.Struct, kw_only=True, frozen=True):
    """A verdict with its reasons (sentences) and evidence (numbers and names)."""

    verdict: Text
    reasons: Texts = msgspec.field(default_factory=list)
    evidence: Evidence = msgspec.field(default_factory=dict)


class BrokerStatus(msgspec.Struct, kw_only=True, frozen=True):
    """One broker address as the sidecar's last probe saw it."""

    address: Text
    node_id: NodeId | None = None
    reachability: Text = "unknown"
    """A `hangwatch.contracts.Reachability` value (text: a newer class is not fatal)."""
    latency_ms: Milliseconds | None = None
    in_bootstrap: bool = True
    advertised: bool = True
    detail: Text = ""


Ids = Annotated[list[NodeId], msgspec.Meta(max_length=MAX_ITEMS)]


class TopicAcceptance(msgspec.Struct, kw_only=True, frozen=True):
    """One written topic: whether the cluster accepts writes to its partitions (the
    metadata's ISR against the topic's `min.insync.replicas`, docs/sidecar.md)."""

    topic: Text
    partitions: Count = 0
    replication_factor: Count = 0
    min_insync_replicas: Count | None = None
    """None: not known (`problem` says why)."""
    source: Text = ""
    """`topic` (the topic's own config) or `broker default`."""
    problem: Text | None = None
    """Why `min_insync_replicas` is not known (a DescribeConfigs error, not asked yet)."""
    unwritable: Ids = msgspec.field(default_factory=list)
    """Partitions refusing `acks=all` writes: ISR below `min_insync_replicas`, or their
    leader's log directory failed."""
    in_doubt: Ids = msgspec.field(default_factory=list)
    """Under-replicated partitions whose acceptance is not known (`problem`)."""
    out_of_isr: Ids = msgspec.field(default_factory=list)
    """Brokers out of the ISR of those partitions."""
    reason: Text = ""


UNWRITABLE_TOPICS = "unwritable_topics"
"""The evidence key of a `partitions_unwritable` assessment: a list of objects, one per
topic the cluster refuses writes to (`topic`, `partitions`, `reason`), which the
operator reads to say it once per topic (`hangwatch_operator.sidecar_status`)."""


class ClusterStatus(msgspec.Struct, kw_only=True, frozen=True):
    """The cluster's metadata as of the last round."""

    probed_ts: Timestamp | None = None
    metadata_ts: Timestamp | None = None
    metadata_ok: bool = False
    leaderless: Texts = msgspec.field(default_factory=list)
    error: Text | None = None
    acceptance: Annotated[list[TopicAcceptance], msgspec.Meta(max_length=MAX_ITEMS)] = (
        msgspec.field(default_factory=list)
    )
    """The written topics (the sidecar's topics and those of the producers' telemetry) the
    metadata lists, each with what the cluster accepts there."""


CountMap = Annotated[dict[Text, Count], msgspec.Meta(max_length=MAX_ITEMS)]

MAX_CONNECTIONS = 16
"""Connections of the socket view listed at most (those that matter first; all are counted)."""


class ConnectionStatus(msgspec.Struct, kw_only=True, frozen=True):
    """One of the pod's own connections to a broker, as the socket view judged it."""

    connection: Text
    """`local ip:port->broker ip:port`."""
    broker: Text
    pattern: Text
    """`answered`, `idle`, `awaiting`, `unanswered`, `blackholed`, `connect_unanswered`,
    `connecting` or `closing` (text: a newer pattern is not fatal)."""
    state: Text
    uid: Count = 0
    waiting_seconds: Seconds | None = None
    quiet_seconds: Seconds = 0.0
    last_received_seconds: Seconds | None = None
    unacked: Count = 0
    retransmits: Count = 0
    backoff: Count = 0


class SocketViewStatus(msgspec.Struct, kw_only=True, frozen=True):
    """The pod's own TCP connections to the brokers (kernel tcp_info), as of the last round."""

    available: bool = True
    error: Text | None = None
    connections_total: Count = 0
    connections: Annotated[list[ConnectionStatus], msgspec.Meta(max_length=MAX_CONNECTIONS)] = (
        msgspec.field(default_factory=list)
    )
    silent_seconds: Seconds | None = None
    """Every connection idle this long (None: no connection, or one is not idle)."""
    failed_connects: Count | None = None
    failed_connects_seconds: Seconds = 0.0
    last_write_seconds: Seconds | None = None
    """Since the pod's connections last sent something that can hold a write, across
    closed connections and reconnects (None: no connection of the pod seen yet)."""
    closed_since_write: Count = 0
    """The pod's connections gone since that send."""
    not_writes_since_write: Count = 0
    """Sends since then too small to hold a write (metadata requests, reconnects)."""


class SidecarInfo(msgspec.Struct, kw_only=True, frozen=True):
    """The sidecar itself: when it started, how many rounds, when the last one ended."""

    started_ts: Timestamp | None = None
    rounds: Count = 0
    evaluated_ts: Timestamp | None = None
    round_seconds: Seconds = 0.0
    settings: Evidence = msgspec.field(default_factory=dict)
    probe_connects: CountMap = msgspec.field(default_factory=dict)
    """New connections the sidecar's probes opened, per broker, since it started."""
    probe_requests: CountMap = msgspec.field(default_factory=dict)
    """ApiVersions requests the sidecar's probes sent, per broker, since it started."""
    metadata_requests: Count = 0


class ProducerTimeToError(msgspec.Struct, kw_only=True, frozen=True):
    """One producer's configured worst case until a send reports an error."""

    client: Text
    worst_case_seconds: Seconds | None = None
    """None when unbounded (a timeout is disabled) or not computable (see `problem`)."""
    unbounded: bool = False
    over_budget: bool = False
    formula: Text = ""
    problem: Text | None = None


ProducerTimes = Annotated[dict[Text, ProducerTimeToError], msgspec.Meta(max_length=MAX_ITEMS)]


class TimeToError(msgspec.Struct, kw_only=True, frozen=True):
    """Producers whose own settings can keep a send silent longer than the budget."""

    budget_seconds: Seconds
    over_budget: Texts = msgspec.field(default_factory=list)
    producers: ProducerTimes = msgspec.field(default_factory=dict)


class SparkTask(msgspec.Struct, kw_only=True, frozen=True):
    """A task running on the pod's executor, as the Spark driver and the sidecar see it."""

    task_id: Count
    stage: Text | None = None
    """`<stage>.<attempt>`; None when the task's thread names only its TID (Spark < 3.1)."""
    index: Count | None = None
    attempt: Count | None = None
    running_seconds: Seconds = 0.0
    """Since the sidecar first saw it running (a lower bound)."""
    straggler: bool = False
    stage_median_seconds: Seconds | None = None
    stage_complete: Count | None = None
    stage_failed: Count | None = None


class SparkThread(msgspec.Struct, kw_only=True, frozen=True):
    """A Kafka producer thread of the executor's JVM, from the driver's thread dump."""

    thread: Text
    role: Text
    """`network` (the producer's I/O thread), `task` or `other`."""
    activity: Text
    """`in_callback`, `awaiting_metadata`, `awaiting_buffer`, `flushing`,
    `awaiting_result` or `sending` (text: a newer activity is not fatal)."""
    state: Text = ""
    held_seconds: Seconds = 0.0
    frame: Text = ""
    user_frame: Text | None = None
    waits_on: Text | None = None
    detail: Text = ""
    task_id: Count | None = None


class SparkReads(msgspec.Struct, kw_only=True, frozen=True):
    """What reading the driver's REST API has cost and how it went."""

    total: Count = 0
    errors: CountMap = msgspec.field(default_factory=dict)
    last_read_seconds: Seconds = 0.0
    last_requests: Count = 0
    last_response_bytes: Count = 0


Budget = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31)]


class FailureBudget(msgspec.Struct, kw_only=True, frozen=True):
    """Spark's executor failure budget of the pod's application (docs/sidecar.md, "The
    failure budget"): Spark 3.5+ ends an application on Kubernetes (and YARN) once more
    than `max_failures` executors failed within `validity_seconds`. The sidecar reads it
    from the driver; the operator refuses a restart that would exhaust it."""

    spark_version: Text = ""
    max_failures: Count | None = None
    """`spark.executor.maxNumFailures`, or Spark's default for the application's
    settings; None: this Spark (< 3.5) ends no application for executor failures."""
    configured: bool = False
    """The application set `spark.executor.maxNumFailures` itself."""
    validity_seconds: Seconds | None = None
    """`spark.executor.failuresValidityInterval`; None: failures never expire."""
    failures: Count = 0
    """Executors of the application that ended other than by decommissioning (in the
    validity interval): what Spark counts, at worst."""
    remaining: Budget | None = None
    """`max_failures - failures`: executor failures Spark still tolerates (None: no limit)."""


class SparkStatus(msgspec.Struct, kw_only=True, frozen=True):
    """Spark's view of the pod's executor, or the thread dump of the pod's own JVM (absent
    when both are off)."""

    driver_ui: Text = ""
    """The driver UI read ("" when only the local JVM's thread dumps are on)."""
    source: Text = "driver"
    """Where this view's thread dump came from: `driver` (its REST API) or `jvm` (the
    pod's own JVM through the attach mechanism, when the driver is off or unreachable)."""
    local_jvm_dumps: bool = False
    """The local JVM's thread dumps are on (`--jvm-thread-dumps`)."""
    available: bool = False
    error: Text | None = None
    """Why the view is unavailable (the driver unreachable, refused, too slow...)."""
    application_id: Text | None = None
    executor_id: Text | None = None
    thread_dump: bool = True
    task_running: bool | None = None
    task_running_seconds: Seconds | None = None
    tasks_total: Count = 0
    tasks: Annotated[list[SparkTask], msgspec.Meta(max_length=MAX_ITEMS)] = msgspec.field(
        default_factory=list
    )
    producer_threads_total: Count = 0
    producer_threads: Annotated[list[SparkThread], msgspec.Meta(max_length=MAX_ITEMS)] = (
        msgspec.field(default_factory=list)
    )
    reads: SparkReads = msgspec.field(default_factory=SparkReads)
    failure_budget: FailureBudget | None = None
    """None until the driver told its settings (or when it cannot)."""


class PythonThread(msgspec.Struct, kw_only=True, frozen=True):
    """A thread of one of the executor's Python processes, from the last stack sample."""

    pid: Count
    tid: Count
    name: Text
    place: Text
    """`in_callback`, `in_client` or `outside` (text: a newer place is not fatal)."""
    active: bool = False
    client_call: Text = ""
    user_frame: Text = ""
    caller: Text = ""
    held_seconds: Seconds = 0.0
    samples: Count = 1


class PythonStacksStatus(msgspec.Struct, kw_only=True, frozen=True):
    """The Python stack view (absent without a Spark view; `error` says "off" when it is
    switched off). Sampled only while the pod's connections are silent and a task runs:
    `sampled` False otherwise."""

    sampled: bool = False
    available: bool = False
    error: Text | None = None
    processes: Count = 0
    samples_total: Count = 0
    threads: Annotated[list[PythonThread], msgspec.Meta(max_length=MAX_ITEMS)] = msgspec.field(
        default_factory=list
    )


Brokers = Annotated[list[BrokerStatus], msgspec.Meta(max_length=MAX_ITEMS)]
Producers = Annotated[dict[Text, Assessment], msgspec.Meta(max_length=MAX_ITEMS)]


class Advisory(msgspec.Struct, kw_only=True, frozen=True):
    """A Kafka client release seen in the pod that has a published hang
    (`hangwatch.known_hangs`): advice, never an action, never a verdict."""

    client: Text
    version: Text
    hang: Text
    """The table's id (`sarama#2377`)."""
    report: Text = ""
    affected: Text = ""
    fixed: Text | None = None
    """The release that fixed it; None while it is open upstream."""
    what: Text = ""
    seen_in: Texts = msgspec.field(default_factory=list)
    """Where the release was read (a producer's telemetry, a process, Spark's classpath)."""


Advisories = Annotated[list[Advisory], msgspec.Meta(max_length=MAX_ITEMS)]


class StatusDocument(msgspec.Struct, kw_only=True, frozen=True):
    """The `/status` document: the pod's debounced verdict and what it rests on."""

    schema: int = SCHEMA_VERSION
    version: Text = ""
    identity: TextMap = msgspec.field(default_factory=dict)
    verdict: Text
    since: Timestamp | None = None
    reasons: Texts = msgspec.field(default_factory=list)
    latest: Assessment | None = None
    brokers: Brokers = msgspec.field(default_factory=list)
    cluster: ClusterStatus | None = None
    producers: Producers = msgspec.field(default_factory=dict)
    sidecar: SidecarInfo = msgspec.field(default_factory=SidecarInfo)
    time_to_error: TimeToError | None = None
    spark: SparkStatus | None = None
    sockets: SocketViewStatus | None = None
    """None when the sidecar's socket view is switched off."""
    python_stacks: PythonStacksStatus | None = None
    """None without a Spark view (the stack view samples only while a task runs)."""
    not_judged: TextMap = msgspec.field(default_factory=dict)
    """Features the pod's Pod Security level left out of the sidecar (`hangwatch.
    pod_security.Feature` values) -> the evidence, and so the judgement, the pod lacks."""
    advisories: Advisories = msgspec.field(default_factory=list)
    """The pod's Kafka client releases with a published hang (docs/sidecar.md,
    "Known-bad releases"); empty when none is seen."""


def without_evidence(doc: StatusDocument) -> StatusDocument:
    """The document with every assessment's evidence left out (the first thing to go)."""

    def bare(assessment: Assessment) -> Assessment:
        return msgspec.structs.replace(assessment, evidence={})

    return msgspec.structs.replace(
        doc,
        latest=None if doc.latest is None else bare(doc.latest),
        producers={key: bare(a) for key, a in doc.producers.items()},
    )


def encode(doc: StatusDocument) -> bytes:
    """The document as JSON, every string/list/object cut to bounds, at most MAX_BYTES."""
    out = b""
    for max_string, max_items, evidence in SHRINK_STEPS:
        shaped = doc if evidence else without_evidence(doc)
        out = msgspec.json.encode(clamp(shaped, max_string, max_items, MAX_DEPTH))
        if len(out) <= MAX_BYTES:
            return out
    max_string, max_items = LAST_RESORT
    return msgspec.json.encode(clamp(without_evidence(doc), max_string, max_items, MAX_DEPTH))


def decode(raw: bytes) -> StatusDocument:
    """A document from a /status body; `WireFormatError` when a reader cannot trust it."""
    if len(raw) > READ_LIMIT_BYTES:
        raise WireFormatError(Problem.TOO_LARGE, f"/status larger than {READ_LIMIT_BYTES} bytes")
    return from_builtins(decode_object(raw, "/status"))


def from_builtins(obj: Any) -> StatusDocument:
    """A document from already-decoded JSON values (same checks as `decode`)."""
    return read(obj, StatusDocument, "/status", SUPPORTED_SCHEMAS, ("verdict",))


def to_builtins(doc: StatusDocument) -> dict[str, Any]:
    """The document as JSON builtins (what `encode` writes, before bounding)."""
    data: dict[str, Any] = msgspec.to_builtins(doc)
    return data
