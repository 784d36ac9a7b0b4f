"""Generates the chart's Grafana dashboard with Grafana's own Foundation SDK.

Writes `charts/hangwatch/files/dashboards/hangwatch.json`, which the chart globs into
a ConfigMap for Grafana's dashboard sidecar. The JSON is committed; a chart test
regenerates it and fails when the two differ, so edit this file, then run

    python scripts/generate_dashboard.py          # rewrite the JSON
    python scripts/generate_dashboard.py --check  # exit 1 if the JSON is out of date

Panels follow the data flow: sidecar verdicts (by application and node), brokers as
seen from the pods, producers, metadata, then the operator's remediation. Every query
goes through the `${datasource}` variable; sidecar queries filter on the namespace,
application and node variables. docs/chart.md describes each panel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import prometheus as prometheus_models
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

from hangwatch.verdicts import VERDICTS

OUTPUT = Path(__file__).resolve().parents[1] / "charts/hangwatch/files/dashboards/hangwatch.json"
UID = "hangwatch-overview"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SIDECAR = 'namespace=~"$namespace", application=~"$application", node=~"$node"'
"""Label filter of every sidecar query (the dashboard's variables)."""


def pods(metric: str, match: str = "") -> str:
    """A sidecar series selector filtered by the dashboard variables."""
    return f"{metric}{{{match + ', ' if match else ''}{SIDECAR}}}"


def agg(op: str, by: str, inner: str) -> str:
    """`op by (by) (inner)`, e.g. agg("max", "broker", ...)."""
    return f"{op} by ({by}) ({inner})"


def rate(selector: str) -> str:
    """Per-second rate over Grafana's rate interval."""
    return f"rate({selector}[$__rate_interval])"


def increase(selector: str) -> str:
    """Increase over Grafana's rate interval."""
    return f"increase({selector}[$__rate_interval])"


def query(expr: str, legend: str = "__auto", ref: str = "A") -> prometheus.Dataquery:
    """A range query through the datasource variable."""
    return (
        prometheus.Dataquery()
        .expr(expr)
        .legend_format(legend)
        .ref_id(ref)
        .range()
        .datasource(DATASOURCE)
    )


def per_application(op: str, metric: str, match: str = "") -> list[prometheus.Dataquery]:
    """One query: `metric` (with `match`) aggregated by `op` per application."""
    return [query(agg(op, "application", pods(metric, match)), "{{application}}")]


def series(
    title: str,
    description: str,
    targets: list[prometheus.Dataquery],
    unit: str = "short",
    stacked: bool = False,
) -> timeseries.Panel:
    """A time series panel with a table legend (last and max values)."""
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .fill_opacity(10)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["lastNotNull", "max"])
        )
        .height(8)
        .span(12)
    )
    if stacked:
        panel = panel.stacking(
            common_builders.StackingConfig().mode(common.StackingMode.NORMAL)
        ).fill_opacity(60)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def verdict_rows(builder: dash.Dashboard) -> dash.Dashboard:
    """Row 1: what the sidecars conclude, by application and node."""
    unhealthy = f'hangwatch_verdict{{verdict!="healthy", {SIDECAR}}}'
    return (
        builder.with_row(dash.Row("Verdicts"))
        .with_panel(
            stat.Panel()
            .title("Pods by verdict (now)")
            .description("Executors whose sidecar currently reports each verdict.")
            .datasource(DATASOURCE)
            .with_target(query(f"sum by (verdict) (hangwatch_verdict{{{SIDECAR}}})", "{{verdict}}"))
            .graph_mode(common.BigValueGraphMode.AREA)
            .color_mode(common.BigValueColorMode.VALUE)
            .height(6)
            .span(24)
        )
        .with_panel(
            series(
                "Unhealthy executors by application",
                "Executors whose verdict is not healthy, per Spark application and verdict.",
                [
                    query(
                        agg("sum", "application, verdict", unhealthy),
                        "{{application}} {{verdict}}",
                    )
                ],
                stacked=True,
            )
        )
        .with_panel(
            series(
                "Unhealthy executors by node",
                "The same, per node: one node standing out points at the node's network "
                "(the operator's node_network_fault).",
                [query(agg("sum", "node, verdict", unhealthy), "{{node}} {{verdict}}")],
                stacked=True,
            )
        )
        .with_panel(
            table.Panel()
            .title("Executors not healthy now")
            .description(
                "One row per executor with a verdict other than healthy, and for how long."
            )
            .datasource(DATASOURCE)
            .with_target(
                prometheus.Dataquery()
                .expr(
                    f"(time() - hangwatch_verdict_since_timestamp_seconds{{{SIDECAR}}})"
                    f" * on (namespace, pod) group_left (verdict) ({unhealthy} == 1)"
                )
                .instant()
                .format(prometheus_models.PromQueryFormat.TABLE)
                .ref_id("A")
                .datasource(DATASOURCE)
            )
            .unit("s")
            .height(8)
            .span(24)
        )
    )


def broker_rows(builder: dash.Dashboard) -> dash.Dashboard:
    """Row 2: the Kafka brokers as the executors' pods see them."""
    return (
        builder.with_row(dash.Row("Brokers as seen from the pods"))
        .with_panel(
            series(
                "Pods that cannot use each broker",
                "Pods whose probe of a broker ends in a class other than ok. timeout and "
                "unresponsive mean blackholed (silent stalls); refused means the port is "
                "closed.",
                [
                    query(
                        agg(
                            "sum",
                            "broker, class",
                            pods("hangwatch_broker_reachability", 'class!="ok"'),
                        ),
                        "{{broker}} {{class}}",
                    )
                ],
                stacked=True,
            )
        )
        .with_panel(
            series(
                "Broker probe latency",
                "Connect plus ApiVersions round trip per broker: the slowest pod and the "
                "median pod.",
                [
                    query(
                        agg("max", "broker", pods("hangwatch_broker_probe_latency_seconds")),
                        "{{broker}} max",
                    ),
                    query(
                        "quantile by (broker) (0.5, "
                        + pods("hangwatch_broker_probe_latency_seconds")
                        + ")",
                        "{{broker}} median",
                        "B",
                    ),
                ],
                unit="s",
            )
        )
        .with_panel(
            series(
                "Probe errors by class",
                "Failed broker probes per second across the selected pods.",
                [
                    query(
                        agg("sum", "class", rate(pods("hangwatch_probe_errors_total"))),
                        "{{class}}",
                    )
                ],
                unit="ops",
            )
        )
        .with_panel(
            series(
                "Leaderless partitions",
                "Partitions without a leader, worst pod per application. Elections last "
                "seconds; a plateau means a stuck election.",
                per_application("max", "hangwatch_leaderless_partitions"),
            )
        )
    )


def producer_rows(builder: dash.Dashboard) -> dash.Dashboard:
    """Rows 3 and 4: the producers' progress and queue, metadata freshness, and the
    producers per verdict for each verdict declared with a panel (`hangwatch.verdicts`)."""
    builder = (
        builder.with_row(dash.Row("Producers"))
        .with_panel(
            series(
                "Pending messages",
                "Messages queued or in flight, per application. Growing with no deliveries "
                "is a hang.",
                per_application("sum", "hangwatch_producer_pending_messages"),
            )
        )
        .with_panel(
            series(
                "Delivered and failed messages",
                "Acknowledged and failed messages per second, per application.",
                [
                    query(
                        agg(
                            "sum",
                            "application",
                            rate(pods("hangwatch_producer_delivered_messages_total")),
                        ),
                        "{{application}} delivered",
                    ),
                    query(
                        agg(
                            "sum",
                            "application",
                            rate(pods("hangwatch_producer_failed_messages_total")),
                        ),
                        "{{application}} failed",
                        "B",
                    ),
                ],
                unit="ops",
            )
        )
        .with_panel(
            series(
                "Seconds since delivery progress",
                "Worst producer per application: time since its delivered count last grew.",
                per_application("max", "hangwatch_producer_seconds_since_progress"),
                unit="s",
            )
        )
        .with_panel(
            series(
                "Producer heartbeat age",
                "Worst producer per application: time since its telemetry last changed. "
                "A stuck I/O thread stops the heartbeat.",
                per_application("max", "hangwatch_producer_heartbeat_age_seconds"),
                unit="s",
            )
        )
        .with_row(dash.Row("Metadata"))
        .with_panel(
            series(
                "Cluster metadata age",
                "Age of each sidecar's last successful metadata fetch, worst pod per application.",
                per_application("max", "hangwatch_cluster_metadata_age_seconds"),
                unit="s",
            )
        )
    )
    for parts in VERDICTS:  # the verdicts declared with a panel of their own
        if parts.panel is not None:
            builder = builder.with_panel(
                series(
                    parts.panel.title,
                    parts.panel.description,
                    per_application(
                        "sum", "hangwatch_producer_verdict", f'verdict="{parts.verdict}"'
                    ),
                )
            )
    return builder


def operator_rows(builder: dash.Dashboard) -> dash.Dashboard:
    """Row 5: what the operator decided and did, and what it held back."""
    return (
        builder.with_row(dash.Row("Remediation"))
        .with_panel(
            series(
                "Decisions by action and outcome",
                "Operator decisions per interval: acted, dry_run, suppressed or failed.",
                [
                    query(
                        agg(
                            "sum", "action, outcome", increase("hangwatch_operator_decisions_total")
                        ),
                        "{{action}} {{outcome}}",
                    )
                ],
                stacked=True,
            )
        )
        .with_panel(
            series(
                "Suppressions by reason",
                "Actions held back by a safety limit (storm, rate_limit, cooldown, "
                "max_cordoned, max_concurrent) or by the situation (cluster_unreachable, "
                "leader_election).",
                [
                    query(
                        agg("sum", "reason", increase("hangwatch_operator_suppressions_total")),
                        "{{reason}}",
                    )
                ],
                stacked=True,
            )
        )
        .with_panel(
            series(
                "Actions in the last hour",
                "Remediations per policy and action over a sliding hour (the alert "
                "HangwatchRemediationRateHigh fires above 10).",
                [
                    query(
                        "sum by (policy, action) (increase(hangwatch_operator_actions_total[1h]))",
                        "{{policy}} {{action}}",
                    )
                ],
            )
        )
        .with_panel(
            series(
                "Watched, unhealthy and unreachable pods",
                "The operator's view per policy (max over replicas), and cordoned nodes.",
                [
                    query("sum(max by (policy) (hangwatch_operator_watched_pods))", "watched"),
                    query(
                        "sum(max by (policy, verdict) (hangwatch_operator_unhealthy_pods))",
                        "unhealthy",
                        "B",
                    ),
                    query(
                        "sum(max by (policy) (hangwatch_operator_sidecar_unreachable_pods))",
                        "sidecar unreachable",
                        "C",
                    ),
                    query("max(hangwatch_operator_cordoned_nodes)", "cordoned nodes", "D"),
                ],
            )
        )
        .with_panel(
            series(
                "Webhook requests by result",
                "Admission requests per second: injected, skipped, error (admitted without "
                "a sidecar).",
                [
                    query(
                        agg("sum", "result", rate("hangwatch_operator_webhook_requests_total")),
                        "{{result}}",
                    )
                ],
                unit="reqps",
            )
        )
        .with_panel(
            series(
                "Sidecar and operator loop health",
                "Slowest sidecar evaluation round, p95 of the operator's /status polls, and "
                "sidecars Prometheus cannot scrape.",
                [
                    query(
                        f"max(hangwatch_sidecar_round_duration_seconds{{{SIDECAR}}})",
                        "slowest sidecar round",
                    ),
                    query(
                        "histogram_quantile(0.95, sum by (le) "
                        f"({rate('hangwatch_operator_status_poll_duration_seconds_bucket')}))",
                        "operator poll p95",
                        "B",
                    ),
                    query(
                        'count(up{job="hangwatch-sidecar"} == 0) or vector(0)',
                        "sidecars down",
                        "C",
                    ),
                ],
                unit="s",
            )
        )
    )


def variable(name: str, label: str, expr: str) -> dash.QueryVariable:
    """A multi-value label variable, All by default, refreshed with the time range."""
    return (
        dash.QueryVariable(name)
        .label(label)
        .query(expr)
        .datasource(DATASOURCE)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(VariableOption(selected=True, text="All", value="$__all"))
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
    )


def build() -> dict[str, Any]:
    """The dashboard as a JSON-ready dict."""
    builder = (
        dash.Dashboard("hangwatch: Kafka producer health")
        .uid(UID)
        .description(
            "Silently hung Kafka producers in Spark executors: verdicts, brokers as seen "
            "from the pods, producer progress, metadata, and the operator's remediation."
        )
        .tags(["hangwatch", "kafka", "spark"])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .with_variable(
            dash.DatasourceVariable("datasource").label("Data source").type("prometheus")
        )
        .with_variable(
            variable("namespace", "Namespace", "label_values(hangwatch_verdict, namespace)")
        )
        .with_variable(
            variable(
                "application",
                "Application",
                'label_values(hangwatch_verdict{namespace=~"$namespace"}, application)',
            )
        )
        .with_variable(
            variable(
                "node",
                "Node",
                'label_values(hangwatch_verdict{namespace=~"$namespace", '
                'application=~"$application"}, node)',
            )
        )
    )
    for add in (verdict_rows, broker_rows, producer_rows, operator_rows):
        builder = add(builder)
    encoded = json.dumps(builder.build(), cls=JSONEncoder, sort_keys=True)
    result: dict[str, Any] = json.loads(encoded)
    # Stable, unique panel ids in layout order (the builders leave them unset).
    for number, panel in enumerate(result["panels"], start=1):
        panel["id"] = number
    return result


def render() -> str:
    """The file content: indented, sorted keys, trailing newline (stable diffs)."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
