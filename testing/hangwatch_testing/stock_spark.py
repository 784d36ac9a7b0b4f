"""A stock-like Apache Spark image, and the example's Spark image built on it for real.

Not a test module. Apache Spark's official images (docker.io) are not reachable here,
so `stock_spark_archive` builds a stand-in the way the tiers build theirs (buildah in a
private store, no registry; image/spark-stock/Dockerfile says what it holds and where
it differs): Debian bullseye's root with its python3, 3.9 (`STOCK_PYTHON`; the
producer tier's cached root, `hangwatch_testing.bullseye`, without its test
environment), Java 17, and the distribution of `STOCK_LINE`, the newest Spark line
whose pyspark runs on 3.9 (3.5: the 4.x line needs 3.10), taken from that line's
virtualenv (`hangwatch_testing.spark_line_env`: pyspark's wheel carries Spark's jars and
scripts). Saved as a docker archive under ~/.cache/hangwatch/spark-stock/<key>/, the key
hashing the Dockerfile, the entrypoint, the root and the distribution's jars; setup
builds it ahead (`hangwatch_testing.prebuilt spark-stock`).

`build_example_image` is what a user does with examples/spark-on-kubernetes/Dockerfile:
built from that base with the package index and the producer release given as build
arguments (pip in the build installs `hangwatch-producer` from the index, its
dependencies through the index's fallback to PyPI), then pushed to the registry the
cluster pulls from.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from pathlib import Path

from hangwatch_pipeline.spark_kafka import LINES, SparkLine
from hangwatch_testing.bullseye import VENV, python39_root
from hangwatch_testing.containers import (
    CACHE_HOME,
    ROOT,
    ContainerTools,
    pip_cert_secret,
    require_tools,
    run,
)
from hangwatch_testing.spark_line_env import python_of

STOCK_PYTHON = (3, 9)
"""The base's python3: Debian bullseye's."""
STOCK_LINE: SparkLine = next(line for line in LINES if line.supports_python(STOCK_PYTHON))
"""The Spark line of the stock-like base: the first (newest) that runs on its python3."""
DOCKERFILE = ROOT / "image" / "spark-stock" / "Dockerfile"
SCRIPTS = (ROOT / "image" / "spark" / "entrypoint.sh", ROOT / "image" / "spark" / "decom.sh")
DISTRIBUTION = ("bin", "sbin", "jars", "python", "data", "examples", "licenses")
"""What of pyspark's package is Spark's distribution (the rest is pyspark's Python code,
which Apache's image carries only inside python/lib/pyspark.zip)."""
CACHE = CACHE_HOME / "hangwatch" / "spark-stock"
EXAMPLE = ROOT / "examples" / "spark-on-kubernetes"


def spark_distribution(line: SparkLine = STOCK_LINE) -> Path:
    """The directory of `line`'s pyspark in its virtualenv: Spark's distribution."""
    python = python_of(line)
    done = run([str(python), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"])
    return Path(done.stdout.strip())


def _key(root: Path, distribution: Path) -> str:
    digest = hashlib.sha256(f"root {root.parent.name} spark {STOCK_LINE.version}\n".encode())
    for path in (DOCKERFILE, *SCRIPTS):
        digest.update(path.name.encode() + path.read_bytes())
    for jar in sorted((distribution / "jars").glob("*.jar")):
        digest.update(f"jar {jar.name}\n".encode())
    return digest.hexdigest()[:16]


def stock_spark_archive() -> tuple[str, Path]:
    """(the stock-like base's name, its docker archive), built unless this content's is
    cached; a file lock makes concurrent callers build once; older keys are removed."""
    root = python39_root().root
    distribution = spark_distribution()
    key = _key(root, distribution)
    image, archive = f"localhost/spark-stock:{STOCK_LINE.version}-{key}", CACHE / key / "spark.tar"
    if archive.is_file():
        return image, archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.is_file():
            _build(root, distribution, image, archive)
            for old in CACHE.iterdir():
                if old.is_dir() and old.name != key:
                    shutil.rmtree(old, ignore_errors=True)
    return image, archive


def _link_tree(source: Path, dest: Path) -> None:
    """`source` copied to `dest` as hard links where the filesystem allows (no bytes
    copied: the build reads them once), else as copies; no bytecode caches."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.cmd")
    shutil.copytree(source, dest, ignore=ignore, copy_function=link)


def _build(root: Path, distribution: Path, image: str, archive: Path) -> None:
    require_tools()
    started = time.monotonic()
    tools = ContainerTools.create()
    work = tools.root / "context"
    try:
        work.mkdir()
        base_tarball = tools.root / "bullseye.tar"
        # the producer tier's root without its test environment (pytest, mypy) and scratch
        run(
            ["tar", "-C", str(root), "--numeric-owner", f"--exclude=./{VENV.lstrip('/')}",
             "--exclude=./tmp/*", "-cf", str(base_tarball), "."],
            timeout=600,
        )  # fmt: skip
        base = f"localhost/spark-stock-root:{archive.parent.name}"
        tools.import_rootfs(base_tarball, base)
        base_tarball.unlink()
        for part in DISTRIBUTION:
            if (distribution / part).exists():
                _link_tree(distribution / part, work / "spark" / part)
        for script in SCRIPTS:
            shutil.copy2(script, work / script.name)
        shutil.copy2(DOCKERFILE, work / "Dockerfile")
        print(f"stock-like Spark {STOCK_LINE.version}: building {image}", flush=True)
        run(
            ["buildah", "bud", "--layers=false", "--build-arg",
             f"BASE_IMAGE={base}", "--tag", image, str(work)],
            env=tools.env, timeout=2400,
        )  # fmt: skip
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        run(["buildah", "push", "--quiet", image, f"docker-archive:{partial}:{image}"],
            env=tools.env, timeout=900)  # fmt: skip
        partial.replace(archive)
    finally:
        tools.close()
    took = time.monotonic() - started
    size = archive.stat().st_size / 1e6
    (archive.parent / "built").write_text(f"{took:.0f} s, {size:.0f} MB\n")
    print(f"stock-like Spark {STOCK_LINE.version}: built in {took:.0f} s ({size:.0f} MB)")


def build_example_image(target: str, index: str) -> tuple[float, str]:
    """examples/spark-on-kubernetes/Dockerfile built as `target` on the stock-like base
    (its python3 `STOCK_PYTHON`), pip given the package index `index` (the release it
    installs is the Dockerfile's own `HANGWATCH_PRODUCER`) and the machine's CA bundle
    as the Dockerfile's `pip-cert` secret (the index's fallback sends pip to PyPI, and
    this machine reaches it through a TLS-inspecting proxy), then pushed to `target`'s
    registry (plain HTTP: the test's own on loopback). Returns the seconds it took and
    what the build's last step printed (`hangwatch-producer <version>`)."""
    require_tools()
    base, archive = stock_spark_archive()
    started = time.monotonic()
    tools = ContainerTools.create()
    try:
        run(["buildah", "pull", "--quiet", f"docker-archive:{archive}"], env=tools.env,
            timeout=900)  # fmt: skip
        python = ".".join(map(str, STOCK_PYTHON))
        built = run(
            ["buildah", "bud", "--layers=false",
             "--file", str(EXAMPLE / "Dockerfile"),
             "--build-arg", f"SPARK_IMAGE={base}",
             "--build-arg", f"SPARK_IMAGE_PYTHON={python}",
             "--build-arg", f"PIP_INDEX_URL={index}", *pip_cert_secret(),
             "--tag", target, str(ROOT)],
            env=tools.env, timeout=1800,
        )  # fmt: skip
        said = [ln for ln in built.stdout.splitlines() if ln.startswith("hangwatch-producer ")]
        run(["buildah", "push", "--quiet", "--tls-verify=false", target, f"docker://{target}"],
            env=tools.env, timeout=900)  # fmt: skip
    finally:
        tools.close()
    return time.monotonic() - started, said[-1] if said else built.stdout[-2000:]
