package cli

import (
	"github.com/spf13/cobra"
)

// NewCommands returns the client commands: queues, jobs, why, nodes and policy. Each starts from a copy
// of base, so tests can set Client and Now; flags fill in the rest.
func NewCommands(base Options) []*cobra.Command {
	queues := func() *cobra.Command {
		o := &QueuesOptions{Options: base.clone()}
		var resources []string
		cmd := &cobra.Command{
			Use:   "queues",
			Short: "Show the queue tree: guaranteed, fair share, allocated, borrowed and pending per resource",
			Long: `Show every Queue as a tree (departments, then their projects) with, per resource, the
guaranteed quota (and limit), the fair share the scheduler computed, what the queue's pods hold,
what they borrow above the guarantee, and what waiting pods ask for.`,
			Example: "  fairway queues\n  fairway queues --resources gpu,cpu,memory\n  fairway queues -o yaml",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				var err error
				if o.Resources, err = ParseResources(resources); err != nil {
					return err
				}
				return run(cmd, o.Options, func() error { return RunQueues(cmd.Context(), o) })
			},
		}
		o.AddFlags(cmd.Flags(), false)
		cmd.Flags().StringSliceVar(&resources, "resources", []string{"gpu"}, "Resources to show: gpu, cpu, memory, gpu/<type>.")
		return cmd
	}
	jobs := func() *cobra.Command {
		o := base.clone()
		cmd := &cobra.Command{
			Use:   "jobs",
			Short: "List gangs (PodGroups) with queue, priority, state, GPUs or shares, and wait time",
			Long: `List the gangs (PodGroups) and the fairway pods outside any gang of the namespace (-n, else the
kubeconfig's), or of every namespace (-A). The replicas of a Deployment or a StatefulSet, each a
gang of its own, make one row named after it (deployment/NAME, statefulset/NAME). An empty
namespace is answered with the namespaces that have jobs.`,
			Example: "  fairway jobs -n team-a\n  fairway jobs -A -o json",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return run(cmd, o, func() error { return RunJobs(cmd.Context(), o) })
			},
		}
		o.AddFlags(cmd.Flags(), true)
		return cmd
	}
	why := func() *cobra.Command {
		o := base.clone()
		cmd := &cobra.Command{
			Use:   "why (POD | PODGROUP | pod/NAME | podgroup/NAME | workflow/NAME)",
			Short: "Explain why a pod, gang or pipeline run waits, and what would unblock it; or where it runs",
			Long: `Explain one PodGroup or pod: while it waits, the scheduler's reason code and message and what
would unblock it; once placed, the nodes its pods run on and, for a GPU share, which GPU and who
shares it; and the last time fairway evicted one of its pods (when, why, for whom), from the
events on them. A bare NAME is looked up as a PodGroup first, then as a pod. When the namespace has
neither, the other namespaces you may read are searched and the -n to add is printed.`,
			Example: "  fairway why train-llama -n team-a\n  fairway why pod/notebook-0 -n team-b\n  fairway why workflow/vision-training-x7k2p -n kubeflow-user-alice",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return run(cmd, o, func() error { return RunWhy(cmd.Context(), o, args[0]) })
			},
		}
		o.AddFlags(cmd.Flags(), true)
		_ = cmd.Flags().MarkHidden("all-namespaces") // one object, in one namespace
		return cmd
	}
	nodes := func() *cobra.Command {
		o := base.clone()
		o.wide = true
		cmd := &cobra.Command{
			Use:     "nodes",
			Short:   "Show GPUs per node (whole, shared, free) and the pods sharing each shared GPU",
			Long:    "Show every GPU node's GPUs: held whole, shared, free and unhealthy, and how shared GPUs are kept apart.\nWith -o wide, every pod holding a GPU of each node, its queue and what it holds.",
			Example: "  fairway nodes\n  fairway nodes -o wide",
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return run(cmd, o, func() error { return RunNodes(cmd.Context(), o) })
			},
		}
		o.AddFlags(cmd.Flags(), false)
		return cmd
	}
	policy := func() *cobra.Command {
		o := base.clone()
		cmd := &cobra.Command{
			Use:   "policy [QUEUE]",
			Short: "Show what each kind of work may ask for in a namespace's queue: GPU types, default GPU, cap, borrowing",
			Long: `Show the queue policy (spec.policy, resolved over the queue's ancestors as the webhook and the
scheduler resolve it) of the queues that serve the namespace, or of the queue named: per kind
of work (notebook, training, pipeline-step, workflow-step, ray, pod), the GPU types it may use,
what a pod asking for no GPU gets, the most GPU one pod may ask for, whether it may borrow
above the guaranteed quota, and whether CPU-only pods may use GPU nodes.`,
			Example: "  fairway policy -n team-a\n  fairway policy research -o yaml",
			Args:    cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				queue := ""
				if len(args) == 1 {
					queue = args[0]
				}
				return run(cmd, o, func() error { return RunPolicy(cmd.Context(), o, queue) })
			},
		}
		o.AddFlags(cmd.Flags(), true)
		_ = cmd.Flags().MarkHidden("all-namespaces") // the queues of one namespace
		return cmd
	}
	return []*cobra.Command{queues(), jobs(), why(), nodes(), policy()}
}

func run(cmd *cobra.Command, o *Options, f func() error) error {
	o.Out = cmd.OutOrStdout()
	if err := o.Complete(); err != nil {
		return err
	}
	return f()
}
