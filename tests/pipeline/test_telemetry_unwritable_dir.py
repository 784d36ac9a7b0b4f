"""A producer that cannot write telemetry keeps producing and says so exactly once.

Covered, against the real lab:
- the directory's parent does not exist (only the last component is ever created):
  every message is delivered, one warning is logged for the directory, even across
  two producers in the same process;
- a missing last component is created, and a relative directory is taken from the
  working directory when the producer opens (one directory per Spark standalone
  executor), not when it later writes;
- the path is a regular file, not a directory: the same;
- the directory disappears while the producer runs: one warning, producing goes on,
  close does not fail;
- HANGWATCH_TELEMETRY_DIR is unset: one warning per process (checked in a fresh
  Python process running two producers), producing goes on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_pipeline import producer
from hangwatch_testing.waiting import wait_for

from .producer_helpers import FAST, doc_where

pytestmark = pytest.mark.usefixtures("producer_env")


def telemetry_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "hangwatch_producer.telemetry" and r.levelname == "WARNING"
    ]


def produce_twice(lab: Lab) -> None:
    for _ in range(2):
        with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
            for i in range(100):
                p.send("t", f"value-{i}")
        assert p.counters().delivered == 100


@pytest.mark.parametrize("kind", ["missing", "regular file"])
def test_unusable_directory_one_warning_and_producing_continues(
    lab: Lab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kind: str,
) -> None:
    target = tmp_path / "not-there" / "telemetry"
    if kind == "regular file":
        target = tmp_path / "not-there"
    if kind == "regular file":
        target.write_text("in the way")
    monkeypatch.setenv("HANGWATCH_TELEMETRY_DIR", str(target))
    produce_twice(lab)
    assert telemetry_warnings(caplog) == [
        "cannot write producer telemetry; producing continues without it"
    ]
    warning = next(r for r in caplog.records if r.name == "hangwatch_producer.telemetry")
    problem = warning.__dict__["problem"]
    assert problem == ("directory does not exist" if kind == "missing" else "not a directory")


def test_relative_directory_is_created_in_the_working_directory_at_open(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    executor_dir = tmp_path / "work" / "app-1" / "0"
    executor_dir.mkdir(parents=True)
    monkeypatch.chdir(executor_dir)
    monkeypatch.setenv("HANGWATCH_TELEMETRY_DIR", "hangwatch-telemetry")
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        monkeypatch.chdir(tmp_path)  # the job moving elsewhere changes nothing
        assert p.telemetry_path == executor_dir / "hangwatch-telemetry" / p.telemetry_path.name
        doc_where(p.telemetry_path, lambda d: d["stats"] is not None, 30)
        for i in range(100):
            p.send("t", f"value-{i}")
    assert p.counters().delivered == 100
    assert telemetry_warnings(caplog) == []
    assert not (tmp_path / "hangwatch-telemetry").exists()


def test_directory_removed_while_running(
    lab: Lab, producer_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with producer({"bootstrap.servers": lab.bootstrap}, FAST) as p:
        assert p.telemetry_path is not None
        doc_where(p.telemetry_path, lambda d: d["stats"] is not None, 30)
        shutil.rmtree(producer_env)
        for i in range(100):
            p.send("t", f"value-{i}")
        wait_for(lambda: p.telemetry_failures >= 2, 30, "two failed telemetry writes")
        for i in range(100):
            p.send("t", f"more-{i}")
    assert p.counters().delivered == 200
    assert len(telemetry_warnings(caplog)) == 1


UNSET_SCRIPT = textwrap.dedent(
    """
    import sys
    from hangwatch.logs import configure
    from hangwatch_pipeline import ProducerSettings, producer

    configure("test")
    for _ in range(2):
        with producer({"bootstrap.servers": sys.argv[1]}, ProducerSettings()) as p:
            for i in range(50):
                p.send("t", b"x")
        assert p.counters().delivered == 50
    print("delivered", flush=True)
    """
)


def test_unset_directory_warns_once_per_process(lab: Lab) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HANGWATCH_TELEMETRY_DIR"}
    run = subprocess.run(
        [sys.executable, "-c", UNSET_SCRIPT, lab.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "delivered"
    assert run.stderr.count("HANGWATCH_TELEMETRY_DIR is not set") == 1
    assert run.stderr.count('"level":"warning"') == 1
