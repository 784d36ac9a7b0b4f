"""Moved to `hangwatch_producer.wire.schema`, in the producer distribution: the bounded
types and strict decoding of every document.

This name stays importable for code written before the move, as the very same module
object (one definition). New code imports `hangwatch_producer.wire.schema`.
"""

import sys

from hangwatch_producer.wire import schema

sys.modules[__name__] = schema
