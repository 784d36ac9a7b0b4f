"""Apache Kafka's jars for the lab's real engine: resolved from Maven Central once per version.

One pom per Kafka line names the broker (`kafka_2.13`) and the admin tools (`kafka-tools`)
at one `kafka.version`: `lab/kafka/4/pom.xml` (the default, the current 4.x) and
`lab/kafka/3/pom.xml` (3.9, kept for clients older than 2.1, whose protocol versions 4.0
removed). Each pom's property is that line's version, written there only;
`default_version()` and `legacy_version()` read them. Any other version of a supported
line is resolved from its line's pom with `-Dkafka.version=<version>`.

`ensure_jars(version)` runs `mvn dependency:copy-dependencies` into
`$HANGWATCH_KAFKA_CACHE` (default `~/.cache/hangwatch/kafka/<version>/lib`) when that
directory is missing or incomplete, and does nothing when it is there. A lock file
serialises concurrent resolvers (parallel test workers). `python -m
hangwatch_lab.kafkajars` is what `scripts/setup.sh` runs: it resolves both lines' versions,
so a fresh machine has the jars before the tests need them.
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

from hangwatch.errors import LabSetupError, UsageError

log = logging.getLogger(__name__)

POMS = Path(__file__).resolve().parents[2] / "kafka"
"""`<line>/pom.xml` per Kafka line (in the repository, beside the package)."""

LINES = ("4", "3")
"""The Kafka lines the lab runs, by major version: 4 (the default) and 3 (its 3.9 release
only: the lab's tools and configs need 3.9's, and 3.9 is why the line is kept)."""

VERSION_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)")

COMPLETE_MARKER = ".complete"
"""Written into the lib directory last: a directory without it is a resolve cut short."""

RESOLVE_TIMEOUT_SECONDS = 900.0


def pom(line: str) -> Path:
    """The pom of a Kafka line (`4` or `3`)."""
    return POMS / line / "pom.xml"


def kafka_version(pom_path: Path) -> str:
    """The `kafka.version` property of a lab pom (the one place that line's version is written)."""
    try:
        text = pom_path.read_text()
    except OSError as exc:
        raise LabSetupError(
            f"resolving Kafka: cannot read {pom_path} ({exc.strerror}); run from a hangwatch "
            "checkout"
        ) from None
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    if not found:
        raise LabSetupError(f"resolving Kafka: {pom_path} has no <kafka.version> property")
    return found.group(1).strip()


def default_version() -> str:
    """The lab's Kafka version unless told otherwise: the 4 line's pom's (the current 4.x)."""
    return kafka_version(pom("4"))


def legacy_version() -> str:
    """The 3.9 release the lab keeps for clients older than 2.1 (the incidents' 0.8.2 and
    0.11 clients): Kafka 4.0 removed the protocol versions they speak (KIP-896)."""
    return kafka_version(pom("3"))


def line_of(version: str) -> str:
    """The line (`4` or `3`) of a Kafka version, which must be `4.x.y` or `3.9.z`; anything
    else is a one-line usage error naming it."""
    found = VERSION_PATTERN.fullmatch(version)
    if found is None or not (
        found.group(1) == "4" or (found.group(1) == "3" and found.group(2) == "9")
    ):
        raise UsageError(
            f"--kafka-version must be a 4.x.y or 3.9.z release of Apache Kafka (default "
            f"{default_version()}, for pre-2.1 clients {legacy_version()}), got {version!r}"
        )
    return found.group(1)


def cache_dir(version: str) -> Path:
    """`$HANGWATCH_KAFKA_CACHE/<version>`, default `~/.cache/hangwatch/kafka/<version>`."""
    root = os.environ.get("HANGWATCH_KAFKA_CACHE")
    if root:
        return Path(root) / version
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "hangwatch" / "kafka" / version


def lib_dir(version: str | None = None) -> Path:
    """Where the jars of `version` (default: the lab's default version) live once resolved."""
    return cache_dir(version or default_version()) / "lib"


def resolved(version: str | None = None) -> bool:
    """True when the jars of `version` are in the cache, complete."""
    return (lib_dir(version) / COMPLETE_MARKER).is_file()


def ensure_jars(version: str | None = None) -> Path:
    """The lib directory of Kafka `version` (default: the lab's default), resolved with
    Maven from its line's pom first if missing."""
    version = version or default_version()
    line_pom = pom(line_of(version))
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
            str(line_pom),
            f"-Dkafka.version={version}",
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


def main(argv: list[str] | None = None) -> int:
    """`python -m hangwatch_lab.kafkajars [VERSION ...]`: resolve the jars of each version
    (default: the lab's default and its 3.9 release; a no-op when cached), print each dir."""
    try:
        for version in (argv if argv is not None else sys.argv[1:]) or (
            default_version(),
            legacy_version(),
        ):
            print(ensure_jars(version))
    except (LabSetupError, UsageError) as exc:
        print(f"resolve-kafka: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
