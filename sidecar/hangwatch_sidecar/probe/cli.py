"""`hangwatch probe`: probe brokers and cluster metadata once, print what is wrong, exit.

Registered by the `hangwatch` dispatcher (`hangwatch.cli`). Thin: it turns flags into a
bootstrap list, topics and `ProbeSettings`, calls `endpoints.probe_cluster`, judges the
result with `report.assess` and prints `output`'s text or JSON. Exit code 0
healthy, 1 degraded, 2 unavailable; invalid input raises `UsageError` (exit 3).
"""

from __future__ import annotations

import argparse
import json
import sys

from hangwatch import rdkafka_conf
from hangwatch.properties import add_properties_argument, parse_assignments
from hangwatch_sidecar.probe.endpoints import probe_cluster
from hangwatch_sidecar.probe.output import render_text, to_document
from hangwatch_sidecar.probe.report import assess
from hangwatch_sidecar.probe.settings import ProbeSettings, parse_bootstrap

_DEFAULTS = ProbeSettings()


def register(parser: argparse.ArgumentParser) -> None:
    """Add the `probe` arguments."""
    parser.epilog = "exit codes: 0 healthy, 1 degraded, 2 unavailable, 3 invalid input"
    parser.add_argument(
        "-b",
        "--bootstrap",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="bootstrap servers as the producer has them (every entry is probed)",
    )
    parser.add_argument(
        "-t",
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="topic to check (repeatable); default: every topic",
    )
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    for flag, default, budget in (
        (
            "--connect-timeout-ms",
            _DEFAULTS.connect_timeout_ms,
            "DNS + TCP connect budget per endpoint",
        ),
        (
            "--request-timeout-ms",
            _DEFAULTS.request_timeout_ms,
            "TLS handshake + ApiVersions budget, and metadata fetch",
        ),
    ):
        parser.add_argument(
            flag, type=int, default=default, metavar="N", help=f"{budget} (default %(default)s)"
        )
    add_properties_argument(
        parser,
        "properties",
        "librdkafka property for the metadata client, e.g. security.protocol=SASL_SSL "
        "(repeatable; secret values are never printed)",
        metavar="PROPERTY=VALUE",
    )


def run(args: argparse.Namespace) -> int:
    """Probe once, print the summary (or JSON) on stdout, return the exit code."""
    client_config = parse_assignments(args.properties)
    rdkafka_conf.validate(client_config)  # librdkafka's own verdict, as `sidecar` does
    settings = ProbeSettings(
        connect_timeout_ms=args.connect_timeout_ms,
        request_timeout_ms=args.request_timeout_ms,
        client_config=client_config,
    )
    result = probe_cluster(parse_bootstrap(args.bootstrap), args.topic, settings)
    assessment = assess(result)
    if args.json:
        json.dump(to_document(result, assessment), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, assessment))
    return assessment.exit_code
