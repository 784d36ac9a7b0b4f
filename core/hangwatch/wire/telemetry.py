"""Moved to `hangwatch_producer.wire.telemetry`, in the producer distribution: the telemetry
document and its files.

This name stays importable for code written before the move, as the very same module
object (one definition). New code imports `hangwatch_producer.wire.telemetry`.
"""

import sys

from hangwatch_producer.wire import telemetry

sys.modules[__name__] = telemetry
