package mutatingwebhook

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

var testConfigurationOptions = ConfigurationOptions{
	Name:                "fairway-webhook",
	ProtectedNamespaces: []string{"kube-system", "fairway-system"},
	ServiceNamespace:    "fairway-system",
	ServiceName:         "fairway-webhook",
	ServicePort:         443,
	TimeoutSeconds:      5,
}

func TestDesiredConfigurationSelectsServedNamespaces(t *testing.T) {
	cases := map[string]struct {
		served []string
		want   []string
	}{
		"sorted, without duplicates": {served: []string{"team-b", "team-a", "team-b"}, want: []string{"team-a", "team-b"}},
		"protected namespaces never": {served: []string{"kube-system", "team-a", "fairway-system"}, want: []string{"team-a"}},
		"none served: a value no namespace can have": {served: nil, want: []string{"no-namespace.fairway.dev"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mwc := DesiredConfiguration(testConfigurationOptions, tc.served)
			if len(mwc.Webhooks) != 2 || mwc.Webhooks[0].Name != GuardWebhookName || mwc.Webhooks[1].Name != PodsWebhookName {
				t.Fatalf("webhooks = %v, want the guard first, then the pods webhook", mwc.Webhooks)
			}
			pods := mwc.Webhooks[1]
			in := pods.NamespaceSelector.MatchExpressions[0]
			if in.Key != NamespaceNameLabel || in.Operator != metav1.LabelSelectorOpIn {
				t.Fatalf("first namespace requirement = %+v", in)
			}
			if diff := cmp.Diff(tc.want, in.Values); diff != "" {
				t.Errorf("served namespaces (-want +got):\n%s", diff)
			}
			if *pods.FailurePolicy != admissionregistrationv1.Fail || *mwc.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
				t.Errorf("failure policies: pods %s, guard %s", *pods.FailurePolicy, *mwc.Webhooks[0].FailurePolicy)
			}
			if got := *pods.ClientConfig.Service.Path; got != MutatePath {
				t.Errorf("pods webhook path %q", got)
			}
		})
	}
}

// TestConfigurationReconciler: the reconciler creates the configuration, follows the Queues,
// keeps the CA bundle the rotator wrote, and leaves an up-to-date configuration alone.
func TestConfigurationReconciler(t *testing.T) {
	ctx := context.Background()
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	queue := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{"team-a"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(queue).Build()
	r := &configurationReconciler{client: c, opts: testConfigurationOptions, log: logr.Discard()}
	reconcileOnce := func() *admissionregistrationv1.MutatingWebhookConfiguration {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{}); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: "fairway-webhook"}, mwc); err != nil {
			t.Fatal(err)
		}
		return mwc
	}

	created := reconcileOnce()
	// The rotator injects the CA bundle.
	for i := range created.Webhooks {
		created.Webhooks[i].ClientConfig.CABundle = []byte("CA")
	}
	if err := c.Update(ctx, created); err != nil {
		t.Fatal(err)
	}
	injected := created.ResourceVersion

	if again := reconcileOnce(); again.ResourceVersion != injected {
		t.Errorf("an up-to-date configuration was rewritten (resourceVersion %s -> %s)", injected, again.ResourceVersion)
	}

	queue.Spec.Namespaces = append(queue.Spec.Namespaces, "team-z")
	if err := c.Update(ctx, queue); err != nil {
		t.Fatal(err)
	}
	updated := reconcileOnce()
	if got := updated.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"team-a", "team-z"}) {
		t.Errorf("served namespaces after the queue changed = %v", got)
	}
	for _, w := range updated.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA" {
			t.Errorf("webhook %s lost its CA bundle", w.Name)
		}
	}
}
