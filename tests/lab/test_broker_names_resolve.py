"""A process started under `hangwatch_lab.kafka.names.in_hosts_namespace` resolves the
brokers' names through the lab's hosts file, sees the file rewritten in place while it
runs (a broker moved), and leaves the machine's /etc/hosts as it was (root: a mount
namespace of its own; no Kafka)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hangwatch_lab.kafka import names
from hangwatch_lab.kafka.nodes import write_in_place


def test_a_process_follows_the_lab_hosts_file_and_the_machine_keeps_its_own(
    tmp_path: Path,
) -> None:
    machine = Path("/etc/hosts").read_text()
    hosts = tmp_path / "hosts"
    write_in_place(hosts, names.hosts_text(machine, {1: names.named_address(1, 1)}))
    name = names.hostname(1)
    with subprocess.Popen(
        [*names.in_hosts_namespace(hosts), "sh", "-c",
         f"getent hosts {name}; read moved; getent hosts {name}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline().split()
        write_in_place(hosts, names.hosts_text(machine, {1: names.named_address(1, 2)}))
        proc.stdin.write("moved\n")
        proc.stdin.close()
        second = proc.stdout.readline().split()
        assert proc.wait(timeout=10) == 0
    assert first == ["127.77.1.1", name]
    assert second == ["127.77.2.1", name]
    assert Path("/etc/hosts").read_text() == machine
    looked_up = subprocess.run(
        ["getent", "hosts", name], check=False, capture_output=True, text=True
    )
    assert looked_up.returncode != 0, looked_up.stdout
