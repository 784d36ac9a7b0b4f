"""`hangwatch demo` on a short subset: right verdicts, right actions, nothing lost.

Covers: the real command (subprocess, `--json`) replays S4 (blocked I/O thread ->
producer_hung -> the operator's decision code restarts the producer -> events flow
again) and a full outage (cluster_unreachable -> no restart, alert only), with 0
lost events in both and exit code 0; the text table names every scenario; an
unknown scenario is a one-line usage error (exit 3); no kernel rule is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys

from hangwatch_lab import netfilter


def _demo(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    with subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "demo", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def test_subset_reaches_expected_verdicts_and_actions_without_loss(kernel_faults: None) -> None:
    proc, pid = _demo("--scenario", "s4-blocked-io-thread", "--scenario", "full-outage", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["scenario"]: r for r in json.loads(proc.stdout)["scenarios"]}
    s4, outage = rows["s4-blocked-io-thread"], rows["full-outage"]
    assert s4["verdict"] == "producer_hung" and s4["action"] == "restart (producer_hung)"
    assert s4["detect_seconds"] is not None and s4["detect_seconds"] <= 6.0
    assert s4["progress_again_seconds"] is not None
    assert outage["verdict"] == "cluster_unreachable"
    assert not outage["action"].startswith("restart"), outage["action"]
    for row in rows.values():
        assert row["lost"] == 0 and row["events"] > 100 and row["ok"], row
    assert "[1/2] s4-blocked-io-thread" in proc.stderr
    assert netfilter.list_chains(pid) == [], "the demo left kernel rules behind"


def test_unknown_scenario_is_a_one_line_usage_error() -> None:
    proc, _ = _demo("--scenario", "s9-nonsense")
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and "unknown scenario" in proc.stderr
