"""The producer distribution installs and passes its own tests under Python 3.9 and 3.11.

Covered, against one real Apache Kafka broker from the lab (the tests' broker):
- Debian bullseye's python3.9 (a debootstrap root, bullseye.py): the wheel built from
  producer/ installs into a virtual environment holding only its declared dependencies
  (`pip check`), it is the installed wheel the tests import (not the repository's
  source), the package's own tests (producer/tests: delivery, a job callback that
  sends, a cluster that never answers, bad configuration, the telemetry heartbeat,
  identity, redaction and cleanup) all pass, and mypy --strict targeting 3.9 (mypy
  1.19.1; the project's mypy 2.x stops at 3.10) finds nothing in the package, and the
  example image's job (examples/spark-on-kubernetes/orders_job.py) compiles;
- the machine's python3 (3.11): the same tests pass.
Nothing of the `hangwatch` distribution is importable in the 3.9 root, so the package
standing alone is proven, not assumed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_testing.bullseye import (
    PRODUCER,
    VENV,
    Chroot,
    build_wheel,
    copy_tree,
    install_wheel,
    python39_root,
)

pytestmark = [pytest.mark.xdist_group("python39"), pytest.mark.timeout(1800)]
"""Cold, the bullseye root costs minutes (debootstrap): a group of its own, started early."""

BOOTSTRAP_ENV = "HANGWATCH_PRODUCER_TEST_BOOTSTRAP"
EXAMPLE_JOB = PRODUCER.parent / "examples" / "spark-on-kubernetes" / "orders_job.py"
TEST_COUNT = 8
"""The tests in producer/tests (a run with fewer passed, or any skipped, is a failure)."""


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    """One real Apache Kafka broker (the lab's kafka engine) on 127.0.0.1."""
    with Lab(brokers=1, engine="kafka") as lab:
        yield lab.bootstrap


def assert_all_passed(output: str) -> None:
    summary = output.strip().splitlines()[-1]
    assert re.search(rf"\b{TEST_COUNT} passed\b", summary), output[-3000:]
    assert not re.search(r"skipped|failed|error|xfail", summary), output[-3000:]


def test_the_machines_python(broker: str) -> None:
    env = {**os.environ, BOOTSTRAP_ENV: broker, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=PRODUCER,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert_all_passed(done.stdout)
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"producer tests under python {version}: {time.monotonic() - started:.0f} s")


def test_debian_bullseyes_python_3_9(broker: str) -> None:
    started = time.monotonic()
    box: Chroot = python39_root()
    prepared = time.monotonic()
    with box.scratch() as (host, inside), tempfile.TemporaryDirectory() as dist:
        wheel = build_wheel(Path(dist))
        (host / "wheel").mkdir()
        (host / "wheel" / wheel.name).write_bytes(wheel.read_bytes())
        install_wheel(box, f"{inside}/wheel/{wheel.name}")
        version = box.run("python -c 'import sys; print(sys.version.split()[0])'").stdout.strip()
        assert version.startswith("3.9."), version
        where = box.run(
            "cd / && python -c 'import hangwatch_producer as p; print(p.__file__)'"
        ).stdout.strip()
        assert where.startswith(f"{VENV}/lib/python3.9/site-packages/hangwatch_producer/"), where
        alone = box.run("python -c 'import importlib.util as u; print(u.find_spec(\"hangwatch\"))'")
        assert alone.stdout.strip() == "None", alone.stdout

        (host / "tests").mkdir()
        copy_tree(PRODUCER, host / "tests", ["pyproject.toml", "tests"])
        tested = box.run(
            f"cd {inside}/tests && exec pytest -q",
            env={BOOTSTRAP_ENV: broker, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )
        assert_all_passed(tested.stdout)

        (host / "src").mkdir()
        copy_tree(PRODUCER, host / "src", ["pyproject.toml", "hangwatch_producer", "tests"])
        typed = box.run(
            f"cd {inside}/src && exec mypy --python-version 3.9 --cache-dir {inside}/mypy-cache "
            "hangwatch_producer tests"
        )
        assert typed.stdout.strip().startswith("Success: no issues found"), typed.stdout

        shutil.copy2(EXAMPLE_JOB, host / "orders_job.py")  # the example image's job, 3.9 syntax
        box.run(f"python -m py_compile {inside}/orders_job.py")
    print(
        f"producer tests under Debian bullseye python {version}: root ready in "
        f"{prepared - started:.0f} s, install + tests + mypy {time.monotonic() - prepared:.0f} s"
    )
