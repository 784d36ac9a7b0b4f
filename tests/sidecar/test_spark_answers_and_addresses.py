"""The driver's REST answers and the driver's address are checked before anything uses them.

Covers: the answers Spark 4.3 really sends (shapes recorded from a local-cluster driver)
parse to typed values (stage counts, the median of finished tasks in seconds, this
executor's counts, the one application); every other JSON value (hypothesis) is a
value or one `AnswerError`, never another exception, never a bool/negative/absurd
count or a NaN duration; the driver URL Spark gives executors
(`spark://CoarseGrainedScheduler@host:port`, IPv6 too), an explicit UI URL and
`off` resolve to the UI's address or a one-line `AddressError` for any text
(hypothesis); the sidecar's settings resolve the UI from the variables the webhook
sets; `-Dspark.ui.port=N` options are read as Spark passes them.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch.spark_driver import (
    AddressError,
    DriverUi,
    driver_host,
    parse_ui_url,
    resolve_ui,
    ui_port_from_java_opt,
)
from hangwatch_sidecar.settings import add_arguments, from_args
from hangwatch_sidecar.spark import answers
from hangwatch_sidecar.spark.types import ExecutorCounts

STAGE = {
    "status": "ACTIVE", "stageId": 1, "attemptId": 0, "numTasks": 8, "numActiveTasks": 2,
    "numCompleteTasks": 6, "numFailedTasks": 1, "numKilledTasks": 0, "name": "collect at x.py:1",
}  # fmt: skip
SUMMARY = {"quantiles": [0.5], "duration": [723.0], "executorRunTime": [337.0]}
EXECUTORS = [
    {"id": "driver", "activeTasks": 0, "failedTasks": 0, "completedTasks": 0},
    {"id": "0", "activeTasks": 2, "failedTasks": 1, "completedTasks": 2, "isActive": True},
]
APPS = [{"id": "app-20261123011420-0000", "name": "explore2", "attempts": []}]


def test_the_answers_spark_sends() -> None:
    peers = answers.stage_peers(STAGE)
    assert (peers.stage_id, peers.attempt, peers.complete, peers.failed) == (1, 0, 6, 1)
    assert answers.median_duration_seconds(SUMMARY) == pytest.approx(0.723)
    assert answers.executor_counts(EXECUTORS, "0") == ExecutorCounts(2, 1, 2)
    assert answers.application_ids(APPS) == ["app-20261123011420-0000"]


@pytest.mark.parametrize(
    ("call", "doc"),
    [
        (answers.stage_peers, {**STAGE, "numFailedTasks": -1}),
        (answers.stage_peers, {**STAGE, "numFailedTasks": True}),
        (answers.stage_peers, {**STAGE, "numTasks": 2**60}),
        (answers.stage_peers, {**STAGE, "numTasks": 3.0}),
        (answers.stage_peers, [STAGE]),
        (answers.median_duration_seconds, {"duration": [float("inf")]}),
        (answers.median_duration_seconds, {"duration": [-5.0]}),
        (answers.median_duration_seconds, {"duration": [1.0, 2.0]}),
        (answers.median_duration_seconds, {"duration": "723"}),
        (lambda d: answers.executor_counts(d, "7"), EXECUTORS),
        (lambda d: answers.executor_counts(d, "0"), [{"id": "0", "activeTasks": "2"}]),
        (answers.application_ids, [{"id": ""}]),
        (answers.application_ids, {"id": "app"}),
    ],
)
def test_wrong_answers_are_refused_in_one_line(call: Any, doc: Any) -> None:
    with pytest.raises(answers.AnswerError) as err:
        call(doc)
    assert "\n" not in str(err.value) and str(err.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=8)
    ),
    max_leaves=30,
)
NEAR_STAGE = st.fixed_dictionaries({k: JSON | st.just(v) for k, v in STAGE.items()})


@settings(max_examples=300)
@given(JSON | NEAR_STAGE | st.lists(NEAR_STAGE, max_size=2))
def test_any_json_is_a_value_or_one_answer_error(doc: Any) -> None:
    for call in (
        answers.stage_peers,
        answers.median_duration_seconds,
        answers.application_ids,
        lambda d: answers.executor_counts(d, "0"),
    ):
        try:
            value = call(doc)
        except answers.AnswerError:
            continue
        for number in vars(value).values() if hasattr(value, "__dict__") else ():
            assert number is None or (not isinstance(number, bool) and number >= 0)


def test_driver_url_as_spark_sets_it() -> None:
    url = "spark://CoarseGrainedScheduler@orders-8d3c-driver-svc.spark-jobs.svc:7078"
    assert driver_host(url) == "orders-8d3c-driver-svc.spark-jobs.svc"
    assert driver_host("spark://CoarseGrainedScheduler@[fd00::12]:7078") == "fd00::12"
    assert resolve_ui("", url, 4040) == DriverUi(
        "http", "orders-8d3c-driver-svc.spark-jobs.svc", 4040
    )
    assert resolve_ui("", "spark://CoarseGrainedScheduler@[fd00::12]:7078", 4041).url == (
        "http://[fd00::12]:4041"
    )


def test_explicit_ui_url_off_and_unconfigured() -> None:
    assert parse_ui_url("https://driver.example:4440/") == DriverUi("https", "driver.example", 4440)
    assert parse_ui_url("http://10.0.0.5").port == 80
    assert resolve_ui("http://10.0.0.5:4040", "garbage", 1) == DriverUi("http", "10.0.0.5", 4040)
    assert resolve_ui("off", "spark://x@h:1", 4040) is None
    assert resolve_ui("", "", 4040) is None


@pytest.mark.parametrize(
    "text",
    [
        "http://h:4040/api/v1", "ftp://h:1", "http://h:0", "http://h:99999", "http://:4040",
        "http://user:pw@h:1", "h:4040", "http://h h:1", "http://h:1?x=1",
    ],
)  # fmt: skip
def test_unusable_ui_urls(text: str) -> None:
    with pytest.raises(AddressError):
        parse_ui_url(text)


@settings(max_examples=300)
@given(st.text(max_size=60), st.text(max_size=60), st.integers(-5, 70000))
def test_any_address_text_resolves_or_is_one_address_error(
    ui_url: str, driver_url: str, port: int
) -> None:
    try:
        ui = resolve_ui(ui_url, driver_url, port)
    except AddressError as exc:
        assert "\n" not in str(exc)
        return
    if ui is not None:
        assert 0 < ui.port < 65536 and ui.scheme in ("http", "https") and ui.host
        assert "/" not in ui.host and "@" not in ui.host


def test_sidecar_settings_resolve_the_ui_from_the_webhooks_variables() -> None:
    env = {
        "HANGWATCH_BOOTSTRAP": "k:9092",
        "HANGWATCH_SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@d-svc.ns.svc:7078",
        "HANGWATCH_SPARK_UI_PORT": "4050",
        "HANGWATCH_EXECUTOR_ID": "12",
        "HANGWATCH_APPLICATION_ID": "spark-5b1f0c2ad83e4f06a7c29e1d4b3f8a60",
    }
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = from_args(parser.parse_args([]), env)
    assert settings.spark_ui == DriverUi("http", "d-svc.ns.svc", 4050)
    assert (settings.executor_id, settings.spark_interval_seconds) == ("12", 15.0)
    off = from_args(parser.parse_args(["--spark-ui-url", "off"]), env)
    assert off.spark_ui is None
    assert from_args(parser.parse_args([]), {"HANGWATCH_BOOTSTRAP": "k:1"}).spark_ui is None


def test_ui_port_from_spark_java_opts() -> None:
    assert ui_port_from_java_opt("-Dspark.ui.port=4050") == 4050
    for other in ("-Dspark.ui.port=0", "-Dspark.ui.port=70000", "-Dspark.driver.port=7078", ""):
        assert ui_port_from_java_opt(other) is None
