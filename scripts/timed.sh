#!/usr/bin/env bash
# `make test`'s phase timer: `scripts/timed.sh PHASE CMD...` runs CMD and then prints
# `make test: PHASE took XmYYs` with CMD's exit status kept; `scripts/timed.sh --machine`
# prints `make test: machine: ...` (cores, CPU model, memory, kernel, commit, UTC start).
# scripts/time_table.py reads both kinds of line from a run's output.
set -uo pipefail
if [ "${1:-}" = --machine ]; then
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  memory=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
  commit=$(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo "no git")
  echo "make test: machine: $(nproc) cores (${model:-unknown CPU}), $memory, Linux $(uname -r), at $commit, started $(date -u '+%Y-%m-%d %H:%M') UTC"
  exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 PHASE CMD... | $0 --machine" >&2; exit 3; }
phase=$1
shift
started=$SECONDS
"$@"
status=$?
took=$((SECONDS - started))
printf 'make test: %s took %dm%02ds%s\n' "$phase" $((took / 60)) $((took % 60)) \
  "$([ "$status" -eq 0 ] || echo " (exit $status)")"
exit "$status"
