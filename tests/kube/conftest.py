"""Fixtures of the real-API-server tier: one local control plane and one chart release.

`cluster` starts etcd + kube-apiserver + kube-controller-manager (the release
scripts/build-kube.sh builds) once per session (a missing build fails every test with
one line saying what to run); `release` installs the chart into it with real Helm once
per session, with the values of the README's own `helm install` command. Every test
module of the tier marks itself `xdist_group("kube")`, so under pytest-xdist
(`--dist loadgroup`) one worker owns the control plane. `floor` starts the same control
plane of the floor release (`scripts/build-kube.sh --floor`) for the one module that
uses it, tests/kube/test_floor.py, a group of its own (its module's) beside `kube`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hangwatch_testing.kube.cluster import ClusterUnavailableError, LocalCluster, local_cluster
from hangwatch_testing.kube.readme import helm_install
from hangwatch_testing.kube.release import CHART, NAMESPACE, RELEASE, HelmRelease


def _started(*, floor: bool) -> Iterator[LocalCluster]:
    try:
        with local_cluster(floor=floor) as running:
            yield running
    except ClusterUnavailableError as exc:
        tier = "the floor release" if floor else "real-API-server tier"
        pytest.fail(f"{tier}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    yield from _started(floor=False)


@pytest.fixture(scope="module")
def floor() -> Iterator[LocalCluster]:
    """The same control plane of the floor release (tests/kube/test_floor.py)."""
    yield from _started(floor=True)


@pytest.fixture(scope="session")
def release(cluster: LocalCluster) -> HelmRelease:
    installed = HelmRelease(cluster, CHART)
    readme = helm_install()  # the README's own `helm install` command
    assert (readme.release, readme.namespace, readme.chart) == (
        RELEASE,
        NAMESPACE,
        "charts/hangwatch",
    )
    installed.install(readme.values)
    return installed
