#!/usr/bin/env bash
# `make image`: builds image/Dockerfile with whichever of docker, podman or buildah is
# present (docker only when its daemon answers). Usage:
#   scripts/build-image.sh IMAGE VERSION [BASE_IMAGE]
# HANGWATCH_IMAGE_TOOL=docker|podman|buildah picks the tool; IMAGE_BUILD_FLAGS adds
# flags to its build command (e.g. "--isolation chroot" for podman/buildah inside a
# container). Without BASE_IMAGE the Dockerfile's default base is used. The build stage
# downloads the dependencies from PyPI (or PIP_INDEX_URL, passed as a build argument).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ -z "$1" ] || [ -z "$2" ]; then
  echo "usage: $0 IMAGE VERSION [BASE_IMAGE]" >&2
  exit 3
fi
image=$1 version=$2 base=${3:-}
tool=${HANGWATCH_IMAGE_TOOL:-}
if [ -z "$tool" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    tool=docker
  elif command -v podman >/dev/null 2>&1; then
    tool=podman
  elif command -v buildah >/dev/null 2>&1; then
    tool=buildah
  else
    echo "make image: no container build tool: install podman or buildah (apt-get install podman), or start docker" >&2
    exit 1
  fi
fi
case "$tool" in
  docker | podman) build=("$tool" build) ;;
  buildah) build=(buildah bud) ;;
  *) echo "make image: HANGWATCH_IMAGE_TOOL must be docker, podman or buildah, got '$tool'" >&2; exit 3 ;;
esac
command -v "$tool" >/dev/null 2>&1 || { echo "make image: $tool not found" >&2; exit 1; }
args=(--file image/Dockerfile --tag "$image" --build-arg "VERSION=$version")
[ -z "$base" ] || args+=(--build-arg "BASE_IMAGE=$base")
[ -z "${PIP_INDEX_URL:-}" ] || args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
revision=$(git rev-parse HEAD 2>/dev/null || true)
[ -z "$revision" ] || args+=(--build-arg "REVISION=$revision")
# pip inside the build trusts what pip here trusts (a proxy's CA): IMAGE_PIP_CERT, else
# PIP_CERT, else pip's configured global.cert, passed as the build secret `pip-cert`.
cert=${IMAGE_PIP_CERT:-${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}}
[ -z "$cert" ] || [ ! -s "$cert" ] || args+=(--secret "id=pip-cert,src=$cert")
# shellcheck disable=SC2206  # IMAGE_BUILD_FLAGS is a list of flags on purpose
extra=(${IMAGE_BUILD_FLAGS:-})
echo "make image: ${build[*]} $image (hangwatch $version${base:+, base $base})" >&2
"${build[@]}" "${args[@]}" "${extra[@]}" .
echo "make image: built $image; push it with: $tool push $image" >&2
