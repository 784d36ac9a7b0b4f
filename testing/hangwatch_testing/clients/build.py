"""Builds every real client the tests and benchmarks run, each from its pinned sources.

The one build path of `testing/clients/`: each client of `CLIENTS` names its kind, its
source directory and the file that pins its version, and is built by its kind's builder
into `~/.cache/hangwatch/clients/<client>/<key>/` (`$XDG_CACHE_HOME` honoured), where
`<key>` hashes the toolchain's version, the version file (and a Go version file's
`.sum`), the client's sources and the shared progress sources; an edit or a new
toolchain builds again, anything else is a no-op. A file lock per client makes parallel
test workers build once; `.done` marks a finished build (a half-built directory is
built again).

Kinds (each directory under `testing/clients/` says what its programs do):

- `go-debian`: the workload producers (`sarama-producer`, `kafkago-producer`), GOPATH
  mode against Debian's packaged sources (`golang-github-shopify-sarama-dev`,
  `golang-github-segmentio-kafka-go-dev` under /usr/share/gocode): nothing downloaded.
  -> `bin`
- `go`: the incidents' Go clients at their exact versions, `go build -modfile=<the
  version's .mod>`, modules from the Go module proxy checked against its `.sum`. -> `bin`
- `java`: the incidents' Java clients, `mvn dependency:copy-dependencies` on the
  version's pom (Maven Central, cached in ~/.m2), then `javac` of the directory's
  programs with `java/common`. -> `lib/`, `classes/`
- `python`: a virtualenv of its own with the requirements file's exact pins, wheels only
  (a release PyPI serves only as an sdist is refused, not compiled), and the
  directory's programs copied beside it. -> `venv/bin/python`, `<program>.py`
- `node`: `npm ci` of the version's `package.json` and its `package-lock.json` (the
  version file: a directory of its own per version, beside the programs), from the npm
  registry, install scripts never run, and the directory's programs copied beside
  `node_modules`. -> `<program>.js`

    python -m hangwatch_testing.clients.build [client ...]   # no client: all of them

prints `<client> <directory>` per client; progress goes to stderr; a missing toolchain
or a failed resolve or compile is one line naming the step, exit 3.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hangwatch.build_steps import run_step
from hangwatch.errors import UsageError

SOURCES = Path(__file__).resolve().parents[2] / "clients"
"""testing/clients/: one directory per program (or per client family, several versions)."""
INCIDENTS = "incidents"
"""testing/clients/incidents/: the incidents' and the field corpus's own clients."""
GOPATH = "/usr/share/gocode"
APT_PACKAGES = "golang-go gcc golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev"
STEP_TIMEOUT_SECONDS = 1800.0
COMMON = {
    "go": (f"{INCIDENTS}/progress", ("*.go", "go.mod")),
    "java": (f"{INCIDENTS}/java/common", ("*.java",)),
}
"""Sources every client of a kind is built with (their progress lines): part of the key."""


class BuildError(UsageError):
    """A client could not be built: an unknown name, a missing toolchain, a resolve or
    compile that failed (the message names which and what to check). Exit 3."""

    exit_code = 3


@dataclass(frozen=True)
class Client:
    """One buildable client: `kind`'s builder makes it from `source` (under
    testing/clients/) pinned by `version_file` (a Go .mod, a Maven pom, a pip
    requirements file; empty for go-debian, pinned by Debian's packages)."""

    name: str
    kind: str
    source: str
    version_file: str = ""

    @property
    def directory(self) -> Path:
        return SOURCES / self.source


def _incident(name: str, kind: str, source: str, version_file: str) -> Client:
    return Client(name, kind, f"{INCIDENTS}/{source}", version_file)


CLIENTS: tuple[Client, ...] = (
    Client("sarama-producer", "go-debian", "sarama-producer"),
    Client("kafkago-producer", "go-debian", "kafkago-producer"),
    _incident("sarama-v1.37.2", "go", "sarama", "go.mod"),
    _incident("sarama-v1.38.0", "go", "sarama", "v1.38.0.mod"),  # S2's control (the fix)
    _incident("kafka-go-v0.4.8", "go", "kafka-go", "go.mod"),
    _incident("kafka-go-v0.4.9", "go", "kafka-go", "v0.4.9.mod"),  # S1's control (the fix)
    _incident("kafka_2.11-0.8.2.2", "java", "java/kafka_2.11-0.8.2.2", "pom.xml"),
    _incident("kafka-clients-0.11.0.3", "java", "java/kafka-clients-0.11.0.3", "pom.xml"),
    # Spark's sink's client; HealthyProducer, S4's control
    _incident("kafka-clients-3.9.2", "java", "java/kafka-clients-3.9.2", "pom.xml"),
    # the field corpus: kafka-go issue 451, sarama issue 2150, kafkajs issue 918
    _incident("kafka-go-v0.3.5", "go", "kafka-go-v0.3", "v0.3.5.mod"),
    _incident("kafka-go-v0.3.6", "go", "kafka-go-v0.3", "go.mod"),
    _incident("kafka-go-v0.3.7", "go", "kafka-go-v0.3", "v0.3.7.mod"),  # the fix
    _incident("sarama-v1.31.0", "go", "sarama", "v1.31.0.mod"),
    _incident("sarama-v1.32.0", "go", "sarama", "v1.32.0.mod"),
    _incident("sarama-v1.33.0", "go", "sarama", "v1.33.0.mod"),  # the fix
    _incident("kafkajs-1.14.0", "node", "kafkajs", "1.14.0/package-lock.json"),
    _incident("kafkajs-1.15.0", "node", "kafkajs", "1.15.0/package-lock.json"),  # the fix
    # the field corpus's librdkafka rows (confluent-kafka's wheels bundle librdkafka)
    _incident("confluent-kafka-2.12.1", "python", "confluent-kafka", "2.12.1.txt"),
    _incident("confluent-kafka-2.8.0", "python", "confluent-kafka", "2.8.0.txt"),
    # the field corpus's Java rows: KAFKA-7755 (2.1.0, fixed in 2.1.1)
    _incident("kafka-clients-2.1.0", "java", "java/field", "2.1.0.xml"),
    _incident("kafka-clients-2.1.1", "java", "java/field", "2.1.1.xml"),  # the fix
    # apache/kafka PR 21715 (open upstream: its control is the same release, not idempotent)
    _incident("kafka-clients-4.4.0", "java", "java/field", "4.4.0.xml"),
    # ... and at the release Spark's sink pins (kafka-clients-3.9.2 is HealthyProducer's)
    _incident("kafka-clients-3.9.2-field", "java", "java/field", "3.9.2.xml"),
)
BY_NAME = {client.name: client for client in CLIENTS}


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hangwatch" / "clients"


def _require(*tools: str, hint: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise BuildError(f"no {tool}: {hint}")


def _toolchain(kind: str) -> str:
    """The toolchain's version (part of the key); BuildError when a tool is missing."""
    if kind in ("go", "go-debian"):
        _require("go", hint=f"install {APT_PACKAGES} (scripts/setup.sh does)")
        return subprocess.run(["go", "version"], capture_output=True, text=True, check=True).stdout
    if kind == "java":
        _require(
            "javac", "mvn", hint="run scripts/setup.sh (installs openjdk-17-jdk-headless, maven)"
        )
        return subprocess.run(
            ["javac", "-version"], capture_output=True, text=True, check=True
        ).stdout
    if kind == "python":
        return sys.version
    if kind == "node":
        _require("node", "npm", hint="install nodejs and npm (scripts/setup.sh does)")
        versions = [
            subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
            for tool in ("node", "npm")
        ]
        return "node " + " npm ".join(versions)
    raise BuildError(f"unknown kind of client {kind!r}")


def _files(directory: Path, patterns: tuple[str, ...]) -> Iterator[Path]:
    for pattern in patterns:
        yield from sorted(directory.glob(pattern))


PROGRAM_PATTERNS = ("*.go", "*.java", "*.py", "*.js")


def key(client: Client, toolchain: str) -> str:
    """The hash naming `client`'s build: toolchain, version file(s), sources."""
    digest = hashlib.sha256(toolchain.encode())
    pinned = [client.directory / client.version_file] if client.version_file else []
    if client.kind == "go":
        pinned.append(client.directory / (client.version_file.removesuffix(".mod") + ".sum"))
    if client.kind == "node":
        pinned.append((client.directory / client.version_file).parent / "package.json")
    common, patterns = COMMON.get(client.kind, ("", ()))
    shared = list(_files(SOURCES / common, patterns)) if common else []
    for path in [*pinned, *_files(client.directory, PROGRAM_PATTERNS), *shared]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _run(command: list[str], step: str, hint: str, cwd: Path | None = None, **env: str) -> None:
    """`command` (in `cwd`, with `env` added); BuildError naming `step` and its last
    error line when it fails."""
    if cwd is not None or env:
        command = [
            "env",
            "-C",
            str(cwd or Path.cwd()),
            *(f"{k}={v}" for k, v in env.items()),
            *command,
        ]
    done = run_step(command, timeout_seconds=STEP_TIMEOUT_SECONDS, step=step, hint=hint)
    if done.returncode != 0:
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        errors = (
            [line for line in lines if "ERROR" in line or "error" in line] or lines or ["no output"]
        )
        raise BuildError(f"{step} failed ({hint}): {errors[-1].strip()[:300]}")


def _go_debian(client: Client, out: Path) -> None:
    _run(
        ["go", "build", "-o", str(out / "bin"), "."],
        f"go build of {client.name} (GOPATH mode, {GOPATH})",
        f"needs {APT_PACKAGES}",
        cwd=client.directory,
        GO111MODULE="off",
        GOPATH=GOPATH,
        GOCACHE=str(cache_root() / ".go-build-cache"),
        GOFLAGS="",
    )


def _go(client: Client, out: Path) -> None:
    _run(
        ["go", "build", f"-modfile={client.version_file}", "-o", str(out / "bin"), "."],
        f"go build of {client.name}",
        "Go module proxy reachable?",
        cwd=client.directory,
        GOFLAGS="-mod=readonly",
    )


def _java(client: Client, out: Path) -> None:
    pom = client.directory / client.version_file
    _run(
        ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={out / 'lib'}"],
        f"mvn resolving {client.name}",
        "Maven Central reachable?",
    )  # fmt: skip
    programs = sorted(client.directory.glob("*.java"))
    if programs:
        common = sorted((SOURCES / COMMON["java"][0]).glob("*.java"))
        _run(
            ["javac", "-nowarn", "-d", str(out / "classes"), "-cp", f"{out / 'lib'}/*",
             *map(str, programs), *map(str, common)],
            f"javac of {client.name}",
            "a compile error in its sources",
        )  # fmt: skip


def _python(client: Client, out: Path) -> None:
    venv = out / "venv"
    _run(
        [sys.executable, "-m", "venv", str(venv)],
        f"the virtualenv of {client.name}",
        "python3-venv",
    )
    _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", "--only-binary=:all:",
         "-r", str(client.directory / client.version_file)],
        f"pip installing {client.version_file} for {client.name}",
        "PyPI reachable, and a wheel of that release for this Python?",
    )  # fmt: skip
    for program in client.directory.glob("*.py"):
        shutil.copy2(program, out / program.name)


def _node(client: Client, out: Path) -> None:
    lockfile = client.directory / client.version_file
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(lockfile.parent / name, out / name)
    _run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        f"npm ci of {client.version_file} for {client.name}",
        "npm registry reachable?",
        cwd=out,
    )
    for program in client.directory.glob("*.js"):
        shutil.copy2(program, out / program.name)


BUILDERS: dict[str, Callable[[Client, Path], None]] = {
    "go-debian": _go_debian,
    "go": _go,
    "java": _java,
    "python": _python,
    "node": _node,
}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds, the others wait and reuse
        yield


def built(name: str) -> Path:
    """The directory of client `name`'s build, built first when the cache lacks it."""
    client = BY_NAME.get(name)
    if client is None:
        raise BuildError(f"unknown client {name!r} (one of: {', '.join(BY_NAME)})")
    out = cache_root() / name / key(client, _toolchain(client.kind))
    if (out / ".done").exists():
        return out
    with _locked(cache_root() / name / ".lock"):
        if not (out / ".done").exists():
            print(
                f"build-clients: building {name} ({client.kind}) into {out} ...",
                file=sys.stderr,
                flush=True,
            )
            started = time.monotonic()
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            try:
                BUILDERS[client.kind](client, out)
            except BaseException:
                shutil.rmtree(out, ignore_errors=True)
                raise
            (out / ".done").touch()
            elapsed = time.monotonic() - started
            print(f"build-clients: built {name} in {elapsed:.0f} s", file=sys.stderr, flush=True)
    return out


def binary(name: str) -> Path:
    """The executable of a Go client (`bin` of its build)."""
    return built(name) / "bin"


def java_command(name: str, main: str, *args: str, jvm: tuple[str, ...] = ()) -> list[str]:
    """The argv running `main` of Java client `name` (its classes and its resolved jars);
    `jvm`: more options of the JVM (e.g. its DNS cache's lifetime)."""
    build = built(name)
    return ["java", "-Xmx128m", *jvm, "-cp", f"{build}/classes:{build}/lib/*", main, *args]


def python_command(name: str, program: str, *args: str) -> list[str]:
    """The argv running `program` (a .py of its source directory) in client `name`'s own
    virtualenv."""
    build = built(name)
    return [str(build / "venv" / "bin" / "python"), str(build / program), *args]


def node_command(name: str, program: str, *args: str) -> list[str]:
    """The argv running `program` (a .js of its source directory) with Node.js beside client
    `name`'s own `node_modules`."""
    return ["node", str(built(name) / program), *args]


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(BY_NAME)
    try:
        for name in names:
            print(f"{name} {built(name)}", flush=True)
    except BuildError as exc:
        print(f"build-clients: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
