//go:build tools

// Package tools names the main packages `make tools` builds, so `go mod tidy` keeps them.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)
