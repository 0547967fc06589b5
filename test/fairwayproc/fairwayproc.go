// Package fairwayproc builds fairway's binary from the working tree and runs its components
// against a local test cluster (test/cluster), for e2e tests and benchmarks. The binary is built
// into a directory of the caller's choosing unless $FAIRWAY_BINARY names one, so a test always
// runs the code it tests.
package fairwayproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// BinaryEnv names a prebuilt fairway binary that Build returns instead of building one. `make e2e`
// sets it to the bin/fairway that `make build` just made from the same tree.
const BinaryEnv = "FAIRWAY_BINARY"

// Build returns the fairway binary tests run: $FAIRWAY_BINARY when set, else a fresh
// `go build ./cmd/fairway` of this repository into dir, so a test never runs a stale binary (the
// Go build cache makes this quick after the first time).
func Build(ctx context.Context, dir string) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return filepath.Abs(p)
	}
	return BuildFromSource(ctx, dir)
}

// BuildFromSource is Build without $FAIRWAY_BINARY: for tests of the tree itself (the chart's
// arguments against the binary's flags) that run where bin/fairway may be stale or not built
// yet (`make test` runs the chart tests before `make build`).
func BuildFromSource(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "fairway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/fairway")
	cmd.Dir = root
	// cgo: the gpu-agent loads NVML through go-nvml, which needs it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -Wno-deprecated-declarations")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/fairway: %w\n%s", err, b)
	}
	return out, nil
}

// WebhookOptions configure StartWebhook.
type WebhookOptions struct {
	// Binary is the fairway binary (see Build).
	Binary string
	// Namespace is fairway's own namespace; it must exist.
	Namespace string
	// ProbeNamespace is a namespace a Queue serves: StartWebhook returns once a dry-run pod there
	// comes back rewritten.
	ProbeNamespace string
	// Args are appended to the webhook's flags.
	Args []string
	// Env is added to the webhook's environment (GOGC=..., GODEBUG=...).
	Env []string
	// Timeout bounds the wait; 90 s when zero.
	Timeout time.Duration
}

// Webhook is a running `fairway webhook` process.
type Webhook struct {
	Process *cluster.Process
	// URL is the base URL the API server calls (https://localhost:<port>).
	URL string
	// CABundle is the CA that signed the webhook's serving certificate, from the webhook
	// configuration, for clients that call the webhook directly.
	CABundle []byte
}

// ConfigurationName is the MutatingWebhookConfiguration the webhook keeps.
const ConfigurationName = "fairway-webhook"

// StartWebhook runs `fairway webhook` outside the cluster, the way a developer does: the API
// server calls it at https://localhost:<port> over TLS, with the certificate the webhook made
// itself (see mutating-webhook/certs.go) and copies to its certificate directory. It returns once the API
// server sends pods of the probe namespace through it.
func StartWebhook(ctx context.Context, c *cluster.Cluster, o WebhookOptions) (*Webhook, error) {
	ports, err := cluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	port, probe := ports[0], ports[1]
	url := "https://localhost:" + strconv.Itoa(port)
	args := append([]string{
		"webhook",
		"--kubeconfig=" + c.Kubeconfig(),
		"--namespace=" + o.Namespace,
		"--host=127.0.0.1",
		"--port=" + strconv.Itoa(port),
		"--webhook-url=" + url,
		"--write-cert-files",
		"--cert-dir=" + filepath.Join(c.WorkDir(), "webhook-certs"),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--configuration-name=" + ConfigurationName,
	}, o.Args...)
	p, err := c.StartProcess(cluster.ProcessSpec{Name: "fairway-webhook", Path: o.Binary, Args: args, Env: o.Env})
	if err != nil {
		return nil, fmt.Errorf("starting fairway webhook: %w", err)
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	if o.ProbeNamespace == "" {
		// Nothing to probe through the API server yet: wait for the webhook's own readiness and
		// for its configuration to carry the CA bundle.
		if err := WaitReady(ctx, p, "http://127.0.0.1:"+strconv.Itoa(probe)+"/readyz", timeout); err != nil {
			return nil, err
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := c.Client().Get(ctx, client.ObjectKey{Name: ConfigurationName}, mwc); err != nil {
				return false, nil
			}
			return len(mwc.Webhooks) > 0 && len(mwc.Webhooks[0].ClientConfig.CABundle) > 0, nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for the webhook configuration: %w\n%s", err, p.Tail(40))
		}
	} else {
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			if exited, _ := p.Exited(); exited {
				return false, fmt.Errorf("fairway webhook exited:\n%s", p.Tail(30))
			}
			// It asks for a GPU: every Queue's spec.admit takes such a pod.
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: o.ProbeNamespace},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}}}}},
			}
			if err := c.Client().Create(ctx, pod, client.DryRunAll); err != nil {
				return false, nil
			}
			return pod.Spec.SchedulerName == fairwayv1.SchedulerName, nil
		})
		if err != nil {
			return nil, fmt.Errorf("the API server does not call the webhook: %w\n%s", err, p.Tail(40))
		}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client().Get(ctx, client.ObjectKey{Name: ConfigurationName}, mwc); err != nil {
		return nil, fmt.Errorf("reading the webhook configuration: %w", err)
	}
	if len(mwc.Webhooks) == 0 || len(mwc.Webhooks[0].ClientConfig.CABundle) == 0 {
		return nil, errors.New("the webhook configuration has no CA bundle")
	}
	return &Webhook{Process: p, URL: url, CABundle: mwc.Webhooks[0].ClientConfig.CABundle}, nil
}
