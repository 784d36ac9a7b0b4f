"""Where an executor's Spark driver is, from what the executor pod knows (pure).

Spark on Kubernetes gives every executor container `SPARK_DRIVER_URL`
(`spark://CoarseGrainedScheduler@<driver-svc>.<namespace>.svc:7078`): the driver's
RPC address. The driver's UI, which serves the REST API under `/api/v1`, listens on
the same host at `spark.ui.port` (default 4040; the driver's headless Service names
that port too). A `spark.ui.port` the user set reaches executors as a
`SPARK_JAVA_OPT_<n>=-Dspark.ui.port=<port>` variable (Spark passes every
`spark.*.port` setting to executors at start-up). The injection webhook copies both
into the sidecar (`HANGWATCH_SPARK_DRIVER_URL`, `HANGWATCH_SPARK_UI_PORT`); the
sidecar resolves the UI's address with `resolve_ui`, where an explicit
`--spark-ui-url` wins. One module for both sides, so the names cannot drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_UI_PORT = 4040
"""Spark's default `spark.ui.port`."""
DISABLED = "off"
"""`--spark-ui-url off`: no Spark view even when the driver's address is known."""

EXECUTOR_DRIVER_URL_ENV = "SPARK_DRIVER_URL"
"""Set by Spark in every executor container (BasicExecutorFeatureStep)."""
EXECUTOR_JAVA_OPT_PREFIX = "SPARK_JAVA_OPT_"
"""Spark's executor start-up options, one per variable (`SPARK_JAVA_OPT_0`, ...)."""
SIDECAR_DRIVER_URL_ENV = "HANGWATCH_SPARK_DRIVER_URL"
"""The sidecar's `--spark-driver-url` setting."""
SIDECAR_UI_PORT_ENV = "HANGWATCH_SPARK_UI_PORT"
"""The sidecar's `--spark-ui-port` setting."""

_HOST = r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*)"
_DRIVER_URL = re.compile(rf"^spark://[A-Za-z0-9_.-]+@{_HOST}:(?P<port>\d{{1,5}})/?$")
_UI_URL = re.compile(rf"^(?P<scheme>https?)://{_HOST}(?::(?P<port>\d{{1,5}}))?/?$")
_UI_PORT_OPT = re.compile(r"^-Dspark\.ui\.port=(\d{1,5})$")


class AddressError(ValueError):
    """A driver or UI address that cannot be used (one line, names what is wrong)."""


@dataclass(frozen=True)
class DriverUi:
    """The driver UI's address."""

    scheme: str
    host: str
    """Host name or IP (an IPv6 address without brackets)."""
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _port(text: str | None, default: int) -> int:
    port = default if text is None else int(text)
    if not 0 < port < 65536:
        raise AddressError(f"port must be 1..65535, got {port}")
    return port


def driver_host(driver_url: str) -> str:
    """The host of a `spark://<endpoint>@host:port` URL; AddressError if it is not one."""
    match = _DRIVER_URL.match(driver_url.strip())
    if not match:
        raise AddressError(
            "driver URL must look like spark://CoarseGrainedScheduler@host:port "
            "(the executor's SPARK_DRIVER_URL)"
        )
    _port(match["port"], 0)
    return match["host"].strip("[]")


def parse_ui_url(ui_url: str) -> DriverUi:
    """An explicit UI base URL (`http://host:4040`); AddressError if unusable."""
    match = _UI_URL.match(ui_url.strip())
    if not match:
        raise AddressError("UI URL must be the UI's base, like http://host:4040 (no path)")
    scheme = match["scheme"]
    return DriverUi(
        scheme, match["host"].strip("[]"), _port(match["port"], 443 if scheme == "https" else 80)
    )


def resolve_ui(ui_url: str, driver_url: str, ui_port: int) -> DriverUi | None:
    """The UI to read: the explicit URL, else the driver URL's host at `ui_port`; None when
    the Spark view is off or nothing says where the driver is."""
    explicit = ui_url.strip()
    if explicit.lower() == DISABLED:
        return None
    if explicit:
        return parse_ui_url(explicit)
    if not driver_url.strip():
        return None
    host = driver_host(driver_url)
    return DriverUi("http", host, _port(str(ui_port), 0))


def ui_port_from_java_opt(value: str) -> int | None:
    """The port of a `-Dspark.ui.port=<port>` option, if `value` is one; 0 (a random port)
    and out-of-range values count as unknown."""
    match = _UI_PORT_OPT.match(value.strip())
    if not match or not 0 < int(match[1]) < 65536:
        return None
    return int(match[1])
