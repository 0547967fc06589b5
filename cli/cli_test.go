package cli_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// fakeClient holds the scenario, and extra objects.
func fakeClient(t *testing.T, extra ...client.Object) client.Client {
	t.Helper()
	objs := append(append(clitest.Nodes(), clitest.Objects()...), extra...)
	return fake.NewClientBuilder().WithScheme(cli.Scheme()).
		WithObjects(objs...).
		WithStatusSubresource(&fairwayv1.Queue{}, &fairwayv1.PodGroup{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, "metadata.name", byName).
		WithIndex(&fairwayv1.PodGroup{}, "metadata.name", byName).
		Build()
}

// byName indexes objects by metadata.name, which the API server filters on by itself.
func byName(o client.Object) []string { return []string{o.GetName()} }

// Execute runs the CLI's commands with args against c, at the clock now.
func execute(t *testing.T, base cli.Options, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "fairway", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.NewCommands(base)...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestGolden runs the scenario's cases on a fake client; the e2e test runs the same cases on a
// real cluster against the same files.
func TestGolden(t *testing.T) {
	base := cli.Options{Client: fakeClient(t), Now: func() time.Time { return clitest.Now }}
	for _, tc := range clitest.Cases {
		t.Run(tc.Golden, func(t *testing.T) {
			got, err := execute(t, base, tc.Args...)
			if err != nil {
				t.Fatalf("fairway %s: %v", strings.Join(tc.Args, " "), err)
			}
			compareGolden(t, tc.Golden, clitest.Normalize(got))
		})
	}
}

func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run: go test ./cli -run TestGolden -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); run with -update if the change is intended:\n%s", path, diff)
	}
}

func TestErrors(t *testing.T) {
	base := cli.Options{Client: fakeClient(t), Now: func() time.Time { return clitest.Now }}
	cases := map[string]struct {
		args []string
		want string
	}{
		"unknown name":     {[]string{"why", "nothing", "-n", "team-a"}, "no PodGroup or pod named nothing in namespace team-a (not found); nor in any namespace you may read; `fairway jobs -A`"},
		"pod elsewhere":    {[]string{"why", "debug"}, "no PodGroup or pod named debug in namespace default (not found); found pod in namespace team-b: `fairway why debug -n team-b`"},
		"gang elsewhere":   {[]string{"why", "train-big"}, "found PodGroup in namespace team-a: `fairway why train-big -n team-a`"},
		"pod/ elsewhere":   {[]string{"why", "pod/nb-alice", "-n", "team-a"}, "no pod named nb-alice in namespace team-a (not found); found pod in namespace team-b: `fairway why pod/nb-alice -n team-b`"},
		"unknown podgroup": {[]string{"why", "podgroup/nothing", "-n", "team-a"}, "no PodGroup named nothing in namespace team-a"},
		"bad kind":         {[]string{"why", "deployment/x"}, "name a pod (pod/NAME), a PodGroup (podgroup/NAME) or an Argo Workflow (workflow/NAME)"},
		"bad output":       {[]string{"jobs", "-o", "wide"}, `unknown output format "wide"`},
		"bad nodes output": {[]string{"nodes", "-o", "tabl"}, `unknown output format "tabl": use -o wide, -o json or -o yaml`},
		"bad resource":     {[]string{"queues", "--resources", "gpu,disk"}, `unknown resource "disk"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := execute(t, base, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	base := cli.Options{Client: fake.NewClientBuilder().WithScheme(cli.Scheme()).Build(), Now: time.Now}
	for args, want := range map[string]string{
		"queues":    "No queues",
		"jobs -A":   "No fairway jobs in any namespace.",
		"nodes":     "No GPU nodes",
		"jobs -n x": "No fairway jobs in namespace x. `fairway jobs -A` lists every namespace's.",
	} {
		got, err := execute(t, base, strings.Fields(args)...)
		if err != nil || !strings.HasPrefix(got, want) {
			t.Errorf("fairway %s: %q, %v; want %q", args, got, err, want)
		}
	}
}

// TestWhyElsewhereByNamespace: a user who may not list pods cluster-wide still gets the -n hint,
// found by a get in each namespace they may list.
func TestWhyElsewhereByNamespace(t *testing.T) {
	objs := append(clitest.Nodes(), clitest.Objects()...)
	for _, ns := range append(clitest.Namespaces, "default") {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// No metadata.name index: the fake client refuses the cluster-wide list by name, as an API
	// server refuses a user without the right to list pods in every namespace.
	c := fake.NewClientBuilder().WithScheme(cli.Scheme()).WithObjects(objs...).Build()
	base := cli.Options{Client: c, Now: func() time.Time { return clitest.Now }}
	_, err := execute(t, base, "why", "nb-bob")
	want := "no PodGroup or pod named nb-bob in namespace default (not found); found PodGroup and pod in namespace team-b: `fairway why nb-bob -n team-b`"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
