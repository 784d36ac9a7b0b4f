"""The broker JVMs' class-data archive: where it lives and the option that maps it.

A lab's broker JVM lives a minute or two and spends most of its CPU starting: reading,
verifying and linking about 7,000 classes of Kafka's and its dependencies'. Java's
class-data sharing (a static AppCDS archive, JDK 10+) keeps those classes parsed and
verified in a file every JVM maps at start. `hangwatch_lab.kafka.class_archive` builds
it once per Kafka version, Java and broker options (scripts/setup.sh runs it); a lab's
JVMs map it when it is there as the lab starts and run as before when it is not, and a
JVM that cannot use it (another Java than the one that dumped it) warns in the broker's
log and runs without it (`-Xshare:auto`, the JVM's default).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hangwatch_lab.kafka.nodes import JVM_OPTIONS


def archive_path(java: str, lib: Path) -> Path:
    """The archive for the jars in `lib` (a Kafka version's cache), this Java (its real
    path and when it was installed: an upgraded Java names a new archive) and the
    brokers' JVM options: beside `lib`, named by a hash of the last two."""
    real = os.path.realpath(java)
    installed = os.stat(real).st_mtime_ns if os.path.exists(real) else 0
    key = f"{real}\0{installed}\0{' '.join(JVM_OPTIONS)}"
    return lib.parent / f"brokers-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"


def sharing_options(java: str, lib: Path) -> tuple[str, ...]:
    """The JVM option that maps the archive when it has been built; none otherwise."""
    path = archive_path(java, lib)
    return (f"-XX:SharedArchiveFile={path}",) if path.is_file() else ()
