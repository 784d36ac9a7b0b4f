"""What the Python stack view means for the verdict: held waits and findings (pure).

`StackTracker` remembers, across samples, since when each thread has been in the same
place inside a Kafka client (same thread, same client call, same user frame); a thread
seen elsewhere starts again. `judge_stacks` turns the newest held sample into evidence
for the verdict engine's ladder (docs/evidence-ladder.md):

- stuck (positive evidence, `producer_hung`): a thread inside user code the client
  called (a delivery callback) for the heartbeat threshold - the client serves nothing
  on that thread meanwhile (S4); or a thread in such a callback or inside the client's
  `flush` in two samples in a row while every connection of the pod has been silent for
  the stall threshold (nothing is sent while it is there);
- working (clears silence): while the pod is silent, no sampled thread is in a callback
  or in `flush` - the task computes or waits on something else, and a poll loop idling
  inside `poll` is what a producer with nothing to send does;
- nothing: a thread seen in a callback or `flush` once decides neither way.

With some broker failing, a stuck thread is not judged a producer fault (corroborating).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hangwatch.contracts import Verdict
from hangwatch_sidecar.pystacks.types import Place, StackView, ThreadPlace


@dataclass(frozen=True)
class HeldThread:
    """A thread's place and how long (and in how many samples) it has been there."""

    place: ThreadPlace
    held_seconds: float = 0.0
    samples: int = 1


@dataclass(frozen=True)
class HeldView:
    """A stack sample with each thread's hold."""

    view: StackView
    threads: tuple[HeldThread, ...] = ()


class StackTracker:
    """Since when each thread has been in the same place inside a client."""

    def __init__(self) -> None:
        self._first: dict[tuple[int, int, str, str], tuple[float, int]] = {}

    def observe(self, view: StackView) -> HeldView:
        if not view.available:
            return HeldView(view)
        first: dict[tuple[int, int, str, str], tuple[float, int]] = {}
        held = []
        for t in view.threads:
            at, count = self._first.get(t.key, (view.at, 0))
            if t.place is not Place.OUTSIDE:
                first[t.key] = (at, count + 1)
            held.append(HeldThread(t, max(0.0, view.at - at), count + 1))
        self._first = first
        return HeldView(view, tuple(held))


@dataclass(frozen=True)
class StackFinding:
    """One conclusion; `verdict` None: corroborating (or clearing) evidence only."""

    verdict: Verdict | None
    reason: str
    threads: tuple[str, ...] = ()
    clears_silence: bool = False


def _names(threads: Iterable[HeldThread]) -> tuple[str, ...]:
    return tuple(f"{h.place.name} (pid {h.place.pid})" for h in threads)


def judge_stacks(
    held: HeldView | None,
    *,
    heartbeat_seconds: float,
    stall_seconds: float,
    silent_seconds: float | None,
    cluster_healthy: bool,
) -> tuple[StackFinding, ...]:
    """Findings from the newest sample (none when there is none or it failed)."""
    if held is None or not held.view.available:
        return ()
    silent = silent_seconds is not None and silent_seconds >= stall_seconds
    found: list[StackFinding] = []
    for h in held.threads:
        t = h.place
        if t.place is Place.IN_CALLBACK and h.held_seconds >= heartbeat_seconds:
            reason = (
                f"python stacks: {t.describe()} for {h.held_seconds:.0f} s (threshold "
                f"{heartbeat_seconds:.0f} s): the client serves nothing on that thread meanwhile"
            )
        elif t.could_be_stuck and h.samples >= 2 and silent:
            reason = (
                f"python stacks: {t.describe()} in {h.samples} samples over "
                f"{h.held_seconds:.0f} s while every connection of the pod to brokers has been "
                f"silent for {silent_seconds:.0f} s: it waits for work nothing is doing"
            )
        else:
            continue
        if cluster_healthy:
            found.append(StackFinding(Verdict.PRODUCER_HUNG, reason, _names([h])))
        else:
            found.append(StackFinding(None, reason + ", while some brokers fail", _names([h])))
    if not found and silent and held.threads and not held.view.could_be_stuck():
        busy = sorted(
            held.threads, key=lambda h: (h.place.place is not Place.OUTSIDE, not h.place.active)
        )[0]
        found.append(
            StackFinding(
                None,
                f"python stacks: no thread of the executor's {held.view.processes} Python "
                f"process(es) is in a Kafka client's callback or flush; {busy.place.describe()}: "
                "the task is busy elsewhere, its producer has nothing to send",
                _names([busy]),
                clears_silence=True,
            )
        )
    return tuple(found)
