"""What the operator benchmark's stages share: progress lines on stderr, waiting on an
operator process, and an operator serving its webhook and metrics on loopback."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hangwatch_operator.certificates import generate_webhook_certificates
from hangwatch_testing.emulated_cluster import OperatorRun
from hangwatch_testing.remediation_cluster import (
    RemediationCluster,
    running_hangwatch_operator,
    scrape,
)
from hangwatch_testing.waiting import wait_for

WAIT_SECONDS = 120.0
PODS_PER_SIDECAR = 100
"""Executor pods served by one real sidecar status server in the fleet stages."""


def progress(text: str) -> None:
    """Overwrite the progress line on stderr with `text`."""
    print(f"\r  {text}".ljust(78), end="", file=sys.stderr, flush=True)


def done(text: str) -> None:
    """Overwrite the progress line with `text` and end it."""
    print(f"\r  {text}".ljust(78), file=sys.stderr, flush=True)


def wait_until(what: str, predicate: Callable[[], Any], operator: OperatorRun) -> Any:
    """`predicate`'s first truthy value, polled every 5 ms (the figures' resolution)."""
    return wait_for(
        predicate,
        WAIT_SECONDS,
        f"the operator to get to: {what}",
        interval=0.005,
        give_up=lambda: operator.process.poll() is not None,
        context=lambda: operator.log()[-3000:],
    )


def webhook_settings(workdir: Path, port: int) -> tuple[Path, dict[str, Any]]:
    """A certificate for localhost (its CA returned) and the operator's webhook settings."""
    ca, cert, key = generate_webhook_certificates(["localhost"]).write(workdir / "tls")
    settings = {
        "webhook_listen_address": "127.0.0.1",
        "webhook_port": port,
        "webhook_cert_file": cert,
        "webhook_key_file": key,
        "metrics_port": 0,
    }
    return ca, settings


@contextmanager
def operator_on(
    cluster: RemediationCluster, workdir: Path, webhook_port: int, metrics_port: int
) -> Iterator[tuple[OperatorRun, Path]]:
    """`hangwatch operator` against `cluster`, its webhook and metrics on loopback at the
    given ports; yields the run and the webhook's CA."""
    ca, settings = webhook_settings(workdir, webhook_port)
    settings |= {"metrics_listen_address": "127.0.0.1", "metrics_port": metrics_port}
    with running_hangwatch_operator(cluster, workdir, settings) as operator:
        yield operator, ca


def metrics_up(port: int) -> bool:
    """Whether an operator's metrics answer on `port`."""
    try:
        scrape(port)
    except OSError:
        return False
    return True
