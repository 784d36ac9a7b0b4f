"""Spark's own Kafka sink (`spark-sql-kafka-0-10`): the supported Spark lines, their jars.

The one definition of which Spark lines hangwatch supports (`LINES`: the newest 4.x and
the newest 3.5.x whose connector is on Maven Central), which connector each line's
`--sink connector` modes load, and where its jars live. The connector must be the
installed pyspark's own version and Scala binary version (2.13 for 4.x, 2.12 for 3.5),
so each line is one pinned pyspark (pyproject.toml: the `spark` extra pins the default
line, `spark35` the 3.5 line; a test checks) and an installed pyspark picks its line
(`line_of`). `resolve` copies a line's connector and the three jars it needs that
pyspark does not ship (spark-token-provider-kafka-0-10, kafka-clients, commons-pool2)
with Maven (`spark-kafka.pom.xml` beside this file) into
`~/.cache/hangwatch/spark-kafka/<version>/`, only when they are not there yet;
`scripts/setup.sh` runs it for every line (`python3 -m hangwatch_pipeline.spark_kafka
--all`). Spark gets them as local jars through `spark.jars` (`spark_conf`), never
`spark.jars.packages`, so nothing is downloaded when a job starts.

Every missing prerequisite - a pyspark of no supported line, a jar not resolved, Java
or Maven absent - is one `UsageError` line naming what to install or pin (exit 3),
raised before a JVM starts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hangwatch.build_steps import run_step
from hangwatch.errors import HangwatchError, UsageError


@dataclass(frozen=True)
class SparkLine:
    """One supported Spark line: the pyspark pinned for it and its connector's Scala."""

    name: str
    """How setup, tests and docs name the line (`4.x`, `3.5`)."""
    version: str
    """The pinned pyspark's version: the line's newest with its connector on Maven Central."""
    scala: str
    """The Scala binary version Spark's jars of this line are built for."""
    extra: str
    """The pyproject.toml extra that pins `pyspark==version`."""
    python: tuple[tuple[int, int], tuple[int, int]]
    """The oldest and newest Python minor this pyspark supports (its own classifiers)."""

    @property
    def connector(self) -> str:
        return f"org.apache.spark:spark-sql-kafka-0-10_{self.scala}"

    @property
    def jar_prefixes(self) -> tuple[str, ...]:
        """The jars a resolved cache directory holds, one each (the pom's includes)."""
        return (
            f"spark-sql-kafka-0-10_{self.scala}-",
            f"spark-token-provider-kafka-0-10_{self.scala}-",
            "kafka-clients-",
            "commons-pool2-",
        )

    def supports_python(self, version: tuple[int, int]) -> bool:
        return self.python[0] <= version <= self.python[1]


LINES = (
    # 4.3.0 and 4.2.1 are on PyPI, their connectors are not on Maven Central
    SparkLine("4.x", "4.2.0", "2.13", "spark", ((3, 10), (3, 14))),
    # 3.5.8 and 3.5.9 are on PyPI, their connectors are not on Maven Central
    SparkLine("3.5", "3.5.7", "2.12", "spark35", ((3, 8), (3, 11))),
)
"""Every supported line, the default (the `dev` extra's, the Spark image's) first."""
DEFAULT_LINE = LINES[0]
SPARK_VERSION = DEFAULT_LINE.version
"""The default line's pyspark (pyproject.toml's `spark` extra pins it; a test checks)."""
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


def cache_dir(line: SparkLine, environ: Mapping[str, str] | None = None) -> Path:
    """Where the connector of `line` and its dependencies are kept (by Spark version)."""
    return cache_root(environ) / line.version


def find_jars(line: SparkLine, directory: Path) -> list[Path] | None:
    """`line`'s jars in `directory`, one per `jar_prefixes`; None if any is missing."""
    found: list[Path] = []
    names = sorted(p.name for p in directory.glob("*.jar")) if directory.is_dir() else []
    for prefix in line.jar_prefixes:
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


def _pins() -> str:
    return " or ".join(f"'pyspark=={line.version}'" for line in LINES)


def line_of(installed: str) -> SparkLine:
    """The supported line of an installed pyspark; refuses one whose connector hangwatch
    does not resolve."""
    for line in LINES:
        if installed == line.version:
            return line
    versions = ", ".join(f"{line.version} ({line.name})" for line in LINES)
    raise UsageError(
        f"pyspark {installed} is installed but the Kafka sink's connector is resolved for "
        f"pyspark {versions}, each line's newest release with the connector on Maven "
        f"Central: pip install {_pins()}"
    )


def installed_line() -> SparkLine:
    """The line of the pyspark this interpreter imports (imported here, not at load)."""
    try:
        import pyspark  # noqa: PLC0415 - only the connector modes need it
    except ModuleNotFoundError:
        raise UsageError(f"the Kafka sink needs pyspark: pip install {_pins()}") from None
    return line_of(pyspark.__version__)


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


def jars(line: SparkLine | None = None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The resolved jars of `line` (None: the installed pyspark's); `UsageError` naming
    the missing one otherwise."""
    line = installed_line() if line is None else line
    directory = cache_dir(line, environ)
    found = find_jars(line, directory)
    if found is None:
        present = {p.name for p in directory.glob("*.jar")} if directory.is_dir() else set()
        missing = next(p for p in line.jar_prefixes if not any(n.startswith(p) for n in present))
        raise UsageError(
            f"the Kafka connector's jar {missing}{line.version}*.jar is not in {directory}: "
            f"run scripts/setup.sh (or python3 -m hangwatch_pipeline.spark_kafka --line "
            f"{line.name})"
        )
    return found


def spark_conf(found: Sequence[Path]) -> dict[str, str]:
    """Spark properties that load `found` (local files) in the driver and the executors."""
    return {"spark.jars": ",".join(str(p) for p in found)}


def prerequisites(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Checks everything the connector modes need, before a JVM starts; their Spark
    properties: those of the installed pyspark's line. pyspark is imported here only (the
    module itself works without it)."""
    line = installed_line()
    check_java(environ)
    return spark_conf(jars(line, environ))


def resolve(
    line: SparkLine = DEFAULT_LINE,
    environ: Mapping[str, str] | None = None,
    log: IO[str] | None = None,
) -> list[Path]:
    """The jars of `line`, copied from Maven Central first if not cached (Maven's
    own repository, ~/.m2, is reused). Writes to a temporary directory renamed into
    place, so an interrupted resolve never leaves half a cache."""
    version, connector = line.version, line.connector
    target = cache_dir(line, environ)
    found = find_jars(line, target)
    if found is not None:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UsageError("Maven (mvn) not found: apt-get install maven, then run this again")
    target.parent.mkdir(parents=True, exist_ok=True)
    out = sys.stderr if log is None else log
    print(f"spark-kafka: resolving {connector}:{version} into {target}", file=out, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{version}-") as work:
        command = [
            mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM), f"-Dspark.version={version}",
            f"-Dscala.binary.version={line.scala}", f"-Doutput.dir={work}",
            "dependency:copy-dependencies",
        ]  # fmt: skip
        done = run_step(
            command,
            timeout_seconds=RESOLVE_TIMEOUT_SECONDS,
            step=f"resolving {connector}:{version} from Maven Central",
            hint=f"check access to {MAVEN_CENTRAL}",
        )
        if done.returncode != 0:
            raise UsageError(_maven_failure(line, done.stdout + done.stderr))
        if find_jars(line, Path(work)) is None:
            raise UsageError(
                f"Maven resolved {connector}:{version} without all of {line.jar_prefixes}"
            )
        Path(work).rename(target)
        Path(work).mkdir()  # TemporaryDirectory removes it again
    print(f"spark-kafka: resolved {version} in {time.monotonic() - started:.1f} s", file=out)
    result = find_jars(line, target)
    assert result is not None
    return result


def _maven_failure(line: SparkLine, output: str) -> str:
    """One line for a failed resolve (Maven's own report is many)."""
    output = _ANSI.sub("", output)
    coordinates = f"{line.connector}:{line.version}"
    if f"spark-sql-kafka-0-10_{line.scala}:jar:{line.version}" in output and any(
        words in output for words in ("Could not find artifact", "was not found in")
    ):
        return (
            f"{coordinates} is not published on Maven Central: pin pyspark to a "
            f"release whose connector is (pip install {_pins()})"
        )
    errors = (ln.strip().removeprefix("[ERROR]").strip() for ln in output.splitlines())
    first = next((ln for ln in errors if ln and not ln.startswith("[")), "no output")
    return f"resolving {coordinates} with Maven failed: {first[:300]}"


def line_named(name: str) -> SparkLine:
    """The supported line called `name` (`4.x`, `3.5`); UsageError naming them otherwise."""
    for line in LINES:
        if line.name == name:
            return line
    raise UsageError(f"no Spark line {name!r}: one of {', '.join(x.name for x in LINES)}")


def each_line(
    prog: str,
    lines: Sequence[SparkLine],
    paths: Callable[[SparkLine], Sequence[Path]],
    show: bool,
) -> int:
    """A setup command's run over `lines`: `paths` of each in turn, printed one a line
    when `show`, exit 0; at the first `HangwatchError` one `prog: error:` line on stderr
    and its exit code."""
    found: list[Path] = []
    try:
        for line in lines:
            found += paths(line)
    except HangwatchError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if show:
        print("\n".join(str(p) for p in found))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python3 -m hangwatch_pipeline.spark_kafka [--line L | --all] [--print]`."""
    parser = argparse.ArgumentParser(
        prog="python3 -m hangwatch_pipeline.spark_kafka",
        description="Resolve Spark's Kafka connector jars into the cache (once).",
    )
    names = [line.name for line in LINES]
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--line", choices=names, default=DEFAULT_LINE.name,
        help=f"the Spark line ({DEFAULT_LINE.name}: Spark {DEFAULT_LINE.version})",
    )  # fmt: skip
    chosen.add_argument("--all", action="store_true", help=f"every line ({', '.join(names)})")
    parser.add_argument("--print", action="store_true", help="print the jars' paths")
    args = parser.parse_args(argv)
    lines = LINES if args.all else (line_named(args.line),)
    return each_line("spark-kafka", lines, resolve, args.print)


if __name__ == "__main__":
    sys.exit(main())
