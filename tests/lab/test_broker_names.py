"""The brokers' names (`hangwatch_lab.kafka.names`), pure: each broker's name and its
loopback address in each life, and the lab's hosts file (the machine's own lines kept,
one line per broker after them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_lab.kafka import names


def test_a_broker_keeps_its_name_and_moves_address_with_each_life() -> None:
    assert names.hostname(2) == "kafka-2.hangwatch.test"
    assert names.named_address(2, 1) == "127.77.1.2"
    assert names.named_address(2, 2) == "127.77.2.2"
    for broker, generation in ((0, 1), (255, 1), (1, 0), (1, names.MAX_GENERATION + 1)):
        with pytest.raises(ValueError, match="no named address"):
            names.named_address(broker, generation)


def test_the_hosts_file_keeps_the_machines_lines_then_names_each_broker() -> None:
    machine = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost"
    text = names.hosts_text(machine, {2: "127.77.1.2", 1: "127.77.3.1"})
    assert text.splitlines() == [
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost",
        names.MARK,
        "127.77.3.1 kafka-1.hangwatch.test",
        "127.77.1.2 kafka-2.hangwatch.test",
    ]
    assert names.hosts_text("", {1: "127.77.1.1"}) == (
        f"{names.MARK}\n127.77.1.1 kafka-1.hangwatch.test\n"
    )


def test_the_namespace_prefix_binds_the_file_then_execs_the_command() -> None:
    prefix = names.in_hosts_namespace(Path("/tmp/lab/hosts"))
    assert prefix[:2] == ["unshare", "--mount"]
    assert prefix[-3:] == ["-c", names.BIND_AND_EXEC, "/tmp/lab/hosts"]
    assert names.BIND_AND_EXEC.endswith('exec "$@"')
