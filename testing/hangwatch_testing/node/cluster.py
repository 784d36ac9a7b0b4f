"""A single-node Kubernetes cluster of a current release that runs real pods.

The tests/node tier's session fixture and benchmarks/pod_startup.py use `node_cluster`.
Its build: `hangwatch_testing.node.components`; what its processes are told (containerd,
the kubelet, their mount namespace): `.config`; its network: `.network`; what it leaves
on the machine and how that is cleared: `.leftovers`.

The control plane listens on free ports: etcd, the controller manager and the scheduler
on loopback, kube-apiserver on the node IP (the bridge's address), which this machine's
processes and the pods (a Spark driver creates its executors) reach. There is no
kube-proxy, and the Service ClusterIP range is inside 127.0.0.0/8 so the API server
reaches a webhook Service on loopback (the operator runs as a process, as in the kube
tier). `close` deletes the pods (the kubelet stops them), stops every process, removes
the cgroups and the bridge, on every exit path; `leftovers` lists what would be left of
the tier's interfaces, iptables rules, mounts, cgroups and runtime processes (the
session fixture fails if anything is).
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hangwatch_testing.kube.cluster import (
    ClusterFiles,
    apiserver_command,
    controller_manager_command,
    etcd_command,
    random_service_cidr,
    spawn,
    started_in,
    stop,
    wait_apiserver_ready,
    write_kubeconfig,
)
from hangwatch_testing.kube.pki import Authority, service_account_keys
from hangwatch_testing.node.components import NODE_NAME, Components, NodeUnavailableError
from hangwatch_testing.node.config import (
    containerd_config,
    kubelet_config,
    node_namespace_script,
    registry_hosts_toml,
)
from hangwatch_testing.node.leftovers import (
    OWNERS,
    cgroup_dirs,
    cgroup_name,
    make_cgroups,
    mounts_under,
    reap_abandoned,
    remove_tree,
    shims_of,
    unmount_under,
)
from hangwatch_testing.node.network import cni_network, free_pod_network, ip, tier_iptables_lines
from hangwatch_testing.ports import free_port

START_TIMEOUT_SECONDS = 180.0
CONTAINERD_NAMESPACE = "k8s.io"


@dataclass
class NodeCluster(ClusterFiles):
    """etcd, the control plane, containerd and a kubelet under `workdir`."""

    workdir: Path
    components: Components
    service_cidr: str = field(default_factory=random_service_cidr)
    bridge: str = field(default_factory=lambda: f"hw{random.randbytes(4).hex()}")
    pod_network: ipaddress.IPv4Network = field(default_factory=free_pod_network)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    port: int = 0
    iptables_before: list[str] = field(default_factory=list)

    @property
    def cgroup_root(self) -> str:
        """The node's own cgroup (every controller), named after its bridge."""
        return cgroup_name(self.bridge)

    @property
    def server(self) -> str:
        """The API server's URL: it listens on the node IP (the bridge's address), where
        the processes of this machine and the pods (Spark's driver) both reach it."""
        return f"https://{self.node_ip}:{self.port}"

    @property
    def node_ip(self) -> str:
        return str(self.pod_network.network_address + 1)

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.workdir / "kubelet"

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    # ---- start ----

    def start(self) -> None:
        self.iptables_before = tier_iptables_lines(self.bridge, str(self.pod_network))
        OWNERS.mkdir(exist_ok=True)
        record = {"pid": os.getpid(), "workdir": str(self.workdir)}
        (OWNERS / self.bridge).write_text(json.dumps(record))
        authority = Authority(self.pki)
        self._network()
        self._control_plane(authority)
        self._cgroups()
        self._node_namespace()
        self._containerd()
        self._kubelet(authority)
        self._wait_node_ready()

    def _network(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.node_ip}/{self.pod_network.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        conf = self.workdir / "cni" / "net.d"
        conf.mkdir(parents=True)
        network = cni_network(self.bridge, self.pod_network, self.workdir / "cni" / "ipam")
        (conf / "10-hangwatch.conflist").write_text(json.dumps(network, indent=2))

    def _control_plane(self, authority: Authority) -> None:
        serving = authority.issue(
            "apiserver",
            "kube-apiserver",
            hosts=(
                self.node_ip,
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default.svc",
            ),
        )
        admin = authority.issue("admin", "admin", organizations=("system:masters",))
        self._admin = admin
        keys = service_account_keys(self.pki)
        self._sa_private = keys[0]
        metrics = ("--listen-metrics-urls", f"http://127.0.0.1:{free_port()}")
        etcd, etcd_url = etcd_command(self.components.etcd, self.workdir, *metrics)
        self.processes["etcd"] = spawn(etcd, self.log("etcd"))
        self.port = free_port()
        bin_dir = self.components.kube_bin
        apiserver = apiserver_command(
            self,
            bin_dir / "kube-apiserver",
            etcd_url,
            self.node_ip,
            serving,
            keys,
            f"--kubelet-client-certificate={admin.cert}",
            f"--kubelet-client-key={admin.key}",
            "--enable-admission-plugins=NodeRestriction",
            authorization="Node,RBAC",
        )
        self.processes["kube-apiserver"] = spawn(apiserver, self.log("kube-apiserver"))
        write_kubeconfig(
            self.admin_kubeconfig, self.server, authority.cert, user="admin", client=admin
        )
        self._wait_apiserver()
        self.processes["kube-controller-manager"] = spawn(
            controller_manager_command(
                bin_dir / "kube-controller-manager",
                self.admin_kubeconfig,
                "serviceaccount-token-controller,serviceaccount-controller,"
                "namespace-controller,garbage-collector-controller,"
                "root-ca-certificate-publisher-controller,node-lifecycle-controller",
                keys[0],
                authority.cert,
            ),
            self.log("kube-controller-manager"),
        )
        self.processes["kube-scheduler"] = spawn(
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
            self.log("kube-scheduler"),
        )

    def _cgroups(self) -> None:
        make_cgroups(self.cgroup_root)

    def _remove_cgroups(self) -> None:
        """Every cgroup under the node's, deepest first (all empty once the node stopped)."""
        for directory in cgroup_dirs(self.cgroup_root):
            if directory.exists():
                remove_tree(directory)

    def _node_namespace(self) -> None:
        """A mount namespace for containerd, its shims and the kubelet (see the module
        docstring): fresh tmpfs on /run and /var/lib, and the kernel tunables the kubelet
        insists on shown to it with the values it wants, so it changes none of this
        machine's. Everything mounted in it goes away with its last process."""
        tunables = self.workdir / "node-sysctl"
        tunables.mkdir()
        ready = self.workdir / "node-namespace.ready"
        script = node_namespace_script(tunables, ready)
        holder = spawn(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            self.log("node-namespace"),
        )
        self.processes["node-namespace"] = holder
        deadline = time.monotonic() + 30
        while not ready.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise NodeUnavailableError("the node's mount namespace was not ready in 30 s")
            time.sleep(0.05)
        self._in_node = ["nsenter", f"--mount=/proc/{holder.pid}/ns/mnt", "--"]

    def _containerd(self) -> None:
        base = self.workdir / "containerd"
        base.mkdir(exist_ok=True)
        config = containerd_config(
            base, self.containerd_socket, self.components, self.workdir / "cni" / "net.d"
        )
        (base / "config.toml").write_text(config)
        env = {
            **os.environ,
            "PATH": f"{self.components.containerd_bin}:{os.environ.get('PATH', '')}",
        }
        self.processes["containerd"] = spawn(
            [
                *self._in_node,
                str(self.components.containerd_bin / "containerd"),
                "--config",
                str(base / "config.toml"),
            ],
            self.log("containerd"),
            env=env,
        )
        deadline = time.monotonic() + 60
        while not self.containerd_socket.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise NodeUnavailableError(
                    f"containerd made no socket in 60 s (log {self.log('containerd')})"
                )
            time.sleep(0.2)
        self.import_image(self.components.pause_archive)

    def ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [
                str(self.components.containerd_bin / "ctr"),
                "--address",
                str(self.containerd_socket),
                "--namespace",
                CONTAINERD_NAMESPACE,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise NodeUnavailableError(f"ctr {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def trust_plain_http_registry(self, host: str) -> None:
        """Let the runtime pull images from the plain-HTTP registry at `host` (a test's
        own, on loopback: containerd shares this machine's network); read at each pull."""
        directory = self.workdir / "containerd" / "certs.d" / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts.toml").write_text(registry_hosts_toml(host))

    def import_image(self, archive: Path) -> None:
        """Import an OCI or docker archive into the runtime the kubelet uses."""
        self.ctr("images", "import", "--no-unpack=false", str(archive))

    def _kubelet(self, authority: Authority) -> None:
        node = authority.issue(
            "kubelet", f"system:node:{NODE_NAME}", organizations=("system:nodes",)
        )
        kubeconfig = write_kubeconfig(
            self.workdir / "kubelet.kubeconfig",
            self.server,
            authority.cert,
            user="kubelet",
            client=node,
        )
        resolv = self.workdir / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions ndots:1\n")
        config = kubelet_config(
            port=free_port(),
            client_ca=authority.cert,
            resolv_conf=resolv,
            runtime_socket=self.containerd_socket,
            pod_logs=self.workdir / "pod-logs",
            cgroup_root=self.cgroup_root,
        )
        (self.workdir / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self.processes["kubelet"] = spawn(
            [
                *self._in_node,
                str(self.components.kube_bin / "kubelet"),
                f"--config={self.workdir / 'kubelet.yaml'}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.kubelet_root}",
                f"--cert-dir={self.workdir / 'kubelet-pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.node_ip}",
                "--v=2",
            ],
            self.log("kubelet"),
        )

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = self.log(name).read_text(errors="replace").strip().splitlines()[-3:]
                raise NodeUnavailableError(
                    f"{name} exited with {process.returncode} at start-up: " + " | ".join(tail)
                )

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self._admin.cert), str(self._admin.key))
        return context

    def get(self, path: str) -> Any:
        return self._request("GET", path)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.server}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=self._ssl_context(), timeout=10) as answer:
            return json.loads(answer.read())

    def create(self, path: str, body: Any) -> Any:
        """POST `body` to `path` as the admin; the stored object."""
        return self._request("POST", path, body)

    def replace(self, path: str, body: Any) -> Any:
        """PUT `body` (an object read from `path`, changed) as the admin; the stored object."""
        return self._request("PUT", path, body)

    def delete(self, path: str, grace_seconds: int | None = None) -> Any:
        body = None if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
        return self._request("DELETE", path, body)

    def watch(self, path: str, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """The events of a watch on `path` (a collection with `?watch=true&...`), read
        until `stop(event)` is true or the server ends the watch (at most 5 minutes)."""
        events: list[dict[str, Any]] = []
        request = urllib.request.Request(f"{self.server}{path}")
        with urllib.request.urlopen(request, context=self._ssl_context(), timeout=300) as answer:
            for line in answer:
                event: dict[str, Any] = json.loads(line)
                events.append(event)
                if stop(event):
                    break
        return events

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def _wait_apiserver(self) -> None:
        wait_apiserver_ready(
            self.server,
            self._ssl_context(),
            self._check_alive,
            START_TIMEOUT_SECONDS,
            NodeUnavailableError,
        )

    def node_ready(self) -> tuple[bool, str]:
        try:
            node = self.get(f"/api/v1/nodes/{NODE_NAME}")
        except urllib.error.HTTPError as exc:
            return False, f"node not registered ({exc.code})"
        for condition in node.get("status", {}).get("conditions", ()):
            if condition["type"] == "Ready":
                return condition["status"] == "True", condition.get("message", "")
        return False, "no Ready condition"

    def _wait_node_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            ready, last = self.node_ready()
            if ready:
                return
            time.sleep(0.5)
        raise NodeUnavailableError(
            f"node {NODE_NAME} not Ready in {START_TIMEOUT_SECONDS:.0f} s: {last} "
            f"(log {self.log('kubelet')})"
        )

    # ---- stop ----

    def close(self) -> None:
        """Pods gone, processes stopped, mounts, bridge and veths removed."""
        kubelet = self.processes.get("kubelet")
        if kubelet is not None and kubelet.poll() is None:
            self._drain()
        for name in ("kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver"):
            process = self.processes.pop(name, None)
            if process is not None:
                stop(process)
        self._stop_runtime()
        holder = self.processes.pop("node-namespace", None)
        if holder is not None:
            stop(holder)
        etcd = self.processes.pop("etcd", None)
        if etcd is not None:
            stop(etcd)
        self._unmount_all()
        self._remove_cgroups()
        ip("link", "del", self.bridge, check=False)
        (OWNERS / self.bridge).unlink(missing_ok=True)
        with suppress(OSError):
            OWNERS.rmdir()  # when no other node runs

    def _drain(self) -> None:
        """Delete every pod and wait (bounded) for the kubelet to stop them."""
        try:
            pods = self.get("/api/v1/pods").get("items", [])
            for pod in pods:
                meta = pod["metadata"]
                with suppress(urllib.error.URLError):
                    self.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", 5)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.get("/api/v1/pods").get("items"):
                time.sleep(0.5)
        except (urllib.error.URLError, OSError):
            pass

    def _stop_runtime(self) -> None:
        """Stop and remove every pod sandbox containerd still has, then containerd."""
        containerd = self.processes.get("containerd")
        if containerd is not None and containerd.poll() is None:
            with suppress(NodeUnavailableError, subprocess.TimeoutExpired):
                for task in self.ctr("tasks", "ls", "-q", timeout=30).stdout.split():
                    subprocess.run(
                        [
                            str(self.components.containerd_bin / "ctr"),
                            "--address",
                            str(self.containerd_socket),
                            "-n",
                            CONTAINERD_NAMESPACE,
                            "tasks",
                            "kill",
                            "-s",
                            "SIGKILL",
                            task,
                        ],
                        capture_output=True,
                        timeout=30,
                        check=False,
                    )
        # shims outlive containerd by design: end the ones of our containerd
        containerd = self.processes.pop("containerd", None)
        if containerd is not None:
            stop(containerd)
        for pid in self._our_shims():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _our_shims(self) -> list[int]:
        return shims_of(self.workdir)

    def _unmount_all(self) -> None:
        unmount_under(self.workdir)

    def leftovers(self) -> list[str]:
        """What the tier left behind: its bridge, veths on it, iptables lines it added,
        mounts under its directory, processes of its containerd."""
        left = []
        if ip("link", "show", self.bridge, check=False).returncode == 0:
            left.append(f"interface {self.bridge}")
        links = json.loads(ip("-j", "link").stdout or "[]")
        left += [f"veth {link['ifname']}" for link in links if link.get("master") == self.bridge]
        now = tier_iptables_lines(self.bridge, str(self.pod_network))
        left += [f"iptables: {line}" for line in now if line not in self.iptables_before]
        left += [f"mount {mount}" for mount in mounts_under(self.workdir)]
        left += [f"shim pid {pid}" for pid in self._our_shims()]
        left += [f"cgroup {d}" for d in cgroup_dirs(self.cgroup_root) if d.exists()]
        return left


@contextmanager
def node_cluster(workdir: Path | None = None) -> Iterator[NodeCluster]:
    """A started single-node cluster, stopped and cleaned afterwards (directory removed)."""
    components = Components.find()
    reap_abandoned()
    with started_in(workdir, "hangwatch-node-", lambda d: NodeCluster(d, components)) as cluster:
        yield cluster
