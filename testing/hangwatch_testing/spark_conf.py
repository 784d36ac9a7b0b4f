"""The test suite's Spark configuration directory: Spark's defaults for short local runs.

tests/conftest.py points `SPARK_CONF_DIR` here, so every Spark application a test starts
- a SparkSession in the test's process, the demo's in its subprocess, the Spark 3.5
line's pytest, a script - runs its driver and executor JVMs with
`hangwatch_pipeline.run_options.SHORT_RUN_JVM_OPTIONS` (C1 only, serial GC) as
`defaultJavaOptions`, whatever `extraJavaOptions` the test itself sets. The suite keeps
two cores busy from start to end, and Spark's JVMs used the largest share of them. The
node tier's spark-submit leaves it out: its pods run the example as a user submits it.

`defaults_dir` writes `spark-defaults.conf` under `~/.cache/hangwatch/spark-conf/<key>`,
`<key>` hashing its content, by a rename so that concurrent workers never read half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from hangwatch_pipeline.run_options import short_run_conf


def defaults_text() -> str:
    """spark-defaults.conf's lines: `short_run_conf`, one `key value` line each."""
    lines = ["# Written by hangwatch_testing.spark_conf for the test suite's Spark runs."]
    lines += [f"{key} {value}" for key, value in sorted(short_run_conf().items())]
    return "\n".join(lines) + "\n"


def defaults_dir(root: Path | None = None) -> Path:
    """The directory holding `defaults_text()` as spark-defaults.conf (written if missing)."""
    text = defaults_text()
    base = root or Path.home() / ".cache" / "hangwatch" / "spark-conf"
    directory = base / hashlib.sha256(text.encode()).hexdigest()[:12]
    target = directory / "spark-defaults.conf"
    if not target.is_file() or target.read_text() != text:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".spark-defaults-")
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, target)
    return directory
