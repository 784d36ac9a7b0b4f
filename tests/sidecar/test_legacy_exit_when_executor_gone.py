"""Legacy injection: the sidecar exits once the executor process it watches is gone.

Covers: a real child process matching the pattern keeps `gone()` false; after it
exits `gone()` turns true; a pattern never seen never reports gone (a sidecar that
starts before its executor does not exit early).
"""

from __future__ import annotations

import subprocess
import sys
import time

from hangwatch_sidecar.lifecycle import ExecutorWatch


def test_gone_only_after_the_process_was_seen_and_exited() -> None:
    marker = "org.apache.spark.executor.FakeBackendForTest"
    watch = ExecutorWatch(marker)
    assert not watch.gone(), "never seen: must not report gone"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 10
        while not watch.seen and time.monotonic() < deadline:  # until the child has exec'd
            assert not watch.gone()
            time.sleep(0.01)
        assert watch.seen
        assert not watch.gone()
    finally:
        child.kill()
        child.wait()
    assert watch.gone()
