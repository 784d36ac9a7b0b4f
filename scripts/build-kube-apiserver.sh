#!/usr/bin/env bash
# Builds the real Kubernetes API server the tests/kube tier runs against, once, and
# caches it outside the repository:
#
#   $HANGWATCH_KUBE_CACHE (default ~/.cache/hangwatch/kube-v1.20.2)/bin/
#     kube-apiserver           built from Debian bookworm's `kubernetes` source package
#     kube-controller-manager  same tree (service-account tokens, namespace deletion, GC)
#     kubectl                  Debian bookworm's kubernetes-client (same source, same version)
#
# v1.20.2 is the newest complete API server any package registry reachable from our
# machines and CI carries (docs/testing-tiers.md says what 1.20 cannot show). The build
# follows Debian's own rules (GOPATH mode, vendored sources) with two additions the
# tarball needs: the generated OpenAPI definitions, and the vendored reflect2 and
# json-iterator replaced by Debian's newer ones (1.0.1 crashes under Go >= 1.18).
#
# Usage: scripts/build-kube-apiserver.sh [--force] [--check]
#   --check  exit 0 when the cached binaries are there and run, 1 otherwise (no build)
#   --force  rebuild even when cached
# Needs: golang-go, dpkg-dev, apt (scripts/setup.sh installs them), root or sudo to add
# a deb-src entry. About 8 minutes on 2 cores, 1.3 GB of memory; progress on stderr.
# A failure is one line naming the step that failed and what to do (log kept in the cache).
set -euo pipefail

KUBE_VERSION=1.20.2
DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
CACHE="${HANGWATCH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/kube-v${KUBE_VERSION}}"
BIN="$CACHE/bin"
LOG="$CACHE/build.log"
BINARIES=(kube-apiserver kube-controller-manager kubectl)
DEB_SRC_FILE=/etc/apt/sources.list.d/hangwatch-deb-src.sources
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
STEP="start"
STARTED=$SECONDS

say() { printf 'build-kube-apiserver: %s\n' "$*" >&2; }
fail() {  # one line: which step, what went wrong, what to do
  say "step '$STEP' failed: $1 (log: $LOG)"
  exit 1
}
elapsed() { printf '%dm%02ds' $(((SECONDS - STARTED) / 60)) $(((SECONDS - STARTED) % 60)); }
step() { STEP="$1"; say "[$(elapsed)] $1: $2"; }

cached_ok() {
  local b
  for b in "${BINARIES[@]}"; do
    [ -x "$BIN/$b" ] || return 1
  done
  "$BIN/kube-apiserver" --version 2>/dev/null | grep -q "v$KUBE_VERSION" || return 1
  "$BIN/kubectl" version --client --short 2>/dev/null | grep -q "v$KUBE_VERSION" || return 1
}

force=""
case "${1:-}" in
  --check) cached_ok && exit 0; say "not built: $BIN lacks a working kube-apiserver v$KUBE_VERSION"; exit 1 ;;
  --force) force=1 ;;
  "") ;;
  *) say "usage: $0 [--force|--check]"; exit 3 ;;
esac

mkdir -p "$CACHE" || { echo "build-kube-apiserver: cannot create $CACHE" >&2; exit 1; }
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  say "another build holds $CACHE/.lock; waiting for it"
  flock 9
fi
if [ -z "$force" ] && cached_ok; then
  say "kube-apiserver v$KUBE_VERSION already built in $BIN"
  exit 0
fi
: >"$LOG"
say "building kube-apiserver v$KUBE_VERSION into $BIN (once; about 8 minutes on 2 cores; log $LOG)"

step tools "checking go, dpkg-source and apt-get"
command -v go >/dev/null || fail "go not found; install golang-go (scripts/setup.sh does)"
command -v dpkg-source >/dev/null || fail "dpkg-source not found; install dpkg-dev (scripts/setup.sh does)"
command -v apt-get >/dev/null || fail "apt-get not found: the sources come from Debian bookworm's archive"
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[ "${go_minor:-0}" -ge 15 ] 2>/dev/null || fail "go $(go env GOVERSION) is too old; install golang-go (1.19 in bookworm)"

WORK="$CACHE/work"
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

step sources "Debian source package kubernetes $DEB_VERSION"
if ! apt-cache showsrc kubernetes 2>/dev/null | grep -qx "Version: $DEB_VERSION"; then
  if [ ! -e "$DEB_SRC_FILE" ]; then
    say "adding a deb-src entry for Debian bookworm ($DEB_SRC_FILE)"
    $SUDO tee "$DEB_SRC_FILE" >/dev/null <<'EOF' || fail "cannot write $DEB_SRC_FILE; run as root or with sudo"
# Added by hangwatch's scripts/build-kube-apiserver.sh: Debian source packages.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  $SUDO apt-get update -qq >>"$LOG" 2>&1 || fail "apt-get update failed; check the network to Debian's archive"
fi
(cd "$WORK" && apt-get source --download-only "kubernetes=$DEB_VERSION") >>"$LOG" 2>&1 ||
  fail "apt-get source kubernetes=$DEB_VERSION failed; Debian bookworm's archive must be reachable"
(cd "$WORK" && dpkg-source -x kubernetes_*.dsc src) >>"$LOG" 2>&1 || fail "dpkg-source -x failed (dpkg-dev)"
rm -f "$WORK"/kubernetes_*
SRC="$WORK/src"

step json-libraries "replacing vendored reflect2 1.0.1 and json-iterator 1.1.10 with Debian's"
(cd "$WORK" && apt-get download golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev) >>"$LOG" 2>&1 ||
  fail "apt-get download of golang-github-modern-go-reflect2-dev/golang-github-json-iterator-go-dev failed"
for deb in "$WORK"/*.deb; do dpkg -x "$deb" "$WORK/debs" || fail "dpkg -x $deb failed"; done
gocode="$WORK/debs/usr/share/gocode/src/github.com"
[ -d "$gocode/modern-go/reflect2" ] && [ -d "$gocode/json-iterator/go" ] || fail "unexpected layout of Debian's Go library packages"
for lib in modern-go/reflect2 json-iterator/go; do
  rm -rf "$SRC/vendor/github.com/$lib"
  cp -a "$gocode/$lib" "$SRC/vendor/github.com/$lib"
  find "$SRC/vendor/github.com/$lib" -name '*_test.go' -delete
done

export GOPATH="$WORK/gopath" GOCACHE="$WORK/gocache" GO111MODULE=off CGO_ENABLED=0 GOFLAGS=""
mkdir -p "$GOPATH/src/k8s.io"
ln -s "$SRC" "$GOPATH/src/k8s.io/kubernetes"
PKG=k8s.io/kubernetes
cd "$GOPATH/src/$PKG"

step openapi "generating pkg/generated/openapi (the tarball lacks it)"
go build -o "$WORK/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen >>"$LOG" 2>&1 || fail "go build of openapi-gen failed"
# The packages Kubernetes' Makefile.generated_files feeds it: every directory (staging
# named as vendor/k8s.io/...) with a `+k8s:openapi-gen=` tag, bar code-generator/sample-apiserver.
dirs=$( { find -H . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune -o -type f -name '*.go' -print |
  xargs grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' | xargs -n1 dirname |
  sed -e 's|^\./||' -e 's|^staging/src|vendor|' | LC_ALL=C sort -u |
  grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
  sed "s|^|$PKG/|" | paste -sd, -; } || true)
[ -n "$dirs" ] || fail "no +k8s:openapi-gen packages found in the source tree"
"$WORK/openapi-gen" --logtostderr -i "$dirs" -p "$PKG/pkg/generated/openapi" -O zz_generated.openapi \
  -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$WORK/violations.report" >>"$LOG" 2>&1 ||
  fail "openapi-gen failed"
[ -s pkg/generated/openapi/zz_generated.openapi.go ] || fail "openapi-gen wrote no definitions"
diff -q "$WORK/violations.report" api/api-rules/violation_exceptions.list >/dev/null ||
  say "note: the API rule report differs from api/api-rules/violation_exceptions.list (lint only)"

step compile "go build kube-apiserver and kube-controller-manager (the long part)"
targets=(./cmd/kube-apiserver ./cmd/kube-controller-manager)
total=$(go list -deps "${targets[@]}" 2>>"$LOG" | wc -l)
[ "$total" -gt 0 ] || fail "go list found no packages (GOPATH mode)"
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in client-go/pkg/version component-base/version; do
  for kv in gitVersion=v$KUBE_VERSION gitMajor=1 gitMinor=20 gitTreeState=clean buildDate=$date \
    gitCommit=debian-$DEB_VERSION; do
    ldflags+=" -X $PKG/vendor/k8s.io/$pkg.$kv"
  done
done
mkdir -p "$WORK/out"
# `go build -v` names each package as it compiles it: count them for progress lines.
set +e
go build -v -trimpath -ldflags "$ldflags" -o "$WORK/out/" "${targets[@]}" 2>&1 |
  tee -a "$LOG" | {
    n=0
    while IFS= read -r _; do
      n=$((n + 1))
      [ $((n % 100)) -ne 0 ] || say "[$(elapsed)] compile: $n/$total packages"
    done
  }
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || fail "go build failed (exit $status; 1.3 GB of free memory needed; see the end of the log)"

step kubectl "Debian bookworm's kubernetes-client $DEB_VERSION (kubectl v$KUBE_VERSION)"
(cd "$WORK" && apt-get download "kubernetes-client=$DEB_VERSION") >>"$LOG" 2>&1 ||
  fail "apt-get download kubernetes-client=$DEB_VERSION failed"
dpkg -x "$WORK"/kubernetes-client_*.deb "$WORK/client" || fail "dpkg -x kubernetes-client failed"
cp "$WORK/client/usr/bin/kubectl" "$WORK/out/kubectl"

step install "checking and caching the binaries in $BIN"
"$WORK/out/kube-apiserver" --version 2>>"$LOG" | grep -q "v$KUBE_VERSION" || fail "the built kube-apiserver does not run"
mkdir -p "$BIN"
for b in "${BINARIES[@]}"; do
  mv -f "$WORK/out/$b" "$BIN/$b.new" && mv -f "$BIN/$b.new" "$BIN/$b"
done
cached_ok || fail "the cached binaries do not run"
say "[$(elapsed)] done: $(ls "$BIN" | tr '\n' ' ')in $BIN"
