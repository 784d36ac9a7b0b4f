"""Builds the Go producers of `testing/clients/` into a cache, once per source version.

GOPATH mode against Debian's packaged sources (`golang-github-shopify-sarama-dev`,
`golang-github-segmentio-kafka-go-dev` under /usr/share/gocode) with Debian's `golang-go`:
no module download, nothing from outside the machine. The cache key is a hash of the
sources and of `go version`, so an edit or a new Go rebuilds; a file lock makes parallel
test workers build once; the binary appears atomically. Progress goes to stderr.

    python -m hangwatch_testing.clients.build   # builds both, prints their paths
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "clients"
"""testing/clients/: one directory per Go producer (`<name>/main.go`)."""
GOPATH = "/usr/share/gocode"
PROGRAMS = ("sarama-producer", "kafkago-producer")
APT_PACKAGES = "golang-go gcc golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev"


class BuildError(RuntimeError):
    """A Go producer could not be built (missing toolchain or packages, or a compile error)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hangwatch" / "clients"


def _key(program: str, go: str) -> str:
    digest = hashlib.sha256(go.encode())
    for path in sorted((SOURCES / program).glob("*.go")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(f"no Go toolchain: install {APT_PACKAGES} (scripts/setup.sh does)")
    return subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout


def built(program: str) -> Path:
    """The path of `program`'s binary, building it first when the cache lacks it."""
    if program not in PROGRAMS:
        raise BuildError(f"unknown Go producer {program!r}")
    go = go_version()
    target = cache_dir() / f"{program}-{_key(program, go)}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{program}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds, the others wait and reuse
        if not target.exists():
            _build(program, target)
    return target


def _build(program: str, target: Path) -> None:
    print(
        f"building {program} (GOPATH mode, {GOPATH}) into {target.parent} ...",
        file=sys.stderr,
        flush=True,
    )
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": GOPATH,
        "GOCACHE": str(target.parent / "go-build-cache"),
        "GOFLAGS": "",
    }
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / program
        lines = []
        with subprocess.Popen(
            ["go", "build", "-v", "-o", str(out), "."],
            cwd=SOURCES / program,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stderr is not None
            for line in proc.stderr:  # -v names each package as it compiles: the progress
                lines.append(line.rstrip())
                if line.strip() and not line.startswith((" ", "#", "cgo", "In file", "/")):
                    print(f"  {program}: {line.strip()}", file=sys.stderr, flush=True)
        if proc.returncode != 0:
            errors = [line for line in lines if "warning" not in line][-5:]
            raise BuildError(
                f"go build of {program} failed (needs {APT_PACKAGES}): " + " | ".join(errors)
            )
        os.replace(out, target)
    print(f"built {program}", file=sys.stderr, flush=True)


def main() -> int:
    try:
        for program in PROGRAMS:
            print(built(program))
    except BuildError as exc:
        print(f"build: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
