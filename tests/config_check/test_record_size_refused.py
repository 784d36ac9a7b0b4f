"""`config-check` warns, before a job runs, when its records are certain to be refused
(issue 29): larger than the producer's own limit, or than the topic's max.message.bytes.

Covers: each client's own limit and default (librdkafka message.max.bytes 1000000,
Java max.request.size 1048576 with Spark's `kafka.` prefix, sarama
Producer.MaxMessageBytes 1000000), the record framed in its batch (61 + 21 bytes);
the topic's limit (the lab's 200 bytes against 1 KiB records, the issue's case) named
with the verdict the sidecar gives (writes_rejected); a record that fits warns nothing;
compression noted; through the CLI: exit 1 with the warning's code, one-line errors
(exit 3) for a size out of range or a topic limit without a record size.
"""

from __future__ import annotations

import pytest

from hangwatch.time_to_error.estimate import Code
from hangwatch.time_to_error.record_size import BATCH_OVERHEAD, RECORD_OVERHEAD, size_findings

from .helpers import run_cli


@pytest.mark.parametrize(
    ("client", "config", "limit"),
    [
        ("librdkafka", {}, 1_000_000),
        ("librdkafka", {"message.max.bytes": "5000"}, 5000),
        ("java", {"kafka.max.request.size": "5000"}, 5000),
        ("java", {}, 1_048_576),
        ("sarama", {"Producer.MaxMessageBytes": "5000"}, 5000),
    ],
)
def test_a_record_above_the_producers_own_limit_is_named(
    client: str, config: dict[str, str], limit: int
) -> None:
    fits = limit - BATCH_OVERHEAD - RECORD_OVERHEAD
    assert size_findings(client, config, fits, None) == ()
    (finding,) = size_findings(client, config, fits + 1, None)
    assert finding.code == Code.RECORD_ABOVE_PRODUCER_LIMIT
    assert f"={limit}" in finding.message and f"{fits + 1}-byte record" in finding.message


def test_a_record_above_the_topics_limit_is_named_with_the_verdict() -> None:
    (finding,) = size_findings("librdkafka", {}, 1024, 200)
    assert finding.code == Code.RECORD_ABOVE_TOPIC_LIMIT
    assert "max.message.bytes=200" in finding.message and "writes_rejected" in finding.message
    assert size_findings("java", {}, 100, 200) == ()
    (compressed,) = size_findings("java", {"kafka.compression.type": "zstd"}, 1024, 200)
    assert "before compression" in compressed.message


def test_the_cli_exits_1_naming_the_refusal_and_refuses_bad_sizes_in_one_line() -> None:
    done = run_cli("--client", "librdkafka", "--record-bytes", "1024",
                   "--topic-max-message-bytes", "200")  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "record-above-topic-limit: a 1024-byte record is 1106 bytes" in done.stdout
    assert run_cli("--client", "java", "--record-bytes", "100").returncode == 0
    for bad in (["--record-bytes", "0"], ["--topic-max-message-bytes", "200"]):
        refused = run_cli("--client", "java", *bad)
        assert refused.returncode == 3 and refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
