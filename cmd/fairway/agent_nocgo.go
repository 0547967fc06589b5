//go:build !cgo

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// Without cgo there is no go-nvml (it loads libnvidia-ml.so with dlopen), so no gpu-agent; the
// other components of the binary build and run as usual.
func newAgentCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the gpu-agent (unavailable: this binary was built without cgo)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the gpu-agent needs cgo (go-nvml loads libnvidia-ml.so with dlopen); rebuild with CGO_ENABLED=1")
		},
	}
}
