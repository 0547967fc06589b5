package mutatingwebhook

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
		"sorted, without duplicates":                 {served: []string{"team-b", "team-a", "team-b"}, want: []string{"team-a", "team-b"}},
		"protected namespaces never":                 {served: []string{"kube-system", "team-a", "fairway-system"}, want: []string{"team-a"}},
		"none served: a value no namespace can have": {served: nil, want: []string{"no-namespace.fairway.dev"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mwc := DesiredConfiguration(testConfigurationOptions, tc.served)
			var names []string
			for _, w := range mwc.Webhooks {
				names = append(names, w.Name)
			}
			if want := []string{GuardWebhookName, PodsWebhookName, BypassWebhookName, ImmutableWebhookName, WorkflowsWebhookName, WorkflowKeysWebhookName}; !slices.Equal(names, want) {
				t.Fatalf("webhooks %q, want %q: the guard first, then the pods webhook, the bypass one after it, the immutable one, the workflows one and the workflows' keys one", names, want)
			}
			// Runs are admitted where pods are, and a webhook outage leaves them to run pod by pod.
			if wf := mwc.Webhooks[4]; !equality.Semantic.DeepEqual(wf.NamespaceSelector, mwc.Webhooks[1].NamespaceSelector) ||
				*wf.FailurePolicy != admissionregistrationv1.Ignore || *wf.ClientConfig.Service.Path != WorkflowPath || wf.Rules[0].Resources[0] != "workflows" {
				t.Errorf("workflows webhook %+v", wf)
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
	bundle := &staticBundle{b: []byte("CA-1")}
	r := &configurationReconciler{client: c, opts: testConfigurationOptions, bundle: bundle, manage: true, log: logr.Discard()}
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
	if !r.injected.Load() {
		t.Errorf("not marked injected after creating the configuration")
	}
	for _, w := range created.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA-1" {
			t.Errorf("webhook %s: CA bundle %q, want CA-1", w.Name, w.ClientConfig.CABundle)
		}
	}
	if again := reconcileOnce(); again.ResourceVersion != created.ResourceVersion {
		t.Errorf("an up-to-date configuration was rewritten (resourceVersion %s -> %s)", created.ResourceVersion, again.ResourceVersion)
	}

	// Someone edits it: undone.
	created.Webhooks[1].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	if err := c.Update(ctx, created); err != nil {
		t.Fatal(err)
	}
	if got := reconcileOnce(); *got.Webhooks[1].FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("an edited failurePolicy was not restored")
	}

	// A queue lists another namespace; the CA was renewed.
	queue.Spec.Namespaces = append(queue.Spec.Namespaces, "team-z")
	if err := c.Update(ctx, queue); err != nil {
		t.Fatal(err)
	}
	bundle.b = []byte("CA-2")
	updated := reconcileOnce()
	if got := updated.Webhooks[1].NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"team-a", "team-z"}) {
		t.Errorf("served namespaces after the queue changed = %v", got)
	}
	for _, w := range updated.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA-2" {
			t.Errorf("webhook %s: CA bundle %q, want CA-2", w.Name, w.ClientConfig.CABundle)
		}
	}

	// Inject-only mode (the chart owns the configuration): only the bundle changes.
	updated.Webhooks[1].TimeoutSeconds = ptr.To[int32](9)
	if err := c.Update(ctx, updated); err != nil {
		t.Fatal(err)
	}
	r.manage, bundle.b = false, []byte("CA-3")
	injectOnly := reconcileOnce()
	if *injectOnly.Webhooks[1].TimeoutSeconds != 9 || string(injectOnly.Webhooks[1].ClientConfig.CABundle) != "CA-3" {
		t.Errorf("inject-only: timeout %d (want 9, untouched), bundle %q (want CA-3)", *injectOnly.Webhooks[1].TimeoutSeconds, injectOnly.Webhooks[1].ClientConfig.CABundle)
	}
}

type staticBundle struct{ b []byte }

func (s *staticBundle) CABundle(context.Context) ([]byte, error) { return s.b, nil }

// TestDesiredConfigurationBypassWebhook: creations of pods in served namespaces, opted-out pods
// included, after the pods webhook, filtered in the API server to those that ask for whole GPUs
// under another scheduler, refused when the webhook is down.
func TestDesiredConfigurationBypassWebhook(t *testing.T) {
	mwc := DesiredConfiguration(testConfigurationOptions, []string{"team-a"})
	w, pods := mwc.Webhooks[2], mwc.Webhooks[1]
	if w.Name != BypassWebhookName || *w.ClientConfig.Service.Path != BypassPath || *w.FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("webhook %s path %s failurePolicy %s", w.Name, *w.ClientConfig.Service.Path, *w.FailurePolicy)
	}
	if !equality.Semantic.DeepEqual(w.Rules, pods.Rules) || !equality.Semantic.DeepEqual(w.NamespaceSelector, pods.NamespaceSelector) {
		t.Errorf("rules %+v, namespaces %+v: want the pods webhook's", w.Rules, w.NamespaceSelector)
	}
	if len(w.ObjectSelector.MatchLabels)+len(w.ObjectSelector.MatchExpressions) != 0 {
		t.Errorf("object selector %+v: want every pod, opted out or not", w.ObjectSelector)
	}
	if *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
		t.Errorf("reinvocation %s: a later webhook may change the scheduler", *w.ReinvocationPolicy)
	}
	if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, `object.spec.schedulerName != "fairway"`) ||
		!strings.Contains(w.MatchConditions[0].Expression, `"nvidia.com/gpu" in c.resources.limits`) ||
		!strings.Contains(w.MatchConditions[0].Expression, "object.spec.initContainers.exists(") {
		t.Errorf("match conditions %+v", w.MatchConditions)
	}
}

// TestDesiredConfigurationImmutableWebhook: updates of managed pods only, in every unprotected
// namespace, the pods resource alone (never pods/status), filtered in the API server to those
// that change a fairway key, and refused when the webhook is down.
func TestDesiredConfigurationImmutableWebhook(t *testing.T) {
	w := DesiredConfiguration(testConfigurationOptions, []string{"team-a"}).Webhooks[3]
	if w.Name != ImmutableWebhookName || *w.ClientConfig.Service.Path != ImmutablePath || *w.FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("webhook %s path %s failurePolicy %s", w.Name, *w.ClientConfig.Service.Path, *w.FailurePolicy)
	}
	if len(w.Rules) != 1 || !cmp.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) ||
		!cmp.Equal(w.Rules[0].Resources, []string{"pods"}) {
		t.Errorf("rules %+v: want UPDATE of pods only", w.Rules)
	}
	if !cmp.Equal(w.ObjectSelector.MatchLabels, map[string]string{fairwayv1.ManagedLabel: "true"}) {
		t.Errorf("object selector %+v", w.ObjectSelector)
	}
	if ns := w.NamespaceSelector.MatchExpressions; len(ns) != 1 || ns[0].Operator != metav1.LabelSelectorOpNotIn {
		t.Errorf("namespace selector %+v: want every unprotected namespace", w.NamespaceSelector)
	}
	if len(w.MatchConditions) != 1 {
		t.Fatalf("match conditions %+v", w.MatchConditions)
	}
	expr := w.MatchConditions[0].Expression
	for _, k := range append(append([]string{}, fairwayv1.ImmutablePodLabels...), fairwayv1.ImmutablePodAnnotations...) {
		if !strings.Contains(expr, `"`+k+`" in oldObject.metadata.`) || !strings.Contains(expr, `"`+k+`" in object.metadata.`) {
			t.Errorf("the match condition does not compare %s: %s", k, expr)
		}
	}
}

// TestDesiredConfigurationWorkflowKeysWebhook: updates of Argo Workflows in every unprotected
// namespace, filtered in the API server to those that change a run admission key and are not
// made by one of fairway's ServiceAccounts, refused when the webhook is down.
func TestDesiredConfigurationWorkflowKeysWebhook(t *testing.T) {
	w := DesiredConfiguration(testConfigurationOptions, []string{"team-a"}).Webhooks[5]
	if w.Name != WorkflowKeysWebhookName || *w.ClientConfig.Service.Path != WorkflowPath || *w.FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("webhook %s path %s failurePolicy %s", w.Name, *w.ClientConfig.Service.Path, *w.FailurePolicy)
	}
	if len(w.Rules) != 1 || !cmp.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) ||
		!cmp.Equal(w.Rules[0].Resources, []string{"workflows"}) || !cmp.Equal(w.Rules[0].APIGroups, []string{"argoproj.io"}) {
		t.Errorf("rules %+v: want UPDATE of Argo Workflows only", w.Rules)
	}
	if ns := w.NamespaceSelector.MatchExpressions; len(ns) != 1 || ns[0].Operator != metav1.LabelSelectorOpNotIn {
		t.Errorf("namespace selector %+v: want every unprotected namespace", w.NamespaceSelector)
	}
	if len(w.ObjectSelector.MatchLabels)+len(w.ObjectSelector.MatchExpressions) != 0 {
		t.Errorf("object selector %+v: opting a run out of fairway must not let it forge the keys", w.ObjectSelector)
	}
	if len(w.MatchConditions) != 2 {
		t.Fatalf("match conditions %+v", w.MatchConditions)
	}
	for _, k := range fairwayv1.RunAdmissionKeys {
		if expr := w.MatchConditions[0].Expression; !strings.Contains(expr, `"`+k+`" in oldObject.metadata.annotations`) {
			t.Errorf("the match condition does not compare %s: %s", k, expr)
		}
	}
	if got, want := w.MatchConditions[1].Expression, `!request.userInfo.username.startsWith("system:serviceaccount:fairway-system:") && !(has(request.userInfo.groups) && "system:masters" in request.userInfo.groups)`; got != want {
		t.Errorf("identity condition %s, want %s", got, want)
	}
}
