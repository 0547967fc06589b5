// Package apicalls counts API requests, from the API server's apiserver_request_total and from a
// client's rest_client_requests_total, so that a benchmark can say where a window's writes went:
// the API server's write rate is the first bottleneck a scheduler meets at scale on a small
// machine.
package apicalls

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// Calls counts requests by a key (verb, resource and subresource for the API server's; method and
// code for a client's). The difference between two readings around a window is the calls of
// everyone meanwhile (the API server's) or of one process (a client's).
type Calls map[string]float64

// APIServer reads the API server's requests by verb, resource and subresource.
func APIServer(ctx context.Context, cs kubernetes.Interface) (Calls, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return sumCounter(bytes.NewReader(raw), "apiserver_request_total", func(l map[string]string) string {
		key := l["verb"] + " " + l["resource"]
		if sub := l["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key
	})
}

// Client counts the requests one fairway process made, by method and response code,
// from the client-go metric rest_client_requests_total on its metrics endpoint. Unlike
// apiserver_request_total it holds that process's calls alone, so it tells fairway's writes
// from kwok's and the controllers' (client-go labels them by method, not by resource). url is
// the process's /metrics.
func Client(ctx context.Context, url string) (Calls, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading fairway's metrics: %w", err)
	}
	defer resp.Body.Close()
	return sumCounter(resp.Body, "rest_client_requests_total", func(l map[string]string) string {
		return l["method"] + " " + l["code"]
	})
}

// sumCounter parses a Prometheus text exposition and sums the counter name's samples by the key
// each one's labels give.
func sumCounter(r io.Reader, name string, key func(labels map[string]string) string) (Calls, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics: %w", err)
	}
	out := Calls{}
	for _, m := range families[name].GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[key(labels)] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Since returns the calls made after before, the largest first, at most n of them.
func (c Calls) Since(before Calls, n int) string {
	type kv struct {
		k string
		v float64
	}
	var d []kv
	for k, v := range c {
		if x := v - before[k]; x >= 1 {
			d = append(d, kv{k, x})
		}
	}
	slices.SortFunc(d, func(a, b kv) int { return int(b.v - a.v) })
	var parts []string
	for i, x := range d {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", x.k, x.v))
	}
	return strings.Join(parts, ", ")
}
