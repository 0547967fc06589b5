package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/sim"
)

// NewSimCommand returns `fairway sim`: replays of workloads through the scheduler's engine in
// simulated time, without a cluster (docs/simulator.md); base's Client, when set, is the cluster
// `sim export` reads (tests).
func NewSimCommand(base Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay a workload trace through fairway's scheduling engine in simulated time",
		Long: `Replay a workload through the scheduler's own engine (the same snapshot, cycle and decisions)
in simulated time, without a cluster: "sim run" replays a trace on node pools with queues and
reports allocation, waits and evictions; "sim openb" reproduces the Alibaba openb experiments of
the FGD paper (USENIX ATC'23) and compares with its published table; "sim export" snapshots a
live cluster (nodes, queues, pods) as the input of "sim run".`,
	}
	cmd.AddCommand(newSimOpenBCommand(), newSimRunCommand(), newSimExportCommand(base))
	return cmd
}

func newSimOpenBCommand() *cobra.Command {
	var data, seeds, order, paper string
	var traces []string
	var workers int
	var placement string
	cmd := &cobra.Command{
		Use:   "openb",
		Short: "Reproduce the FGD paper's openb experiments and compare with its table",
		Long: `Replay the openb traces as the paper's simulator does: the trace's pods in a seeded order, tuned
up to 130% of the cluster's GPUs by draws with replacement, one arrival per cycle, pods that fit
nowhere fail, nobody leaves. Prints, per trace and seed, the allocation ratio at 100% and 130%
of the GPU capacity arrived next to the paper's FGD and BestFit, then the means. Exits non-zero
when a trace misses the bar (FGD's mean at 130%, at most 0.5 below it at 100%).`,
		Example: "  fairway sim openb --data scheduler/sim/testdata/openb\n  fairway sim openb --traces openb_pod_list_default --seeds 42",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sd, err := sim.ParseSeeds(seeds)
			if err != nil {
				return err
			}
			if paper == "" {
				paper = filepath.Join(data, "fgd-paper-allocation-ratio.csv")
			}
			table, err := sim.LoadPaperTable(paper)
			if err != nil {
				return err
			}
			if len(traces) == 0 {
				traces = sim.PaperTraces(table)
			}
			o := sim.OpenBOrder(order)
			if !slices.Contains([]sim.OpenBOrder{sim.OrderShuffle, sim.OrderCreation}, o) {
				return fmt.Errorf("--order %q: must be shuffle or creation", order)
			}
			opts, err := simEngineOptions(placement)
			if err != nil {
				return err
			}
			runs, err := sim.BenchOpenB(data, traces, sd, o, opts, workers, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if !sim.WriteBenchTable(cmd.OutOrStdout(), runs, table) {
				return fmt.Errorf("fairway misses the bar on some trace (see the table)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "scheduler/sim/testdata/openb", "Directory with openb_node_list_gpu_node.csv and the openb_pod_list_*.csv.gz traces.")
	f.StringSliceVar(&traces, "traces", nil, "Traces to run (file names without .csv.gz); default: every trace of the paper's table.")
	f.StringVar(&seeds, "seeds", "42-51", "Seeds of the tune-up draws (and the shuffle): a range low-high or a list.")
	f.StringVar(&order, "order", string(sim.OrderShuffle), "Order of the trace's own pods: shuffle (the paper's runs) or creation (creation_time, stable).")
	f.StringVar(&paper, "paper", "", "The paper's table (default: <data>/fgd-paper-allocation-ratio.csv).")
	f.IntVar(&workers, "workers", 0, "Replays run at once (default: GOMAXPROCS).")
	f.StringVar(&placement, "placement", string(engine.BinPack), "Engine placement: binpack (the scheduler's default), spread, or firstfit (the baseline).")
	return cmd
}

// simEngineOptions are the scheduler's engine options as the runtime sets them: its defaults,
// with shares only on nodes that publish a GPU inventory (every simulated GPU node does).
func simEngineOptions(placement string) (engine.Options, error) {
	opts := engine.DefaultOptions()
	opts.SharesNeedInventory = true
	switch p := engine.Placement(placement); p {
	case engine.BinPack, engine.Spread, engine.FirstFit:
		opts.Placement = p
	default:
		return opts, fmt.Errorf("--placement %q: must be binpack, spread or firstfit (the baseline)", placement)
	}
	return opts, nil
}

func newSimRunCommand() *cobra.Command {
	var o simRunFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Replay a trace on node pools with queues; print a summary, write a CSV time series and PNG plots",
		Example: `  fairway sim run --nodes examples/queues/nodes.yaml --queues examples/queues/queues.yaml --trace examples/sim/trace.yaml --out sim-out
  fairway sim run --config examples/sim/baseline.yaml --compare examples/sim/more-a100.yaml --out what-if`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSim(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "A simulation config (YAML: nodes, queues, trace, interval, placement, seed); flags override it.")
	f.StringVar(&o.compare, "compare", "", "A second config to run the same way and compare side by side (what-if).")
	f.StringVar(&o.nodes, "nodes", "", "Node pools file (the test/cluster nodePools format).")
	f.StringVar(&o.queues, "queues", "", "Queues file (Queue objects, YAML documents).")
	f.StringVar(&o.trace, "trace", "", "Trace file: fairway's YAML or CSV trace, or an openb pod list (.csv or .csv.gz).")
	f.StringVar(&o.out, "out", "", "Directory for timeseries.csv and the PNG plots (none when empty).")
	f.DurationVar(&o.interval, "interval", 0, "Simulated time between cycles (default 10s).")
	f.Int64Var(&o.seed, "seed", 0, "Seed (the order of pods arriving at the same time).")
	f.StringVar(&o.placement, "placement", "", "Engine placement: binpack (default), spread, or firstfit (the baseline).")
	return cmd
}

type simRunFlags struct {
	config, compare, nodes, queues, trace, out, placement string
	interval                                              time.Duration
	seed                                                  int64
}

// configFile is the config the flags describe: --config's file with the flags on top.
func (o *simRunFlags) configFile(cmd *cobra.Command, path string) (*sim.ConfigFile, error) {
	f := &sim.ConfigFile{Name: "run"}
	if path != "" {
		var err error
		if f, err = sim.LoadConfigFile(path); err != nil {
			return nil, err
		}
	}
	fl := cmd.Flags()
	if fl.Changed("nodes") {
		f.Nodes = o.nodes
	}
	if fl.Changed("queues") {
		f.Queues = o.queues
	}
	if fl.Changed("trace") {
		f.Trace = o.trace
	}
	if fl.Changed("interval") {
		f.Interval = sim.Duration(o.interval)
	}
	if fl.Changed("seed") {
		f.Seed = o.seed
	}
	if fl.Changed("placement") {
		f.Placement = o.placement
	}
	if f.Nodes == "" || f.Trace == "" {
		return nil, fmt.Errorf("give --nodes and --trace, or a --config that names them")
	}
	return f, nil
}

func runSim(cmd *cobra.Command, o *simRunFlags) error {
	paths := []string{o.config}
	if o.compare != "" {
		paths = append(paths, o.compare)
	}
	var reports []*sim.Report
	var sums []sim.Summary
	stderr := cmd.ErrOrStderr()
	for _, path := range paths {
		f, err := o.configFile(cmd, path)
		if err != nil {
			return err
		}
		cfg, err := f.Build()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s: %s, %s, %s\n", cfg.Name, plural(int64(len(cfg.Nodes)), "node", "nodes"),
			plural(int64(len(cfg.Queues)), "queue", "queues"), plural(int64(len(cfg.Pods)), "pod", "pods"))
		rep, err := sim.Run(cfg, func(now time.Duration, s sim.Sample) {
			fmt.Fprintf(stderr, "%s: t=%s running=%d pending=%d gpu=%.1f%%\n", cfg.Name, now, s.Running, s.Pending, 100*float64(s.GPU)/float64(max(s.GPUCap, 1)))
		})
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Name, err)
		}
		fmt.Fprintf(stderr, "%s: %d cycles in %s\n", cfg.Name, rep.Cycles, rep.Elapsed.Round(time.Millisecond))
		reports = append(reports, rep)
		sums = append(sums, rep.Summarize())
	}
	sim.WriteSummaries(cmd.OutOrStdout(), sums...)
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var written []string
	for i, rep := range reports {
		name := "timeseries.csv"
		if len(reports) > 1 {
			name = fmt.Sprintf("timeseries-%d-%s.csv", i+1, strings.TrimSuffix(filepath.Base(rep.Name), filepath.Ext(rep.Name)))
		}
		written = append(written, name)
		fh, err := os.Create(filepath.Join(o.out, name))
		if err != nil {
			return err
		}
		if err := rep.WriteTimeSeries(fh); err != nil {
			fh.Close()
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	if err := sim.WritePlots(o.out, reports...); err != nil {
		return err
	}
	// The names as written: with --compare the per-config files carry a number.
	written = append(written, sim.PlotFiles("png", len(reports))...)
	fmt.Fprintf(stderr, "wrote %s: %s\n", o.out, strings.Join(written, ", "))
	return nil
}

func newSimExportCommand(base Options) *cobra.Command {
	o := base
	var out string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Snapshot a live cluster (nodes, queues, pods) as the input of sim run",
		Long: `Read the cluster's nodes, fairway's queues and the pods fairway schedules, and write them into a
directory as the simulator's input: nodes.yaml (Node objects), queues.yaml, trace.yaml (the running
pods run from the start on their node and GPUs, for ever; the pending ones arrive at once) and
config.yaml naming the three. Then "fairway sim run --config DIR/config.yaml" replays the cluster
as it is, and --compare asks what-ifs of it (another placement, more nodes, other quotas).`,
		Example: "  fairway sim export --out snap && fairway sim run --config snap/config.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: the directory to write the snapshot into is required")
			}
			if err := o.Complete(); err != nil {
				return err
			}
			ctx := cmd.Context()
			var nodes corev1.NodeList
			var queues fairwayv1.QueueList
			var pods corev1.PodList
			for _, l := range []struct {
				list client.ObjectList
				what string
			}{{&nodes, "nodes"}, {&queues, "queues"}, {&pods, "pods"}} {
				if err := o.list(ctx, l.list, l.what); err != nil {
					return err
				}
			}
			ex, err := sim.NewExport(nodes.Items, queues.Items, pods.Items)
			if err != nil {
				return err
			}
			if err := ex.Write(out); err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			running := 0
			for _, e := range ex.Trace {
				if e.Node != "" {
					running++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %s, %s (%d running, %d pending; %d not fairway's, reservations or finished, left out)\n",
				out, plural(int64(len(ex.Nodes)), "node", "nodes"), plural(int64(len(ex.Queues)), "queue", "queues"),
				plural(int64(len(ex.Trace)), "pod", "pods"), running, len(ex.Trace)-running, ex.Skipped)
			return nil
		},
	}
	o.AddFlags(cmd.Flags(), false)
	_ = cmd.Flags().MarkHidden("output")
	cmd.Flags().StringVar(&out, "out", "", "Directory to write nodes.yaml, queues.yaml, trace.yaml and config.yaml into.")
	return cmd
}
