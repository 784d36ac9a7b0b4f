"""The Kafka engine's admin-client work: topics created and altered, ACLs granted,
and the waits until every broker shows them (`KafkaAdmin`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
)
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._metadata import ClusterMetadata
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from confluent_kafka.cimpl import NewTopic

from hangwatch.errors import LabError, UsageError
from hangwatch_lab.kafka.nodes import (
    POLL_SECONDS,
)
from hangwatch_lab.kafka.processes import KafkaProcesses

log = logging.getLogger(__name__)

TRANSIENT_ADMIN_ERRORS = frozenset(
    {
        KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
    }
)
"""Admin request errors of a cluster still forming (or of a replaced bootstrap
connection): the request is sent again."""

TOPIC_OPERATIONS = ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER")
"""The topic operations `grant` accepts (names of Kafka's AclOperation)."""


class KafkaAdmin(KafkaProcesses):
    """What controls need from a running cluster through its admin API: topics with their
    configs, ACLs, and leaders on every partition."""

    def _create_topics(self, topics: dict[str, int]) -> None:
        """Create `topics` (each with its `topic_configs`), again for those whose request
        failed transiently: the admin client replaces its bootstrap connections by the
        brokers it learns of, and a request in flight on a replaced one fails with
        `_DESTROY_BROKER` (seen in about one start in ten on a loaded machine). A topic the
        first try created already exists on the next."""
        if not topics:
            return
        replication = min(3, self.broker_count)
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        pending = dict(topics)
        deadline = time.monotonic() + 60
        while pending:
            futures = admin.create_topics(
                [
                    NewTopic(name, parts, replication, config=self.topic_configs.get(name, {}))
                    for name, parts in pending.items()
                ],
                operation_timeout=30,
            )
            for name, future in futures.items():
                try:
                    future.result(timeout=60)
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else None
                    code = error.code() if isinstance(error, KafkaError) else None
                    if code == KafkaError.TOPIC_ALREADY_EXISTS:
                        pass
                    elif code in TRANSIENT_ADMIN_ERRORS and time.monotonic() < deadline:
                        continue
                    else:
                        raise LabError(f"creating topic {name} failed: {exc}") from None
                pending.pop(name)
            if pending:
                time.sleep(0.5)
        self._wait_leaders(set(topics), "creating topics")

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> None:
        """Create one more topic with its own configs (e.g. `{"max.message.bytes": "200"}`),
        returned once every broker shows a leader for each of its partitions. A config Kafka
        refuses is a LabError naming it."""
        if not name or partitions < 1:
            raise UsageError(f"invalid topic {name!r}:{partitions} (need name:partitions >= 1)")
        if name in self.topics:
            raise UsageError(f"topic {name!r} exists already")
        self.topic_configs[name] = dict(configs or {})
        try:
            self._create_topics({name: partitions})
        except BaseException:
            self.topic_configs.pop(name, None)
            raise
        self.topics[name] = partitions
        log.info(
            "topic created", extra={"topic": name, "partitions": partitions, **(configs or {})}
        )

    def alter_topic(self, name: str, configs: dict[str, str | None]) -> None:
        """Change a running topic's configs (`{"max.message.bytes": "200"}`; None removes the
        override, back to the broker's default), returned once every broker describes the
        topic with them (each applies them from the metadata log in its own time). A config
        Kafka refuses is a LabError naming it."""
        if name not in self.topics:
            raise UsageError(f"no topic {name!r} in this lab (topics: {', '.join(self.topics)})")
        if not configs:
            raise UsageError("alter_topic needs at least one config")
        entries = [
            ConfigEntry(
                key,
                value,
                incremental_operation=AlterConfigOpType.DELETE
                if value is None
                else AlterConfigOpType.SET,
            )
            for key, value in configs.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        try:
            admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        except KafkaException as exc:
            raise LabError(f"altering topic {name} ({configs}) failed: {exc}") from None
        deadline = time.monotonic() + 60
        for state in self.brokers.values():
            if state.condition != "up":
                continue
            one = AdminClient({"bootstrap.servers": state.address, "log_level": 0})
            while not self._configs_applied(one, name, configs):
                if time.monotonic() > deadline:
                    raise LabError(f"broker {state.id} did not apply {configs} to {name} in 60 s")
                time.sleep(POLL_SECONDS * 4)
        self.topic_configs.setdefault(name, {}).update(
            {k: v for k, v in configs.items() if v is not None}
        )
        for key in (k for k, v in configs.items() if v is None):
            self.topic_configs[name].pop(key, None)
        log.info("topic altered", extra={"topic": name, "configs": configs})

    @staticmethod
    def _configs_applied(admin: AdminClient, name: str, configs: dict[str, str | None]) -> bool:
        """Whether `admin`'s broker describes topic `name` with `configs` (None: no override,
        the value is the broker's default)."""
        resource = ConfigResource(ResourceType.TOPIC, name)
        try:
            described = admin.describe_configs([resource])[resource].result(timeout=10)
        except KafkaException:
            return False
        for key, value in configs.items():
            entry = described.get(key)
            if entry is None:
                return False
            if value is None and ConfigSource(entry.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG:
                return False
            if value is not None and entry.value != value:
                return False
        return True

    def grant(
        self, user: str, topic: str, operations: tuple[str, ...] = ("WRITE", "DESCRIBE")
    ) -> None:
        """Allow SASL user `user` the `operations` on `topic` (literal ACLs, any host), returned
        once every broker's authorizer lists them (each learns them from the metadata log in
        its own time). Other users and other topics stay denied."""
        if user not in self.settings.sasl_users:
            users = ", ".join(sorted(self.settings.sasl_users)) or "none; start it with sasl_users"
            raise UsageError(f"no SASL user {user!r} in this lab (users: {users})")
        bad = [op for op in operations if op not in TOPIC_OPERATIONS]
        if bad or not operations:
            raise UsageError(
                f"ACL operations must be among {', '.join(TOPIC_OPERATIONS)}, "
                f"got {list(operations)}"
            )
        principal = f"User:{user}"
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                principal,
                "*",
                AclOperation[op],
                AclPermissionType.ALLOW,
            )
            for op in operations
        ]
        admin = AdminClient({"bootstrap.servers": self._healthy_bootstrap(), "log_level": 0})
        for future in admin.create_acls(bindings).values():
            try:
                future.result(timeout=30)
            except KafkaException as exc:
                raise LabError(
                    f"granting {', '.join(operations)} on {topic} to {user} failed: {exc}"
                ) from None
        wanted = {AclOperation[op] for op in operations}
        query = AclBindingFilter(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        deadline = time.monotonic() + 60
        for state in self.brokers.values():
            if state.condition != "up":
                continue
            one = AdminClient({"bootstrap.servers": state.address, "log_level": 0})
            while True:
                try:
                    listed = {b.operation for b in one.describe_acls(query).result(timeout=10)}
                    if wanted <= listed:
                        break
                except KafkaException:
                    pass
                if time.monotonic() > deadline:
                    raise LabError(
                        f"broker {state.id} did not list the ACLs for {user} on {topic} within 60 s"
                    )
                time.sleep(POLL_SECONDS * 4)
        log.info(
            "acls granted", extra={"user": user, "topic": topic, "operations": list(operations)}
        )

    def _wait_leaders(
        self,
        topics: set[str],
        step: str,
        accept: Callable[[str, int, Any], bool] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Until every healthy broker's own metadata shows every partition of `topics` with
        a leader (and satisfying `accept`): brokers learn metadata changes one by one, so
        asking one of them is not enough."""
        deadline = time.monotonic() + timeout
        last = "no metadata yet"
        while True:
            try:
                lagging = [
                    f"broker {b.id}: {waiting}"
                    for b in self.brokers.values()
                    if b.condition == "up"
                    and (waiting := self._unsettled(self._metadata(b.address), topics, accept))
                ]
                if not lagging:
                    return
                last = lagging[0]
            except KafkaException as exc:
                last = str(exc)[:200]
            if time.monotonic() > deadline:
                raise LabError(f"{step}: not done within {timeout:.0f} s ({last})")
            time.sleep(POLL_SECONDS * 4)

    @staticmethod
    def _unsettled(
        md: ClusterMetadata, topics: set[str], accept: Callable[[str, int, Any], bool] | None
    ) -> str:
        """What in `md` is not there yet: missing topics, leaderless or unaccepted partitions."""
        missing = [t for t in topics if t not in md.topics or md.topics[t].error]
        pending = [
            f"{t}/{p}"
            for t in topics
            if t not in missing
            for p, part in md.topics[t].partitions.items()
            if part.leader < 0 or (accept is not None and not accept(t, p, part))
        ]
        return ", ".join((missing + pending)[:5])
