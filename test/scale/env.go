package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/test/bench/apicalls"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// Options say how big a cluster to play the suite on and which scenarios to play.
type Options struct {
	// Nodes is KAI's NODE_COUNT: the big cluster's kwok nodes of 8 GPUs each. 500 when zero.
	Nodes int
	// Samples is KAI's statusMeasuringSamples: how many single-GPU reclaims and impossible
	// gangs are averaged. 10 when zero.
	Samples int
	// Binary is the fairway binary; fairwayproc.Build's choice when empty.
	Binary string
	// Scenarios names the scenarios to play (see Scenarios); all when empty.
	Scenarios []string
	// PprofDir, when set, receives CPU profiles of the scheduler taken during each scenario's
	// measured window, 10-second profiles named <scenario>-<n>.pb.gz (go tool pprof merges them).
	PprofDir string
	// SchedulerArgs are appended to the chart's scheduler flags, for experiments
	// (--zap-log-level=2 logs every cycle).
	SchedulerArgs []string
	// Logf receives progress; discarded when nil.
	Logf func(format string, args ...any)
}

// GPUsPerNode is KAI's gpusPerNode: every node of the suite has 8 GPUs.
const GPUsPerNode = 8

// ClusterConfig is the cluster the suite needs: no nodes at start (the suite adds the topology
// tree's, then the big cluster's), and a kube-controller-manager whose client is fast enough
// that the Job controller does not pace the scenarios. Its default (20 QPS, burst 30) creates
// about ten of KAI's one-pod Jobs a second (a pod, then the Job's status), so filling 500 nodes
// would take the Job controller seven minutes before any scheduler is timed; KAI's control plane
// is not described beyond "dedicated".
func ClusterConfig() cluster.Config {
	return cluster.Config{
		ControllerManagerFlags: []string{"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-job-syncs=20",
			"--concurrent-gc-syncs=40"},
		StartTimeout: 5 * time.Minute,
		// kwok plays every node's kubelet with 4 workers by default: a reclaim of 2,000 pods,
		// each turned Failed and then deleted by its "kubelet", queued 22 s behind the last
		// eviction at 500 nodes (issue 37). 500 kubelets report their own pods in parallel.
		KwokPodParallelism: 32,
	}
}

// chartSchedulerArgs are the scheduler's flags as charts/fairway renders them with its default
// values (templates/scheduler-deployment.yaml), less what a local process sets itself
// (kubeconfig, namespace, ports) and the admission key, which only matters with the webhook.
var chartSchedulerArgs = []string{
	"--leader-elect=true", "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s",
	"--leader-elect-retry-period=2s", "--write-timeout=5s", "--placement=binpack", "--eviction-grace-period=30s",
	"--loan-return-grace-period=5s", "--stale-gang-grace-period=60s", "--fair-share-usage-half-life=0s",
	"--fair-share-usage-weight=1", "--kube-api-qps=100", "--kube-api-burst=200",
	"--reservation-image=registry.k8s.io/pause:3.10", "--reservation-priority-class=system-node-critical",
	"--zap-log-level=info",
}

// env is one play of the suite on a running cluster.
type env struct {
	o     Options
	c     *cluster.Cluster
	cs    kubernetes.Interface
	cl    client.Client
	watch *podWatch

	mu       sync.Mutex
	sched    *fairwayproc.Scheduler
	restarts int
	pprof    string // host:port of the scheduler's pprof endpoints
}

func (e *env) logf(format string, args ...any) {
	if e.o.Logf != nil {
		e.o.Logf(format, args...)
	}
}

// startScheduler starts fairway's scheduler (KAI: EnableScheduler) and returns once it leads and
// its snapshot is built.
func (e *env) startScheduler(ctx context.Context) error {
	e.mu.Lock()
	e.restarts++
	name := fmt.Sprintf("fairway-scheduler-%d", e.restarts)
	e.mu.Unlock()
	s, err := fairwayproc.StartScheduler(ctx, e.c, fairwayproc.SchedulerOptions{
		Binary: e.o.Binary, Name: name, NoFastFlags: true, Timeout: 5 * time.Minute,
		Args: slices.Concat(chartSchedulerArgs, []string{"--pprof-bind-address=" + e.pprof}, e.o.SchedulerArgs),
	})
	if err != nil {
		if s != nil {
			_ = s.Stop()
		}
		return err
	}
	e.mu.Lock()
	e.sched = s
	e.mu.Unlock()
	return nil
}

// stopScheduler stops the scheduler (KAI: DisableScheduler); SIGTERM releases its Lease, so the
// next one leads at once.
func (e *env) stopScheduler() error {
	e.mu.Lock()
	s := e.sched
	e.sched = nil
	e.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Stop()
}

// schedPid is the running scheduler's process id, 0 when none runs.
func (e *env) schedPid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sched == nil {
		return 0
	}
	return e.sched.Pid()
}

// schedTail is the end of the running scheduler's log, for errors.
func (e *env) schedTail() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sched == nil {
		return "(no scheduler running)"
	}
	return e.sched.Tail(20)
}

// meter measures one scenario's measured window: the scheduler's CPU seconds and peak RSS (over
// the scheduler processes that ran in it) and the control plane's CPU seconds, and takes CPU
// profiles when asked to.
type meter struct {
	e        *env
	name     string
	stop     chan struct{}
	done     sync.WaitGroup
	mu       sync.Mutex
	cpu      map[int][2]float64 // pid: CPU seconds at the first and the last sample
	peakKiB  int64
	started  bool
	plane    []int
	plane0   []float64
	profiles int
	// calls0 and own0 are the API server's requests and the scheduler's own at begin (nil when
	// they could not be read).
	calls0, own0 apicalls.Calls
}

func (e *env) begin(name string) *meter {
	m := &meter{e: e, name: name, stop: make(chan struct{}), cpu: map[int][2]float64{}}
	for _, p := range e.c.Processes() {
		switch p.Name() {
		case "kube-apiserver", "etcd", "kwok", "kube-controller-manager":
			m.plane = append(m.plane, p.Pid())
			m.plane0 = append(m.plane0, cluster.CPUSeconds(p.Pid()))
		}
	}
	m.calls0, m.own0 = m.readCalls()
	m.sample()
	m.mu.Lock()
	m.started = true
	m.mu.Unlock()
	m.done.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.sample()
			}
		}
	})
	if e.o.PprofDir != "" {
		ctx, cancel := context.WithCancel(context.Background())
		m.done.Go(func() { <-m.stop; cancel() })
		m.done.Go(func() { m.profile(ctx) })
	}
	return m
}

// sample records the running scheduler's CPU and RSS. A scheduler first seen after the window
// began started inside it, so all of its CPU counts; the one running at begin counts from there.
func (m *meter) sample() {
	pid := m.e.schedPid()
	if pid == 0 {
		return
	}
	cpu, kib := cluster.CPUSeconds(pid), cluster.RSSKiB(pid)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, seen := m.cpu[pid]
	if !seen && !m.started {
		v[0] = cpu
	}
	if cpu > 0 {
		v[1] = cpu
	}
	m.cpu[pid] = v
	m.peakKiB = max(m.peakKiB, kib)
}

// profile fetches 10-second CPU profiles from the scheduler until ctx ends.
func (m *meter) profile(ctx context.Context) {
	for ctx.Err() == nil {
		url := "http://" + m.e.pprof + "/debug/pprof/profile?seconds=10"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		m.mu.Lock()
		m.profiles++
		n := m.profiles
		m.mu.Unlock()
		path := filepath.Join(m.e.o.PprofDir, fmt.Sprintf("%s-%d.pb.gz", m.name, n))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			m.e.logf("writing %s: %v", path, err)
		}
	}
}

// saveMetrics keeps the scheduler's /metrics at the end of the window (<scenario>.metrics beside
// the profiles): its cycle, binding and eviction histograms say where the window's time went.
func (m *meter) saveMetrics() {
	m.e.mu.Lock()
	s := m.e.sched
	m.e.mu.Unlock()
	if s == nil || m.name == "" {
		return
	}
	resp, err := http.Get(s.MetricsURL)
	if err != nil {
		m.e.logf("reading the scheduler's metrics: %v", err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return
	}
	path := filepath.Join(m.e.o.PprofDir, m.name+".metrics")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		m.e.logf("writing %s: %v", path, err)
	}
}

// readCalls reads the API server's requests and the running scheduler's own; nil for what
// could not be read (logged), so that a window's figure never depends on its metrics.
func (m *meter) readCalls() (all, own apicalls.Calls) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all, err := apicalls.APIServer(ctx, m.e.cs)
	if err != nil {
		m.e.logf("%s: %v", m.name, err)
	}
	m.e.mu.Lock()
	s := m.e.sched
	m.e.mu.Unlock()
	if s == nil {
		return all, nil
	}
	if own, err = apicalls.Client(ctx, s.MetricsURL); err != nil {
		m.e.logf("%s: %v", m.name, err)
	}
	return all, own
}

// Usage is what a scenario's measured window cost.
type Usage struct {
	SchedCPU    float64 // the scheduler's CPU seconds
	SchedRSSMiB int64   // its peak resident memory
	PlaneCPU    float64 // kube-apiserver's, etcd's, kwok's and kube-controller-manager's CPU seconds
	// Requests are the API server's requests in the window, everyone's, the most frequent
	// first, by verb, resource and subresource; SchedRequests the scheduler's own, by method
	// and code (one scheduler across the window, else empty): where the writes went.
	Requests, SchedRequests string
}

func (m *meter) end() Usage {
	m.sample()
	if m.e.o.PprofDir != "" {
		m.saveMetrics()
	}
	close(m.stop)
	m.done.Wait()
	var u Usage
	all, own := m.readCalls()
	if all != nil && m.calls0 != nil {
		u.Requests = all.Since(m.calls0, 10)
	}
	if own != nil && m.own0 != nil {
		u.SchedRequests = own.Since(m.own0, 6)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.cpu {
		u.SchedCPU += v[1] - v[0]
	}
	u.SchedRSSMiB = m.peakKiB / 1024
	for i, pid := range m.plane {
		u.PlaneCPU += cluster.CPUSeconds(pid) - m.plane0[i]
	}
	return u
}

// poll calls cond every interval until it is true, returns an error, ctx ends or timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

var errOutcome = errors.New("wrong outcome")
