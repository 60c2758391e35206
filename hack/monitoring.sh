#!/usr/bin/env bash
# monitoring.sh regenerates the chart's alert rules and Grafana dashboard
# (charts/headroom/files/prometheus-rules.yaml, grafana-dashboard.json) from
# package monitoring. go test ./monitoring fails until the committed files
# are what the code generates.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go test ./monitoring -run TestGeneratedFilesAreCommitted -update
