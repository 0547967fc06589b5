package sim

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Summary is a report reduced to the figures an administrator compares.
type Summary struct {
	Name string
	// Pods in the trace; Started ran at least once; Finished completed; Never never ran.
	Pods, Started, Finished, Never int
	Evictions                      int
	// MeanGPU is the mean GPU allocation (%) over the replay; PeakGPU the highest.
	MeanGPU, PeakGPU float64
	// MeanFragmented is the mean free share on partly used GPUs, in GPUs.
	MeanFragmented float64
	// Makespan is the simulated time until the last cycle.
	Makespan time.Duration
	// Queues are per queue: pods, mean and p95 wait of the pods that started, mean GPUs held.
	Queues []QueueSummary
	Cycles int
	Wall   time.Duration
}

// QueueSummary is one queue's part of a Summary.
type QueueSummary struct {
	Name              string
	Pods, Never       int
	MeanWait, P95Wait time.Duration
	MeanGPU, MeanFair float64
	// GPUHours is what the queue held over the replay: each cycle's allocation until the next.
	GPUHours float64
}

// Summarize reduces a report.
func (r *Report) Summarize() Summary {
	s := Summary{Name: r.Name, Pods: len(r.Pods), Cycles: r.Cycles, Wall: r.Elapsed}
	var frag float64
	for _, x := range r.Samples {
		if x.GPUCap > 0 {
			u := 100 * float64(x.GPU) / float64(x.GPUCap)
			s.MeanGPU += u
			s.PeakGPU = max(s.PeakGPU, u)
		}
		frag += float64(x.FragmentedGPU) / 1000
	}
	if n := len(r.Samples); n > 0 {
		s.MeanGPU /= float64(n)
		s.MeanFragmented = frag / float64(n)
		s.Makespan = r.Samples[n-1].Time
	}
	waits := map[string][]time.Duration{}
	qs := map[string]*QueueSummary{}
	var names []string
	for _, p := range r.Pods {
		q := qs[p.Queue]
		if q == nil {
			q = &QueueSummary{Name: p.Queue}
			qs[p.Queue] = q
			names = append(names, p.Queue)
		}
		q.Pods++
		s.Evictions += p.Evictions
		switch {
		case p.Started:
			s.Started++
			waits[p.Queue] = append(waits[p.Queue], p.Wait)
		default:
			s.Never++
			q.Never++
		}
		if p.Finished {
			s.Finished++
		}
	}
	slices.Sort(names)
	for _, name := range names {
		q := qs[name]
		w := waits[name]
		slices.Sort(w)
		if len(w) > 0 {
			var sum time.Duration
			for _, d := range w {
				sum += d
			}
			q.MeanWait = sum / time.Duration(len(w))
			q.P95Wait = w[min(len(w)-1, (len(w)*95+99)/100-1)]
		}
		for _, x := range r.Samples {
			q.MeanGPU += float64(x.QueueGPU[name]) / 1000
			q.MeanFair += float64(x.QueueFairGPU[name]) / 1000
		}
		if h := r.gpuHours(name); len(h) > 0 {
			q.GPUHours = h[len(h)-1]
		}
		if n := len(r.Samples); n > 0 {
			q.MeanGPU /= float64(n)
			q.MeanFair /= float64(n)
		}
		s.Queues = append(s.Queues, *q)
	}
	return s
}

// WriteSummaries prints summaries side by side, one column per run.
func WriteSummaries(w io.Writer, sums ...Summary) {
	row := func(label string, f func(s Summary) string) {
		fmt.Fprintf(w, "%-28s", label)
		for _, s := range sums {
			fmt.Fprintf(w, " %18s", f(s))
		}
		fmt.Fprintln(w)
	}
	row("", func(s Summary) string { return s.Name })
	row("pods", func(s Summary) string { return strconv.Itoa(s.Pods) })
	row("started / finished", func(s Summary) string { return fmt.Sprintf("%d / %d", s.Started, s.Finished) })
	row("never started", func(s Summary) string { return strconv.Itoa(s.Never) })
	row("evictions", func(s Summary) string { return strconv.Itoa(s.Evictions) })
	row("GPU allocation mean / peak", func(s Summary) string { return fmt.Sprintf("%.1f%% / %.1f%%", s.MeanGPU, s.PeakGPU) })
	row("fragmented GPUs (mean)", func(s Summary) string { return fmt.Sprintf("%.2f", s.MeanFragmented) })
	row("makespan", func(s Summary) string { return s.Makespan.String() })
	queues := map[string]bool{}
	var names []string
	for _, s := range sums {
		for _, q := range s.Queues {
			if !queues[q.Name] {
				queues[q.Name] = true
				names = append(names, q.Name)
			}
		}
	}
	slices.Sort(names)
	for _, name := range names {
		get := func(s Summary) *QueueSummary {
			for i := range s.Queues {
				if s.Queues[i].Name == name {
					return &s.Queues[i]
				}
			}
			return nil
		}
		cell := func(f func(q *QueueSummary) string) func(s Summary) string {
			return func(s Summary) string {
				if q := get(s); q != nil {
					return f(q)
				}
				return "-"
			}
		}
		row("queue "+name+" pods", cell(func(q *QueueSummary) string { return fmt.Sprintf("%d (%d never)", q.Pods, q.Never) }))
		row("  wait mean / p95", cell(func(q *QueueSummary) string {
			return fmt.Sprintf("%s / %s", q.MeanWait.Round(time.Second), q.P95Wait.Round(time.Second))
		}))
		row("  GPUs held / fair (mean)", cell(func(q *QueueSummary) string { return fmt.Sprintf("%.1f / %.1f", q.MeanGPU, q.MeanFair) }))
		row("  GPU-hours", cell(func(q *QueueSummary) string { return fmt.Sprintf("%.1f", q.GPUHours) }))
	}
}

// WriteTimeSeries writes one CSV row per cycle.
func (r *Report) WriteTimeSeries(w io.Writer) error {
	cw := csv.NewWriter(w)
	queues := r.queueNames()
	reasons := map[string]bool{}
	for _, s := range r.Samples {
		for k := range s.PendingByReason {
			reasons[k] = true
		}
	}
	var reasonNames []string
	for k := range reasons {
		reasonNames = append(reasonNames, k)
	}
	slices.Sort(reasonNames)
	head := []string{"seconds", "gpu_milli", "gpu_capacity_milli", "cpu_milli", "cpu_capacity_milli", "memory_bytes", "memory_capacity_bytes",
		"fragmented_gpu_milli", "running", "pending", "bindings", "evictions"}
	for _, q := range queues {
		head = append(head, "queue_"+q+"_gpu_milli", "queue_"+q+"_fair_gpu_milli")
	}
	for _, k := range reasonNames {
		head = append(head, "pending_"+k)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, s := range r.Samples {
		rec := []string{strconv.FormatFloat(s.Time.Seconds(), 'f', -1, 64)}
		for _, v := range []int64{s.GPU, s.GPUCap, s.CPU, s.CPUCap, s.Mem, s.MemCap, s.FragmentedGPU, int64(s.Running), int64(s.Pending), int64(s.Bindings), int64(s.Evictions)} {
			rec = append(rec, strconv.FormatInt(v, 10))
		}
		for _, q := range queues {
			rec = append(rec, strconv.FormatInt(s.QueueGPU[q], 10), strconv.FormatInt(s.QueueFairGPU[q], 10))
		}
		for _, k := range reasonNames {
			rec = append(rec, strconv.Itoa(s.PendingByReason[k]))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func (r *Report) queueNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range r.Samples {
		for q := range s.QueueGPU {
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	slices.Sort(out)
	return out
}

var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255}, color.RGBA{214, 39, 40, 255},
	color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255}, color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255},
}

// gpuHours is the GPU-hours a queue has received by each sample: each cycle's allocation held
// until the next cycle.
func (r *Report) gpuHours(queue string) []float64 {
	out := make([]float64, len(r.Samples))
	for j := 1; j < len(r.Samples); j++ {
		prev := r.Samples[j-1]
		out[j] = out[j-1] + float64(prev.QueueGPU[queue])/1000*(r.Samples[j].Time-prev.Time).Hours()
	}
	return out
}

// WritePlots writes allocation.png (GPU and CPU allocation and fragmented GPUs over time),
// queues.png (each queue's GPUs against its fair share over time; queues-N.png per report when
// there are several), gpu-hours.png (each queue's cumulative GPU-hours; gpu-hours-N.png) and
// waits.png (the wait-time distribution of the pods that started) into
// dir; several reports share allocation.png and waits.png, each in its own colours.
func WritePlots(dir string, reports ...*Report) error { return WritePlotsAs(dir, "png", reports...) }

// PlotFiles are the names of the files WritePlotsAs writes for n reports in format, in the
// order it writes them, so that what is printed is what is on disk (queues-1.png, not
// queues.png, when there are several reports).
func PlotFiles(format string, n int) []string {
	out := []string{"allocation." + format}
	for i := range n {
		out = append(out, plotName("queues", format, i, n), plotName("gpu-hours", format, i, n))
	}
	return append(out, "waits."+format)
}

// plotName names the plot of report i of n: base.format alone, base-N.format among several.
func plotName(base, format string, i, n int) string {
	if n > 1 {
		return fmt.Sprintf("%s-%d.%s", base, i+1, format)
	}
	return base + "." + format
}

// WritePlotsAs is WritePlots in another image format: "svg" (text, as the docs keep them) or
// "png".
func WritePlotsAs(dir, format string, reports ...*Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := allocationPlot(dir, format, reports); err != nil {
		return err
	}
	for i, r := range reports {
		if err := queuePlots(dir, format, r, plotName("queues", format, i, len(reports)), plotName("gpu-hours", format, i, len(reports)), len(reports) > 1); err != nil {
			return err
		}
	}
	return waitsPlot(dir, format, reports)
}

func hours(d time.Duration) float64 { return d.Hours() }

// addLine adds a labelled line to p, dashed when dash is set.
func addLine(p *plot.Plot, label string, c color.Color, dash bool, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	if dash {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

// allocationPlot draws each report's GPU, CPU and fragmented-GPU allocation, in % of the
// cluster's capacity (the axis runs from 0 to 100%, so that reports compare at a glance).
func allocationPlot(dir, format string, reports []*Report) error {
	p := newPlot("Allocation over time", "hours", "% of capacity")
	p.Y.Max = 100
	for i, r := range reports {
		var gpu, cpu, frag plotter.XYs
		for _, s := range r.Samples {
			x := hours(s.Time)
			gpu = append(gpu, plotter.XY{X: x, Y: pct(s.GPU, s.GPUCap)})
			cpu = append(cpu, plotter.XY{X: x, Y: pct(s.CPU, s.CPUCap)})
			frag = append(frag, plotter.XY{X: x, Y: pct(s.FragmentedGPU, s.GPUCap)})
		}
		if err := addLine(p, r.Name+" GPU", palette[(3*i)%len(palette)], false, gpu); err != nil {
			return err
		}
		if err := addLine(p, r.Name+" CPU", palette[(3*i+1)%len(palette)], false, cpu); err != nil {
			return err
		}
		if err := addLine(p, r.Name+" fragmented GPU", palette[(3*i+2)%len(palette)], true, frag); err != nil {
			return err
		}
	}
	return savePlot(p, 8, 4, dir, "allocation."+format)
}

// queuePlots draws, for one report, the GPUs each queue holds against its fair share (queues),
// and the GPU-hours each queue has received so far (gpuHours), which fair share over time evens
// out. titled adds the report's name to the titles.
func queuePlots(dir, format string, r *Report, queues, gpuHours string, titled bool) error {
	suffix := ""
	if titled {
		suffix = ": " + r.Name
	}
	p := newPlot("GPUs per queue (solid) and fair share (dashed)"+suffix, "hours", "GPUs")
	p.Legend.Left = true
	for k, q := range r.queueNames() {
		var held, fair plotter.XYs
		for _, s := range r.Samples {
			held = append(held, plotter.XY{X: hours(s.Time), Y: float64(s.QueueGPU[q]) / 1000})
			fair = append(fair, plotter.XY{X: hours(s.Time), Y: float64(s.QueueFairGPU[q]) / 1000})
		}
		c := palette[k%len(palette)]
		if err := addLine(p, q, c, false, held); err != nil {
			return err
		}
		if err := addLine(p, q+" fair", c, true, fair); err != nil {
			return err
		}
	}
	if err := savePlot(p, 9, 5, dir, queues); err != nil {
		return err
	}
	p = newPlot("GPU-hours received per queue (cumulative)"+suffix, "hours", "GPU-hours")
	p.Legend.Left = true
	for k, q := range r.queueNames() {
		var pts plotter.XYs
		for j, h := range r.gpuHours(q) {
			pts = append(pts, plotter.XY{X: hours(r.Samples[j].Time), Y: h})
		}
		if err := addLine(p, q, palette[k%len(palette)], false, pts); err != nil {
			return err
		}
	}
	return savePlot(p, 9, 5, dir, gpuHours)
}

// waitsPlot draws, per report, the share of started pods that waited at most x minutes (the axis
// runs from 0 to 1).
func waitsPlot(dir, format string, reports []*Report) error {
	p := newPlot("Wait time distribution (pods that started)", "wait (minutes)", "fraction of pods")
	p.Y.Max = 1
	for i, r := range reports {
		var w []float64
		for _, o := range r.Pods {
			if o.Started {
				w = append(w, o.Wait.Minutes())
			}
		}
		slices.Sort(w)
		var pts plotter.XYs
		for j, v := range w {
			pts = append(pts, plotter.XY{X: v, Y: float64(j+1) / float64(len(w))})
		}
		if len(pts) == 0 {
			pts = plotter.XYs{{X: 0, Y: 0}}
		}
		if err := addLine(p, r.Name, palette[i%len(palette)], false, pts); err != nil {
			return err
		}
	}
	return savePlot(p, 6, 4, dir, "waits."+format)
}

// newPlot starts one of the report's plots: its title and axis labels, the y axis from 0, the
// legend at the top (right unless the caller moves it).
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Y.Min = 0
	p.Legend.Top = true
	return p
}

// savePlot writes p, width by height inches, to dir/name; the format follows name's extension.
func savePlot(p *plot.Plot, width, height vg.Length, dir, name string) error {
	if err := p.Save(width*vg.Inch, height*vg.Inch, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func pct(v, capacity int64) float64 {
	if capacity == 0 {
		return 0
	}
	return 100 * float64(v) / float64(capacity)
}
