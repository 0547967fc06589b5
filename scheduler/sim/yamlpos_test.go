package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestYAMLErrorsNameTheLine: every kind of mistake in a trace or a config is reported with the
// line it is on.
func TestYAMLErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = "pods:\n- {name: a, queue: q, gpus: 1}\n- name: b\n  queue: q\n"
	traces := []struct{ name, body, want string }{
		{"unknown-field.yaml", head + "  gpuShar: \"0.5\"\n", `unknown-field.yaml line 5: pod 2 (b): unknown field "gpuShar"`},
		{"wrong-type.yaml", head + "  gpus: many\n", `wrong-type.yaml line 5: pod 2 (b): cannot unmarshal string into Go struct field TraceEntry.gpus of type int`},
		{"bad-duration.yaml", head + "  cpu: \"1\"\n  arrival: soon\n", `bad-duration.yaml line 6: pod 2 (b): duration "soon": a Go duration (90s, 2h) or seconds`},
		{"syntax.yaml", "pods:\n- {name: a, queue: q, gpus: 1\n- name: b\n", `syntax.yaml line 2: did not find expected ',' or '}'`},
		{"top-level.yaml", "pods: []\npod: x\n", `top-level.yaml line 2: unknown field "pod"`},
		{"no-queue.yaml", "pods:\n- {name: a, queue: q}\n\n- name: b\n  gpus: 1\n", `no-queue.yaml line 4: pod 2 (b): name and queue are required`},
	}
	for _, tc := range traces {
		_, err := LoadTrace(write(tc.name, tc.body), OpenBTimed{})
		if want := filepath.Join(dir, tc.want); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", tc.name, err, want)
		}
	}
	_, err := LoadConfigFile(write("config.yaml", "name: x\nnodes: n.yaml\nintervall: 10s\n"))
	if want := filepath.Join(dir, `config.yaml line 3: unknown field "intervall"`); err == nil || err.Error() != want {
		t.Errorf("config: error %v, want %q", err, want)
	}
	_, err = LoadConfigFile(write("pools.yaml", "name: x\nextraNodePools:\n- name: p\n  count: two\n"))
	// The node pool's Go type is named in the message; only the line and the field matter here.
	if want := filepath.Join(dir, `pools.yaml line 4: cannot unmarshal string into Go struct field `); err == nil ||
		!strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), "extraNodePools.count of type int") {
		t.Errorf("config pools: error %v, want %q...extraNodePools.count of type int", err, want)
	}
	// The node-pool and queue files a config names are read with their lines too.
	nodes := write("nodes.yaml", "nodePools:\n- name: a\n  count: 1\n- name: b\n  count: two\n")
	trace := write("t.yaml", "pods:\n- {name: a, queue: q, gpus: 1}\n")
	_, err = (&ConfigFile{Name: "x", Nodes: nodes, Trace: trace}).Build()
	if want := filepath.Join(dir, `nodes.yaml line 5: nodePool 2 (b): cannot unmarshal string into Go struct field `); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("node pools: error %v, want %q...", err, want)
	}
	good := write("good-nodes.yaml", "nodePools:\n- {name: a, count: 1, gpusPerNode: 8}\n")
	queues := write("queues.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: q}\n---\n"+
		"apiVersion: fairway.dev/v1alpha1\nkind: Queue\nmetadata:\n  name: q\nspec:\n  resourcs: {}\n")
	_, err = (&ConfigFile{Name: "x", Nodes: good, Queues: queues, Trace: trace}).Build()
	if want := filepath.Join(dir, `queues.yaml line 10: unknown field "resourcs"`); err == nil || err.Error() != want {
		t.Errorf("queues: error %v, want %q", err, want)
	}
}
