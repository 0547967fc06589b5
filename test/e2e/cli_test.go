//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// TestCLI creates the CLI's fixed scenario (cli/clitest) on a local cluster, with the status
// the scheduler would write set through the status subresource, and checks that every command
// prints what the goldens under cli/testdata say: the same files the unit tests check on a
// fake client. No scheduler runs, so nothing changes under the CLI. It then runs the real
// kubectl with kubectl-fairway on PATH.
func TestCLI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var pools []cluster.NodePool
	for _, p := range clitest.NodePools {
		pools = append(pools, cluster.NodePool{Name: p.Name, Count: p.Count, GPUType: p.GPUType, GPUsPerNode: 8,
			GPUMemoryMiB: int(p.MemoryMiB), CPU: "224", Memory: "2Ti"})
	}
	c := cluster.StartT(t, cluster.Config{NodePools: pools})
	now := createCLIScenario(t, c)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Goldens", func(t *testing.T) {
		base := cli.Options{Now: func() time.Time { return now }}
		for _, tc := range clitest.Cases {
			t.Run(tc.Golden, func(t *testing.T) {
				cmd := &cobra.Command{Use: "fairway", SilenceUsage: true, SilenceErrors: true}
				cmd.AddCommand(cli.NewCommands(base)...)
				var out bytes.Buffer
				cmd.SetOut(&out)
				cmd.SetArgs(append(tc.Args, "--kubeconfig", c.Kubeconfig()))
				if err := cmd.Execute(); err != nil {
					t.Fatalf("fairway %s: %v", strings.Join(tc.Args, " "), err)
				}
				want, err := os.ReadFile(filepath.Join(root, "cli", "testdata", tc.Golden))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(string(want), clitest.Normalize(out.String())); diff != "" {
					t.Errorf("fairway %s on the cluster differs from cli/testdata/%s (-want +got):\n%s", strings.Join(tc.Args, " "), tc.Golden, diff)
				}
			})
		}
	})

	t.Run("KubectlPlugin", func(t *testing.T) {
		bin, err := gpuagents.BuildBinary(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// The plugin is the fairway binary under the name kubectl looks for.
		dir := t.TempDir()
		if err := os.Symlink(bin, filepath.Join(dir, "kubectl-fairway")); err != nil {
			t.Fatal(err)
		}
		kubectl := filepath.Join(c.BinDir(), "kubectl")
		// PATH holds only the plugin: a kubectl-fairway elsewhere on the
		// caller's PATH (make puts bin/ there) would overshadow it, and
		// kubectl plugin list fails on that warning.
		env := append(os.Environ(), "PATH="+dir, "KUBECONFIG="+c.Kubeconfig())
		run := func(args ...string) string {
			cmd := exec.CommandContext(ctx, kubectl, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		if out := run("plugin", "list"); !strings.Contains(out, "kubectl-fairway") {
			t.Errorf("kubectl plugin list does not show kubectl-fairway:\n%s", out)
		}
		want, err := os.ReadFile(filepath.Join(root, "cli", "testdata", "queues.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if got := run("fairway", "queues"); got != string(want) {
			t.Errorf("kubectl fairway queues:\n%s\nwant (cli/testdata/queues.txt):\n%s", got, want)
		}
		if got := run("fairway", "nodes", "--kubeconfig", c.Kubeconfig()); !strings.HasPrefix(got, "NODE ") {
			t.Errorf("kubectl fairway nodes:\n%s", got)
		}
		if got := run("fairway", "--help"); !strings.Contains(got, "kubectl fairway [command]") {
			t.Errorf("the plugin's help should name it kubectl fairway:\n%s", got)
		}
	})
}

// createCLIScenario creates the scenario and returns the clock the goldens are read at: an
// hour after the newest object's creation, as clitest.Now is an hour after clitest.T0.
func createCLIScenario(t *testing.T, c *cluster.Cluster) time.Time {
	t.Helper()
	ctx := t.Context()
	cl := c.Client()
	// The gpu-agent's labels and inventory (no agents run here: the inventory is fixed).
	for _, p := range clitest.NodePools {
		for i := range p.Count {
			name := fmt.Sprintf("%s-%d", p.Name, i)
			var n corev1.Node
			if err := cl.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(n.DeepCopy())
			for k, v := range clitest.NodeLabels(p) {
				n.Labels[k] = v
			}
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[fairwayv1.GPUInventoryAnnotation] = clitest.Inventory(name, p)
			if err := cl.Patch(ctx, &n, patch); err != nil {
				t.Fatalf("patching node %s: %v", name, err)
			}
		}
	}
	for _, ns := range clitest.Namespaces {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the default ServiceAccount of "+ns, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset().CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	var newest time.Time
	for _, obj := range clitest.Objects() {
		status := statusOf(obj)
		obj.SetCreationTimestamp(metav1.Time{})
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
		created := obj.GetCreationTimestamp().Time
		newest = later(newest, created)
		// Times in the scenario are relative to clitest.T0; on the cluster, to the object's
		// own creation.
		shift := created.Sub(clitest.T0)
		if status != nil && status(shift) {
			if err := cl.Status().Update(ctx, obj); err != nil {
				t.Fatalf("writing the status of %T %s: %v", obj, obj.GetName(), err)
			}
		}
	}
	// kwok runs the bound pods.
	eventually(t, 60*time.Second, "the scenario's bound pods Running", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodRunning {
				return false, fmt.Errorf("%s/%s is %s", p.Namespace, p.Name, p.Status.Phase)
			}
		}
		return true, nil
	})
	return newest.Add(time.Hour)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// statusOf keeps the scenario status of obj (creating drops it) and returns a function that puts
// it back, shifted in time; it reports whether there is a status to write.
func statusOf(obj client.Object) func(shift time.Duration) bool {
	move := func(t *metav1.Time, d time.Duration) {
		if t != nil && !t.IsZero() {
			t.Time = t.Add(d)
		}
	}
	switch o := obj.(type) {
	case *fairwayv1.Queue:
		st := *o.Status.DeepCopy()
		return func(time.Duration) bool { o.Status = st; return true }
	case *fairwayv1.PodGroup:
		st := *o.Status.DeepCopy()
		return func(d time.Duration) bool {
			move(st.LastStartTime, d)
			for i := range st.Conditions {
				move(&st.Conditions[i].LastTransitionTime, d)
			}
			o.Status = st
			return true
		}
	case *corev1.Pod:
		if o.Spec.NodeName != "" {
			return nil // kwok owns the status of bound pods
		}
		st := *o.Status.DeepCopy()
		return func(d time.Duration) bool {
			for i := range st.Conditions {
				move(&st.Conditions[i].LastTransitionTime, d)
			}
			o.Status = st
			return len(st.Conditions) > 0
		}
	}
	return nil
}
