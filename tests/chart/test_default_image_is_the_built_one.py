"""The chart's default image is the one `make image` builds and the operator injects.

Covers: `make image`'s default tag (Makefile `IMAGE`) equals the chart's default
operator image and sidecar image (repository + the chart's appVersion), the operator's
built-in `sidecar_image` default, and the project version is the chart's appVersion.
"""

from __future__ import annotations

import subprocess

import yaml

from hangwatch import __version__
from hangwatch_operator.settings import OperatorSettings
from tests.chart.rendering import CHART, ROOT, only, rendered


def _make_variable(name: str) -> str:
    out = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            "--eval",
            f"print-{name}: ; @echo $({name})",
            f"print-{name}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip()


def test_make_image_tag_is_the_chart_default_image() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__ == _make_variable("VERSION")
    deployment = only(rendered("default"), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    image = _make_variable("IMAGE")
    assert image == f"ghcr.io/hangwatch/hangwatch:{__version__}"
    assert container["image"] == image
    assert env["HANGWATCH_OPERATOR_SIDECAR_IMAGE"] == image
    assert OperatorSettings().sidecar_image == image
    assert container["command"] == ["hangwatch"]
