"""Locates and loads the librdkafka shared library bundled in the confluent-kafka wheel.

Used by the lab (mock-cluster C API) and by `config-check` (validating properties
with librdkafka's own `rd_kafka_conf_set`). Each call returns its own `CDLL` handle
(the library itself is mapped once), so each caller sets the argument and result
types of the functions it uses without affecting another caller.
"""

from __future__ import annotations

import ctypes
import glob
import os

import confluent_kafka

from hangwatch.errors import HangwatchError


def library_path() -> str:
    """Path of the `librdkafka*.so` confluent-kafka links against."""
    pkg = os.path.dirname(confluent_kafka.__file__)
    found = sorted(
        glob.glob(os.path.join(pkg, "..", "confluent_kafka.libs", "librdkafka*.so*"))
        + glob.glob(os.path.join(pkg, ".libs", "librdkafka*.so*"))
    )
    if not found:
        raise HangwatchError(f"no librdkafka shared library next to confluent_kafka in {pkg}")
    return found[0]


def load() -> ctypes.CDLL:
    """A new handle on the bundled librdkafka."""
    return ctypes.CDLL(library_path())
