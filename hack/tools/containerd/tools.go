//go:build tools

// Package tools names the main packages `hack/build-tools.sh containerd` builds, so `go mod tidy`
// keeps them.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
