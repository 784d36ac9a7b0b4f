"""The node tier's build, as scripts/build-kube.sh reports it, and the error a node's
start raises.

Every binary comes from `scripts/build-kube.sh` (built once from the Go module proxy and
cached by version in ~/.cache/hangwatch/kube): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kubelet at the release pinned in
scripts/kube/kubernetes/go.mod, containerd v2 with Debian's runc, Debian's CNI plugins,
and a pause image built from the release's own pause.c.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hangwatch_testing.kube.cluster import ClusterUnavailableError, built_components

NODE_NAME = "hangwatch-node"
"""The one node's name (the kubelet's `--hostname-override`)."""


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
        """The cached build, or one line naming the missing build and what to run."""
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
