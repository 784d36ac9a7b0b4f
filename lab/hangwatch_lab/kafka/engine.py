"""The Kafka engine's class, `KafkaLab`: every layer, started and closed as one lab."""

from __future__ import annotations

import atexit
import logging
import time

from hangwatch_lab import kafkajars, netfilter
from hangwatch_lab.kafka.classdata import sharing_options
from hangwatch_lab.kafka.faults import KafkaFaults
from hangwatch_lab.kafka.nodes import (
    find_java,
    remove_stale_data_dirs,
)

log = logging.getLogger(__name__)


class KafkaLab(KafkaFaults):
    """A running Apache Kafka cluster of `brokers` KRaft nodes with the given topics:
    combined broker+controller nodes, or broker-only nodes beside `controllers`
    controller-only ones."""

    engine = "kafka"

    def start(self) -> KafkaLab:
        """Resolve the jars if needed, format and start every node, wait until ready."""
        started = time.monotonic()
        netfilter.remove_stale_chains()
        remove_stale_data_dirs()
        self._java = find_java()
        self._lib = kafkajars.ensure_jars(self.settings.kafka_version)
        self._class_sharing = sharing_options(self._java, self._lib)
        atexit.register(self.close)
        try:
            self._start_nodes_retrying()
            self._create_topics(self.topics)
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - started
        log.info(
            "lab up",
            extra={
                "engine": "kafka",
                "version": self.settings.kafka_version,
                "bootstrap": self.bootstrap,
                "seconds": round(self.start_seconds, 1),
            },
        )
        return self

    def close(self) -> None:
        """Kill every broker JVM, remove kernel rules and the data directory; idempotent."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._blackholes.close()
            had_nodes = bool(self._all_nodes())
        for thread in list(self._election_threads.values()):
            thread.join(timeout=5)
        self._discard_nodes()
        atexit.unregister(self.close)
        if had_nodes:
            log.info("lab down", extra={"engine": "kafka", "bootstrap": self.bootstrap})
