"""Fixtures of the node tier: one single-node cluster of a current release that runs pods.

`node` starts etcd, the control plane, containerd and a kubelet once per session
(`hangwatch_testing.node.cluster`), waits for the node to be Ready, and afterwards stops
everything and fails the session's last test if the tier left an interface, an
iptables rule, a mount or a runtime process behind. `broker` (per module) is a
listener on the node's IP that never answers. `hangwatch_image` imports the
project's image, `make image` (buildah, on the debootstrap base tests/image uses) cached
by content (`hangwatch_testing.node.images`: setup builds it ahead), into the node's
containerd; `released` is this version's `make release` with that very image (no second
build), which tests/node/test_install_from_registries.py publishes and installs. Every
module of the tier marks itself `xdist_group("node")`, so one pytest-xdist worker owns
the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_operator.helm_release import merge_values
from hangwatch_testing.kube.readme import helm_install
from hangwatch_testing.kube.release import CHART, NAMESPACE, RELEASE, HelmRelease
from hangwatch_testing.node.cluster import NodeCluster
from hangwatch_testing.node.images import hangwatch_image_in, release_into
from hangwatch_testing.silent_broker import SilentBroker
from tests.node.started import started_node

FIRST_MODULE = "test_install_from_registries.py"
"""The tier's module that installs the chart from a registry and uninstalls it on a node
of its own: it runs first, its node stopped before the session's `node` starts (one
node at a time on this host). Its own node because the kubelet records which names an
image it pulled was pulled under (KubeletEnsureSecretPulledImages, on by default): after
pulling the image from the registry, the same image under the imported `localhost/` name
is no longer taken as preloaded, and the kubelet tries to pull it (ImagePullBackOff)."""


LONG_PACKAGE = "test_spark_submit"
"""The tier's package of minutes-long tests (spark-submit jobs), run right after
`FIRST_MODULE` so that the group ends with its quick modules. pytest-xdist hands a worker
its next group once the current one has at most two tests pending; with two jobs of
about three minutes last, the worker running this group (the suite's longest) took
`lab-timing` (6 min) six minutes before its end, and ran it after the group while the
other workers had nothing left (cold run of 2026-12-02: that worker busy 39 min 13 s,
the others 35-38 min; the cores 21 % busy in the run's last 4.5 minutes)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`FIRST_MODULE`'s tests first, then `LONG_PACKAGE`'s, then the rest (a stable sort:
    tests/conftest.py's ordering of the groups, which runs after this, keeps this order
    within the node group)."""

    def place(item: pytest.Item) -> int:
        if item.path.name == FIRST_MODULE:
            return 0
        return 1 if LONG_PACKAGE in item.path.parts else 2

    items.sort(key=place)


@pytest.fixture(scope="session")
def node() -> Iterator[NodeCluster]:
    yield from started_node("the session")


@pytest.fixture(scope="module")
def broker(node: NodeCluster) -> Iterator[SilentBroker]:
    """A broker address on the node's IP that accepts connections and never answers."""
    listener = SilentBroker(node.node_ip)
    yield listener
    listener.close()


@pytest.fixture(scope="session")
def hangwatch_image(node: NodeCluster) -> Iterator[str]:
    """`make image` on the debootstrap base (cached by content; setup builds it ahead),
    imported into the node's runtime; its name."""
    with hangwatch_image_in(node) as image:
        yield image


@pytest.fixture(scope="session")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This version's artifacts (`make release` into a scratch dist/), its image the
    tier's cached `make image` (`IMAGE_ARCHIVE`: not built a second time)."""
    return release_into(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def release(node: NodeCluster, hangwatch_image: str) -> HelmRelease:
    """The chart itself (no copy: this release meets its kubeVersion floor), installed
    with Helm 4's server-side apply and the README's `helm install` values; the images
    are the one `hangwatch_image` imports into the node (no registry)."""
    readme = helm_install()
    assert (readme.release, readme.namespace, readme.chart) == (
        RELEASE,
        NAMESPACE,
        "charts/hangwatch",
    )
    repository, tag = hangwatch_image.rsplit(":", 1)
    image = {"repository": repository, "tag": tag}
    installed = HelmRelease(node, CHART)
    installed.install(merge_values(readme.values, {"image": image, "sidecar": {"image": image}}))
    return installed
