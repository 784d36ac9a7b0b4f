"""Kafka client releases with a published hang: one table, and which releases it names.

Each `KnownHang` is a public report of a producer that stops for good inside its client:
the client, the releases affected (`first` to `last`, or up to the release that `fixed`
it), the fixed release or None while it is open upstream, the report's link, one line of
what happens, and what replaying it here found (`replayed`: the field corpus's
replays on the lab's Apache Kafka, docs/incidents.md). The sidecar names the hangs of the
client releases it can see in the pod as an advisory (/status `advisories`, `hangwatch
check`): never an action, never a verdict.

`releases_of(client, version)` reads a version string as a release (`2.12.1`, `v1.37.2`;
what follows the third number, `-rc1` or `-ccs`, is ignored) and returns the hangs that
name it. A version string comes from a producer's telemetry, a classpath, a binary's build
information or a package.json: anything that is not a release is no release (no hang
named), never an error. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLIENTS = ("librdkafka", "kafka-clients", "kafka-go", "sarama", "kafkajs")
"""The clients the table knows: librdkafka (confluent-kafka and the wrapper), Apache
Kafka's Java client, segmentio/kafka-go, IBM/sarama (formerly Shopify/sarama), kafkajs."""

MAX_VERSION_CHARS = 64
"""A version string longer than this is no release."""

_RELEASE = re.compile(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?:[-+~._][0-9A-Za-z.+~_-]*)?")

Release = tuple[int, int, int]


def release(version: str) -> Release | None:
    """`version` as (major, minor, patch), or None when it is not a release."""
    if len(version) > MAX_VERSION_CHARS:
        return None
    found = _RELEASE.fullmatch(version.strip())
    if found is None:
        return None
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


@dataclass(frozen=True)
class KnownHang:
    """One published producer hang and the releases it affects."""

    id: str
    """`<client>#<report number>` (a JIRA id for Apache Kafka's)."""
    client: str
    """One of CLIENTS."""
    first: str
    """The first release known affected (the earliest the report or a replay names)."""
    last: str | None
    """The last release known affected; None: every release from `first` up to `fixed`
    (every later release while it is open upstream)."""
    fixed: str | None
    """The release that fixed it; None while it is open upstream."""
    report: str
    """The public report's link."""
    what: str
    """One line: what the producer does."""
    replayed: str
    """What replaying it here found (docs/incidents.md, the field corpus)."""

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise ValueError(f"{self.id}: unknown client {self.client!r} (one of {CLIENTS})")
        for name in ("first", "last", "fixed"):
            value = getattr(self, name)
            if value is not None and release(value) is None:
                raise ValueError(f"{self.id}: {name} {value!r} is not a release")

    def affects(self, version: Release) -> bool:
        """`version` is one of the releases this hang names."""
        first = release(self.first)
        if first is None or version < first:
            return False
        if self.last is not None:
            last = release(self.last)
            return last is not None and version <= last
        fixed = release(self.fixed) if self.fixed is not None else None
        return fixed is None or version < fixed

    @property
    def affected(self) -> str:
        """The releases named, in words."""
        if self.last is not None:
            return self.first if self.last == self.first else f"{self.first} to {self.last}"
        if self.fixed is not None:
            return f"{self.first} up to {self.fixed} (excluded)"
        return f"{self.first} and later"

    @property
    def fixed_in(self) -> str:
        return self.fixed if self.fixed is not None else "open upstream"


KNOWN_HANGS: tuple[KnownHang, ...] = (
    KnownHang(
        "librdkafka#5430",
        "librdkafka",
        first="2.12.1",
        last=None,
        fixed=None,
        report="https://github.com/confluentinc/librdkafka/issues/5430",
        what=(
            "after a metadata update gives a partition no leader (a KRaft controller pausing "
            "past the broker session timeout), the partition stays without leader "
            "information: its messages time out, though the cluster recovered"
        ),
        replayed=(
            "not reproduced: confluent-kafka 2.12.1 hung in 0 of 1 runs inside Spark and 0 of 4 "
            "as a plain process (the KRaft controller paused 5-12 s, Apache Kafka 4.4.0)"
        ),
    ),
    KnownHang(
        "librdkafka#5080",
        "librdkafka",
        first="2.8.0",
        last="2.8.0",  # the one release reported; later ones not known either way
        fixed=None,
        report="https://github.com/confluentinc/librdkafka/issues/5080",
        what=(
            "after a network disconnect some producers never resume: the queue stays full "
            "while the brokers serve other producers"
        ),
        replayed=(
            "not reproduced: confluent-kafka 2.8.0 hung in 0 of 6 runs inside Spark (the "
            "leader's port dropped 65 s, Apache Kafka 4.4.0)"
        ),
    ),
    KnownHang(
        "kafka-clients#KAFKA-7755",
        "kafka-clients",
        first="2.1.0",
        last="2.1.0",
        fixed="2.1.1",
        report="https://issues.apache.org/jira/browse/KAFKA-7755",
        what=(
            "a broker that comes back on a new IP address (a restarted pod) is never "
            "reached again: the client keeps the old address"
        ),
        replayed=(
            "reproduced with 2.1.0 in 3 of 3 runs (the broker back on a new address under the "
            "same name, Apache Kafka 4.4.0): producer_silent 9.8-10.3 s after its last write; "
            "2.1.1 never hung"
        ),
    ),
    KnownHang(
        "kafka-clients#KAFKA-20237",
        "kafka-clients",
        first="4.4.0",  # the release replayed; the report (against trunk) names none
        last=None,
        fixed=None,
        report="https://github.com/apache/kafka/pull/21715",
        what=(
            "an idempotent producer whose first TLS handshake fails never sends its "
            "InitProducerId: it stays initializing, even once the certificate is fixed"
        ),
        replayed=(
            "reproduced with 4.4.0 in 2 of 2 runs (the broker's certificate untrusted at the "
            "client's start, then fixed, Apache Kafka 4.4.0): producer_silent 14.1-14.9 s "
            "after the fix began; the same release not idempotent never hung; 3.9.2 (Spark's "
            "Kafka sink's) hung in 2 of 2 too, not named: its trigger is rare (docs/incidents.md)"
        ),
    ),
    KnownHang(
        "kafka-go#451",
        "kafka-go",
        first="0.3.6",  # the report suspected 0.3.5 too; its writer is 0.3.7's (replayed)
        last="0.3.6",
        fixed="0.3.7",
        report="https://github.com/segmentio/kafka-go/issues/451",
        what="after a TCP error WriteMessages blocks forever: the writer never reconnects",
        replayed=(
            "reproduced with v0.3.6 in 2 of 2 runs (the leader stopped 10 s, Apache Kafka "
            "4.4.0): producer_silent 10.4 s after its last write; v0.3.7 and v0.3.5 (whose "
            "writer is v0.3.7's) never hung"
        ),
    ),
    KnownHang(
        "sarama#2150",
        "sarama",
        first="1.31.0",
        last=None,
        fixed="1.33.0",
        report="https://github.com/IBM/sarama/issues/2150",
        what=(
            "retrying after NOT_LEADER while brokers restart leaks an internal message "
            "(an empty record is written) and the producer hangs"
        ),
        replayed=(
            "reproduced with v1.32.0 in 2 of 2 runs (the leader restarted 4 times, Apache Kafka "
            "4.4.0): producer_silent 11.0-11.2 s after its last write; v1.31.0 did not hang in "
            "1 run; v1.33.0 never hung"
        ),
    ),
    KnownHang(
        "sarama#2377",
        "sarama",
        first="1.29.1",
        last=None,
        fixed="1.38.0",
        report="https://github.com/IBM/sarama/issues/2377",
        what=(
            "an idempotent producer whose batch meets a leader election (NOT_LEADER) answers "
            "none of the rest of the batch and sends nothing more"
        ),
        replayed=(
            "reproduced with v1.37.2 in 3 of 5 real elections (Apache Kafka 3.9.2): "
            "producer_silent past the declared interval, held while the brokers closed its "
            "idle connections; v1.38.0 never hung (seed S2, docs/incidents.md)"
        ),
    ),
    KnownHang(
        "kafkajs#918",
        "kafkajs",
        first="1.14.0",
        last="1.14.0",
        fixed="1.15.0",
        report="https://github.com/tulios/kafkajs/issues/918",
        what=(
            "with the broker's port blocked while producing, disconnect waits forever for "
            "in-flight requests: the producer never reconnects"
        ),
        replayed=(
            "reproduced with 1.14.0 in 2 of 2 runs (every broker's port refused 20 s, Apache "
            "Kafka 4.4.0): producer_silent 20.9 s after its last write, 0.8-0.9 s after the "
            "refusals ended; 1.15.0 never hung"
        ),
    ),
)
"""The table (docs/sidecar.md, "Known-bad releases", renders it)."""

BY_ID = {hang.id: hang for hang in KNOWN_HANGS}


def advice_line(
    client: str, version: str, hang_id: str, what: str, fixed: str | None, report: str
) -> str:
    """One line of advice about a release and one of its published hangs (the sidecar's
    log and `hangwatch check` say it the same way)."""
    fix = f"fixed in {fixed}" if fixed else "open upstream, no fixed release yet"
    return f"{client} {version} has a published hang: {hang_id} ({what}; {fix}; {report})"


def releases_of(client: str, version: str) -> tuple[KnownHang, ...]:
    """The known hangs of `client` at `version` (empty when none, or when `version` is not
    a release)."""
    found = release(version)
    if found is None:
        return ()
    return tuple(h for h in KNOWN_HANGS if h.client == client and h.affects(found))
