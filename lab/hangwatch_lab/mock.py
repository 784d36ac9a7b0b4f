"""ctypes binding to librdkafka's mock-cluster C API (`rdkafka_mock.h`).

Only the mock server child process (`hangwatch_lab.mockserver`) uses this module:
the mock cluster lives inside the process that created it, and a crash in the
mock (for instance a leaderless partition, which segfaults in librdkafka 2.x) must
stay inside that process. The library is the `librdkafka*.so` bundled in the
confluent-kafka wheel, so the mock runs the same Kafka protocol code as the clients.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import confluent_kafka

from hangwatch import rdkafka
from hangwatch.errors import LabError

API_KEYS = {
    "produce": 0,
    "fetch": 1,
    "list_offsets": 2,
    "metadata": 3,
    "api_versions": 18,
    "init_producer_id": 22,
}
"""Kafka protocol request names the lab accepts for request errors."""

_c = ctypes
_P = _c.c_void_p
_MAX_VARIADIC_PAIRS = 500
"""ctypes passes at most 1024 arguments to a C function."""


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    sigs: dict[str, tuple[object, list[object]]] = {
        "rd_kafka_conf_new": (_P, []),
        "rd_kafka_conf_set": (_c.c_int, [_P, _c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_size_t]),
        "rd_kafka_new": (_P, [_c.c_int, _P, _c.c_char_p, _c.c_size_t]),
        "rd_kafka_destroy": (None, [_P]),
        "rd_kafka_mock_cluster_new": (_P, [_P, _c.c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [_P]),
        "rd_kafka_mock_cluster_bootstraps": (_c.c_char_p, [_P]),
        "rd_kafka_mock_topic_create": (_c.c_int, [_P, _c.c_char_p, _c.c_int, _c.c_int]),
        "rd_kafka_mock_topic_set_error": (None, [_P, _c.c_char_p, _c.c_int]),
        "rd_kafka_mock_partition_set_leader": (_c.c_int, [_P, _c.c_char_p, _c.c_int32, _c.c_int32]),
        "rd_kafka_mock_broker_set_down": (_c.c_int, [_P, _c.c_int32]),
        "rd_kafka_mock_broker_set_up": (_c.c_int, [_P, _c.c_int32]),
        "rd_kafka_mock_broker_set_rtt": (_c.c_int, [_P, _c.c_int32, _c.c_int]),
        "rd_kafka_mock_clear_request_errors": (None, [_P, _c.c_int16]),
        "rd_kafka_mock_broker_error_stack_cnt": (
            _c.c_int,
            [_P, _c.c_int32, _c.c_int16, _c.POINTER(_c.c_size_t)],
        ),
        "rd_kafka_mock_push_request_errors_array": (
            None,
            [_P, _c.c_int16, _c.c_size_t, _c.POINTER(_c.c_int)],
        ),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class MockCluster:
    """A librdkafka mock cluster with `brokers` brokers (ids 1..brokers) on loopback ports."""

    def __init__(self, brokers: int) -> None:
        self.lib = _bind(rdkafka.load())
        conf = self.lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        # The handle only does the mock's book keeping; silence its "no bootstrap" warning.
        self.lib.rd_kafka_conf_set(conf, b"log_level", b"0", err, 512)
        self.rk = self.lib.rd_kafka_new(0, conf, err, 512)
        if not self.rk:
            raise LabError(f"librdkafka refused to start: {err.value.decode()}")
        self.cluster = self.lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.cluster:
            raise LabError("librdkafka could not create the mock cluster")
        self.broker_count = brokers

    @property
    def bootstrap(self) -> str:
        """Comma-separated host:port list, broker 1 first."""
        raw: bytes = self.lib.rd_kafka_mock_cluster_bootstraps(self.cluster)
        return raw.decode()

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise LabError(f"{what} failed: {confluent_kafka.KafkaError(rc).str()}")

    def create_topic(self, name: str, partitions: int, replication: int) -> None:
        self._check(
            self.lib.rd_kafka_mock_topic_create(
                self.cluster, name.encode(), partitions, replication
            ),
            f"creating topic {name}",
        )

    def set_topic_error(self, name: str, error: int) -> None:
        self.lib.rd_kafka_mock_topic_set_error(self.cluster, name.encode(), error)

    def set_leader(self, topic: str, partition: int, broker: int) -> None:
        if broker < 1:
            raise LabError("a leader must be a broker id; leaderless partitions crash the mock")
        self._check(
            self.lib.rd_kafka_mock_partition_set_leader(
                self.cluster, topic.encode(), partition, broker
            ),
            f"moving the leader of {topic}/{partition}",
        )

    def set_down(self, broker: int) -> None:
        self._check(self.lib.rd_kafka_mock_broker_set_down(self.cluster, broker), "broker down")

    def set_up(self, broker: int) -> None:
        self._check(self.lib.rd_kafka_mock_broker_set_up(self.cluster, broker), "broker up")

    def set_rtt(self, broker: int, rtt_ms: int) -> None:
        self._check(self.lib.rd_kafka_mock_broker_set_rtt(self.cluster, broker, rtt_ms), "RTT")

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        arr = (ctypes.c_int * len(errors))(*errors)
        self.lib.rd_kafka_mock_push_request_errors_array(self.cluster, api_key, len(errors), arr)

    def push_broker_delays(self, broker: int, api_key: int, count: int, rtt_ms: int) -> None:
        """The broker answers its next `count` `api_key` requests only after `rtt_ms`."""
        fn = self.lib.rd_kafka_mock_broker_push_request_error_rtts
        fn.restype = ctypes.c_int  # variadic: (err, rtt) pairs follow the count
        left = count
        while left > 0:
            chunk = min(left, _MAX_VARIADIC_PAIRS)
            pairs = [ctypes.c_int(v) for _ in range(chunk) for v in (0, rtt_ms)]
            self._check(
                fn(
                    ctypes.c_void_p(self.cluster),
                    ctypes.c_int32(broker),
                    ctypes.c_int16(api_key),
                    ctypes.c_size_t(chunk),
                    *pairs,
                ),
                "pushing request delays",
            )
            left -= chunk

    def broker_stack_count(self, broker: int, api_key: int) -> int:
        """How many pushed errors/delays for `api_key` the broker still holds."""
        cnt = ctypes.c_size_t(0)
        self._check(
            self.lib.rd_kafka_mock_broker_error_stack_cnt(
                self.cluster, broker, api_key, ctypes.byref(cnt)
            ),
            "reading the broker's error stack",
        )
        return int(cnt.value)

    def clear_request_errors(self, api_key: int) -> None:
        self.lib.rd_kafka_mock_clear_request_errors(self.cluster, api_key)

    def close(self) -> None:
        if self.cluster:
            self.lib.rd_kafka_mock_cluster_destroy(self.cluster)
            self.cluster = None
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None
