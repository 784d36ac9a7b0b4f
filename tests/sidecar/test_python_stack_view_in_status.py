"""The Python stack view in /status and /metrics: what it sampled, or why it cannot judge.

Covered (constructed state, the real status encoder and metrics registry): a sample's
threads in /status with the ones that could be stuck first, their place, client call,
user frame and hold; the samples counter and the per-place thread gauge; switched off
(policy processView false) /status says so and what follows (silence stays
producer_silent); without a Spark view there is no stack view at all.
"""

from __future__ import annotations

import msgspec
from prometheus_client import generate_latest

from hangwatch.wire import status
from hangwatch_sidecar.metrics import registry_for
from hangwatch_sidecar.pystacks.judge import HeldThread, HeldView
from hangwatch_sidecar.pystacks.types import Place, StackView, ThreadPlace
from hangwatch_sidecar.state import SidecarState, status_document

CALLBACK = ThreadPlace(
    7, 7, "MainThread", False, Place.IN_CALLBACK, "Producer_flush", "on_delivery (job.py:3)", "t"
)
OUTSIDE = ThreadPlace(7, 8, "reader", True, Place.OUTSIDE, user_frame="parse (x.py:1)")


def _state(**kw: object) -> SidecarState:
    return SidecarState(started_ts=0.0, spark_ui="http://driver:4040", **kw)  # type: ignore[arg-type]


def test_a_sample_is_in_status_and_metrics_stuck_candidates_first() -> None:
    held = HeldView(
        StackView(10.0, (OUTSIDE, CALLBACK), processes=2),
        (HeldThread(OUTSIDE), HeldThread(CALLBACK, 12.5, 6)),
    )
    state = _state(python_stacks=True, stacks=held, stack_samples=6)
    doc = msgspec.json.decode(
        msgspec.json.encode(status_document(state)), type=status.StatusDocument
    )
    view = doc.python_stacks
    assert view is not None and view.sampled and view.available and view.processes == 2
    first = view.threads[0]
    assert (first.place, first.client_call, first.user_frame) == (
        "in_callback",
        "Producer_flush",
        "on_delivery (job.py:3)",
    )
    assert (first.held_seconds, first.samples, view.samples_total) == (12.5, 6, 6)
    text = generate_latest(registry_for(lambda: state)).decode()
    assert "hangwatch_python_stack_samples_total 6.0" in text
    assert 'hangwatch_python_threads{place="in_callback"} 1.0' in text
    assert 'hangwatch_python_threads{place="outside"} 1.0' in text


def test_switched_off_status_says_what_it_cannot_judge() -> None:
    off = status_document(_state(python_stacks=False)).python_stacks
    assert off is not None and not off.available and not off.sampled
    assert off.error is not None and off.error.startswith("off") and "producer_silent" in off.error
    assert (
        "hangwatch_python_stack_samples"
        not in generate_latest(registry_for(lambda: _state(python_stacks=False))).decode()
    )
    no_spark = SidecarState(started_ts=0.0)
    assert status_document(no_spark).python_stacks is None
