"""One Java source file compiled into a jar, built once and cached by content.

What the demo's wedgeable interceptor (`hangwatch_demo.interceptor`) and the Java client's
telemetry reporter (`hangwatch_pipeline.kafka_telemetry`) share: `java_jar` compiles a
source with the machine's `javac` against the Kafka connector's own `kafka-clients` jar
and packs the classes into `<cache>/<key>/<jar name>`, where `<key>` hashes the source,
the kafka-clients jar's name, the bytecode level and javac's version: an edit or a new
toolchain builds again, anything else is a no-op. The build goes to a temporary
directory renamed into place, so an interrupted build never leaves half a jar, and two
builds at once both end with the same jar.

`JavaJar` names one such jar (its source, cache and bytecode level) and serves the
`python -m ...` entry that builds it and prints its path.

A missing `javac`, no kafka-clients among the jars or a failed compile is one
`UsageError` line naming what to do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hangwatch.build_steps import run_step
from hangwatch.errors import HangwatchError, UsageError

COMPILE_TIMEOUT_SECONDS = 300.0


def _javac(needed_by: str) -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise UsageError(
            f"no javac ({needed_by} is compiled here): run scripts/setup.sh "
            "(installs openjdk-17-jdk-headless)"
        )
    return javac


def kafka_clients(jars: Sequence[Path]) -> Path:
    """The `kafka-clients` jar among the connector's `jars`."""
    found = [p for p in jars if p.name.startswith("kafka-clients-")]
    if not found:
        raise UsageError("the Kafka connector's jars lack kafka-clients: run scripts/setup.sh")
    return found[0]


def java_jar(
    source: Path,
    connector_jars: Sequence[Path],
    *,
    jar_name: str,
    cache_root: Path,
    java_release: str,
    needed_by: str,
) -> Path:
    """The jar of `source` compiled for `java_release` (building it when not cached)."""
    javac = _javac(needed_by)
    clients = kafka_clients(connector_jars)
    version = run_step(
        [javac, "-version"], timeout_seconds=COMPILE_TIMEOUT_SECONDS, step="javac -version"
    )
    key = hashlib.sha256(
        source.read_bytes()
        + clients.name.encode()
        + java_release.encode()
        + (version.stdout + version.stderr).encode()
    ).hexdigest()[:12]
    target = cache_root / key
    jar = target / jar_name
    if jar.is_file():
        return jar
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{key}-") as work:
        classes = Path(work) / "classes"
        command = [
            javac, "-nowarn", "-Xlint:-options", "--release", java_release,
            "-d", str(classes), "-cp", str(clients), str(source),
        ]  # fmt: skip
        done = run_step(
            command, timeout_seconds=COMPILE_TIMEOUT_SECONDS, step=f"javac of {source.name}"
        )
        if done.returncode != 0:
            first = (done.stderr or done.stdout).strip().splitlines()[:1]
            raise UsageError(f"javac of {source.name} failed: {first[0] if first else '?'}")
        built = Path(work) / "out"
        built.mkdir()
        with zipfile.ZipFile(built / jar_name, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        if target.exists():  # another build made it meanwhile
            return jar
        built.rename(target)
    return jar


@dataclass(frozen=True)
class JavaJar:
    """One jar built from one Java source beside its module."""

    source: Path
    jar_name: str
    cache_env: str
    """The environment variable that overrides the cache's root."""
    cache_dir: str
    """The cache's root by default: this folder under `~/.cache/hangwatch`."""
    java_release: str
    needed_by: str
    """What the jar is, for the no-javac line."""

    def cache_root(self) -> Path:
        given = os.environ.get(self.cache_env)
        return Path(given) if given else Path.home() / ".cache" / "hangwatch" / self.cache_dir

    def build(self, connector_jars: Sequence[Path]) -> Path:
        """The built jar (building it first when it is not cached)."""
        return java_jar(
            self.source,
            connector_jars,
            jar_name=self.jar_name,
            cache_root=self.cache_root(),
            java_release=self.java_release,
            needed_by=self.needed_by,
        )

    def main(self, prog: str, connector_jars: Callable[[], Sequence[Path]]) -> int:
        """Build (once) and print the jar's path; one error line naming `prog` otherwise."""
        try:
            print(self.build(connector_jars()))
        except HangwatchError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return exc.exit_code
        return 0
