"""The example's Spark image installs the producer distribution alone, on a Python it supports.

Covered (examples/spark-on-kubernetes/Dockerfile, read as text; Apache Spark's image is
not reachable here, and the node tier builds the Dockerfile for real on a stock-like
stand-in, tests/node/test_install_from_registries.py):
- the base is Apache Spark's official image with Python, and the python3 version it is
  written down to have (`SPARK_IMAGE_PYTHON`, the one place; the build itself refuses a
  base whose python3 differs) is admitted by the producer's requires-python and lies
  between the Pythons the producer's tests run under (Debian bullseye's 3.9 and the
  machine's, test_supported_pythons.py);
- the only thing pip installs is `hangwatch-producer` at this release's version, from the
  package index the build is given (never the `hangwatch` distribution, whose sidecar
  dependencies would land in every executor);
- the base is a Spark release the tests run (a line of `hangwatch_pipeline.spark_kafka`),
  and sparkapplication.yaml names the same one;
- the job it copies imports nothing of hangwatch but `hangwatch_producer`;
- the build context's .dockerignore (the repository root's, shared with `make image`)
  keeps what it copies: the job.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import shlex
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import hangwatch_producer
from hangwatch_pipeline.spark_kafka import LINES

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "examples" / "spark-on-kubernetes" / "Dockerfile"
OLDEST_TESTED = Version("3.9")
"""Debian bullseye's python3 (test_supported_pythons.py)."""


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def args() -> dict[str, str]:
    """The ARG defaults."""
    found = {}
    for instruction, rest in instructions():
        if instruction == "ARG" and "=" in rest:
            name, value = rest.split("=", 1)
            found[name] = value
    return found


def test_the_base_python_is_supported_and_between_the_tested_ones() -> None:
    defaults = args()
    assert defaults["SPARK_IMAGE"].startswith("docker.io/library/spark:")
    assert "python3" in defaults["SPARK_IMAGE"]
    assert ("FROM", "${SPARK_IMAGE}") in instructions()
    base_python = Version(defaults["SPARK_IMAGE_PYTHON"])
    producer = tomllib.loads((ROOT / "producer" / "pyproject.toml").read_text())["project"]
    assert SpecifierSet(producer["requires-python"]).contains(base_python)
    newest_tested = Version(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert OLDEST_TESTED <= base_python <= newest_tested


def test_pip_installs_the_producer_release_only() -> None:
    installed = []
    for instruction, rest in instructions():
        if instruction != "RUN":
            continue
        words = shlex.split(rest.replace("&&", " && "))
        for i, word in enumerate(words):
            if word in ("pip", "pip3") and words[i + 1 : i + 2] == ["install"]:
                for arg in words[i + 2 :]:
                    if arg == "&&":
                        break
                    if not arg.startswith("-") and arg != "${PIP_INDEX_URL}":
                        installed.append(arg)
    assert installed == ["${HANGWATCH_PRODUCER}"]
    assert args()["HANGWATCH_PRODUCER"] == f"hangwatch-producer=={hangwatch_producer.__version__}"
    assert args()["PIP_INDEX_URL"] == "https://pypi.org/simple"
    copied = [rest for instruction, rest in instructions() if instruction == "COPY"]
    assert not any("dist/" in c for c in copied)


def test_the_base_and_the_application_are_a_tested_spark_release() -> None:
    tested = {line.version for line in LINES}
    tag = args()["SPARK_IMAGE"].rsplit(":", 1)[1]
    assert tag.split("-", 1)[0] in tested, f"{tag}: not one of the tested {sorted(tested)}"
    application = yaml.safe_load(
        (ROOT / "examples" / "spark-on-kubernetes" / "sparkapplication.yaml").read_text()
    )
    assert application["spec"]["sparkVersion"] == tag.split("-", 1)[0]


def test_the_job_imports_only_the_producer_package() -> None:
    job = ROOT / args()["JOB"]
    tree = ast.parse(job.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    ours = {name.split(".")[0] for name in imported if name.startswith("hangwatch")}
    assert ours == {"hangwatch_producer"}


def kept_by_dockerignore(path: str) -> bool:
    """Whether the repository's .dockerignore leaves `path` in the build context (its
    rules in order, the last that matches decides; `!` keeps)."""
    keep = True
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        rule = line.strip()
        if not rule or rule.startswith("#"):
            continue
        pattern = rule.removeprefix("!")
        if pattern == "**" or fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            keep = rule.startswith("!")
    return keep


def test_the_build_context_keeps_what_the_dockerfile_copies() -> None:
    assert kept_by_dockerignore(args()["JOB"])
    assert not kept_by_dockerignore("dist/hangwatch-0.1.0-py3-none-any.whl")
