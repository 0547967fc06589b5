package podgroups

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func gangPod(name string, ago time.Duration, min string) *corev1.Pod {
	p := testutil.MakePod("ml", name).Queue("training").PodGroup("llm").Created(testutil.Epoch.Add(-ago)).
		TopologyRequired("fairway.dev/rack").Preemptibility(v1alpha1.Preemptible).Obj()
	if min != "" {
		p.Annotations[v1alpha1.MinMemberAnnotation] = min
	}
	p.Spec.PriorityClassName = "fairway-training"
	p.UID = types.UID("uid-" + p.Name)
	return p
}

func TestDerive(t *testing.T) {
	rs := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llm-abc", UID: "rs", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	a, b := gangPod("w-0", time.Minute, "4"), gangPod("w-1", time.Hour, "8")
	b.OwnerReferences = []metav1.OwnerReference{rs}
	got := Derive([]*corev1.Pod{a, b})
	want := v1alpha1.PodGroupSpec{MinMember: 8, Queue: "training", PriorityClassName: "fairway-training",
		Preemptibility: v1alpha1.Preemptible, TopologyConstraint: &v1alpha1.TopologyConstraint{RequiredLevel: "fairway.dev/rack"}}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if got.Name != "llm" || got.Namespace != "ml" || got.Labels[v1alpha1.ManagedByLabel] != "fairway" {
		t.Errorf("meta %+v", got.ObjectMeta)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llm-abc", UID: "rs"}}
	if diff := cmp.Diff(wantOwner, got.OwnerReferences); diff != "" {
		t.Errorf("owned by the pods' controller, not blocking its deletion (-want +got):\n%s", diff)
	}
}

func TestBarePodsOwnTheirPodGroupTogether(t *testing.T) {
	a, b := gangPod("w-0", time.Hour, "2"), gangPod("w-1", time.Minute, "2")
	got := Derive([]*corev1.Pod{b, a})
	if len(got.OwnerReferences) != 2 || got.OwnerReferences[0].UID != "uid-w-0" || got.OwnerReferences[0].Controller != nil {
		t.Fatalf("owners %+v: want every bare pod, oldest first, none a controller", got.OwnerReferences)
	}
	c := gangPod("w-2", 0, "2")
	more := Owners([]*corev1.Pod{a, b, c}, got.OwnerReferences)
	if len(more) != 3 || more[2].UID != "uid-w-2" {
		t.Errorf("a new bare pod joins the owners: %+v", more)
	}
	if same := Owners([]*corev1.Pod{a, b}, got.OwnerReferences); len(same) != 2 {
		t.Errorf("owners changed without a new pod: %+v", same)
	}
}

// TestDeriveSubGroups: the PodGroup takes the sub-groups the adapter wrote on the oldest pod, so
// a Ray gang's head is required from the PodGroup's first version on; a value the parser
// refuses gives none (the snapshot reports it on the pod).
func TestDeriveSubGroups(t *testing.T) {
	head, worker := gangPod("head", time.Hour, "4"), gangPod("w-0", time.Minute, "4")
	head.Annotations[v1alpha1.SubGroupsAnnotation] = "headgroup=1,workers=3"
	worker.Annotations[v1alpha1.SubGroupsAnnotation] = "headgroup=1,workers=9"
	got := Derive([]*corev1.Pod{worker, head})
	want := []v1alpha1.SubGroup{{Name: "headgroup", MinMember: 1}, {Name: "workers", MinMember: 3}}
	if diff := cmp.Diff(want, got.Spec.SubGroups); diff != "" {
		t.Errorf("sub-groups (-want +got):\n%s", diff)
	}
	head.Annotations[v1alpha1.SubGroupsAnnotation] = "headgroup=0"
	if got := Derive([]*corev1.Pod{head}); got.Spec.SubGroups != nil {
		t.Errorf("sub-groups from a refused annotation: %+v", got.Spec.SubGroups)
	}
}

func TestWithTopologyKeepsConstraintsByName(t *testing.T) {
	rack := &v1alpha1.TopologyConstraint{RequiredLevel: "rack"}
	got := WithTopology([]v1alpha1.SubGroup{{Name: "head", MinMember: 1}, {Name: "w", MinMember: 2}},
		[]v1alpha1.SubGroup{{Name: "w", MinMember: 6, TopologyConstraint: rack}, {Name: "gone", MinMember: 1, TopologyConstraint: rack}})
	want := []v1alpha1.SubGroup{{Name: "head", MinMember: 1}, {Name: "w", MinMember: 2, TopologyConstraint: rack}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
