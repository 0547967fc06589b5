package kuberay_test

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kuberay"
)

// rayPod builds the pod KubeRay makes from a group's template of a real RayCluster sample: the
// template's spec, KubeRay's labels and the controller reference to the cluster.
func rayPod(t *testing.T, rc *unstructured.Unstructured, nodeType, group string, tmpl map[string]any) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
		t.Fatalf("decoding the pod template: %v", err)
	}
	yes := true
	pod.Namespace = "default"
	pod.GenerateName = rc.GetName() + "-" + group + "-"
	pod.Labels = map[string]string{kuberay.ClusterLabel: rc.GetName(), kuberay.NodeTypeLabel: nodeType, kuberay.GroupLabel: group,
		kuberay.IsRayNodeLabel: "yes"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: rc.GetName(), Controller: &yes}}
	return pod
}

// A Ray worker comes back (KubeRay recreates it; Ray reschedules its tasks); the head does not:
// deleting it loses the cluster. Checked on KubeRay's own complete sample.
func TestRecreatableHeadAndWorkers(t *testing.T) {
	objs := adaptertest.LoadObjects(t, filepath.Join("testdata", "realworld", "ray-cluster.complete.yaml"))
	var rc *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "RayCluster" {
			rc = o
		}
	}
	if rc == nil {
		t.Fatal("the sample holds no RayCluster")
	}
	rc.SetNamespace("default")
	groups, _, _ := unstructured.NestedSlice(rc.Object, "spec", "workerGroupSpecs")
	if len(groups) == 0 {
		t.Fatal("the sample has no worker group")
	}
	group, _, _ := unstructured.NestedString(groups[0].(map[string]any), "groupName")
	workerTmpl, _, _ := unstructured.NestedMap(groups[0].(map[string]any), "template")
	headTmpl, _, _ := unstructured.NestedMap(rc.Object, "spec", "headGroupSpec", "template")
	if workerTmpl == nil || headTmpl == nil {
		t.Fatal("the sample lacks a head or worker pod template")
	}
	head := rayPod(t, rc, "head", "headgroup", headTmpl)
	worker := rayPod(t, rc, "worker", group, workerTmpl)

	a := kuberay.New()
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{{head, false}, {worker, true}} {
		got, err := a.Describe(context.Background(), tc.pod, adaptertest.NewReader(rc))
		if err != nil {
			t.Fatalf("Describe(%s): %v", tc.pod.Labels[kuberay.NodeTypeLabel], err)
		}
		if got.Recreatable == nil || *got.Recreatable != tc.want {
			t.Errorf("%s: Recreatable = %v, want %v", tc.pod.Labels[kuberay.NodeTypeLabel], got.Recreatable, tc.want)
		}
		if got.MinMember != kuberay.MinMember(rc) || len(got.Warnings) > 0 {
			t.Errorf("%s: MinMember %d (want %d), warnings %q", tc.pod.Labels[kuberay.NodeTypeLabel], got.MinMember, kuberay.MinMember(rc), got.Warnings)
		}
	}
	// Without the RayCluster the answer is the same: it depends on the pod's role only.
	got, _ := a.Describe(context.Background(), head, adaptertest.NewReader())
	if got.Recreatable == nil || *got.Recreatable {
		t.Errorf("head without its RayCluster: Recreatable = %v, want false", got.Recreatable)
	}
}
