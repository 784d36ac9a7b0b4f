"""What a node leaves on this machine, and clearing it: its cgroups, its mounts, its
processes, and the record that lets a later session clean up after a killed one.

The pods' cgroups live under a cgroup of the node's own (`cgroupRoot`), removed
afterwards. A test process killed outright cannot clean up: every node records its
owner in /run/hangwatch-node, and the next `node_cluster` first removes what nodes of
dead owners left (`reap_abandoned`: their processes, pods, cgroups, bridge and
directory).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

from hangwatch_testing.node.network import ip
from hangwatch_testing.processes import running

CGROUP_FS = Path("/sys/fs/cgroup")
OWNERS = Path("/run/hangwatch-node")
"""One record per started node (file named after its bridge: owner pid and work
directory), so that a later session can clean up after a test process that was killed
before its `close` could run (`reap_abandoned`)."""


def cgroup_name(bridge: str) -> str:
    """The cgroup of the node named after `bridge` (in every controller)."""
    return f"hangwatch-node-{bridge}"


def cgroup_dirs(root: str) -> list[Path]:
    """Cgroup `root` in every mounted hierarchy."""
    return [
        hierarchy / root
        for hierarchy in sorted(CGROUP_FS.iterdir())
        if hierarchy.is_dir() and not hierarchy.is_symlink()
    ]


def make_cgroups(root: str) -> None:
    """Cgroup `root` in every mounted hierarchy (cpuset: the root's CPUs and memory
    nodes, which a new cgroup v1 cpuset does not inherit)."""
    for directory in cgroup_dirs(root):
        directory.mkdir()
        if directory.parent.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (directory / knob).write_text((directory.parent / knob).read_text())


def remove_tree(directory: Path) -> None:
    """Every cgroup under `directory` and itself, deepest first (the empty ones: a
    cgroup with a process left in it stays)."""
    for sub, _, _ in sorted(os.walk(directory), key=lambda w: -len(w[0])):
        with suppress(OSError):
            os.rmdir(sub)


def mounts_under(prefix: Path) -> list[str]:
    """Mount points of this mount namespace under `prefix`."""
    return [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(prefix))
    ]


def unmount_under(prefix: Path) -> None:
    """Lazily unmount everything under `prefix`, deepest first (three passes at most)."""
    for _ in range(3):
        mounts = mounts_under(prefix)
        if not mounts:
            return
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)


def processes_of(workdir: Path, program: bytes = b"") -> list[int]:
    """Processes whose command line names `workdir` (and contains `program`)."""
    marker = str(workdir).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if program in cmdline and marker in cmdline:
                pids.append(int(entry.name))
    return pids


def shims_of(workdir: Path) -> list[int]:
    """The runc shims of the containerd whose socket is under `workdir`."""
    return processes_of(workdir, b"containerd-shim-runc-v2")


def reap_abandoned() -> list[str]:
    """Clean up after nodes whose test process died without stopping them (SIGKILL, a
    crash): their pods' processes (every process in the node's cgroups), runc shims,
    cgroups, bridge and work directory. Nodes of live processes are left alone. Returns
    the bridges it cleaned."""
    if not OWNERS.is_dir():
        return []
    cleaned = []
    for record in sorted(OWNERS.iterdir()):
        with suppress(OSError, ValueError, KeyError):
            owner = json.loads(record.read_text())
            if running(int(owner["pid"])):
                continue
            workdir = Path(owner["workdir"])
            # the control plane, the runtime and its shims (they all name the directory)
            for pid in processes_of(workdir):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            roots = [h / cgroup_name(record.name) for h in CGROUP_FS.iterdir()]
            roots = [root for root in roots if root.is_dir()]
            for root in roots:  # the pods' processes
                for directory, _, _ in os.walk(root):
                    with suppress(OSError):
                        for pid_text in Path(directory, "cgroup.procs").read_text().split():
                            with suppress(ProcessLookupError):
                                os.kill(int(pid_text), signal.SIGKILL)
            deadline = time.monotonic() + 10  # killed processes leave their cgroups soon
            while roots and time.monotonic() < deadline:
                for root in roots:
                    remove_tree(root)
                roots = [root for root in roots if root.exists()]
                time.sleep(0.1)
            ip("link", "del", record.name, check=False)
            shutil.rmtree(workdir, ignore_errors=True)
            record.unlink()
            cleaned.append(record.name)
    return cleaned
