//go:build tools

// Package tools pins the etcd server so that `go mod tidy` keeps it, and
// hack/e2e-assets.sh can build it with `go build go.etcd.io/etcd/server/v3`.
package tools

import _ "go.etcd.io/etcd/server/v3"
