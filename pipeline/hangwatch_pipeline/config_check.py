"""`hangwatch config-check`: worst-case time-to-error of a producer configuration.

Reads settings from `--file` (a .properties file) and `-X key=value` (which override
the file), lets librdkafka validate its own properties (`rdkafka_conf`), asks the
client's model (`timeouts`) for the worst case with every broker blackholed, and
prints it: the figure first, then the formula with each term, the assumptions, the
warnings and notes. With `--record-bytes` (and `--topic-max-message-bytes`) it also warns
when a limit is certain to refuse the job's records (`record_size`). Exit 0 within the
budget (or without one), 1 over `--budget-seconds`, unbounded with a budget, or with a
record a limit refuses; 3 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from hangwatch import rdkafka_conf
from hangwatch.contracts import ExitCode
from hangwatch.errors import UsageError
from hangwatch.properties import add_properties_argument, parse_assignments
from hangwatch.time_to_error import models, record_size
from hangwatch.time_to_error.client_config import read_properties
from hangwatch.time_to_error.estimate import Estimate, seconds_text
from hangwatch_producer.secrets import redact

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
    estimate = models.worst_case(args.client, config, args.brokers, budget_seconds)
    sizes = record_size.size_findings(args.client, config, record_bytes, topic_limit)
    estimate = dataclasses.replace(estimate, findings=estimate.findings + sizes)
    if args.json:
        print(json.dumps(as_json(estimate, budget_seconds, config), indent=2))
    else:
        print(as_text(estimate, budget_seconds))
    over = budget_seconds is not None and estimate.exceeds(budget_seconds)
    return ExitCode.DEGRADED if over or sizes else ExitCode.OK
