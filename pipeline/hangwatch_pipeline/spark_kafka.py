"""Spark's own Kafka sink (`spark-sql-kafka-0-10`): its version, its jars, their cache.

The one definition of which connector the pipeline's `--sink connector` modes load and
where its jars live. The connector must be the installed pyspark's own version, so
pyspark is pinned (pyproject.toml) to `SPARK_VERSION`, the newest release whose
`org.apache.spark:spark-sql-kafka-0-10_2.13` is on Maven Central (pyspark 4.3.0 and
4.2.1 are on PyPI, their connectors are not). `resolve` copies the connector and the
three jars it needs that pyspark does not ship (spark-token-provider-kafka-0-10,
kafka-clients, commons-pool2) with Maven (`spark-kafka.pom.xml` beside this file) into
`~/.cache/hangwatch/spark-kafka/<version>/`, only when they are not there yet;
`scripts/setup.sh` runs it (`python3 -m hangwatch_pipeline.spark_kafka`). Spark gets
them as local jars through `spark.jars` (`spark_conf`), never `spark.jars.packages`,
so nothing is downloaded when a job starts.

Every missing prerequisite - a pyspark without a published connector, a jar not
resolved, Java or Maven absent - is one `UsageError` line naming what to install or
pin (exit 3), raised before a JVM starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from hangwatch.build_steps import run_step
from hangwatch.errors import HangwatchError, UsageError

SPARK_VERSION = "4.2.0"
"""The pinned pyspark's version (pyproject.toml pins `pyspark==` this; a test checks)."""
SCALA_BINARY_VERSION = "2.13"
CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"
JAR_PREFIXES = (
    f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}-",
    f"spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}-",
    "kafka-clients-",
    "commons-pool2-",
)
"""The jars a resolved cache directory holds, one each (the pom's includeArtifactIds)."""
CACHE_ENV = "HANGWATCH_SPARK_KAFKA_CACHE"
"""Overrides the cache's root (default `~/.cache/hangwatch/spark-kafka`)."""
POM = Path(__file__).with_name("spark-kafka.pom.xml")
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
RESOLVE_TIMEOUT_SECONDS = 900.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get(CACHE_ENV)
    return Path(given) if given else Path.home() / ".cache" / "hangwatch" / "spark-kafka"


def cache_dir(version: str = SPARK_VERSION, environ: Mapping[str, str] | None = None) -> Path:
    """Where the connector of Spark `version` and its dependencies are kept."""
    return cache_root(environ) / version


def find_jars(directory: Path) -> list[Path] | None:
    """The connector's jars in `directory`, one per `JAR_PREFIXES`; None if any is missing."""
    found: list[Path] = []
    names = sorted(p.name for p in directory.glob("*.jar")) if directory.is_dir() else []
    for prefix in JAR_PREFIXES:
        match = [
            n for n in names if n.startswith(prefix) and n[len(prefix) : len(prefix) + 1].isdigit()
        ]
        if len(match) != 1:
            return None
        found.append(directory / match[0])
    return found


SINK_OPTION_PREFIX = "kafka."
"""The data source hands every `kafka.`-prefixed option to its KafkaProducer, unprefixed."""
_OWN_OPTIONS = {
    "kafka.bootstrap.servers": "give the brokers with --bootstrap",
    "kafka.key.serializer": "the sink always writes bytes (Spark refuses a serializer)",
    "kafka.value.serializer": "the sink always writes bytes (Spark refuses a serializer)",
}
_INTEGER_OPTIONS = (
    "kafka.delivery.timeout.ms",
    "kafka.max.block.ms",
    "kafka.request.timeout.ms",
    "kafka.linger.ms",
    "kafka.retries",
    "kafka.batch.size",
    "kafka.max.in.flight.requests.per.connection",
)
_CHOICES = {
    "kafka.acks": ("all", "-1", "0", "1"),
    "kafka.enable.idempotence": ("true", "false"),
}


def check_sink_options(options: Mapping[str, str]) -> None:
    """Refuse now what the connector's producer would refuse in every task: options the
    pipeline sets itself, unknown prefixes, non-numbers and out-of-range choices."""
    for key, value in options.items():
        if key in _OWN_OPTIONS:
            raise UsageError(f"--option {key}: {_OWN_OPTIONS[key]}")
        if not key.startswith(SINK_OPTION_PREFIX) or key == SINK_OPTION_PREFIX:
            raise UsageError(
                f"--option {key!r} is not a producer property of the Kafka sink "
                f"(kafka.<producer property>, e.g. kafka.acks=all)"
            )
        if key in _INTEGER_OPTIONS and not (value.isdigit() and int(value) < 2**31):
            raise UsageError(f"--option {key}={value!r} must be a whole number >= 0")
        if key in _CHOICES and value.lower() not in _CHOICES[key]:
            raise UsageError(f"--option {key}={value!r}: one of {', '.join(_CHOICES[key])}")


def check_pyspark_version(installed: str) -> None:
    """Refuse a pyspark whose connector is not the one hangwatch resolves."""
    if installed != SPARK_VERSION:
        raise UsageError(
            f"pyspark {installed} is installed but the Kafka sink's connector ({CONNECTOR}) "
            f"is resolved for pyspark {SPARK_VERSION}, the newest release with the connector on "
            f"Maven Central: pip install 'pyspark=={SPARK_VERSION}'"
        )


def check_java(environ: Mapping[str, str] | None = None) -> None:
    """Spark needs a JVM: `java` on PATH or under JAVA_HOME."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return
    if shutil.which("java", path=env.get("PATH")) is None:
        raise UsageError(
            "Java not found (Spark needs a JVM): install a JDK 17+ "
            "(apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )


def jars(version: str = SPARK_VERSION, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The resolved jars of `version`; `UsageError` naming the missing one otherwise."""
    directory = cache_dir(version, environ)
    found = find_jars(directory)
    if found is None:
        present = {p.name for p in directory.glob("*.jar")} if directory.is_dir() else set()
        missing = next(p for p in JAR_PREFIXES if not any(n.startswith(p) for n in present))
        raise UsageError(
            f"the Kafka connector's jar {missing}{version}*.jar is not in {directory}: "
            "run scripts/setup.sh (or python3 -m hangwatch_pipeline.spark_kafka)"
        )
    return found


def spark_conf(found: Sequence[Path]) -> dict[str, str]:
    """Spark properties that load `found` (local files) in the driver and the executors."""
    return {"spark.jars": ",".join(str(p) for p in found)}


def prerequisites(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Checks everything the connector modes need, before a JVM starts; their Spark
    properties. pyspark is imported here only (the module itself works without it)."""
    try:
        import pyspark  # noqa: PLC0415 - only the connector modes need it
    except ModuleNotFoundError:
        raise UsageError(
            f"the Kafka sink needs pyspark: pip install 'pyspark=={SPARK_VERSION}'"
        ) from None
    check_pyspark_version(pyspark.__version__)
    check_java(environ)
    return spark_conf(jars(SPARK_VERSION, environ))


def resolve(
    version: str = SPARK_VERSION,
    environ: Mapping[str, str] | None = None,
    log: IO[str] | None = None,
) -> list[Path]:
    """The jars of `version`, copied from Maven Central first if not cached (Maven's
    own repository, ~/.m2, is reused). Writes to a temporary directory renamed into
    place, so an interrupted resolve never leaves half a cache."""
    target = cache_dir(version, environ)
    found = find_jars(target)
    if found is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError("Maven (mvn) not found: apt-get install maven, then run this again")
    target.parent.mkdir(parents=True, exist_ok=True)
    out = sys.stderr if log is None else log
    print(f"spark-kafka: resolving {CONNECTOR}:{version} into {target}", file=out, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{version}-") as work:
        command = [
            mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM), f"-Dspark.version={version}",
            f"-Doutput.dir={work}", "dependency:copy-dependencies",
        ]  # fmt: skip
        done = run_step(
            command,
            timeout_seconds=RESOLVE_TIMEOUT_SECONDS,
            step=f"resolving {CONNECTOR}:{version} from Maven Central",
            hint=f"check access to {MAVEN_CENTRAL}",
        )
        if done.returncode != 0:
            raise UsageError(_maven_failure(version, done.stdout + done.stderr))
        if find_jars(Path(work)) is None:
            raise UsageError(f"Maven resolved {CONNECTOR}:{version} without all of {JAR_PREFIXES}")
        Path(work).rename(target)
        Path(work).mkdir()  # TemporaryDirectory removes it again
    print(f"spark-kafka: resolved {version} in {time.monotonic() - started:.1f} s", file=out)
    result = find_jars(target)
    assert result is not None
    return result


def _maven_failure(version: str, output: str) -> str:
    """One line for a failed resolve (Maven's own report is many)."""
    output = _ANSI.sub("", output)
    if f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:jar:{version}" in output and any(
        words in output for words in ("Could not find artifact", "was not found in")
    ):
        return (
            f"{CONNECTOR}:{version} is not published on Maven Central: pin pyspark to a "
            f"release whose connector is (pip install 'pyspark=={SPARK_VERSION}')"
        )
    errors = (ln.strip().removeprefix("[ERROR]").strip() for ln in output.splitlines())
    first = next((ln for ln in errors if ln and not ln.startswith("[")), "no output")
    return f"resolving {CONNECTOR}:{version} with Maven failed: {first[:300]}"


def main(argv: list[str] | None = None) -> int:
    """`python3 -m hangwatch_pipeline.spark_kafka [--version V] [--print]`."""
    parser = argparse.ArgumentParser(
        prog="python3 -m hangwatch_pipeline.spark_kafka",
        description="Resolve Spark's Kafka connector jars into the cache (once).",
    )
    parser.add_argument("--version", default=SPARK_VERSION, help=f"Spark version ({SPARK_VERSION})")
    parser.add_argument("--print", action="store_true", help="print the jars' paths")
    args = parser.parse_args(argv)
    try:
        found = resolve(args.version)
    except HangwatchError as exc:
        print(f"spark-kafka: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.print:
        print("\n".join(str(p) for p in found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
