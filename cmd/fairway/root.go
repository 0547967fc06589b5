package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is fairway's version, stamped by the image build (the Dockerfile's VERSION argument)
// and `make build`: go build -ldflags "-X main.version=v0.3.0".
var version string

// fairwayVersion is the stamped version, else the module version `go install` records, else
// "devel".
func fairwayVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fairway",
		Short:         "fairway: a Kubernetes GPU scheduler for MLOps pipelines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "fairway", fairwayVersion())
			return err
		},
	})
	root.AddCommand(newSchedulerCommand())
	root.AddCommand(newWebhookCommand())
	root.AddCommand(newAgentCommand())
	root.AddGroup(&cobra.Group{ID: cliGroup, Title: "Commands for users and administrators:"})
	root.AddCommand(newCLICommands()...)
	root.AddCommand(newSimCommand())
	root.AddCommand(newConsoleCommand())
	if pluginMode() {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fairway"}
	}
	return root
}
