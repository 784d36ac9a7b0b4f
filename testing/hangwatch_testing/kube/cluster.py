"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

The tests/kube tier's session fixture and the admission and operator benchmarks
use `LocalCluster`. Every binary (etcd, kube-apiserver, kube-controller-manager,
kubectl) comes from `scripts/build-kube.sh`, the same build of the release pinned in
scripts/kube/kubernetes/go.mod that the node tier (tests/node) runs, cached by version
in ~/.cache/hangwatch/kube; with `floor=True`, from `scripts/build-kube.sh --floor`: the
floor release (scripts/kube/kubernetes-floor/go.mod, the oldest minor the chart's
`kubeVersion` admits) with the same etcd, started the same way (tests/kube/test_floor.py).
Nothing listens on a fixed port: etcd and the API server get free ports, and the
Service ClusterIP range is a random /24 inside 127.0.0.0/8, so the API server reaches a
webhook Service's ClusterIP on loopback, where the test runs the operator (no kubelet,
no kube-proxy: pods are stored, never run; tests/node runs them).
Started and stopped as one unit; the child processes die with the test process
(PR_SET_PDEATHSIG) even if it is killed.

What the API server runs with: RBAC authorization, client-certificate authentication
(the admin is in `system:masters`), service-account tokens signed by a key of ours
(TokenRequest from the API server; the controller manager's service-account
controller, which also creates every namespace's `default` ServiceAccount; its
deployment and replicaset controllers, so a Deployment's pods are created through the
admission chain as in a cluster), the default
admission plugins of the release (ServiceAccount, the mutating and validating webhooks,
...), and an audit log (`audit_events`) that records every request with its user, verb,
resource, response code and, for writes to pods, nodes and policies, the request body.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from hangwatch.child_processes import stop_process
from hangwatch_testing.kube.pki import Authority, Issued, service_account_keys
from hangwatch_testing.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = ROOT / "scripts" / "build-kube.sh"
START_TIMEOUT_SECONDS = 90.0
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Request",
            "verbs": ["create", "update", "patch", "delete"],
            "resources": [
                {"group": "", "resources": ["pods", "pods/status", "nodes"]},
                {"group": "hangwatch.dev"},
            ],
        },
        {"level": "Metadata"},
    ],
}


class ControlPlane(Protocol):
    """What the chart and operator helpers need of a running API server (this tier's
    `LocalCluster`, the node tier's `NodeCluster`)."""

    @property
    def server(self) -> str: ...

    @property
    def ca(self) -> Path: ...

    @property
    def admin_kubeconfig(self) -> Path: ...


class ClusterUnavailableError(Exception):
    """The local control plane cannot start; the message is one line saying what to do."""


def built_components(*, floor: bool = False) -> dict[str, str]:
    """`scripts/build-kube.sh [--floor] --paths` (NAME=value lines) once every component
    is cached, or one line naming the missing build and what to run."""
    release = ["--floor"] if floor else []
    check = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *release, "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        reason = check.stderr.strip().splitlines()[-1:] or ["not built"]
        target = "kube-floor" if floor else "kube"
        raise ClusterUnavailableError(
            f"the tier's Kubernetes is not built: run `make {target}` (scripts/build-kube.sh"
            f"{' --floor' if floor else ''}, once, from the Go module proxy; "
            f"scripts/setup.sh --kube does): {reason[0]}"
        )
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), *release, "--paths"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@dataclass(frozen=True)
class Binaries:
    version: str
    apiserver: Path
    controller_manager: Path
    kubectl: Path
    etcd: Path

    @classmethod
    def find(cls, *, floor: bool = False) -> Binaries:
        """The cached binaries (of the floor release with `floor`), or one line naming the
        missing step and what to run."""
        paths = built_components(floor=floor)
        bin_dir = Path(paths["KUBE_BIN"])
        return cls(
            paths["KUBE_VERSION"],
            bin_dir / "kube-apiserver",
            bin_dir / "kube-controller-manager",
            bin_dir / "kubectl",
            Path(paths["ETCD_BIN"]) / "etcd",
        )


LASTING_PORTS = range(20000, 32000)
"""Below the kernel's ephemeral range (32768-60999 by default), from which every
`free_port`, Kafka broker, Spark JVM and outgoing connection of the other test workers
takes its ports."""


def _worker_share(ports: range) -> range:
    """This pytest-xdist worker's slice of `ports` (all of them outside xdist): the kube
    and node tiers run in different workers, and two of their releases must never fix
    the same port."""
    worker, count = (
        os.environ.get("PYTEST_XDIST_WORKER"),
        os.environ.get("PYTEST_XDIST_WORKER_COUNT"),
    )
    if worker is None or count is None:
        return ports
    size = len(ports) // int(count)
    start = ports.start + int(worker.removeprefix("gw")) * size
    return range(start, start + size)


_LASTING_TAKEN: set[int] = set()
"""Ports `lasting_port` handed out in this process: none twice (a release's webhook and
sidecar ports are both free until the operator binds one of them)."""


def lasting_port(host: str = "0.0.0.0") -> int:
    """A free port for a listener that a release fixes at install and that binds much
    later, maybe in another process (the chart's webhook port, bound each time an operator
    starts): taken outside the ephemeral range, so no port the kernel hands out to
    anything else in the meantime can be it (a `free_port` webhook port was once taken
    by another test's listener 20 minutes later: "address already in use")."""
    for _ in range(200):
        port = random.choice(_worker_share(LASTING_PORTS))
        if port in _LASTING_TAKEN:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _LASTING_TAKEN.add(port)
        return port
    raise ClusterUnavailableError(f"no free port in {LASTING_PORTS}")


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the test process goes away."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(
    command: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a child process logging to `log`, killed when this process dies."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(command),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads hold locks at this point
        )


def stop(process: subprocess.Popen[bytes], grace_seconds: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace_seconds` (10 s unless told)."""
    stop_process(process, grace_seconds)


def write_kubeconfig(
    path: Path,
    server: str,
    ca: Path,
    *,
    user: str,
    client: Issued | None = None,
    token: str | None = None,
    namespace: str = "default",
) -> Path:
    credentials: dict[str, str] = {}
    if client is not None:
        credentials = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    if token is not None:
        credentials = {"token": token}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [
            {"name": user, "context": {"cluster": "local", "user": user, "namespace": namespace}}
        ],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def wait_apiserver_ready(
    server: str,
    context: ssl.SSLContext,
    check_alive: Callable[[], None],
    timeout_seconds: float,
    unavailable: Callable[[str], Exception],
) -> None:
    """Returns once `server`'s /readyz answers 200 (asked with `context`, the admin's
    TLS); `check_alive` runs before each try (it raises when a process of the cluster
    has exited); `unavailable(message)` is raised after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    last = "no answer"
    while time.monotonic() < deadline:
        check_alive()
        try:
            with urllib.request.urlopen(f"{server}/readyz", context=context, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.25)
    raise unavailable(f"kube-apiserver not ready in {timeout_seconds:.0f} s: {last}")


def etcd_command(etcd: Path, workdir: Path, *extra: str) -> tuple[list[str], str]:
    """A one-member etcd in `workdir/etcd` on loopback ports free now: its command line
    (`extra` flags appended) and its client URL."""
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    argv = [
        str(etcd),
        *("--name", "hangwatch", "--data-dir", str(workdir / "etcd")),
        *("--listen-client-urls", client, "--advertise-client-urls", client),
        *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
        *("--initial-cluster", f"hangwatch={peer}"),
        *extra,
        *("--quota-backend-bytes", str(2 * 1024**3), "--logger", "zap"),
    ]
    return argv, client


def random_service_cidr() -> str:
    """A loopback /24 for the cluster's Service IPs (no two clusters likely to share it)."""
    return f"127.{random.randint(100, 250)}.{random.randint(0, 255)}.0/24"


class ClusterFiles:
    """What a tier's control plane keeps under `workdir`, and its API server's port and
    service range (the fields of `LocalCluster` and `NodeCluster`)."""

    workdir: Path
    port: int
    service_cidr: str

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def ca(self) -> Path:
        """The cluster's CA (`Authority(self.pki)` writes it here)."""
        return self.pki / "ca.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"


def apiserver_command(
    cluster: ClusterFiles,
    binary: Path,
    etcd_url: str,
    address: str,
    serving: Issued,
    keys: tuple[Path, Path],
    *extra: str,
    authorization: str = "RBAC",
) -> list[str]:
    """kube-apiserver's command line for `cluster` on `address`:`cluster.port` (the flags
    both tiers share, then `extra`); `keys`: the service-account key pair (private,
    public) from `service_account_keys`. Writes its audit policy."""
    policy = cluster.workdir / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    private, public = keys
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        f"--bind-address={address}",
        f"--advertise-address={address}",
        f"--secure-port={cluster.port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={cluster.ca}",
        *extra,
        f"--service-account-key-file={public}",
        f"--service-account-signing-key-file={private}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--authorization-mode={authorization}",
        f"--service-cluster-ip-range={cluster.service_cidr}",
        "--endpoint-reconciler-type=none",
        f"--audit-policy-file={policy}",
        f"--audit-log-path={cluster.audit_log}",
        "--audit-log-format=json",
        "--audit-log-mode=batch",
        "--audit-log-batch-max-wait=100ms",
        "--audit-log-batch-buffer-size=100000",
        "--profiling=false",
    ]


def controller_manager_command(
    binary: Path, kubeconfig: Path, controllers: str, service_account_key: Path, ca: Path
) -> list[str]:
    """kube-controller-manager running `controllers` as the admin, no leader election,
    no serving port."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--controllers={controllers}",
        f"--service-account-private-key-file={service_account_key}",
        f"--root-ca-file={ca}",
        "--leader-elect=false",
        "--secure-port=0",
        "--use-service-account-credentials=false",
    ]


@dataclass
class LocalCluster(ClusterFiles):
    """etcd + kube-apiserver + kube-controller-manager under `workdir`."""

    workdir: Path
    binaries: Binaries
    service_cidr: str = field(default_factory=random_service_cidr)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    port: int = 0

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        authority = Authority(self.pki)
        serving = authority.issue(
            "apiserver",
            "kube-apiserver",
            hosts=("127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc"),
        )
        admin = authority.issue("admin", "admin", organizations=("system:masters",))
        keys = service_account_keys(self.pki)
        etcd, etcd_url = etcd_command(self.binaries.etcd, self.workdir)
        self.processes["etcd"] = spawn(etcd, self.workdir / "etcd.log")
        self.port = free_port()
        apiserver = apiserver_command(
            self, self.binaries.apiserver, etcd_url, "127.0.0.1", serving, keys
        )
        self.processes["kube-apiserver"] = spawn(apiserver, self.workdir / "kube-apiserver.log")
        write_kubeconfig(
            self.admin_kubeconfig, self.server, authority.cert, user="admin", client=admin
        )
        self._wait_ready(admin)
        self.processes["kube-controller-manager"] = spawn(
            controller_manager_command(
                self.binaries.controller_manager,
                self.admin_kubeconfig,
                "serviceaccount,serviceaccount-token,namespace,deployment,replicaset",
                keys[0],
                authority.cert,
            ),
            self.workdir / "kube-controller-manager.log",
        )

    def _wait_ready(self, admin: Issued) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(admin.cert), str(admin.key))
        wait_apiserver_ready(
            self.server,
            context,
            self._check_alive,
            START_TIMEOUT_SECONDS,
            ClusterUnavailableError,
        )

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                log = (self.workdir / f"{name}.log").read_text(errors="replace")
                raise ClusterUnavailableError(
                    f"{name} exited with {process.returncode} at start-up: "
                    + " | ".join(log.strip().splitlines()[-3:])
                )

    def close(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            process = self.processes.pop(name, None)
            if process is not None:
                stop(process)

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event written so far (batched: up to ~100 ms behind)."""
        if not self.audit_log.exists():
            return []
        return [
            json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()
        ]

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | None = None,
        check: bool = True,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The release's kubectl against this cluster (admin unless `kubeconfig`)."""
        done = subprocess.run(
            [
                str(self.binaries.kubectl),
                f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
                *args,
            ],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}"
            )
        return done

    def merge_patch(
        self, resource: str, name: str, namespace: str, patch: dict[str, Any]
    ) -> subprocess.CompletedProcess[str]:
        """`kubectl patch --type=merge` of `resource` `namespace/name` with `patch`."""
        return self.kubectl(
            *("patch", resource, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch))
        )


class Startable(Protocol):
    def start(self) -> None: ...
    def close(self) -> None: ...


StartableT = TypeVar("StartableT", bound=Startable)


@contextmanager
def started_in(
    workdir: Path | None, prefix: str, make: Callable[[Path], StartableT]
) -> Iterator[StartableT]:
    """`make(directory)` started, and closed afterwards, in `workdir` or in a directory
    of its own (named `prefix...`, removed afterwards)."""
    own = workdir is None
    directory = workdir or Path(tempfile.mkdtemp(prefix=prefix))
    cluster = make(directory)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        if own:
            shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def local_cluster(workdir: Path | None = None, *, floor: bool = False) -> Iterator[LocalCluster]:
    """A started cluster (of the floor release with `floor`), stopped (and its directory
    removed) afterwards."""
    binaries = Binaries.find(floor=floor)
    with started_in(workdir, "hangwatch-kube-", lambda d: LocalCluster(d, binaries)) as cluster:
        yield cluster
