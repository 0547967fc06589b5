//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/dashboards"
	"github.com/fairway-sched/fairway/dashboards/catalog"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// dashboardsStrictEnv set to 0 lets panels that wait for a missing component or a requested
// metric pass (reported as WAITING / MISSING): for a fairway binary built without a component.
// Every component is in the tree, so by default (and in CI) they fail.
const dashboardsStrictEnv = "FAIRWAY_DASHBOARDS_STRICT"

// TestDashboards is `make dashboards-check`: a local cluster with the gpu-agents, kwok's stand-in
// for the kubelets' resource metrics (pod CPU and memory use) and (when the fairway binary has
// it) the scheduler, scraped every second by a real Prometheus built from
// github.com/prometheus/prometheus, runs a workload that makes every panel's series exist
// (queues that borrow and reclaim, notebooks on a shared GPU going idle, a notebook swapped to
// host RAM for a loan and back (the agents run with --swap), a training gang, a pod that cannot
// fit). Then every query of every dashboard goes to Prometheus's HTTP API, which
// refuses one it cannot parse, over the run's time range: a query that returns nothing fails
// the test, listed with all the others, unless it waits for a metric requested from a component
// or for a component this binary does not have (reported as WAITING / MISSING, failures unless
// FAIRWAY_DASHBOARDS_STRICT=0).
func TestDashboards(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	begin := time.Now()
	bin, err := gpuagents.BuildBinary(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// kwok plays the kubelets' resource metrics (CPU and memory per pod) too.
	c := cluster.StartT(t, cluster.Config{KwokMetrics: true, NodePools: []cluster.NodePool{
		{Name: "h100", Count: 2, GPUType: "H100", GPUsPerNode: 8, CPU: "224", Memory: "2Ti"},
		{Name: "a100", Count: 1, GPUType: "A100", GPUsPerNode: 8, CPU: "224", Memory: "2Ti"},
	}})
	nodes, err := gpuagents.GPUNodes(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := gpuagents.Start(ctx, c, gpuagents.Options{Nodes: nodes, Binary: bin, IdleAfter: 2 * time.Second, Args: swapAgentArgs, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	if err := fairwayproc.EnsureSystem(ctx, c, fairwayproc.DefaultNamespace); err != nil {
		t.Fatal(err)
	}

	targets := map[string][]string{}
	for _, n := range nodes {
		targets["gpu-agent"] = append(targets["gpu-agent"], hostPort(t, fleet.Agent(n.Name).MetricsURL))
	}
	// Each node's kubelet resource metrics, at its own path on kwok's server.
	for _, n := range nodes {
		targets["kubelet"] = append(targets["kubelet"], hostPort(t, c.KwokServerURL())+cluster.KubeletResourceMetricsPath(n.Name))
	}
	running := map[string]bool{"gpu-agent": true, "scheduler": true, "kubelet": true}
	sched, err := fairwayproc.StartScheduler(ctx, c, fairwayproc.SchedulerOptions{
		// Fair share over time on, so that its usage panels have data.
		Binary: bin, Args: []string{"--leader-elect=false", "--cycle-period=500ms", "--fair-share-usage-half-life=1h"},
	})
	if err != nil {
		t.Fatal(err)
	}
	targets["scheduler"] = []string{hostPort(t, sched.MetricsURL)}
	prom := startPrometheus(t, c, targets)
	prom.waitTargetsUp(t, len(targets["gpu-agent"])+len(targets["scheduler"])+len(targets["kubelet"]))

	runDashboardWorkload(t, c, fleet, running["scheduler"])
	// Let rate() windows and the agents' idle timer see the workload.
	time.Sleep(15 * time.Second)

	// Usage joined to queues counts each pod once: every running pod uses half its memory
	// request (kwok's usage), so each project's memory used is half what it holds.
	ratios := prom.instant(t, `sum by (queue) (pod_memory_working_set_bytes * on(namespace, pod) group_left(queue) fairway_pod_info)`+
		` / on(queue) sum by (queue) (fairway_queue_allocated{resource="memory"})`)
	if len(ratios) == 0 {
		t.Error("no project has memory used per allocated")
	}
	for q, r := range ratios {
		if r < 0.45 || r > 0.55 {
			t.Errorf("queue %s uses %.2f of the memory its pods hold, want 0.5 (half their requests)", q, r)
		}
	}
	t.Logf("memory used / allocated per project: %v", ratios)

	ix := dashIndex(t)
	scraped := prom.metricNames(t)
	report := checkDashboards(t, prom, ix, scraped, running, begin.Add(-time.Minute), time.Now())
	report.print(t)
	strict := os.Getenv(dashboardsStrictEnv) != "0"
	for _, r := range report.rows {
		switch {
		case r.status == statusFail:
			t.Errorf("%s / %s / %s: %s\n    %s", r.board, r.panel, r.ref, r.detail, r.expr)
		case strict && (r.status == statusWaiting || r.status == statusMissing):
			t.Errorf("%s / %s / %s: %s (%s=0 relaxes this)", r.board, r.panel, r.ref, r.detail, dashboardsStrictEnv)
		}
	}
}

func dashCreate(t *testing.T, c *cluster.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client().Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func dashIndex(t *testing.T) *catalog.Index {
	t.Helper()
	fams, err := catalog.Exported()
	if err != nil {
		t.Fatal(err)
	}
	return catalog.NewIndex(fams, catalog.Requested())
}

// promServer is a running Prometheus.
type promServer struct {
	url  string
	proc *cluster.Process
}

// startPrometheus runs bin/prometheus scraping every target every second. A target is
// host:port, scraped at /metrics, or host:port/path.
func startPrometheus(t *testing.T, c *cluster.Cluster, targets map[string][]string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	jobs := make([]string, 0, len(targets))
	for job := range targets {
		jobs = append(jobs, job)
	}
	slices.Sort(jobs)
	for _, job := range jobs {
		var quoted []string
		var pathed []string
		for _, a := range targets[job] {
			if hp, path, ok := strings.Cut(a, "/"); ok {
				// A path of its own (Prometheus's __metrics_path__ target label), and an instance
				// label with it, since several such targets share one host:port.
				pathed = append(pathed, fmt.Sprintf("      - targets: [%q]\n        labels: {__metrics_path__: %q, instance: %q}\n", hp, "/"+path, a))
				continue
			}
			quoted = append(quoted, strconv.Quote(a))
		}
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n", job)
		if len(quoted) > 0 {
			fmt.Fprintf(&cfg, "      - targets: [%s]\n", strings.Join(quoted, ", "))
		}
		cfg.WriteString(strings.Join(pathed, ""))
	}
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartProcess(cluster.ProcessSpec{Name: "prometheus", Path: "prometheus", Args: []string{
		"--config.file=" + conf, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port), "--log.level=warn",
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := &promServer{url: "http://127.0.0.1:" + strconv.Itoa(port), proc: p}
	if err := fairwayproc.WaitReady(t.Context(), p, s.url+"/-/ready", 0); err != nil {
		t.Fatal(err)
	}
	return s
}

// promResponse is the envelope of Prometheus's HTTP API.
type promResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (s *promServer) get(ctx context.Context, path string, params url.Values) (*promResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: %.200s", path, resp.Status, body)
	}
	return &r, nil
}

func (s *promServer) waitTargetsUp(t *testing.T, n int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%d scrape targets up", n), func(ctx context.Context) (bool, error) {
		r, err := s.get(ctx, "/api/v1/query", url.Values{"query": {"sum(up)"}})
		if err != nil || r.Status != "success" {
			return false, err
		}
		var v struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Data, &v); err != nil || len(v.Result) == 0 {
			return false, err
		}
		got, _ := strconv.ParseFloat(fmt.Sprint(v.Result[0].Value[1]), 64)
		return int(got) == n, fmt.Errorf("%v of %d up", got, n)
	})
}

// instant runs expr now and returns its value per queue label.
func (s *promServer) instant(t *testing.T, expr string) map[string]float64 {
	t.Helper()
	r, err := s.get(t.Context(), "/api/v1/query", url.Values{"query": {expr}})
	if err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %+v", expr, err, r)
	}
	var v struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, x := range v.Result {
		out[x.Metric["queue"]], _ = strconv.ParseFloat(fmt.Sprint(x.Value[1]), 64)
	}
	return out
}

// metricNames returns every metric name Prometheus has scraped.
func (s *promServer) metricNames(t *testing.T) map[string]bool {
	t.Helper()
	r, err := s.get(t.Context(), "/api/v1/label/__name__/values", url.Values{})
	if err != nil || r.Status != "success" {
		t.Fatalf("listing metric names: %v %+v", err, r)
	}
	var names []string
	if err := json.Unmarshal(r.Data, &names); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// queryRange runs expr over [start, end] and returns the number of series with data; a query
// Prometheus cannot parse or run returns an error naming why.
func (s *promServer) queryRange(ctx context.Context, expr string, start, end time.Time) (int, error) {
	r, err := s.get(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"2"}})
	if err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	var v struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return 0, err
	}
	return len(v.Result), nil
}

// Statuses of a query in the report.
const (
	statusOK      = "ok"
	statusEmpty   = "empty (optional)"
	statusWaiting = "WAITING"
	statusMissing = "MISSING"
	statusFail    = "FAIL"
)

type dashRow struct {
	board, panel, ref, expr string
	series                  int
	status, detail          string
}

type dashReport struct{ rows []dashRow }

// checkDashboards runs every query and classifies it.
func checkDashboards(t *testing.T, prom *promServer, ix *catalog.Index, scraped, running map[string]bool, start, end time.Time) *dashReport {
	t.Helper()
	rep := &dashReport{}
	for _, b := range dashboards.All() {
		panels := map[string][]int{} // panel -> row indexes, for the all-optional rule
		for _, q := range b.Queries() {
			expr := b.Expand(q.Expr)
			row := dashRow{board: b.UID, panel: q.Panel, ref: q.RefID, expr: expr}
			n, err := prom.queryRange(t.Context(), expr, start, end)
			row.series = n
			switch {
			case err != nil:
				row.status, row.detail = statusFail, "Prometheus refused the query: "+err.Error()
			case n > 0:
				row.status = statusOK
			default:
				row.status, row.detail = classifyEmpty(expr, q.Optional, ix, scraped, running)
			}
			panels[q.Panel] = append(panels[q.Panel], len(rep.rows))
			rep.rows = append(rep.rows, row)
		}
		for panel, idx := range panels {
			empty := true
			for _, i := range idx {
				empty = empty && rep.rows[i].status == statusEmpty
			}
			if empty {
				for _, i := range idx {
					rep.rows[i].status, rep.rows[i].detail = statusFail, "every query of panel "+panel+" returned nothing"
				}
			}
		}
	}
	return rep
}

// classifyEmpty says why a query returned nothing: a metric a component was asked for and does
// not export yet, a component that does not run here, a metric nobody exports, or plain
// emptiness (a failure unless the query is optional).
func classifyEmpty(expr string, optional bool, ix *catalog.Index, scraped, running map[string]bool) (string, string) {
	status, detail, unknown := whyEmpty(expr, ix, scraped, running)
	// An optional query (an error counter) may rightly have no series at all; one that names a
	// metric nobody exports still fails.
	if optional && !unknown {
		return statusEmpty, "optional, returned nothing: " + detail
	}
	return status, detail
}

// whyEmpty explains an empty result; unknown is true when the query names a metric that no
// component exports or is asked for.
func whyEmpty(expr string, ix *catalog.Index, scraped, running map[string]bool) (status, detail string, unknown bool) {
	refs, err := dashboards.Metrics(expr)
	if err != nil {
		return statusFail, err.Error(), true
	}
	for _, r := range refs {
		name := r.Name
		if r.Regex {
			if slices.ContainsFunc(slices.Collect(maps.Keys(scraped)), r.Matches) {
				continue
			}
			// No scraped metric matches: judge by the first known metric that would.
			known := append(ix.SeriesNames(), ix.RequestedNames()...)
			i := slices.IndexFunc(known, r.Matches)
			if i < 0 {
				return statusFail, fmt.Sprintf("{__name__=~%q} matches no metric any component exports", r.Name), true
			}
			name = known[i]
		}
		if scraped[name] {
			continue
		}
		if f, ok := ix.Exported(name); ok {
			if !running[f.Component] {
				return statusMissing, fmt.Sprintf("%s is exported by %s, which does not run here", name, f.Component), false
			}
			return statusFail, fmt.Sprintf("%s is exported by %s but Prometheus scraped no series of it", name, f.Component), false
		}
		if req, ok := ix.Requested(name); ok {
			if !running[req.Component] {
				return statusMissing, fmt.Sprintf("%s: the %s does not run here", name, req.Component), false
			}
			return statusWaiting, fmt.Sprintf("%s is requested from %s, not exported yet", name, req.Component), false
		}
		return statusFail, fmt.Sprintf("no component exports %s", name), true
	}
	for _, lr := range ix.LabelRequests() {
		if strings.Contains(expr, lr.Name) && strings.Contains(expr, lr.Label) {
			return statusWaiting, fmt.Sprintf("label %s on %s is requested from %s", lr.Label, lr.Name, lr.Component), false
		}
	}
	return statusFail, "returned nothing", false
}

// print logs the summary table and keeps it in the test's artifacts directory.
func (r *dashReport) print(t *testing.T) {
	t.Helper()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "DASHBOARD\tPANEL\tREF\tSERIES\tSTATUS\tDETAIL")
	counts := map[string]int{}
	for _, row := range r.rows {
		counts[row.status]++
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", strings.TrimPrefix(row.board, "fairway-"), row.panel, row.ref, row.series, row.status, row.detail)
	}
	w.Flush()
	fmt.Fprintf(&b, "\n%d queries: %d ok, %d optional empty, %d waiting for requested metrics, %d missing a component, %d failed\n",
		len(r.rows), counts[statusOK], counts[statusEmpty], counts[statusWaiting], counts[statusMissing], counts[statusFail])
	t.Log("\n" + b.String())
	if dir, err := cluster.ArtifactsDir(t); err == nil {
		if os.MkdirAll(dir, 0o755) == nil {
			_ = os.WriteFile(filepath.Join(dir, "dashboards-check.txt"), []byte(b.String()), 0o644)
		}
	}
}
