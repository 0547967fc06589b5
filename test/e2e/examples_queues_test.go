//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleQueues starts the heterogeneous cluster of examples/queues/nodes.yaml (16 H100,
// 16 A100, 8 L4, 8 T4), applies queues.yaml, and submits unchanged workloads: training-job.yaml
// in nlp (28 workers) and vision (4 workers), and six whole-GPU notebooks of the JupyterHub
// example. Training lands only on H100 and A100 although L4 and T4 GPUs stay idle; notebooks only
// on L4 and T4; nlp stops at its limit of 24 GPUs with 4 GPUs of its department idle, and its
// waiting pods say so; the queues' status shows allocation and fair shares, as `fairway queues`
// prints them.
func TestExampleQueues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path, err := examples.Path("queues", "nodes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pools, err := cluster.LoadNodePools(path)
	if err != nil {
		t.Fatal(err)
	}
	// Only whole GPUs here, so no gpu-agents (TestQueuePolicy runs them on this cluster, for
	// shares).
	var objs []client.Object
	for _, obj := range exampleObjects(t, "queues", "queues.yaml") {
		objs = append(objs, obj)
	}
	c := startExample(t, pools, objs, stack.Options{NoAgents: true, ProbeNamespace: "nlp"})

	// Unchanged workloads; kwok keeps the training pods running (test/cluster's completion delay).
	submitJob := func(ns string, workers int64) {
		job := exampleObject(t, ns, "queues", "training-job.yaml")
		for _, f := range [][]string{{"spec", "parallelism"}, {"spec", "completions"}} {
			if err := unstructuredSet(job, workers, f...); err != nil {
				t.Fatal(err)
			}
		}
		if err := unstructuredSet(job, "1h", "spec", "template", "metadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, c, job)
	}
	submitJob("vision", 4)
	submitJob("nlp", 28)
	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		nb, err := examples.RenderNotebook(values, examples.NotebookOptions{Release: "jhub", Namespace: "notebooks",
			User: fmt.Sprintf("user%d", i), Profile: "gpu-whole", NoHomeVolume: true})
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, c, nb)
	}

	begin := time.Now()
	eventually(t, 60*time.Second, "24 nlp, 4 vision and 6 notebook pods bound, 4 nlp pods waiting on the limit", func(ctx context.Context) (bool, error) {
		nlp := podsIn(t, c, ctx, "nlp", nil)
		got := fmt.Sprintf("nlp %d bound %d waiting, vision %d bound, notebooks %d bound", len(bound(nlp)), len(pendingPods(nlp)),
			len(bound(podsIn(t, c, ctx, "vision", nil))), len(bound(podsIn(t, c, ctx, "notebooks", nil))))
		if got != "nlp 24 bound 4 waiting, vision 4 bound, notebooks 6 bound" {
			return false, fmt.Errorf("%s", got)
		}
		for _, p := range pendingPods(nlp) {
			if !strings.Contains(reasonOf(&p), "limit") {
				return false, fmt.Errorf("%s waits for %q", p.Name, reasonOf(&p))
			}
		}
		return true, nil
	})
	t.Logf("placed %v after submission", time.Since(begin).Round(time.Millisecond))
	waiting := pendingPods(podsIn(t, c, ctx, "nlp", nil))
	t.Logf("nlp pod waits: %s", reasonOf(&waiting[0]))

	// Where each pod went.
	types := nodeGPUTypes(t, c)
	perType := map[string]map[string]int64{}
	for ns, allowed := range map[string]string{"nlp": "H100 A100", "vision": "H100 A100", "notebooks": "L4 T4"} {
		perType[ns] = map[string]int64{}
		for _, p := range bound(podsIn(t, c, ctx, ns, nil)) {
			typ := types[p.Spec.NodeName]
			perType[ns][typ] += gpusOf(&p)
			if !strings.Contains(allowed, typ) {
				t.Errorf("%s pod %s on %s (%s); %s may only use %s", ns, p.Name, p.Spec.NodeName, typ, ns, allowed)
			}
		}
	}
	t.Logf("GPUs per type: %v", perType)

	// Queue status: allocation within limits, per GPU type, and fair shares.
	eventually(t, 20*time.Second, "queue status up to date", func(ctx context.Context) (bool, error) {
		want := map[string]float64{"nlp": 24, "vision": 4, "research": 28, "notebooks": 6, "product": 6}
		for name, gpus := range want {
			q, err := queueStatus(ctx, c, name)
			if err != nil {
				return false, err
			}
			if got := amount(q.Status.Allocated, "gpu"); got != gpus {
				return false, fmt.Errorf("queue %s allocated %v GPUs, want %v", name, got, gpus)
			}
		}
		return true, nil
	})
	check := func(name string, cond func(q *fairwayv1.Queue) string) {
		q, err := queueStatus(ctx, c, name)
		if err != nil {
			t.Fatal(err)
		}
		if msg := cond(q); msg != "" {
			t.Errorf("queue %s: %s (status %+v)", name, msg, q.Status)
		}
	}
	check("nlp", func(q *fairwayv1.Queue) string {
		if fs := amount(q.Status.FairShare, "gpu"); fs < 16 || fs > 24 {
			return fmt.Sprintf("fair share %v, want between its guarantee 16 and its limit 24", fs)
		}
		if b := amount(q.Status.Borrowed, "gpu"); b != 8 {
			return fmt.Sprintf("borrowed %v GPUs, want 8 above its guarantee of 16", b)
		}
		return ""
	})
	check("research", func(q *fairwayv1.Queue) string {
		if l4, t4 := amount(q.Status.Allocated, "gpu/L4"), amount(q.Status.Allocated, "gpu/T4"); l4+t4 != 0 {
			return fmt.Sprintf("holds %v L4 and %v T4 GPUs", l4, t4)
		}
		if h, a := amount(q.Status.Allocated, "gpu/H100"), amount(q.Status.Allocated, "gpu/A100"); h+a != 28 {
			return fmt.Sprintf("holds %v H100 and %v A100, want 28 together", h, a)
		}
		return ""
	})
	check("product", func(q *fairwayv1.Queue) string {
		if l4, t4 := amount(q.Status.Allocated, "gpu/L4"), amount(q.Status.Allocated, "gpu/T4"); l4+t4 != 6 {
			return fmt.Sprintf("holds %v L4 and %v T4 GPUs, want 6 together", l4, t4)
		}
		return ""
	})
	check("notebooks", func(q *fairwayv1.Queue) string {
		if np := amount(q.Status.AllocatedNonPreemptible, "gpu"); np != 6 {
			return fmt.Sprintf("%v non-preemptible GPUs, want the 6 notebooks'", np)
		}
		return ""
	})

	// What an administrator sees.
	fw := func(args ...string) string {
		cmd := &cobra.Command{Use: "fairway", SilenceUsage: true, SilenceErrors: true}
		cmd.AddCommand(cli.NewCommands(cli.Options{})...)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append(args, "--kubeconfig", c.Kubeconfig()))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("fairway %s: %v", strings.Join(args, " "), err)
		}
		t.Logf("fairway %s:\n%s", strings.Join(args, " "), out.String())
		return out.String()
	}
	out := fw("queues")
	for _, name := range []string{"research", "nlp", "vision", "product", "inference", "notebooks"} {
		if !strings.Contains(out, name) {
			t.Errorf("fairway queues does not list %s", name)
		}
	}
	fw("queues", "--resources", "gpu/H100,gpu/A100,gpu/L4,gpu/T4")
}
