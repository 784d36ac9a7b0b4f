"""What the node's processes are told: containerd's configuration, the kubelet's, and
the mount namespace they run in.

containerd, its shims and the kubelet run in a mount namespace of the node's own, with
fresh tmpfs on /run and /var/lib (shim sockets, pod network namespaces, the CNI cache):
every mount they make (image layers, volumes, network namespaces) goes with it. In it,
the six kernel tunables a kubelet sets machine-wide at start (vm.overcommit_memory=1,
kernel.panic_on_oops=1, ...) are files holding the values it wants, so it changes none
of this shared machine's settings. The kubelet makes no iptables chains
(`makeIPTablesUtilChains: false`: its KUBE-FIREWALL rule would drop other tests'
non-loopback traffic to 127.0.0.0/8).

This machine's constraints, each met by one setting: cgroup v1 (hybrid) without
systemd, so the cgroupfs driver and `failCgroupV1: false`; a negative oom_score_adj
fails with EIO even as root, so the kubelet's own `oomScoreAdj: 0` and containerd's
`restrict_oom_score_adj` (containers never get a lower score than containerd's 0); no
registry, so the pause image is imported into containerd and pods use local images;
a test's own registry on loopback is named in containerd's hosts directory
(`NodeCluster.trust_plain_http_registry`, `registry_hosts_toml`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hangwatch_testing.node.components import Components

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


def node_namespace_script(tunables: Path, ready: Path) -> str:
    """The shell command that makes the node's mount namespace (run under `unshare
    --mount`): tmpfs on /run and /var/lib, each of `KUBELET_TUNABLES` bound over its
    /proc/sys file from a file under `tunables` holding the value the kubelet wants
    (written here), then `ready` touched, then sleep holding the namespace."""
    binds = []
    for name, value in KUBELET_TUNABLES.items():
        fake = tunables / name
        fake.write_text(f"{value}\n")
        binds.append(f"mount --bind {fake} /proc/sys/{name.replace('.', '/')}")
    return " && ".join(
        [
            "mount -t tmpfs hangwatch-node-run /run",
            "mount -t tmpfs hangwatch-node-var-lib /var/lib",
            *binds,
            f"touch {ready}",
            "exec sleep infinity",
        ]
    )


def containerd_config(base: Path, socket: Path, components: Components, cni_conf_dir: Path) -> str:
    """containerd's config.toml: state under `base`, listening on `socket`, CRI with
    runc (cgroupfs, no lower OOM score than its own), the CNI plugins of the build with
    the networks in `cni_conf_dir`, the pause image pinned."""
    return f"""
version = 3
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.blockfile"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "{base}/opt"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{components.pause_image}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{base}/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{components.runc}"
        Root = "{base}/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{components.cni_bin}"]
    conf_dir = "{cni_conf_dir}"
    use_internal_loopback = true
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def registry_hosts_toml(host: str) -> str:
    """containerd's hosts.toml for a registry at `host` (`127.0.0.1:PORT`) that speaks
    plain HTTP: a test's own registry on loopback, the only one this machine has."""
    return (
        f'server = "http://{host}"\n[host."http://{host}"]\n  capabilities = ["pull", "resolve"]\n'
    )


def kubelet_config(
    *,
    port: int,
    client_ca: Path,
    resolv_conf: Path,
    runtime_socket: Path,
    pod_logs: Path,
    cgroup_root: str,
) -> dict[str, Any]:
    """The KubeletConfiguration: serving on loopback `port` (webhook authentication and
    authorization, clients of `client_ca`), containerd at `runtime_socket`, the pods'
    cgroups under `cgroup_root`, no iptables chains, 5 s syncs."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,
        "makeIPTablesUtilChains": False,
        "resolvConf": str(resolv_conf),
        "clusterDomain": "cluster.local",
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        "staticPodPath": "",
        "podLogsDir": str(pod_logs),
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "cgroupRoot": f"/{cgroup_root}",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "localStorageCapacityIsolation": True,
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "nodeStatusUpdateFrequency": "5s",
        "registerNode": True,
        "logging": {"format": "text"},
    }
