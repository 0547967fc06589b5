package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// noopSchedulerName is the spec.schedulerName of the no-op binder's pods.
const noopSchedulerName = "bench-noop-binder"

// noopWorkers is how many bindings the no-op binder has in flight: fairway's binder's default
// pool (binder.DefaultWorkers).
const noopWorkers = 32

// runNoopBinder is the ceiling of the benchmark: a "scheduler" that makes no decision. It binds
// every pending pod of noopSchedulerName to the next node, round-robin, through a client with
// the schedulers' QPS and burst, from a pool of noopWorkers, as soon as its watch shows the pod.
// What it reaches is what the API server and the client limits allow a scheduler that binds
// each pod with one call; fairway's share of it is the cost of its decisions and of the other
// calls it makes on the binding client.
//
// It runs as its own process (the benchmark binary with -noop-binder), like the schedulers, and
// serves the same protocol: the benchmark waits for it to bind a probe pod.
func runNoopBinder(ctx context.Context, kubeconfig string, qps float64, burst int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	// As fairway's scheduler: built-in types as protobuf, one client (and rate limiter) for
	// bindings, another for the watch.
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	binding, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	watching, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	list, err := watching.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var nodes []string
	for _, n := range list.Items {
		nodes = append(nodes, n.Name)
	}
	slices.Sort(nodes)
	if len(nodes) == 0 {
		return errors.New("no nodes to bind to")
	}

	work := make(chan *corev1.Pod, 1<<16)
	lw := cache.NewFilteredListWatchFromClient(watching.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.AndSelectors(
			fields.OneTermEqualSelector("spec.schedulerName", noopSchedulerName),
			fields.OneTermEqualSelector("spec.nodeName", ""),
		).String()
	})
	inf := cache.NewSharedInformer(lw, &corev1.Pod{}, 0)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			work <- p
		}
	}}); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)

	var next atomic.Uint64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range noopWorkers {
		wg.Go(func() {
			for {
				var p *corev1.Pod
				select {
				case <-ctx.Done():
					return
				case p = <-work:
				}
				node := nodes[(next.Add(1)-1)%uint64(len(nodes))]
				b := &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: node},
				}
				// Transient errors are retried like fairway's binder does; a pod bound or gone
				// meanwhile is left.
				err := retry.OnError(retry.DefaultBackoff, func(err error) bool {
					return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
				}, func() error {
					return binding.CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{})
				})
				if err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
					failed.Add(1)
					fmt.Fprintf(os.Stderr, "noop-binder: binding %s/%s: %v\n", p.Namespace, p.Name, err)
				}
			}
		})
	}
	fmt.Fprintf(os.Stderr, "noop-binder: binding to %d nodes with qps=%v burst=%d, %d workers\n", len(nodes), qps, burst, noopWorkers)
	<-ctx.Done()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "noop-binder: %d bindings failed\n", n)
	}
	return nil
}
