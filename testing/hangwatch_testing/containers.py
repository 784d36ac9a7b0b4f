"""Builds and runs container images here, where no public image registry is reachable.

Helpers for tests/image, the node tier and the pod start-up benchmark.
`bookworm_python_rootfs` makes a Debian
bookworm root filesystem with Python 3.11 from Debian (`debootstrap --variant=minbase`,
~1-3 minutes, cached as a tarball under ~/.cache/hangwatch/image-base);
`ContainerTools` gives buildah and podman a private storage (vfs, in a temporary
directory) and configuration (runc, cgroupfs, file events: crun cannot set rlimits
in our sandboxes), so a test leaves nothing in the machine's own image store.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
CACHE = CACHE_HOME / "hangwatch" / "image-base"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv")
SLIMMED = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
)
"""Removed from the root filesystem, as Debian's own slim images do."""
LIMITS = ("--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1024:1024")
"""podman's runc cannot raise the default limits in our sandbox: set them explicitly."""
TOOLS = {"debootstrap": "debootstrap", "buildah": "buildah", "podman": "podman", "runc": "runc"}
"""Command -> the Debian package that installs it (scripts/setup.sh installs them all)."""


def require_tools() -> None:
    """Fail in one line naming what to install when a container tool is missing."""
    missing = [package for command, package in TOOLS.items() if shutil.which(command) is None]
    if missing:
        pytest.fail(
            f"image tests need {', '.join(missing)}: apt-get install {' '.join(missing)} "
            "(scripts/setup.sh does)",
            pytrace=False,
        )


def run(
    args: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure fail the test with its last output lines."""
    done = subprocess.run(
        list(args), env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        pytest.fail(f"{' '.join(args[:4])} ... exited {done.returncode}:\n{tail}", pytrace=False)
    return done


def pip_cert_secret() -> list[str]:
    """buildah's arguments for the build secret `pip-cert` the project's Dockerfiles and
    the example's take (a CA bundle for a TLS-inspecting proxy): the file IMAGE_PIP_CERT,
    else PIP_CERT, else pip's configured `global.cert` names, as scripts/build-image.sh
    chooses it; none when there is no such file."""
    cert = os.environ.get("IMAGE_PIP_CERT") or os.environ.get("PIP_CERT") or ""
    if not cert:
        configured = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.cert"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        cert = configured.stdout.strip() if configured.returncode == 0 else ""
    return ["--secret", f"id=pip-cert,src={cert}"] if cert and Path(cert).is_file() else []


def bookworm_python_rootfs() -> Path:
    """A tarball of a minimal Debian bookworm with Debian's python3 and venv (cached)."""
    recipe = f"bookworm minbase {MIRROR} {' '.join(BASE_PACKAGES)} {' '.join(SLIMMED)}"
    tarball = CACHE / f"bookworm-python3-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}.tar"
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hangwatch-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        include = ",".join(BASE_PACKAGES)
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={include}",
                "bookworm",
                str(rootfs),
                MIRROR,
            ],
            timeout=900,
        )
        for relative in SLIMMED:
            target = rootfs / relative
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(f".{os.getpid()}.partial")
        run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."])
        partial.replace(tarball)
    return tarball


@dataclass
class ContainerTools:
    """buildah and podman with a private store under `root` (removed by `close`)."""

    root: Path

    @classmethod
    def create(cls) -> ContainerTools:
        root = Path(tempfile.mkdtemp(prefix="hangwatch-containers-"))
        (root / "storage.conf").write_text(
            f'[storage]\ndriver = "vfs"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n'
        )
        (root / "containers.conf").write_text(
            '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            f'tmp_dir = "{root}/tmp"\n'
        )
        return cls(root)

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "BUILDAH_ISOLATION": "chroot",
        }

    def import_rootfs(self, tarball: Path, name: str) -> None:
        """An image `name` made of the root filesystem in `tarball` (buildah from scratch)."""
        container = run(["buildah", "from", "scratch"], env=self.env).stdout.strip()
        try:
            run(["buildah", "add", "--quiet", container, str(tarball), "/"], env=self.env)
            path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            run(["buildah", "config", "--env", path, "--cmd", "/bin/sh", container], env=self.env)
            run(["buildah", "commit", "--quiet", container, name], env=self.env)
        finally:
            subprocess.run(
                ["buildah", "rm", container], env=self.env, capture_output=True, check=False
            )

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run(["podman", "--runtime", "runc", *args], env=self.env, timeout=timeout)

    def close(self) -> None:
        subprocess.run(
            ["podman", "--runtime", "runc", "rm", "--all", "--force", "--time", "2"],
            env=self.env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


IMAGE_CACHE = CACHE_HOME / "hangwatch" / "image"
"""`make image`'s docker archive, one per content (`hangwatch_image_archive`)."""
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
    """(the image's name, its docker archive): `make image` (buildah) on the bookworm
    base, saved as a docker archive in ~/.cache/hangwatch/image/<key>/ unless this
    content's is there; the key hashes the base, the build's inputs (the Dockerfile,
    `make image`'s script and the context .dockerignore lets in) and the commit (the
    image's revision label). A file lock makes concurrent callers build once; older keys
    are removed. The image tier runs it, the node tier imports it, setup builds it ahead
    (`hangwatch_testing.prebuilt`)."""
    base = bookworm_python_rootfs()
    key = _key(base)
    image, archive = f"localhost/hangwatch:{key}", IMAGE_CACHE / key / "hangwatch.tar"
    if archive.is_file():
        return image, archive
    IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
    with open(IMAGE_CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker or setup may be building it
        if not archive.is_file():
            _build(base, image, archive)
            for old in IMAGE_CACHE.iterdir():
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
