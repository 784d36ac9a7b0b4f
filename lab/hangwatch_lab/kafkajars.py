"""Apache Kafka's jars for the lab's real engine: resolved from Maven Central once per version.

`lab/kafka/pom.xml` names the broker (`kafka_2.13`) and the admin tools (`kafka-tools`)
at one version; `ensure_jars()` runs `mvn dependency:copy-dependencies` on it into
`$HANGWATCH_KAFKA_CACHE` (default `~/.cache/hangwatch/kafka/<version>/lib`) when that
directory is missing or incomplete, and does nothing when it is there. A lock file
serialises concurrent resolvers (parallel test workers). `python -m
hangwatch_lab.kafkajars` is what `scripts/setup.sh` runs, so a fresh machine resolves
the jars before the tests need them.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.errors import LabSetupError

log = logging.getLogger(__name__)

POM = Path(__file__).resolve().parent.parent / "kafka" / "pom.xml"
"""The pom that names the Kafka version and artifacts (in the repository, beside the package)."""

COMPLETE_MARKER = ".complete"
"""Written into the lib directory last: a directory without it is a resolve cut short."""

RESOLVE_TIMEOUT_SECONDS = 900.0


def kafka_version(pom: Path = POM) -> str:
    """The `kafka.version` property of the lab's pom (the one place the version is written)."""
    try:
        text = pom.read_text()
    except OSError as exc:
        raise LabSetupError(
            f"resolving Kafka: cannot read {pom} ({exc.strerror}); run from a hangwatch checkout"
        ) from None
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    if not found:
        raise LabSetupError(f"resolving Kafka: {pom} has no <kafka.version> property")
    return found.group(1).strip()


def cache_dir(version: str) -> Path:
    """`$HANGWATCH_KAFKA_CACHE/<version>`, default `~/.cache/hangwatch/kafka/<version>`."""
    root = os.environ.get("HANGWATCH_KAFKA_CACHE")
    if root:
        return Path(root) / version
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "hangwatch" / "kafka" / version


def lib_dir(version: str | None = None) -> Path:
    """Where the jars of `version` (default: the pom's) live once resolved."""
    return cache_dir(version or kafka_version()) / "lib"


def resolved(version: str | None = None) -> bool:
    """True when the jars of `version` are in the cache, complete."""
    return (lib_dir(version) / COMPLETE_MARKER).is_file()


def ensure_jars(pom: Path = POM) -> Path:
    """The lib directory of the pom's Kafka version, resolved with Maven first if missing."""
    version = kafka_version(pom)
    lib = lib_dir(version)
    if (lib / COMPLETE_MARKER).is_file():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LabSetupError(
            f"resolving Kafka {version} jars: mvn not found; install Maven "
            "(apt-get install maven) or run scripts/setup.sh"
        )
    base = lib.parent
    base.mkdir(parents=True, exist_ok=True)
    with (base / "resolve.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (lib / COMPLETE_MARKER).is_file():  # another process resolved it meanwhile
            return lib
        partial = base / "lib.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(lib, ignore_errors=True)
        log_path = base / "resolve.log"
        print(
            f"lab: resolving Apache Kafka {version} jars from Maven Central into {lib} "
            f"(once; log {log_path})",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ]
        try:
            with log_path.open("w") as out:
                proc = subprocess.run(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=RESOLVE_TIMEOUT_SECONDS,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            raise LabSetupError(
                f"resolving Kafka {version} jars: mvn did not finish within "
                f"{RESOLVE_TIMEOUT_SECONDS:.0f} s; check that Maven Central is reachable "
                f"(log {log_path})"
            ) from None
        if proc.returncode != 0:
            raise LabSetupError(
                f"resolving Kafka {version} jars: mvn exited {proc.returncode}; check that "
                f"Maven Central is reachable, then run scripts/setup.sh again "
                f"({_last_error(log_path)}; log {log_path})"
            )
        (partial / COMPLETE_MARKER).write_text(f"{version}\n")
        partial.rename(lib)
        log.info(
            "kafka jars resolved",
            extra={"version": version, "seconds": round(time.monotonic() - started, 1)},
        )
        print(
            f"lab: Kafka {version} jars resolved in {time.monotonic() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return lib


def _last_error(log_path: Path) -> str:
    """The first `[ERROR]` line of Maven's log, shortened, or `no error line`."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in lines:
        clean = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if clean.startswith("[ERROR]") and len(clean) > len("[ERROR]"):
            return clean[:300]
    return "no error line"


def main() -> int:
    """`python -m hangwatch_lab.kafkajars`: resolve the jars (no-op when cached), print the dir."""
    try:
        print(ensure_jars())
    except LabSetupError as exc:
        print(f"resolve-kafka: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
