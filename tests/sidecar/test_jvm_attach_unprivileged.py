"""The sidecar's attach code on real JVMs, as an unprivileged user with no capability.

Each JVM here is a real HotSpot JVM (this machine's Java 17) started as `nobody` with
every capability dropped (`setpriv`); the sidecar's own attach code
(`hangwatch_sidecar.spark.attach.LocalReader`, copied where that user can read it) runs
in a separate `/usr/bin/python3` process, also through `setpriv`, as the same or another
uid, with no capability either. What it shows:

- a same-user attach works with CapEff 0: the JVM's threads come back, twice (the second
  time through the socket the first opened, with no signal), the trigger file is gone,
  the JVM lives on and printed no dump of its own (its SIGQUIT went to the attach
  listener); also when the JVM's working directory is not writable (trigger in its /tmp);
- JVMs that must not be signalled are not: `-Xrs` (a SIGQUIT would kill it),
  `-XX:+DisableAttachMechanism` (it would print a dump on its stdout), a process that is
  no JVM, another user's JVM - each a one-line reason, each process alive and silent;
- a JVM whose attach is disabled where the sidecar cannot see it (a `-XX:Flags=` file)
  gets one SIGQUIT (one dump on its stdout), the wait ends at its deadline, and it is
  never signalled again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hangwatch_sidecar
from hangwatch.child_processes import stop_process
from hangwatch_testing.waiting import wait_for

NOBODY = 65534
OTHER_UID = 65533
SETPRIV = ["setpriv", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
SYSTEM_PYTHON = "/usr/bin/python3"
PARKED = textwrap.dedent(
    """
    public final class Parked {
        public static void main(String[] args) throws Exception {
            Thread worker = new Thread(() -> {
                Object lock = new Object();
                synchronized (lock) {
                    try { lock.wait(); } catch (InterruptedException e) { return; }
                }
            }, "parked-worker");
            worker.start();
            System.out.println("ready");
            System.out.flush();
            worker.join();
        }
    }
    """
)
ATTACH = textwrap.dedent(
    """
    import json, sys
    from hangwatch_sidecar.spark.attach import LocalReader
    from hangwatch_sidecar.sockets.owners import ProcessRoot
    status = open("/proc/self/status").read()
    caps = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")]
    reader = LocalReader(ProcessRoot(pid=int(sys.argv[1])), 5.0)
    reads = []
    for _ in range(int(sys.argv[2])):
        s = reader.read()
        reads.append({"error": s.error, "kind": s.error_kind, "pids": list(reader.pids),
                      "threads": len(s.threads)})
    from hangwatch_sidecar.spark.attach import attachable, thread_dump
    import time
    text = ""
    if reads[-1]["pids"]:
        text = thread_dump(attachable(int(sys.argv[1])), time.monotonic() + 5)
    print(json.dumps({"cap_eff": caps[0], "uid": __import__("os").geteuid(), "reads": reads,
                      "text": text}))
    """
)


def _as(uid: int) -> list[str]:
    return [*SETPRIV, f"--reuid={uid}", f"--regid={uid}"]


@pytest.fixture(scope="module")
def world() -> Iterator[Path]:
    """A directory any user can read: the compiled Java program and a copy of the
    sidecar's package (this checkout, and pytest's own temporary directories, may sit
    where `nobody` cannot read)."""
    if shutil.which("setpriv") is None or shutil.which("javac") is None:
        pytest.fail("setpriv and javac are needed (scripts/setup.sh installs them)")
    root = Path(tempfile.mkdtemp(prefix="hangwatch-attach-"))
    try:
        yield _furnished(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _furnished(root: Path) -> Path:
    (root / "Parked.java").write_text(PARKED)
    subprocess.run(["javac", "-d", str(root), str(root / "Parked.java")], check=True)
    package = Path(hangwatch_sidecar.__file__).parent
    shutil.copytree(package, root / "py" / "hangwatch_sidecar",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    writable = root / "cwd"
    writable.mkdir()
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    os.chown(writable, NOBODY, NOBODY)
    return root


class Jvm:
    """A JVM started as `uid` with no capability; its stdout kept."""

    def __init__(self, world: Path, uid: int, cwd: Path, *options: str) -> None:
        self.out = world / f"jvm-{id(self)}.out"
        with self.out.open("w") as out:
            self.proc = subprocess.Popen(
                [*_as(uid), "java", "-Xmx32m", *options, "-cp", str(world), "Parked"],
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for(
                lambda: "ready" in self.stdout(),
                30.0,
                "the JVM's main",
                give_up=lambda: self.proc.poll() is not None,
                context=self.stdout,
            )
        except BaseException:
            self.stop()
            raise

    def stdout(self) -> str:
        return self.out.read_text()

    def stop(self) -> None:
        stop_process(self.proc, 5)


@pytest.fixture
def jvms(world: Path) -> Iterator[list[Jvm]]:
    started: list[Jvm] = []
    yield started
    for jvm in started:
        jvm.stop()


def _attach(world: Path, uid: int, pid: int, reads: int = 1) -> dict[str, Any]:
    done = subprocess.run(
        [*_as(uid), SYSTEM_PYTHON, "-c", ATTACH, str(pid), str(reads)],
        env={"PYTHONPATH": str(world / "py"), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("writable_cwd", [True, False], ids=["trigger-in-cwd", "trigger-in-tmp"])
def test_attach_as_the_jvms_own_user_with_no_capability(
    world: Path, jvms: list[Jvm], writable_cwd: bool
) -> None:
    cwd = world / "cwd" if writable_cwd else Path("/")
    jvm = Jvm(world, NOBODY, cwd)
    jvms.append(jvm)
    result = _attach(world, NOBODY, jvm.proc.pid, reads=2)
    assert result["uid"] == NOBODY and int(result["cap_eff"], 16) == 0
    for read in result["reads"]:
        assert read["error"] is None and read["pids"] == [jvm.proc.pid], read
    assert '"parked-worker" #' in result["text"] and "at Parked.lambda$main$0" in result["text"]
    assert jvm.proc.poll() is None, "the JVM died"
    assert "Full thread dump" not in jvm.stdout()  # its SIGQUIT started the attach listener
    triggers = [cwd / f".attach_pid{jvm.proc.pid}", Path(f"/tmp/.attach_pid{jvm.proc.pid}")]
    assert not any(t.exists() for t in triggers)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("-Xrs",), "does not catch SIGQUIT"),
        (("-XX:+DisableAttachMechanism",), "DisableAttachMechanism"),
    ],
)
def test_jvms_a_sigquit_would_kill_or_make_print_are_never_signalled(
    world: Path, jvms: list[Jvm], options: tuple[str, ...], says: str
) -> None:
    jvm = Jvm(world, NOBODY, world / "cwd", *options)
    jvms.append(jvm)
    (read,) = _attach(world, NOBODY, jvm.proc.pid)["reads"]
    assert read["kind"] == "not_attachable" and says in read["error"], read
    assert jvm.proc.poll() is None and "Full thread dump" not in jvm.stdout()


def test_a_jvm_whose_attach_never_starts_is_signalled_once(world: Path, jvms: list[Jvm]) -> None:
    """Attach disabled where the sidecar cannot see it (a flags file): the one SIGQUIT
    makes it print a dump, the wait ends at the deadline, and it is never signalled again."""
    flags = world / "cwd" / "flags"
    flags.write_text("+DisableAttachMechanism\n")
    flags.chmod(0o644)
    jvm = Jvm(world, NOBODY, world / "cwd", f"-XX:Flags={flags}")
    jvms.append(jvm)
    first, second = _attach(world, NOBODY, jvm.proc.pid, reads=2)["reads"]
    for read in (first, second):
        assert read["kind"] == "attach_refused" and "not signalled again" in read["error"], read
    assert jvm.proc.poll() is None
    assert jvm.stdout().count("Full thread dump") == 1, jvm.stdout()[-500:]
    assert not (world / "cwd" / f".attach_pid{jvm.proc.pid}").exists()


def test_another_users_jvm_is_named_not_signalled(world: Path, jvms: list[Jvm]) -> None:
    jvm = Jvm(world, NOBODY, world / "cwd")
    jvms.append(jvm)
    (read,) = _attach(world, OTHER_UID, jvm.proc.pid)["reads"]
    assert read["kind"] == "not_attachable" and f"uid {OTHER_UID}" in read["error"], read
    assert jvm.proc.poll() is None and "Full thread dump" not in jvm.stdout()


def test_a_process_that_is_no_jvm_is_left_alone(world: Path) -> None:
    sleeper = subprocess.Popen([*_as(NOBODY), "sleep", "60"])
    try:
        (read,) = _attach(world, NOBODY, sleeper.pid)["reads"]
        assert read["kind"] == "no_jvm" and read["pids"] == [], read
        assert sleeper.poll() is None
    finally:
        stop_process(sleeper, 5)
