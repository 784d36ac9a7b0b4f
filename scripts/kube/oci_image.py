"""Writes a one-layer OCI image archive holding a single static binary.

scripts/build-kube.sh uses it for the pause image (Kubernetes' own pause.c, built with
gcc -static): no registry is reachable and no image tool is needed for one file. The
archive is an OCI image layout in a tar, which `ctr images import` reads; the image
name is in both the OCI ref-name and containerd's image-name annotations. The output is
byte-for-byte reproducible for the same binary (fixed mtimes, owners and order).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def _tar(members: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of `name -> (content, mode)` with root owners and mtime 0."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (content, mode) in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), mode, 0
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _blob(content: bytes) -> tuple[str, str]:
    digest = hashlib.sha256(content).hexdigest()
    return f"sha256:{digest}", f"blobs/sha256/{digest}"


def image_archive(binary: Path, entrypoint: str, name: str) -> bytes:
    layer = _tar({entrypoint.lstrip("/"): (binary.read_bytes(), 0o755)})
    layer_digest, layer_path = _blob(layer)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": [entrypoint], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        },
        sort_keys=True,
    ).encode()
    config_digest, config_path = _blob(config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
        },
        sort_keys=True,
    ).encode()
    manifest_digest, manifest_path = _blob(manifest)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": MANIFEST_TYPE,
                "digest": manifest_digest,
                "size": len(manifest),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name,
                },
            }
        ],
    }
    return _tar(
        {
            "oci-layout": (b'{"imageLayoutVersion":"1.0.0"}', 0o644),
            "index.json": (json.dumps(index, sort_keys=True).encode(), 0o644),
            layer_path: (layer, 0o644),
            config_path: (config, 0o644),
            manifest_path: (manifest, 0o644),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--name", required=True, help="the full image reference")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    args.output.write_bytes(image_archive(args.binary, args.entrypoint, args.name))


if __name__ == "__main__":
    main()
