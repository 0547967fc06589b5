package history_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/console/history"
)

func alloc(gpu, cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{"gpu": resource.MustParse(gpu), corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestRecorderIntegrates: 4 GPUs held from 10:30 to 11:30 are 2 GPU-hours in each hour, and
// survive a restart through the file.
func TestRecorderIntegrates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.json")
	r, err := history.NewRecorder(file)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 4, 10, 30, 0, 0, time.UTC)
	for m := 0; m <= 60; m++ {
		r.Observe(start.Add(time.Duration(m)*time.Minute), map[string]corev1.ResourceList{"team-a": alloc("4", "16", "64Gi")})
	}
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	r, err = history.NewRecorder(file)
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Queue(t.Context(), "team-a", start.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Hours) != 24 || len(h.Days) != 30 {
		t.Fatalf("%d hours, %d days; want 24 and 30", len(h.Hours), len(h.Days))
	}
	ten, eleven := h.Hours[22], h.Hours[23]
	if ten.Start.Hour() != 10 || !near(ten.GPUHours, 2) || !near(eleven.GPUHours, 2) || !near(ten.CPUHours, 8) || !near(ten.MemoryGiBHours, 32) {
		t.Errorf("hours 10 and 11: %+v %+v; want 2 GPU-h, 8 core-h, 32 GiB-h each", ten, eleven)
	}
	if today := h.Days[29]; !near(today.GPUHours, 4) {
		t.Errorf("today %+v; want 4 GPU-h", today)
	}
	// A gap longer than a few minutes (the console was down) counts nothing.
	r.Observe(start.Add(5*time.Hour), map[string]corev1.ResourceList{"team-a": alloc("4", "16", "64Gi")})
	h, _ = r.Queue(t.Context(), "team-a", start.Add(5*time.Hour))
	if today := h.Days[29]; !near(today.GPUHours, 4) {
		t.Errorf("after a 4-hour gap today is %+v; want still 4 GPU-h", today)
	}
}

// TestPrometheus asks a stand-in Prometheus (the HTTP API, answered from a table) and checks the
// query and the reading of its matrix.
func TestPrometheus(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 30, 0, 0, time.UTC)
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query_range" {
			http.NotFound(w, r)
			return
		}
		_ = r.ParseForm()
		queries = append(queries, r.Form.Get("query"))
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		end, _ := strconv.ParseFloat(r.Form.Get("end"), 64)
		// gpu averaged 3 in the last bucket, cpu 10.
		resp := map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": []any{
			map[string]any{"metric": map[string]string{"queue": "team-a", "resource": "gpu"}, "values": [][]any{{end, "3"}, {end - step, "1"}}},
			map[string]any{"metric": map[string]string{"queue": "team-a", "resource": "cpu"}, "values": [][]any{{end, "10"}}},
			map[string]any{"metric": map[string]string{"queue": "team-a", "resource": "memory"}, "values": [][]any{{end, fmt.Sprint(2 << 30)}}},
		}}}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	defer srv.Close()
	p, err := history.NewPrometheus(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Queue(t.Context(), "team-a", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{history.Query("team-a", "1h"), history.Query("team-a", "1d")}; fmt.Sprint(queries) != fmt.Sprint(want) {
		t.Errorf("queries %q, want %q", queries, want)
	}
	if last := h.Hours[23]; !near(last.GPUHours, 3) || !near(last.CPUHours, 10) || !near(last.MemoryGiBHours, 2) || !near(h.Hours[22].GPUHours, 1) {
		t.Errorf("last hours %+v %+v; want 3 GPU-h, 10 core-h, 2 GiB-h, and 1 GPU-h before", h.Hours[22], last)
	}
	if today := h.Days[29]; !near(today.GPUHours, 72) {
		t.Errorf("today %+v; want 3 GPUs × 24 h", today)
	}
	if q := history.Query(`a"b`, "1h"); q != `avg_over_time(fairway_queue_allocated{queue="a\"b",resource=~"gpu|cpu|memory"}[1h])` {
		t.Errorf("a queue name is not quoted: %s", q)
	}
}
