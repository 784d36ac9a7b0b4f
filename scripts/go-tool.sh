#!/usr/bin/env bash
# Installs one of the upstream Go tools hangwatch's checks and release use, with
# `go install MODULE@VERSION` from the Go module proxy (checked against Go's checksum
# database) into a cache outside the repository:
#   ${XDG_CACHE_HOME:-~/.cache}/hangwatch/tools/<tool>-<version>/<tool>
# A no-op when that binary is there. Prints the binary's path on stdout, progress on stderr.
#   scripts/go-tool.sh helm-docs    the chart's values reference (docs/reference/chart-values.md)
#   scripts/go-tool.sh actionlint   the release workflow's linter (`make check`)
#   scripts/go-tool.sh syft         the image's SBOM (`make release`)
# Needs a Go toolchain at least the tool's `go` line: `go` on PATH, /usr/local/go, or the
# one scripts/build-kube.sh fetched. Exit 3 (one line) when there is none, the tool is
# unknown or the build fails.
set -euo pipefail
# tool -> "module/cmd/path version oldest-go": the one pin of each.
declare -A TOOLS=(
  [helm-docs]="github.com/norwoodj/helm-docs/cmd/helm-docs v1.14.2 1.22"
  [actionlint]="github.com/rhysd/actionlint/cmd/actionlint v1.7.12 1.25"
  [syft]="github.com/anchore/syft/cmd/syft v1.57.1 1.26.8"
)
tool=${1:-}
if [ $# -ne 1 ] || [ -z "${TOOLS[$tool]:-}" ]; then
  echo "usage: $0 {$(printf '%s\n' "${!TOOLS[@]}" | sort | paste -sd'|')}" >&2
  exit 3
fi
read -r module version go_needed <<<"${TOOLS[$tool]}"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/tools/$tool-$version"
BIN="$DIR/$tool"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
new_enough() { [ "$(printf '%s\n%s\n' "$go_needed" "$1" | sort -V | head -1)" = "$go_needed" ]; }
GO=""
for candidate in "$(command -v go || true)" /usr/local/go/bin/go \
    "${HANGWATCH_KUBE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/kube}"/go-go*/go/bin/go; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  v=$("$candidate" env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -n "$v" ] && new_enough "$v"; then GO=$candidate; break; fi
done
if [ -z "$GO" ]; then
  echo "$tool: no Go >= $go_needed here: run scripts/build-kube.sh (make kube), which fetches one" >&2
  exit 3
fi
echo "$tool: building $version with $GO (once; cached in $DIR)" >&2
mkdir -p "$DIR"
if ! GOBIN="$DIR" GOTOOLCHAIN=local GOFLAGS=-modcacherw "$GO" install "$module@$version" \
    >"$DIR/build.log" 2>&1; then
  echo "$tool: go install failed: $(grep -v '^go: downloading' "$DIR/build.log" | tail -1)" >&2
  rm -f "$BIN"
  exit 3
fi
echo "$BIN"
