package fairwayproc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// FastSchedulerFlags make `fairway scheduler` react at test speed: short leases, short grace
// periods, frequent status. Production defaults are the flags' own.
var FastSchedulerFlags = []string{
	"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms", "--write-timeout=2s",
	"--status-update-interval=500ms", "--eviction-grace-period=1s", "--stale-gang-grace-period=3s",
	"--orphan-pod-grace-period=2s", "--reservation-timeout=20s", "--zap-log-level=2",
}

// SchedulerOptions configure StartScheduler.
type SchedulerOptions struct {
	// Binary is the fairway binary (see Build).
	Binary string
	// Name names the process and its log; "fairway-scheduler" when empty.
	Name string
	// Namespace is fairway's own namespace (see EnsureSystem); "fairway-system" when empty.
	Namespace string
	// Args are appended to the scheduler's flags (after FastSchedulerFlags unless NoFastFlags).
	Args []string
	// NoFastFlags runs the scheduler with its production defaults.
	NoFastFlags bool
	// NoWait returns as soon as the process started, not once it is ready (a standby replica is
	// never ready to schedule).
	NoWait bool
	// Timeout bounds the wait for readiness; 60 s when zero.
	Timeout time.Duration
}

// Scheduler is a running `fairway scheduler` process.
type Scheduler struct {
	*cluster.Process
	// MetricsURL and ReadyURL are its /metrics and /readyz on loopback.
	MetricsURL, ReadyURL string
}

// StartScheduler runs `fairway scheduler` against the cluster as a local process on free
// loopback ports, and waits until it is ready: caches synced and, for the leader, its snapshot
// built.
func StartScheduler(ctx context.Context, c *cluster.Cluster, o SchedulerOptions) (*Scheduler, error) {
	if o.Name == "" {
		o.Name = "fairway-scheduler"
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	ports, err := cluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	metrics, probe := ports[0], ports[1]
	args := []string{"scheduler", "--kubeconfig=" + c.Kubeconfig(), "--namespace=" + o.Namespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe)}
	if !o.NoFastFlags {
		args = append(args, FastSchedulerFlags...)
	}
	p, err := c.StartProcess(cluster.ProcessSpec{Name: o.Name, Path: o.Binary, Args: append(args, o.Args...), StopTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Name, err)
	}
	s := &Scheduler{Process: p,
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics),
		ReadyURL:   fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)}
	if o.NoWait {
		return s, nil
	}
	if err := WaitReady(ctx, p, s.ReadyURL, o.Timeout); err != nil {
		return s, err
	}
	return s, nil
}

// WaitReady polls a component's readiness URL until it answers 200, failing early with the tail
// of its log if the process exits.
func WaitReady(ctx context.Context, p *cluster.Process, url string, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("exited (%w):\n%s", err, p.Tail(30))
		}
		return cluster.HTTPOK(ctx, url), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s to be ready at %s: %w", p.Name(), url, err)
	}
	return nil
}

// DefaultNamespace is fairway's own namespace in tests, as the chart installs it.
const DefaultNamespace = "fairway-system"

// EnsureSystem creates what the chart installs before fairway runs: fairway's namespace (with
// its default ServiceAccount) and the default PriorityClasses. Existing objects are left alone.
func EnsureSystem(ctx context.Context, c *cluster.Cluster, namespace string) error {
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}}
	for name, v := range map[string]int32{
		fairwayv1.PriorityClassTraining: 50, fairwayv1.PriorityClassInteractive: 100, fairwayv1.PriorityClassInference: 125,
	} {
		objs = append(objs, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v})
	}
	for _, o := range objs {
		if err := c.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return WaitServiceAccount(ctx, c, namespace)
}

// WaitServiceAccount waits for a namespace's default ServiceAccount, without which the API
// server refuses pods there.
func WaitServiceAccount(ctx context.Context, c *cluster.Cluster, namespace string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset().CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
