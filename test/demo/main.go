// Command demo is what `make demo` runs: it starts fairway's local cluster with four fake nodes
// of eight H100 GPUs each, prints them, and keeps the cluster up until Ctrl-C, so that you can
// point kubectl at it. Later steps of the product story build on it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// needed are the binaries the demo cluster runs.
var needed = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, "demo:", args) }, funcr.Options{})

	if err := ensureBinaries(ctx); err != nil {
		return err
	}
	fmt.Println("Starting a local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok...")
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		NodePools:     []cluster.NodePool{cluster.H100Pool(4)},
		KubeScheduler: true,
		SkipCRDs:      true, // applied below, so a CRD problem is a warning, not a dead demo
		Logger:        log,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nStopping the cluster...")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
		fmt.Println("Stopped.")
	}()
	fmt.Printf("Cluster ready in %v.\n\n", time.Since(begin).Round(100*time.Millisecond))

	applyCRDs(ctx, c, log)
	if err := printNodes(ctx, c, os.Stdout); err != nil {
		return err
	}
	fmt.Printf("\nTry:\n  export KUBECONFIG=%s\n  %s get nodes -L %s,%s\n\nPress Ctrl-C to stop.\n",
		c.Kubeconfig(), filepath.Join(c.BinDir(), "kubectl"), fairwayv1.GPUTypeLabel, fairwayv1.Prefix+"rack")
	<-ctx.Done()
	return nil
}

// ensureBinaries builds what is missing from bin/ with hack/build-tools.sh, showing its progress.
// `make demo` has built them already; `go run ./test/demo` on a fresh clone has not.
func ensureBinaries(ctx context.Context) error {
	bin, err := cluster.BinDir()
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range needed {
		if _, err := os.Stat(filepath.Join(bin, name)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Printf("Building %s into %s (a cold build takes several minutes)...\n", strings.Join(missing, ", "), bin)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-tools.sh"), missing...)
	cmd.Env = append(os.Environ(), "BIN="+bin)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the cluster binaries: %w", err)
	}
	return nil
}

// applyCRDs installs fairway's CRDs, warning instead of failing: the cluster is still useful.
func applyCRDs(ctx context.Context, c *cluster.Cluster, log logr.Logger) {
	root, err := cluster.RepoRoot()
	if err == nil {
		err = c.ApplyCRDs(ctx, filepath.Join(root, "charts", "fairway", "crds"))
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > 600 {
			msg = msg[:600] + "..."
		}
		log.Info("warning: fairway's CRDs were not installed", "error", msg)
		return
	}
	fmt.Println("fairway's CRDs (Queue, PodGroup) installed.")
	fmt.Println()
}

// printNodes writes a table of the cluster's nodes: name, GPU type, GPUs, GPU memory, rack, ready.
func printNodes(ctx context.Context, c *cluster.Cluster, w io.Writer) error {
	var nodes corev1.NodeList
	if err := c.Client().List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGPU TYPE\tGPUS\tGPU MEMORY\tRACK\tREADY")
	for i := range nodes.Items {
		n := &nodes.Items[i]
		gpus := n.Status.Allocatable[fairwayv1.ResourceGPU]
		mem := n.Labels[fairwayv1.GPUMemoryLabel]
		if mem != "" {
			mem += " MiB"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\n", n.Name, orDash(n.Labels[fairwayv1.GPUTypeLabel]), gpus.String(),
			orDash(mem), orDash(n.Labels[fairwayv1.Prefix+"rack"]), cluster.NodeReady(n))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
