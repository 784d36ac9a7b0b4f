"""The Spark lines' environments: where they are, one line when one is missing or impossible.

Covers `hangwatch_testing.spark_line_env`: every line but the default gets an
environment of its own; an environment that was never built (no interpreter, or no
stamp: a build that did not finish) is one `UsageError` line naming the setup step and
the line; a Python the line's pyspark does not support is refused in one line naming
both ranges, before anything is created.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_pipeline.spark_kafka import DEFAULT_LINE, LINES, line_named
from hangwatch_testing import spark_line_env

OLD = line_named("3.5")


def test_every_line_but_the_default_has_an_environment_of_its_own(tmp_path: Path) -> None:
    assert spark_line_env.other_lines() == tuple(x for x in LINES if x != DEFAULT_LINE)
    env = {spark_line_env.ROOT_ENV: str(tmp_path)}
    assert spark_line_env.env_dir(OLD, env) == tmp_path / "spark-3.5" / "venv"


@pytest.mark.parametrize("built", ["nothing", "interpreter only"])
def test_an_environment_never_built_is_one_line_naming_setup(tmp_path: Path, built: str) -> None:
    env = {spark_line_env.ROOT_ENV: str(tmp_path)}
    if built == "interpreter only":  # a build that stopped before its stamp
        python = spark_line_env.env_dir(OLD, env) / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("")
    with pytest.raises(UsageError) as raised:
        spark_line_env.python_of(OLD, env)
    message = str(raised.value)
    assert "scripts/setup.sh" in message and "--line 3.5" in message and "\n" not in message


def test_a_python_the_lines_pyspark_does_not_support_is_refused_first(tmp_path: Path) -> None:
    here = sys.version_info[:2]
    narrow = dataclasses.replace(OLD, python=((3, 0), (3, here[1] - 1)))
    env = {spark_line_env.ROOT_ENV: str(tmp_path)}
    with pytest.raises(UsageError) as raised:
        spark_line_env.build(narrow, env)
    message = str(raised.value)
    assert f"supports Python 3.0 to 3.{here[1] - 1}, this is 3.{here[1]}" in message
    assert list(tmp_path.iterdir()) == []
