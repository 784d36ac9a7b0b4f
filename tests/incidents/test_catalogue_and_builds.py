"""The replayed rows' table and the one build path of the clients they run (unit).

Every row names a client the build path knows, at most one row per id; a field case is
well formed (its family known, a producer pod declares its write interval); the build
path's errors are one line naming what is missing; a build's key follows its sources.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch_testing.clients import build
from hangwatch_testing.incidents import catalogue
from hangwatch_testing.incidents.model import FieldCase, Incident, Where


def test_every_row_names_a_client_the_build_path_knows() -> None:
    assert catalogue.INCIDENTS
    for incident in catalogue.INCIDENTS:
        assert incident.client in build.BY_NAME, incident.id
        assert catalogue.BY_ID[incident.id] is incident


def test_every_clients_sources_and_version_file_exist() -> None:
    for client in build.CLIENTS:
        assert client.directory.is_dir(), client
        if client.version_file:
            assert (client.directory / client.version_file).is_file(), client
        assert client.kind in build.BUILDERS, client
        build.key(client, "toolchain")  # reads every file of the key


def _case(where: Where = Where.POD, family: str = "sarama") -> FieldCase:
    return FieldCase(
        "x", family, "https://example.invalid/1", "1", None, "c", "t", "s", True, where
    )


def _row(where: Where, case: FieldCase | None, *sidecar_args: str) -> Incident:
    return Incident(
        "r", "sarama-v1.37.2", "l", "f", lambda b, s: [], lambda lab, s: None, 1.0,
        sidecar_args=sidecar_args, where=where, case=case,
    )  # fmt: skip


def test_a_field_case_is_well_formed() -> None:
    with pytest.raises(ValueError, match="unknown family 'kafka-python'"):
        _case(family="kafka-python")
    with pytest.raises(ValueError, match="runs in a producer pod or inside Spark"):
        _case(Where.PROCESS)
    with pytest.raises(ValueError, match="declares its write interval"):
        _row(Where.POD, _case())
    with pytest.raises(ValueError, match="runs inside Spark, its case a producer pod"):
        _row(Where.SPARK, _case())
    assert _row(Where.POD, _case(), "--expected-write-interval-seconds", "12").case


def test_build_errors_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(build.BuildError, match="unknown client 'java' \\(one of: sarama"):
        build.built("java")
    assert build.main(["java"]) == 3
    monkeypatch.setattr(build.shutil, "which", lambda _name: None)
    with pytest.raises(build.BuildError, match="no go: install golang-go gcc"):
        build.built("sarama-producer")
    with pytest.raises(build.BuildError, match=r"no javac: run scripts/setup\.sh"):
        build.built("kafka-clients-3.9.2")


def test_a_builds_key_follows_its_sources_and_toolchain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "incidents" / "c").mkdir(parents=True)
    (tmp_path / "incidents" / "progress").mkdir()
    (tmp_path / "incidents" / "progress" / "progress.go").write_text("package progress")
    (tmp_path / "incidents" / "c" / "main.go").write_text("package main")
    (tmp_path / "incidents" / "c" / "go.mod").write_text("module c")
    (tmp_path / "incidents" / "c" / "go.sum").write_text("")
    monkeypatch.setattr(build, "SOURCES", tmp_path)
    client = build.Client("c", "go", "incidents/c", "go.mod")
    first = build.key(client, "go1")
    assert build.key(client, "go1") == first
    assert build.key(client, "go2") != first
    (tmp_path / "incidents" / "progress" / "progress.go").write_text("package progress // x")
    second = build.key(client, "go1")
    assert second != first
    (tmp_path / "incidents" / "c" / "go.sum").write_text("h1")
    assert build.key(client, "go1") != second


def test_a_failed_build_leaves_no_directory_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def fails(client: build.Client, out: Path) -> None:
        (out / "half").write_text("")
        raise build.BuildError("go build of x failed (y): z")

    monkeypatch.setitem(build.BUILDERS, "go", fails)
    with pytest.raises(build.BuildError, match="go build of x failed"):
        build.built("sarama-v1.37.2")
    assert [p.name for p in (tmp_path / "hangwatch" / "clients" / "sarama-v1.37.2").iterdir()] == [
        ".lock"
    ]
