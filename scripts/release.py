"""`make release` and `make publish`: every artifact of one version, pushed where users install.

    scripts/release.py build [--dist DIR] [--base-image IMAGE] [--image-archive FILE]
    scripts/release.py publish --registry HOST[:PORT][/PATH] --index URL [--plain-http]
    scripts/release.py versions         # every place that spells the version, what it says
    scripts/release.py notes [VERSION]  # its CHANGELOG.md section (the forge release's notes)

The version is `[project] version` of pyproject.toml, the one place: `build` refuses to run
when any copy of it (the `VERSION_PLACES` below: the producer's, the chart's, the CRD's
label, the operator's default sidecar image, the dependency pin) says otherwise, and
`tests/release` fails the same way. `build` empties DIST (default dist/) and writes into it:

- `hangwatch-V` and `hangwatch_producer-V` wheels and sdists (`python -m build`, the
  commit's time as SOURCE_DATE_EPOCH);
- `hangwatch-V.tgz`, the chart (Helm's own packager, version and appVersion V);
- `hangwatch-image-V.oci.tar`, the image (`make image`, then an OCI archive of it; or
  `--image-archive`, a docker or OCI archive of that same image built already, copied);
- `hangwatch-kafka-telemetry-V.jar`, the Java client's telemetry
  (`python -m hangwatch_pipeline.kafka_telemetry`);
- a CycloneDX SBOM beside each wheel (`<wheel>.cdx.json`, cyclonedx-py over a virtualenv
  holding that wheel and what it pulls in) and the image's (`hangwatch-image-V.cdx.json`,
  syft over the archive: Debian's packages and the Python ones);
- `SHA256SUMS` over all of the above, in `sha256sum -c` format.

`publish` first checks DIST against its SHA256SUMS, then pushes the image to
`REGISTRY/hangwatch:V` (skopeo), the chart to `oci://REGISTRY/charts` (Helm's own registry
client: `REGISTRY/charts/hangwatch:V`), and the wheels and sdists to INDEX (twine).
Credentials come from the environment only and are never printed or put on a command
line: `REGISTRY_USERNAME` / `REGISTRY_PASSWORD` (none: an anonymous push) for the
registry, twine's own `TWINE_USERNAME` / `TWINE_PASSWORD` for the index. `--plain-http`
talks HTTP to the registry (a local one). Every step prints a `release:` line; a failure
is one `release: error:` line and a non-zero exit (3: a missing tool or bad input).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import helm_python
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "hangwatch"
IMAGE_REPOSITORY = "ghcr.io/hangwatch/hangwatch"
"""The image's home (the Makefile's IMAGE_REPOSITORY, the chart's default image)."""
CHART_PATH = "charts"
"""Where `publish` puts the chart under REGISTRY: `oci://REGISTRY/charts/hangwatch`."""
IMAGE_NAME = "hangwatch"
"""The image's repository under REGISTRY: `REGISTRY/hangwatch:V`."""
SUMS = "SHA256SUMS"


class ReleaseError(Exception):
    """One line saying what failed and what to do; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def say(message: str) -> None:
    print(f"release: {message}", file=sys.stderr, flush=True)


# --- the version ---------------------------------------------------------------------


def _pyproject(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text())


def project_version(root: Path = ROOT) -> str:
    """The one version: `[project] version` of pyproject.toml."""
    project = _pyproject(root / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    return str(project["version"])


def _assigned(path: Path, name: str) -> str:
    """The value `name = "X"` (Python) or `name=hangwatch-producer==X` (a Dockerfile ARG)."""
    text = path.read_text()
    found = re.search(rf'^{name}\s*=\s*"([^"]+)"', text, re.M) or re.search(
        rf"^{name}=hangwatch-producer==(\S+)$", text, re.M
    )
    return found.group(1) if found else "(not found)"


def _producer_pin(root: Path) -> str:
    project = _pyproject(root / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    pins = [d for d in project["dependencies"] if re.match(r"hangwatch-producer\b", d)]
    found = re.fullmatch(r"hangwatch-producer==(\S+)", pins[0]) if len(pins) == 1 else None
    return found.group(1) if found else f"(not an exact pin: {pins})"


def _chart(root: Path, key: str) -> str:
    return str(yaml.safe_load((root / "charts/hangwatch/Chart.yaml").read_text())[key])


def _crd_label(path: Path) -> str:
    labels = yaml.safe_load(path.read_text())["metadata"]["labels"]
    return str(labels.get("app.kubernetes.io/version", "(no version label)"))


def _sidecar_image_tag(root: Path) -> str:
    image = _assigned(root / "operator/hangwatch_operator/settings.py", "    sidecar_image: str")
    repository, _, tag = image.rpartition(":")
    return tag if repository == IMAGE_REPOSITORY else f"(not {IMAGE_REPOSITORY}: {image})"


VERSION_PLACES: dict[str, Callable[[Path], str]] = {
    "pyproject.toml [project] version": project_version,
    "pyproject.toml's hangwatch-producer pin": _producer_pin,
    "core/hangwatch/__init__.py __version__": lambda root: _assigned(
        root / "core/hangwatch/__init__.py", "__version__"
    ),
    "producer/hangwatch_producer/version.py __version__": lambda root: _assigned(
        root / "producer/hangwatch_producer/version.py", "__version__"
    ),
    "charts/hangwatch/Chart.yaml version": lambda root: _chart(root, "version"),
    "charts/hangwatch/Chart.yaml appVersion": lambda root: _chart(root, "appVersion"),
    "crds/producerhealthpolicy.yaml's version label": lambda root: _crd_label(
        root / "crds/producerhealthpolicy.yaml"
    ),
    "charts/hangwatch/crds/producerhealthpolicy.yaml's version label": lambda root: _crd_label(
        root / "charts/hangwatch/crds/producerhealthpolicy.yaml"
    ),
    "the operator's default sidecar image tag": _sidecar_image_tag,
    "examples/spark-on-kubernetes/Dockerfile's hangwatch-producer pin": lambda root: _assigned(
        root / "examples/spark-on-kubernetes/Dockerfile", "ARG HANGWATCH_PRODUCER"
    ),
}
"""Every place the repository spells its version (besides pyproject.toml's own, which
feeds `make`, the image's label and every artifact); each must say the same."""


def versions(root: Path = ROOT) -> dict[str, str]:
    return {place: read(root) for place, read in VERSION_PLACES.items()}


def agreed_version(root: Path = ROOT) -> str:
    """The version, or a ReleaseError naming each place that disagrees with pyproject.toml."""
    found = versions(root)
    version = project_version(root)
    wrong = [f"{place} says {value}" for place, value in found.items() if value != version]
    if wrong:
        raise ReleaseError(f"the version is {version} (pyproject.toml) but " + "; ".join(wrong), 3)
    return version


def release_notes(version: str, changelog: str) -> str:
    """The body of CHANGELOG.md's `## [version]` section (up to the next `## `)."""
    heading = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n", changelog, re.M)
    if heading is None:
        raise ReleaseError(f"CHANGELOG.md has no '## [{version}]' section", 3)
    rest = changelog[heading.end() :]
    end = re.search(r"^## ", rest, re.M)
    body = rest[: end.start()] if end else rest
    body = re.sub(r"^\[[^\]]+\]: \S+\s*$", "", body, flags=re.M)  # link definitions
    return body.strip() + "\n"


# --- running tools -------------------------------------------------------------------


def run(command: Sequence[str], step: str, *, env: dict[str, str] | None = None) -> str:
    """`command` with its output shown as it runs; its stdout returned. A failure is a
    ReleaseError naming `step` (the tool's own lines are above it)."""
    shown = " ".join(command)
    say(f"{step}: {shown}")
    started = time.monotonic()
    try:
        done = subprocess.run(
            list(command), stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=False
        )
    except FileNotFoundError:
        raise ReleaseError(f"{step}: {command[0]} not found: run scripts/setup.sh", 3) from None
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        raise ReleaseError(f"{step} failed (exit {done.returncode}): {shown}")
    say(f"{step}: done in {time.monotonic() - started:.0f} s")
    return done.stdout


def go_tool(name: str) -> str:
    """The path of an upstream Go tool (scripts/go-tool.sh builds it once)."""
    return run(["bash", str(ROOT / "scripts" / "go-tool.sh"), name], f"finding {name}").strip()


def source_date_epoch() -> str:
    """The commit's time (reproducible archives); now, outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or str(int(time.time()))


# --- build ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifacts:
    """The names of one version's artifacts in DIST."""

    version: str

    @property
    def chart(self) -> str:
        return f"hangwatch-{self.version}.tgz"

    @property
    def image(self) -> str:
        return f"hangwatch-image-{self.version}.oci.tar"

    @property
    def image_sbom(self) -> str:
        return f"hangwatch-image-{self.version}.cdx.json"

    @property
    def jar(self) -> str:
        return f"hangwatch-kafka-telemetry-{self.version}.jar"

    def wheel(self, distribution: str) -> str:
        return f"{distribution.replace('-', '_')}-{self.version}-py3-none-any.whl"

    def sdist(self, distribution: str) -> str:
        return f"{distribution.replace('-', '_')}-{self.version}.tar.gz"

    @property
    def python(self) -> list[str]:
        """Wheels and sdists, the producer's first (hangwatch's wheel requires it)."""
        names = ("hangwatch-producer", "hangwatch")
        return [*(self.wheel(n) for n in names), *(self.sdist(n) for n in names)]

    @property
    def every(self) -> list[str]:
        wheels = [self.wheel(n) for n in ("hangwatch-producer", "hangwatch")]
        return sorted(
            [
                *self.python,
                *(f"{w}.cdx.json" for w in wheels),
                self.chart,
                self.image,
                self.image_sbom,
                self.jar,
            ]
        )


def build_python(dist: Path, env: dict[str, str]) -> None:
    """Both distributions' wheels and sdists; setuptools' build/ folders it leaves in the
    checkout are removed again (unless they were there before)."""
    leftovers = [p for p in (ROOT / "build", ROOT / "producer" / "build") if not p.exists()]
    for name, source in (("hangwatch-producer", ROOT / "producer"), ("hangwatch", ROOT)):
        run(
            [
                sys.executable,
                "-m",
                "build",
                "--sdist",
                "--wheel",
                "--outdir",
                str(dist),
                str(source),
            ],
            f"building {name}'s wheel and sdist",
            env=env,
        )
    for made in leftovers:
        shutil.rmtree(made, ignore_errors=True)


def build_chart(dist: Path, version: str) -> None:
    say(f"packaging the chart {CHART.relative_to(ROOT)} at {version} (Helm)")
    archive = helm_python.package(CHART, destination=dist, version=version, app_version=version)
    say(f"packaging the chart: {Path(archive).name}")


def build_jar(dist: Path, name: str) -> None:
    jar = run(
        [sys.executable, "-m", "hangwatch_pipeline.kafka_telemetry"],
        "building the Java client's telemetry jar",
    ).strip()
    shutil.copyfile(jar, dist / name)


def build_image(dist: Path, names: Artifacts, base_image: str, env: dict[str, str]) -> None:
    image = f"{IMAGE_REPOSITORY}:{names.version}"
    tool = env.get("HANGWATCH_IMAGE_TOOL", "")
    run(
        ["make", "--no-print-directory", "image", f"IMAGE={image}", f"BASE_IMAGE={base_image}"],
        "building the image",
        env=env,
    )
    archive = dist / names.image
    if tool == "docker" or (not tool and shutil.which("buildah") is None):
        # docker 25 and later save an OCI image layout
        run(["docker", "save", "--output", str(archive), image], "saving the image", env=env)
    else:
        run(
            ["buildah", "push", "--quiet", image, f"oci-archive:{archive}:{image}"],
            "saving the image as an OCI archive",
            env=env,
        )


def copy_image(archive: Path, destination: Path, name: str) -> None:
    """An image built already (a docker or an OCI archive, e.g. `make image` saved by a
    cache) as the release's OCI archive, named `name` (skopeo)."""
    try:
        with tarfile.open(archive) as tar:
            members = set(tar.getnames())
    except (OSError, tarfile.TarError) as exc:
        raise ReleaseError(f"--image-archive {archive}: not an image archive ({exc})", 3) from None
    if {"index.json", "oci-layout"} <= members:
        transport = "oci-archive"
    elif "manifest.json" in members:
        transport = "docker-archive"
    else:
        raise ReleaseError(f"--image-archive {archive}: neither a docker nor an OCI archive", 3)
    run(
        [
            "skopeo",
            "copy",
            "--quiet",
            f"{transport}:{archive}",
            f"oci-archive:{destination}:{name}",
        ],
        "the image: the archive built already, as an OCI archive",
    )


def wheel_sbom(dist: Path, wheel: str, env: dict[str, str]) -> None:
    """A CycloneDX SBOM of `wheel` as installed: a virtualenv without pip holding the
    wheel and what it requires (the release's own producer wheel for hangwatch's pin)."""
    with tempfile.TemporaryDirectory(prefix="hangwatch-sbom-") as tmp:
        venv = Path(tmp) / "venv"
        run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            f"an environment for {wheel}",
        )
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(venv / "bin/python"),
                "install",
                "--quiet",
                "--find-links",
                str(dist),
                "--only-binary=:all:",
                str(dist / wheel),
            ],
            f"installing {wheel} for its SBOM",
            env=env,
        )
        run(
            [
                sys.executable,
                "-m",
                "cyclonedx_py",
                "environment",
                "--output-format",
                "JSON",
                "--output-file",
                str(dist / f"{wheel}.cdx.json"),
                str(venv / "bin/python"),
            ],
            f"the SBOM of {wheel} (cyclonedx-py)",
        )


def image_sbom(dist: Path, names: Artifacts) -> None:
    syft = go_tool("syft")
    run(
        [
            syft,
            "scan",
            "--quiet",
            f"oci-archive:{dist / names.image}",
            "--output",
            f"cyclonedx-json={dist / names.image_sbom}",
        ],
        "the image's SBOM (syft)",
        env={**os.environ, "SYFT_CHECK_FOR_APP_UPDATE": "false"},
    )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(dist: Path, files: Sequence[str]) -> None:
    lines = [f"{sha256(dist / name)}  {name}\n" for name in sorted(files)]
    (dist / SUMS).write_text("".join(lines))
    say(f"{SUMS}: {len(lines)} files")


def check_sums(dist: Path) -> list[str]:
    """The files SHA256SUMS lists, each checked; a ReleaseError for any missing or changed."""
    sums = dist / SUMS
    if not sums.is_file():
        raise ReleaseError(f"no {sums}: run `make release` first", 3)
    names = []
    for line in sums.read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = dist / name
        if not path.is_file() or sha256(path) != digest:
            raise ReleaseError(f"{path} is missing or differs from {SUMS}: make release again", 3)
        names.append(name)
    return names


def build(dist: Path, base_image: str, image_archive: Path | None) -> None:
    version = agreed_version()
    names = Artifacts(version)
    say(f"hangwatch {version} into {dist}")
    started = time.monotonic()
    if dist.exists():
        shutil.rmtree(dist)
    dist.mkdir(parents=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": source_date_epoch()}
    build_python(dist, env)
    build_chart(dist, version)
    build_jar(dist, names.jar)
    if image_archive is None:
        build_image(dist, names, base_image, env)
    else:
        copy_image(image_archive, dist / names.image, f"{IMAGE_REPOSITORY}:{version}")
    for distribution in ("hangwatch-producer", "hangwatch"):
        wheel_sbom(dist, names.wheel(distribution), env)
    image_sbom(dist, names)
    made = sorted(p.name for p in dist.iterdir())
    if made != names.every:
        raise ReleaseError(f"{dist} holds {made}, expected {names.every}")
    write_sums(dist, made)
    say(f"hangwatch {version}: {len(made)} artifacts in {time.monotonic() - started:.0f} s")


# --- publish -------------------------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    """`host[:port][/path]`: where the image and the chart go."""

    host: str
    path: str

    @classmethod
    def parse(cls, text: str) -> Registry:
        found = re.fullmatch(
            r"([A-Za-z0-9.-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:]+\](?::[0-9]{1,5})?)"
            r"((?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)",
            text.strip().removeprefix("oci://").rstrip("/"),
        )
        if found is None:
            raise ReleaseError(
                f"REGISTRY={text!r}: expected host[:port][/path], e.g. ghcr.io/me", 3
            )
        return cls(found.group(1), found.group(2))

    @property
    def image(self) -> str:
        return f"{self.host}{self.path}/{IMAGE_NAME}"

    @property
    def charts(self) -> str:
        return f"oci://{self.host}{self.path}/{CHART_PATH}"


def index_url(text: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", text.strip()):
        raise ReleaseError(f"INDEX={text!r}: expected the index's upload URL, http(s)://...", 3)
    return text.strip()


def registry_credentials() -> tuple[str, str] | None:
    user = os.environ.get("REGISTRY_USERNAME", "")
    password = os.environ.get("REGISTRY_PASSWORD", "")
    if bool(user) != bool(password):
        raise ReleaseError("set both REGISTRY_USERNAME and REGISTRY_PASSWORD, or neither", 3)
    return (user, password) if user else None


@contextmanager
def auth_file(host: str, credentials: tuple[str, str] | None) -> Iterator[Path]:
    """A containers-auth.json (mode 0600, removed afterwards) holding the registry's
    credentials, so that none is on a command line."""
    with tempfile.TemporaryDirectory(prefix="hangwatch-publish-") as tmp:
        path = Path(tmp) / "auth.json"
        auths = {}
        if credentials is not None:
            token = base64.b64encode(":".join(credentials).encode()).decode()
            auths[host] = {"auth": token}
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump({"auths": auths}, file)
        yield path


def publish(dist: Path, registry: Registry, index: str, plain_http: bool) -> None:
    version = agreed_version()
    names = Artifacts(version)
    listed = check_sums(dist)
    missing = sorted(set(names.every) - set(listed))
    if missing:
        raise ReleaseError(f"{dist} lacks {missing} of {version}: run `make release` first", 3)
    credentials = registry_credentials()
    say(
        f"hangwatch {version}: the image to {registry.image}, the chart to {registry.charts}, "
        f"the Python distributions to {index}"
    )
    with auth_file(registry.host, credentials) as auth:
        tls = ["--dest-tls-verify=false"] if plain_http else []
        run(
            [
                "skopeo",
                "copy",
                "--quiet",
                "--dest-authfile",
                str(auth),
                *tls,
                f"oci-archive:{dist / names.image}",
                f"docker://{registry.image}:{version}",
            ],
            "pushing the image",
        )
    push_chart(dist / names.chart, registry, credentials, plain_http)
    run(
        [
            sys.executable,
            "-m",
            "twine",
            "upload",
            "--non-interactive",
            "--disable-progress-bar",
            "--repository-url",
            index,
            *(str(dist / name) for name in names.python),
        ],
        "uploading the wheels and sdists (twine)",
    )
    say(f"hangwatch {version} published")


def push_chart(
    archive: Path, registry: Registry, credentials: tuple[str, str] | None, plain_http: bool
) -> None:
    say(f"pushing the chart {archive.name} to {registry.charts} (Helm)")
    with tempfile.TemporaryDirectory(prefix="hangwatch-helm-") as tmp:
        client = helm_python.RegistryClient(
            plain_http=plain_http, credentials_file=Path(tmp) / "registry.json"
        )
        with client:
            if credentials is not None:
                client.login(registry.host, *credentials, plain_http=plain_http)
            try:
                pushed = client.push(archive, registry.charts, plain_http=plain_http)
            except helm_python.HelmError as exc:
                raise ReleaseError(f"pushing the chart failed: {exc}") from None
    shown = pushed.get("output") or f"{registry.charts}/{archive.name.removesuffix('.tgz')}"
    say(f"pushing the chart: done ({shown.strip()})")


# --- the command ---------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="release", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="every artifact of the version into DIST")
    build_cmd.add_argument("--dist", type=Path, default=ROOT / "dist")
    build_cmd.add_argument(
        "--base-image", default="", help="the image's base (make image's BASE_IMAGE)"
    )
    build_cmd.add_argument(
        "--image-archive", type=Path, help="the image built already (docker or OCI archive)"
    )
    publish_cmd = commands.add_parser("publish", help="DIST to an OCI registry and a package index")
    publish_cmd.add_argument("--dist", type=Path, default=ROOT / "dist")
    publish_cmd.add_argument("--registry", required=True)
    publish_cmd.add_argument("--index", required=True)
    publish_cmd.add_argument("--plain-http", action="store_true", help="HTTP to the registry")
    commands.add_parser("versions", help="every place that spells the version")
    notes_cmd = commands.add_parser("notes", help="a version's CHANGELOG.md section")
    notes_cmd.add_argument("version", nargs="?")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.dist.resolve(), args.base_image, args.image_archive)
        elif args.command == "publish":
            publish(
                args.dist.resolve(),
                Registry.parse(args.registry),
                index_url(args.index),
                args.plain_http,
            )
        elif args.command == "versions":
            for place, value in versions().items():
                print(f"{value}\t{place}")
            agreed_version()
        else:
            version = args.version or agreed_version()
            sys.stdout.write(release_notes(version, (ROOT / "CHANGELOG.md").read_text()))
    except ReleaseError as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
