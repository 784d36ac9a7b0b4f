"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

Not a test module: the tests/kube tier's session fixture and the admission benchmark
use `LocalCluster`. Every binary (etcd, kube-apiserver, kube-controller-manager,
kubectl) comes from `scripts/build-kube.sh`, the same build of the release pinned in
scripts/kube/kubernetes/go.mod that the node tier (tests/node) runs, cached by version
in ~/.cache/hangwatch/kube. Nothing listens on a fixed port: etcd and the API server get
free ports, and the Service ClusterIP range is a random /24 inside 127.0.0.0/8, so the
API server reaches a webhook Service's ClusterIP on loopback, where the test runs the
operator (no kubelet, no kube-proxy: pods are stored, never run; tests/node runs them).
Started and stopped as one unit; the child processes die with the test process
(PR_SET_PDEATHSIG) even if it is killed.

What the API server runs with: RBAC authorization, client-certificate authentication
(the admin is in `system:masters`), service-account tokens signed by a key of ours
(TokenRequest from the API server; the controller manager's service-account
controller, which also creates every namespace's `default` ServiceAccount), the default
admission plugins of the release (ServiceAccount, the mutating and validating webhooks,
...), and an audit log (`audit_events`) that records every request with its user, verb,
resource, response code and, for writes to pods, nodes and policies, the request body.
"""

from __future__ import annotations

import ctypes
import json
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from hangwatch_demo.harness import stop_process
from tests.kube.pki import Authority, Issued, service_account_keys

ROOT = Path(__file__).resolve().parents[2]
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


def built_components() -> dict[str, str]:
    """`scripts/build-kube.sh --paths` (NAME=value lines) once every component is cached,
    or one line naming the missing build and what to run."""
    check = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        reason = check.stderr.strip().splitlines()[-1:] or ["not built"]
        raise ClusterUnavailableError(
            "the tier's Kubernetes is not built: run `make kube` (scripts/build-kube.sh, "
            f"once, from the Go module proxy; scripts/setup.sh --kube does): {reason[0]}"
        )
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--paths"], capture_output=True, text=True, check=True
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
    def find(cls) -> Binaries:
        """The cached binaries, or one line naming the missing step and what to run."""
        paths = built_components()
        bin_dir = Path(paths["KUBE_BIN"])
        return cls(
            paths["KUBE_VERSION"],
            bin_dir / "kube-apiserver",
            bin_dir / "kube-controller-manager",
            bin_dir / "kubectl",
            Path(paths["ETCD_BIN"]) / "etcd",
        )


def free_port(host: str = "0.0.0.0") -> int:
    """A port nothing listens on now (bound on all addresses, so none of loopback uses it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


LASTING_PORTS = range(20000, 32000)
"""Below the kernel's ephemeral range (32768-60999 by default), from which every
`free_port`, Kafka broker, Spark JVM and outgoing connection of the other test workers
takes its ports."""


def lasting_port(host: str = "0.0.0.0") -> int:
    """A free port for a listener that a release fixes at install and that binds much
    later, maybe in another process (the chart's webhook port, bound each time an operator
    starts): taken outside the ephemeral range, so no port the kernel hands out to
    anything else in the meantime can be it (a `free_port` webhook port was once taken
    by another test's listener 20 minutes later: "address already in use")."""
    for _ in range(200):
        port = random.choice(LASTING_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
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


@dataclass
class LocalCluster:
    """etcd + kube-apiserver + kube-controller-manager under `workdir`."""

    workdir: Path
    binaries: Binaries
    service_cidr: str = field(
        default_factory=lambda: f"127.{random.randint(100, 250)}.{random.randint(0, 255)}.0/24"
    )
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    port: int = 0

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def ca(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def start(self) -> None:
        authority = Authority(self.pki)
        serving = authority.issue(
            "apiserver",
            "kube-apiserver",
            hosts=("127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc"),
        )
        admin = authority.issue("admin", "admin", organizations=("system:masters",))
        sa_private, sa_public = service_account_keys(self.pki)
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        etcd_port, peer_port = free_port(), free_port()
        self.port = free_port()
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        self.processes["etcd"] = spawn(
            [
                str(self.binaries.etcd),
                *("--name", "hangwatch", "--data-dir", str(self.workdir / "etcd")),
                *("--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url),
                *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
                *("--initial-cluster", f"hangwatch={peer_url}"),
                *("--quota-backend-bytes", str(2 * 1024**3), "--logger", "zap"),
            ],
            self.workdir / "etcd.log",
        )
        self.processes["kube-apiserver"] = spawn(
            [
                str(self.binaries.apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={authority.cert}",
                f"--service-account-key-file={sa_public}",
                f"--service-account-signing-key-file={sa_private}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=RBAC",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--endpoint-reconciler-type=none",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=batch",
                "--audit-log-batch-max-wait=100ms",
                "--audit-log-batch-buffer-size=100000",
                "--profiling=false",
            ],
            self.workdir / "kube-apiserver.log",
        )
        write_kubeconfig(
            self.admin_kubeconfig, self.server, authority.cert, user="admin", client=admin
        )
        self._wait_ready(admin)
        self.processes["kube-controller-manager"] = spawn(
            [
                str(self.binaries.controller_manager),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--controllers=serviceaccount,serviceaccount-token,namespace",
                f"--service-account-private-key-file={sa_private}",
                f"--root-ca-file={authority.cert}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
            ],
            self.workdir / "kube-controller-manager.log",
        )

    def _wait_ready(self, admin: Issued) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(admin.cert), str(admin.key))
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        last = "no answer"
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    log = (self.workdir / f"{name}.log").read_text(errors="replace")
                    raise ClusterUnavailableError(
                        f"{name} exited with {process.returncode} at start-up: "
                        + " | ".join(log.strip().splitlines()[-3:])
                    )
            try:
                with urllib.request.urlopen(
                    f"{self.server}/readyz", context=context, timeout=2
                ) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise ClusterUnavailableError(
            f"kube-apiserver not ready in {START_TIMEOUT_SECONDS:.0f} s: {last}"
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


@contextmanager
def local_cluster(workdir: Path | None = None) -> Iterator[LocalCluster]:
    """A started cluster, stopped (and its directory removed) afterwards."""
    binaries = Binaries.find()
    own = workdir is None
    directory = workdir or Path(tempfile.mkdtemp(prefix="hangwatch-kube-"))
    cluster = LocalCluster(directory, binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
        if own:
            shutil.rmtree(directory, ignore_errors=True)
