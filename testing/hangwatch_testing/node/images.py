"""Images built here and imported into the node's runtime (no registry is involved).

The node tier's `hangwatch_image` fixture and `benchmarks/pod_startup.py`
use `hangwatch_image_in`.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hangwatch_testing.containers import (
    ROOT,
    ContainerTools,
    bookworm_python_rootfs,
    require_tools,
    run,
)
from hangwatch_testing.node.cluster import NodeCluster


@contextmanager
def hangwatch_image_in(node: NodeCluster, image: str = "") -> Iterator[str]:
    """`make image` built on the debootstrap base the image tier uses, imported into the
    node's containerd; yields the image's name (`localhost/hangwatch:<random>` unless
    given). buildah's private store is removed afterwards; the imported copy goes with
    the node's containerd root."""
    image = image or f"localhost/hangwatch:{uuid.uuid4().hex[:8]}"
    require_tools()
    tools = ContainerTools.create()
    base = f"localhost/hangwatch-node-base:{image.rsplit(':', 1)[1]}"
    try:
        tools.import_rootfs(bookworm_python_rootfs(), base)
        env = {**tools.env, "HANGWATCH_IMAGE_TOOL": "buildah"}
        run(["make", "-C", str(ROOT), "image", f"IMAGE={image}", f"BASE_IMAGE={base}"], env=env)
        with tempfile.TemporaryDirectory(prefix="hangwatch-image-") as tmp:
            archive = Path(tmp) / "hangwatch.tar"
            run(["buildah", "push", "--quiet", image, f"docker-archive:{archive}:{image}"], env=env)
            node.import_image(archive)
        yield image
    finally:
        tools.close()
