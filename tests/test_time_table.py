"""docs/testing-tiers.md's time table is written from a run's JUnit XML and output.

Covers scripts/time_table.py: tests summed into their xdist groups (the `@group` of their
node ids), cold and warm side by side, `make test`'s phases and setup steps from the
lines scripts/timed.sh and the setup scripts print, the slowest tests, the table replaced
between its markers and nowhere else, and a report or log it cannot read as one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hangwatch_testing import scripts

ROOT = Path(__file__).resolve().parents[1]

COLD_LOG = """\
make test: machine: 2 cores (AMD EPYC), 23.5 GiB, Linux 6.1, at abc1234
build-kube: kubernetes v1.37.2 took 16m15s
setup: pip took 0m41s
make test: setup took 24m03s
make test: check took 1m02s
worker gw0: busy 49m41s in 12 groups (spark 46m38s, a.py 2m00s, b.py 1m03s, 9 more)
worker gw1: busy 39m20s in 1 groups (node 39m19s)
====== 3 passed, 1 skipped in 3210.40s (0:53:30) ======
make test: pytest took 53m31s
"""


def _junit(path: Path, cases: list[tuple[str, str, float, str]]) -> Path:
    body = "".join(
        f'<testcase classname="{cls}" name="{name}" time="{seconds}">{extra}</testcase>'
        for cls, name, seconds, extra in cases
    )
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{body}</testsuite></testsuites>')
    return path


@pytest.fixture
def table() -> ModuleType:
    return scripts.load("time_table")


@pytest.fixture
def cold(tmp_path: Path) -> tuple[Path, Path]:
    junit = _junit(
        tmp_path / "cold.xml",
        [
            ("tests.demo.test_a", "test_one@spark", 400.0, ""),
            ("tests.demo.test_a", "test_two[x@y]@spark", 200.0, ""),
            ("tests.node.test_b", "test_three@node", 300.0, ""),
            ("tests.test_c", "test_four@test_c.py", 1.5, '<skipped message="no"/>'),
        ],
    )
    log = tmp_path / "cold.log"
    log.write_text(COLD_LOG)
    return junit, log


def test_groups_sum_their_tests_and_phases_come_from_the_log(
    table: ModuleType, cold: tuple[Path, Path]
) -> None:
    run = table.read_run("cold", *cold)
    assert run.seconds_by_group() == {"spark": 600.0, "node": 300.0, "test_c.py": 1.5}
    assert run.tests_by_group()["spark"] == 2
    assert "tests/demo/test_a.py::test_two[x@y]" in run.seconds_by_test
    assert run.phases == {"setup": 24 * 60 + 3, "check": 62, "pytest": 53 * 60 + 31}
    assert run.steps == {"build-kube: kubernetes v1.37.2": 975, "setup: pip": 41}
    assert run.workers == {"gw0": 49 * 60 + 41, "gw1": 39 * 60 + 20}
    assert run.machine.startswith("2 cores (AMD EPYC)")
    assert dict(run.outcomes) == {"passed": 3, "skipped": 1}
    assert run.total() == 24 * 60 + 3 + 62 + 53 * 60 + 31


def test_cold_and_warm_side_by_side_slowest_first(
    table: ModuleType, cold: tuple[Path, Path], tmp_path: Path
) -> None:
    warm_junit = _junit(
        tmp_path / "warm.xml",
        [
            ("tests.demo.test_a", "test_one@spark", 300.0, ""),
            ("tests.node.test_b", "test_three@node", 120.0, ""),
        ],
    )
    warm_log = tmp_path / "warm.log"
    warm_log.write_text("make test: setup took 0m20s\nreal\t45m3.20s\n")
    runs = [table.read_run("cold", *cold), table.read_run("warm", warm_junit, warm_log)]
    lines = table.table(runs, 2)
    assert lines[0] == table.BEGIN and lines[-1] == table.END
    assert "| setup | 24m03s | 0m20s |" in lines
    assert "| **make test** | **78m36s** | **45m03s** |" in lines
    assert "| spark | 2 | 10m00s | 5m00s |" in lines
    assert "| 1 more groups, each under 30 s (cold) | 1 | 0m02s | 0m00s |" in lines
    tests = [line for line in lines if line.startswith("| `")]
    assert tests == [
        "| `tests/demo/test_a.py::test_one` | spark | 6m40s | 5m00s |",
        "| `tests/node/test_b.py::test_three` | node | 5m00s | 2m00s |",
    ]
    assert "Workers' busy time (cold: gw0 49m41s, gw1 39m20s)." in lines


def test_only_the_text_between_the_markers_is_replaced(table: ModuleType) -> None:
    doc = f"before\n{table.BEGIN}\nold table\n{table.END}\nafter\n"
    assert table.replace_table(doc, [table.BEGIN, "new", table.END]) == (
        f"before\n{table.BEGIN}\nnew\n{table.END}\nafter\n"
    )
    with pytest.raises(table.InputError, match="markers"):
        table.replace_table("no markers here", ["x"])


def test_the_docs_carry_the_markers(table: ModuleType) -> None:
    doc = table.DOC.read_text()
    assert doc.count(table.BEGIN) == 1 and doc.count(table.END) == 1
    assert doc.index(table.BEGIN) < doc.index(table.END)


@pytest.mark.parametrize(
    ("junit", "problem"),
    [
        ("<testsuites", "not a JUnit XML report"),
        ("<testsuites><testsuite/></testsuites>", "no test cases"),
    ],
)
def test_a_report_it_cannot_read_is_one_line(
    junit: str, problem: str, cold: tuple[Path, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text(junit)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "time_table.py"), "--cold", str(bad), str(cold[1])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and problem in done.stderr, done.stderr
    assert done.stderr.startswith("time_table.py: error: ")
