"""Debian bullseye's Python 3.9 in a debootstrap root, for the producer distribution's tests.

The producer-package tier's (tests/producer_package); setup prebuilds it
(`hangwatch_testing.prebuilt`). `python39_root()` makes, once, a minimal Debian bullseye
(`debootstrap --variant=minbase` with Debian's python3, 3.9, and its venv module)
and in it a virtual environment at `VENV` holding the producer's dependencies and the
test tools (`TOOLS`: pytest, and mypy 1.19.1, the last mypy that targets 3.9). The
wheels come from PyPI through the host's pip, chosen for CPython 3.9 on bullseye's
glibc (2.31), so the root itself needs no network and no certificate store. Cached
under ~/.cache/hangwatch/bullseye-python39/<key>/root, the key hashing the recipe,
`TOOLS` and the producer's declared dependencies: built again only when one changes.
`Chroot` runs commands in it; `install_wheel` puts a freshly built producer wheel into
the environment (`--no-deps`, then `pip check` proves the cached dependencies satisfy
the wheel's requirements). Commands share the host's network, so a broker the host's
lab starts on 127.0.0.1 is reachable from inside.
"""

from __future__ import annotations

import email.parser
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from hangwatch_testing.containers import MIRROR, SLIMMED, run

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = ROOT / "producer"
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
CACHE = CACHE_HOME / "hangwatch" / "bullseye-python39"
SUITE = "bullseye"
PACKAGES = ("python3", "python3-venv")
VENV = "/opt/producer-py39"
TOOLS = ("pytest>=8,<9", "mypy==1.19.1")
"""Run inside the root: the producer's tests and mypy at 3.9 (mypy 2.x targets 3.10+)."""
PLATFORMS = (
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
"""Wheel tags bullseye's glibc 2.31 runs (confluent-kafka ships manylinux_2_28)."""


def producer_requirements() -> list[str]:
    """The producer distribution's declared dependencies (producer/pyproject.toml)."""
    project = tomllib.loads((PRODUCER / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"])


def _key() -> str:
    recipe = (
        f"{SUITE} minbase {MIRROR} {' '.join(PACKAGES)} {' '.join(SLIMMED)} {VENV} "
        f"{' '.join(PLATFORMS)} {' '.join(TOOLS)} {' '.join(producer_requirements())}"
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Chroot:
    """Commands run in the root with a clean environment (`env` added)."""

    root: Path

    def run(
        self, script: str, env: dict[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """`sh -c script` in the root; fails the test with the output's tail on error."""
        variables = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
        variables.update(env or {})
        assignments = [f"{k}={v}" for k, v in variables.items()]
        return run(
            ["chroot", str(self.root), "/usr/bin/env", "-i", *assignments, "/bin/sh", "-c", script],
            timeout=timeout,
        )

    @contextmanager
    def scratch(self) -> Iterator[tuple[Path, str]]:
        """A directory for one run: (its path on the host, its path in the root); removed."""
        host = Path(tempfile.mkdtemp(prefix="producer-run-", dir=self.root / "tmp"))
        try:
            yield host, "/tmp/" + host.name
        finally:
            shutil.rmtree(host, ignore_errors=True)


def python39_root() -> Chroot:
    """The cached bullseye root with the producer's environment (made when missing)."""
    key = _key()
    final = CACHE / key / "root"
    if (CACHE / key / "ready").exists():
        return Chroot(final)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker or helper may be building it
        if not (CACHE / key / "ready").exists():
            _build(final)
    return Chroot(final)


def _build(final: Path) -> None:
    if shutil.which("debootstrap") is None:
        pytest.fail("debootstrap is missing: apt-get install debootstrap (scripts/setup.sh does)")
    shutil.rmtree(final.parent, ignore_errors=True)
    final.parent.mkdir(parents=True)
    partial = final.with_name(f"root.{os.getpid()}.partial")
    started = time.monotonic()
    try:
        include = ",".join(PACKAGES)
        print(f"bullseye python3.9 root: debootstrap {SUITE} from {MIRROR} (once, minutes)")
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={include}",
                SUITE,
                str(partial),
                MIRROR,
            ],
            timeout=1800,
        )
        booted = time.monotonic()
        provision(partial)
        partial.rename(final)
    finally:
        _unmount_under(partial)  # debootstrap mounts /proc and /sys while it installs
        shutil.rmtree(partial, ignore_errors=True)
    size = sum(f.stat().st_size for f in final.rglob("*") if f.is_file() and not f.is_symlink())
    (final.parent / "ready").write_text(
        f"debootstrap {booted - started:.0f} s, total {time.monotonic() - started:.0f} s, "
        f"{size / 1e6:.0f} MB\n"
    )
    print(f"bullseye python3.9 root: {(final.parent / 'ready').read_text().strip()}")


def provision(root: Path) -> None:
    """Slim a fresh root and make its environment: the venv, the dependencies, the tools."""
    for relative in SLIMMED:
        target = root / relative
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True, exist_ok=True)
    wheels = root / "tmp" / "wheels"
    requirements = [*producer_requirements(), *TOOLS]
    download_for_python39(requirements, wheels)
    quoted = " ".join(f"'{r}'" for r in requirements)
    Chroot(root).run(
        f"python3 -m venv {VENV} && {VENV}/bin/pip install --quiet --no-index "
        f"--find-links /tmp/wheels {quoted}"
    )
    shutil.rmtree(wheels)


PYTHON39 = {
    "python_version": "3.9",
    "python_full_version": "3.9.2",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}
"""Bullseye's python3.9 as environment markers see it."""


def download_for_python39(requirements: Sequence[str], dest: Path) -> None:
    """Wheels of `requirements` and everything they need on bullseye's CPython 3.9, into
    `dest`. pip picks versions and wheel tags for 3.9 but evaluates the dependencies'
    markers for the Python running it (3.11 here, where `tomli; python_version < "3.11"`
    is not needed): each round adds what the downloaded wheels require under 3.9."""
    platforms = [f"--platform={p}" for p in PLATFORMS]
    wanted: list[str] = list(requirements)
    asked: set[str] = set()
    while wanted:
        if asked.issuperset(wanted):
            pytest.fail(f"pip download for python 3.9 did not bring {wanted}", pytrace=False)
        asked.update(wanted)
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--implementation=cp",
                "--python-version=3.9",
                "--abi=cp39",
                *platforms,
                "--dest",
                str(dest),
                *wanted,
            ],
            timeout=600,
        )
        have = {parse_wheel_filename(w.name)[0] for w in dest.glob("*.whl")}
        wanted = sorted(
            {
                _without_marker(req)
                for wheel in dest.glob("*.whl")
                for req in _requires(wheel)
                if canonicalize_name(req.name) not in have
                and (req.marker is None or req.marker.evaluate(PYTHON39))
            }
        )


def _without_marker(req: Requirement) -> str:
    """`req` for pip to fetch unconditionally (its marker was evaluated for 3.9 already)."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.BytesParser().parsebytes(archive.read(name))
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


def _unmount_under(path: Path) -> None:
    """Lazily unmount whatever is mounted below `path` (deepest first), before removing it."""
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def build_wheel(dest: Path) -> Path:
    """The producer distribution's wheel, built from a copy of producer/ into `dest` (a
    build in place would leave setuptools' build/ and egg-info in the repository)."""
    source = dest / "source"
    source.mkdir()
    copy_tree(PRODUCER, source, ["pyproject.toml", "README.md", "hangwatch_producer"])
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--wheel-dir",
            str(dest),
            str(source),
        ],
        timeout=600,
    )
    (wheel,) = dest.glob("hangwatch_producer-*.whl")
    return wheel


def install_wheel(box: Chroot, wheel_in_root: str) -> None:
    """The wheel into the root's environment over any earlier one; its requirements met."""
    box.run(
        f"pip install --quiet --no-index --no-deps --force-reinstall {wheel_in_root} && pip check"
    )


def copy_tree(source: Path, dest: Path, names: Sequence[str]) -> None:
    """`names` (files or folders) of `source` into `dest`, without caches."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache")
    for name in names:
        if (source / name).is_dir():
            shutil.copytree(source / name, dest / name, ignore=ignore)
        else:
            shutil.copy2(source / name, dest / name)
