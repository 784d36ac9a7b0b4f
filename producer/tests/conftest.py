"""Fixtures of the producer distribution's own tests: a real Kafka broker, a fresh topic.

These tests run under every Python the package supports (3.9 in a Debian bullseye root,
the machine's 3.11), with nothing of hangwatch installed but `hangwatch-producer`, so
they cannot start hangwatch's lab themselves: `tests/producer_package` (the project's
suite) starts a real Apache Kafka broker from the lab and runs them with its address in
`HANGWATCH_PRODUCER_TEST_BOOTSTRAP`. Without it they fail at once, naming the variable
(never skip: a green run must mean the broker was there).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

BOOTSTRAP_ENV = "HANGWATCH_PRODUCER_TEST_BOOTSTRAP"
PARTITIONS = 3


@pytest.fixture(scope="session")
def bootstrap() -> str:
    """The broker's `host:port` (from the environment, see the module docstring)."""
    value = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if not value:
        pytest.fail(
            f"{BOOTSTRAP_ENV} is not set: run these tests through tests/producer_package "
            "(it starts a Kafka broker), or point it at a broker",
            pytrace=False,
        )
    return value


@pytest.fixture
def topic(bootstrap: str) -> Iterator[str]:
    """A new topic of PARTITIONS partitions on the broker, deleted afterwards."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"producer-test-{uuid.uuid4().hex[:10]}"
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(30)
    yield name
    for future in admin.delete_topics([name], operation_timeout=30).values():
        future.result(30)
