package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// keep is how long the recorder keeps hourly buckets: the 30 days shown plus today.
const keep = 31 * 24 * time.Hour

// maxGap is the longest time between two samples that is integrated: after a longer gap (the
// console was down) the queue's allocation in between is unknown, and counted as nothing.
const maxGap = 5 * time.Minute

// Recorder integrates the scheduler's per-queue allocation (Queue status.allocated) over time
// into hourly buckets. It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	file   string
	queues map[string]*recorded
}

// recorded is one queue's hourly buckets and its last sample.
type recorded struct {
	// Hours maps an hour's start (Unix seconds, UTC) to its usage.
	Hours map[int64]*Usage `json:"hours"`
	// Last is the last sample: when, and what the queue held then.
	LastTime time.Time  `json:"lastTime"`
	Last     [3]float64 `json:"last"`
}

// NewRecorder returns a recorder; with a file, what it recorded before is read back from it
// and Save writes it there.
func NewRecorder(file string) (*Recorder, error) {
	r := &Recorder{file: file, queues: map[string]*recorded{}}
	if file == "" {
		return r, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the usage history: %w", err)
	}
	if err := json.Unmarshal(b, &r.queues); err != nil {
		return nil, fmt.Errorf("reading the usage history %s: %w (delete the file to start afresh)", file, err)
	}
	for _, q := range r.queues {
		if q.Hours == nil {
			q.Hours = map[int64]*Usage{}
		}
	}
	return r, nil
}

// amounts reads GPUs, CPU cores and GiB from a resource list.
func amounts(l corev1.ResourceList) [3]float64 {
	var a [3]float64
	if q, ok := l["gpu"]; ok {
		a[0] = q.AsApproximateFloat64()
	}
	if q, ok := l[corev1.ResourceCPU]; ok {
		a[1] = q.AsApproximateFloat64()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		a[2] = q.AsApproximateFloat64() / (1 << 30)
	}
	return a
}

// Observe records that each queue held allocated[queue] at now. The time since a queue's last
// sample is counted at that sample's amounts (what the queue held until now), split over the
// hours it spans.
func (r *Recorder) Observe(now time.Time, allocated map[string]corev1.ResourceList) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, l := range allocated {
		q := r.queues[name]
		if q == nil {
			q = &recorded{Hours: map[int64]*Usage{}}
			r.queues[name] = q
		}
		if !q.LastTime.IsZero() && now.After(q.LastTime) && now.Sub(q.LastTime) <= maxGap {
			q.add(q.LastTime, now, q.Last)
		}
		q.LastTime, q.Last = now, amounts(l)
	}
	for name, q := range r.queues {
		if _, ok := allocated[name]; !ok && now.Sub(q.LastTime) > keep {
			delete(r.queues, name)
		}
		for h := range q.Hours {
			if now.Sub(time.Unix(h, 0)) > keep {
				delete(q.Hours, h)
			}
		}
	}
}

// add counts amounts held from a to b.
func (q *recorded) add(a, b time.Time, amounts [3]float64) {
	for a.Before(b) {
		hour := a.UTC().Truncate(time.Hour)
		end := hour.Add(time.Hour)
		if b.Before(end) {
			end = b
		}
		d := end.Sub(a).Hours()
		u := q.Hours[hour.Unix()]
		if u == nil {
			u = &Usage{Start: hour}
			q.Hours[hour.Unix()] = u
		}
		u.GPUHours += amounts[0] * d
		u.CPUHours += amounts[1] * d
		u.MemoryGiBHours += amounts[2] * d
		a = end
	}
}

// Queue returns the queue's history up to now.
func (r *Recorder) Queue(_ context.Context, queue string, now time.Time) (Queue, error) {
	out := buckets(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queues[queue]
	if q == nil {
		return out, nil
	}
	for i := range out.Hours {
		if u := q.Hours[out.Hours[i].Start.Unix()]; u != nil {
			out.Hours[i] = *u
		}
	}
	for _, u := range q.Hours {
		day := time.Date(u.Start.Year(), u.Start.Month(), u.Start.Day(), 0, 0, 0, 0, time.UTC)
		for i := range out.Days {
			if out.Days[i].Start.Equal(day) {
				out.Days[i].GPUHours += u.GPUHours
				out.Days[i].CPUHours += u.CPUHours
				out.Days[i].MemoryGiBHours += u.MemoryGiBHours
			}
		}
	}
	return out, nil
}

// Save writes the history to the recorder's file, if it has one, atomically.
func (r *Recorder) Save() error {
	if r.file == "" {
		return nil
	}
	r.mu.Lock()
	b, err := json.Marshal(r.queues)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.file), ".usage-*")
	if err != nil {
		return fmt.Errorf("saving the usage history: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("saving the usage history: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("saving the usage history: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.file); err != nil {
		return fmt.Errorf("saving the usage history: %w", err)
	}
	return nil
}

var _ Source = (*Recorder)(nil)
