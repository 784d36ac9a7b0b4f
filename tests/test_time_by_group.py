"""`make test` ends by saying where its time went: each worker's busy time and its groups,
then the longest groups (`hangwatch_testing.group_times`, fed by tests/conftest.py)."""

from __future__ import annotations

from hangwatch_testing.group_times import GroupTimes, group_of


def test_a_node_id_names_its_xdist_group_else_its_module() -> None:
    assert group_of("tests/demo/test_x.py::test_y@spark") == "spark"
    assert group_of("tests/demo/test_x.py::test_y[a@b]@spark") == "spark"
    assert group_of("tests/demo/test_x.py::test_y") == "tests/demo/test_x.py"


def test_the_busiest_worker_comes_first_with_its_longest_groups() -> None:
    times = GroupTimes()
    for when, seconds in (("setup", 30.0), ("call", 600.0), ("teardown", 5.0)):
        times.add("tests/a.py::t1@spark", when, seconds, "gw0")
    times.add("tests/b.py::t2@kube", "call", 100.0, "gw1")
    times.add("tests/c.py::t3", "call", 61.4, "gw1")
    times.add("tests/c.py::t4", "call", 1.0, "gw1")
    assert times.summary(top=2) == [
        "worker gw0: busy 10m35s in 1 groups (spark 10m35s)",
        "worker gw1: busy 2m42s in 2 groups (kube 1m40s, tests/c.py 1m02s)",
        "group spark: 10m35s over 1 tests",
        "group kube: 1m40s over 1 tests",
    ]


def test_a_run_with_nothing_reported_says_nothing() -> None:
    assert GroupTimes().summary() == []
