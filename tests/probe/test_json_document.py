"""`hangwatch probe --json` prints one documented JSON document and nothing else.

Covers (real CLI against the real lab, one broker stopped):
- stdout is exactly one JSON document; stderr stays empty although librdkafka sees a
  refused broker (its log lines are kept off stderr);
- a stopped broker is no longer advertised: its bootstrap entry is dead and the
  partition it still leads is `leader_unreachable`;
- `status` and `exit_code` agree with the process exit code (degraded, 1);
- every endpoint carries its reachability, per-stage latencies and broker id;
- cluster metadata lists brokers and per-partition leader, replicas and ISR;
- every field of the document is described in docs/probe.md;
- the healthy document says `healthy` with exit 0 and no findings; the text summary
  puts what is wrong before the endpoint table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hangwatch.contracts import ExitCode
from hangwatch_lab import Lab

from .helpers import FAST_FLAGS, run_cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "probe.md"


def _keys(value: Any) -> set[str]:
    """Every field name in a document (client_config holds property names, not fields)."""
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    if not isinstance(value, dict):
        return set()
    return set(value) | set().union(*(_keys(v) for k, v in value.items() if k != "client_config"))


def test_degraded_document(lab: Lab) -> None:
    for partition, leader in enumerate((1, 2, 3)):
        lab.move_leader("t", partition, leader)
    lab.down(2)

    proc = run_cli("--bootstrap", lab.bootstrap, "--topic", "t", "--json", *FAST_FLAGS)

    assert proc.stderr == ""
    assert proc.returncode == ExitCode.DEGRADED
    document = json.loads(proc.stdout)
    assert document["schema"] == "hangwatch.probe/v1"
    assert (document["status"], document["exit_code"]) == ("degraded", 1)
    assert document["bootstrap"] == lab.bootstrap.split(",")
    assert document["topics"] == ["t"]
    assert document["settings"]["connect_timeout_ms"] == 800
    stopped = document["endpoints"][1]
    assert stopped["endpoint"] == f"127.0.0.1:{lab.brokers[2].port}"
    assert stopped["reachability"] == "refused"
    assert stopped["api_versions_ms"] is None
    assert isinstance(stopped["connect_ms"], float)
    first = document["endpoints"][0]
    assert (first["broker_id"], first["reachability"], first["in_bootstrap"]) == (1, "ok", True)
    assert isinstance(first["api_versions_ms"], float)
    assert [f["code"] for f in document["findings"]] == [
        "dead_bootstrap_entry",
        "leader_unreachable",
    ]
    assert (
        "partition 1 led by broker 2, which the cluster does not advertise"
        in (document["findings"][1]["message"])
    )
    cluster = document["metadata"]["cluster"]
    assert [b["id"] for b in cluster["brokers"]] == [1, 3]
    partitions = cluster["topics"][0]["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1, 2]
    assert all(p["leader"] in p["replicas"] for p in partitions)


def test_every_field_is_documented(lab: Lab) -> None:
    lab.down(1)
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN"]
    sasl += ["-X", "sasl.username=u", "-X", "sasl.password=p"]
    degraded = json.loads(run_cli("-b", lab.bootstrap, "--json", *FAST_FLAGS).stdout)
    rejected = json.loads(run_cli("-b", lab.bootstrap, "--json", *sasl, *FAST_FLAGS).stdout)
    assert rejected["metadata"]["client_errors"]

    documented = set(re.findall(r"`([a-z_]+)`", DOCS.read_text(encoding="utf-8")))
    keys = _keys(degraded) | _keys(rejected)
    assert {"partitions", "isr", "client_errors", "reachability"} <= keys
    assert keys <= documented


def test_healthy_document_and_text(lab: Lab) -> None:
    proc = run_cli("--bootstrap", lab.bootstrap, "--json", *FAST_FLAGS)
    document = json.loads(proc.stdout)

    assert proc.returncode == ExitCode.OK
    assert (document["status"], document["exit_code"], document["findings"]) == ("healthy", 0, [])

    lab.down(3)
    text = run_cli("--bootstrap", lab.bootstrap, *FAST_FLAGS)
    assert text.returncode == ExitCode.DEGRADED
    assert text.stderr == ""
    lines = text.stdout.splitlines()
    assert lines[0].startswith("hangwatch probe: DEGRADED (exit 1)")
    assert lines.index("What is wrong:") < lines.index("Endpoints:")
    assert "dead_bootstrap_entry" in text.stdout
