"""A local JVM's HotSpot thread dump (text) -> the classifier's threads -> held states (pure).

Covers, on dumps RECORDED from real Java producers through the sidecar's own attach code
(scripts/record_hotspot_dumps.py: S4's kafka-clients 0.11.0.3 before and after its
callback's `send().get()`, and a kafka-clients 3.9.2 producer at work):
- the text is mapped to the entries Spark's REST API serves, so the one classifier says
  S4's I/O thread is `in_callback` inside `S4Producer$1.onCompletion`, waiting for itself;
- a thread's CPU time (`cpu=`) keeps the tracker honest: two dumps of a thread parked at
  the same place with the same CPU time are one stay; a thread that ran in between
  (a callback that prints every acknowledgement) starts a new stay;
- the JVM options and /proc facts that decide whether a JVM may be signalled at all
  (a fake /proc: SigCgt, libjvm.so, uid and gid, -Xrs, -XX:+DisableAttachMechanism);
- hostile input (hypothesis): any text parses without raising, within MAX_THREADS
  threads of MAX_FRAMES frames; any command line or environment decides without raising.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangwatch_sidecar.spark.attach import AttachError, _refusal, attachable
from hangwatch_sidecar.spark.hotspot import entries, parse_local_dump
from hangwatch_sidecar.spark.judge import judge_spark
from hangwatch_sidecar.spark.threads import MAX_FRAMES, MAX_THREADS
from hangwatch_sidecar.spark.tracking import SparkTracker
from hangwatch_sidecar.spark.types import Activity, SparkSnapshot, ThreadRole

FIXTURES = Path(__file__).parent / "spark_fixtures"
IO_THREAD = "kafka-producer-network-thread | producer-1"


def _text(name: str) -> str:
    return (FIXTURES / f"recorded_hotspot_{name}.txt").read_text()


def _threads(name: str) -> dict[str, object]:
    return {t.name: t for t in parse_local_dump(_text(name)).dump.threads}


def _snapshot(name: str, at: float) -> SparkSnapshot:
    local = parse_local_dump(_text(name))
    return SparkSnapshot(
        at=at,
        tasks=local.dump.tasks,
        threads=local.dump.threads,
        source="jvm",
        spark_executor=local.spark_executor,
    )


def test_s4_io_thread_inside_its_callback_waits_for_itself() -> None:
    local = parse_local_dump(_text("kafka_clients_0.11.0.3_s4_hung_1"))
    assert not local.spark_executor and local.dump.tasks == ()
    (io,) = [t for t in local.dump.threads if t.name == IO_THREAD]
    assert io.role is ThreadRole.NETWORK and io.activity is Activity.IN_CALLBACK
    assert io.user_frame == "S4Producer$1.onCompletion"
    assert io.frame == (
        "org.apache.kafka.clients.producer.internals.ProducerBatch.completeFutureAndFireCallbacks"
    )
    assert io.state == "WAITING" and "waits for itself" in io.detail
    assert io.waits_on is not None and "CountDownLatch$Sync" in io.waits_on
    assert io.cpu_ms == pytest.approx(160.76)


@pytest.mark.parametrize(
    ("name", "callback", "cpu"),
    [
        ("kafka_clients_0.11.0.3_s4_healthy", "S4Producer$1.onCompletion", 153.42),
        ("kafka_clients_3.9.2_healthy", "HealthyProducer$$Lambda$126.onCompletion", 468.42),
    ],
)
def test_producers_at_work_are_caught_running_their_callbacks(
    name: str, callback: str, cpu: float
) -> None:
    """Both healthy producers' I/O threads were caught RUNNABLE inside their callbacks,
    printing an acknowledgement (they do for each of 200 a second): one dump cannot tell
    that from a stay, nor can consecutive ones without CPU times (see below)."""
    io = _threads(name)[IO_THREAD]
    assert io.activity is Activity.IN_CALLBACK and io.state == "RUNNABLE"  # type: ignore[attr-defined]
    assert io.user_frame == callback and io.cpu_ms == pytest.approx(cpu)  # type: ignore[attr-defined]


def test_the_same_parked_thread_is_one_stay_and_is_judged_producer_hung() -> None:
    tracker = SparkTracker(stall_seconds=5.0)
    tracker.observe(_snapshot("kafka_clients_0.11.0.3_s4_healthy", 0.0))
    first = tracker.observe(_snapshot("kafka_clients_0.11.0.3_s4_hung_1", 10.0))
    later = tracker.observe(_snapshot("kafka_clients_0.11.0.3_s4_hung_2", 20.0))
    held = {o.thread.name: o.held_seconds for o in later.threads}
    assert {o.thread.name: o.held_seconds for o in first.threads}[IO_THREAD] == 0.0
    assert held[IO_THREAD] == 10.0  # the same CPU time in both: parked all along
    assert later.source == "jvm" and later.task_running is None  # not a Spark executor
    (finding, *_) = judge_spark(
        later, stall_seconds=5.0, heartbeat_seconds=5.0, cluster_healthy=True
    )
    assert finding.verdict == "producer_hung" and finding.threads == (IO_THREAD,)
    assert "S4Producer$1.onCompletion" in finding.reason


def test_a_thread_that_ran_between_two_dumps_starts_a_new_stay() -> None:
    """A callback that prints each acknowledgement is caught inside it in two dumps in a
    row now and then: its CPU time moved, so it is not one stay (no producer_hung)."""
    local = parse_local_dump(_text("kafka_clients_0.11.0.3_s4_healthy"))
    io = next(t for t in local.dump.threads if t.name == IO_THREAD)
    assert io.activity is Activity.IN_CALLBACK and not io.waits_for_itself
    tracker = SparkTracker(stall_seconds=5.0)
    for at, cpu in ((0.0, 10.0), (10.0, 12.5), (20.0, 13.0)):
        view = tracker.observe(
            SparkSnapshot(at=at, threads=(replace(io, cpu_ms=cpu),), source="jvm")
        )
    assert view.threads[0].held_seconds == 0.0
    assert judge_spark(view, stall_seconds=5.0, heartbeat_seconds=5.0, cluster_healthy=True) == ()
    # the I/O thread waiting for itself inside its callback (S4, when the callback's send
    # waits for buffer memory: max.block.ms lets it out, the next callback brings it back)
    # is the same deadlock however its CPU time moves
    stuck = next(
        t
        for t in parse_local_dump(_text("kafka_clients_0.11.0.3_s4_hung_1")).dump.threads
        if t.name == IO_THREAD
    )
    assert stuck.waits_for_itself and stuck.inner is Activity.AWAITING_RESULT
    tracker = SparkTracker(stall_seconds=5.0)
    for at, cpu in ((0.0, 10.0), (10.0, 12.5), (20.0, 13.0)):
        view = tracker.observe(
            SparkSnapshot(at=at, threads=(replace(stuck, cpu_ms=cpu),), source="jvm")
        )
    assert view.threads[0].held_seconds == 20.0
    # without CPU times (Spark's REST answer) the stay is the consecutive dumps'
    tracker = SparkTracker(stall_seconds=5.0)
    for at in (0.0, 10.0, 20.0):
        view = tracker.observe(SparkSnapshot(at=at, threads=(replace(io, cpu_ms=None),)))
    assert view.threads[0].held_seconds == 20.0


def test_headers_states_locks_and_the_vm_own_threads() -> None:
    text = (
        "Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6 mixed mode, sharing):\n\n"
        '"a \\"quoted\\" name" #7 daemon prio=5 os_prio=0 cpu=1.50ms elapsed=2.00s '
        "tid=0x1 nid=0x2 waiting on condition  [0x0]\n"
        "   java.lang.Thread.State: BLOCKED (on object monitor)\n"
        "\tat app.Main.run(Main.java:3)\n"
        "\t- waiting to lock <0x00000000deadbeef> (a java.lang.Object)\n"
        "\tat java.lang.Thread.run(java.base@17.0.15/Thread.java:833)\n\n"
        '"VM Thread" os_prio=0 cpu=3.00ms elapsed=2.00s tid=0x3 nid=0x4 runnable\n\n'
        '"Executor task launch worker for task 1.0 in stage 2.0 (TID 9)" #40 [123] prio=5 '
        "os_prio=0 cpu=5.00ms elapsed=1.00s tid=0x5 nid=123 waiting on condition  [0x0]\n"
        "   java.lang.Thread.State: RUNNABLE\n"
        "\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:906)\n"
    )
    found = entries(text)
    assert [e["threadId"] for e in found] == [7, 40]  # the VM's own thread has no Java id
    first = found[0]
    assert first["threadName"] == 'a \\"quoted\\" name' and first["threadState"] == "BLOCKED"
    assert first["lockName"] == "java.lang.Object <0x00000000deadbeef>"
    assert first["cpuMillis"] == 1.5 and len(first["stackTrace"]["elems"]) == 2
    local = parse_local_dump(text)
    assert local.spark_executor and [t.task_id for t in local.dump.tasks] == [9]


@settings(max_examples=300)
@given(st.text(max_size=3000))
def test_any_text_parses_without_raising(text: str) -> None:
    local = parse_local_dump(text)
    assert local.threads_total <= MAX_THREADS


_LINES = st.sampled_from(
    [
        '"kafka-producer-network-thread | p" #1 daemon prio=5 cpu=1.00ms elapsed=1s tid=0x1',
        '"t" #99999999999999999999 prio=5',
        '"x" #2 prio=5 cpu=1e999ms ',
        "   java.lang.Thread.State: WAITING (parking)",
        "\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:1)",
        "\tat S4Producer$1.onCompletion(S4Producer.java:52)",
        "\tat org.apache.kafka.clients.producer.internals.FutureRecordMetadata.get(F.java:1)",
        "\t- parking to wait for  <0x00000000ffd9d5e8> (a java.util.concurrent.CountDownLatch)",
        "\tat (",
        "",
    ]
)


@settings(max_examples=300)
@given(st.lists(st.one_of(_LINES, st.text(max_size=80)), max_size=200))
def test_dump_shaped_text_parses_without_raising(lines: list[str]) -> None:
    parse_local_dump("\n".join(lines))


def test_a_huge_dump_costs_bounded_work() -> None:
    thread = '"t" #{} prio=5 cpu=1.00ms elapsed=1s\n   java.lang.Thread.State: RUNNABLE\n'
    frames = "\tat a.B.c(B.java:1)\n" * (MAX_FRAMES + 50)
    text = "".join(thread.format(i) + frames for i in range(MAX_THREADS + 10))
    found = entries(text)
    assert len(found) <= MAX_THREADS
    assert all(len(e["stackTrace"]["elems"]) <= MAX_FRAMES for e in found)


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ([b"java", b"-cp", b"x", b"Main"], None),
        ([b"java", b"-Xrs", b"Main"], "-Xrs"),
        ([b"java", b"-XX:+ReduceSignalUsage", b"Main"], "ReduceSignalUsage"),
        ([b"java", b"-XX:+DisableAttachMechanism", b"Main"], "DisableAttachMechanism"),
        ([b"java", b"-XX:+DisableAttachMechanism", b"-XX:-DisableAttachMechanism"], None),
    ],
)
def test_options_that_forbid_a_sigquit(options: list[bytes], refused: str | None) -> None:
    why = _refusal(options)
    assert (why is None) if refused is None else (why is not None and refused in why)


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=60), max_size=40))
def test_any_command_line_decides_without_raising(words: list[bytes]) -> None:
    _refusal(words)


def _fake_proc(
    root: Path,
    *,
    uid: int | None = None,
    sigcgt: str = "0000000000004004",
    maps: str = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/jvm/java-17/lib/server/libjvm.so\n",
    cmdline: bytes = b"java\0-cp\0.\0Main\0",
    environ: bytes = b"PATH=/bin\0",
) -> Path:
    me = os.geteuid() if uid is None else uid
    pid = root / "4242"
    pid.mkdir(parents=True)
    (pid / "status").write_text(
        f"Name:\tjava\nUid:\t{me}\t{me}\t{me}\t{me}\nGid:\t{os.getegid()}\t{os.getegid()}\t0\t0\n"
        f"NSpid:\t4242\t7\nSigCgt:\t{sigcgt}\n"
    )
    (pid / "stat").write_text("4242 (java) S " + " ".join(["1"] * 18) + " 98765 0 0\n")
    (pid / "maps").write_text(maps)
    (pid / "cmdline").write_bytes(cmdline)
    (pid / "environ").write_bytes(environ)
    return root


def test_an_attachable_hotspot_jvm_is_named_by_its_own_namespace_pid(tmp_path: Path) -> None:
    jvm = attachable(4242, _fake_proc(tmp_path))
    assert (jvm.pid, jvm.nspid, jvm.started) == (4242, 7, "98765")


@pytest.mark.parametrize(
    ("fake", "kind", "says"),
    [
        ({"sigcgt": "0000000000000000"}, "not_attachable", "does not catch SIGQUIT"),
        ({"maps": "7f00-7f01 r-xp 0 08:01 1 /usr/bin/python3\n"}, "no_jvm", "not a HotSpot"),
        (
            {"maps": "a /opt/j9/lib/server/libjvm.so\nb /opt/j9/lib/default/libj9vm29.so\n"},
            "no_jvm",
            "not a HotSpot",
        ),
        ({"uid": 12345}, "not_attachable", "answers only its own user"),
        (
            {"environ": b"JAVA_TOOL_OPTIONS=-Xmx1g -XX:+DisableAttachMechanism\0"},
            "not_attachable",
            "DisableAttachMechanism",
        ),
        ({"cmdline": b"java\0-Xrs\0Main\0"}, "not_attachable", "-Xrs"),
    ],
)
def test_jvms_that_must_not_be_signalled(
    tmp_path: Path, fake: dict[str, object], kind: str, says: str
) -> None:
    with pytest.raises(AttachError) as caught:
        attachable(4242, _fake_proc(tmp_path, **fake))  # type: ignore[arg-type]
    assert caught.value.kind == kind and says in str(caught.value)
