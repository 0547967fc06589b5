package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// examples holds the trace and the configs of the worked what-if, where users find them.
const examples = "../../examples/sim"

// TestRunGolden replays the example trace on the examples' cluster, as baseline and with two
// more A100 nodes (the worked what-if of docs/simulator.md), and checks the side-by-side summary
// and that the time series and plots are written.
func TestRunGolden(t *testing.T) {
	var reports []*Report
	var sums []Summary
	for _, name := range []string{"baseline.yaml", "more-a100.yaml"} {
		rep := runConfig(t, filepath.Join(examples, name))
		reports = append(reports, rep)
		sums = append(sums, rep.Summarize())
	}
	var b bytes.Buffer
	WriteSummaries(&b, sums...)
	golden := "testdata/examples/summary.golden"
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), b.String()); d != "" {
		t.Errorf("summary differs from %s (-want +got); rerun with -update if intended:\n%s", golden, d)
	}
	// Replays are deterministic.
	again := runConfig(t, filepath.Join(examples, "baseline.yaml"))
	var b1, b2 bytes.Buffer
	_ = reports[0].WriteTimeSeries(&b1)
	_ = again.WriteTimeSeries(&b2)
	if b1.String() != b2.String() {
		t.Error("two replays of the same config differ")
	}
	if !strings.Contains(b1.String(), "queue_nlp_gpu_milli") {
		t.Errorf("time series lacks the per-queue columns: %s", strings.SplitN(b1.String(), "\n", 2)[0])
	}
	dir := t.TempDir()
	if err := WritePlots(dir, reports...); err != nil {
		t.Fatal(err)
	}
	files := []string{"allocation.png", "queues-1.png", "gpu-hours-1.png", "queues-2.png", "gpu-hours-2.png", "waits.png"}
	if got := PlotFiles("png", len(reports)); !slices.Equal(got, files) {
		t.Errorf("PlotFiles = %q, want %q", got, files)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Errorf("%d files written, PlotFiles names %d", len(entries), len(files))
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}
