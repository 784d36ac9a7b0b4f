"""Validate librdkafka properties with librdkafka itself, without creating a client.

Every command that takes librdkafka properties calls `validate` before using them
(`config-check` before modelling them, `probe` and `sidecar` for their `-X` flags and
`HANGWATCH_KAFKA_*` variables, `pipeline run` for the producer's): each property goes
through `rd_kafka_conf_set` of the `librdkafka*.so` bundled with confluent-kafka, the
same code `confluent_kafka.Producer(conf)` runs first, so all of them accept and refuse
exactly what the client will. No client
is created, so nothing connects, no thread starts and no Kerberos command runs.
`plugin.library.paths` is not passed on: setting it loads the libraries it names.
"""

from __future__ import annotations

import ctypes
import difflib
from collections.abc import Mapping
from typing import Any

from hangwatch import rdkafka
from hangwatch.time_to_error.estimate import ClientSettingsError
from hangwatch_producer.secrets import is_secret_key

CONF_UNKNOWN = -2
CONF_INVALID = -1
NOT_PASSED_ON = frozenset({"plugin.library.paths"})
"""Properties whose setting has side effects (loading shared libraries)."""

_P = ctypes.c_void_p
_ERRSTR_BYTES = 512


def _library() -> ctypes.CDLL:
    lib = rdkafka.load()
    lib.rd_kafka_conf_new.restype = _P
    lib.rd_kafka_conf_new.argtypes = []
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [_P, ctypes.c_char_p, ctypes.c_char_p, _P, ctypes.c_size_t]
    lib.rd_kafka_conf_destroy.restype = None
    lib.rd_kafka_conf_destroy.argtypes = [_P]
    lib.rd_kafka_conf_dump.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.rd_kafka_conf_dump.argtypes = [_P, ctypes.POINTER(ctypes.c_size_t)]
    lib.rd_kafka_topic_conf_new.restype = _P
    lib.rd_kafka_topic_conf_new.argtypes = []
    lib.rd_kafka_topic_conf_destroy.restype = None
    lib.rd_kafka_topic_conf_destroy.argtypes = [_P]
    lib.rd_kafka_topic_conf_dump.restype = ctypes.POINTER(ctypes.c_char_p)
    lib.rd_kafka_topic_conf_dump.argtypes = [_P, ctypes.POINTER(ctypes.c_size_t)]
    lib.rd_kafka_conf_dump_free.restype = None
    lib.rd_kafka_conf_dump_free.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
    return lib


def _dumped_names(lib: ctypes.CDLL, dump: Any, conf: int) -> list[str]:
    count = ctypes.c_size_t()
    pairs = dump(conf, ctypes.byref(count))
    try:
        return [(pairs[i] or b"").decode() for i in range(0, count.value, 2)]
    finally:
        lib.rd_kafka_conf_dump_free(pairs, count)


def _property_names(lib: ctypes.CDLL) -> list[str]:
    """Global and topic property names, for "did you mean" hints."""
    conf, topic_conf = lib.rd_kafka_conf_new(), lib.rd_kafka_topic_conf_new()
    try:
        return _dumped_names(lib, lib.rd_kafka_conf_dump, conf) + _dumped_names(
            lib, lib.rd_kafka_topic_conf_dump, topic_conf
        )
    finally:
        lib.rd_kafka_conf_destroy(conf)
        lib.rd_kafka_topic_conf_destroy(topic_conf)


def _c_string(text: str) -> bytes | None:
    """`text` as librdkafka reads it, or None when C cannot carry it (NUL, undecodable)."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        return None
    return None if b"\0" in data else data


def _problem(lib: ctypes.CDLL, conf: int, key: str, value: str) -> str | None:
    c_key, c_value = _c_string(key), _c_string(value)
    if c_key is None:
        return f"property name {key!r} is not valid UTF-8 text"
    if c_value is None:
        shown = "(not shown: secret)" if is_secret_key(key) else repr(value)
        return f"{key}: value {shown} is not valid UTF-8 text"
    errstr = ctypes.create_string_buffer(_ERRSTR_BYTES)
    result = lib.rd_kafka_conf_set(conf, c_key, c_value, ctypes.cast(errstr, _P), _ERRSTR_BYTES)
    if result == CONF_UNKNOWN:
        close = difflib.get_close_matches(key, _property_names(lib), n=1)
        return f"unknown librdkafka property {key!r}" + (
            f" (did you mean {close[0]!r}?)" if close else ""
        )
    if result == CONF_INVALID:
        if is_secret_key(key):
            return f"{key}: invalid value (not shown: secret)"
        text = errstr.value.decode(errors="replace").strip()
        return text if key in text else f"{key}: {text}"
    return None


def validate(config: Mapping[str, str]) -> None:
    """Raise `ClientSettingsError` naming the first property librdkafka refuses (unknown key,
    wrong type, out of range), in the order given."""
    lib = _library()
    conf = lib.rd_kafka_conf_new()
    try:
        for key, value in config.items():
            if key in NOT_PASSED_ON:
                continue
            problem = _problem(lib, conf, key, value)
            if problem is not None:
                raise ClientSettingsError(problem)
    finally:
        lib.rd_kafka_conf_destroy(conf)
