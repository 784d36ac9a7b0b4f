#!/usr/bin/env bash
# Installs everything hangwatch's demo and tests need on a fresh Debian machine:
# iptables (kernel faults in the lab), kcat (an independent Kafka client for tests),
# Go (golang-go; Debian's sarama and kafka-go test builds), Debian's sarama and kafka-go
# sources (real clients the tests build in GOPATH mode), the incidents' own clients at
# their own versions (hangwatch_testing.clients.build, with maven, and Node.js with npm
# for the kafkajs ones), the image test's container
# tools (buildah, podman, runc, debootstrap), Chromium (a test opens the demo's HTML
# report headless), the node tier's CNI plugins and static libc, and the project itself
# with its development extras, in the project's virtual environment .venv. Java's JDK
# (javac) compiles the Java clients and a Spark
# UDF; Maven resolves from Maven Central, once per version, Apache Kafka's jars for the
# lab's real engine (lab/kafka/<line>/pom.xml, cached in ~/.cache/hangwatch/kafka/<version>) and Spark's
# Kafka connector (hangwatch_pipeline/spark-kafka.pom.xml, ~/.cache/hangwatch/spark-kafka),
# for each supported Spark line; the Spark 3.5 line's tests get a virtualenv of their own.
# Safe to run again. `--kube` (what `make test` passes) also builds the Kubernetes
# cluster of the kube and node tiers (and the kube tier's floor release, unless
# HANGWATCH_KUBE_FLOOR=0) when it is not cached, and installs helm-docs (the
# docs' chart values reference), actionlint and syft (scripts/go-tool.sh); `make demo`
# needs none of them.
set -euo pipefail
# timed STEP CMD...: CMD, then `setup: STEP took XmYYs` (scripts/time_table.py reads these
# lines into docs/testing-tiers.md's table); CMD's exit status is the step's.
timed() {
  local step=$1 started=$SECONDS status=0 took
  shift
  "$@" || status=$?
  took=$((SECONDS - started))
  printf 'setup: %s took %dm%02ds%s\n' "$step" $((took / 60)) $((took % 60)) \
    "$([ "$status" -eq 0 ] || echo " (exit $status)")" >&2
  return "$status"
}
# Every Go build setup starts (Kubernetes, etcd, containerd, the Go tools, the Go clients)
# runs its compiler and linker with GOGC=400 unless GOGC is set: the setup's longest
# steps are Go builds, and a compiler that collects garbage less often does the same work
# with a fifth less CPU for about 1.4 times the memory (compiling
# k8s.io/kubernetes/pkg/apis/core/validation and its dependencies from an empty build
# cache, side by side on 2 cores: 81.1 and 80.1 CPU s at Go's default GOGC=100, 65.6 and
# 65.5 at 400, 61.4 at 800; peak 376 MB per compiler at 100, 548 MB at 400, 717 MB at 800).
export GOGC="${GOGC:-400}"
build_kube=""
case "${1:-}" in
  --kube) build_kube=1 ;;
  "") ;;
  *) echo "usage: $0 [--kube]" >&2; exit 3 ;;
esac
cd "$(dirname "$0")/.."
need_apt=()
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
# javac compiles the incidents' Java clients and the Spark view's producer-states UDF
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)  # the Kafka lab's brokers die with it
command -v ss >/dev/null 2>&1 || need_apt+=(iproute2)  # the lab's withhold-answers fault lists a process's connections
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)  # tests/chart's end-to-end alert test
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)  # sarama's zstd dependency uses cgo
# Node.js and npm: the field corpus's kafkajs clients (npm ci of their lockfiles)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || need_apt+=(golang-github-shopify-sarama-dev)
[ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] || need_apt+=(golang-github-segmentio-kafka-go-dev)
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || need_apt+=(runc)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# headless Chromium opens the demo's HTML report in a test, as a reader would
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# the node tier (tests/node): Debian's CNI plugins, a static libc for the pause binary,
# curl and unzip for a Go toolchain from the module proxy when no go here is new enough
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need_apt+=(libc6-dev)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# the project's virtual environment (Debian's python3 ships venv's ensurepip apart)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v unzip >/dev/null 2>&1 || need_apt+=(unzip)
# `make release`, `make publish` and the node tier's install from a registry: skopeo pushes
# the image, the CNCF distribution server (Debian's docker-registry) is the registry; and
# `make check`'s actionlint checks the release workflow's scripts with shellcheck
command -v skopeo >/dev/null 2>&1 || need_apt+=(skopeo)
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} from Debian" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # The prometheus and alertmanager packages must not start a server of their own (tests start theirs):
  # forbid service starts during the install, only if nothing else already decides that.
  added_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  timed "Debian packages" $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  [ -z "$added_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
fi
# The Kubernetes of tests/kube (control plane only) and tests/node (a node that runs
# pods): Kubernetes, etcd and containerd from the Go module proxy (20-40 minutes cold on
# 2 cores, docs/testing-tiers.md), a no-op when cached; then the floor release of
# tests/kube (the oldest minor the chart's kubeVersion admits): its control plane only,
# 10-15 minutes cold, a no-op when cached; HANGWATCH_KUBE_FLOOR=0 (`make test
# KUBE_FLOOR=0`) leaves it out, and its tests with it. Both build in the background, in a
# session of their own, while the steps below download and install (their lines are
# interleaved, each named by its tool); setup waits for them at the end and fails with
# them, and stops them should setup itself fail or be interrupted. The upstream Go tools
# (scripts/go-tool.sh: `go install` into ~/.cache/hangwatch/tools, once, a no-op when
# there) need a Go >= 1.22, which the first build guarantees: helm-docs (the docs' chart
# values reference), actionlint (`make check` runs it on the release workflow) and syft
# (the image's SBOM in `make release`, which the node tier runs) build one after the
# other beside the floor release rather than after it.
background=()
stop_background() {
  local pid
  for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
# wait_background NAME PID: PID's exit status, or setup fails naming NAME
wait_background() {
  local status=0
  wait "$2" || status=$?
  [ "$status" -eq 0 ] || { echo "setup: $1 failed (its lines above say why)" >&2; exit "$status"; }
}
trap stop_background EXIT
trap 'stop_background; exit 130' INT
trap 'stop_background; exit 143' TERM
kube_pid=""
if [ -n "$build_kube" ]; then
  floor="${HANGWATCH_KUBE_FLOOR:-1}"
  setsid --wait bash -c '
    bash scripts/build-kube.sh || exit
    { bash scripts/helm-docs/install.sh && bash scripts/go-tool.sh actionlint \
      && bash scripts/go-tool.sh syft; } >/dev/null & tools=$!
    status=0
    [ "$1" = 0 ] || bash scripts/build-kube.sh --floor || status=$?
    wait "$tools" || status=$?
    exit "$status"' build-kube "$floor" &
  kube_pid=$!
  background+=("$kube_pid")
fi
# Everything Python goes into the project's own virtual environment (HANGWATCH_VENV,
# default .venv; the Makefile runs everything through its python): the machine's Python
# and its site-packages are left as they were.
venv=${HANGWATCH_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the project's virtual environment $venv (the machine's Python is left alone)" >&2
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
echo "setup: installing hangwatch-producer and hangwatch with its dev extras into $venv (pip)" >&2
# hangwatch depends on hangwatch-producer (producer/, the wrapper an executor image
# installs alone), which is not on PyPI: both come from this repository, editable.
timed "pip install of hangwatch into $venv" "$py" -m pip install --quiet \
  --disable-pip-version-check --root-user-action=ignore -e ./producer -e '.[dev]'
# Then two chains side by side (each step needs the project's Python above; the Maven
# steps share ~/.m2, which Maven does not lock, so they run one after the other):
# - Apache Kafka's broker and tools jars for `hangwatch lab up --engine kafka`, both
#   lines: the default 4.x and 3.9 (the incidents' clients older than 2.1); a no-op when
#   cached, about a minute each from an empty Maven repository. Then the lab's brokers'
#   class-data archive (hangwatch_lab.kafka.class_archive: one broker started and stopped,
#   `java -Xshare:dump`; about 15 s, once per Kafka version, Java and broker options):
#   every broker JVM maps Kafka's classes from it instead of parsing and verifying them
#   (only faster: should it fail, setup goes on, the brokers run without it and
#   tests/lab/test_broker_class_data.py fails on its build).
#   Spark's Kafka connector
#   and the jars it needs beside pyspark's, for each supported Spark line (4.x, 3.5:
#   hangwatch_pipeline.spark_kafka.LINES; a no-op when cached; about 40 s per line from an
#   empty Maven repository). Every client of testing/clients (Debian's Go packages; the
#   incidents' own clients at their own versions from the Go module proxy, Maven Central
#   and PyPI), built into ~/.cache/hangwatch/clients; a no-op when cached.
# - The 3.5 line's own virtualenv (one environment holds one pyspark): pyspark 3.5.7 and
#   the test extra, hangwatch editable from here, in ~/.cache/hangwatch/spark-3.5/venv; a
#   no-op when built for this pyproject.toml (about 1-2 minutes otherwise).
# (Each chain is a session of its own, as the Kubernetes build, so that stopping setup
# stops everything it started.)
export -f timed
setsid --wait bash -c '
  set -e
  timed "Apache Kafka'"'"'s jars" "$1" -m hangwatch_lab.kafkajars >/dev/null
  timed "the brokers'"'"' class-data archive" "$1" -m hangwatch_lab.kafka.class_archive >/dev/null \
    || echo "setup: the brokers'"'"' class-data archive failed (above); the brokers run without it"
  timed "Spark'"'"'s Kafka connector" "$1" -m hangwatch_pipeline.spark_kafka --all
  timed "the clients of testing/clients" "$1" -m hangwatch_testing.clients.build >/dev/null
' maven "$py" &
maven_pid=$!
background+=("$maven_pid")
setsid --wait bash -c 'timed "the Spark 3.5 line'"'"'s virtualenv" "$1" -m hangwatch_testing.spark_line_env' \
  spark-line "$py" &
line_pid=$!
background+=("$line_pid")
# With --kube, the roots and images the image, node and producer tiers start from, each
# cached by content (hangwatch_testing.prebuilt; minutes each cold, a no-op when cached),
# so that no test builds them: the bookworm base root (debootstrap) and bullseye's Python
# 3.9 root beside the chains above; the default Spark line's image once the base and the
# connectors' jars are there, then the hangwatch image (`make image` on that base); last
# the stock-like Spark base (hangwatch_testing.stock_spark).
roots_pid="" python39_pid=""
if [ -n "$build_kube" ]; then
  setsid --wait bash -c 'timed "the bookworm base root" "$1" -m hangwatch_testing.prebuilt base' \
    base "$py" &
  roots_pid=$!
  setsid --wait bash -c 'timed "the bullseye Python 3.9 root" "$1" -m hangwatch_testing.prebuilt python39' \
    python39 "$py" &
  python39_pid=$!
  background+=("$roots_pid" "$python39_pid")
fi
wait_background "downloading jars or building the clients" "$maven_pid"
if [ -n "$build_kube" ]; then
  wait_background "building the bookworm base root" "$roots_pid"
  timed "the Spark images" "$py" -m hangwatch_testing.prebuilt spark-images
  timed "the hangwatch image" "$py" -m hangwatch_testing.prebuilt hangwatch-image
  wait_background "building bullseye's Python 3.9 root" "$python39_pid"
fi
wait_background "building the Spark 3.5 line's virtualenv" "$line_pid"
# The stock-like Spark base the example's image is built on (the bullseye root and the
# 3.5 line's distribution, both above): the node tier's install from registries.
[ -z "$build_kube" ] || timed "the stock-like Spark base" "$py" -m hangwatch_testing.prebuilt spark-stock
# The Kubernetes builds and the Go tools started above: their exit status is setup's.
[ -z "$kube_pid" ] || wait_background "the Kubernetes build" "$kube_pid"
background=()
echo "setup: done in $((SECONDS / 60))m$(printf '%02d' $((SECONDS % 60)))s" >&2
