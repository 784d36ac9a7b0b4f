"""`hangwatch config-check`: worst-case time-to-error of a producer configuration.

Reads settings from `--file` (a .properties file) and `-X key=value` (which override
the file), lets librdkafka validate its own properties (`rdkafka_conf`), asks the
client's model (`timeouts`) for the worst case with every broker blackholed, and
prints it: the figure first, then the formula with each term, the assumptions, the
warnings and notes. With `--record-bytes` (and `--topic-max-message-bytes`) it also warns
when a limit is certain to refuse the job's records (`record_size`). With `--topic` it
reads each topic's replication factor, ISR and `min.insync.replicas` from the cluster at
the configuration's bootstrap list (`hangwatch probe`'s metadata client) and, for a
producer with `acks=all`, warns where writes are refused now, where one broker's
maintenance would refuse every write, and where `min.insync.replicas` exceeds the
replicas (`topic_findings`). Exit 0 within the budget (or without one), 1 over
`--budget-seconds`, unbounded with a budget, with a record a limit refuses, or with a
topic that refuses every `acks=all` write for good; 3 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import msgspec

from hangwatch import rdkafka_conf
from hangwatch.acceptance import brokers_tolerated, holds_to_min_insync
from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch.properties import add_properties_argument, parse_assignments
from hangwatch.time_to_error import models, record_size
from hangwatch.time_to_error.client_config import read_properties
from hangwatch.time_to_error.estimate import ConfigFinding, Estimate, seconds_text
from hangwatch_producer.secrets import redact
from hangwatch_sidecar.probe.acceptance import (
    TopicAcceptance,
    acceptance,
    doubt_reason,
    min_insync_text,
    refused_reason,
    to_status,
)
from hangwatch_sidecar.probe.metadata import MetadataClient
from hangwatch_sidecar.probe.settings import ProbeSettings, parse_bootstrap
from hangwatch_sidecar.probe.types import UNKNOWN_TOPIC

MAX_SIZE = 2**31 - 1
"""Sizes are Kafka int32s."""


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--client", required=True, choices=list(models.MODELS), help="the producer's client"
    )
    add_properties_argument(
        parser,
        "settings",
        "a client setting, e.g. message.timeout.ms=30000 or Net.DialTimeout=30s "
        "(repeatable; overrides --file)",
    )
    parser.add_argument(
        "--file", type=Path, metavar="PROPERTIES", help="a .properties file of client settings"
    )
    parser.add_argument(
        "--brokers",
        type=int,
        metavar="N",
        help="brokers to assume blackholed (default: entries of the bootstrap list, else 1)",
    )
    parser.add_argument(
        "--budget-seconds",
        type=float,
        metavar="N",
        help="exit 1 when the worst case exceeds N seconds (or is unbounded)",
    )
    parser.add_argument(
        "--record-bytes",
        type=int,
        metavar="N",
        help="the largest record the job writes (key + value + headers): warn when a limit "
        "is certain to refuse it",
    )
    parser.add_argument(
        "--topic-max-message-bytes",
        type=int,
        metavar="N",
        help="the topic's max.message.bytes (kafka-configs --describe), with --record-bytes",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a topic the producer writes (repeatable): read its replication factor and "
        "min.insync.replicas from the cluster at the configuration's bootstrap list and warn "
        "where acks=all writes are refused, now or as soon as one broker is down",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def load_config(file: Path | None, settings: list[str]) -> dict[str, str]:
    """Settings from the file, then `-X` ones on top."""
    config = read_properties(file) if file is not None else {}
    config.update(parse_assignments(settings, strip_values=True))
    return config


def _budget(value: float | None) -> float | None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"--budget-seconds must be a positive number, got {value}")
    return value


def _json_seconds(seconds: float) -> float | None:
    return None if math.isinf(seconds) else round(seconds, 6)


def as_json(
    estimate: Estimate, budget_seconds: float | None, config: dict[str, str]
) -> dict[str, Any]:
    """The estimate as a JSON document (unbounded seconds are null); secrets redacted."""
    return {
        "client": estimate.client,
        "brokers": estimate.brokers,
        "worst_case_seconds": _json_seconds(estimate.total_seconds),
        "unbounded": estimate.unbounded,
        "formula": estimate.formula,
        "terms": [
            {
                "name": t.name,
                "seconds": _json_seconds(t.seconds),
                "formula": t.formula,
                "values": t.values,
                "keys": list(t.keys),
            }
            for t in estimate.terms
        ],
        "assumptions": list(estimate.assumptions),
        "warnings": [{"code": f.code, "message": f.message} for f in estimate.findings],
        "notes": list(estimate.notes),
        "budget_seconds": budget_seconds,
        "within_budget": None if budget_seconds is None else not estimate.exceeds(budget_seconds),
        "config": redact(config),
    }


def _budget_line(estimate: Estimate, budget_seconds: float) -> str:
    total = seconds_text(estimate.total_seconds)
    if estimate.exceeds(budget_seconds):
        return f"budget {seconds_text(budget_seconds)}: OVER (worst case {total})"
    return f"budget {seconds_text(budget_seconds)}: within (worst case {total})"


def as_text(estimate: Estimate, budget_seconds: float | None) -> str:
    """Worst case first, then formula and terms, assumptions, warnings, notes, budget."""
    plural = "" if estimate.brokers == 1 else "s"
    lines = [
        f"worst case until a send reports an error: {seconds_text(estimate.total_seconds)} "
        f"({estimate.client}, {estimate.brokers} broker{plural} blackholed)",
        f"formula: {estimate.formula}",
        "terms:",
    ]
    width = max(len(t.name) for t in estimate.terms)
    lines += [
        f"  {seconds_text(t.seconds):>12}  {t.name:<{width}}  {t.formula} = {t.values}"
        for t in estimate.terms
    ]
    lines += ["assumptions:", *(f"  - {a}" for a in estimate.assumptions)]
    if estimate.findings:
        lines += ["warnings:", *(f"  {f.code}: {f.message}" for f in estimate.findings)]
    if estimate.notes:
        lines += ["notes:", *(f"  - {n}" for n in estimate.notes)]
    if budget_seconds is not None:
        lines.append(_budget_line(estimate, budget_seconds))
    return "\n".join(lines)


CONNECTION_PREFIXES = ("security.protocol", "sasl.", "ssl.")
"""The librdkafka properties of a configuration that say how to connect (the rest are the
producer's own): what `--topic`'s metadata client takes from a librdkafka configuration."""
FOR_GOOD = "min-insync-above-replicas"
"""The topic finding certain to refuse every `acks=all` write (exit 1, as a refused record)."""


def topic_findings(acks: int, topics: list[TopicAcceptance]) -> tuple[ConfigFinding, ...]:
    """What the topics' acceptance means for a producer with `acks` (pure): nothing for
    `acks` 0 or 1 (the ISR does not hold them); for `acks=all`, per topic, partitions
    refused now, `min.insync.replicas` above the replicas (refused for good), no replica
    to spare (one broker's maintenance refuses every write), or the value unknown."""
    if not holds_to_min_insync(acks):
        return ()
    found = []
    for topic in topics:
        known, factor = topic.min_insync, topic.replication_factor
        if known is None or known.value is None:
            why = known.problem if known is not None else "not described"
            found.append(
                ConfigFinding(
                    "min-insync-unknown",
                    f"topic {topic.topic}: min.insync.replicas cannot be read ({why}): whether "
                    "one broker down refuses its acks=all writes is not known",
                )
            )
            if topic.in_doubt:
                found.append(ConfigFinding("partitions-in-doubt", doubt_reason(topic, {})))
            continue
        if known.value > factor:
            found.append(
                ConfigFinding(
                    FOR_GOOD,
                    f"topic {topic.topic}: {min_insync_text(known)} is above its replication "
                    f"factor {factor}: every acks=all write is refused (NOT_ENOUGH_REPLICAS) "
                    "until one of them changes",
                )
            )
        elif brokers_tolerated(factor, known.value) == 0:
            found.append(
                ConfigFinding(
                    "no-replica-to-spare",
                    f"topic {topic.topic}: {min_insync_text(known)} equals its replication "
                    f"factor {factor}: while any one broker holding its replicas is down (its "
                    "maintenance, a rolling upgrade) every acks=all write to those partitions "
                    "is refused (NOT_ENOUGH_REPLICAS, retried until the producer's own "
                    "timeout; the sidecar says partitions_unwritable, an alert); "
                    f"min.insync.replicas {factor - 1} keeps writing through one broker down",
                )
            )
        if topic.refused and known.value <= factor:
            found.append(ConfigFinding("partitions-unwritable", refused_reason(topic, {})))
    return tuple(found)


def read_topics(
    client: str, config: dict[str, str], topics: list[str], timeout_ms: int = 5000
) -> tuple[list[TopicAcceptance], tuple[ConfigFinding, ...]]:
    """The topics' acceptance as the cluster at the configuration's bootstrap list says
    it (metadata and DescribeConfigs, each bounded by `timeout_ms`), and findings for
    what could not be read. A librdkafka configuration's connection properties are used;
    a java or sarama one must connect in plaintext (its security settings are another
    client's: `hangwatch probe --topic` takes librdkafka's)."""
    model = models.MODELS[client]
    listed = model.canonical(config).get(model.BOOTSTRAP_KEY, "")
    if not listed.strip():
        raise UsageError(f"--topic needs the producer's {model.BOOTSTRAP_KEY} (the cluster to ask)")
    connection = {k: v for k, v in config.items() if k.startswith(CONNECTION_PREFIXES)}
    if client != "librdkafka" and _secured(client, model.canonical(config)):
        raise UsageError(
            f"--topic reads the cluster in plaintext for a {client} configuration, which "
            f"sets a secured connection: run hangwatch probe --topic TOPIC with -X "
            "librdkafka security properties instead"
        )
    settings = ProbeSettings(
        connect_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
        client_config=connection if client == "librdkafka" else {},
        client_id="hangwatch-config-check",
    )
    with MetadataClient(parse_bootstrap(listed), settings) as metadata:
        fetched = metadata.fetch(topics)
        min_insync = metadata.describe_min_insync(topics) if fetched.metadata else {}
    if fetched.metadata is None:
        why = fetched.error or str(fetched.failure)
        return [], (ConfigFinding("topics-unread", f"the cluster's metadata did not come: {why}"),)
    missing = [
        ConfigFinding("topic-missing", f"topic {t.name} does not exist")
        for t in fetched.metadata.topics
        if t.error == UNKNOWN_TOPIC
    ]
    partitions = {t.name: t.partitions for t in fetched.metadata.topics if not t.error}
    return acceptance(partitions, min_insync, topics), tuple(missing)


def _secured(client: str, config: dict[str, str]) -> bool:
    if client == "sarama":
        return any(
            config.get(k, "").strip().lower() == "true"
            for k in ("Net.TLS.Enable", "Net.SASL.Enable")
        )
    return config.get("security.protocol", "PLAINTEXT").strip().upper() != "PLAINTEXT"


def _size(name: str, value: int | None) -> int | None:
    if value is not None and not 0 < value <= MAX_SIZE:
        raise UsageError(f"{name} must be between 1 and {MAX_SIZE}, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    budget_seconds = _budget(args.budget_seconds)
    record_bytes = _size("--record-bytes", args.record_bytes)
    topic_limit = _size("--topic-max-message-bytes", args.topic_max_message_bytes)
    if topic_limit is not None and record_bytes is None:
        raise UsageError("--topic-max-message-bytes needs --record-bytes (the records' size)")
    config = load_config(args.file, args.settings)
    if args.client == "librdkafka":
        rdkafka_conf.validate(config)
    if any(not t.strip() for t in args.topic):
        raise UsageError("--topic must name a topic")
    estimate = models.worst_case(args.client, config, args.brokers, budget_seconds)
    sizes = record_size.size_findings(args.client, config, record_bytes, topic_limit)
    topics: list[TopicAcceptance] = []
    unread: tuple[ConfigFinding, ...] = ()
    if args.topic:
        topics, unread = read_topics(args.client, config, list(dict.fromkeys(args.topic)))
    accepted = topic_findings(models.MODELS[args.client].acks(config), topics)
    estimate = dataclasses.replace(estimate, findings=estimate.findings + sizes + unread + accepted)
    if args.json:
        document = as_json(estimate, budget_seconds, config)
        document["topics"] = [msgspec.to_builtins(to_status(t, {})) for t in topics]
        print(json.dumps(document, indent=2))
    else:
        print(as_text(estimate, budget_seconds))
    over = budget_seconds is not None and estimate.exceeds(budget_seconds)
    refused = any(f.code == FOR_GOOD for f in accepted)
    return ExitCode.DEGRADED if over or sizes or refused else ExitCode.OK
