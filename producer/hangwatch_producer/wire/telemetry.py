"""The producer telemetry document (schema 1) and its files: docs/telemetry.md is the prose.

The producer wrapper (`hangwatch_producer.telemetry`) builds a `TelemetryDocument` and
writes `encode(doc)` to `<directory>/producer-<pid>-<n>.json` next to the lock file it
holds; the sidecar (`hangwatch_sidecar.telemetry_reader`) reads the bytes back with
`decode`, which checks every field's type and range and raises `WireFormatError`
(kind and reason) for anything else. Every field except `seq` and `counters` may be
absent (a reader then sees its default); unknown fields are ignored (the version rule
in `hangwatch_producer.wire`). Pure: no I/O.

Python 3.9 compatible at run time (the producer distribution's floor): msgspec reads
these annotations when a class is created, so they are `Optional[...]`, never `X | None`,
and the module does not postpone annotations (mypy, targeting 3.9, then refuses `|`).
"""

from typing import Annotated, Any, Optional, Union

import msgspec

from hangwatch_producer.wire.schema import (
    INT64_MAX,
    BrokerOrPartitionId,
    Count,
    Problem,
    Seconds,
    Timestamp,
    WireFormatError,
    convert,
    decode_object,
    read,
)

__all__ = ["Problem", "WireFormatError"]

SCHEMA_VERSION = 1
"""The schema writers write; bumped on any incompatible change (see `hangwatch_producer.wire`)."""

SUPPORTED_SCHEMAS = frozenset({1})
"""The schemas this reader knows."""

KIND = "hangwatch.producer.telemetry"

FILE_PREFIX = "producer-"
FILE_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
TEMP_SUFFIX = ".tmp"
"""The next document is written to `.<name>.tmp` (hidden: readers skip it), then renamed."""

DEFAULT_DIR = "/var/run/hangwatch/telemetry"
"""Where the shared volume is mounted in every container of an injected pod."""

DIR_ENV = "HANGWATCH_TELEMETRY_DIR"
"""The environment variable that tells the producer wrapper where to write."""

MAX_STRING = 256
"""Identity strings, names, error codes and reasons: at most this many characters."""

MAX_LIST = 100
"""Topics, bootstrap addresses, error codes and leaderless partitions listed at most."""

MINIMAL_LIST = 10
"""The same lists at detail level `minimal`."""

MAX_CONFIG_VALUE = 4096
"""A configuration value (a long bootstrap list) is at most this many characters."""

MAX_CONFIG_ENTRIES = 512
"""librdkafka has about 200 properties; more entries are not a client's."""

MAX_STATS_ENTRIES = 100_000
"""Brokers, topics or partitions in the statistics (the file's size bound comes first)."""

DETAIL_LEVELS = ("full", "compact", "topics", "brokers", "minimal")
"""Values of `detail`, the most detailed first (docs/telemetry.md, Size bound)."""

Name = Annotated[str, msgspec.Meta(max_length=MAX_STRING)]
PartitionKey = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]{1,10}$")]
ConfigValue = Union[
    Annotated[str, msgspec.Meta(max_length=MAX_CONFIG_VALUE)],
    Annotated[int, msgspec.Meta(ge=-INT64_MAX - 1, le=INT64_MAX)],
    Annotated[float, msgspec.Meta(ge=-1e300, le=1e300)],
    bool,
    None,
]


ACKS_ALL = -1
"""`acks` of a producer that waits for every in-sync replica (`acks=all`): the default of
librdkafka (`request.required.acks`) and of the Java client since 3.0, and what an
idempotent producer always uses."""

MAX_ACKS = 1000
"""librdkafka accepts `acks` up to 1000 (Apache Kafka's brokers take -1, 0 and 1)."""

ACKS_KEYS = ("acks", "request.required.acks")
"""The names a producer's configuration gives its acks under (librdkafka takes both)."""

Acks = Annotated[int, msgspec.Meta(ge=ACKS_ALL, le=MAX_ACKS)]


def acks_value(value: Any) -> Optional[int]:
    """A producer's `acks` setting as the telemetry's `acks` carries it: `all` (any case)
    and -1 are -1, a whole number from 0 to `MAX_ACKS` is itself; anything else (a bool,
    text that is not a number, a value out of range) is None: not known."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() == "all":
            return ACKS_ALL
        if not text.lstrip("-").isdigit() or len(text) > 5:
            return None
        number = int(text)
    else:
        return None
    return number if ACKS_ALL <= number <= MAX_ACKS else None


def acks_of(config: Any) -> Optional[int]:
    """The acks a producer configuration (`acks` or `request.required.acks`) says, with the
    idempotent producer's `all` (librdkafka and the Java client force it); None when it
    says none, or nothing usable (the client's default then applies)."""
    if not isinstance(config, dict):
        return None
    if str(config.get("enable.idempotence", "")).strip().lower() == "true":
        return ACKS_ALL
    for key in ACKS_KEYS:
        if key in config:
            return acks_value(config[key])
    return None


def file_name(pid: int, number: int) -> str:
    """`producer-<pid>-<n>.json`: the document of producer `number` of process `pid`."""
    return f"{FILE_PREFIX}{pid}-{number}{FILE_SUFFIX}"


def key_of(name: str) -> Optional[str]:
    """The producer key (`producer-<pid>-<n>`) of a document's file name, None for others."""
    if name.startswith(FILE_PREFIX) and name.endswith(FILE_SUFFIX):
        return name[: -len(FILE_SUFFIX)]
    return None


def lock_name(key: str) -> str:
    """The lock file held by a live producer: `producer-<pid>-<n>.lock`."""
    return f"{key}{LOCK_SUFFIX}"


def temp_name(name: str) -> str:
    """The hidden temporary file the next document of `name` is written to."""
    return f".{name}{TEMP_SUFFIX}"


class TaskIdentity(msgspec.Struct, kw_only=True, frozen=True):
    """The Spark task that created the producer."""

    stage: Optional[Count] = None
    partition: Optional[Count] = None
    attempt: Optional[Count] = None
    task_attempt_id: Optional[Count] = None


class Identity(msgspec.Struct, kw_only=True, frozen=True):
    """Who wrote the document: pod, Spark application and executor, process, client."""

    pod: Optional[Name] = None
    namespace: Optional[Name] = None
    node: Optional[Name] = None
    application_id: Optional[Name] = None
    executor_id: Optional[Name] = None
    hostname: Optional[Name] = None
    pid: Count = 0
    producer: Count = 0
    client_id: Optional[Name] = None
    task: Optional[TaskIdentity] = None


IDENTITY_SUMMARY = ("pod", "node", "application_id", "executor_id", "pid", "client_id")
"""The identity fields a reader repeats when it names the producer (evidence, logs)."""


class Counters(msgspec.Struct, kw_only=True, frozen=True):
    """Message counts for the producer's lifetime."""

    enqueued: Count = 0
    delivered: Count = 0
    failed: Count = 0
    in_queue: Count = 0
    queue_full_waits: Count = 0
    unacknowledged: Optional[Count] = None

    @property
    def pending(self) -> int:
        """Messages sent and not yet answered: `unacknowledged`, else the queue length."""
        return self.in_queue if self.unacknowledged is None else self.unacknowledged


class LastError(msgspec.Struct, kw_only=True, frozen=True):
    """The latest delivery or client error."""

    code: Name = ""
    reason: Name = ""
    ts: Optional[Timestamp] = None
    fatal: bool = False


class ErrorSeen(msgspec.Struct, kw_only=True, frozen=True):
    """One error code as the producer met it on one topic (`topic` empty: a client error,
    such as a failed login, that names no topic): how often, first and last time."""

    code: Name
    """librdkafka's name (`MSG_SIZE_TOO_LARGE`, `_MSG_TIMED_OUT`), or Apache Kafka's in the
    Java client's reporter's documents (`MESSAGE_TOO_LARGE`): `hangwatch.kafka_errors`."""
    topic: Name = ""
    count: Count = 0
    first_ts: Optional[Timestamp] = None
    last_ts: Optional[Timestamp] = None


class Throttle(msgspec.Struct, kw_only=True, frozen=True):
    """The brokers' quota throttling the producer (librdkafka's `throttle_cb`): how often
    a broker reported a throttle time, the latest one (0 once it stopped) and when."""

    count: Count = 0
    last_ts: Optional[Timestamp] = None
    last_seconds: Optional[Seconds] = None
    broker: Name = ""


class Splits(msgspec.Struct, kw_only=True, frozen=True):
    """Batches the broker refused as too large and the Java client split to send again
    (its `batch-split-total`: only a MESSAGE_TOO_LARGE answer raises it), and when the
    count was first and last seen to grow. Written by the Java client's reporter."""

    count: Count = 0
    first_ts: Optional[Timestamp] = None
    last_ts: Optional[Timestamp] = None


class Client(msgspec.Struct, kw_only=True, frozen=True):
    """Which client library wrote the document, when it is not the Python wrapper
    (absent: the wrapper over librdkafka)."""

    library: Name = ""
    """`kafka-clients`: the Java client, through hangwatch's reporter
    (`hangwatch_pipeline.kafka_telemetry`)."""
    version: Name = ""
    """The library's own version."""
    reporter: Name = ""
    """The version of hangwatch's code in that client that wrote the document."""
    acknowledgements: bool = False
    """The counters come from the client's acknowledgements (the reporter also runs as the
    client's interceptor and has seen a send): only then do they say what is pending."""


class Callbacks(msgspec.Struct, kw_only=True, frozen=True):
    """The job's callbacks queued to the wrapper's callback thread."""

    pending: Count = 0
    running_seconds: Optional[Seconds] = None
    completed: Count = 0
    errors: Count = 0


class Wrapper(msgspec.Struct, kw_only=True, frozen=True):
    """The wrapper's version and its own bounded timeouts."""

    version: Name = ""
    flush_timeout_seconds: Optional[Seconds] = None
    queue_full_timeout_seconds: Optional[Seconds] = None
    callback_drain_timeout_seconds: Optional[Seconds] = None
    librdkafka: Name = ""
    """The librdkafka release the wrapper runs on (`confluent_kafka.libversion()`; empty
    in documents of older wrappers): the sidecar names its published hangs."""


class Eos(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Idempotent producer state (librdkafka `eos`)."""

    idemp_state: Optional[Name] = None
    idemp_stateage: Optional[Count] = None
    producer_id: Optional[BrokerOrPartitionId] = None
    producer_epoch: Optional[BrokerOrPartitionId] = None
    epoch_cnt: Optional[Count] = None


class Rtt(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Round-trip time summary of one broker (microseconds)."""

    avg: Optional[Count] = None
    p99: Optional[Count] = None
    max: Optional[Count] = None
    cnt: Optional[Count] = None


class BrokerStats(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One broker as librdkafka's statistics describe it (name, state, queues, errors)."""

    name: Optional[Name] = None
    nodeid: Optional[BrokerOrPartitionId] = None
    """-1 for a bootstrap entry whose broker id is not known yet."""
    state: Optional[Name] = None
    nodename: Optional[Name] = None
    """`host:port`."""
    source: Optional[Name] = None
    stateage: Optional[Count] = None
    """Microseconds in the current state."""
    outbuf_cnt: Optional[Count] = None
    outbuf_msg_cnt: Optional[Count] = None
    waitresp_cnt: Optional[Count] = None
    """Requests sent and awaiting a response (the S2 signal when nothing answers)."""
    waitresp_msg_cnt: Optional[Count] = None
    tx: Optional[Count] = None
    txerrs: Optional[Count] = None
    """Transmission errors."""
    txretries: Optional[Count] = None
    req_timeouts: Optional[Count] = None
    rx: Optional[Count] = None
    """Responses received: growing means the broker answers."""
    rxerrs: Optional[Count] = None
    connects: Optional[Count] = None
    disconnects: Optional[Count] = None
    rtt: Optional[Rtt] = None


class PartitionStats(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One partition of a topic (detail `full` or `compact`)."""

    partition: Optional[BrokerOrPartitionId] = None
    """-1 is librdkafka's unassigned queue (messages waiting for metadata)."""
    leader: Optional[BrokerOrPartitionId] = None
    """The leader's broker id, -1 when the partition has none."""
    msgq_cnt: Optional[Count] = None
    xmit_msgq_cnt: Optional[Count] = None
    msgs_inflight: Optional[Count] = None
    desired: Optional[bool] = None
    unknown: Optional[bool] = None
    """Not in the broker's metadata."""
    msgq_bytes: Optional[Count] = None
    xmit_msgq_bytes: Optional[Count] = None
    txmsgs: Optional[Count] = None
    msgs: Optional[Count] = None


PartitionMap = Annotated[
    dict[PartitionKey, PartitionStats], msgspec.Meta(max_length=MAX_STATS_ENTRIES)
]
PartitionList = Annotated[list[BrokerOrPartitionId], msgspec.Meta(max_length=MAX_LIST)]


class TopicStats(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One topic: its partitions, or (detail `topics` and below) per-topic sums."""

    topic: Optional[Name] = None
    age: Optional[Count] = None
    metadata_age: Optional[Count] = None
    """Milliseconds since the topic's metadata was last refreshed."""
    partitions: Optional[PartitionMap] = None
    """Keyed by partition id as a string; absent at detail `topics` and below."""
    partition_count: Optional[Count] = None
    leaderless_count: Optional[Count] = None
    leaderless: Optional[PartitionList] = None
    """Sorted ids of partitions without a leader (detail `topics` and below)."""
    msgq_cnt: Optional[Count] = None
    xmit_msgq_cnt: Optional[Count] = None
    msgs_inflight: Optional[Count] = None


BrokerMap = Annotated[dict[Name, BrokerStats], msgspec.Meta(max_length=MAX_STATS_ENTRIES)]
TopicMap = Annotated[dict[Name, TopicStats], msgspec.Meta(max_length=MAX_STATS_ENTRIES)]


class Statistics(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """librdkafka's statistics, trimmed (docs/telemetry.md, `stats`)."""

    name: Optional[Name] = None
    client_id: Optional[Name] = None
    type: Optional[Name] = None
    ts: Optional[Count] = None
    """librdkafka's monotonic clock, microseconds."""
    time: Optional[Count] = None
    """Wall clock, seconds."""
    age: Optional[Count] = None
    replyq: Optional[Count] = None
    """Events waiting for poll: grows while the poll thread is blocked."""
    msg_cnt: Optional[Count] = None
    msg_size: Optional[Count] = None
    msg_max: Optional[Count] = None
    msg_size_max: Optional[Count] = None
    tx: Optional[Count] = None
    """Requests sent."""
    rx: Optional[Count] = None
    txmsgs: Optional[Count] = None
    txmsg_bytes: Optional[Count] = None
    metadata_cache_cnt: Optional[Count] = None
    txerrs: Optional[Count] = None
    """Sum over brokers, computed by the wrapper (as `req_timeouts`)."""
    req_timeouts: Optional[Count] = None
    eos: Optional[Eos] = None
    brokers: BrokerMap = msgspec.field(default_factory=dict)
    topics: TopicMap = msgspec.field(default_factory=dict)


ErrorCounts = Annotated[dict[Name, Count], msgspec.Meta(max_length=MAX_LIST)]
ErrorsSeen = Annotated[list[ErrorSeen], msgspec.Meta(max_length=MAX_LIST)]
NameList = Annotated[list[Name], msgspec.Meta(max_length=MAX_LIST)]
ConfigMap = Annotated[dict[Name, ConfigValue], msgspec.Meta(max_length=MAX_CONFIG_ENTRIES)]


class TelemetryDocument(msgspec.Struct, kw_only=True, frozen=True):
    """One producer's telemetry document (docs/telemetry.md, Fields)."""

    schema: int = SCHEMA_VERSION
    kind: Name = KIND
    seq: Count
    """1 at open, +1 per refresh: the heartbeat."""
    ts: Optional[Timestamp] = None
    monotonic: Optional[Seconds] = None
    started_ts: Optional[Timestamp] = None
    interval_seconds: Optional[Seconds] = None
    state: Name = "running"
    detail: Name = DETAIL_LEVELS[0]
    identity: Identity = msgspec.field(default_factory=Identity)
    counters: Counters
    last_delivery_ts: Optional[Timestamp] = None
    last_error: Optional[LastError] = None
    error_counts: ErrorCounts = msgspec.field(default_factory=dict)
    errors: ErrorsSeen = msgspec.field(default_factory=list)
    """Per topic and code, the most recently met first; absent in documents of wrappers
    before it (readers then have `last_error` and `error_counts` only)."""
    throttle: Optional[Throttle] = None
    """Absent until a broker throttles the producer, and in documents of older wrappers."""
    callbacks: Callbacks = msgspec.field(default_factory=Callbacks)
    bootstrap: NameList = msgspec.field(default_factory=list)
    topics: NameList = msgspec.field(default_factory=list)
    topic_count: Count = 0
    wrapper: Wrapper = msgspec.field(default_factory=Wrapper)
    config: Optional[ConfigMap] = None
    acks: Optional[Acks] = None
    """The producer's acks (`acks_value`: -1 for all), at every detail level; null when its
    settings do not say (the client's default, all, applies). Absent from documents of
    wrappers before it (readers then look at `config`)."""
    stats_received_ts: Optional[Timestamp] = None
    stats: Optional[Statistics] = None
    client: Union[Client, msgspec.UnsetType, None] = msgspec.UNSET
    """Absent from the wrapper's documents (UNSET: not written, so they stay as they were);
    the Java client's reporter names itself. Readers test `isinstance(..., Client)`."""
    splits: Union[Splits, msgspec.UnsetType, None] = msgspec.UNSET
    """The Java client's reporter only, once the client has split a batch."""


JAVA_ONLY = frozenset({"client", "splits"})
"""Top-level fields only the Java client's reporter writes (the wrapper's documents omit them)."""
JAVA_CLIENT = "kafka-clients"
"""`Client.library` of the Java client's reporter."""


REQUIRED = ("seq", "counters")
"""The fields without which a document says nothing about its producer."""


def field_names(kind: type[msgspec.Struct]) -> tuple[str, ...]:
    """The fields of one of this module's structs, in document order."""
    return tuple(f.name for f in msgspec.structs.fields(kind))


def part(kind: Any, value: Any) -> Any:
    """A nested part (`Identity`, `Counters`, `Statistics`, `ConfigMap`...) from JSON
    builtins, every bound checked (`WireFormatError` otherwise)."""
    return convert(value, kind, f"telemetry {getattr(kind, '__name__', 'part')}")


def encode(doc: TelemetryDocument) -> bytes:
    """The document as compact UTF-8 JSON (what the writer puts in the file)."""
    return msgspec.json.encode(doc)


def decode(raw: bytes) -> TelemetryDocument:
    """A document from a file's bytes; `WireFormatError` (with its `Problem`) otherwise."""
    return from_builtins(decode_object(raw, "telemetry"))


def from_builtins(obj: Any) -> TelemetryDocument:
    """A document from already-decoded JSON values (same checks as `decode`)."""
    return read(obj, TelemetryDocument, "telemetry", SUPPORTED_SCHEMAS, REQUIRED, KIND)


def to_builtins(doc: TelemetryDocument) -> dict[str, Any]:
    """The document as JSON builtins (dicts, lists, numbers, strings, None)."""
    data: dict[str, Any] = msgspec.to_builtins(doc)
    return data
