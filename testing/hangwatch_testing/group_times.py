"""Where `make test`'s time went: each xdist group's and each worker's share of the run.

`make test` runs test groups on a few pytest-xdist workers (`--dist loadgroup`); the run
lasts as long as its busiest worker, so the figure that matters is each worker's total
and the groups it ran. `GroupTimes` adds up every test phase's duration as the run's
reports arrive (tests/conftest.py feeds it from `pytest_runtest_logreport` on the
controller) and `summary` writes the lines `make test` prints at its end.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


def group_of(nodeid: str) -> str:
    """The xdist group in a node id (`path::test@group`), else the test's module."""
    test = nodeid.rsplit("::", 1)[-1]
    if "@" in test:
        return test.rsplit("@", 1)[1]
    return nodeid.split("::", 1)[0]


@dataclass
class GroupTimes:
    """Seconds spent per group and per worker, and tests per group."""

    seconds_by_group: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tests_by_group: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds_by_worker: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    groups_by_worker: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, nodeid: str, when: str, duration_seconds: float, worker: str) -> None:
        """One report: a test's `setup`, `call` or `teardown` phase on `worker`."""
        group = group_of(nodeid)
        self.seconds_by_group[group] += duration_seconds
        self.seconds_by_worker[worker] += duration_seconds
        self.groups_by_worker[worker].add(group)
        if when == "call":
            self.tests_by_group[group] += 1

    def summary(self, top: int = 8) -> list[str]:
        """The busiest workers with their groups, then the `top` longest groups."""
        lines = []
        for worker, seconds in sorted(self.seconds_by_worker.items(), key=lambda kv: -kv[1]):
            longest = sorted(self.groups_by_worker[worker], key=lambda g: -self.seconds_by_group[g])
            shown = ", ".join(f"{g} {minutes(self.seconds_by_group[g])}" for g in longest[:3])
            more = len(longest) - 3
            lines.append(
                f"worker {worker}: busy {minutes(seconds)} in {len(longest)} groups "
                f"({shown}{f', {more} more' if more > 0 else ''})"
            )
        ranked = sorted(self.seconds_by_group.items(), key=lambda kv: -kv[1])
        for group, seconds in ranked[:top]:
            lines.append(
                f"group {group}: {minutes(seconds)} over {self.tests_by_group[group]} tests"
            )
        return lines


def minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s"
