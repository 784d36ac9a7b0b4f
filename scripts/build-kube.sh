#!/usr/bin/env bash
# Builds the single-node Kubernetes cluster of the tests/node tier, once, from the Go
# module proxy, and caches each component by version outside the repository:
#
#   $HANGWATCH_KUBE_HOME (default ~/.cache/hangwatch/kube)/
#     kubernetes-vX.Y.Z/bin/  kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
#     kubernetes-vA.B.C/bin/  kube-apiserver kube-controller-manager kubectl (--floor)
#     etcd-vX.Y.Z/bin/        etcd
#     containerd-vX.Y.Z/bin/  containerd containerd-shim-runc-v2 ctr
#     pause-X.Y.Z/            pause (gcc -static of Kubernetes' own pause.c), pause.oci.tar
#     go-goX.Y.Z/             a Go toolchain from the module proxy, only when none here is new enough
#
# The versions are pinned in one place each: the wrapper modules under scripts/kube/
# (kubernetes/go.mod requires k8s.io/kubernetes and replaces every staging module by its
# published v0.Y.Z; etcd/go.mod and containerd/go.mod require the upstream modules), with
# their go.sum. runc and the CNI plugins are Debian's (`runc`, `containernetworking-plugins`).
# A component is rebuilt only when its cached binaries are missing or report another version.
#
# `--floor` does the same for the floor release of tests/kube instead: the oldest minor the
# chart's kubeVersion admits, pinned in scripts/kube/kubernetes-floor/go.mod; only a control
# plane (kube-apiserver, kube-controller-manager, kubectl, built with `-tags providerless`)
# and the same etcd: no kubelet, containerd or pause image.
#
# Usage: scripts/build-kube.sh [--floor] [--check|--paths|--force]
#   --check  exit 0 when every component is cached and runs, 1 otherwise (builds nothing)
#   --paths  print NAME=path lines (versions and cached paths) for the tier's fixtures
#   --force  rebuild everything
# Progress on stderr; the go output in $HANGWATCH_KUBE_HOME/build.log. A failure is one
# line naming the step and what to do; exit 3 for a missing prerequisite, 1 for a failed build.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULES="$ROOT/scripts/kube"
HOME_DIR="${HANGWATCH_KUBE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/kube}"
LOG="$HOME_DIR/build.log"
STEP="start"
STARTED=$SECONDS

say() { printf 'build-kube: %s\n' "$*" >&2; }
fail() { say "step '$STEP' failed: $1 (log: $LOG)"; exit "${2:-1}"; }
missing() { say "step '$STEP': $1"; exit 3; }
floor=""
if [ "${1:-}" = "--floor" ]; then floor=1; shift; fi
elapsed() { printf '%dm%02ds' $(((SECONDS - STARTED) / 60)) $(((SECONDS - STARTED) % 60)); }
step() { STEP="$1"; say "[$(elapsed)] $1: $2"; }

# --- the pinned versions, read from the wrapper modules (their single definition) ---
required() {  # required MODULE_DIR MODULE_PATH -> the version go.mod requires
  awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { print ($1 == m ? $2 : $3); exit }' \
    "$MODULES/$1/go.mod"
}
if [ -n "$floor" ]; then
  KUBE_MODULE=kubernetes-floor KUBE_TAGS=providerless
  KUBE_BINARIES=(kube-apiserver kube-controller-manager kubectl)
else
  KUBE_MODULE=kubernetes KUBE_TAGS=""
  KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
fi
KUBE_VERSION=$(required "$KUBE_MODULE" k8s.io/kubernetes)
ETCD_VERSION=$(required etcd go.etcd.io/etcd/server/v3)
CONTAINERD_VERSION=$(required containerd github.com/containerd/containerd/v2)
# the pause image's version is the one the release's own build/pause/Makefile names
GO_NEEDED=$(awk '$1 == "go" { print $2 }' "$MODULES"/*/go.mod | sort -V | tail -1)
KUBE_BIN="$HOME_DIR/kubernetes-$KUBE_VERSION/bin"
ETCD_BIN="$HOME_DIR/etcd-$ETCD_VERSION/bin"
CONTAINERD_BIN="$HOME_DIR/containerd-$CONTAINERD_VERSION/bin"
CONTAINERD_BINARIES=(containerd containerd-shim-runc-v2 ctr)
PAUSE_IMAGE_REPO="localhost/hangwatch/pause"

kube_ok() {
  local b
  for b in "${KUBE_BINARIES[@]}"; do [ -x "$KUBE_BIN/$b" ] || return 1; done
  # (outputs captured first: grep -q closing a pipe early fails it under pipefail)
  # the API server, and the node's kubelet or else the controller manager
  for b in kube-apiserver "$([ -n "$floor" ] && echo kube-controller-manager || echo kubelet)"; do
    [ "$("$KUBE_BIN/$b" --version 2>/dev/null)" = "Kubernetes $KUBE_VERSION" ] || return 1
  done
}
etcd_ok() { [[ "$("$ETCD_BIN/etcd" --version 2>/dev/null)" == *"etcd Version: ${ETCD_VERSION#v}"* ]]; }
containerd_ok() {
  local b
  for b in "${CONTAINERD_BINARIES[@]}"; do [ -x "$CONTAINERD_BIN/$b" ] || return 1; done
  [[ "$("$CONTAINERD_BIN/containerd" --version 2>/dev/null)" == *" $CONTAINERD_VERSION "* ]]
}
pause_dir() { printf '%s/pause-%s' "$HOME_DIR" "$1"; }
pause_ok() { [ -n "${PAUSE_VERSION:-}" ] && [ -s "$(pause_dir "$PAUSE_VERSION")/pause.oci.tar" ]; }
# the pause version is known once the kubernetes module is downloaded; cached in a file
PAUSE_VERSION=$(cat "$HOME_DIR/pause-version-$KUBE_VERSION" 2>/dev/null || true)
debian_ok() { command -v runc >/dev/null && [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ]; }
all_ok() {
  if [ -n "$floor" ]; then kube_ok && etcd_ok; else kube_ok && etcd_ok && containerd_ok && pause_ok && debian_ok; fi
}

paths() {
  if [ -n "$floor" ]; then
    printf 'KUBE_VERSION=%s\nETCD_VERSION=%s\nKUBE_BIN=%s\nETCD_BIN=%s\n' \
      "$KUBE_VERSION" "$ETCD_VERSION" "$KUBE_BIN" "$ETCD_BIN"
    return
  fi
  cat <<EOF
KUBE_VERSION=$KUBE_VERSION
ETCD_VERSION=$ETCD_VERSION
CONTAINERD_VERSION=$CONTAINERD_VERSION
PAUSE_IMAGE=$PAUSE_IMAGE_REPO:${PAUSE_VERSION:-unknown}
PAUSE_ARCHIVE=$(pause_dir "${PAUSE_VERSION:-unknown}")/pause.oci.tar
KUBE_BIN=$KUBE_BIN
ETCD_BIN=$ETCD_BIN
CONTAINERD_BIN=$CONTAINERD_BIN
CNI_BIN=/usr/lib/cni
RUNC=$(command -v runc || echo /usr/sbin/runc)
EOF
}

force=""
case "${1:-}" in
  --check)
    all_ok && exit 0
    if [ -n "$floor" ]; then
      say "not built: run scripts/build-kube.sh --floor (make kube-floor) to build the floor release, Kubernetes $KUBE_VERSION's control plane, and etcd $ETCD_VERSION into $HOME_DIR"
    else
      say "not built: run scripts/build-kube.sh (make kube) to build Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, containerd $CONTAINERD_VERSION into $HOME_DIR"
    fi
    exit 1 ;;
  --paths) paths; exit 0 ;;
  --force) force=1 ;;
  "") ;;
  *) say "usage: $0 [--floor] [--check|--paths|--force]"; exit 3 ;;
esac

mkdir -p "$HOME_DIR" || { say "cannot create $HOME_DIR"; exit 3; }
exec 9>"$HOME_DIR/.lock"
if ! flock -n 9; then say "another build holds $HOME_DIR/.lock; waiting for it"; flock 9; fi
if [ -z "$force" ] && all_ok && [ -n "$floor" ]; then
  say "the floor release, Kubernetes $KUBE_VERSION's control plane, and etcd $ETCD_VERSION already built in $HOME_DIR"
  exit 0
fi
if [ -z "$force" ] && all_ok; then
  say "Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, containerd $CONTAINERD_VERSION, pause $PAUSE_VERSION already built in $HOME_DIR"
  exit 0
fi
: >"$LOG"

if [ -z "$floor" ]; then  # the node's: the floor release is a control plane only
  step prerequisites "runc, CNI plugins, gcc with a static libc, curl, unzip"
  debian_ok || missing "runc or the CNI plugins are missing: apt-get install runc containernetworking-plugins (scripts/setup.sh does)"
  command -v gcc >/dev/null || missing "gcc not found: apt-get install gcc libc6-dev (scripts/setup.sh does)"
  [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(gcc -print-file-name=libc.a | grep /)" ] \
    || missing "no static libc for the pause binary: apt-get install libc6-dev"
else
  step prerequisites "curl, unzip"
fi
command -v curl >/dev/null || missing "curl not found: apt-get install curl"
command -v unzip >/dev/null || missing "unzip not found: apt-get install unzip"

# --- a Go toolchain at least as new as every wrapper module's `go` line ---
step toolchain "a Go toolchain >= go$GO_NEEDED"
go_version() { "$1" env GOVERSION 2>/dev/null | sed 's/^go//'; }
new_enough() { [ "$(printf '%s\n%s\n' "$GO_NEEDED" "$1" | sort -V | head -1)" = "$GO_NEEDED" ]; }
GO=""
for candidate in "$(command -v go || true)" /usr/local/go/bin/go "$HOME_DIR/go-go$GO_NEEDED/go/bin/go"; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  v=$(go_version "$candidate")
  if [ -n "$v" ] && new_enough "$v"; then GO=$candidate; break; fi
done
if [ -z "$GO" ]; then
  # the official toolchain, as the Go module proxy serves it (what GOTOOLCHAIN would fetch)
  url="${GOPROXY_BASE:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-go$GO_NEEDED.linux-amd64.zip"
  say "no go >= $GO_NEEDED here; fetching go$GO_NEEDED from the module proxy"
  dir="$HOME_DIR/go-go$GO_NEEDED"
  rm -rf "$dir" && mkdir -p "$dir"
  curl -fsSL -o "$dir/toolchain.zip" "$url" >>"$LOG" 2>&1 || fail "cannot download $url: the Go module proxy must be reachable"
  unzip -q "$dir/toolchain.zip" -d "$dir/x" >>"$LOG" 2>&1 || fail "cannot unpack $dir/toolchain.zip"
  mv "$dir/x/golang.org/toolchain@v0.0.1-go$GO_NEEDED.linux-amd64" "$dir/go" && rm -rf "$dir/x" "$dir/toolchain.zip"
  chmod +x "$dir/go/bin/"* "$dir/go/pkg/tool/"*/* 2>/dev/null || true
  GO="$dir/go/bin/go"
fi
say "using $GO ($(go_version "$GO"))"
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -modcacherw"

# Every binary is linked with `-s -w` (no symbol table, no DWARF), so the compiler is told
# not to generate DWARF in the first place (`-gcflags=all=-dwarf=false`): the same
# binaries, about a tenth less compile time (k8s.io/api/core/v1: 9.1 instead of 10.2 CPU
# seconds), and a smaller build cache.
go_build() {  # go_build MODULE OUT_DIR LDFLAGS PACKAGE... (in the wrapper module; tags: $TAGS)
  local module=$1 out=$2 ldflags=$3 started=$SECONDS took
  shift 3
  mkdir -p "$out.tmp"
  (cd "$MODULES/$module" && "$GO" build -tags "${TAGS:-}" -trimpath -gcflags=all=-dwarf=false \
    -ldflags "$ldflags" -o "$out.tmp/" "$@") >>"$LOG" 2>&1 \
    || fail "go build in scripts/kube/$module failed: $(grep -v '^go: downloading' "$LOG" | tail -1)"
  rm -rf "$out" && mv "$out.tmp" "$out"
  # one line per component, which scripts/time_table.py reads into docs/testing-tiers.md
  took=$((SECONDS - started))
  say "$(basename "$(dirname "$out")") took $((took / 60))m$(printf '%02d' $((took % 60)))s"
}

# --- Kubernetes ---
if [ -n "$force" ] || ! kube_ok; then
  step kubernetes "building ${KUBE_BINARIES[*]} $KUBE_VERSION (the long step: $([ -n "$floor" ] && echo "10-15 min" || echo "20-40 min") cold on 2 cores)"
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  pkgs=()
  for b in "${KUBE_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  TAGS=$KUBE_TAGS go_build "$KUBE_MODULE" "$KUBE_BIN" "$ld" "${pkgs[@]}"
  kube_ok || fail "the built binaries do not report Kubernetes $KUBE_VERSION"
fi

# --- etcd ---
if [ -n "$force" ] || ! etcd_ok; then
  step etcd "building etcd $ETCD_VERSION"
  go_build etcd "$ETCD_BIN" "-s -w" go.etcd.io/etcd/server/v3
  mv "$ETCD_BIN/server" "$ETCD_BIN/etcd"  # go names a /v3 main package after "server"
  etcd_ok || fail "the built etcd does not report $ETCD_VERSION"
fi

if [ -n "$floor" ]; then
  all_ok || fail "a component is still missing after the build"
  say "[$(elapsed)] done: the floor release, Kubernetes $KUBE_VERSION's control plane, and etcd $ETCD_VERSION in $HOME_DIR"
  exit 0
fi

# --- containerd (no cgo: the btrfs snapshotter is left out, overlayfs is what we use) ---
if [ -n "$force" ] || ! containerd_ok; then
  step containerd "building ${CONTAINERD_BINARIES[*]} $CONTAINERD_VERSION"
  pkgs=()
  for b in "${CONTAINERD_BINARIES[@]}"; do pkgs+=("github.com/containerd/containerd/v2/cmd/$b"); done
  CGO_ENABLED=0 go_build containerd "$CONTAINERD_BIN" \
    "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION -X github.com/containerd/containerd/v2/version.Revision=$CONTAINERD_VERSION" \
    "${pkgs[@]}"
  containerd_ok || fail "the built containerd does not report $CONTAINERD_VERSION"
fi

# --- the pause image, from the release's own pause.c ---
step pause "the pause binary (gcc -static) and its OCI image"
src=$(cd "$MODULES/kubernetes" && "$GO" mod download k8s.io/kubernetes 2>>"$LOG" \
  && "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes 2>>"$LOG") && [ -d "$src" ] \
  || fail "cannot download the k8s.io/kubernetes module: the Go module proxy must be reachable"
PAUSE_VERSION=$(awk '$1 == "TAG" && $2 == "?=" { print $3 }' "$src/build/pause/Makefile")
[ -n "$PAUSE_VERSION" ] || fail "no TAG in $src/build/pause/Makefile"
echo "$PAUSE_VERSION" >"$HOME_DIR/pause-version-$KUBE_VERSION"
if [ -n "$force" ] || ! pause_ok; then
  dir=$(pause_dir "$PAUSE_VERSION")
  rm -rf "$dir" && mkdir -p "$dir"
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-hangwatch" -o "$dir/pause" \
    "$src/build/pause/linux/pause.c" >>"$LOG" 2>&1 || fail "gcc -static pause.c failed"
  strip "$dir/pause"
  python3 "$MODULES/oci_image.py" --binary "$dir/pause" --entrypoint /pause \
    --name "$PAUSE_IMAGE_REPO:$PAUSE_VERSION" --output "$dir/pause.oci.tar" >>"$LOG" 2>&1 \
    || fail "writing the pause OCI archive failed"
fi

all_ok || fail "a component is still missing after the build"
say "[$(elapsed)] done: Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, containerd $CONTAINERD_VERSION, pause $PAUSE_VERSION in $HOME_DIR"
