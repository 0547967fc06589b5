package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/fairway-sched/fairway/cli"
	"github.com/fairway-sched/fairway/cli/clitest"
	"github.com/fairway-sched/fairway/scheduler/sim"
)

// TestSimExport snapshots the CLI's scenario cluster and replays the snapshot: the running pods
// hold their GPUs from the first cycle, the pending ones are scheduled by the engine.
func TestSimExport(t *testing.T) {
	dir := t.TempDir()
	base := cli.Options{Client: fakeClient(t), Now: func() time.Time { return clitest.Now }}
	root := &cobra.Command{Use: "fairway", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cli.NewSimCommand(base))
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs([]string{"sim", "export", "--out", dir})
	err := root.Execute()
	out := buf.String()
	if err != nil {
		t.Fatalf("sim export: %v\n%s", err, out)
	}
	// 3 nodes, 5 queues; 7 running pods (the loan and the GPU-less nb-dave included) and 6
	// pending; the 2 GPU reservations left out.
	if want := "3 nodes, 5 queues, 13 pods (7 running, 6 pending; 2 not fairway's, reservations or finished, left out)"; !strings.Contains(out, want) {
		t.Errorf("sim export says %q, want %q", out, want)
	}
	trace, err := os.ReadFile(filepath.Join(dir, "trace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"name: team-a.train-llama-0\n  node: h100-0\n", "gpus: 4", "group: team-a.train-llama",
		"gpuIndex:\n  - 0\n  gpuShare: \"0.25\"\n  group: team-b.nb-alice\n  kind: jupyterhub\n  name: team-b.nb-alice\n  node: h100-1",
		"gpuMemory: 20000Mi",
	} {
		if !strings.Contains(string(trace), want) {
			t.Errorf("trace.yaml lacks %q:\n%s", want, trace)
		}
	}
	f, err := sim.LoadConfigFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f.MaxTime = sim.Duration(time.Minute)
	cfg, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]time.Duration{}
	for _, p := range rep.Pods {
		if p.Started {
			started[p.Name] = p.Start
		}
	}
	for _, name := range []string{"team-a.train-llama-0", "team-a.train-llama-1", "team-b.nb-alice", "team-b.nb-bob", "team-a.nb-carol"} {
		if at, ok := started[name]; !ok || at != 0 {
			t.Errorf("running pod %s: started %v at %v, want from the start", name, ok, at)
		}
	}
	// The first sample already holds the running pods' GPUs: 8 whole on h100-0, and on h100-1 GPU
	// 0 shared by 0.25 + 0.5 + 0.25 and nb-carol's 20,000 MiB.
	if s := rep.Samples[0]; s.GPU < 9000 {
		t.Errorf("first cycle: %d milli-GPU allocated, want the running pods' (over 9,000)", s.GPU)
	}
}
