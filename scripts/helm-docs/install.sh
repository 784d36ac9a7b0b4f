#!/usr/bin/env bash
# Installs helm-docs (github.com/norwoodj/helm-docs), which generates the chart's values
# reference (docs/reference/chart-values.md) from charts/hangwatch/values.yaml, with
# `go install` from the Go module proxy into a cache outside the repository:
#   ${XDG_CACHE_HOME:-~/.cache}/hangwatch/tools/helm-docs-<version>/helm-docs
# A no-op when that binary is there. Prints the binary's path on stdout, progress on stderr.
# Needs a Go toolchain >= 1.22 (helm-docs' go line): `go` on PATH, /usr/local/go, or the
# one scripts/build-kube.sh fetched. Exit 3 (one line) when there is none or the build fails.
set -euo pipefail
VERSION=v1.14.2  # the one pin; scripts/generate_references.py runs this script to find it
GO_NEEDED=1.22
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/tools/helm-docs-$VERSION"
BIN="$DIR/helm-docs"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
new_enough() { [ "$(printf '%s\n%s\n' "$GO_NEEDED" "$1" | sort -V | head -1)" = "$GO_NEEDED" ]; }
GO=""
for candidate in "$(command -v go || true)" /usr/local/go/bin/go \
    "${HANGWATCH_KUBE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/kube}"/go-go*/go/bin/go; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  v=$("$candidate" env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -n "$v" ] && new_enough "$v"; then GO=$candidate; break; fi
done
if [ -z "$GO" ]; then
  echo "helm-docs: no Go >= $GO_NEEDED here: run scripts/build-kube.sh (make kube), which fetches one" >&2
  exit 3
fi
echo "helm-docs: building $VERSION with $GO (a minute or two, once)" >&2
mkdir -p "$DIR"
if ! GOBIN="$DIR" GOTOOLCHAIN=local GOFLAGS=-modcacherw "$GO" install \
    "github.com/norwoodj/helm-docs/cmd/helm-docs@$VERSION" >"$DIR/build.log" 2>&1; then
  echo "helm-docs: go install failed: $(grep -v '^go: downloading' "$DIR/build.log" | tail -1)" >&2
  rm -f "$BIN"
  exit 3
fi
echo "$BIN"
