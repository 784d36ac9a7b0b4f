"""The hangwatch image `make image` builds, cached by content and imported into the node's
runtime (no registry is involved).

`hangwatch_image_archive` runs `make image` (buildah, on the debootstrap base the image
tier uses) once per content and saves the image as a docker archive in
~/.cache/hangwatch/image/<key>/, the key hashing the base, the build's inputs (the
Dockerfile, `make image`'s script and the build context .dockerignore lets in) and the
commit (the image's revision label); a file lock makes concurrent callers build once, and
older keys are removed. scripts/setup.sh --kube builds it ahead
(`hangwatch_testing.prebuilt`); the node tier's `hangwatch_image` fixture and
`benchmarks/pod_startup.py` import it with `hangwatch_image_in`.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hangwatch_testing.containers import (
    CACHE_HOME,
    ROOT,
    ContainerTools,
    bookworm_python_rootfs,
    require_tools,
    run,
)
from hangwatch_testing.node.cluster import NodeCluster

CACHE = CACHE_HOME / "hangwatch" / "image"
INPUTS = (
    "image/Dockerfile",
    "scripts/build-image.sh",
    "Makefile",
    ".dockerignore",
    "pyproject.toml",
    "README.md",
    "producer",
    "core",
    "lab",
    "sidecar",
    "pipeline",
    "operator",
    "demo",
)
"""What `make image` reads: the Dockerfile, its script, and the context it copies."""
SKIPPED = ("__pycache__", ".pyc", ".egg-info")


def _key(base: Path) -> str:
    """The content key: the base, the commit, and every input file's bytes."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "--", *INPUTS],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    revision = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    digest = hashlib.sha256(f"base {base.name} revision {revision}\n".encode())
    for name in sorted(n for n in listed if not any(s in n for s in SKIPPED)):
        path = ROOT / name
        if path.is_file():
            digest.update(f"{name}\n".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def hangwatch_image_archive() -> tuple[str, Path]:
    """(the image's name, its docker archive): `make image` on the bookworm base, built
    unless this content's archive is cached."""
    base = bookworm_python_rootfs()
    key = _key(base)
    image, archive = f"localhost/hangwatch:{key}", CACHE / key / "hangwatch.tar"
    if archive.is_file():
        return image, archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker or setup may be building it
        if not archive.is_file():
            _build(base, image, archive)
            for old in CACHE.iterdir():
                if old.is_dir() and old.name != key:
                    shutil.rmtree(old, ignore_errors=True)
    return image, archive


def _build(base_tarball: Path, image: str, archive: Path) -> None:
    require_tools()
    tools = ContainerTools.create()
    base = f"localhost/hangwatch-image-base:{image.rsplit(':', 1)[1]}"
    try:
        tools.import_rootfs(base_tarball, base)
        env = {**tools.env, "HANGWATCH_IMAGE_TOOL": "buildah"}
        run(["make", "-C", str(ROOT), "image", f"IMAGE={image}", f"BASE_IMAGE={base}"], env=env)
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        run(["buildah", "push", "--quiet", image, f"docker-archive:{partial}:{image}"], env=env)
        partial.replace(archive)
    finally:
        tools.close()


@contextmanager
def hangwatch_image_in(node: NodeCluster) -> Iterator[str]:
    """The cached `make image` (built when missing) imported into the node's containerd;
    yields the image's name (`localhost/hangwatch:<key>`). The imported copy goes with
    the node's containerd root."""
    image, archive = hangwatch_image_archive()
    node.import_image(archive)
    yield image
