"""Which broker JVMs map the class-data archive (`hangwatch_lab.kafka.classdata`): the
option is there when the archive of that Kafka cache, Java and options exists, absent
otherwise (a lab without setup's archive runs as before); another Java or another cache
names another archive."""

from __future__ import annotations

from pathlib import Path

from hangwatch_lab.kafka.classdata import archive_path, sharing_options


def test_the_option_names_the_archive_only_once_it_exists(tmp_path: Path) -> None:
    lib = tmp_path / "4.4.0" / "lib"
    lib.mkdir(parents=True)
    assert sharing_options("/usr/bin/java", lib) == ()
    path = archive_path("/usr/bin/java", lib)
    assert path.parent == lib.parent and path.suffix == ".jsa"
    path.write_bytes(b"")
    assert sharing_options("/usr/bin/java", lib) == (f"-XX:SharedArchiveFile={path}",)
    other_java = tmp_path / "jdk" / "bin" / "java"
    assert archive_path(str(other_java), lib) != path
    assert archive_path("/usr/bin/java", tmp_path / "3.9.2" / "lib").parent.name == "3.9.2"
