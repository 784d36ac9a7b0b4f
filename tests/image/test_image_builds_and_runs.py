"""The repository's Dockerfile builds with `make image` and the image runs for real.

Public image registries are unreachable here, so the base is made locally: a Debian
bookworm root filesystem with Debian's Python 3.11 (debootstrap), imported with buildah;
`make image` builds image/Dockerfile on it with buildah (`BASE_IMAGE` build argument;
the build stage installs the wheel and its dependencies from PyPI), saved as a docker
archive cached by content (`hangwatch_testing.containers.hangwatch_image_archive`, which
scripts/setup.sh --kube runs ahead and the node tier imports: one build per content), and
podman runs the result with runc, a read-only root filesystem and the host network.
Covered:

- `hangwatch --version` prints the project's version; `hangwatch operator --help`
  works (the operator extra is installed); the OCI labels carry version, source and
  licence; the configured user is numeric and non-root;
- `hangwatch sidecar` in the container answers /healthz and reports every broker of a
  lab cluster on loopback as `ok` in /status, as uid 65532, with the telemetry
  directory mounted as the chart's emptyDir would be;
- the image size is reported (and stays under a budget).
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch import __version__
from hangwatch_lab import Lab
from hangwatch_testing.containers import (
    LIMITS,
    ContainerTools,
    hangwatch_image_archive,
    require_tools,
)
from hangwatch_testing.ports import free_port

pytestmark = [pytest.mark.xdist_group("image"), pytest.mark.timeout(1500)]
"""One image per content; building it from scratch (debootstrap, PyPI) takes minutes."""

NON_ROOT_UID = 65532
SIZE_BUDGET_BYTES = 450 * 1024 * 1024


@pytest.fixture(scope="module")
def built() -> Iterator[tuple[ContainerTools, str]]:
    """`make image` on the bookworm base (`hangwatch_image_archive`: built unless this
    content's archive is cached, as setup builds it ahead; the node tier imports the same
    archive), loaded into a private podman store."""
    require_tools()
    tools = ContainerTools.create()
    try:
        started = time.monotonic()
        image, archive = hangwatch_image_archive()
        print(f"make image (or its cached archive): {time.monotonic() - started:.0f} s")
        tools.podman("load", "--quiet", "--input", str(archive), timeout=600)
        yield tools, image
    finally:
        tools.close()


def _inspect(tools: ContainerTools, image: str) -> dict[str, object]:
    found = json.loads(tools.podman("image", "inspect", image).stdout)
    assert isinstance(found, list) and len(found) == 1
    return dict(found[0])


def test_version_operator_labels_and_user(built: tuple[ContainerTools, str]) -> None:
    tools, image = built
    version = tools.podman("run", "--rm", "--read-only", *LIMITS, image, "--version")
    assert version.stdout.strip() == f"hangwatch {__version__}"
    help_text = tools.podman("run", "--rm", "--read-only", *LIMITS, image, "operator", "--help")
    assert help_text.stdout.startswith("usage: hangwatch operator")
    config = _inspect(tools, image)["Config"]
    assert isinstance(config, dict)
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert config["User"] == f"{NON_ROOT_UID}:{NON_ROOT_UID}"
    assert config["Entrypoint"] == ["hangwatch"]


def test_image_size_is_reported_and_within_budget(built: tuple[ContainerTools, str]) -> None:
    tools, image = built
    size = int(str(_inspect(tools, image)["Size"]))
    print(f"image size: {size / 1e6:.0f} MB ({size} bytes) on a debootstrap bookworm base")
    assert 0 < size < SIZE_BUDGET_BYTES


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as response:
        return int(response.status), bytes(response.read())


def test_sidecar_in_the_container_reports_lab_brokers_ok(
    built: tuple[ContainerTools, str], tmp_path: Path
) -> None:
    tools, image = built
    port = free_port()
    telemetry = tmp_path / "telemetry"
    telemetry.mkdir(mode=0o777)
    telemetry.chmod(0o777)  # an emptyDir is writable by the pod's user
    name = f"hangwatch-sidecar-{uuid.uuid4().hex[:8]}"
    with Lab(brokers=3, topics={"t": 3}) as lab:
        tools.podman(
            *("run", "--detach", "--name", name, "--read-only", "--network", "host", *LIMITS),
            *("--volume", f"{telemetry}:/var/run/hangwatch/telemetry"),
            image,
            *("sidecar", "--bootstrap", lab.bootstrap, "--topics", "t", "--port", str(port)),
            *("--probe-interval-seconds", "1", "--telemetry-dir", "/var/run/hangwatch/telemetry"),
        )
        try:
            status = _wait_for_ok_brokers(port, expected=3)
            pid = tools.podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
            uids = next(
                line.split()[1:]
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("Uid:")
            )
            assert set(uids) == {str(NON_ROOT_UID)}, uids
        finally:
            logs = tools.podman("logs", name).stderr
            tools.podman("rm", "--force", "--time", "2", name)
    assert {b["reachability"] for b in status["brokers"]} == {"ok"}, status["brokers"]
    first = json.loads(logs.splitlines()[0])
    assert first["component"] == "sidecar", first


def _wait_for_ok_brokers(port: int, expected: int) -> dict[str, object]:
    deadline = time.monotonic() + 60
    last: object = None
    while time.monotonic() < deadline:
        try:
            code, _ = _get(f"http://127.0.0.1:{port}/healthz")
            if code == 200:
                _, body = _get(f"http://127.0.0.1:{port}/status")
                status = json.loads(body)
                brokers = status.get("brokers") or []
                last = brokers
                if len(brokers) >= expected and all(b["reachability"] == "ok" for b in brokers):
                    return dict(status)
        except OSError as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"the sidecar in the container did not report {expected} ok brokers: {last}")
