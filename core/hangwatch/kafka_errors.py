"""The Kafka errors a producer can meet, and what a restart does to each (pure).

One table, used by every side that classifies a producer's error: the sidecar's
verdict engine (the wrapper's telemetry carries librdkafka's error names), its Spark
view (a failed task attempt's `errorMessage` names the Java client's exception class)
and `config-check`. Names, codes, exception classes and retriable flags come from
Kafka's own lists (`hangwatch.kafka_error_list`, generated from Apache Kafka's
`Errors` and librdkafka's codes; a test fails when they differ). What hangwatch adds
is `Restart`, what a restart of the producer's executor does to the error, and a
one-line hint for the refusals no restart fixes:

- `CLEARS`: the error lives in the client (stale metadata: S1's sticky not-leader;
  idempotent-producer state: sequence numbers, producer ids, epochs): a new client
  starts clean, so the restart verdicts keep applying;
- `MEETS_AGAIN`: the cluster refuses the writes for a reason the next client meets
  again (a record above the topic's limit, a missing ACL, failed credentials, a topic
  that does not exist, a record the broker rejects): verdict `writes_rejected`, alert
  only, never a restart;
- `CLUSTER`: the cluster's own passing state (an election, too few replicas, a
  throttle): nothing the producer can do; the probes' verdicts decide;
- `EVIDENCE`: the code alone does not tell (a timeout, a lost connection, an unknown
  partition during a reassignment): the other evidence decides, as without a code.

Errors not in the producer table (consumer, admin, controller errors) classify as
None: no judgement from the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from hangwatch.kafka_error_list import APACHE_KAFKA, LIBRDKAFKA


class Restart(StrEnum):
    """What restarting the producer's executor does to an error."""

    CLEARS = "clears"
    MEETS_AGAIN = "meets_again"
    CLUSTER = "cluster"
    EVIDENCE = "evidence"


class Action(StrEnum):
    """The action class an error deserves, from `Restart`."""

    RESTART = "restart"
    """A restart-class verdict may apply (the policy decides)."""
    ALERT = "alert"
    """`writes_rejected`: tell a person; a restart cannot help."""
    WAIT = "wait"
    """The cluster's state: the probes' verdicts decide; no producer verdict."""
    JUDGE = "judge"
    """The other evidence decides."""


ACTIONS = {
    Restart.CLEARS: Action.RESTART,
    Restart.MEETS_AGAIN: Action.ALERT,
    Restart.CLUSTER: Action.WAIT,
    Restart.EVIDENCE: Action.JUDGE,
}


@dataclass(frozen=True)
class KafkaErrorInfo:
    """One error a producer can meet: Kafka's names and code, and what a restart does."""

    code: int
    name: str
    """Apache Kafka's name (`Errors`), or librdkafka's for its local (negative) codes."""
    rdkafka_name: str | None
    """librdkafka's name (what `KafkaError.name()` and the wrapper's telemetry say)."""
    exception: str | None
    """The Java client's exception class (simple name), None for librdkafka's local codes."""
    retriable: bool | None
    """Apache Kafka's flag (the exception is a `RetriableException`); None for local codes."""
    restart: Restart
    hint: str = ""
    """For `MEETS_AGAIN`: what to look at, in one line."""

    @property
    def action(self) -> Action:
        return ACTIONS[self.restart]


_M, _C, _W, _E = Restart.MEETS_AGAIN, Restart.CLEARS, Restart.CLUSTER, Restart.EVIDENCE

_SIZE = (
    "a record is larger than the topic's max.message.bytes (or the broker's "
    "message.max.bytes, or the producer's own message.max.bytes / max.request.size): "
    "shrink the records or raise the limit"
)
_SASL = "the client's SASL credentials or mechanism are refused: check sasl.* settings"

RESTART_EFFECTS: dict[str, tuple[Restart, str]] = {
    # Refusals a new client meets again.
    "MESSAGE_TOO_LARGE": (_M, _SIZE),
    "RECORD_LIST_TOO_LARGE": (_M, _SIZE),
    "TOPIC_AUTHORIZATION_FAILED": (_M, "the principal lacks a WRITE ACL on the topic"),
    "CLUSTER_AUTHORIZATION_FAILED": (
        _M,
        "the principal lacks an ACL on the cluster (IDEMPOTENT_WRITE for an idempotent producer)",
    ),
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": (
        _M,
        "the principal lacks a WRITE ACL on its transactional.id",
    ),
    "SASL_AUTHENTICATION_FAILED": (_M, _SASL),
    "UNSUPPORTED_SASL_MECHANISM": (_M, _SASL),
    "ILLEGAL_SASL_STATE": (_M, _SASL),
    "_AUTHENTICATION": (_M, "the client's SASL or TLS credentials are refused"),
    "_SSL": (_M, "the TLS handshake fails: check the client's certificates and trust store"),
    "POLICY_VIOLATION": (_M, "the broker's create-topic or alter policy refuses the request"),
    "INVALID_RECORD": (
        _M,
        "the broker rejects a record (a compacted topic needs keys; a bad timestamp or header)",
    ),
    "CORRUPT_MESSAGE": (_M, "the broker rejects a record as corrupt (compacted topics need keys)"),
    "INVALID_TIMESTAMP": (
        _M,
        "a record's timestamp is outside the topic's message.timestamp.*.max.ms",
    ),
    "UNSUPPORTED_COMPRESSION_TYPE": (
        _M,
        "the broker refuses the producer's compression.type for this topic",
    ),
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": (_M, "the topic's message format is older than the request"),
    "UNSUPPORTED_VERSION": (_M, "the broker does not support the request version the client sends"),
    "INVALID_REQUIRED_ACKS": (_M, "the producer's acks setting is invalid"),
    "INVALID_TOPIC_EXCEPTION": (_M, "the topic name is invalid or internal"),
    "_UNKNOWN_TOPIC": (
        _M,
        "the topic does not exist and the cluster does not create it "
        "(auto.create.topics.enable=false): create it",
    ),
    "_UNKNOWN_PARTITION": (_M, "the record names a partition the topic does not have"),
    "_UNSUPPORTED_FEATURE": (_M, "the broker lacks a feature the client's settings require"),
    "_INVALID_ARG": (_M, "the client refuses its own arguments or settings"),
    # Errors that live in the client: a new client starts clean.
    "NOT_LEADER_OR_FOLLOWER": (_C, ""),
    "FENCED_LEADER_EPOCH": (_C, ""),
    "OUT_OF_ORDER_SEQUENCE_NUMBER": (_C, ""),
    "UNKNOWN_PRODUCER_ID": (_C, ""),
    "INVALID_PRODUCER_EPOCH": (_C, ""),
    "PRODUCER_FENCED": (_C, ""),
    "INVALID_PRODUCER_ID_MAPPING": (_C, ""),
    "DUPLICATE_SEQUENCE_NUMBER": (_C, ""),
    "_GAPLESS_GUARANTEE": (_C, ""),
    "_FENCED": (_C, ""),
    "_INCONSISTENT": (_C, ""),
    # The cluster's passing state.
    "LEADER_NOT_AVAILABLE": (_W, ""),
    "NOT_ENOUGH_REPLICAS": (_W, ""),
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": (_W, ""),
    "BROKER_NOT_AVAILABLE": (_W, ""),
    "REPLICA_NOT_AVAILABLE": (_W, ""),
    "KAFKA_STORAGE_ERROR": (_W, ""),
    "THROTTLING_QUOTA_EXCEEDED": (_W, ""),
    "CONCURRENT_TRANSACTIONS": (_W, ""),
    "COORDINATOR_NOT_AVAILABLE": (_W, ""),
    "COORDINATOR_LOAD_IN_PROGRESS": (_W, ""),
    "NOT_COORDINATOR": (_W, ""),
    "UNKNOWN_SERVER_ERROR": (_W, ""),
    "_ALL_BROKERS_DOWN": (_W, ""),
    "_ISR_INSUFF": (_W, ""),
    # The code alone does not tell.
    "UNKNOWN_TOPIC_OR_PARTITION": (_E, ""),
    "REQUEST_TIMED_OUT": (_E, ""),
    "NETWORK_EXCEPTION": (_E, ""),
    "_MSG_TIMED_OUT": (_E, ""),
    "_TIMED_OUT": (_E, ""),
    "_TRANSPORT": (_E, ""),
    "_RESOLVE": (_E, ""),
    "_QUEUE_FULL": (_E, ""),
    "_FATAL": (_E, ""),
}
"""What a restart does to each error a producer can meet (Apache Kafka's name for broker
codes, librdkafka's for its local ones): the one column of the table hangwatch writes."""

PARTITION_REFUSALS = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "KAFKA_STORAGE_ERROR",
        "_ISR_INSUFF",
    }
)
"""The `CLUSTER` errors that say the cluster refuses writes to a partition for a reason of
its own: its in-sync replicas below the topic's `min.insync.replicas` (an `acks=all`
write), or its leader's log directory failed. Retriable: the clients retry them until
their delivery timeout, and a new executor meets them again while they last. The
sidecar's verdict `partitions_unwritable` (alert only) names them where a producer
reports one."""


JAVA_CLIENT_EXCEPTIONS: dict[str, str] = {
    "SslAuthenticationException": "_SSL",
    "AuthenticationException": "_AUTHENTICATION",
}
"""Exceptions of the Java client that no broker code names (`Errors` lists each broker
code's own), mapped to the entry whose error they are."""


def _table() -> dict[int, KafkaErrorInfo]:
    rdkafka = dict(LIBRDKAFKA)
    rdkafka_codes = {name: code for code, name in LIBRDKAFKA}
    table: dict[int, KafkaErrorInfo] = {}
    for code, name, exception, retriable in APACHE_KAFKA:
        if name in RESTART_EFFECTS:
            restart, hint = RESTART_EFFECTS[name]
            table[code] = KafkaErrorInfo(
                code, name, rdkafka.get(code), exception or None, retriable, restart, hint
            )
    for name, (restart, hint) in RESTART_EFFECTS.items():
        local = rdkafka_codes.get(name)
        if local is not None and local < 0:
            table[local] = KafkaErrorInfo(local, name, name, None, None, restart, hint)
    return table


TABLE: dict[int, KafkaErrorInfo] = _table()
"""The producer's errors by code."""

_BY_NAME = {
    name: info
    for info in TABLE.values()
    for name in (info.name, info.rdkafka_name)
    if name is not None
}
_BY_EXCEPTION = {info.exception: info for info in TABLE.values() if info.exception}
_BY_EXCEPTION |= {java: _BY_NAME[name] for java, name in JAVA_CLIENT_EXCEPTIONS.items()}


def by_name(name: str) -> KafkaErrorInfo | None:
    """The entry of an error named as librdkafka (`MSG_SIZE_TOO_LARGE`, `_MSG_TIMED_OUT`)
    or Apache Kafka (`MESSAGE_TOO_LARGE`) names it; None when no producer meets it."""
    return _BY_NAME.get(name)


def refuses_partition(info: KafkaErrorInfo | None) -> bool:
    """Whether the error says the cluster refuses writes to a partition (`PARTITION_REFUSALS`)."""
    return info is not None and info.name in PARTITION_REFUSALS


def hint_clause(info: KafkaErrorInfo | None) -> str:
    """`" (hint: ...)"` for a reason naming `info`'s error, or "" when it has no hint."""
    return f" (hint: {info.hint})" if info is not None and info.hint else ""


def by_code(code: int) -> KafkaErrorInfo | None:
    """The entry of an error code (broker codes equal Apache Kafka's)."""
    return TABLE.get(code)


def by_exception(name: str) -> KafkaErrorInfo | None:
    """The entry of a Java client exception class, simple (`RecordTooLargeException`) or
    qualified (`org.apache.kafka.common.errors.RecordTooLargeException`)."""
    return _BY_EXCEPTION.get(name.rpartition(".")[2])


MAX_MESSAGE_SCANNED = 64 * 1024
"""Characters of an error message (another program's text) read at most."""

_EXCEPTION = re.compile(r"(?<![\w$])[A-Z][\w$]{0,80}Exception(?![\w$])")
_QUALIFIER = re.compile(r"(?:[A-Za-z_$][\w$]{0,80}\.){1,12}$")
_NAME = re.compile(r"(?<![\w$])_?[A-Z][A-Z0-9_]{2,60}(?![\w$])")


@dataclass(frozen=True)
class ClassifiedMessage:
    """What an error message (a Java stack trace as Spark reports a failed task) says."""

    info: KafkaErrorInfo
    exception: str
    """The exception class as the message names it."""
    detail: str
    """The text after the exception's name on its line (the client's own explanation), at
    most 200 printable characters."""


def classify_message(text: str) -> ClassifiedMessage | None:
    """The first Kafka exception a message names that is in the table (the outermost
    first, then its causes), else the first error name of librdkafka or Apache Kafka it
    names (a Python task's `KafkaError{code=MSG_SIZE_TOO_LARGE,...}`, the wrapper's
    `DeliveryFailed` lines `topic[0]: MSG_SIZE_TOO_LARGE: ...`); None when it names none.
    Bounded and total on any text."""
    scanned = text[:MAX_MESSAGE_SCANNED]
    return _java(scanned) or _named(scanned)


def _detail(rest: str) -> str:
    line = rest[:1000].split("\n", 1)[0].removeprefix(":").removeprefix(",").strip()
    return "".join(c if c.isprintable() else "?" for c in line)[:200]


def _named(scanned: str) -> ClassifiedMessage | None:
    for match in _NAME.finditer(scanned):
        info = by_name(match.group(0))
        if info is not None:
            return ClassifiedMessage(info, match.group(0), _detail(scanned[match.end() :]))
    return None


def _java(scanned: str) -> ClassifiedMessage | None:
    for match in _EXCEPTION.finditer(scanned):
        info = by_exception(match.group(0))
        if info is None:
            continue
        before = _QUALIFIER.search(scanned[max(0, match.start() - 400) : match.start()])
        qualified = (before.group(0) if before else "") + match.group(0)
        return ClassifiedMessage(info, qualified[-200:], _detail(scanned[match.end() :]))
    return None


def refusals() -> tuple[KafkaErrorInfo, ...]:
    """The entries no restart fixes (`MEETS_AGAIN`), by code."""
    return tuple(i for _, i in sorted(TABLE.items()) if i.restart is Restart.MEETS_AGAIN)
