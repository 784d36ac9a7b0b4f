"""Moved to `hangwatch_producer.telemetry_files`, in the producer distribution: the telemetry
directory's safe reads and liveness lock.

This name stays importable for code written before the move, as the very same module
object (one definition). New code imports `hangwatch_producer.telemetry_files`.
"""

import sys

from hangwatch_producer import telemetry_files

sys.modules[__name__] = telemetry_files
