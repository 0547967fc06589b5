package svg_test

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/console/svg"
)

func TestBars(t *testing.T) {
	out := string(svg.Bars{Title: `GPU <"hours">`, Unit: "GPU-h", Labels: []string{"a<b", "b", "c"}, Values: []float64{0, 12.5, 1500}, Class: "gpu"}.Render())
	if strings.Contains(out, "style=") || strings.Contains(out, "<style") {
		t.Errorf("the chart uses styles, which the console's CSP forbids:\n%s", out)
	}
	if strings.Contains(out, `<"hours">`) || strings.Contains(out, "a<b") {
		t.Errorf("text is not escaped:\n%s", out)
	}
	if n := strings.Count(out, `<rect class="bar"`); n != 3 {
		t.Errorf("%d bars, want 3", n)
	}
	// The axis goes to a round value above the highest bar: 2000; each bar's tooltip has its unit.
	if !strings.Contains(out, ">2000<") || !strings.Contains(out, "c: 1500 GPU-h") {
		t.Errorf("no axis maximum of 2000, or no unit in the tooltips:\n%s", out)
	}
	if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
		t.Errorf("not well-formed XML: %v", err)
	}
}
