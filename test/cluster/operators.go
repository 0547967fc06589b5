package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Module paths of the operators, as pinned by hack/tools/argo, hack/tools/kuberay and
// hack/tools/training-operator.
const (
	ArgoModule             = "github.com/argoproj/argo-workflows/v3"
	KubeRayModule          = "github.com/ray-project/kuberay/ray-operator"
	TrainingOperatorModule = "github.com/kubeflow/training-operator"
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
	// Env is added to the controller's environment after StartArgo's own settings
	// (LEADER_ELECTION_DISABLE=true, DEFAULT_REQUEUE_TIME=1s), so it can override them.
	Env []string
}

// StartArgo installs Argo Workflows' CRDs (the minimal set from the pinned module's
// manifests/base/crds/minimal) and its ConfigMap, and starts the real workflow-controller
// without leader election, with its metrics on a free port, and with a workflow requeue time of
// 1s instead of 10s, so a step ends about a second after its pod does. It returns once the
// controller serves metrics, which it does when its informers run. Its health endpoint is
// hard-wired to :6060; a second controller on the host only logs that the port is taken.
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
	env := append([]string{"LEADER_ELECTION_DISABLE=true", "DEFAULT_REQUEUE_TIME=1s"}, opts.Env...)
	p, err := c.startBin("workflow-controller", "workflow-controller", args, env)
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

// TrainingOperatorOptions configure StartTrainingOperator.
type TrainingOperatorOptions struct {
	// Namespace the operator runs in: it keeps its webhook certificate Secret there. "kubeflow"
	// when empty; created when missing. The operator watches jobs in every namespace.
	Namespace string
	// Args are appended to the operator's flags, e.g. --enable-scheme=mpijob.
	Args []string
}

// StartTrainingOperator installs the Kubeflow Training Operator v1's CRDs (PyTorchJob, MPIJob,
// TFJob, XGBoostJob, PaddleJob, MXJob from the pinned module's manifests/base/crds) and starts the
// real training-operator without leader election or gang scheduler (fairway's webhook makes the
// gangs), with metrics, probes and its webhook server on free ports. It returns once the
// operator's readiness probe answers, which it does when its controllers are set up.
//
// What the operator expects of its Deployment, done here instead: the Secret
// training-operator-webhook-cert exists in its namespace (its cert rotator fills it), and the
// rotator's certificate is mounted where the webhook server reads it. The webhook server reads
// $TMPDIR/k8s-webhook-server/serving-certs, which is the operator's own directory here, with a
// certificate made for it; the rotator only checks that /tmp/k8s-webhook-server/serving-certs/
// tls.crt exists (a path it hard-wires), which is created, never changed, when missing. Its
// validating webhooks are not registered with the API server, which could not reach them: they
// only check the jobs' specs.
func (c *Cluster) StartTrainingOperator(ctx context.Context, opts TrainingOperatorOptions) (*Process, error) {
	if opts.Namespace == "" {
		opts.Namespace = "kubeflow"
	}
	mod, err := ModuleDir(ctx, "training-operator", TrainingOperatorModule)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyCRDs(ctx, filepath.Join(mod, "manifests", "base", "crds")); err != nil {
		return nil, fmt.Errorf("installing the training operator's CRDs: %w", err)
	}
	if err := c.ensureNamespace(ctx, opts.Namespace); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "training-operator-webhook-cert", Namespace: opts.Namespace}}
	if _, err := c.clientset.CoreV1().Secrets(opts.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the training operator's certificate Secret: %w", err)
	}
	tmp := filepath.Join(c.workDir, "training-operator", "tmp")
	if err := webhookServingCert(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"), "training-operator."+opts.Namespace+".svc"); err != nil {
		return nil, err
	}
	if err := touchFile("/tmp/k8s-webhook-server/serving-certs/tls.crt"); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--webhook-server-port=" + strconv.Itoa(ports[2]),
		// Never pulled: kwok runs no containers.
		"--mpi-kubectl-delivery-image=kubeflow/kubectl-delivery:latest",
	}, opts.Args...)
	env := []string{"TMPDIR=" + tmp, "MY_POD_NAMESPACE=" + opts.Namespace}
	p, err := c.startBin("training-operator", "training-operator", args, env)
	if err != nil {
		return nil, err
	}
	return p, c.waitHTTP(ctx, p, "http://127.0.0.1:"+strconv.Itoa(ports[1])+"/readyz")
}

// webhookServingCert writes tls.crt and tls.key for dnsName, signed by a CA of its own, into dir.
func webhookServingCert(dir, dnsName string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	now := time.Now()
	ca, caKey, _, err := selfSignedCA(now)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	certPEM, key, err := signLeaf(tmpl, ca, caKey, now)
	if err != nil {
		return fmt.Errorf("signing a serving certificate for %s: %w", dnsName, err)
	}
	return writeKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), certPEM, key)
}

// touchFile creates path, empty, and its directories, unless it exists.
func touchFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return f.Close()
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
		return HTTPOK(ctx, url), nil
	})
}
