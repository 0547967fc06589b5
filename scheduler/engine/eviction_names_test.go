package engine_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
)

// TestEvictionNamesTheReplica: when a Deployment's replica (a gang of one pod in the PodGroup the
// webhook makes up for it) preempts a training worker, the eviction names the replica and its
// workload, once, and carries the pod for the evictor's events. Issue 39 found "Preempted by
// team-a/pod-serve-6cc45dbb8-3eb6c340 because preempted by gang team-a/pod-serve-6cc45dbb8-3eb6c340",
// a name nobody could find, twice.
func TestEvictionNamesTheReplica(t *testing.T) {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	s := newSim(engine.DefaultOptions(), now)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h100-0"}, Status: corev1.NodeStatus{
		Capacity:    corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if err := s.addNode(node); err != nil {
		t.Fatal(err)
	}
	q8 := resource.MustParse("8")
	if err := s.addQueue(&v1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: v1alpha1.QueueSpec{Namespaces: []string{"team-a"},
		Resources: v1alpha1.QueueResources{GPU: &v1alpha1.ResourceQuota{Quota: &q8}}}}); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, prio int32, preempt string, ann map[string]string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Labels: map[string]string{v1alpha1.QueueLabel: "team-a", v1alpha1.PreemptibilityLabel: preempt}, Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: v1alpha1.SchedulerName, Priority: &prio, Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse("1")},
					Requests: corev1.ResourceList{v1alpha1.ResourceGPU: resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
		for k, v := range labels {
			p.Labels[k] = v
		}
		return p
	}
	tr := true
	for i := range 8 {
		w := mk(fmt.Sprintf("llm-worker-%d", i), 50, "preemptible", map[string]string{"fairway.dev/workload-kind": "training", v1alpha1.RecreatableAnnotation: "true"}, map[string]string{"fairway.dev/workload-kind": "training"})
		w.Spec.NodeName = "h100-0"
		w.Status.Phase = corev1.PodRunning
		w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "llm", UID: "job-llm", Controller: &tr}}
		if err := s.addPod(w, true); err != nil {
			t.Fatal(err)
		}
	}
	serve := mk("serve-6cc45dbb8-q8fk7", 125, "non-preemptible",
		map[string]string{v1alpha1.PodGroupAnnotation: "pod-serve-6cc45dbb8-3eb6c340", v1alpha1.MinMemberAnnotation: "1", "fairway.dev/workload-kind": "inference"},
		map[string]string{"pod-template-hash": "6cc45dbb8", "fairway.dev/workload-kind": "inference"})
	serve.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "serve-6cc45dbb8", UID: "rs", Controller: &tr}}
	if err := s.addPod(serve, true); err != nil {
		t.Fatal(err)
	}
	res, err := s.cycle()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evictions) != 1 {
		t.Fatalf("%d evictions, want 1: %+v", len(res.Evictions), res.Evictions)
	}
	e := res.Evictions[0]
	want := "preempted by pod team-a/serve-6cc45dbb8-q8fk7 (inference Deployment serve) of priority 125 in queue team-a (this pod has priority 50)"
	if e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	if e.BeneficiaryPod == nil || e.BeneficiaryPod.Name != "serve-6cc45dbb8-q8fk7" {
		t.Errorf("beneficiary pod %v, want team-a/serve-6cc45dbb8-q8fk7", e.BeneficiaryPod)
	}
}
