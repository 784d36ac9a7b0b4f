"""The sidecar's reference (docs/sidecar.md) names every setting and every metric.

Covers: each `SidecarSettings` field appears as its flag and its environment variable;
each metric family the real exporter produces (except process metrics) is listed.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from prometheus_client import generate_latest

from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.settings import SidecarSettings
from hangwatch_sidecar.state import SidecarState

DOC = (Path(__file__).resolve().parents[2] / "docs" / "sidecar.md").read_text()


def test_every_setting_is_documented() -> None:
    for f in fields(SidecarSettings):
        if f.name == "kafka":
            continue
        assert f"`--{f.name.replace('_', '-')}`" in DOC
        assert f"`HANGWATCH_{f.name.upper()}`" in DOC


def test_every_metric_is_documented() -> None:
    text = generate_latest(registry_for(lambda: SidecarState(started_ts=0))).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")}
    missing = [n for n in names if "process_" not in n and f"`{n}`" not in DOC]
    assert missing == []
