"""Builds the broker JVMs' class-data archive (`hangwatch_lab.kafka.classdata`).

    python -m hangwatch_lab.kafka.class_archive

A one-broker cluster of the default Kafka version starts with
`-XX:DumpLoadedClassList` (the classes a broker loads to start and serve a topic), is
stopped with SIGTERM (Kafka's controlled shutdown, so the list is complete), and
`java -Xshare:dump` writes the archive from that list with the brokers' own options and
classpath; written under a temporary name and renamed, so a broker never maps half an
archive; archives of another Java or other options are removed. A no-op when the archive
exists. Prints the archive's path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hangwatch.errors import LabSetupError
from hangwatch_lab import kafkajars
from hangwatch_lab.kafka.classdata import archive_path
from hangwatch_lab.kafka.engine import KafkaLab
from hangwatch_lab.kafka.nodes import JVM_OPTIONS, find_java

DUMP_TIMEOUT_SECONDS = 600.0


def build() -> Path:
    """The archive of the default Kafka version for this Java, built if missing."""
    java, lib = find_java(), kafkajars.ensure_jars()
    path = archive_path(java, lib)
    if path.is_file():
        return path
    with tempfile.TemporaryDirectory(prefix="hangwatch-class-archive-") as tmp:
        classes = Path(tmp) / "classes.lst"
        lab = KafkaLab(brokers=1, topics={"t": 1})
        lab.jvm_extra_options = (f"-XX:DumpLoadedClassList={classes}",)
        try:
            lab.start()
            lab.down(1, "stop")
        finally:
            lab.close()
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        dump = subprocess.run(
            [java, "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
             f"-XX:SharedArchiveFile={partial}", *JVM_OPTIONS, "-cp", f"{lib}/*"],
            capture_output=True, text=True, timeout=DUMP_TIMEOUT_SECONDS, check=False,
        )  # fmt: skip
        if dump.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            last = (dump.stdout + dump.stderr).strip().splitlines()[-1:] or ["no output"]
            raise LabSetupError(f"java -Xshare:dump of the brokers' classes failed: {last[0]}")
        os.replace(partial, path)
    for stale in path.parent.glob("brokers-*.jsa"):  # another Java's, or other options'
        if stale != path:
            stale.unlink(missing_ok=True)
    return path


def main() -> int:
    """Build the archive if missing and print its path; a setup error in one line."""
    try:
        print(build())
    except LabSetupError as exc:
        print(f"class-archive: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
