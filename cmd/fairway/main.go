// Command fairway is every fairway component in one binary: the scheduler, the admission
// webhook, the gpu-agent and the command-line client. One image and one version to deploy.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
