// Command webhook is `make bench-webhook`: it measures fairway's admission webhook at a fixed
// arrival rate on loopback and prints
//
//	bench-webhook: rps=500 p50=... ms p99=... ms errors=0
//
// It starts a local cluster (test/cluster: real etcd and kube-apiserver, kwok nodes), runs the
// real `fairway webhook` binary built from this tree against it (informer caches, TLS certificate
// made and injected by the webhook itself), and sends it AdmissionReviews for a mix of realistic
// pods - Argo steps, Kubeflow Pipelines executors, KubeRay workers (whose RayCluster the webhook
// reads from its cache), JupyterHub notebooks, Triton replicas, LeaderWorkerSet workers, Airflow
// task pods and plain pods - over TLS, open loop, at -rps for
// -pods requests. Latency runs from the moment a request was due to its answer; an error is a
// transport failure, a non-200 answer, or any answer other than "allowed, with a patch".
//
// With -apiserver-pods N it then creates N real pods through the API server at the same rate,
// the webhook registered, and prints a second line for that path (API server, admission chain,
// webhook, etcd).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

func main() {
	var o options
	flag.IntVar(&o.rps, "rps", 500, "requests per second (open loop)")
	flag.IntVar(&o.pods, "pods", 10000, "admission requests in the burst")
	flag.IntVar(&o.warmup, "warmup", 500, "requests sent first, not measured (TLS handshakes, caches)")
	flag.IntVar(&o.apiServerPods, "apiserver-pods", 0, "also create this many real pods through the API server at -rps (0: skip)")
	flag.IntVar(&o.apiServerRPS, "apiserver-rps", 0, "rate of the API server creations; -rps when 0")
	flag.IntVar(&o.repeat, "repeat", 1, "run the burst this many times on the same webhook and print a line for each")
	flag.BoolVar(&o.verbose, "v", false, "log the cluster's progress")
	flag.StringVar(&o.workDir, "workdir", "", "keep the cluster's certificates, data and logs in this directory")
	flag.BoolVar(&o.baseline, "baseline", false, "with -apiserver-pods, first create the same pods in a namespace no queue serves (no webhook call), as a baseline for the API server alone")
	flag.BoolVar(&o.noKeepAlive, "no-keepalive", false, "a new TLS connection per request, as the API server makes once more requests are in flight than it keeps idle connections (25)")
	flag.StringVar(&o.webhookArgs, "webhook-args", "", "comma-separated flags added to fairway webhook's (e.g. --enable-http2)")
	flag.StringVar(&o.webhookEnv, "webhook-env", "", "comma-separated KEY=VALUE added to the webhook's environment (e.g. GOGC=400)")
	flag.Parse()

	log := logr.Discard()
	if o.verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		fmt.Fprintln(os.Stderr, "bench-webhook:", err)
		os.Exit(1)
	}
}

type options struct {
	rps, pods, warmup, apiServerPods, repeat int
	apiServerRPS                             int
	verbose                                  bool
	webhookEnv, webhookArgs, workDir         string
	baseline, noKeepAlive                    bool
}

func run(ctx context.Context, o options, log logr.Logger) error {
	begin := time.Now()
	env, err := setUp(ctx, o, log)
	if err != nil {
		return err
	}
	defer env.tearDown()
	fmt.Fprintf(os.Stderr, "bench-webhook: cluster and webhook ready in %v; %d warm-up requests, then %d at %d/s\n",
		time.Since(begin).Round(time.Millisecond), o.warmup, o.pods, o.rps)

	direct, err := newDirectClient(env, o.noKeepAlive)
	if err != nil {
		return err
	}
	warm := direct.requests(ctx, "warmup", o.warmup)
	for i := range warm {
		if err := direct.send(ctx, warm[i]); err != nil {
			return fmt.Errorf("warm-up request %d: %w", i, err)
		}
	}
	failed := false
	for r := range o.repeat {
		bodies := direct.requests(ctx, fmt.Sprintf("run%d", r), o.pods)
		cpu := cpuTimes(env.cluster)
		s := summarize(openLoop(ctx, o.rps, o.pods, func(ctx context.Context, i int) error { return direct.send(ctx, bodies[i]) }))
		fmt.Printf("bench-webhook: rps=%d p50=%s ms p99=%s ms errors=%d\n", o.rps, ms(s.p50), ms(s.p99), s.errors)
		fmt.Fprintf(os.Stderr, "bench-webhook: %d requests, max %s ms; %s", s.n, ms(s.max), cpuReport(cpu, cpuTimes(env.cluster), s.n))
		if s.firstErr != nil {
			fmt.Fprintf(os.Stderr, ", first error: %v", s.firstErr)
		}
		fmt.Fprintln(os.Stderr)
		failed = failed || s.errors > 0
	}

	if o.apiServerPods > 0 {
		rps := o.apiServerRPS
		if rps == 0 {
			rps = o.rps
		}
		namespaces := []string{benchNamespace}
		if o.baseline {
			namespaces = []string{unservedNamespace, benchNamespace}
		}
		for _, ns := range namespaces {
			create, err := newPodCreator(env, ns, rps)
			if err != nil {
				return err
			}
			cpu := cpuTimes(env.cluster)
			s := summarize(openLoop(ctx, rps, o.apiServerPods, create))
			name := "bench-webhook-apiserver"
			if ns == unservedNamespace {
				name = "bench-apiserver-baseline"
			}
			fmt.Printf("%s: rps=%d pods=%d p50=%s ms p99=%s ms errors=%d\n", name, rps, s.n, ms(s.p50), ms(s.p99), s.errors)
			fmt.Fprintf(os.Stderr, "%s: %s\n", name, cpuReport(cpu, cpuTimes(env.cluster), s.n))
			if s.firstErr != nil {
				fmt.Fprintf(os.Stderr, "%s: first error: %v\n", name, s.firstErr)
			}
			failed = failed || s.errors > 0
		}
	}
	if failed {
		return fmt.Errorf("some requests failed; the webhook's log is %s", env.webhook.Process.LogPath())
	}
	return nil
}
