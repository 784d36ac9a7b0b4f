"""The Python stack view's data and its classification of threads (pure).

Input is py-spy's `dump --native --json` document for one process: a list of threads,
each a list of frames innermost first. A frame with a `module` is native (a shared
object: librdkafka, confluent-kafka's C extension, libc); one without is a Python frame.
The document comes from reading another container's memory, so it is untrusted:
`parse_dump` decodes it with bounded msgspec types and any malformed document is one
`StackDumpError` (one line), never a traceback.

`classify` says where a thread is relative to the Kafka client it may be using:

- `in_callback`: the client called back into Python (a delivery callback, a logger, an
  error callback) and that Python code is still running or blocked: while it is there the
  client serves nothing on this thread (S4: a delivery callback that blocks inside
  `poll()`/`flush()`);
- `in_client`: the thread waits inside a client call (`flush`, `poll`, `produce` on a
  full queue) with no user code above it. Only a wait in `flush` waits for deliveries
  (`waits_for_deliveries`); a thread in `poll` with nothing to serve is a poll loop
  idling by design (hangwatch's wrapper and many applications run one);
- `outside`: the thread is not inside the client: the task computes, reads its input,
  sleeps - the client has nothing to do because the task is busy elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import msgspec

MAX_DUMP_BYTES = 4 * 1024 * 1024
"""Largest py-spy document read for one process (a worker with many deep threads is
far below it)."""
MAX_THREADS = 256
MAX_FRAMES = 512
_Text = Annotated[str, msgspec.Meta(max_length=4096)]


class StackDumpError(ValueError):
    """The stack document could not be used (one line)."""


class PyFrame(msgspec.Struct, frozen=True):
    """One frame as py-spy reports it (only the fields the view uses)."""

    name: _Text
    filename: _Text = ""
    line: int = 0
    module: _Text | None = None

    @property
    def native(self) -> bool:
        return self.module is not None

    @property
    def label(self) -> str:
        where = self.filename.rsplit("/", 1)[-1]
        return f"{self.name} ({where}:{self.line})" if not self.native else f"{self.name} ({where})"


class PyThreadDump(msgspec.Struct, frozen=True):
    thread_id: int = 0
    os_thread_id: int | None = None
    thread_name: _Text | None = None
    active: bool = False
    frames: Annotated[list[PyFrame], msgspec.Meta(max_length=MAX_FRAMES)] = msgspec.field(
        default_factory=list
    )


_Threads = Annotated[list[PyThreadDump], msgspec.Meta(max_length=MAX_THREADS)]
_DUMP: msgspec.json.Decoder[list[PyThreadDump]] = msgspec.json.Decoder(_Threads)


def parse_dump(raw: bytes) -> list[PyThreadDump]:
    """py-spy's JSON document for one process; StackDumpError (one line) when malformed."""
    if len(raw) > MAX_DUMP_BYTES:
        raise StackDumpError(f"stack dump of {len(raw)} bytes is over {MAX_DUMP_BYTES}")
    try:
        return _DUMP.decode(raw)
    except msgspec.DecodeError as exc:
        raise StackDumpError(f"unusable stack dump: {str(exc).splitlines()[0][:200]}") from None


class Place(StrEnum):
    """Where a Python thread is relative to a Kafka client."""

    IN_CALLBACK = "in_callback"
    IN_CLIENT = "in_client"
    OUTSIDE = "outside"


CLIENT_NATIVE = ("confluent_kafka", "librdkafka")
"""Native frames of confluent-kafka (its C extension and the librdkafka it bundles or
links), matched in the frame's shared object path."""
CLIENT_PYTHON = ("/kafka/producer/", "/kafka/client_async.py", "/aiokafka/producer/")
"""Python frames of pure-Python clients (kafka-python, aiokafka), matched in the file
path."""


def is_stdlib_frame(frame: PyFrame) -> bool:
    """A Python frame of the interpreter's standard library (threading, selectors...)."""
    return "/lib/python3" in frame.filename and "-packages/" not in frame.filename


def is_client_frame(frame: PyFrame) -> bool:
    """The frame belongs to a Kafka client's own code."""
    if frame.native:
        return any(part in (frame.module or "") for part in CLIENT_NATIVE)
    return any(part in frame.filename for part in CLIENT_PYTHON)


@dataclass(frozen=True)
class ThreadPlace:
    """Where one thread of one process is, with the frames that show it."""

    pid: int
    tid: int
    name: str
    active: bool
    place: Place
    client_call: str = ""
    """The outermost client frame (the call the task made: `Producer_flush`...)."""
    user_frame: str = ""
    """in_callback: the user code the client called; outside: the innermost Python frame."""
    caller: str = ""
    """The Python frame that made the client call."""

    @property
    def waits_for_deliveries(self) -> bool:
        """Inside the client's `flush`: it returns only once every message is answered."""
        return self.place is Place.IN_CLIENT and "flush" in self.client_call.lower()

    @property
    def could_be_stuck(self) -> bool:
        """In a callback the client called, or waiting for deliveries (not an idle poll)."""
        return self.place is Place.IN_CALLBACK or self.waits_for_deliveries

    @property
    def key(self) -> tuple[int, int, str, str]:
        """Same thread, same client call, same user frame: the same wait."""
        return (self.pid, self.tid, self.place, self.client_call + "|" + self.user_frame)

    def describe(self) -> str:
        who = f"thread '{self.name}' (pid {self.pid}, tid {self.tid})"
        if self.place is Place.IN_CALLBACK:
            return (
                f"{who} is inside user code {self.user_frame} that the Kafka client called "
                f"from {self.client_call} (called by {self.caller or 'native code'})"
            )
        if self.place is Place.IN_CLIENT:
            by = self.caller or "native code"
            return f"{who} waits inside the Kafka client's {self.client_call} (called by {by})"
        doing = "computing in" if self.active else "waiting in"
        return f"{who} is {doing} {self.user_frame or 'native code'}, not in a Kafka client"


def classify(pid: int, thread: PyThreadDump) -> ThreadPlace:
    """Where one thread is (frames innermost first, as py-spy lists them)."""
    frames = thread.frames
    tid = thread.os_thread_id if thread.os_thread_id is not None else thread.thread_id
    name = thread.thread_name or str(tid)
    client = [i for i, f in enumerate(frames) if is_client_frame(f)]
    python = [i for i, f in enumerate(frames) if not f.native]
    if not client:
        inner = frames[python[0]].label if python else ""
        return ThreadPlace(pid, tid, name, thread.active, Place.OUTSIDE, user_frame=inner)
    innermost, outermost = client[0], client[-1]
    call = frames[outermost].name
    caller = next((frames[i].label for i in python if i > outermost), "")
    # User code the client called: Python frames inside the innermost client frame, less
    # the standard library's (a pure-Python client's own waits are in threading.py).
    above = [i for i in python if i < innermost and not is_stdlib_frame(frames[i])]
    if above:
        user = frames[above[-1]].label  # the user code the client called
        return ThreadPlace(
            pid, tid, name, thread.active, Place.IN_CALLBACK, call, user_frame=user, caller=caller
        )
    return ThreadPlace(pid, tid, name, thread.active, Place.IN_CLIENT, call, caller=caller)


@dataclass(frozen=True)
class StackView:
    """One sample of the executor's Python processes (or why there is none)."""

    at: float
    threads: tuple[ThreadPlace, ...] = ()
    processes: int = 0
    error: str | None = None

    @property
    def available(self) -> bool:
        return self.error is None

    def could_be_stuck(self) -> tuple[ThreadPlace, ...]:
        return tuple(t for t in self.threads if t.could_be_stuck)
