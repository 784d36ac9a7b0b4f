"""Every metric name hangwatch exports, the one list alerts and dashboards are checked against.

Not a test module. The sidecar part is also compared with the real exporter
(`hangwatch_sidecar.metrics.registry_for`) and the operator part with the operator's
registry (`hangwatch_operator.operator_metrics.REGISTRY`) by test_metric_names.py:
names as exposed, counters with `_total`, histograms by their base name.
"""

from __future__ import annotations

SIDECAR_METRICS = [
    "hangwatch_verdict",
    "hangwatch_verdict_since_timestamp_seconds",
    "hangwatch_verdict_changes_total",
    "hangwatch_broker_up",
    "hangwatch_broker_reachability",
    "hangwatch_broker_probe_latency_seconds",
    "hangwatch_probe_errors_total",
    "hangwatch_leaderless_partitions",
    "hangwatch_cluster_metadata_age_seconds",
    "hangwatch_producer_pending_messages",
    "hangwatch_producer_seconds_since_progress",
    "hangwatch_producer_heartbeat_age_seconds",
    "hangwatch_producer_delivered_messages_total",
    "hangwatch_producer_failed_messages_total",
    "hangwatch_producer_verdict",
    "hangwatch_time_to_error_budget_seconds",
    "hangwatch_producer_time_to_error_seconds",
    "hangwatch_producer_over_time_to_error_budget",
    "hangwatch_telemetry_problems_total",
    "hangwatch_spark_driver_up",
    "hangwatch_spark_running_tasks",
    "hangwatch_spark_task_running_seconds",
    "hangwatch_spark_straggler_tasks",
    "hangwatch_spark_producer_threads",
    "hangwatch_spark_reads_total",
    "hangwatch_spark_read_errors_total",
    "hangwatch_spark_read_duration_seconds",
    "hangwatch_socket_view_up",
    "hangwatch_socket_connections",
    "hangwatch_probe_connections_total",
    "hangwatch_probe_requests_total",
    "hangwatch_metadata_requests_total",
    "hangwatch_sidecar_rounds_total",
    "hangwatch_sidecar_round_duration_seconds",
    "hangwatch_sidecar_last_round_timestamp_seconds",
    "hangwatch_sidecar_process_virtual_memory_bytes",
    "hangwatch_sidecar_process_resident_memory_bytes",
    "hangwatch_sidecar_process_start_time_seconds",
    "hangwatch_sidecar_process_cpu_seconds_total",
    "hangwatch_sidecar_process_open_fds",
    "hangwatch_sidecar_process_max_fds",
]

OPERATOR_DECISION_METRICS = [
    "hangwatch_operator_decisions_total",
    "hangwatch_operator_suppressions_total",
    "hangwatch_operator_actions_total",
    "hangwatch_operator_watched_pods",
    "hangwatch_operator_unhealthy_pods",
    "hangwatch_operator_sidecar_unreachable_pods",
    "hangwatch_operator_unwritable_topic_pods",
    "hangwatch_operator_remediation_timestamp_seconds",
]
"""The operator's decisions, suppressions and actions, and the pods it watches by health."""

OPERATOR_METRICS = [
    *OPERATOR_DECISION_METRICS,
    "hangwatch_operator_status_poll_duration_seconds",
    "hangwatch_operator_webhook_requests_total",
    "hangwatch_operator_webhook_policies",
    "hangwatch_operator_webhook_policy_watch_up",
    "hangwatch_operator_pod_watch_up",
    "hangwatch_operator_shards_held",
    "hangwatch_operator_cordoned_nodes",
    "hangwatch_operator_poll_rounds_total",
]

OPERATOR_HISTOGRAMS = ["hangwatch_operator_status_poll_duration_seconds"]
"""Exposed as `<name>_bucket`, `<name>_sum` and `<name>_count`."""

PROMETHEUS_SYNTHETIC = ["up"]
"""Series Prometheus writes for every scrape target, not exported by anyone."""

KNOWN_METRICS = [*SIDECAR_METRICS, *OPERATOR_METRICS, *PROMETHEUS_SYNTHETIC]


def is_known(name: str) -> bool:
    """True for an exported series name, histogram sub-series included."""
    if name in KNOWN_METRICS:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name.removesuffix(suffix) in OPERATOR_HISTOGRAMS:
            return True
    return False
