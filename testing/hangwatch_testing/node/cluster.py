"""A single-node Kubernetes cluster of a current release that runs real pods.

The tests/node tier's session fixture and benchmarks/pod_startup.py use `node_cluster`.
Every binary comes from `scripts/build-kube.sh` (built once from the Go module proxy and
cached by version in ~/.cache/hangwatch/kube): etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kubelet at the release pinned in scripts/kube/kubernetes/go.mod,
containerd v2 with Debian's runc, Debian's CNI plugins, and a pause image built from
the release's own pause.c.

The control plane listens on free ports: etcd, the controller manager and the scheduler
on loopback, kube-apiserver on the node IP (the bridge's address, see below), which
this machine's processes and the pods (a Spark driver creates its executors) reach.
The node's network is the tier's own: a bridge (`hw<random>`) created here with the
first address of a random /24 in 10.0.0.0/8 that no route of this machine covers; the
node IP is that address, the CNI bridge plugin puts every pod on that bridge with an
address from the same /24 (no NAT, no masquerade, no forwarding: pods talk to the node
and to each other on the bridge).
The kubelet makes no iptables chains (`makeIPTablesUtilChains: false`: its
KUBE-FIREWALL rule would drop other tests' non-loopback traffic to 127.0.0.0/8), there
is no kube-proxy, and the Service ClusterIP range is inside 127.0.0.0/8 so the API
server reaches a webhook Service on loopback (the operator runs as a process, as in
tests/kube).

containerd, its shims and the kubelet run in a mount namespace of the node's own, with
fresh tmpfs on /run and /var/lib (shim sockets, pod network namespaces, the CNI cache):
every mount they make (image layers, volumes, network namespaces) goes with it. In it,
the six kernel tunables a kubelet sets machine-wide at start (vm.overcommit_memory=1,
kernel.panic_on_oops=1, ...) are files holding the values it wants, so it changes none
of this shared machine's settings. The pods' cgroups live under a cgroup of the node's
own (`cgroupRoot`), removed afterwards. `close` deletes the pods (the kubelet stops
them), stops every process, removes the cgroups and the bridge, on every exit path;
`leftovers` lists what would be left of the tier's interfaces, iptables rules, mounts,
cgroups and runtime processes (the session fixture fails if anything is). A test
process killed outright cannot clean up: every node records its owner in
/run/hangwatch-node, and the next `node_cluster` first removes what nodes of dead
owners left (`reap_abandoned`: their processes, pods, cgroups, bridge and directory).

This machine's constraints, each met by one setting: cgroup v1 (hybrid) without
systemd, so the cgroupfs driver and `failCgroupV1: false`; a negative oom_score_adj
fails with EIO even as root, so the kubelet's own `oomScoreAdj: 0` and containerd's
`restrict_oom_score_adj` (containers never get a lower score than containerd's 0); no
registry, so the pause image is imported into containerd and pods use local images.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shutil
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
    ClusterUnavailableError,
    apiserver_command,
    built_components,
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
from hangwatch_testing.ports import free_port
from hangwatch_testing.processes import running

NODE_NAME = "hangwatch-node"
START_TIMEOUT_SECONDS = 180.0
CONTAINERD_NAMESPACE = "k8s.io"
CGROUP_FS = Path("/sys/fs/cgroup")
OWNERS = Path("/run/hangwatch-node")
"""One record per started node (file named after its bridge: owner pid and work
directory), so that a later session can clean up after a test process that was killed
before its `close` could run (`reap_abandoned`)."""
KUBELET_TUNABLES = {
    "vm.overcommit_memory": 1,
    "vm.panic_on_oom": 0,
    "kernel.panic": 10,
    "kernel.panic_on_oops": 1,
    "kernel.keys.root_maxkeys": 1000000,
    "kernel.keys.root_maxbytes": 25000000,
}
"""The machine-wide sysctls a kubelet sets to these values at start (its
`setupKernelTunables`); the node's mount namespace shows it them instead."""


class NodeUnavailableError(Exception):
    """The cluster cannot start; the message is one line naming the step and what to do."""


@dataclass(frozen=True)
class Components:
    """The cached binaries and images scripts/build-kube.sh built (`--paths`)."""

    kube_version: str
    kube_bin: Path
    etcd: Path
    containerd_bin: Path
    cni_bin: Path
    runc: Path
    pause_image: str
    pause_archive: Path

    @classmethod
    def find(cls) -> Components:
        try:
            paths = built_components()
        except ClusterUnavailableError as exc:
            raise NodeUnavailableError(str(exc)) from None
        return cls(
            kube_version=paths["KUBE_VERSION"],
            kube_bin=Path(paths["KUBE_BIN"]),
            etcd=Path(paths["ETCD_BIN"]) / "etcd",
            containerd_bin=Path(paths["CONTAINERD_BIN"]),
            cni_bin=Path(paths["CNI_BIN"]),
            runc=Path(paths["RUNC"]),
            pause_image=paths["PAUSE_IMAGE"],
            pause_archive=Path(paths["PAUSE_ARCHIVE"]),
        )


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeUnavailableError(f"ip {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def _used_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    routes = json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]")
    addresses = json.loads(_ip("-j", "-4", "addr").stdout or "[]")
    used = []
    for route in routes:
        dst = route.get("dst", "")
        if dst and dst != "default" and not dst.startswith("127."):
            with suppress(ValueError):
                used.append(ipaddress.ip_network(dst, strict=False))
    for link in addresses:
        for info in link.get("addr_info", ()):
            used.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False))
    return used


def free_pod_network() -> ipaddress.IPv4Network:
    """A random 10.x.y.0/24 that no route or address of this machine overlaps."""
    used = _used_networks()
    for _ in range(200):
        network = ipaddress.IPv4Network(
            f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0/24"
        )
        if not any(network.overlaps(other) for other in used):
            return network
    raise NodeUnavailableError("no free 10.x.y.0/24 for the pod bridge: every one is routed here")


def processes_of(workdir: Path, program: bytes = b"") -> list[int]:
    """Processes whose command line names `workdir` (and contains `program`)."""
    marker = str(workdir).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if program in cmdline and marker in cmdline:
                pids.append(int(entry.name))
    return pids


def shims_of(workdir: Path) -> list[int]:
    """The runc shims of the containerd whose socket is under `workdir`."""
    return processes_of(workdir, b"containerd-shim-runc-v2")


def reap_abandoned() -> list[str]:
    """Clean up after nodes whose test process died without stopping them (SIGKILL, a
    crash): their pods' processes (every process in the node's cgroups), runc shims,
    cgroups, bridge and work directory. Nodes of live processes are left alone. Returns
    the bridges it cleaned."""
    if not OWNERS.is_dir():
        return []
    cleaned = []
    for record in sorted(OWNERS.iterdir()):
        with suppress(OSError, ValueError, KeyError):
            owner = json.loads(record.read_text())
            if running(int(owner["pid"])):
                continue
            workdir = Path(owner["workdir"])
            # the control plane, the runtime and its shims (they all name the directory)
            for pid in processes_of(workdir):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            roots = [h / f"hangwatch-node-{record.name}" for h in CGROUP_FS.iterdir()]
            roots = [root for root in roots if root.is_dir()]
            for root in roots:  # the pods' processes
                for directory, _, _ in os.walk(root):
                    with suppress(OSError):
                        for pid_text in Path(directory, "cgroup.procs").read_text().split():
                            with suppress(ProcessLookupError):
                                os.kill(int(pid_text), signal.SIGKILL)
            deadline = time.monotonic() + 10  # killed processes leave their cgroups soon
            while roots and time.monotonic() < deadline:
                for root in roots:
                    for directory, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
                        with suppress(OSError):
                            os.rmdir(directory)
                roots = [root for root in roots if root.exists()]
                time.sleep(0.1)
            _ip("link", "del", record.name, check=False)
            shutil.rmtree(workdir, ignore_errors=True)
            record.unlink()
            cleaned.append(record.name)
    return cleaned


def tier_iptables_lines(bridge: str, network: str) -> list[str]:
    """Rules and chains in iptables-save that belong to the tier (its bridge, its pod
    network, the chains a kubelet or CNI plugin would create), in every table."""
    marks = (bridge, network, "KUBE-", "CNI-")
    lines: list[str] = []
    for tool in ("iptables-save", "ip6tables-save"):
        if shutil.which(tool) is None:
            continue
        out = subprocess.run([tool], capture_output=True, text=True, check=False).stdout
        lines += [line for line in out.splitlines() if any(mark in line for mark in marks)]
    return lines


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
        return f"hangwatch-node-{self.bridge}"

    def _cgroup_dirs(self) -> list[Path]:
        return [
            hierarchy / self.cgroup_root
            for hierarchy in sorted(CGROUP_FS.iterdir())
            if hierarchy.is_dir() and not hierarchy.is_symlink()
        ]

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
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.node_ip}/{self.pod_network.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        conf = self.workdir / "cni" / "net.d"
        conf.mkdir(parents=True)
        network = {
            "cniVersion": "1.0.0",
            "name": "hangwatch",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                        "ranges": [
                            [
                                {
                                    "subnet": str(self.pod_network),
                                    "gateway": self.node_ip,
                                    "rangeStart": str(self.pod_network.network_address + 10),
                                }
                            ]
                        ],
                    },
                }
            ],
        }
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
        """The node's cgroup in every mounted hierarchy (cpuset: the root's CPUs and
        memory nodes, which a new cgroup v1 cpuset does not inherit)."""
        for directory in self._cgroup_dirs():
            directory.mkdir()
            if directory.parent.name == "cpuset":
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    (directory / knob).write_text((directory.parent / knob).read_text())

    def _remove_cgroups(self) -> None:
        """Every cgroup under the node's, deepest first (all empty once the node stopped)."""
        for directory in self._cgroup_dirs():
            if not directory.exists():
                continue
            for sub, _, _ in sorted(os.walk(directory), key=lambda w: -len(w[0])):
                with suppress(OSError):
                    os.rmdir(sub)

    def _node_namespace(self) -> None:
        """A mount namespace for containerd, its shims and the kubelet (see the module
        docstring): fresh tmpfs on /run and /var/lib, and the kernel tunables the kubelet
        insists on shown to it with the values it wants, so it changes none of this
        machine's. Everything mounted in it goes away with its last process."""
        tunables = self.workdir / "node-sysctl"
        tunables.mkdir()
        binds = []
        for name, value in KUBELET_TUNABLES.items():
            fake = tunables / name
            fake.write_text(f"{value}\n")
            binds.append(f"mount --bind {fake} /proc/sys/{name.replace('.', '/')}")
        ready = self.workdir / "node-namespace.ready"
        script = " && ".join(
            [
                "mount -t tmpfs hangwatch-node-run /run",
                "mount -t tmpfs hangwatch-node-var-lib /var/lib",
                *binds,
                f"touch {ready}",
                "exec sleep infinity",
            ]
        )
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
        config = f"""
version = 3
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.blockfile"]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "{base}/opt"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{self.components.pause_image}"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{self.components.runc}"
        Root = "{base}/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{self.components.cni_bin}"]
    conf_dir = "{self.workdir}/cni/net.d"
    use_internal_loopback = true
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""
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
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(authority.cert)},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            "oomScoreAdj": 0,
            "makeIPTablesUtilChains": False,
            "resolvConf": str(resolv),
            "clusterDomain": "cluster.local",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "staticPodPath": "",
            "podLogsDir": str(self.workdir / "pod-logs"),
            "serializeImagePulls": False,
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "cgroupRoot": f"/{self.cgroup_root}",
            "cgroupsPerQOS": True,
            "enforceNodeAllocatable": ["pods"],
            "localStorageCapacityIsolation": True,
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            "nodeStatusUpdateFrequency": "5s",
            "registerNode": True,
            "logging": {"format": "text"},
        }
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
        _ip("link", "del", self.bridge, check=False)
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
        prefix = str(self.workdir)
        for _ in range(3):
            mounts = [
                line.split()[1]
                for line in Path("/proc/self/mounts").read_text().splitlines()
                if line.split()[1].startswith(prefix)
            ]
            if not mounts:
                return
            for mount in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", mount], capture_output=True, check=False)

    def leftovers(self) -> list[str]:
        """What the tier left behind: its bridge, veths on it, iptables lines it added,
        mounts under its directory, processes of its containerd."""
        left = []
        if _ip("link", "show", self.bridge, check=False).returncode == 0:
            left.append(f"interface {self.bridge}")
        links = json.loads(_ip("-j", "link").stdout or "[]")
        left += [f"veth {link['ifname']}" for link in links if link.get("master") == self.bridge]
        now = tier_iptables_lines(self.bridge, str(self.pod_network))
        left += [f"iptables: {line}" for line in now if line not in self.iptables_before]
        left += [
            f"mount {line.split()[1]}"
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(self.workdir))
        ]
        left += [f"shim pid {pid}" for pid in self._our_shims()]
        left += [f"cgroup {d}" for d in self._cgroup_dirs() if d.exists()]
        return left


@contextmanager
def node_cluster(workdir: Path | None = None) -> Iterator[NodeCluster]:
    """A started single-node cluster, stopped and cleaned afterwards (directory removed)."""
    components = Components.find()
    reap_abandoned()
    with started_in(workdir, "hangwatch-node-", lambda d: NodeCluster(d, components)) as cluster:
        yield cluster
