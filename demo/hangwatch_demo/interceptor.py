"""The demo's wedgeable Kafka interceptor for Spark's Kafka sink: built once, cached by content.

`WedgeInterceptor.java` (beside this module; its header says what it does) is compiled
with the machine's `javac` against the connector's own `kafka-clients` jar
(`hangwatch_pipeline.spark_kafka.jars`) and packed into a jar under
`~/.cache/hangwatch/demo-interceptor/<key>/`, where `<key>` hashes the source, the
kafka-clients jar's name and javac's version: an edit or a new toolchain builds again,
anything else is a no-op. The build goes to a temporary directory renamed into place, so
an interrupted build never leaves half a jar. The demo hands the jar to Spark through
`spark.jars`; a scenario loads the class through the connector's own
`kafka.interceptor.classes` option, as a user's monitoring interceptor would be loaded.

A missing `javac` or a failed compile is one `UsageError` line naming what to do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from hangwatch.build_steps import run_step
from hangwatch.errors import HangwatchError, UsageError
from hangwatch_pipeline import spark_kafka

SOURCE = Path(__file__).with_name("WedgeInterceptor.java")
CLASS_NAME = "dev.hangwatch.demo.WedgeInterceptor"
"""What `kafka.interceptor.classes` names."""
JAR_NAME = "wedge-interceptor.jar"
CACHE_ENV = "HANGWATCH_DEMO_INTERCEPTOR_CACHE"
"""Overrides the cache's root (default `~/.cache/hangwatch/demo-interceptor`)."""
JAVA_RELEASE = "17"
"""Bytecode level: Spark 4 runs on Java 17 and later."""
COMPILE_TIMEOUT_SECONDS = 300.0


def cache_root() -> Path:
    given = os.environ.get(CACHE_ENV)
    return Path(given) if given else Path.home() / ".cache" / "hangwatch" / "demo-interceptor"


def _javac() -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise UsageError(
            "no javac (the demo's Spark Kafka sink scenarios compile their interceptor): "
            "run scripts/setup.sh (installs openjdk-17-jdk-headless)"
        )
    return javac


def _kafka_clients(jars: Sequence[Path]) -> Path:
    found = [p for p in jars if p.name.startswith("kafka-clients-")]
    if not found:
        raise UsageError("the Kafka connector's jars lack kafka-clients: run scripts/setup.sh")
    return found[0]


def interceptor_jar(connector_jars: Sequence[Path]) -> Path:
    """The built interceptor's jar (building it first when it is not cached)."""
    javac = _javac()
    clients = _kafka_clients(connector_jars)
    version = run_step(
        [javac, "-version"], timeout_seconds=COMPILE_TIMEOUT_SECONDS, step="javac -version"
    )
    key = hashlib.sha256(
        SOURCE.read_bytes() + clients.name.encode() + (version.stdout + version.stderr).encode()
    ).hexdigest()[:12]
    target = cache_root() / key
    jar = target / JAR_NAME
    if jar.is_file():
        return jar
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{key}-") as work:
        classes = Path(work) / "classes"
        command = [
            javac, "-nowarn", "--release", JAVA_RELEASE, "-d", str(classes),
            "-cp", str(clients), str(SOURCE),
        ]  # fmt: skip
        done = run_step(
            command, timeout_seconds=COMPILE_TIMEOUT_SECONDS, step=f"javac of {SOURCE.name}"
        )
        if done.returncode != 0:
            first = (done.stderr or done.stdout).strip().splitlines()[:1]
            raise UsageError(f"javac of {SOURCE.name} failed: {first[0] if first else '?'}")
        built = Path(work) / "out"
        built.mkdir()
        with zipfile.ZipFile(built / JAR_NAME, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        if target.exists():  # another demo built it meanwhile
            return jar
        built.rename(target)
    return jar


def main() -> int:
    """`python3 -m hangwatch_demo.interceptor`: build (once) and print the jar's path (the
    node tier's Spark image carries it, scripts/build-spark-image.sh)."""
    try:
        print(interceptor_jar(spark_kafka.jars()))
    except HangwatchError as exc:
        print(f"demo-interceptor: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
