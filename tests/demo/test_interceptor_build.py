"""The demo's wedgeable Kafka interceptor (`hangwatch_demo.interceptor`): built once, cached.

Covers, with the machine's real javac and the connector's real kafka-clients jar: the
first call compiles the class into a jar holding `dev/hangwatch/demo/WedgeInterceptor`,
a second call returns the same jar without building again; no javac on PATH, or no
kafka-clients among the jars -> one `UsageError` line naming what to do, nothing cached.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from hangwatch.errors import UsageError
from hangwatch_demo import interceptor
from hangwatch_pipeline import spark_kafka


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(interceptor.CACHE_ENV, str(root))
    return root


def test_built_once_then_served_from_the_cache(cache: Path) -> None:
    jar = interceptor.interceptor_jar(spark_kafka.jars())
    assert jar.parent.parent == cache
    with zipfile.ZipFile(jar) as archive:
        assert "dev/hangwatch/demo/WedgeInterceptor.class" in archive.namelist()
    built_at = jar.stat().st_mtime_ns
    assert interceptor.interceptor_jar(spark_kafka.jars()) == jar
    assert jar.stat().st_mtime_ns == built_at
    assert [p.name for p in cache.iterdir()] == [jar.parent.name]  # no temporary left


def test_no_javac_is_one_line_naming_setup(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"^no javac .*scripts/setup\.sh") as raised:
        interceptor.interceptor_jar(spark_kafka.jars())
    assert "\n" not in str(raised.value)
    assert not cache.exists()


def test_jars_without_kafka_clients_are_refused(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="kafka-clients"):
        interceptor.interceptor_jar([tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar"])
    assert not cache.exists()
