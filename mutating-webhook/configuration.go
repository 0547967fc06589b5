package mutatingwebhook

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Names of the two webhooks in fairway's MutatingWebhookConfiguration.
const (
	// PodsWebhookName rewrites the pods of namespaces that queues serve.
	PodsWebhookName = "pods.fairway.dev"
	// GuardWebhookName refuses pods that ask for fairway where fairway does not serve them.
	GuardWebhookName = "guard.pods.fairway.dev"
)

// NamespaceNameLabel is set by the API server on every namespace to the namespace's name and
// cannot be changed by users, which makes it safe to select served namespaces by.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// noNamespace fills the served-namespace list when no queue serves any namespace: a label
// selector's In needs a value, and a name with dots can never be a namespace's.
const noNamespace = "no-namespace.fairway.dev"

// ConfigurationOptions describe the MutatingWebhookConfiguration.
type ConfigurationOptions struct {
	// Name of the MutatingWebhookConfiguration.
	Name string
	// ProtectedNamespaces are kept off both webhooks (kube-system and fairway's own namespace).
	ProtectedNamespaces []string
	// Service is the webhook's Service (namespace, name, port) the API server calls, unless URL
	// is set.
	ServiceNamespace, ServiceName string
	ServicePort                   int32
	// URL, when set, is called instead of a Service (webhooks running outside the cluster, such as
	// local test clusters): for example https://localhost:9443.
	URL string
	// TimeoutSeconds bounds each call; the API server default of 10 s is too long for pod bursts.
	TimeoutSeconds int32
	// CABundle, when set, is written into both webhooks. When empty, the bundle the configuration
	// already has is kept: the certificate rotator (or cert-manager's CA injector) owns it.
	CABundle []byte
}

// DesiredConfiguration is fairway's MutatingWebhookConfiguration for the namespaces queues serve.
//
// Served namespaces are selected by the API server's own kubernetes.io/metadata.name label,
// listed from the Queues: users cannot set that label, fairway needs no permission on namespaces,
// and a namespace joins or leaves the webhook as soon as a Queue lists it or stops listing it.
// Only these namespaces get failurePolicy Fail, so a webhook outage stops pod creation there and
// nowhere else. The guard webhook, first in the list so it sees pods as users wrote them, sends
// pods that name fairway's scheduler themselves to GuardPath from every other namespace too, with
// failurePolicy Ignore.
func DesiredConfiguration(o ConfigurationOptions, served []string) *admissionregistrationv1.MutatingWebhookConfiguration {
	served = slices.DeleteFunc(slices.Clone(served), func(ns string) bool { return slices.Contains(o.ProtectedNamespaces, ns) })
	slices.Sort(served)
	served = slices.Compact(served)
	if len(served) == 0 {
		served = []string{noNamespace}
	}
	protected := slices.Sorted(slices.Values(o.ProtectedNamespaces))
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	notOptedOut := metav1.LabelSelectorRequirement{Key: fairwayv1.IgnoreLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}
	notProtected := metav1.LabelSelectorRequirement{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: protected}
	common := func(name, path string) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:                    name,
			ClientConfig:            o.clientConfig(path),
			Rules:                   rules,
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector:          &metav1.LabelSelector{},
		}
	}
	guard := common(GuardWebhookName, GuardPath)
	guard.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	guard.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	guard.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notProtected}}
	guard.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "asks-for-fairway",
		Expression: fmt.Sprintf("has(object.spec.schedulerName) && object.spec.schedulerName == %q", fairwayv1.SchedulerName),
	}}

	pods := common(PodsWebhookName, MutatePath)
	pods.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	// Another webhook may add a container or change the scheduler after fairway ran; seeing the
	// pod again keeps fairway's answer right. The defaulter is idempotent.
	pods.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
	pods.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: served},
		notProtected,
		notOptedOut,
	}}
	pods.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notOptedOut}}

	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   o.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "fairway", "app.kubernetes.io/component": "webhook"},
		},
		Webhooks: []admissionregistrationv1.MutatingWebhook{guard, pods},
	}
}

func (o ConfigurationOptions) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	if o.URL != "" {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(o.URL + path), CABundle: o.CABundle}
	}
	return admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: o.ServiceNamespace, Name: o.ServiceName, Path: ptr.To(path), Port: ptr.To(o.ServicePort),
		},
		CABundle: o.CABundle,
	}
}

// configurationReconciler keeps the MutatingWebhookConfiguration equal to DesiredConfiguration
// for the current Queues: it creates it, follows Queue changes, and undoes edits. Every replica
// runs it; they compute the same object, and the API server's optimistic concurrency settles
// races with the certificate rotator, which writes the CA bundle.
type configurationReconciler struct {
	client client.Client
	opts   ConfigurationOptions
	log    logr.Logger
}

func (r *configurationReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var queues fairwayv1.QueueList
	if err := r.client.List(ctx, &queues); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing queues: %w", err)
	}
	var served []string
	for _, q := range queues.Items {
		served = append(served, q.Spec.Namespaces...)
	}
	desired := DesiredConfiguration(r.opts, served)

	current := &admissionregistrationv1.MutatingWebhookConfiguration{}
	err := r.client.Get(ctx, types.NamespacedName{Name: r.opts.Name}, current)
	if apierrors.IsNotFound(err) {
		r.log.Info("Creating the webhook configuration", "name", r.opts.Name, "namespaces", len(served))
		if err := r.client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", r.opts.Name, err)
		}
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", r.opts.Name, err)
	}
	if len(r.opts.CABundle) == 0 {
		for i := range desired.Webhooks {
			for _, cur := range current.Webhooks {
				if cur.Name == desired.Webhooks[i].Name {
					desired.Webhooks[i].ClientConfig.CABundle = cur.ClientConfig.CABundle
				}
			}
		}
	}
	labelsOK := true
	for k, v := range desired.Labels {
		labelsOK = labelsOK && current.Labels[k] == v
	}
	if labelsOK && equality.Semantic.DeepEqual(current.Webhooks, desired.Webhooks) {
		return reconcile.Result{}, nil
	}
	if current.Labels == nil {
		current.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		current.Labels[k] = v
	}
	current.Webhooks = desired.Webhooks
	r.log.Info("Updating the webhook configuration", "name", r.opts.Name, "namespaces", len(served))
	if err := r.client.Update(ctx, current); err != nil {
		return reconcile.Result{}, fmt.Errorf("updating MutatingWebhookConfiguration %s: %w", r.opts.Name, err)
	}
	return reconcile.Result{}, nil
}

// setupConfigurationReconciler registers the reconciler: one key, woken by any Queue change and
// by changes to the configuration itself.
func setupConfigurationReconciler(mgr manager.Manager, opts ConfigurationOptions, log logr.Logger) error {
	r := &configurationReconciler{client: mgr.GetClient(), opts: opts, log: log}
	only := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: opts.Name}}}
	}
	err := builder.ControllerManagedBy(mgr).
		Named("webhook-configuration").
		For(&admissionregistrationv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == opts.Name
		}))).
		Watches(&fairwayv1.Queue{}, handler.EnqueueRequestsFromMapFunc(only)).
		// Several webhooks may run in one process (tests, benchmarks).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the webhook configuration controller: %w", err)
	}
	return nil
}
