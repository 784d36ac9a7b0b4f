#!/usr/bin/env bash
# Installs helm-docs (github.com/norwoodj/helm-docs), which generates the chart's values
# reference (docs/reference/chart-values.md) from charts/hangwatch/values.yaml: the
# project's Go tools' one installer (scripts/go-tool.sh, which holds its pin) into
# ${XDG_CACHE_HOME:-~/.cache}/hangwatch/tools/helm-docs-<version>/helm-docs.
# Prints the binary's path on stdout, progress on stderr; exit 3 (one line) on failure.
exec bash "$(dirname "$0")/../go-tool.sh" helm-docs
