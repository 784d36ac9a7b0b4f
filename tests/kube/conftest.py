"""Fixtures of the real-API-server tier: one local control plane and one chart release.

`cluster` starts etcd + kube-apiserver v1.20.2 + kube-controller-manager once per
session (a missing binary fails every test with one line saying what to run or
install); `release` installs the chart into it with real Helm once per session, with
the values of the README's own `helm install` command. Every
test module of the tier marks itself `xdist_group("kube")`, so under pytest-xdist
(`--dist loadgroup`) one worker owns the control plane.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube.cluster import ClusterUnavailableError, LocalCluster, local_cluster
from tests.kube.readme import helm_install
from tests.kube.release import NAMESPACE, RELEASE, HelmRelease, chart_for_1_20


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    try:
        with local_cluster() as running:
            yield running
    except ClusterUnavailableError as exc:
        pytest.fail(f"real-API-server tier: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def release(cluster: LocalCluster) -> Iterator[HelmRelease]:
    directory = Path(tempfile.mkdtemp(prefix="hangwatch-chart-"))
    try:
        installed = HelmRelease(cluster, chart_for_1_20(directory))
        readme = helm_install()  # the README's own `helm install` command
        assert (readme.release, readme.namespace, readme.chart) == (
            RELEASE,
            NAMESPACE,
            "charts/hangwatch",
        )
        installed.install(readme.values)
        yield installed
    finally:
        shutil.rmtree(directory, ignore_errors=True)
