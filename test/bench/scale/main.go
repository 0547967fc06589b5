// Command scale is `make bench-scale`: KAI-Scheduler's public scale suite (test/scale) played
// on fairway, on a local cluster of kwok nodes, with each figure beside KAI's published one.
//
// Each run starts a fresh cluster and plays every scenario once, checking each outcome; with
// -runs > 1 the medians are printed. The last lines are the table docs/performance.md quotes:
//
//	bench-scale: scenario             fairway   KAI (2026-03-03)  KAI/fairway  sched CPU s  sched RSS MiB  plane CPU s
//	bench-scale: fill-off             X         13m58s            ...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/scale"
)

func main() {
	o := scale.Options{}
	var runs int
	var scenarios, keep, schedArgs string
	var verbose bool
	flag.IntVar(&o.Nodes, "nodes", 500, "kwok nodes of 8 GPUs (KAI's NODE_COUNT)")
	flag.IntVar(&o.Samples, "samples", 10, "single-GPU reclaims and impossible gangs averaged (KAI's statusMeasuringSamples)")
	flag.IntVar(&runs, "runs", 1, "plays of the suite, each on a fresh cluster; the medians are printed")
	flag.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios to play (all when empty): "+names())
	flag.StringVar(&o.PprofDir, "pprof", "", "write the scheduler's CPU profiles of each measured window to this directory")
	flag.StringVar(&schedArgs, "scheduler-args", "", "space-separated flags appended to the chart's scheduler flags (e.g. --zap-log-level=2)")
	flag.StringVar(&keep, "keep-logs", "", "copy the components' logs of each run to this directory")
	flag.BoolVar(&verbose, "v", false, "log the cluster's progress")
	flag.Parse()
	if scenarios != "" {
		o.Scenarios = strings.Split(scenarios, ",")
	}
	o.SchedulerArgs = strings.Fields(schedArgs)
	o.Logf = func(format string, args ...any) {
		fmt.Printf("bench-scale: "+format+"\n", args...)
	}
	// The cluster's controller-runtime clients log through its global logger; unset, it prints
	// a stack trace into the output on the second run's first client. Set once: a second
	// SetLogger does not reach the loggers the first one fulfilled.
	crLog := logr.Discard()
	if verbose {
		crLog = logger()
	}
	ctrllog.SetLogger(crLog)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, runs, keep, verbose); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func names() string {
	var n []string
	for _, s := range scale.Scenarios {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

func run(ctx context.Context, o scale.Options, runs int, keep string, verbose bool) error {
	if o.PprofDir != "" {
		if err := os.MkdirAll(o.PprofDir, 0o755); err != nil {
			return err
		}
	}
	all := map[string][]scale.Result{}
	begin := time.Now()
	for i := range runs {
		cfg := scale.ClusterConfig()
		if verbose {
			cfg.Logger = logger()
		}
		fmt.Printf("bench-scale: run %d of %d: starting a cluster\n", i+1, runs)
		c, err := cluster.Start(ctx, cfg)
		if err != nil {
			return err
		}
		results, err := scale.Run(ctx, c, o)
		if keep != "" {
			keepLogs(c.LogDir(), fmt.Sprintf("%s/run-%d", keep, i+1))
		}
		_ = c.Stop()
		if err != nil {
			return err
		}
		for _, r := range results {
			all[r.Name] = append(all[r.Name], r)
		}
	}
	fmt.Printf("bench-scale: %d runs at %d nodes in %v\n", runs, o.Nodes, time.Since(begin).Round(time.Second))
	fmt.Printf("bench-scale: %-20s %10s  %-36s %11s  %11s  %13s  %11s\n", "scenario", "fairway", "KAI (2026-03-03, 500 nodes)", "KAI/fairway", "sched CPU s", "sched RSS MiB", "plane CPU s")
	for _, s := range scale.Scenarios {
		rs := all[s.Name]
		if len(rs) == 0 {
			continue
		}
		fig := median(rs, func(r scale.Result) float64 { return r.Figure.Seconds() })
		kai, ratio := s.KAINote, "-"
		if s.KAI > 0 {
			kai, ratio = s.KAI.String(), fmt.Sprintf("%.0f×", s.KAI.Seconds()/fig)
		}
		fmt.Printf("bench-scale: %-20s %10s  %-36s %11s  %11.1f  %13.0f  %11.1f\n", s.Name,
			(time.Duration(fig * float64(time.Second))).Round(time.Millisecond), kai, ratio,
			median(rs, func(r scale.Result) float64 { return r.SchedCPU }),
			median(rs, func(r scale.Result) float64 { return float64(r.SchedRSSMiB) }),
			median(rs, func(r scale.Result) float64 { return r.PlaneCPU }))
	}
	return nil
}

func median(rs []scale.Result, f func(scale.Result) float64) float64 {
	xs := make([]float64, 0, len(rs))
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func keepLogs(from, to string) {
	_ = os.MkdirAll(to, 0o755)
	entries, _ := os.ReadDir(from)
	for _, e := range entries {
		data, err := os.ReadFile(from + "/" + e.Name())
		if err == nil {
			_ = os.WriteFile(to+"/"+e.Name(), data, 0o644)
		}
	}
}

func logger() logr.Logger {
	return funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, "cluster:", args) }, funcr.Options{})
}
