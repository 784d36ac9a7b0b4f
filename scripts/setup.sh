#!/usr/bin/env bash
# Installs everything hangwatch's demo and tests need on a fresh Debian machine:
# iptables (kernel faults in the lab), kcat (an independent Kafka client for tests),
# Go with Debian's sarama and kafka-go sources (real clients the tests build in GOPATH
# mode), and the project itself with its development extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)  # sarama's zstd dependency uses cgo
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || need_apt+=(golang-github-shopify-sarama-dev)
[ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] || need_apt+=(golang-github-segmentio-kafka-go-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} from Debian" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # The prometheus package must not start a server of its own (tests start theirs):
  # forbid service starts during the install, only if nothing else already decides that.
  added_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  [ -z "$added_policy" ] || $SUDO rm -f /usr/sbin/policy-rc.d
fi
echo "setup: installing hangwatch with its dev extras (pip)" >&2
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[dev]'
