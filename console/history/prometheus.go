package history

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus reads queues' histories from a Prometheus server that scrapes the scheduler's
// fairway_queue_allocated gauge: the hour's (day's) average allocation times its length.
type Prometheus struct {
	api promv1.API
}

// NewPrometheus returns a source that asks the Prometheus server at url; rt, when not nil,
// carries the requests (a bearer token, a CA).
func NewPrometheus(url string, rt http.RoundTripper) (*Prometheus, error) {
	c, err := api.NewClient(api.Config{Address: url, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("the Prometheus URL %q: %w", url, err)
	}
	return &Prometheus{api: promv1.NewAPI(c)}, nil
}

// Query is the PromQL the source asks for a queue's average allocation per resource over each
// window ("1h", "1d").
func Query(queue, window string) string {
	return fmt.Sprintf(`avg_over_time(fairway_queue_allocated{queue=%s,resource=~"gpu|cpu|memory"}[%s])`, strconv.Quote(queue), window)
}

// Queue returns the queue's history up to now.
func (p *Prometheus) Queue(ctx context.Context, queue string, now time.Time) (Queue, error) {
	out := buckets(now)
	// A sample at t averages the window before t: the bucket that starts at t-window.
	if err := p.fill(ctx, queue, "1h", time.Hour, out.Hours); err != nil {
		return out, err
	}
	if err := p.fill(ctx, queue, "1d", 24*time.Hour, out.Days); err != nil {
		return out, err
	}
	return out, nil
}

func (p *Prometheus) fill(ctx context.Context, queue, window string, step time.Duration, into []Usage) error {
	r := promv1.Range{Start: into[0].Start.Add(step), End: into[len(into)-1].Start.Add(step), Step: step}
	v, _, _, err := p.api.QueryRange(ctx, Query(queue, window), r)
	if err != nil {
		return fmt.Errorf("asking Prometheus for queue %s's usage: %w", queue, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return fmt.Errorf("asking Prometheus for queue %s's usage: a %s, not a matrix", queue, v.Type())
	}
	hours := step.Hours()
	for _, s := range m {
		for _, sp := range s.Values {
			start := sp.Timestamp.Time().Add(-step).UTC()
			for i := range into {
				if !into[i].Start.Equal(start) {
					continue
				}
				val := float64(sp.Value) * hours
				switch s.Metric["resource"] {
				case "gpu":
					into[i].GPUHours = val
				case "cpu":
					into[i].CPUHours = val
				case "memory":
					into[i].MemoryGiBHours = val / (1 << 30)
				}
			}
		}
	}
	return nil
}

var _ Source = (*Prometheus)(nil)
