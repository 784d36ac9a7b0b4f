"""A real OCI registry and a real Python package index on loopback, for the install path.

Not a test module. `oci_registry()` runs the CNCF distribution server (Debian's
`docker-registry`, distribution 2.8) on a free loopback port with its storage in a
temporary directory; `package_index()` runs pypiserver on another, storing what is
uploaded to it in a temporary directory, uploads allowed only with the user and
password it is given (an htpasswd file), downloads open to anyone and every
project it does not hold answered from PyPI (its `--fallback-url`, as a company's index
proxies PyPI). Both are context managers that stop the server (SIGTERM, then SIGKILL)
and remove its storage on every exit path, and fail in one line naming what to install
when the server is missing or does not answer.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from hangwatch_testing.kube.cluster import spawn, stop
from hangwatch_testing.ports import free_port

START_SECONDS = 60.0
PYPI = "https://pypi.org/simple/"


class RegistryUnavailableError(RuntimeError):
    """A server did not start: one line saying why."""


def _wait_answering(url: str, log: Path, what: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status < 500:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    raise RegistryUnavailableError(f"{what} did not answer {url} in {START_SECONDS:.0f} s: {tail}")


@dataclass(frozen=True)
class OciRegistry:
    host: str
    """`127.0.0.1:PORT`: what `make publish REGISTRY=` and image references start with."""
    log: Path


@contextmanager
def oci_registry() -> Iterator[OciRegistry]:
    """The distribution server on 127.0.0.1 (no TLS, no authentication), yielded running."""
    binary = shutil.which("docker-registry")
    if binary is None:
        raise RegistryUnavailableError(
            "no docker-registry (the CNCF distribution server): run scripts/setup.sh "
            "(apt-get install docker-registry)"
        )
    with tempfile.TemporaryDirectory(prefix="hangwatch-registry-") as tmp:
        port = free_port("127.0.0.1")
        config = {
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": f"{tmp}/storage"},
                "delete": {"enabled": True},
            },
            "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
        }
        (Path(tmp) / "config.yml").write_text(yaml.safe_dump(config))
        log = Path(tmp) / "registry.log"
        process = spawn([binary, "serve", f"{tmp}/config.yml"], log)
        try:
            _wait_answering(f"http://127.0.0.1:{port}/v2/", log, "the registry")
            yield OciRegistry(f"127.0.0.1:{port}", log)
        finally:
            stop(process)


def _write_htpasswd(path: Path, username: str, password: str) -> None:
    """The uploader's entry (sha256-crypt), written by passlib, the library pypiserver
    reads it with, in a process of its own (passlib imports the `crypt` module, whose
    deprecation warning the suite turns into an error); the password goes by stdin."""
    script = (
        "import sys; from passlib.apache import HtpasswdFile; "
        "f = HtpasswdFile(sys.argv[1], new=True, default_scheme='sha256_crypt'); "
        "f.set_password(sys.argv[2], sys.stdin.read()); f.save()"
    )
    subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", script, str(path), username],
        input=password,
        text=True,
        check=True,
        timeout=60,
    )


@dataclass(frozen=True)
class PackageIndex:
    url: str
    """The upload URL (`make publish INDEX=`)."""
    simple: str
    """What pip reads (`PIP_INDEX_URL`)."""
    username: str
    password: str
    """The uploader's credentials (TWINE_USERNAME / TWINE_PASSWORD)."""
    packages: Path
    log: Path


@contextmanager
def package_index(fallback: str = PYPI) -> Iterator[PackageIndex]:
    """pypiserver on 127.0.0.1, uploads with a fresh random password only, yielded
    running; projects it does not hold are redirected to `fallback`."""
    with tempfile.TemporaryDirectory(prefix="hangwatch-index-") as tmp:
        packages = Path(tmp) / "packages"
        packages.mkdir()
        username, password = "uploader", secrets.token_urlsafe(18)
        _write_htpasswd(Path(tmp) / "htpasswd", username, password)
        port = free_port("127.0.0.1")
        log = Path(tmp) / "pypiserver.log"
        command = [
            sys.executable, "-m", "pypiserver", "run",
            "--host", "127.0.0.1", "--port", str(port),
            "--passwords", str(Path(tmp) / "htpasswd"), "--authenticate", "update",
            "--fallback-url", fallback, "--disable-fallback" if not fallback else "",
            str(packages),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYPISERVER_")}
        process = spawn([word for word in command if word], log, env=env)
        try:
            _wait_answering(f"http://127.0.0.1:{port}/health", log, "pypiserver")
            yield PackageIndex(
                url=f"http://127.0.0.1:{port}/",
                simple=f"http://127.0.0.1:{port}/simple/",
                username=username,
                password=password,
                packages=packages,
                log=log,
            )
        finally:
            stop(process)
