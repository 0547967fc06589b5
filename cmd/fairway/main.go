// Command fairway is every fairway component in one binary: the scheduler, the admission
// webhook, the gpu-agent and the command-line client. One image and one version to deploy.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// pluginMode reports whether the binary runs as the kubectl plugin kubectl-fairway: the same
// binary installed (or linked) under that name, which kubectl finds on PATH and runs for
// `kubectl fairway ...` with the arguments after "fairway". Only the help text changes.
func pluginMode() bool {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == "kubectl-fairway"
}
