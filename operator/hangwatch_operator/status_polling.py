"""Pull `/status` from every watched pod's sidecar, concurrently, each with a timeout.

Fed by `remediation` with the pods a policy watches; feeds `correlation` with one
`PodReport` per pod. Sidecars hold no Kubernetes credentials, so the operator comes
to them: plain HTTP on the pod IP and the port named `hangwatch`. A sidecar that
does not answer in time, refuses, answers with an error or with a document the
operator cannot use yields a report with `error` set and no verdict: it is shown as
`sidecar_unreachable`, never read as a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import aiohttp

from hangwatch.wire import sidecar_http
from hangwatch.wire.status import READ_LIMIT_BYTES
from hangwatch_operator.sidecar_status import PodReport, StatusFormatError, parse_status
from hangwatch_operator.watched import WatchedPod

MAX_STATUS_BYTES = READ_LIMIT_BYTES
"""A /status larger than 1 MiB is not a sidecar's: refuse it rather than buffer it."""


def status_url(pod: WatchedPod) -> str:
    return sidecar_http.status_url(pod.ip or "", pod.port or sidecar_http.PORT)


async def poll_sidecars(
    session: aiohttp.ClientSession,
    pods: Sequence[WatchedPod],
    *,
    timeout_seconds: float,
    concurrency: int,
    stale_after_seconds: float,
) -> list[PodReport]:
    """One report per pod, in the order given; never raises for a single sidecar."""
    gate = asyncio.Semaphore(concurrency)

    async def one(pod: WatchedPod) -> PodReport:
        async with gate:
            return await poll_sidecar(session, pod, timeout_seconds, stale_after_seconds)

    return list(await asyncio.gather(*(one(pod) for pod in pods)))


async def poll_sidecar(
    session: aiohttp.ClientSession,
    pod: WatchedPod,
    timeout_seconds: float,
    stale_after_seconds: float,
) -> PodReport:
    """The report of one pod's sidecar."""
    if not pod.pollable:
        return PodReport(pod, error="pod has no IP or sidecar port yet")
    timeout = aiohttp.ClientTimeout(total=timeout_seconds)
    try:
        async with session.get(status_url(pod), timeout=timeout) as response:
            if response.status != 200:
                return PodReport(pod, error=f"HTTP {response.status} from /status")
            body = await response.content.read(MAX_STATUS_BYTES + 1)
    except TimeoutError:
        return PodReport(pod, error=f"no answer within {timeout_seconds:g} s")
    except aiohttp.ClientConnectorError as exc:
        return PodReport(pod, error=f"cannot connect: {exc.os_error.strerror or exc}")
    except aiohttp.ClientError as exc:
        return PodReport(pod, error=f"HTTP error: {exc}")
    if len(body) > MAX_STATUS_BYTES:
        return PodReport(pod, error="/status larger than 1 MiB")
    try:
        report = parse_status(body, now=time.time(), stale_after_seconds=stale_after_seconds)
    except StatusFormatError as exc:
        return PodReport(pod, error=f"unusable /status: {exc}")
    return PodReport(pod, status=report)
