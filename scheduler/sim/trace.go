package sim

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// TraceEntry is one line of fairway's trace format (YAML or CSV): a pod, or a gang of pods that
// arrive together.
//
//	pods:
//	- {name: train-a, queue: team-a, arrival: 0s, duration: 2h, kind: pytorch, gpus: 8, cpu: "32", memory: 256Gi, gang: 4}
//	- {name: nb-1, queue: team-b, arrival: 5m, duration: 8h, gpuShare: "0.25", gpuTypes: [L4, T4], priority: 100}
type TraceEntry struct {
	Name     string   `json:"name"`
	Queue    string   `json:"queue"`
	Arrival  Duration `json:"arrival,omitempty"`
	Duration Duration `json:"duration,omitempty"`
	Kind     string   `json:"kind,omitempty"`
	// GPUs whole GPUs per pod, or GPUShare a share of one GPU ("0.5"), or GPUMemory ("20Gi").
	GPUs      int    `json:"gpus,omitempty"`
	GPUShare  string `json:"gpuShare,omitempty"`
	GPUMemory string `json:"gpuMemory,omitempty"`
	CPU       string `json:"cpu,omitempty"`
	Memory    string `json:"memory,omitempty"`
	// Gang is the number of pods that must run together (default 1).
	Gang int `json:"gang,omitempty"`
	// Count repeats the entry as that many independent pods (or gangs), named <name>-r<i>, the
	// i-th arriving Every later than the one before (default 1; Every 0: all at Arrival). YAML
	// only.
	Count    int      `json:"count,omitempty"`
	Every    Duration `json:"every,omitempty"`
	Priority int32    `json:"priority,omitempty"`
	GPUTypes []string `json:"gpuTypes,omitempty"`
	// Group makes the entry one pod of a gang named Group whose other pods are other entries
	// with the same group and queue (MinMember of them must run together; default 1). YAML only;
	// fairway sim export writes gangs found partly running this way.
	Group     string `json:"group,omitempty"`
	MinMember int    `json:"minMember,omitempty"`
	// Node, when set, is where the pod already runs at its arrival, on the GPUs GPUIndex (fairway
	// sim export writes the cluster's running pods so). YAML only.
	Node     string `json:"node,omitempty"`
	GPUIndex []int  `json:"gpuIndex,omitempty"`
}

// Duration reads "90s", "2h" (YAML strings) or a number of seconds.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string or seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" {
		*d = 0
		return nil
	}
	v, err := parseDuration(s)
	*d = Duration(v)
	return err
}

func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("duration %q must not be negative", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: a Go duration (90s, 2h) or seconds", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return v, nil
}

type traceFile struct {
	Pods []TraceEntry `json:"pods"`
}

// LoadTrace reads a trace: fairway's YAML (.yaml, .yml) or CSV (header with the columns
// name,queue,arrival,duration,kind,gpus,gpu_share,gpu_memory,cpu,memory,gang,priority,gpu_types;
// gpu_types separated by |), or an openb pod list (a CSV with cpu_milli and num_gpu columns;
// .csv.gz read too), replayed in time with each pod's real duration (deletion_time -
// scheduled_time), in queues as openb says.
func LoadTrace(path string, openb OpenBTimed) ([]Pod, error) {
	switch {
	case strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml"):
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var f traceFile
		if err := yaml.UnmarshalStrict(b, &f); err != nil {
			return nil, decodeError(path, b, err, "pods", func() any { return &TraceEntry{} })
		}
		return expand(path, f.Pods, entryLines(b, "pods"))
	case strings.HasSuffix(path, ".csv") || strings.HasSuffix(path, ".csv.gz"):
		rc, err := openReader(path)
		if err != nil {
			return nil, err
		}
		head, _ := io.ReadAll(io.LimitReader(rc, 4096))
		rc.Close()
		first, _, _ := strings.Cut(string(head), "\n")
		if strings.Contains(first, "cpu_milli") && strings.Contains(first, "num_gpu") {
			return openbTimed(path, openb)
		}
		rows, err := readCSV(path, "name", "queue")
		if err != nil {
			return nil, err
		}
		var entries []TraceEntry
		var lines []int
		for _, r := range rows {
			lines = append(lines, atoiOr0(r["#line"]))
			e := TraceEntry{Name: r["name"], Queue: r["queue"], Kind: r["kind"], GPUShare: r["gpu_share"], GPUMemory: r["gpu_memory"], CPU: r["cpu"], Memory: r["memory"]}
			for _, f := range []struct {
				col string
				dst *Duration
			}{{"arrival", &e.Arrival}, {"duration", &e.Duration}} {
				if v := r[f.col]; v != "" {
					d, err := parseDuration(v)
					if err != nil {
						return nil, fmt.Errorf("%s line %s: column %s: %w", path, r["#line"], f.col, err)
					}
					*f.dst = Duration(d)
				}
			}
			for _, f := range []struct {
				col string
				dst *int
			}{{"gpus", &e.GPUs}, {"gang", &e.Gang}} {
				if v := r[f.col]; v != "" {
					n, err := strconv.Atoi(v)
					if err != nil {
						return nil, fmt.Errorf("%s line %s: column %s: %q is not an integer", path, r["#line"], f.col, v)
					}
					*f.dst = n
				}
			}
			if v := r["priority"]; v != "" {
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return nil, fmt.Errorf("%s line %s: column priority: %q is not an integer", path, r["#line"], v)
				}
				e.Priority = int32(n)
			}
			if v := r["gpu_types"]; v != "" {
				e.GPUTypes = strings.Split(v, "|")
			}
			entries = append(entries, e)
		}
		return expand(path, entries, lines)
	}
	return nil, fmt.Errorf("trace %s: the name must end in .yaml, .yml, .csv or .csv.gz", path)
}

// expand checks the entries and turns each into its pods. lines[i], when known (not 0), is the
// line of the file where entry i begins, for the errors.
func expand(path string, entries []TraceEntry, lines []int) ([]Pod, error) {
	var out []Pod
	for i, e := range entries {
		where := fmt.Sprintf("%s: pod %d (%s)", path, i+1, e.Name)
		if i < len(lines) && lines[i] > 0 {
			where = fmt.Sprintf("%s line %d: pod %d (%s)", path, lines[i], i+1, e.Name)
		}
		if e.Name == "" || e.Queue == "" {
			return nil, fmt.Errorf("%s: name and queue are required", where)
		}
		p := Pod{Name: e.Name, Queue: e.Queue, Kind: e.Kind, Arrival: time.Duration(e.Arrival), Duration: time.Duration(e.Duration),
			GPUs: e.GPUs, Priority: e.Priority, GPUTypes: e.GPUTypes, Node: e.Node, GPUIndexes: e.GPUIndex}
		if e.Group != "" {
			if e.Gang > 1 || e.Count > 1 {
				return nil, fmt.Errorf("%s: group is one pod of a gang: give no gang or count", where)
			}
			p.Gang, p.GangSize = e.Group, max(e.MinMember, 1)
		}
		if len(e.GPUIndex) > 0 && e.Node == "" {
			return nil, fmt.Errorf("%s: gpuIndex needs node (the node whose GPUs they are)", where)
		}
		if e.Node != "" && (e.Gang > 1 || e.Count > 1) {
			return nil, fmt.Errorf("%s: node places one running pod: give no gang or count", where)
		}
		set := 0
		if e.GPUs < 0 {
			return nil, fmt.Errorf("%s: gpus %d must not be negative", where, e.GPUs)
		}
		if e.GPUs > 0 {
			set++
		}
		if e.GPUShare != "" {
			set++
			r, err := gpurequest.Parse(map[string]string{v1alpha1.GPUFractionAnnotation: e.GPUShare})
			if err != nil || r.Milli <= 0 {
				return nil, fmt.Errorf("%s: gpuShare %q: a decimal between 0 and 1, such as 0.5", where, e.GPUShare)
			}
			p.GPUMilli = r.Milli
		}
		if e.GPUMemory != "" {
			set++
			r, err := gpurequest.Parse(map[string]string{v1alpha1.GPUMemoryAnnotation: e.GPUMemory})
			if err != nil || r.MemoryMiB <= 0 {
				return nil, fmt.Errorf("%s: gpuMemory %q: MiB or a quantity with a byte unit, such as 20Gi", where, e.GPUMemory)
			}
			p.GPUMemoryMiB = r.MemoryMiB
		}
		if set > 1 {
			return nil, fmt.Errorf("%s: give one of gpus, gpuShare and gpuMemory", where)
		}
		for _, f := range []struct {
			name, v string
			dst     *int64
			milli   bool
		}{{"cpu", e.CPU, &p.MilliCPU, true}, {"memory", e.Memory, &p.MemoryMiB, false}} {
			if f.v == "" {
				continue
			}
			q, err := resource.ParseQuantity(f.v)
			if err != nil || q.Sign() < 0 {
				return nil, fmt.Errorf("%s: %s %q: a non-negative quantity", where, f.name, f.v)
			}
			if f.milli {
				*f.dst = q.MilliValue()
			} else {
				*f.dst = q.Value() >> 20
			}
		}
		if e.Count < 0 || e.Gang < 0 {
			return nil, fmt.Errorf("%s: count %d and gang %d must not be negative", where, e.Count, e.Gang)
		}
		count := max(e.Count, 1)
		for r := range count {
			one := p
			if count > 1 {
				one.Name = fmt.Sprintf("%s-r%d", e.Name, r)
				one.Arrival += time.Duration(r) * time.Duration(e.Every)
			}
			n := max(e.Gang, 1)
			if n == 1 {
				out = append(out, one)
				continue
			}
			for k := range n {
				q := one
				q.Name = fmt.Sprintf("%s-%d", one.Name, k)
				q.Gang, q.GangSize = one.Name, n
				out = append(out, q)
			}
		}
	}
	return out, nil
}

// OpenBTimed says how an openb pod list is replayed in time (fairway sim run).
type OpenBTimed struct {
	// Queue is the queue of every pod (default OpenBQueue) unless QueueByQoS names one for the
	// pod's qos column (LS, BE, Burstable, Guaranteed).
	Queue      string            `json:"queue,omitempty"`
	QueueByQoS map[string]string `json:"queueByQoS,omitempty"`
	// Speedup divides the times between arrivals (default 1): the trace's 8,000 pods arrive over
	// 149 days and run 15 days on average, which loads the 6,212 GPUs of its cluster to about a
	// tenth; a speedup of 10 or more makes them queue. Durations are kept.
	Speedup float64 `json:"speedup,omitempty"`
	// Tune, above 0, appends pods drawn from the trace with replacement (seed Seed) until their
	// GPU demand reaches Tune times the cluster's GPUs, as the openb protocol does (OpenBWorkload,
	// creation order); a drawn pod keeps its creation time and duration. Even all at once the
	// trace's own pods ask for less than its cluster's GPUs.
	Tune float64 `json:"tune,omitempty"`
	Seed int64   `json:"seed,omitempty"`

	// capacityMilli is the cluster's milli-GPU, which Tune needs (ConfigFile.Build sets it).
	capacityMilli int64
}

// openbTimed reads an openb pod list as a timed trace: arrival = creation_time (from the first,
// divided by o.Speedup), duration = deletion_time - scheduled_time (pods without both run
// forever).
func openbTimed(path string, o OpenBTimed) ([]Pod, error) {
	rows, err := LoadOpenBPods(path)
	if err != nil {
		return nil, err
	}
	if o.Queue == "" {
		o.Queue = OpenBQueue
	}
	if o.Speedup < 0 {
		return nil, fmt.Errorf("%s: speedup %v must not be negative", path, o.Speedup)
	}
	if o.Speedup == 0 {
		o.Speedup = 1
	}
	if o.Tune < 0 {
		return nil, fmt.Errorf("%s: tune %v must not be negative", path, o.Tune)
	}
	if o.Tune > 0 {
		if o.capacityMilli <= 0 {
			return nil, fmt.Errorf("%s: tune needs a cluster with GPUs", path)
		}
		rows = OpenBWorkload(rows, o.capacityMilli, o.Tune, o.Seed, OrderCreation)
	}
	var t0 int64 = -1
	for _, r := range rows {
		if t0 < 0 || r.Creation < t0 {
			t0 = r.Creation
		}
	}
	out := make([]Pod, 0, len(rows))
	for i := range rows {
		r := &rows[i]
		q := o.Queue
		if byQoS, ok := o.QueueByQoS[r.QoS]; ok {
			q = byQoS
		}
		p := r.Pod(r.Name, q)
		p.Preemptibility = ""
		p.Arrival = time.Duration(float64(r.Creation-t0) / o.Speedup * float64(time.Second))
		if r.Deletion > r.Scheduled && r.Scheduled > 0 {
			p.Duration = time.Duration(r.Deletion-r.Scheduled) * time.Second
		}
		out = append(out, p)
	}
	return out, nil
}

// LoadQueues reads the Queue objects of a file of YAML documents (others are skipped). A Queue
// is decoded strictly: a misspelt field (resourcs:) would otherwise leave the queue without the
// quota its author wrote, and the replay would answer another question. Errors name the line.
func LoadQueues(path string) ([]*v1alpha1.Queue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*v1alpha1.Queue
	line := 1 // the file's line where the document begins
	for _, doc := range strings.SplitAfter(string(b), "\n---") {
		// The document, preceded by as many empty lines as come before it in the file, so that
		// the lines errors name are the file's.
		padded := []byte(strings.Repeat("\n", line-1) + strings.TrimSuffix(doc, "\n---"))
		line += strings.Count(doc, "\n")
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(padded, &tm); err != nil {
			return nil, decodeError(path, padded, err, "", nil)
		}
		if tm.Kind != "Queue" {
			continue // other objects of the file (the queues' namespaces), or an empty document
		}
		var q v1alpha1.Queue
		if err := yaml.UnmarshalStrict(padded, &q); err != nil {
			return nil, decodeError(path, padded, err, "", nil)
		}
		out = append(out, &q)
	}
	return out, nil
}
