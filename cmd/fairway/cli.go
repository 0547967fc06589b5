package main

import (
	"github.com/spf13/cobra"

	"github.com/fairway-sched/fairway/cli"
)

// cliGroup groups the client commands in `fairway --help`.
const cliGroup = "cli"

// newCLICommands returns the client commands (package cli): queues, jobs, why, nodes.
func newCLICommands() []*cobra.Command {
	cmds := cli.NewCommands(cli.Options{})
	for _, c := range cmds {
		c.GroupID = cliGroup
	}
	return cmds
}

// newSimCommand returns `fairway sim` (package cli), which needs no cluster.
func newSimCommand() *cobra.Command {
	c := cli.NewSimCommand(cli.Options{})
	c.GroupID = cliGroup
	return c
}
