package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/fairway-sched/fairway/cli"
)

// `fairway sim run` counts its inputs in words ("1 node", never "1 nodes"), and the files its
// last line names are the files it wrote (it said queues.png and wrote queues-1.png).
func TestSimRunNamesWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nodes := write("nodes.yaml", "nodePools:\n- {name: a, count: 1, gpuType: H100, gpusPerNode: 8, cpu: \"64\", memory: 512Gi}\n")
	queues := write("queues.yaml", "apiVersion: fairway.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {resources: {gpu: {quota: 8}}}\n")
	trace := write("trace.yaml", "pods:\n- {name: a, queue: q, arrival: 0s, duration: 1h, gpus: 2}\n")
	more := write("more.yaml", "name: more\nnodes: nodes.yaml\nqueues: queues.yaml\ntrace: trace.yaml\nextraNodePools:\n- {name: b, count: 1, gpuType: H100, gpusPerNode: 8, cpu: \"64\", memory: 512Gi}\n")
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"--nodes", nodes, "--queues", queues, "--trace", trace}, filepath.Join(dir, "one")},
		{[]string{"--nodes", nodes, "--queues", queues, "--trace", trace, "--compare", more}, filepath.Join(dir, "two")},
	} {
		root := &cobra.Command{Use: "fairway", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(cli.NewSimCommand(cli.Options{}))
		var buf bytes.Buffer
		root.SetOut(&buf)
		root.SetErr(&buf)
		root.SetArgs(append(append([]string{"sim", "run"}, tc.args...), "--out", tc.out))
		err := root.Execute()
		got := buf.String()
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, got)
		}
		if !strings.Contains(got, ": 1 node, 1 queue, 1 pod\n") {
			t.Errorf("no count in words of the inputs:\n%s", got)
		}
		i := strings.LastIndex(got, "wrote "+tc.out+": ")
		if i < 0 {
			t.Fatalf("no line naming the files written:\n%s", got)
		}
		named := strings.Split(strings.TrimSpace(got[i+len("wrote "+tc.out+": "):]), ", ")
		entries, err := os.ReadDir(tc.out)
		if err != nil {
			t.Fatal(err)
		}
		var written []string
		for _, e := range entries {
			written = append(written, e.Name())
		}
		for _, n := range named {
			if _, err := os.Stat(filepath.Join(tc.out, n)); err != nil {
				t.Errorf("named %s, not written (written: %v)", n, written)
			}
		}
		if len(named) != len(written) {
			t.Errorf("named %v, wrote %v", named, written)
		}
	}
}
