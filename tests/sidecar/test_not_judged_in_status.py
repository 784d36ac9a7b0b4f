"""What the pod's Pod Security level left out reaches /status, and the operator reads it.

Covered (the real settings parser, status encoder and the operator's /status reader):
`HANGWATCH_NOT_JUDGED` (the webhook's `pod_security.NOT_JUDGED_ENV`) becomes the
sidecar's `--not-judged` setting and /status `not_judged`, each feature with the
evidence the pod lacks; unknown entries (a newer operator) are skipped; without it
the list is empty; the operator's `parse_status` keeps the known features, and the
policy's status counts the pods per feature.
"""

from __future__ import annotations

import argparse
import json

from hangwatch import pod_security
from hangwatch.pod_security import NOT_JUDGED_ENV, Feature
from hangwatch.wire import status
from hangwatch_operator.correlation import correlate
from hangwatch_operator.sidecar_status import PodReport, parse_status
from hangwatch_operator.watched import watched_pod
from hangwatch_sidecar.settings import add_arguments, from_args
from hangwatch_sidecar.state import SidecarState, not_judged, status_document
from hangwatch_testing.spark_pods import executor_pod


def _settings(environ: dict[str, str]) -> str:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_args(parser.parse_args(["--bootstrap", "k:9092"]), environ=environ).not_judged


def test_the_webhooks_variable_reaches_status() -> None:
    setting = _settings({NOT_JUDGED_ENV: "process_view,from-a-newer-operator"})
    state = SidecarState(started_ts=0.0, evaluated_ts=5.0, not_judged=not_judged(setting))
    doc = json.loads(status.encode(status_document(state)))
    assert doc["not_judged"] == {"process_view": pod_security.LOST[Feature.PROCESS_VIEW]}
    report = parse_status(status.encode(status_document(state)), now=6.0, stale_after_seconds=60)
    assert report.not_judged == (Feature.PROCESS_VIEW,)


def test_nothing_left_out_is_an_empty_list() -> None:
    state = SidecarState(started_ts=0.0, evaluated_ts=5.0, not_judged=not_judged(_settings({})))
    assert json.loads(status.encode(status_document(state)))["not_judged"] == {}


def test_the_policy_counts_the_pods_concerned() -> None:
    left = SidecarState(started_ts=0.0, evaluated_ts=5.0, not_judged=not_judged("process_view"))
    full = SidecarState(started_ts=0.0, evaluated_ts=5.0)
    reports = []
    for index, state in enumerate((left, left, full)):
        body = executor_pod(index + 1)
        pod = watched_pod(body, 9477)
        doc = status.encode(status_document(state))
        reports.append(PodReport(pod, parse_status(doc, now=6.0, stale_after_seconds=60)))
    assert correlate(reports).not_judged() == {Feature.PROCESS_VIEW: 2}
