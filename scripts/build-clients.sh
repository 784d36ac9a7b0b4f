#!/usr/bin/env bash
# Builds the incidents' own Kafka clients (testing/clients/incidents, see its README) at
# their exact versions, from the registries, into a cache outside the repository:
#   ${XDG_CACHE_HOME:-~/.cache}/hangwatch/incident-clients/<client>/<key>/
# where <key> hashes the client's sources, its go.mod/pom and the toolchain's version, so
# an edit or a new toolchain builds again and anything else is a no-op.
#   Go (sarama, kafka-go): `go build -modfile=<the version's .mod>` -> <dir>/bin; modules
#     come from the Go module proxy into Go's module cache, checked against go.sum.
#   Java (kafka_2.11, kafka-clients): `mvn dependency:copy-dependencies` on the client's
#     pom -> <dir>/lib (Maven's ~/.m2 caches the downloads), `javac` -> <dir>/classes
#     (kafka-clients-3.9.2, Spark's client, has one program: HealthyProducer, S4's control).
# Prints one line per client: `<client> <dir>`. Progress goes to stderr.
#   usage: scripts/build-clients.sh [client ...]   (no client: all of them)
# Exit 3 (one line naming the step) when a toolchain is missing or a resolve/build fails.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=testing/clients/incidents
COMMON=$SRC/java/common  # compiled with every Java program (their progress lines)
GO_COMMON=$SRC/progress  # the Go programs' progress lines (a local module they replace in)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hangwatch/incident-clients"
ALL=(sarama-v1.37.2 sarama-v1.38.0 kafka-go-v0.4.8 kafka-go-v0.4.9 kafka_2.11-0.8.2.2 kafka-clients-0.11.0.3
     kafka-clients-3.9.2)

fail() { echo "build-clients: $1" >&2; exit 3; }

# <client> -> "<kind> <source dir> <version file>"
layout() {
  case "$1" in
    sarama-v1.37.2) echo "go $SRC/sarama go.mod" ;;
    sarama-v1.38.0) echo "go $SRC/sarama v1.38.0.mod" ;;
    kafka-go-v0.4.8) echo "go $SRC/kafka-go go.mod" ;;
    kafka-go-v0.4.9) echo "go $SRC/kafka-go v0.4.9.mod" ;;  # S1's control (the fix)
    kafka_2.11-0.8.2.2) echo "java $SRC/java/kafka_2.11-0.8.2.2 pom.xml" ;;
    kafka-clients-0.11.0.3) echo "java $SRC/java/kafka-clients-0.11.0.3 pom.xml" ;;
    kafka-clients-3.9.2) echo "java $SRC/java/kafka-clients-3.9.2 pom.xml" ;;  # Spark's; HealthyProducer
    *) fail "unknown client '$1' (one of: ${ALL[*]})" ;;
  esac
}

toolchain() {
  if [ "$1" = go ]; then
    command -v go >/dev/null 2>&1 || fail "no Go toolchain: run scripts/setup.sh (installs golang-go)"
    go version
  else
    command -v javac >/dev/null 2>&1 || fail "no javac: run scripts/setup.sh (installs openjdk-17-jdk-headless)"
    command -v mvn >/dev/null 2>&1 || fail "no mvn: run scripts/setup.sh (installs maven)"
    javac -version 2>&1
  fi
}

build() {
  local client=$1 kind dir modfile key out tmp log why
  layout "$client" >/dev/null  # an unknown client fails here, in this shell
  read -r kind dir modfile <<<"$(layout "$client")"
  local tools; tools=$(toolchain "$kind") || exit 3
  key=$( { echo "$tools"; cat "$dir/$modfile"; [ "$kind" = java ] || cat "$dir/${modfile%.mod}.sum";
           cat "$dir"/*.go "$dir"/*.java 2>/dev/null || true
           if [ "$kind" = go ]; then cat "$GO_COMMON"/*.go "$GO_COMMON"/go.mod; else cat "$COMMON"/*.java; fi
         } | sha256sum | cut -c1-12)
  out="$CACHE/$client/$key"
  mkdir -p "$CACHE/$client"
  exec 9>"$CACHE/$client/.lock"
  flock 9  # parallel test workers: one builds, the others wait and reuse
  if [ ! -e "$out/.done" ]; then
    echo "build-clients: building $client ($kind) into $out ..." >&2
    tmp=$(mktemp -d "$CACHE/$client/.tmp.XXXXXX")
    log="$tmp/build.log"
    if [ "$kind" = go ]; then
      (cd "$dir" && GOFLAGS=-mod=readonly go build -modfile="$modfile" -o "$tmp/bin" .) >"$log" 2>&1 \
        || { why=$(tail -1 "$log"); rm -rf "$tmp"; fail "go build of $client failed (Go module proxy reachable?): $why"; }
    else
      mvn -q -B -f "$dir/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
          -DoutputDirectory="$tmp/lib" >"$log" 2>&1 \
        || { why=$(grep -m1 'ERROR' "$log" | cut -c1-200); rm -rf "$tmp"; fail "mvn could not resolve $client (Maven Central reachable?): $why"; }
      if compgen -G "$dir/*.java" >/dev/null; then
        javac -nowarn -d "$tmp/classes" -cp "$tmp/lib/*" "$dir"/*.java "$COMMON"/*.java >"$log" 2>&1 \
          || { why=$(head -1 "$log"); rm -rf "$tmp"; fail "javac of $client failed: $why"; }
      fi
    fi
    touch "$tmp/.done"
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build-clients: built $client" >&2
  fi
  exec 9>&-
  echo "$client $out"
}

[ $# -gt 0 ] || set -- "${ALL[@]}"
for client in "$@"; do build "$client"; done
