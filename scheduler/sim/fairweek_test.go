package sim

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var fairWeekPlots = flag.String("fairweek-plots", "", "write the fair-week plots (SVG) into this directory (docs/img/fair-week)")

// gpuHours is each queue's GPU-hours over the replay.
func gpuHours(r *Report) map[string]float64 {
	out := map[string]float64{}
	for _, q := range r.Summarize().Queues {
		out[q.Name] = q.GPUHours
	}
	return out
}

// spread is (max-min)/mean of the queues' GPU-hours.
func spread(h map[string]float64) float64 {
	var vals []float64
	var sum float64
	for _, v := range h {
		vals = append(vals, v)
		sum += v
	}
	if len(vals) == 0 || sum == 0 {
		return 0
	}
	return (slices.Max(vals) - slices.Min(vals)) / (sum / float64(len(vals)))
}

func runConfig(t *testing.T, path string) *Report {
	t.Helper()
	f, err := LoadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestFairWeek is the proof of fair share over time (docs/fair-share.md): a simulated week on 32
// GPUs, three teams of equal weight and no guarantees, one of them taking the idle cluster for a
// night before all three keep demand. With usage history (24h half-life) the GPU-hours each
// team receives over the week are within 5% of each other; without, the night's burst is never
// paid back.
func TestFairWeek(t *testing.T) {
	var reports []*Report
	got := map[string]map[string]float64{}
	for _, name := range []string{"without-history", "with-history"} {
		rep := runConfig(t, filepath.Join("testdata/fairweek", name+".yaml"))
		reports = append(reports, rep)
		got[name] = gpuHours(rep)
		t.Logf("%s: GPU-hours %v, spread %.1f%% (%d cycles, %v wall)", name, round1(got[name]), 100*spread(got[name]), rep.Cycles, rep.Elapsed.Round(time.Millisecond))
	}
	var b bytes.Buffer
	sums := []Summary{reports[0].Summarize(), reports[1].Summarize()}
	WriteSummaries(&b, sums...)
	t.Logf("\n%s", b.String())
	if s := spread(got["with-history"]); s > 0.05 {
		t.Errorf("with history the teams' GPU-hours spread %.1f%% apart, want at most 5%%: %v", 100*s, round1(got["with-history"]))
	}
	if s := spread(got["without-history"]); s <= 0.05 {
		t.Errorf("without history the teams' GPU-hours spread only %.1f%% apart: the scenario does not show the night's burst: %v", 100*s, round1(got["without-history"]))
	}
	// Every team kept demand all week: the cluster stayed full after the burst.
	for i, rep := range reports {
		if m := sums[i].MeanGPU; m < 95 {
			t.Errorf("%s: mean GPU allocation %.1f%%, want the cluster full all week", rep.Name, m)
		}
	}
	if *fairWeekPlots != "" {
		if err := WritePlotsAs(*fairWeekPlots, "svg", reports...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFairWeekAlibabaDurations replays the same week with the job durations of the Alibaba
// production trace (openb, the default pod list: every 1-GPU pod with a known duration of at
// most two days, in trace order) spread over two teams, alternately, on two of the nodes (16
// GPUs: the trace's 1-GPU pods hold about 3,100 GPU-hours, more than the week has on 16 GPUs and
// less than on 32). team-a's first jobs, 128 GPU-hours of them, arrive at Monday 00:00 and take
// the idle cluster for the night; from 08:00 each team submits its jobs at 10 GPUs' worth of
// demand (against half the cluster, 8), so both keep a backlog all week. History must
// bring the two teams' GPU-hours closer together than fair share from each cycle alone does.
func TestFairWeekAlibabaDurations(t *testing.T) {
	if testing.Short() {
		t.Skip("replays a week twice")
	}
	trace, err := LoadTrace("testdata/openb/openb_pod_list_default.csv.gz", OpenBTimed{})
	if err != nil {
		t.Fatal(err)
	}
	var durations []time.Duration
	for _, p := range trace {
		if p.GPUs == 1 && p.GPUMilli == 0 && p.Duration > 0 && p.Duration <= 48*time.Hour {
			durations = append(durations, p.Duration)
		}
	}
	base, err := LoadConfigFile("testdata/fairweek/with-history.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Each team's jobs cover half of a week's GPU-hours on 16 GPUs: a backlog all week.
	half := 7 * 24 * time.Hour * 8
	night := 8 * time.Hour * 16
	var demand [2]time.Duration
	var pods []Pod
	for i, d := range durations {
		team := i % 2
		q, arrival := "team-a", time.Duration(0)
		switch {
		case team == 1:
			q, arrival = "team-b", 8*time.Hour+demand[team]/10
		case demand[team] >= night:
			arrival = 8*time.Hour + (demand[team]-night)/10
		}
		demand[team] += d
		if arrival > 7*24*time.Hour {
			continue
		}
		pods = append(pods, Pod{Name: fmt.Sprintf("job-%d", i), Queue: q, Kind: "pytorch", Arrival: arrival,
			Duration: d, GPUs: 1, MilliCPU: 8000, MemoryMiB: 64 << 10})
	}
	if demand[0] < half || demand[1] < half {
		t.Fatalf("the trace's 1-GPU pods give only %v and %v of GPU time, want a week of half the cluster each", demand[0], demand[1])
	}
	results := map[string]map[string]float64{}
	for _, history := range []bool{false, true} {
		cfg, err := base.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Name = "alibaba-durations-without-history"
		if history {
			cfg.Name = "alibaba-durations-with-history"
		} else {
			cfg.UsageHalfLife = 0
		}
		cfg.Queues = cfg.Queues[:2]
		cfg.Nodes = cfg.Nodes[:2]
		cfg.Pods = pods
		rep, err := Run(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		results[cfg.Name] = gpuHours(rep)
		t.Logf("%s: GPU-hours %v, spread %.1f%%, mean GPU allocation %.1f%%, %d pods (%v wall)", cfg.Name, round1(results[cfg.Name]),
			100*spread(results[cfg.Name]), rep.Summarize().MeanGPU, len(pods), rep.Elapsed.Round(time.Millisecond))
	}
	with, without := spread(results["alibaba-durations-with-history"]), spread(results["alibaba-durations-without-history"])
	if with >= without {
		t.Errorf("with history the two teams' GPU-hours spread %.1f%% apart, without %.1f%%: history did not bring them closer", 100*with, 100*without)
	}
}

func round1(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = math.Round(v*10) / 10
	}
	return out
}
