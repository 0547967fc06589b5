// Package fairwayproc builds fairway's binary from the working tree and runs its components
// against a local test cluster (test/cluster), for e2e tests and benchmarks. The binary is built
// into a directory of the caller's choosing, never into the shared bin/, so a test always runs the
// code it tests.
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// Build compiles cmd/fairway of this repository into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "fairway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/fairway")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/fairway: %w\n%s", err, b)
	}
	return out, nil
}

// HasSubcommand reports whether the binary has a subcommand (`fairway scheduler` is built after
// the webhook).
func HasSubcommand(binary, name string) bool {
	return exec.Command(binary, name, "--help").Run() == nil
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
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	probe, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
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
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, fmt.Errorf("fairway webhook exited:\n%s", p.Tail(30))
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: o.ProbeNamespace},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if err := c.Client().Create(ctx, pod, client.DryRunAll); err != nil {
			return false, nil
		}
		return pod.Spec.SchedulerName == fairwayv1.SchedulerName, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the API server does not call the webhook: %w\n%s", err, p.Tail(40))
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

// ApplyFairwayCRDs installs fairway's CRDs from charts/fairway/crds. Should the API server refuse
// them (kube-apiserver 1.37 refuses CEL rules that do not compile), it installs them again
// without their x-kubernetes-validations rules, from copies written to tmpDir, and returns the
// API server's refusal: components that read Queues do not depend on their validation.
func ApplyFairwayCRDs(ctx context.Context, c *cluster.Cluster, tmpDir string) (refused error, err error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "charts", "fairway", "crds")
	refused = c.ApplyCRDs(ctx, dir)
	if refused == nil {
		return nil, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return refused, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return refused, err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return refused, fmt.Errorf("%s: %w", f, err)
		}
		dropKey(obj, "x-kubernetes-validations")
		out, err := yaml.Marshal(obj)
		if err != nil {
			return refused, err
		}
		if err := os.WriteFile(filepath.Join(tmpDir, filepath.Base(f)), out, 0o644); err != nil {
			return refused, err
		}
	}
	if err := c.ApplyCRDs(ctx, tmpDir); err != nil {
		return refused, fmt.Errorf("installing fairway's CRDs without CEL rules: %w", err)
	}
	return refused, nil
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
