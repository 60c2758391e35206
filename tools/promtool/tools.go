//go:build tools

// Package tools pins Prometheus so that `go mod tidy` keeps it, and
// hack/promtool.sh can build promtool with
// `go build github.com/prometheus/prometheus/cmd/promtool`.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
