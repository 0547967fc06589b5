//go:build tools

// Package tools names the main packages `make tools` builds, so `go mod tidy` keeps them.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
