package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

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
			v := "devel"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "fairway", v)
			return err
		},
	})
	root.AddCommand(newSchedulerCommand())
	root.AddCommand(newWebhookCommand())
	root.AddCommand(newAgentCommand())
	root.AddGroup(&cobra.Group{ID: cliGroup, Title: "Commands for users and administrators:"})
	root.AddCommand(newCLICommands()...)
	if pluginMode() {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fairway"}
	}
	return root
}
