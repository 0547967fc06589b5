//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/demo/story"
)

// TestDemo plays `make demo`'s story in check mode (what `make demo-check` runs): fairway from
// its chart under its ServiceAccounts, the real Argo and KubeRay, and the four acts, each of
// whose outcomes must be observed in time.
func TestDemo(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(4)}, SkipCRDs: true})
	out := &testWriter{t: t}
	env, err := story.Setup(t.Context(), c, story.Options{Check: true, Out: out, Binary: bin, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	results, err := story.Play(t.Context(), env)
	t.Logf("the story in %v (cluster start included):\n%s", time.Since(begin).Round(100*time.Millisecond), story.Summary(results))
	if err != nil {
		t.Fatal(err)
	}
}

// testWriter logs each line written to it.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(l)
	}
	return len(p), nil
}
