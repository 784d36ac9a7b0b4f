"""The hangwatch image imported into the node's runtime (no registry is involved).

`hangwatch_image_in` imports `make image`, cached by content
(`hangwatch_testing.containers.hangwatch_image_archive`; scripts/setup.sh --kube builds
it ahead), into the node's containerd: the node tier's `hangwatch_image` fixture and
`benchmarks/pod_startup.py` use it; `release_into` makes this version's release (`make
release`) with that very image.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hangwatch_testing.containers import ROOT, hangwatch_image_archive, run
from hangwatch_testing.node.cluster import NodeCluster


@contextmanager
def hangwatch_image_in(node: NodeCluster) -> Iterator[str]:
    """The cached `make image` (built when missing) imported into the node's containerd;
    yields the image's name (`localhost/hangwatch:<key>`). The imported copy goes with
    the node's containerd root."""
    image, archive = hangwatch_image_archive()
    node.import_image(archive)
    yield image


def release_into(dist: Path) -> Path:
    """`make release DIST=dist` with the cached `make image` as its image
    (`IMAGE_ARCHIVE`: nothing built twice); returns `dist`."""
    _, archive = hangwatch_image_archive()
    command = ["make", "--no-print-directory", "-C", str(ROOT), "release", f"DIST={dist}"]
    run([*command, f"IMAGE_ARCHIVE={archive}", f"PY={sys.executable}"], timeout=1200)
    return dist
