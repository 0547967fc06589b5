package mutatingwebhook

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestGPUMemoryIndex(t *testing.T) {
	g := newGPUMemoryIndex()
	h := g.handler()
	node := func(name, mib string) *metav1.PartialObjectMetadata {
		n := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mib != "" {
			n.Labels = map[string]string{"fairway.dev/gpu-memory": mib}
		}
		return n
	}
	steps := []struct {
		do   func()
		want int64
	}{
		{func() { h.OnAdd(node("cpu-0", ""), true) }, 0},
		{func() { h.OnAdd(node("l4-0", "23034"), true) }, 23034},
		{func() { h.OnAdd(node("h100-0", "81559"), true) }, 81559},
		{func() { h.OnUpdate(node("h100-0", "81559"), node("h100-0", "not-a-number")) }, 23034},
		{func() { h.OnUpdate(node("h100-0", ""), node("h100-0", "81559")) }, 81559},
		{func() { h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "h100-0", Obj: node("h100-0", "81559")}) }, 23034},
		{func() { h.OnDelete(node("l4-0", "23034")) }, 0},
	}
	for i, s := range steps {
		s.do()
		if got := g.largest(); got != s.want {
			t.Errorf("step %d: largest = %d, want %d", i, got, s.want)
		}
	}
}

// TestNamespaceSelector: a queue serves the namespaces it lists and those its namespaceSelector
// matches, both in the defaulter's lookup and in the webhook configuration's served list.
func TestNamespaceSelector(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	profile := map[string]string{"app.kubernetes.io/part-of": "kubeflow-profile"}
	objs := []client.Object{
		&fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow"}, Spec: fairwayv1.QueueSpec{
			Namespaces: []string{"kubeflow-shared"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: profile}}},
		&fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{"team-a"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow-user-alice", Labels: profile}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow-shared"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: profile}},
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	b = b.WithIndex(&fairwayv1.Queue{}, queueNamespacesField, func(o client.Object) []string { return o.(*fairwayv1.Queue).Spec.Namespaces })
	b = b.WithIndex(&fairwayv1.Queue{}, queueSelectorField, func(o client.Object) []string {
		if o.(*fairwayv1.Queue).Spec.NamespaceSelector != nil {
			return []string{hasSelector}
		}
		return nil
	})
	c := b.Build()
	state := &cachedState{reader: c, gpus: newGPUMemoryIndex()}
	for ns, want := range map[string][]string{
		"kubeflow-user-alice": {"kubeflow"},
		"kubeflow-shared":     {"kubeflow"},
		"team-a":              {"team-a"},
	} {
		got, err := state.QueuesServing(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("queues serving %s = %v, want %v", ns, got, want)
		}
	}
	r := &configurationReconciler{client: c, opts: testConfigurationOptions, manage: true, log: logr.Discard()}
	mwc, err := r.desired(ctx, testConfigurationOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kubeflow-shared", "kubeflow-user-alice", "team-a"} // never kube-system
	if got := mwc.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(got, want) {
		t.Errorf("served namespaces %v, want %v", got, want)
	}
}

func TestNamespaceMatcherRefusesEmptySelector(t *testing.T) {
	_, err := fairwayv1.NewNamespaceMatcher(&fairwayv1.QueueSpec{NamespaceSelector: &metav1.LabelSelector{}})
	if err == nil || !strings.Contains(err.Error(), "spec.namespaceSelector is empty") {
		t.Errorf("error %v, want spec.namespaceSelector is empty", err)
	}
	_, err = fairwayv1.NewNamespaceMatcher(&fairwayv1.QueueSpec{NamespaceSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}})
	if err == nil || !strings.Contains(err.Error(), "spec.namespaceSelector") {
		t.Errorf("error %v, want one naming spec.namespaceSelector", err)
	}
}

// TestQueueAdmit: the webhook reads a queue's spec.admit from its cache; unset (a client that
// skipped the CRD's defaulting) and a queue gone meanwhile both mean the default.
func TestQueueAdmit(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: fairwayv1.QueueSpec{Admit: fairwayv1.AdmitAll}},
		&fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "unset"}},
	).Build()
	state := &cachedState{reader: c, gpus: newGPUMemoryIndex()}
	for name, want := range map[string]fairwayv1.AdmitPolicy{"all": fairwayv1.AdmitAll, "unset": fairwayv1.AdmitFrameworks, "gone": fairwayv1.AdmitFrameworks} {
		if got, err := state.QueueAdmit(ctx, name); err != nil || got != want {
			t.Errorf("QueueAdmit(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
}
