"""`hangwatch operator`: the command, its overrides and its one-line errors.

Covers: the command is listed by `hangwatch --help`; bad `HANGWATCH_OPERATOR_*`
settings and a missing kubeconfig end in one line on stderr and exit code 3, never a
traceback; `--dry-run` turns a policy that may act into one that only reports (a
hung executor gets a HangwatchDryRun Event and stays); `--metrics-port` moves
/metrics; the injection webhook (served by the same process) counts admissions in
`hangwatch_operator_webhook_requests_total` by result (a malformed review too, and is
answered allowed); SIGTERM stops it cleanly.
"""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path
from typing import Any

from hangwatch.contracts import Verdict
from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import run_hangwatch
from hangwatch_testing.remediation_cluster import (
    FAST,
    PODS,
    POLICIES,
    FakeSidecar,
    RemediationCluster,
    running_hangwatch_operator,
    scrape,
    stored_policy,
    watched_executor,
)
from hangwatch_testing.spark_pods import admission_review, executor_pod
from tests.operator.webhook_server import post_json


def _hangwatch(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HANGWATCH_OPERATOR_")}
    return run_hangwatch(*args, timeout=60, env={**clean, **env})


def test_the_command_is_listed() -> None:
    assert "run the operator against a cluster" in _hangwatch("--help").stdout


def test_bad_settings_are_one_line_and_exit_3(tmp_path: Path) -> None:
    result = _hangwatch(
        "operator", "--standalone", HANGWATCH_OPERATOR_STATUS_TIMEOUT_SECONDS="soon"
    )
    assert result.returncode == 3
    assert result.stderr.strip() == (
        "hangwatch operator: error: invalid operator settings: "
        "HANGWATCH_OPERATOR_STATUS_TIMEOUT_SECONDS: could not convert string to float: 'soon'"
    )
    bad_port = _hangwatch("operator", "--metrics-port", "70000")
    assert bad_port.returncode == 3 and "metrics_port must be 0..65535" in bad_port.stderr
    nowhere = _hangwatch("operator", "--standalone", KUBECONFIG=str(tmp_path / "missing"))
    assert nowhere.returncode == 3 and len(nowhere.stderr.strip().splitlines()) == 1
    assert "no Kubernetes credentials" in nowhere.stderr and "Traceback" not in nowhere.stderr


def test_dry_run_override_metrics_port_and_webhook_counting(tmp_path: Path) -> None:
    ca, cert, key = generate_webhook_certificates(["localhost"]).write(tmp_path / "tls")
    webhook_port, metrics_port = free_port(), free_port()
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": webhook_port,
        "webhook_cert_file": cert,
        "webhook_key_file": key,
        "metrics_listen_address": "127.0.0.1",
        "metrics_port": free_port(),  # overridden by --metrics-port below
    }
    sidecars = [FakeSidecar().start() for _ in range(3)]
    try:
        sidecars[0].set(Verdict.PRODUCER_HUNG)
        with RemediationCluster() as cluster:
            policy = stored_policy("jobs", "writers", **FAST)
            pods = [watched_executor(policy, i, s.port) for i, s in enumerate(sidecars, start=1)]
            for pod in pods:
                cluster.create(PODS, "jobs", pod)
            cluster.create(POLICIES, "jobs", policy)
            args = ("--dry-run", "--metrics-port", str(metrics_port))
            with running_hangwatch_operator(cluster, tmp_path, settings, *args) as operator:
                event = operator.wait_for(
                    "a dry-run Event", lambda: cluster.events("jobs", "HangwatchDryRun")
                )[0]
                assert event["involvedObject"]["name"] == pods[0]["metadata"]["name"]
                assert cluster.get(PODS, "jobs", pods[0]["metadata"]["name"]) is not None
                context = ssl.create_default_context(cafile=str(ca))
                url = f"https://localhost:{webhook_port}/inject-sidecar"

                def review(namespace: str) -> dict[str, Any]:
                    pod = executor_pod(9, namespace=namespace)
                    answer: dict[str, Any] = post_json(
                        url, admission_review(pod, namespace), context
                    )
                    return answer["response"]

                operator.wait_for("an injection", lambda: "patch" in review("jobs"))
                assert "patch" not in review("other")  # no policy there
                malformed = post_json(url, {"kind": "AdmissionReview", "request": None}, context)
                assert malformed["response"] == {
                    "uid": "",
                    "allowed": True,
                    "warnings": [
                        "hangwatch: sidecar not injected: malformed request "
                        "(apiVersion is not admission.k8s.io/v1 or v1beta1)"
                    ],
                }
                metrics = scrape(metrics_port)
                counted = {
                    dict(labels)["result"]: value
                    for (name, labels), value in metrics.items()
                    if name == "hangwatch_operator_webhook_requests_total"
                }
                assert counted["injected"] == 1 and counted["skipped"] >= 1
                assert counted["malformed"] == 1 and counted["error"] == 0
                operator.process.terminate()
                assert operator.process.wait(30) == 0
                assert "Traceback" not in operator.log()
    finally:
        for sidecar in sidecars:
            sidecar.close()
