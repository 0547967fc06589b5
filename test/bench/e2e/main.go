// Command e2e is `make bench-e2e`: scheduling throughput on a local cluster of kwok nodes,
// fairway against the real kube-scheduler and against the ceiling, in the same run, on the same
// API server, with the same client QPS and burst.
//
// The ceiling is a no-op binder (noop.go): it binds every pod to the next node round-robin, one
// call per pod, deciding nothing. It is what the API server and the client limits let any
// scheduler reach; fairway's share of it says what fairway's decisions and its other API calls
// cost.
//
// For each scheduler in turn it creates a burst of plain 1-GPU pods as fast as the API server
// takes them (a creator client with its own high limits) and measures pods per second from the
// first creation to the last binding, as seen by a watch. Only one scheduler runs at a time;
// the pods of a run are deleted before the next. With -runs > 1 the order of the schedulers
// rotates and the medians are printed. The last lines of output are
//
//	bench-e2e: scheduler        pods/s   share of ceiling
//	bench-e2e: fairway          X        X/Z
//	bench-e2e: kube-scheduler   Y        Y/Z
//	bench-e2e: ceiling          Z        100%
//	bench-e2e: nodes=N pods=M fairway=X pods/s kube-scheduler=Y pods/s ceiling=Z pods/s ratio=X/Y fairway/ceiling=X/Z
//
// With -gang G the fairway pods come in gangs of G (PodGroup annotations, minMember G) and only
// fairway runs (kube-scheduler has no gangs):
//
//	bench-e2e: nodes=N pods=M gang=G fairway=X pods/s
//
// -schedulers runs only some of the schedulers. -baseline BIN runs another build of fairway
// (say, of main) as one more scheduler of the rotation, reported as its own row "baseline": on a
// shared 2-vCPU machine the CPU that one build spends per 1,000 pods moved by a quarter between
// invocations, so two builds are compared within one invocation, not across two. -profile DIR
// saves, for every burst of fairway (and of the baseline), a CPU profile of the burst and the
// allocations it made, from the scheduler's --pprof-bind-address.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/bench/apicalls"
	"github.com/fairway-sched/fairway/test/cluster"
)

type options struct {
	nodes, pods, gang, runs int
	qps                     float64
	burst                   int
	creators                int
	verbose                 bool
	keep                    string
	// noop and kubeconfig: run as the no-op binder (the benchmark starts itself so).
	noop       bool
	kubeconfig string
	// schedulers are the schedulers to run, in the rotation's order; baseline another fairway
	// binary to run as the scheduler "baseline"; profile where to save fairway's profiles.
	schedulers []string
	baseline   string
	fairway    string
	profile    string
	// idle is how long each scheduler runs with nothing to do before its burst, its and the
	// control plane's CPU measured: what a scheduler costs the API server when there is no work.
	idle time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 500, "kwok nodes")
	flag.IntVar(&o.pods, "pods", 5000, "pods in each burst")
	flag.IntVar(&o.gang, "gang", 0, "fairway only: pods in gangs of this size (0: plain pods, both schedulers)")
	flag.IntVar(&o.runs, "runs", 1, "bursts per scheduler; the medians are printed")
	flag.Float64Var(&o.qps, "qps", 100, "client QPS of both schedulers")
	flag.IntVar(&o.burst, "burst", 200, "client burst of both schedulers")
	flag.IntVar(&o.creators, "creators", 32, "goroutines creating pods")
	flag.BoolVar(&o.verbose, "v", false, "log the cluster's progress")
	flag.StringVar(&o.keep, "keep-logs", "", "copy the components' logs to this directory at the end")
	flag.BoolVar(&o.noop, "noop-binder", false, "internal: run as the no-op binder (the ceiling) on -kubeconfig, with -qps and -burst")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "internal: the no-op binder's kubeconfig")
	scheds := flag.String("schedulers", "fairway,kube-scheduler,noop-binder", "comma-separated schedulers to run: fairway, kube-scheduler, noop-binder (or noop)")
	flag.StringVar(&o.baseline, "baseline", "", "another fairway binary (e.g. built from main) to run in the same rotation, reported as the row \"baseline\"")
	flag.StringVar(&o.fairway, "fairway", "", "a fairway binary to run as the row \"fairway\" instead of building this tree's (with -baseline, two builds compared in one rotation)")
	flag.DurationVar(&o.idle, "idle", 0, "before each burst, measure the scheduler's and the control plane's CPU for this long with nothing to schedule")
	flag.StringVar(&o.profile, "profile", "", "save a CPU profile and an allocation profile of each fairway burst into this directory")
	flag.Parse()
	var err error
	for name, path := range map[string]*string{"-baseline": &o.baseline, "-fairway": &o.fairway} {
		if *path == "" {
			continue
		}
		// The cluster resolves a bare name in its bin directory; these are the caller's files.
		if *path, err = filepath.Abs(*path); err == nil {
			_, err = os.Stat(*path)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-e2e: "+name+":", err)
			os.Exit(2)
		}
	}
	if o.schedulers, err = parseSchedulers(*scheds, o.baseline, o.gang); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.noop {
		if err := runNoopBinder(ctx, o.kubeconfig, o.qps, o.burst); err != nil {
			fmt.Fprintln(os.Stderr, "noop-binder:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := logr.Discard()
	if o.verbose {
		log = funcr.New(func(_, args string) { fmt.Fprintln(os.Stderr, "cluster:", args) }, funcr.Options{})
	}
	tmp, err := os.MkdirTemp("", "bench-e2e-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := o.fairway
	if bin == "" {
		if bin, err = buildFairway(ctx, tmp); err != nil {
			return err
		}
	}
	// Enough GPUs that neither scheduler ever meets a full node: 1.5 pods' worth per node, at
	// least 8, and the pods' count per node within the 110 pods a node takes.
	gpus := max(8, (o.pods*3+o.nodes*2-1)/(o.nodes*2))
	pool := cluster.NodePool{Name: "bench", Count: o.nodes, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3",
		GPUsPerNode: gpus, GPUMemoryMiB: 81559, CPU: "256", Memory: "2Ti", Pods: 110}
	fmt.Printf("bench-e2e: starting a cluster of %d kwok nodes (%d GPUs each)\n", o.nodes, gpus)
	begin := time.Now()
	// Starting the cluster is mostly kwok taking over its nodes: on 2 vCPUs 2,000 nodes were all
	// Ready after 7m45s and 5,000 after 17m50s (with leaseFlags), so the limit grows with the
	// node count (10 minutes up to 2,400 nodes, 21 at 5,000).
	cfg := cluster.Config{NodePools: []cluster.NodePool{pool}, SkipCRDs: true, Logger: log,
		StartTimeout: max(10*time.Minute, time.Duration(o.nodes)*250*time.Millisecond)}
	cfg.KwokFlags, cfg.ControllerManagerFlags = leaseFlags(o.nodes)
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if o.keep != "" {
			keepLogs(c.LogDir(), o.keep)
		}
		_ = c.Stop()
	}()
	if err := applyCRDs(ctx, c, tmp); err != nil {
		return err
	}
	fmt.Printf("bench-e2e: cluster ready in %v\n", time.Since(begin).Round(time.Second))

	creatorCfg := c.RESTConfig()
	creatorCfg.QPS, creatorCfg.Burst = 5000, 10000
	creatorCfg.ContentType = "application/vnd.kubernetes.protobuf"
	creator, err := kubernetes.NewForConfig(creatorCfg)
	if err != nil {
		return err
	}
	b := &bench{o: o, c: c, cs: creator, bin: bin}
	if err := b.setup(ctx); err != nil {
		return err
	}

	rates, cpuPer1000, planeCPU := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for i := range o.runs {
		// Each scheduler goes first, second and last in turn.
		n := len(o.schedulers)
		order := slices.Concat(o.schedulers[i%n:], o.schedulers[:i%n])
		for _, s := range order {
			r, err := b.runOnce(ctx, s, i)
			if err != nil {
				return err
			}
			fmt.Printf("bench-e2e: run %d %-14s %7.1f pods/s (created in %v, last bound %v after the first creation, p50 latency %v, p99 %v, RSS %d MiB)\n",
				i+1, s, r.rate, r.created.Round(time.Millisecond), r.span.Round(time.Millisecond), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.rssMiB)
			rates[s] = append(rates[s], r.rate)
			cpuPer1000[s] = append(cpuPer1000[s], r.cpuPer1000)
			planeCPU[s] = append(planeCPU[s], r.controlPlaneCPU)
		}
	}
	fmt.Printf("bench-e2e: %d runs in %v (cluster start included)\n", o.runs, time.Since(begin).Round(time.Second))
	if o.gang > 0 {
		line := fmt.Sprintf("bench-e2e: nodes=%d pods=%d gang=%d fairway=%.1f pods/s", o.nodes, o.pods, o.gang, median(rates["fairway"]))
		if o.baseline != "" {
			line += fmt.Sprintf(" baseline=%.1f pods/s", median(rates[baselineName]))
		}
		fmt.Println(line)
		return nil
	}
	printSummary(o, rates, cpuPer1000, planeCPU)
	return nil
}

// printSummary prints the medians of the schedulers that ran, each beside the ceiling's where
// the no-op binder ran.
func printSummary(o options, rates, cpuPer1000, planeCPU map[string][]float64) {
	z, zCPU := median(rates[noopName]), median(cpuPer1000[noopName])
	_, ceiling := rates[noopName]
	fmt.Printf("bench-e2e: %-16s %8s  %16s  %22s  %14s  %s\n", "scheduler", "pods/s", "share of ceiling", "CPU s per 1,000 pods", "× no-op's CPU", "control plane CPU s")
	line := fmt.Sprintf("bench-e2e: nodes=%d pods=%d", o.nodes, o.pods)
	for _, s := range o.schedulers {
		name := s
		if s == noopName {
			name = "ceiling"
		}
		rate, cpu := median(rates[s]), median(cpuPer1000[s])
		share, times := "-", "-"
		if ceiling {
			share, times = fmt.Sprintf("%.1f%%", 100*rate/z), fmt.Sprintf("%.2f", cpu/zCPU)
		}
		fmt.Printf("bench-e2e: %-16s %8.1f  %16s  %22.2f  %14s  %.1f\n", name, rate, share, cpu, times, median(planeCPU[s]))
		line += fmt.Sprintf(" %s=%.1f pods/s", name, rate)
	}
	x, y := median(rates["fairway"]), median(rates["kube-scheduler"])
	if x > 0 && y > 0 {
		line += fmt.Sprintf(" ratio=%.2f", x/y)
	}
	if x > 0 && ceiling {
		line += fmt.Sprintf(" fairway/ceiling=%.1f%%", 100*x/z)
	}
	fmt.Println(line)
}

// noopName names the no-op binder's runs; baselineName those of the -baseline binary.
const (
	noopName     = "noop-binder"
	baselineName = "baseline"
)

// parseSchedulers turns -schedulers into the rotation's order, with the baseline after fairway
// when there is one. Gangs are fairway's alone.
func parseSchedulers(list, baseline string, gang int) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
			continue
		case "noop":
			s = noopName
		case "fairway", "kube-scheduler", noopName:
		default:
			return nil, fmt.Errorf("-schedulers: unknown scheduler %q (fairway, kube-scheduler, noop-binder)", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if gang > 0 {
		out = slices.DeleteFunc(out, func(s string) bool { return s != "fairway" })
	}
	if baseline != "" {
		i := slices.Index(out, "fairway") + 1
		out = slices.Insert(out, i, baselineName)
	}
	if len(out) == 0 {
		return nil, errors.New("-schedulers: no scheduler to run")
	}
	return out, nil
}

type bench struct {
	o   options
	c   *cluster.Cluster
	cs  kubernetes.Interface
	bin string
}

const benchNS = "bench"

func (b *bench) setup(ctx context.Context) error {
	for _, obj := range []struct {
		create func() error
	}{
		{func() error {
			_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fairway-system"}}, metav1.CreateOptions{})
			return err
		}},
		{func() error {
			return b.c.Client().Create(ctx, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: benchNS}, Spec: fairwayv1.QueueSpec{Namespaces: []string{benchNS}}})
		}},
	} {
		if err := obj.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Pods are refused until the default ServiceAccount exists.
	return poll(ctx, time.Minute, func() bool {
		_, err := b.cs.CoreV1().ServiceAccounts(benchNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
}

type result struct {
	rate          float64
	created, span time.Duration
	p50, p99      time.Duration
	rssMiB        int64
	// cpuPer1000 is the scheduler's CPU seconds per 1,000 bound pods; controlPlaneCPU the API
	// server's, etcd's and kwok's CPU seconds during the burst.
	cpuPer1000, controlPlaneCPU float64
}

// runOnce starts one scheduler, runs one burst through it, stops it and deletes the pods.
func (b *bench) runOnce(ctx context.Context, sched string, run int) (result, error) {
	name := fmt.Sprintf("%s-%d", sched, run)
	proc, addrs, err := b.startScheduler(sched, name)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = proc.Stop() }()
	if err := b.waitReady(ctx, sched, name, proc); err != nil {
		return result{}, err
	}
	if b.o.idle > 0 {
		idle := newCPUMeter(b.c, proc)
		before := idle.read()
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-time.After(b.o.idle):
		}
		_, text := idle.since(before)
		fmt.Printf("bench-e2e: %s: CPU idle for %v: %s\n", sched, b.o.idle, text)
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.watchBindings(ictx)
	if err != nil {
		return result{}, err
	}

	cpu := newCPUMeter(b.c, proc)
	cpuBefore := cpu.read()
	callsBefore, cerr := apicalls.APIServer(ctx, b.cs)
	if cerr != nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: %v\n", cerr)
	}
	var ownBefore apicalls.Calls
	if addrs.metrics != "" {
		if ownBefore, cerr = apicalls.Client(ctx, "http://"+addrs.metrics+"/metrics"); cerr != nil {
			fmt.Fprintf(os.Stderr, "bench-e2e: %v\n", cerr)
		}
	}
	var prof *burstProfiler
	if addrs.pprof != "" {
		if prof, err = startProfile(ctx, addrs.pprof, b.o.profile, fmt.Sprintf("%s-run%d", sched, run+1)); err != nil {
			return result{}, err
		}
	}
	prefix := fmt.Sprintf("%s-%d-", sched, run)
	begin := time.Now()
	created, err := b.createBurst(ctx, sched, prefix)
	createdIn := time.Since(begin)
	if err != nil {
		return result{}, err
	}
	timeout := 10*time.Minute + time.Duration(b.o.pods)*20*time.Millisecond
	if err := poll(ctx, timeout, func() bool { return w.count(prefix) >= b.o.pods }); err != nil {
		return result{}, fmt.Errorf("%s did not bind the burst: %w\n%s", sched, err, proc.Tail(20))
	}
	last, lat := w.latencies(prefix, created)
	span := last.Sub(begin)
	used, cpuText := cpu.since(cpuBefore)
	if prof != nil {
		// After the CPU reading: the profile's last chunk runs on past the burst.
		if err := prof.finish(ctx); err != nil {
			return result{}, err
		}
	}
	r := result{rate: float64(b.o.pods) / span.Seconds(), created: createdIn, span: span,
		p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], rssMiB: cluster.RSSKiB(proc.Pid()) / 1024,
		cpuPer1000: used[0] * 1000 / float64(b.o.pods), controlPlaneCPU: sum(used[1 : len(used)-1])}
	fmt.Printf("bench-e2e: %s: CPU during the burst: %s; the scheduler's per 1,000 bound pods: %.2fs\n", sched, cpuText, r.cpuPer1000)
	if after, err := apicalls.APIServer(ctx, b.cs); err == nil && callsBefore != nil {
		fmt.Printf("bench-e2e: %s: API calls during the burst (everyone's): %s\n", sched, after.Since(callsBefore, 10))
	}
	if ownBefore != nil {
		if after, err := apicalls.Client(ctx, "http://"+addrs.metrics+"/metrics"); err == nil {
			fmt.Printf("bench-e2e: %s: its own requests during the burst, by method and code: %s\n", sched, after.Since(ownBefore, 10))
		}
	}
	cancel()
	_ = proc.Stop()
	fmt.Printf("bench-e2e: %s bound the burst at %.1f pods/s; deleting its pods\n", sched, r.rate)
	return r, b.cleanup(ctx)
}

// schedAddrs are where a fairway process serves its metrics and, started with -profile, its
// profiles; empty for the other schedulers.
type schedAddrs struct{ metrics, pprof string }

// startScheduler starts scheduler sched (fairway, the baseline, the no-op binder or
// kube-scheduler) as process name, with the bench's client limits.
func (b *bench) startScheduler(sched, name string) (proc *cluster.Process, addrs schedAddrs, err error) {
	qps, burst := strconv.FormatFloat(b.o.qps, 'f', -1, 64), strconv.Itoa(b.o.burst)
	switch sched {
	case "fairway", baselineName:
		ports, err := cluster.FreePorts(3)
		if err != nil {
			return nil, addrs, err
		}
		port, mport := ports[0], ports[1]
		bin := b.bin
		if sched == baselineName {
			bin = b.o.baseline
		}
		args := []string{"scheduler",
			"--kubeconfig=" + b.c.Kubeconfig(), "--kube-api-qps=" + qps, "--kube-api-burst=" + burst,
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(port), "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(mport),
			"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s", "--write-timeout=2s"}
		addrs.metrics = "127.0.0.1:" + strconv.Itoa(mport)
		if b.o.profile != "" {
			addrs.pprof = "127.0.0.1:" + strconv.Itoa(ports[2])
			args = append(args, "--pprof-bind-address="+addrs.pprof)
		}
		proc, err = b.c.StartProcess(cluster.ProcessSpec{Name: name, Path: bin, Args: args})
		return proc, addrs, err
	case noopName:
		self, err := os.Executable()
		if err != nil {
			return nil, addrs, err
		}
		proc, err = b.c.StartProcess(cluster.ProcessSpec{Name: name, Path: self, Args: []string{
			"-noop-binder", "-kubeconfig=" + b.c.Kubeconfig(), "-qps=" + qps, "-burst=" + burst}})
		return proc, addrs, err
	}
	// StartKubeScheduler names its process kube-scheduler; one per cluster at a time.
	proc, err = b.startKubeScheduler(name, qps, burst)
	return proc, addrs, err
}

// waitReady waits until the scheduler binds a probe pod, then deletes the probe.
func (b *bench) waitReady(ctx context.Context, sched, name string, proc *cluster.Process) error {
	probe := b.pod(sched, "probe-"+name, "")
	if _, err := b.cs.CoreV1().Pods(benchNS).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, func() bool {
		p, err := b.cs.CoreV1().Pods(benchNS).Get(ctx, probe.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}); err != nil {
		return fmt.Errorf("%s did not bind its probe pod: %w\n%s", sched, err, proc.Tail(20))
	}
	_ = b.cs.CoreV1().Pods(benchNS).Delete(ctx, probe.Name, metav1.DeleteOptions{})
	return nil
}

// bindWatch records when each pod of the bench's namespace was first seen bound.
type bindWatch struct {
	mu      sync.Mutex
	boundAt map[string]time.Time
}

// watchBindings starts a watch of the bound pods until ctx ends and waits for its first list.
func (b *bench) watchBindings(ctx context.Context) (*bindWatch, error) {
	w := &bindWatch{boundAt: make(map[string]time.Time, b.o.pods)}
	lw := cache.NewFilteredListWatchFromClient(b.cs.CoreV1().RESTClient(), "pods", benchNS, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	})
	inf := cache.NewSharedInformer(lw, &corev1.Pod{}, 0)
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			w.mu.Lock()
			if _, seen := w.boundAt[p.Name]; !seen {
				w.boundAt[p.Name] = time.Now()
			}
			w.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("watch did not sync")
	}
	return w, nil
}

// count is how many pods named with prefix were seen bound.
func (w *bindWatch) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name := range w.boundAt {
		if strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			n++
		}
	}
	return n
}

// latencies are, for the pods named with prefix, the last binding's time and each pod's time
// from creation to binding, sorted.
func (w *bindWatch) latencies(prefix string, created map[string]time.Time) (last time.Time, lat []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, at := range w.boundAt {
		if len(name) <= len(prefix) || !strings.HasPrefix(name, prefix) {
			continue
		}
		if at.After(last) {
			last = at
		}
		lat = append(lat, at.Sub(created[name]))
	}
	slices.Sort(lat)
	return last, lat
}

// createBurst creates the burst's pods (named with prefix, in gangs when the bench asks) from
// b.o.creators workers and returns when each was created.
func (b *bench) createBurst(ctx context.Context, sched, prefix string) (map[string]time.Time, error) {
	var mu sync.Mutex
	created := make(map[string]time.Time, b.o.pods)
	ch := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range b.o.creators {
		wg.Go(func() {
			for i := range ch {
				group := ""
				if b.o.gang > 0 {
					group = fmt.Sprintf("%sg%05d", prefix, i/b.o.gang)
				}
				p := b.pod(sched, fmt.Sprintf("%s%05d", prefix, i), group)
				at := time.Now()
				if _, err := b.cs.CoreV1().Pods(benchNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					errOnce.Do(func() { firstErr = err })
					continue
				}
				mu.Lock()
				created[p.Name] = at
				mu.Unlock()
			}
		})
	}
	for i := range b.o.pods {
		ch <- i
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("creating pods: %w", firstErr)
	}
	return created, nil
}

// startKubeScheduler runs the real kube-scheduler with the same client limits.
func (b *bench) startKubeScheduler(name, qps, burst string) (*cluster.Process, error) {
	path := filepath.Join(b.c.BinDir(), "kube-scheduler")
	return b.c.StartProcess(cluster.ProcessSpec{Name: name, Path: path, Args: []string{
		"--kubeconfig=" + b.c.Kubeconfig(), "--leader-elect=false", "--secure-port=0", "--v=1",
		"--kube-api-qps=" + qps, "--kube-api-burst=" + burst,
	}})
}

// pod is one burst pod: one GPU, a little CPU and memory, for the given scheduler.
func (b *bench) pod(sched, name, group string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS, Labels: map[string]string{"bench": "true"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
					fairwayv1.ResourceGPU: resource.MustParse("1")},
				Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")},
			}}},
		},
	}
	if sched == noopName {
		p.Spec.SchedulerName = noopSchedulerName
	}
	if sched == "fairway" || sched == baselineName {
		p.Spec.SchedulerName = fairwayv1.SchedulerName
		p.Labels[fairwayv1.QueueLabel] = benchNS
		if group != "" {
			p.Annotations = map[string]string{fairwayv1.PodGroupAnnotation: group, fairwayv1.MinMemberAnnotation: strconv.Itoa(b.o.gang)}
		}
	}
	return p
}

// cleanup deletes the burst's pods and PodGroups and waits until they are gone.
//
// The pods are deleted one call each, 32 at a time, rather than with one DeleteCollection: the
// API server deletes a collection with one worker (--delete-collection-workers), and at 5,000
// pods on a loaded 2-vCPU machine that outlasted its request timeout five times over.
func (b *bench) cleanup(ctx context.Context) error {
	list, err := b.cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the burst's pods: %w", err)
	}
	work := make(chan string)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for name := range work {
				err := b.cs.CoreV1().Pods(benchNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					select {
					case errs <- fmt.Errorf("deleting pod %s: %w", name, err):
					default:
					}
				}
			}
		})
	}
	for i := range list.Items {
		work <- list.Items[i].Name
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	_ = b.c.Client().DeleteAllOf(ctx, &fairwayv1.PodGroup{}, clientInNamespace(benchNS))
	return poll(ctx, 5*time.Minute, func() bool {
		list, err := b.cs.CoreV1().Pods(benchNS).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(list.Items) == 0
	})
}

func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func sum(xs []float64) (s float64) {
	for _, x := range xs {
		s += x
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// buildFairway builds fairway's binary of this tree (no cgo: the scheduler needs none).
func buildFairway(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "fairway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/fairway")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fairway: %w\n%s", err, b)
	}
	return out, nil
}

// applyCRDs installs fairway's CRDs; if the API server refuses their CEL rules, without them.
func applyCRDs(ctx context.Context, c *cluster.Cluster, tmp string) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "charts", "fairway", "crds")
	if c.ApplyCRDs(ctx, dir) == nil {
		return nil
	}
	out := filepath.Join(tmp, "crds")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return err
		}
		dropKey(obj, "x-kubernetes-validations")
		data, err = yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	return c.ApplyCRDs(ctx, out)
}

func dropKey(v any, key string) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, key)
		for _, e := range x {
			dropKey(e, key)
		}
	case []any:
		for _, e := range x {
			dropKey(e, key)
		}
	}
}

func keepLogs(from, to string) {
	_ = os.MkdirAll(to, 0o755)
	entries, _ := os.ReadDir(from)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err == nil {
			_ = os.WriteFile(filepath.Join(to, e.Name()), data, 0o644)
		}
	}
}

func clientInNamespace(ns string) ctrlclient.InNamespace { return ctrlclient.InNamespace(ns) }

// cpuMeter reads the CPU time of the scheduler under test and of the control plane around it.
type cpuMeter struct {
	names []string
	pids  []int
}

func newCPUMeter(c *cluster.Cluster, sched *cluster.Process) cpuMeter {
	m := cpuMeter{names: []string{"scheduler"}, pids: []int{sched.Pid()}}
	for _, p := range c.Processes() {
		switch n := p.Name(); n {
		case "kube-apiserver", "etcd", "kwok":
			m.names, m.pids = append(m.names, n), append(m.pids, p.Pid())
		}
	}
	m.names, m.pids = append(m.names, "bench (creator and watch)"), append(m.pids, os.Getpid())
	return m
}

func (m cpuMeter) read() []float64 {
	out := make([]float64, len(m.pids))
	for i, pid := range m.pids {
		out[i] = cluster.CPUSeconds(pid)
	}
	return out
}

// since is what each process used since before, as "name 1.23s" pairs.
func (m cpuMeter) since(before []float64) (used []float64, text string) {
	now := m.read()
	var parts []string
	for i := range now {
		used = append(used, now[i]-before[i])
		parts = append(parts, fmt.Sprintf("%s %.2fs", m.names[i], now[i]-before[i]))
	}
	return used, strings.Join(parts, ", ")
}

// leaseFlags keeps the node Lease renewals of a big cluster at the rate of a 2,000-node one.
// kwok renews each node's Lease every quarter of its duration, as the kubelet does (40 s, so
// every 10 s): 500 writes a second at 5,000 nodes, which on a 2-vCPU machine is most of what the
// API server and etcd can do, and would time the machine's heartbeat load rather than the
// schedulers (a real 5,000-node control plane runs on machines sized for it). Above 2,000 nodes
// the Lease lasts proportionally longer and the node lifecycle controller's grace period grows
// with it, so nodes stay Ready; at 2,000 nodes and below both keep their defaults.
func leaseFlags(nodes int) (kwok, controllerManager []string) {
	if nodes <= 2000 {
		return nil, nil
	}
	lease := 40 * nodes / 2000
	return []string{fmt.Sprintf("--node-lease-duration-seconds=%d", lease)},
		[]string{fmt.Sprintf("--node-monitor-grace-period=%ds", lease*5/4)}
}
