"""Moved to `hangwatch_producer.secrets`, in the producer distribution: secret redaction.

This name stays importable for code written before the move, as the very same module
object (one definition). New code imports `hangwatch_producer.secrets`.
"""

import sys

from hangwatch_producer import secrets

sys.modules[__name__] = secrets
