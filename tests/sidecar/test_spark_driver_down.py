"""With the Spark driver unreachable, a real sidecar says so and goes on judging from the rest.

Covers, with real `hangwatch sidecar` processes probing the lab: a driver UI port
where nothing listens (UI disabled) and one that accepts connections and never
answers (a wedged or blackholed driver; 3 s read deadline): `/status` says the Spark
view is unavailable and why (`refused`, `timeout`), `hangwatch_spark_driver_up` is 0
and `hangwatch_spark_read_errors_total` counts the reason, the verdict stays
`unknown` naming the driver, and rounds go on while driver reads wait out their
deadline (more rounds complete than reads time out: a round never waits for the
driver); the brokers are still judged (one blackholed -> `broker_degraded`).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from hangwatch_lab import Lab
from hangwatch_testing.ports import free_port
from hangwatch_testing.waiting import wait_for

from .sidecar_process import SidecarProcess, sidecar_process


@pytest.fixture(scope="module")
def spark_lab() -> Iterator[Lab]:
    with Lab(brokers=3, topics={"events": 3}) as lab:
        yield lab


def _unavailable(sidecar: SidecarProcess, kind: str) -> dict[str, object]:
    def seen() -> dict[str, object] | None:
        spark = sidecar.status()["spark"]
        errors = spark["reads"]["errors"] if spark else {}
        return spark if spark and not spark["available"] and errors.get(kind) else None

    return wait_for(
        seen, 60, f"the Spark view to be unavailable ({kind})", context=sidecar.log_text
    )


def _rounds_and_timeouts(sidecar: SidecarProcess) -> tuple[int, int]:
    status = sidecar.status()
    spark = status["spark"] or {}
    timeouts = int(spark.get("reads", {}).get("errors", {}).get("timeout", 0))
    return int(status["sidecar"]["rounds"]), timeouts


def _rounds_while_reads_time_out(sidecar: SidecarProcess, reads: int) -> int:
    """Rounds the sidecar completed while `reads` more driver reads timed out."""
    first_rounds, first_timeouts = _rounds_and_timeouts(sidecar)
    wait_for(
        lambda: _rounds_and_timeouts(sidecar)[1] >= first_timeouts + reads,
        60, f"{reads} more driver reads to time out", context=sidecar.log_text,
    )  # fmt: skip
    return _rounds_and_timeouts(sidecar)[0] - first_rounds


def test_ui_disabled_is_refused_said_and_counted(spark_lab: Lab, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    spark_args = ("--spark-ui-url", url, "--executor-id", "1", "--spark-interval-seconds", "1")
    with sidecar_process(tmp_path, spark_lab.bootstrap, *spark_args) as sidecar:
        spark = _unavailable(sidecar, "refused")
        assert "spark.ui.enabled=false" in str(spark["error"])
        assert sidecar.metric("hangwatch_spark_driver_up") == 0.0
        assert (sidecar.metric('hangwatch_spark_read_errors_total{reason="refused"}') or 0) >= 1
        status = sidecar.status()
        assert status["latest"]["verdict"] == "unknown"
        assert "Spark view unavailable: connection to" in status["latest"]["reasons"][0]


def test_wedged_driver_never_delays_a_round(spark_lab: Lab, tmp_path: Path) -> None:
    with socket.socket() as wedged:  # accepts (kernel backlog), never answers
        wedged.bind(("127.0.0.1", 0))
        wedged.listen(64)
        url = f"http://127.0.0.1:{wedged.getsockname()[1]}"
        spark_args = ("--spark-ui-url", url, "--executor-id", "1", "--spark-interval-seconds", "1")
        with sidecar_process(
            tmp_path, spark_lab.bootstrap, *spark_args, "--spark-timeout-ms", "3000"
        ) as sidecar:
            spark = _unavailable(sidecar, "timeout")
            assert "within 3 s" in str(spark["error"])
            # a round that waited for the driver would hold at most one read: with reads
            # done in rounds, N timed-out reads would span at most N + 1 rounds
            rounds = _rounds_while_reads_time_out(sidecar, 2)
            assert rounds > 2 + 1, f"{rounds} rounds while 2 driver reads timed out"
            spark_lab.blackhole(2)
            try:
                wait_for(
                    lambda: sidecar.status()["latest"]["verdict"] == "broker_degraded",
                    60, "broker_degraded with the driver wedged", context=sidecar.log_text,
                )  # fmt: skip
            finally:
                spark_lab.restore()
