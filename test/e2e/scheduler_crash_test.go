//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// auditPolicy records every binding (pods/binding create) with its request, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/binding"]
- level: None
`

// TestSchedulerCrashSafety runs two scheduler replicas against a burst of 500 pods (gangs,
// fractional pods and single GPUs, each finishing a few seconds after it starts) and kills the
// leader with SIGKILL ten times while it schedules; a killed replica comes back as the standby.
// While it runs, no node ever holds more whole GPUs (pods and reservations) than it has, nor a GPU
// more than its whole share; afterwards every pod has run, and the API server's audit log shows
// each was bound exactly once.
func TestSchedulerCrashSafety(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	const nodes, gpusPerNode = 8, 8
	c := cluster.StartT(t, cluster.Config{
		NodePools:      []cluster.NodePool{cluster.H100Pool(nodes)},
		APIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	ensureSchedFixtures(t, c)
	agentNodes, err := gpuagents.GPUNodes(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet stand-ins admit a pod only when its node has the devices it asks for free, one
	// pod per device, in the order the API server changed the pods: every refusal is an
	// over-commit as a real kubelet would see it.
	refusals := &errorCounter{LogSink: testr.New(t).GetSink(), count: new(atomic.Int32)}
	fleet, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Nodes: agentNodes, Binary: bin, RefreshInterval: 30 * time.Second, Log: logr.New(refusals)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	ns := "burst"
	newNamespace(t, c, ns)
	schedQueue(t, c, ns, "", ns)

	// Two replicas; the first is the leader.
	var (
		mu       sync.Mutex
		replicas []*schedProc
		started  int
	)
	start := func(wait bool) *schedProc {
		mu.Lock()
		name := fmt.Sprintf("fairway-scheduler-%d", started)
		started++
		mu.Unlock()
		// A gang whose binding a kill interrupted is completed first; the grace period only
		// matters when the cluster has no room for its missing pods for that long.
		p := startSched(t, c, bin, name, wait, "--stale-gang-grace-period=10s")
		mu.Lock()
		replicas = append(replicas, p)
		mu.Unlock()
		return p
	}
	start(true)
	start(false)
	// A replica that loses its lease exits, as controller-runtime's leader election does, and its
	// pod's kubelet would start it again: on a loaded machine the API server can answer the test's
	// 1 s renewals too late for both replicas at once. The test plays that kubelet before it
	// looks for a leader; a replica it killed itself has left the list by then.
	selfExits := 0
	restartExited := func() {
		mu.Lock()
		var live, exited []*schedProc
		for _, r := range replicas {
			select {
			case <-r.Done():
				exited = append(exited, r)
			default:
				live = append(live, r)
			}
		}
		replicas = live
		mu.Unlock()
		for _, r := range exited {
			selfExits++
			t.Logf("%s exited on its own (its lease lost?); starting another replica as its kubelet would", r.Name())
			start(false)
		}
	}

	// The burst: 500 pods, each done 3s after it starts.
	run := 3 * time.Second
	var pods []*corev1.Pod
	for g := range 30 {
		for i := range 4 {
			pods = append(pods, schedPod(ns, fmt.Sprintf("g4-%02d-%d", g, i), ns).GPUs(1).Gang(fmt.Sprintf("g4-%02d", g), 4).CompleteAfter(run).Obj())
		}
	}
	for g := range 4 {
		for i := range 8 {
			pods = append(pods, schedPod(ns, fmt.Sprintf("g8-%d-%d", g, i), ns).GPUs(1).Gang(fmt.Sprintf("g8-%d", g), 8).CompleteAfter(run).Obj())
		}
	}
	for i := range 200 {
		f := []string{"0.25", "0.5", "0.333"}[i%3]
		pods = append(pods, schedPod(ns, fmt.Sprintf("frac-%03d", i), ns).Fraction(f).CompleteAfter(run).Obj())
	}
	for i := len(pods); i < 500; i++ {
		pods = append(pods, schedPod(ns, fmt.Sprintf("one-%03d", i), ns).GPUs(1).CompleteAfter(run).Obj())
	}
	rand.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var violations []string
	var samples atomic.Int32
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		for ctx.Err() == nil {
			violations = append(violations, checkGPUAccounting(ctx, c, gpusPerNode)...)
			samples.Add(1)
			time.Sleep(300 * time.Millisecond)
		}
	}()

	begin := time.Now()
	createAll(t, c, pods, 16)
	t.Logf("500 pods created in %v", time.Since(begin).Round(time.Millisecond))

	// Ten times: find the leader, let it work a moment, kill it with SIGKILL, start a new
	// standby, wait for the other replica to lead.
	leaders := map[string]bool{}
	for kill := range 10 {
		leader := waitLeader(t, &mu, &replicas, restartExited, 30*time.Second)
		leaders[leader.Name()] = true
		time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		if err := syscall.Kill(leader.Pid(), syscall.SIGKILL); err != nil {
			t.Fatalf("killing %s: %v", leader.Name(), err)
		}
		<-leader.Done()
		mu.Lock()
		for i, r := range replicas {
			if r == leader {
				replicas = append(replicas[:i], replicas[i+1:]...)
				break
			}
		}
		mu.Unlock()
		t.Logf("kill %d: %s (leader) killed at %v", kill+1, leader.Name(), time.Since(begin).Round(time.Millisecond))
		start(false)
	}
	leaders[waitLeader(t, &mu, &replicas, restartExited, 30*time.Second).Name()] = true

	progress := "none yet"
	eventually(t, 4*time.Minute, "every pod of the burst run to completion", func(ctx context.Context) (bool, error) {
		// A list that outlasts the last poll's deadline must not hide how far the burst got.
		all, err := listPods(ctx, c, ns, nil)
		if err != nil {
			return false, fmt.Errorf("listing pods: %w (last count: %s)", err, progress)
		}
		done := 0
		for _, p := range all {
			if p.Status.Phase == corev1.PodSucceeded {
				done++
			}
		}
		progress = fmt.Sprintf("%d of %d done", done, len(pods))
		return done == len(pods), errors.New(progress)
	})
	t.Logf("all 500 pods ran in %v with 10 leader kills; %d replicas led; %d replicas exited on their own", time.Since(begin).Round(time.Millisecond), len(leaders), selfExits)
	cancel()
	<-checkDone
	t.Logf("GPU accounting checked %d times during the burst", samples.Load())
	for i, v := range violations {
		if i == 20 {
			t.Errorf("... and %d more", len(violations)-20)
			break
		}
		t.Errorf("over-commit: %s", v)
	}
	if n := refusals.count.Load(); n > 0 {
		t.Errorf("the kubelet stand-ins refused %d pods for lack of free GPUs", n)
	}
	if len(leaders) < 10 {
		t.Errorf("only %d replicas ever led; every kill must hand over", len(leaders))
	}

	// The API server's own record: every pod bound exactly once. A binding whose client was
	// killed while the API server wrote it is recorded as a timeout (504, context canceled)
	// although it took effect: it counts as the pod's binding when it names the pod's node.
	// Two such requests for one pod (two leaders cut in turn, or a loaded API server timing one
	// out) are one binding: the API server refuses to bind a bound pod, so at most one took
	// effect, and the pod is on their node.
	audit := readBindings(t, auditLog)
	final := map[string]string{}
	for _, p := range podsIn(t, c, context.Background(), ns, nil) {
		final[p.Namespace+"/"+p.Name] = p.Spec.NodeName
	}
	twice, never, interrupted, refused := 0, 0, 0, 0
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		var ok, cut int
		for _, a := range audit[key] {
			switch {
			case a.code >= 200 && a.code < 300:
				ok++
			case a.code == 504 && a.node == final[key]:
				cut++
			default:
				refused++
			}
		}
		switch {
		case ok > 1:
			twice++
			t.Errorf("pod %s bound %d times", key, ok)
		case ok == 0 && cut >= 1:
			interrupted++
		case ok == 0:
			never++
			t.Errorf("pod %s (on %q) has no binding in the audit log: %+v", key, final[key], audit[key])
		}
	}
	t.Logf("audit log: %d pods bound once (%d of them by a request whose scheduler was killed mid-request), %d attempts refused by the API server; bound twice: %d, never: %d",
		len(pods)-twice-never, interrupted, refused, twice, never)
	if n := len(podsIn(t, c, context.Background(), schedNamespace, map[string]string{fairwayv1.ReservationLabel: "true"})); n != 0 {
		eventually(t, 20*time.Second, "every reservation released", func(ctx context.Context) (bool, error) {
			return len(podsIn(t, c, ctx, schedNamespace, map[string]string{fairwayv1.ReservationLabel: "true"})) == 0, nil
		})
	}
}

// createAll creates pods from workers goroutines.
func createAll(t *testing.T, c *cluster.Cluster, pods []*corev1.Pod, workers int) {
	t.Helper()
	ch := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range workers {
		wg.Go(func() {
			for p := range ch {
				if err := c.Client().Create(t.Context(), p); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for _, p := range pods {
		ch <- p
	}
	close(ch)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("creating pods: %v", err)
	}
}

// waitLeader returns the replica whose fairway_leader gauge is 1, calling restartExited before
// each look.
func waitLeader(t *testing.T, mu *sync.Mutex, replicas *[]*schedProc, restartExited func(), timeout time.Duration) *schedProc {
	t.Helper()
	var leader *schedProc
	eventually(t, timeout, "a leader", func(ctx context.Context) (bool, error) {
		restartExited()
		mu.Lock()
		rs := append([]*schedProc(nil), (*replicas)...)
		mu.Unlock()
		for _, r := range rs {
			fams, err := scrape(ctx, r.MetricsURL)
			if err != nil {
				continue
			}
			if v, ok := value(fams, "fairway_leader", nil); ok && v == 1 {
				leader = r
				return true, nil
			}
		}
		return false, nil
	})
	return leader
}

// checkGPUAccounting recomputes, from one list of the pods, what every node holds as the kubelet
// sees it: whole GPUs of live pods plus reservations must not exceed its GPUs, and the shares on
// one GPU (node, fairway.dev/gpu-index) must not exceed one GPU.
func checkGPUAccounting(ctx context.Context, c *cluster.Cluster, gpusPerNode int64) []string {
	var list corev1.PodList
	if err := c.Client().List(ctx, &list); err != nil {
		return nil
	}
	whole := map[string]int64{}
	shares := map[string]int64{}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			q := ctr.Resources.Limits[fairwayv1.ResourceGPU]
			whole[p.Spec.NodeName] += q.Value()
		}
		if share, _ := gpurequest.Parse(p.Annotations); share.Milli > 0 {
			shares[p.Spec.NodeName+"/"+p.Annotations[fairwayv1.GPUIndexAnnotation]] += share.Milli
		}
	}
	for n, g := range whole {
		if g > gpusPerNode {
			out = append(out, fmt.Sprintf("node %s: %d whole GPUs held (pods and reservations), it has %d", n, g, gpusPerNode))
		}
	}
	for k, m := range shares {
		if m > 1000 {
			out = append(out, fmt.Sprintf("GPU %s: shares sum to %d milli-GPU", k, m))
		}
	}
	return out
}

// errorCounter is a log sink that counts errors and passes everything on.
type errorCounter struct {
	logr.LogSink
	count *atomic.Int32
}

func (e *errorCounter) Error(err error, msg string, kv ...any) {
	e.count.Add(1)
	e.LogSink.Error(err, msg, kv...)
}

func (e *errorCounter) WithValues(kv ...any) logr.LogSink {
	return &errorCounter{LogSink: e.LogSink.WithValues(kv...), count: e.count}
}

func (e *errorCounter) WithName(name string) logr.LogSink {
	return &errorCounter{LogSink: e.LogSink.WithName(name), count: e.count}
}

// bindingAttempt is one pods/binding request in the audit log.
type bindingAttempt struct {
	code int
	node string
}

// readBindings returns the binding requests of an audit log per namespace/name.
func readBindings(t *testing.T, path string) map[string][]bindingAttempt {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	defer f.Close()
	out := map[string][]bindingAttempt{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			ObjectRef struct {
				Resource, Subresource, Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestObject struct {
				Target struct {
					Name string `json:"name"`
				} `json:"target"`
			} `json:"requestObject"`
		}
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef.Subresource != "binding" {
			continue
		}
		key := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		out[key] = append(out[key], bindingAttempt{code: ev.ResponseStatus.Code, node: ev.RequestObject.Target.Name})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
