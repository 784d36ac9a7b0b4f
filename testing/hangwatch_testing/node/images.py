"""The hangwatch image imported into the node's runtime (no registry is involved).

`hangwatch_image_in` imports `make image`, cached by content
(`hangwatch_testing.containers.hangwatch_image_archive`; scripts/setup.sh --kube builds
it ahead), into the node's containerd: the node tier's `hangwatch_image` fixture and
`benchmarks/pod_startup.py` use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hangwatch_testing.containers import hangwatch_image_archive
from hangwatch_testing.node.cluster import NodeCluster


@contextmanager
def hangwatch_image_in(node: NodeCluster) -> Iterator[str]:
    """The cached `make image` (built when missing) imported into the node's containerd;
    yields the image's name (`localhost/hangwatch:<key>`). The imported copy goes with
    the node's containerd root."""
    image, archive = hangwatch_image_archive()
    node.import_image(archive)
    yield image
