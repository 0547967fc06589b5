//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jupyterhub"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestAdmitTakesWhatIsOurs: in namespaces that fairway serves with the default spec.admit
// (Frameworks), the services JupyterHub's and Kubeflow Pipelines' charts run there (hub, proxy,
// ml-pipeline, MySQL, MinIO) keep the default scheduler and are placed by the real kube-scheduler;
// a GPU pod with required anti-affinity, which fairway does not evaluate, is left to
// kube-scheduler with a warning to its creator; and a notebook that z2jh's
// scheduling.podPriority gives its priority-0 class stays non-preemptible: a non-preemptible
// pod of higher priority in the same queue waits rather than evict it.
func TestAdmitTakesWhatIsOurs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 2,
		GPUMemoryMiB: 81559, CPU: "64", Memory: "512Gi"}
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, KubeScheduler: true}, []client.Object{
		exampleQueue("notebooks", "jhub", "3"), exampleQueue("pipelines", "kubeflow", ""),
	}, stack.Options{})

	// 1. The charts' services.
	services := map[string]map[string]string{
		"jhub/hub":              {"app": "jupyterhub", "component": "hub", "release": "jhub"},
		"jhub/proxy":            {"app": "jupyterhub", "component": "proxy", "release": "jhub"},
		"kubeflow/ml-pipeline":  {"app": "ml-pipeline", "application-crd-id": "kubeflow-pipelines"},
		"kubeflow/mysql":        {"app": "mysql", "application-crd-id": "kubeflow-pipelines"},
		"kubeflow/minio":        {"app": "minio", "application-crd-id": "kubeflow-pipelines"},
		"kubeflow/workflow-ctl": {"app": "workflow-controller", "application-crd-id": "kubeflow-pipelines"},
	}
	for key, labels := range services {
		ns, name, _ := strings.Cut(key, "/")
		mustCreate(t, c, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
				},
			},
		})
	}
	for key, labels := range services {
		ns, _, _ := strings.Cut(key, "/")
		eventually(t, 60*time.Second, key+" placed by kube-scheduler", func(ctx context.Context) (bool, error) {
			pods := podsIn(t, c, ctx, ns, labels)
			if len(pods) != 1 {
				return false, fmt.Errorf("%d pods", len(pods))
			}
			p := &pods[0]
			if p.Spec.SchedulerName != corev1.DefaultSchedulerName || p.Labels[fairwayv1.ManagedLabel] != "" {
				t.Fatalf("%s was taken by fairway: scheduler %q, labels %v", p.Name, p.Spec.SchedulerName, p.Labels)
			}
			return p.Spec.NodeName != "", fmt.Errorf("%s not bound yet", p.Name)
		})
	}
	t.Logf("%d services of z2jh and KFP placed by kube-scheduler", len(services))

	// 2. Required anti-affinity on a GPU pod: fairway does not evaluate it, and kube-scheduler
	// would give the pod a GPU charged to no queue, so the webhook refuses it, saying what to
	// use instead.
	warnings := &warningCollector{}
	cfg := c.RESTConfig()
	cfg.WarningHandler = warnings
	wc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spread := plainPod("spread-out")
	spread.Namespace = "jhub"
	spread.Labels = map[string]string{"app": "spread"}
	spread.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
	spread.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}}}
	_, err = wc.CoreV1().Pods(spread.Namespace).Create(ctx, spread, metav1.CreateOptions{})
	want := "in namespace jhub, which a fairway queue serves, but uses required inter-pod anti-affinity, which fairway does not evaluate: GPUs here are placed by fairway and counted against the queue's quota"
	switch {
	case err == nil:
		t.Errorf("a GPU pod with required anti-affinity in a served namespace was created (kube-scheduler would place it outside the queue)")
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "use a node selector, node affinity or a fairway topology annotation instead"):
		t.Errorf("refused with %v, want Forbidden saying %q and what to use instead", err, want)
	default:
		t.Logf("refused: %v", err)
	}

	// 2b. A DRA claim template asking for part of a GPU by a capacity other than its memory,
	// which fairway cannot count as a share: refused, naming the template, whether the pod
	// names fairway's scheduler (it would be stranded) or not (kube-scheduler would allocate the
	// GPU charged to no queue). The same capacity of another kind of device is left to
	// kube-scheduler with a warning.
	claimTemplate := func(name, class string, capacity resourceapi.QualifiedName) *resourceapi.ResourceClaimTemplate {
		tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "jhub", Name: name},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "d", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, Count: 1,
					Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{capacity: resource.MustParse("66")}}},
			}}}}}}
		tmpl, err := c.Clientset().ResourceV1().ResourceClaimTemplates("jhub").Create(ctx, tmpl, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Spec.Spec.Devices.Requests[0].Exactly.Capacity == nil {
			t.Fatal("the API server dropped the template's capacity requests (DRAConsumableCapacity off?): nothing to test")
		}
		return tmpl
	}
	part, nic := claimTemplate("part-gpu", fairwayv1.NVIDIAGPUDeviceClass, "multiprocessors"), claimTemplate("nic", "rdma.example.com", "bandwidth")
	claimPod := func(name, scheduler, template string) *corev1.Pod {
		p := plainPod(name)
		p.Namespace = "jhub"
		p.Spec.SchedulerName = scheduler
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "d", ResourceClaimTemplateName: ptr.To(template)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "d"}}
		return p
	}
	for _, tc := range []struct{ name, scheduler, want string }{
		{"part-gpu", "", `in namespace jhub, which a fairway queue serves: ResourceClaimTemplate part-gpu (request "d": capacity "multiprocessors" (a share of a GPU is counted by its "memory" only)); kube-scheduler would allocate them charged to no queue`},
		{"part-gpu-fairway", fairwayv1.SchedulerName, "asks for what fairway does not serve, so fairway could never place it"},
	} {
		_, err = wc.CoreV1().Pods("jhub").Create(ctx, claimPod(tc.name, tc.scheduler, part.Name), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pod %s (a GPU by a capacity fairway does not count): %v, want refused saying %q", tc.name, err, tc.want)
		} else {
			t.Logf("refused: %v", err)
		}
	}
	before := len(warnings.all())
	left, err := wc.CoreV1().Pods("jhub").Create(ctx, claimPod("nic", "", nic.Name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want = `fairway: pod's ResourceClaimTemplate nic (request "d": capacity "bandwidth" (a share of a GPU is counted by its "memory" only)) asks for what fairway does not serve, so it is left to scheduler default-scheduler: `
	if got := warnings.all()[before:]; len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("warnings %q, want one starting %q", got, want)
	} else {
		t.Logf("warning: %s", got[0])
	}
	checkLeftToKubeScheduler(t, left)
	if err := c.Client().Delete(ctx, left, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	// 3. A notebook under z2jh's scheduling.podPriority.
	mustCreate(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "jhub-default-priority"}, Value: 0,
		Description: "z2jh's scheduling.podPriority.defaultPriority"})
	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	values.Scheduling.PodPriority.Enabled = ptr.To(true)
	nb, err := examples.RenderNotebook(values, examples.NotebookOptions{Release: "jhub", Namespace: "jhub", User: "alice", Profile: "gpu-whole", NoHomeVolume: true})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's Priority admission reads classes from its own informer, so a class just
	// created may not be known there yet ("no PriorityClass with name ... was found").
	var created error
	eventually(t, 15*time.Second, "the API server admitting the notebook under its new class", func(ctx context.Context) (bool, error) {
		created = c.Client().Create(ctx, nb)
		return !apierrors.IsForbidden(created) || !strings.Contains(created.Error(), "no PriorityClass"), created
	})
	if created != nil {
		t.Fatalf("creating notebook %s: %v", nb.Name, created)
	}
	if nb.Spec.PriorityClassName != "jhub-default-priority" || ptr.Deref(nb.Spec.Priority, -1) != 0 {
		t.Errorf("notebook: class %q priority %v, want z2jh's class at 0", nb.Spec.PriorityClassName, nb.Spec.Priority)
	}
	if nb.Labels[fairwayv1.PreemptibilityLabel] != string(fairwayv1.NonPreemptible) || nb.Labels[fairwayv1.FrameworkLabel] != jupyterhub.Name {
		t.Errorf("notebook labels %v: want fairway's jupyterhub notebook, non-preemptible", nb.Labels)
	}
	var running corev1.Pod
	eventually(t, 60*time.Second, "the notebook running", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), &running); err != nil {
			return false, err
		}
		return running.Status.Phase == corev1.PodRunning, fmt.Errorf("%s: %s", running.Status.Phase, reasonOf(&running))
	})
	// Inference of the same queue at priority 125 wants both GPUs: were the notebook preemptible
	// at its priority 0, fairway would evict it.
	serve := plainPod("serve")
	serve.Namespace = "jhub"
	serve.Spec.PriorityClassName = fairwayv1.PriorityClassInference
	serve.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("2")}
	mustCreate(t, c, serve)
	time.Sleep(10 * time.Second)
	var after corev1.Pod
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(nb), &after); apierrors.IsNotFound(err) {
		t.Fatalf("the notebook was evicted for the inference pod: %v", eventsFor(t, c, ctx, "jhub", "Preempt"))
	} else if err != nil {
		t.Fatal(err)
	}
	if after.UID != running.UID || after.DeletionTimestamp != nil || after.Status.Phase != corev1.PodRunning {
		t.Errorf("the notebook was disturbed: %s, %s", after.Status.Phase, disrupted(&after))
	}
	if notes := eventsFor(t, c, ctx, "jhub", "Preempt"); len(notes) != 0 {
		t.Errorf("Preempt events: %v", notes)
	}
	var waiting corev1.Pod
	if err := c.Client().Get(ctx, client.ObjectKeyFromObject(serve), &waiting); err != nil {
		t.Fatal(err)
	}
	if waiting.Spec.NodeName != "" {
		t.Errorf("the inference pod was bound to %s while the notebook holds a GPU", waiting.Spec.NodeName)
	}
	t.Logf("notebook at z2jh's priority 0 kept its GPU; inference waits: %s", reasonOf(&waiting))
}

// warningCollector keeps the warnings the API server returns (the webhook's among them).
type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningCollector) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// checkLeftToKubeScheduler: a pod fairway leaves alone keeps the default scheduler and carries
// none of fairway's keys.
func checkLeftToKubeScheduler(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("pod %s: schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, corev1.DefaultSchedulerName)
	}
	for k := range p.Labels {
		if strings.HasPrefix(k, fairwayv1.Prefix) {
			t.Errorf("pod %s left to kube-scheduler carries label %s", p.Name, k)
		}
	}
	for _, k := range []string{fairwayv1.PodGroupAnnotation, fairwayv1.WorkloadKindAnnotation, fairwayv1.MinMemberAnnotation} {
		if _, ok := p.Annotations[k]; ok {
			t.Errorf("pod %s left to kube-scheduler carries annotation %s", p.Name, k)
		}
	}
}

// loadUnstructured reads the one object of a repository file.
func loadUnstructured(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := adaptertest.LoadObjects(t, filepath.Join(root, path))
	if len(objs) != 1 {
		t.Fatalf("%s: want one object, got %d", path, len(objs))
	}
	return objs[0]
}
