package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kfp"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

const (
	benchNamespace    = "bench"
	unservedNamespace = "bench-plain"
	fairwayNamespace  = "fairway-system"
)

// env is the running cluster and webhook.
type env struct {
	cluster *cluster.Cluster
	webhook *fairwayproc.Webhook
	root    string
	tmp     string
}

func (e *env) tearDown() {
	_ = e.cluster.Stop()
	_ = os.RemoveAll(e.tmp)
}

// setUp starts the cluster and the webhook, with a queue serving the bench namespace, fairway's
// priority classes, KubeRay's CRDs and the RayCluster the Ray worker pods belong to.
func setUp(ctx context.Context, o options, log logr.Logger) (*env, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "fairway-bench-")
	if err != nil {
		return nil, err
	}
	binary, err := fairwayproc.Build(ctx, tmp)
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start(ctx, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(4)}, Logger: log, WorkDir: o.workDir})
	if err != nil {
		return nil, err
	}
	e := &env{cluster: c, root: root, tmp: tmp}
	if err := e.populate(ctx); err != nil {
		e.tearDown()
		return nil, err
	}
	args := splitEnv(o.webhookArgs)
	e.webhook, err = fairwayproc.StartWebhook(ctx, c, fairwayproc.WebhookOptions{
		Binary: binary, Namespace: fairwayNamespace, ProbeNamespace: benchNamespace, Env: splitEnv(o.webhookEnv), Args: args,
	})
	if err != nil {
		e.tearDown()
		return nil, err
	}
	return e, nil
}

func (e *env) populate(ctx context.Context) error {
	c := e.cluster
	mod, err := cluster.ModuleDir(ctx, "kuberay", cluster.KubeRayModule)
	if err != nil {
		return err
	}
	if err := c.ApplyCRDs(ctx, filepath.Join(mod, "config", "crd", "bases")); err != nil {
		return fmt.Errorf("installing KubeRay's CRDs: %w", err)
	}
	cl := c.Client()
	for _, ns := range []string{fairwayNamespace, benchNamespace, unservedNamespace} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	for name, v := range map[string]int32{fairwayv1.PriorityClassTraining: 50, fairwayv1.PriorityClassInteractive: 100, fairwayv1.PriorityClassInference: 125} {
		if err := cl.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}); err != nil {
			return fmt.Errorf("creating priority class %s: %w", name, err)
		}
	}
	// admit All: the plain pods of the burst are fairway's too, so every shape takes the full path.
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{benchNamespace}, Admit: fairwayv1.AdmitAll}}
	if err := cl.Create(ctx, q); err != nil {
		return fmt.Errorf("creating the queue: %w", err)
	}
	rc, err := e.objects("adapters/kuberay/testdata/raycluster.yaml")
	if err != nil {
		return err
	}
	rc[0].SetNamespace(benchNamespace)
	rc[0].SetLabels(nil) // its queue label names a queue that does not serve the bench namespace
	if err := cl.Create(ctx, rc[0]); err != nil {
		return fmt.Errorf("creating the RayCluster: %w", err)
	}
	// Pods need the namespace's default ServiceAccount.
	deadline := time.Now().Add(30 * time.Second)
	for cl.Get(ctx, types.NamespacedName{Namespace: benchNamespace, Name: "default"}, &corev1.ServiceAccount{}) != nil ||
		cl.Get(ctx, types.NamespacedName{Namespace: unservedNamespace, Name: "default"}, &corev1.ServiceAccount{}) != nil {
		if time.Now().After(deadline) {
			return errors.New("no default ServiceAccount in the bench namespace")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func (e *env) objects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(e.root, path))
	if err != nil {
		return nil, err
	}
	return adaptertest.DecodeObjects(data)
}

// benchPods are the pod shapes the burst cycles through, from the adapters' fixtures: what the
// frameworks really send.
var benchPods = []string{
	"adapters/argo/testdata/step-gpu.yaml",
	"adapters/argo/testdata/step-gpu.yaml",
	"adapters/kfp/testdata/executor-2.17.yaml",
	"adapters/kfp/testdata/driver-2.17.yaml",
	"adapters/kuberay/testdata/worker-gpu.yaml",
	"adapters/kuberay/testdata/head.yaml",
	"adapters/jupyterhub/testdata/z2jh-notebook.yaml",
	"adapters/pytorchjob/testdata/worker.yaml",
	"adapters/modelserver/testdata/triton-chart.yaml",
	"adapters/lws/testdata/vllm-worker.yaml",
	"adapters/airflow/testdata/kpo-gpu.yaml",
	"", // a plain pod
	"",
}

func (e *env) templates() ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for _, path := range benchPods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-7d9f6c5b4-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}}},
		}
		if path != "" {
			data, err := os.ReadFile(filepath.Join(e.root, path))
			if err != nil {
				return nil, err
			}
			pod = &corev1.Pod{}
			if err := yaml.Unmarshal(data, pod); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		// Sent as clients send them: the namespace in the request, queue labels of other test
		// namespaces dropped.
		pod.Namespace = ""
		for _, k := range fairwayv1.QueueLabels() {
			delete(pod.Labels, k)
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// directClient sends AdmissionReviews straight to the webhook, as the API server does, over TLS
// with keep-alive connections.
type directClient struct {
	http      *http.Client
	url       string
	templates []*corev1.Pod
}

func newDirectClient(e *env, noKeepAlive bool) (*directClient, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.webhook.CABundle) {
		return nil, errors.New("the webhook's CA bundle holds no certificate")
	}
	templates, err := e.templates()
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableKeepAlives:   noKeepAlive,
	}
	return &directClient{
		http:      &http.Client{Transport: transport, Timeout: 10 * time.Second},
		url:       e.webhook.URL + mutatingwebhook.MutatePath + "?timeout=5s",
		templates: templates,
	}, nil
}

// review is an AdmissionReview body and whether the webhook must patch its pod.
type review struct {
	body      []byte
	wantPatch bool
}

// requests builds n AdmissionReviews up front, so that encoding is not measured.
func (d *directClient) requests(_ context.Context, prefix string, n int) []review {
	bodies := make([]review, n)
	for i := range n {
		pod := d.templates[i%len(d.templates)].DeepCopy()
		if pod.Name != "" {
			pod.Name += "-" + prefix + "-" + strconv.Itoa(i)
		}
		raw, _ := json.Marshal(pod)
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("%s-%08d", prefix, i)),
				Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
				Namespace: benchNamespace,
				Name:      pod.Name,
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: raw},
			},
		}
		bodies[i].body, _ = json.Marshal(review)
		bodies[i].wantPatch = !leftAlone(pod)
	}
	return bodies
}

// leftAlone reports whether the webhook leaves a pod of the served namespace to its own
// scheduler: KFP's drivers, which every executor waits for, go to kube-scheduler wherever they
// run.
func leftAlone(pod *corev1.Pod) bool {
	return kfp.New().Recognize(pod) && kfp.PodRole(pod) != kfp.RoleExecutor
}

// send posts one review and checks the answer: HTTP 200, the request's UID, allowed, and a patch
// unless the pod is one the webhook leaves alone.
func (d *directClient) send(ctx context.Context, r review) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, out)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	switch resp := review.Response; {
	case resp == nil:
		return errors.New("no response")
	case !resp.Allowed:
		return fmt.Errorf("refused: %v", resp.Result)
	case r.wantPatch && len(resp.Patch) == 0:
		return errors.New("allowed without a patch")
	case !r.wantPatch && len(resp.Patch) != 0:
		return errors.New("patched a pod the webhook must leave alone")
	}
	return nil
}

// newPodCreator returns a function that creates pod i in namespace through the API server,
// cycling through the same pod shapes, and checks that it was handed to fairway (in the bench
// namespace) or left alone (in the unserved one).
func newPodCreator(e *env, namespace string, rps int) (func(ctx context.Context, i int) error, error) {
	cfg := e.cluster.RESTConfig()
	cfg.QPS, cfg.Burst = float32(4*rps), 8*rps
	cfg.WarningHandler = rest.NoWarnings{} // the webhook's degraded-gang warnings, once per pod
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	templates, err := e.templates()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) error {
		pod := templates[i%len(templates)].DeepCopy()
		if pod.Name != "" {
			pod.Name += "-api-" + strconv.Itoa(i)
		}
		// The ownerReferences point at objects that do not exist; the garbage collector would
		// delete the pods while the benchmark runs.
		pod.OwnerReferences = nil
		pod.Spec.ServiceAccountName = "" // the namespace's default
		got, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if (got.Spec.SchedulerName == fairwayv1.SchedulerName) != (namespace == benchNamespace && !leftAlone(pod)) {
			return fmt.Errorf("pod %s handed to fairway or not, wrongly (scheduler %q)", got.Name, got.Spec.SchedulerName)
		}
		return nil
	}, nil
}

func splitEnv(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
