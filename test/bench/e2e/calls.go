package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiCalls counts the API server's requests by verb, resource and subresource, from its
// apiserver_request_total metric. Only one scheduler runs at a time, so the difference between
// two readings around a burst is the calls of that scheduler, of the creator and of the
// cluster's controllers meanwhile: it shows where a scheduler's calls go.
type apiCalls map[string]float64

func readAPICalls(ctx context.Context, cs kubernetes.Interface) (apiCalls, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := apiCalls{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	return out, sc.Err()
}

// readClientCalls counts the requests one fairway process made, by method and response code,
// from the client-go metric rest_client_requests_total on its metrics endpoint (addr). Unlike
// apiserver_request_total it holds that process's calls alone, so it tells fairway's writes
// from kwok's and the controllers' (client-go labels them by method, not by resource).
func readClientCalls(ctx context.Context, addr string) (apiCalls, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading fairway's metrics: %w", err)
	}
	defer resp.Body.Close()
	out := apiCalls{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("rest_client_requests_total{"):end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		out[labels["method"]+" "+labels["code"]] += v
	}
	return out, sc.Err()
}

// since returns the calls made after before, the largest first, at most n of them.
func (c apiCalls) since(before apiCalls, n int) string {
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
