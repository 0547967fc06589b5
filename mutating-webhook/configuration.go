package mutatingwebhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Names of the webhooks in fairway's MutatingWebhookConfiguration.
const (
	// PodsWebhookName rewrites the pods of namespaces that queues serve.
	PodsWebhookName = "pods.fairway.dev"
	// GuardWebhookName refuses pods that ask for fairway where fairway does not serve them.
	GuardWebhookName = "guard.pods.fairway.dev"
	// BypassWebhookName refuses pods of served namespaces that ask for GPUs under another
	// scheduler.
	BypassWebhookName = "bypass.pods.fairway.dev"
	// ImmutableWebhookName refuses updates that change fairway's keys on managed pods.
	ImmutableWebhookName = "immutable.pods.fairway.dev"
	// WorkflowsWebhookName admits Argo Workflows (and Kubeflow Pipelines runs) as a whole in the
	// namespaces of queues with pipelineAdmission Peak or Stages (WorkflowHandler).
	WorkflowsWebhookName = "workflows.fairway.dev"
	// WorkflowKeysWebhookName refuses updates of Argo Workflows that change the run admission
	// keys (v1alpha1.RunAdmissionKeys) by any identity but fairway's.
	WorkflowKeysWebhookName = "immutable.workflows.fairway.dev"
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
	// CABundle is written into both webhooks; the reconciler fills it from the certificate.
	CABundle []byte
}

// DesiredConfiguration is fairway's MutatingWebhookConfiguration for the namespaces queues serve.
//
// Served namespaces are selected by the API server's own kubernetes.io/metadata.name label,
// listed from the Queues (and resolved from their namespaceSelectors): users cannot set that
// label, and a namespace joins or leaves the webhook as soon as a Queue lists (or selects) it or
// stops.
// Only these namespaces get failurePolicy Fail, so a webhook outage stops pod creation there and
// nowhere else. The guard webhook, first in the list so it sees pods as users wrote them, sends
// pods that name fairway's scheduler themselves to GuardPath from every other namespace too, with
// failurePolicy Ignore. The immutable webhook, last, sends ImmutablePath the updates of managed
// pods in every unprotected namespace that change one of fairway's keys (see ImmutableHandler);
// the API server itself compares the keys (a match condition), so no other update of a pod waits
// for the webhook, and failurePolicy Fail refuses such a change when the webhook is down. Its
// rule names the pods resource alone, which does not match subresources: status updates,
// bindings and evictions (pods/status, pods/binding, pods/eviction) are never sent.
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

	bypass := bypassWebhook(common(BypassWebhookName, BypassPath), pods.NamespaceSelector)

	immutable := common(ImmutableWebhookName, ImmutablePath)
	immutable.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       rules[0].Rule,
	}}
	immutable.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	// A later mutating webhook that changes one of the keys has fairway look again.
	immutable.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
	immutable.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notProtected}}
	// On UPDATE the API server matches the object selector against the old and the new pod, so
	// a change that drops the label is still sent.
	immutable.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{fairwayv1.ManagedLabel: "true"}}
	immutable.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "changes-fairway-keys",
		Expression: ImmutableKeysChanged(),
	}}

	// Runs of Argo Workflows in served namespaces. failurePolicy Ignore: when the webhook is
	// down, a run is not held and its pods are scheduled one by one, as without pipeline
	// admission, rather than refused.
	workflows := common(WorkflowsWebhookName, WorkflowPath)
	workflows.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"argoproj.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"workflows"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	workflows.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	workflows.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	workflows.NamespaceSelector = pods.NamespaceSelector
	workflows.ObjectSelector = pods.ObjectSelector

	// Changes of a run's admission keys on Argo Workflows, in every unprotected namespace (the
	// scheduler reads Workflows wherever they are): only fairway writes them. As for pods, the
	// API server compares the keys and the identity itself (match conditions), so neither Argo's
	// constant status updates nor the scheduler's own writes wait for the webhook, and
	// failurePolicy Fail refuses a forged change while the webhook is down.
	workflowKeys := common(WorkflowKeysWebhookName, WorkflowPath)
	workflowKeys.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       workflows.Rules[0].Rule,
	}}
	workflowKeys.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	workflowKeys.ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
	workflowKeys.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{notProtected}}
	workflowKeys.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "changes-run-keys",
		Expression: keysChanged("annotations", fairwayv1.RunAdmissionKeys),
	}}
	// Who fairwayv1.IsFairwayIdentity lets write the keys never waits for the webhook.
	notFairway := fmt.Sprintf("!(has(request.userInfo.groups) && %q in request.userInfo.groups)", fairwayv1.MastersGroup)
	if o.ServiceNamespace != "" {
		notFairway = fmt.Sprintf("!request.userInfo.username.startsWith(%q) && ", fairwayv1.ServiceAccountUserPrefix(o.ServiceNamespace)) + notFairway
	}
	workflowKeys.MatchConditions = append(workflowKeys.MatchConditions, admissionregistrationv1.MatchCondition{
		Name: "not-fairway", Expression: notFairway,
	})

	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   o.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "fairway", "app.kubernetes.io/component": "webhook"},
		},
		Webhooks: []admissionregistrationv1.MutatingWebhook{guard, pods, bypass, immutable, workflows, workflowKeys},
	}
}

// bypassWebhook completes w, the webhook after the pods webhook (so that the pods that one hands
// fairway name fairway's scheduler by now), for the namespaces the pods webhook serves: what still
// asks for GPUs under another scheduler there would hold them outside every queue
// (BypassHandler). Opted-out pods included (no object selector); failurePolicy Fail, so an
// outage never lets one through.
func bypassWebhook(w admissionregistrationv1.MutatingWebhook, served *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
	w.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	// A later webhook that changes the scheduler or the resources has the pod checked again.
	w.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
	w.NamespaceSelector = served.DeepCopy()
	w.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "asks-for-gpus-elsewhere",
		Expression: asksForGPUsElsewhere(),
	}}
	return w
}

// asksForGPUsElsewhere is the CEL expression, over a created pod, that is true when a container
// names nvidia.com/gpu in its limits or requests, or the pod has ResourceClaims (the handler reads
// them to tell GPUs from other devices), and the pod does not name fairway's scheduler.
func asksForGPUsElsewhere() string {
	names := fmt.Sprintf(`has(c.resources) && ((has(c.resources.limits) && %[1]q in c.resources.limits) || (has(c.resources.requests) && %[1]q in c.resources.requests))`, fairwayv1.ResourceGPU)
	return fmt.Sprintf(`(!has(object.spec.schedulerName) || object.spec.schedulerName != %q) && `+
		`(object.spec.containers.exists(c, %s) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s)) || `+
		`(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0))`,
		fairwayv1.SchedulerName, names, names)
}

// ImmutableKeysChanged is the CEL expression, over an UPDATE's object and oldObject, that is true
// when one of v1alpha1.ImmutablePodLabels or ImmutablePodAnnotations is added, removed or
// changed. It compares booleans and strings only, so it type-checks whatever type the API server
// gives the objects.
func ImmutableKeysChanged() string {
	return keysChanged("labels", fairwayv1.ImmutablePodLabels) + " || " + keysChanged("annotations", fairwayv1.ImmutablePodAnnotations)
}

// keysChanged is the CEL expression that is true when one of keys of metadata.<field> is added,
// removed or changed between oldObject and object.
func keysChanged(field string, keys []string) string {
	terms := make([]string, 0, len(keys))
	for _, k := range keys {
		was, is := "oldObject.metadata."+field, "object.metadata."+field
		had := fmt.Sprintf("(has(%s) && %q in %s)", was, k, was)
		has := fmt.Sprintf("(has(%s) && %q in %s)", is, k, is)
		terms = append(terms, fmt.Sprintf("%s != %s || (%s && %s && %s[%q] != %s[%q])", had, has, had, has, was, k, is, k))
	}
	return strings.Join(terms, " || ")
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
// for the current Queues and CA bundle: it creates it, follows Queue changes, undoes edits, and
// writes the CA bundle. With manage false it only writes the CA bundle into a configuration made
// by someone else (the Helm chart). Every replica runs it; they compute the same object, and the
// API server's optimistic concurrency settles races.
type configurationReconciler struct {
	client client.Client
	opts   ConfigurationOptions
	bundle caBundleSource
	manage bool
	log    logr.Logger
	// injected is set once the configuration carries the current CA bundle: the server starts
	// serving only then.
	injected atomic.Bool
}

func (r *configurationReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	bundle, err := r.bundle.CABundle(ctx)
	if err != nil {
		r.log.V(1).Info("No CA bundle yet; waiting for the certificate", "reason", err.Error())
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	opts := r.opts
	opts.CABundle = bundle
	current := &admissionregistrationv1.MutatingWebhookConfiguration{}
	err = r.client.Get(ctx, types.NamespacedName{Name: opts.Name}, current)
	if apierrors.IsNotFound(err) {
		if !r.manage {
			r.log.Info("Waiting for the webhook configuration to be created", "name", opts.Name)
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
		desired, err := r.desired(ctx, opts)
		if err != nil {
			return reconcile.Result{}, err
		}
		r.log.Info("Creating the webhook configuration", "name", opts.Name)
		if err := r.client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating MutatingWebhookConfiguration %s: %w", opts.Name, err)
		}
		r.injected.Store(true)
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", opts.Name, err)
	}

	updated := current.DeepCopy()
	if r.manage {
		desired, err := r.desired(ctx, opts)
		if err != nil {
			return reconcile.Result{}, err
		}
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for k, v := range desired.Labels {
			updated.Labels[k] = v
		}
		updated.Webhooks = desired.Webhooks
	}
	for i := range updated.Webhooks {
		w := &updated.Webhooks[i]
		switch {
		case len(bundle) > 0:
			w.ClientConfig.CABundle = bundle
		default: // left to cert-manager's CA injector
			for _, cur := range current.Webhooks {
				if cur.Name == w.Name {
					w.ClientConfig.CABundle = cur.ClientConfig.CABundle
				}
			}
		}
	}
	if !equality.Semantic.DeepEqual(current.Labels, updated.Labels) || !equality.Semantic.DeepEqual(current.Webhooks, updated.Webhooks) {
		r.log.Info("Updating the webhook configuration", "name", opts.Name)
		if err := r.client.Update(ctx, updated); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating MutatingWebhookConfiguration %s: %w", opts.Name, err)
		}
	}
	r.injected.Store(true)
	return reconcile.Result{}, nil
}

// desired is DesiredConfiguration for the namespaces the Queues list now.
func (r *configurationReconciler) desired(ctx context.Context, opts ConfigurationOptions) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	var queues fairwayv1.QueueList
	if err := r.client.List(ctx, &queues); err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	var served []string
	var selecting []fairwayv1.NamespaceMatcher
	for i := range queues.Items {
		served = append(served, queues.Items[i].Spec.Namespaces...)
		m, err := fairwayv1.NewNamespaceMatcher(&queues.Items[i].Spec)
		if err != nil {
			r.log.Error(err, "Queue serves its listed namespaces only", "queue", queues.Items[i].Name)
		}
		if m.HasSelector() {
			selecting = append(selecting, m)
		}
	}
	if len(selecting) > 0 {
		// The namespaces a selector matches now, by name: the webhook configuration's own
		// namespaceSelector holds one selector, and the names keep it on the label users cannot
		// set. A namespace whose labels change wakes the reconciler.
		var namespaces metav1.PartialObjectMetadataList
		namespaces.SetGroupVersionKind(namespaceMeta().GroupVersionKind().GroupVersion().WithKind("NamespaceList"))
		if err := r.client.List(ctx, &namespaces); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		for _, ns := range namespaces.Items {
			for _, m := range selecting {
				if m.Serves(ns.Name, ns.Labels) {
					served = append(served, ns.Name)
					break
				}
			}
		}
	}
	return DesiredConfiguration(opts, served), nil
}

// setupConfigurationReconciler registers the reconciler: one key, woken by any Queue change, by
// changes to the configuration itself, and by wake (the certificate rotator's new CA bundle).
func setupConfigurationReconciler(mgr manager.Manager, r *configurationReconciler, wake <-chan event.GenericEvent) error {
	only := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: r.opts.Name}}}
	}
	err := builder.ControllerManagedBy(mgr).
		Named("webhook-configuration").
		For(&admissionregistrationv1.MutatingWebhookConfiguration{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == r.opts.Name
		}))).
		Watches(&fairwayv1.Queue{}, handler.EnqueueRequestsFromMapFunc(only)).
		// Namespaces that appear, go or change labels change what a namespaceSelector selects.
		WatchesMetadata(namespaceMeta(), handler.EnqueueRequestsFromMapFunc(only), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(wake, handler.EnqueueRequestsFromMapFunc(only))).
		// Several webhooks may run in one process (tests, benchmarks).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), NeedLeaderElection: ptr.To(false)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the webhook configuration controller: %w", err)
	}
	return nil
}
