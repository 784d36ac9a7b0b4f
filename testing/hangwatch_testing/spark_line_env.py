"""The environment of each Spark line other than the default: a virtualenv with its pyspark.

One Python environment holds one `pyspark` package, so the lines of
`hangwatch_pipeline.spark_kafka.LINES` after the default (the dev environment's, 4.x)
each get a virtualenv of their own, `~/.cache/hangwatch/spark-<line>/venv`: this
interpreter's Python, the line's pinned pyspark (its pyproject.toml extra) and the
`test` extra, hangwatch and hangwatch-producer (`producer/`, which hangwatch depends on
and PyPI does not have) installed editable from this checkout. `scripts/setup.sh` runs
`python3 -m hangwatch_testing.spark_line_env` (a no-op when the environment is built
for the same pyproject.toml, pyspark and Python; about 1 minute otherwise, most of it
building pyspark's wheel). `python_of` is where the tests find the line's interpreter;
one that is missing is a one-line `UsageError` naming the setup step.

A Python the line's pyspark does not support (3.5: 3.8 to 3.11) is refused in one line
before anything is built.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from hangwatch.build_steps import run_step
from hangwatch.errors import UsageError
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, LINES, SparkLine, each_line, line_named

ROOT = Path(__file__).resolve().parents[2]
"""The checkout this module belongs to (installed editable into each environment)."""
ROOT_ENV = "HANGWATCH_SPARK_LINES"
"""Overrides where the environments live (default `~/.cache/hangwatch`)."""
INSTALL_TIMEOUT_SECONDS = 1800.0
STAMP = "hangwatch-env.stamp"


def other_lines() -> tuple[SparkLine, ...]:
    """The lines whose tests run in an environment of their own."""
    return tuple(line for line in LINES if line != DEFAULT_LINE)


def env_dir(line: SparkLine, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    root = Path(env[ROOT_ENV]) if env.get(ROOT_ENV) else Path.home() / ".cache" / "hangwatch"
    return root / f"spark-{line.name}" / "venv"


PROJECTS = ("producer/pyproject.toml", "pyproject.toml")
"""What is installed into each environment; a change of either rebuilds it."""


def _stamp(line: SparkLine) -> str:
    hashed = hashlib.sha256()
    for project in PROJECTS:
        hashed.update((ROOT / project).read_bytes())
    digest = hashed.hexdigest()[:16]
    python = ".".join(map(str, sys.version_info[:3]))
    return f"pyspark {line.version} python {python} pyproject {digest} root {ROOT}\n"


def python_of(line: SparkLine, environ: Mapping[str, str] | None = None) -> Path:
    """The interpreter of `line`'s environment; UsageError naming setup when not built."""
    venv = env_dir(line, environ)
    python = venv / "bin" / "python"
    if not python.is_file() or not (venv / STAMP).is_file():
        raise UsageError(
            f"the Spark {line.name} environment is not built ({venv}): run scripts/setup.sh "
            f"(or python3 -m hangwatch_testing.spark_line_env --line {line.name})"
        )
    return python


def build(line: SparkLine, environ: Mapping[str, str] | None = None) -> Path:
    """`line`'s environment, built (or brought up to date) unless its stamp says it is."""
    version = sys.version_info[:2]
    if not line.supports_python(version):
        low, high = (".".join(map(str, v)) for v in line.python)
        raise UsageError(
            f"pyspark {line.version} (Spark {line.name}) supports Python {low} to {high}, "
            f"this is {version[0]}.{version[1]}: run this with a Python in that range"
        )
    venv = env_dir(line, environ)
    stamp = venv / STAMP
    wanted = _stamp(line)
    if stamp.is_file() and stamp.read_text() == wanted:
        return venv / "bin" / "python"
    print(f"spark-line-env: building the Spark {line.name} environment in {venv}", file=sys.stderr)
    started = time.monotonic()
    stamp.unlink(missing_ok=True)
    steps = (
        ([sys.executable, "-m", "venv", "--clear", str(venv)], "creating the virtualenv"),
        (
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", "-e", str(ROOT / "producer"), "-e",
             f"{ROOT}[{line.extra},test]"],
            f"installing pyspark {line.version}, hangwatch-producer and "
            f"hangwatch[{line.extra},test]",
        ),
    )  # fmt: skip
    for command, step in steps:
        done = run_step(
            command, timeout_seconds=INSTALL_TIMEOUT_SECONDS, step=step,
            hint="check access to PyPI",
        )  # fmt: skip
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise UsageError(f"{step} failed: {last[-1][:300]}")
    stamp.write_text(wanted)
    elapsed = time.monotonic() - started
    print(f"spark-line-env: Spark {line.name} environment built in {elapsed:.0f} s",
          file=sys.stderr)  # fmt: skip
    return venv / "bin" / "python"


def main(argv: list[str] | None = None) -> int:
    """`python3 -m hangwatch_testing.spark_line_env [--line L] [--print]`."""
    names = [line.name for line in other_lines()]
    parser = argparse.ArgumentParser(
        prog="python3 -m hangwatch_testing.spark_line_env",
        description="Build the environment of each Spark line but the default (once).",
    )
    parser.add_argument("--line", choices=names, help="only this line (default: each)")
    parser.add_argument("--print", action="store_true", help="print each interpreter's path")
    args = parser.parse_args(argv)
    lines = (line_named(args.line),) if args.line else other_lines()
    return each_line("spark-line-env", lines, lambda line: [build(line)], args.print)


if __name__ == "__main__":
    sys.exit(main())
