// Package history is the usage history the console charts per queue: GPU-, CPU- and
// memory-hours per hour for the last 24 hours and per day for the last 30 days.
//
// Two sources give it. Recorder integrates what the scheduler records in each Queue's
// status.allocated, sampled from the console's cache, into hourly buckets; it keeps 31 days in
// memory and, with a file, across restarts (the console writes nothing to the API server).
// Prometheus asks a Prometheus server that scrapes the scheduler for the same integral of
// fairway_queue_allocated, which also covers the time before the console ran.
package history

import (
	"context"
	"time"
)

// Usage is one bucket of a queue's usage: resource-hours from Start to Start plus the bucket's
// length.
type Usage struct {
	Start time.Time
	// GPUHours are GPU-hours, CPUHours core-hours, MemoryGiBHours GiB-hours.
	GPUHours, CPUHours, MemoryGiBHours float64
}

// Queue is a queue's history: Hours are the last 24 hours, oldest first, the last one the
// current hour; Days the last 30 days (UTC), oldest first, the last one today.
type Queue struct {
	Hours []Usage
	Days  []Usage
}

// Source gives queues' histories.
type Source interface {
	// Queue returns queue's history up to now.
	Queue(ctx context.Context, queue string, now time.Time) (Queue, error)
}

const (
	hoursShown = 24
	daysShown  = 30
)

// buckets lays out the empty buckets of a history up to now.
func buckets(now time.Time) Queue {
	now = now.UTC()
	var q Queue
	hour := now.Truncate(time.Hour)
	for i := hoursShown - 1; i >= 0; i-- {
		q.Hours = append(q.Hours, Usage{Start: hour.Add(-time.Duration(i) * time.Hour)})
	}
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	for i := daysShown - 1; i >= 0; i-- {
		q.Days = append(q.Days, Usage{Start: day.AddDate(0, 0, -i)})
	}
	return q
}
