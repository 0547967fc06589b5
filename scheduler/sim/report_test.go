package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"
)

// TestPlotLayout: the plots' legends are drawn beside the data, never over it; parent queues
// get a panel of their own, below the leaves; and no two lines of a plot share a colour, however
// many queues or reports there are (issue 39).
func TestPlotLayout(t *testing.T) {
	r := &Report{Name: "a", Parents: map[string]bool{"dept": true}}
	for _, at := range []int64{0, 1, 2} {
		r.Samples = append(r.Samples, Sample{Time: time.Duration(at) * time.Hour, GPUCap: 8000,
			QueueGPU: map[string]int64{"dept": 3000, "leaf-a": 1000, "leaf-b": 2000}, QueueFairGPU: map[string]int64{"dept": 4000, "leaf-a": 2000, "leaf-b": 2000}})
	}
	dir := t.TempDir()
	if err := WritePlotsAs(dir, "svg", r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "queues.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// vgsvg writes text as <text x="X" y="-Y" ...>label</text>, y measured up from the bottom.
	text := func(label string) (x, y float64) {
		t.Helper()
		m := regexp.MustCompile(`<text x="([-\d.]+)" y="([-\d.]+)"[^>]*>` + regexp.QuoteMeta(label) + `</text>`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("queues.svg has no text %q", label)
		}
		x, _ = strconv.ParseFloat(string(m[1]), 64)
		y, _ = strconv.ParseFloat(string(m[2]), 64)
		return x, -y
	}
	dataRight := float64(9 * vg.Inch) // queuePlots draws its axes and data 9 inches wide
	half := float64(4 * vg.Inch)      // each panel is 4 inches high; the parents' is the lower one
	for _, q := range []string{"leaf-a", "leaf-b", "dept"} {
		if x, _ := text(q); x < dataRight {
			t.Errorf("legend entry %s at x=%.0f, inside the data (which ends at %.0f)", q, x, dataRight)
		}
	}
	if _, y := text("leaf-a"); y < half {
		t.Errorf("leaf queue's legend at y=%.0f, want in the upper panel (above %.0f)", y, half)
	}
	if _, y := text("dept"); y > half {
		t.Errorf("parent queue's legend at y=%.0f, want in the lower panel (below %.0f)", y, half)
	}
	text("GPUs held (solid) and fair share (dashed), parent queues (the sum of their children)")

	seen := map[string]int{}
	for i := range 40 {
		cr, cg, cb, _ := colour(i).RGBA()
		key := strconv.Itoa(int(cr>>8)) + "," + strconv.Itoa(int(cg>>8)) + "," + strconv.Itoa(int(cb>>8))
		if j, ok := seen[key]; ok {
			t.Errorf("series %d and %d share the colour %s", j, i, key)
		}
		seen[key] = i
	}
}
