package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Module paths of the operators, as pinned by hack/tools/argo and hack/tools/kuberay.
const (
	ArgoModule    = "github.com/argoproj/argo-workflows/v3"
	KubeRayModule = "github.com/ray-project/kuberay/ray-operator"
)

// ArgoOptions configure StartArgo.
type ArgoOptions struct {
	// Namespace the controller runs in: it reads its ConfigMap there. "argo" when empty; created
	// when missing. The controller watches workflows in every namespace.
	Namespace string
	// Config is extra data of the workflow-controller-configmap (keys as in Argo's
	// docs/workflow-controller-configmap.yaml, values YAML). metricsConfig is set by StartArgo.
	Config map[string]string
	// Args are appended to the controller's flags.
	Args []string
}

// StartArgo installs Argo Workflows' CRDs (the minimal set from the pinned module's
// manifests/base/crds/minimal) and its ConfigMap, and starts the real workflow-controller
// without leader election, its metrics on a free port. It returns once the controller serves
// metrics, which it does when its informers run. Its health endpoint is hard-wired to :6060;
// a second controller on the host only logs that the port is taken.
func (c *Cluster) StartArgo(ctx context.Context, opts ArgoOptions) (*Process, error) {
	if opts.Namespace == "" {
		opts.Namespace = "argo"
	}
	mod, err := ModuleDir(ctx, "argo", ArgoModule)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyCRDs(ctx, filepath.Join(mod, "manifests", "base", "crds", "minimal")); err != nil {
		return nil, fmt.Errorf("installing Argo's CRDs: %w", err)
	}
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for k, v := range opts.Config {
		data[k] = v
	}
	data["metricsConfig"] = fmt.Sprintf("enabled: true\nport: %d\nsecure: false\n", metricsPort)
	if err := c.ensureNamespace(ctx, opts.Namespace); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: opts.Namespace},
		Data:       data,
	}
	if _, err := c.clientset.CoreV1().ConfigMaps(opts.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating Argo's ConfigMap: %w", err)
	}
	args := append([]string{
		"--kubeconfig=" + c.kubeconfig,
		"--namespace=" + opts.Namespace,
		// Never pulled: kwok runs no containers.
		"--executor-image=quay.io/argoproj/argoexec:v3.7.18",
		"--loglevel=info",
	}, opts.Args...)
	p, err := c.startBin("workflow-controller", "workflow-controller", args, []string{"LEADER_ELECTION_DISABLE=true"})
	if err != nil {
		return nil, err
	}
	return p, c.waitHTTP(ctx, p, "http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics")
}

// KubeRayOptions configure StartKubeRay.
type KubeRayOptions struct {
	// Args are appended to the operator's flags, e.g. --batch-scheduler=... or --feature-gates.
	Args []string
	// Env is added to the operator's environment, e.g. ENABLE_DETERMINISTIC_HEAD_POD_NAME=true.
	Env []string
}

// StartKubeRay installs KubeRay's CRDs (RayCluster, RayJob, RayService from the pinned module's
// config/crd/bases) and starts the real KubeRay operator without leader election, metrics and
// health probes on free ports. It returns once the operator's readiness probe answers.
func (c *Cluster) StartKubeRay(ctx context.Context, opts KubeRayOptions) (*Process, error) {
	mod, err := ModuleDir(ctx, "kuberay", KubeRayModule)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	if err := c.ApplyCRDs(ctx, filepath.Join(mod, "config", "crd", "bases")); err != nil {
		return nil, fmt.Errorf("installing KubeRay's CRDs: %w", err)
	}
	c.log.Info("KubeRay CRDs established", "after", time.Since(begin).Round(time.Millisecond))
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + c.kubeconfig,
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--log-stdout-encoder=console",
	}, opts.Args...)
	p, err := c.startBin("ray-operator", "ray-operator", args, opts.Env)
	if err != nil {
		return nil, err
	}
	return p, c.waitHTTP(ctx, p, "http://127.0.0.1:"+strconv.Itoa(ports[1])+"/readyz")
}

// ensureNamespace creates a namespace unless it exists.
func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// waitHTTP waits until url answers 200, failing early if p exits.
func (c *Cluster) waitHTTP(ctx context.Context, p *Process, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(ctx, 100*time.Millisecond, p.Name()+" at "+url, []*Process{p}, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, url), nil
	})
}
