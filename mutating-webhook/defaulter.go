package mutatingwebhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/plainpod"
	"github.com/fairway-sched/fairway/adapters/registry"
	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

const schedulerName = fairwayv1.SchedulerName

// Denial is an admission refusal the user must act on. Its message names the label or annotation,
// the bad value and what is allowed; the handler returns it as a 403 "denied" response.
type Denial struct{ Message string }

func (d *Denial) Error() string { return d.Message }

func deny(format string, args ...any) error { return &Denial{Message: fmt.Sprintf(format, args...)} }

// PodDefaulter rewrites a pod for fairway. It is safe for concurrent use.
type PodDefaulter struct {
	adapters []adapters.Adapter
	state    ClusterState
	objects  adapters.ObjectReader
	opts     Options
}

// NewPodDefaulter returns a defaulter that asks list (in order; see registry.All) which framework
// made a pod, and reads the cluster through state and objects.
func NewPodDefaulter(list []adapters.Adapter, state ClusterState, objects adapters.ObjectReader, opts Options) *PodDefaulter {
	return &PodDefaulter{adapters: list, state: state, objects: objects, opts: opts}
}

// Default rewrites pod in place for fairway, or returns why it must be refused (a *Denial, or a
// *gpurequest.Error) or an internal error. It also returns warnings for the client. It never
// writes to the API server, so it is safe for dry-run requests. It is idempotent: a pod it already
// rewrote comes out unchanged, which the API server's reinvocation of mutating webhooks needs.
//
// The steps, in order:
//  1. Leave alone what is not fairway's: protected namespaces, opted-out pods, pods already bound
//     to a node, pods that chose another scheduler, namespaces no queue serves.
//  2. Ask the adapters which framework made the pod and what its workload is; leave framework
//     helpers alone, and, unless the pod names fairway's scheduler, what the queues' spec.admit
//     does not take and pods whose requirements fairway does not evaluate (with a warning).
//     Pods whose DRA claims fairway's allocator does not serve are left alone with a warning
//     too, or refused when they name fairway's scheduler.
//  3. Resolve the queue and check the namespace may use it.
//  4. Default the priority class for the workload kind.
//  5. Apply the queue's policy (a default GPU request; refuse GPU types it closes and GPU
//     above its per-pod cap), normalize the GPU share and wire the GPU environment into the GPU
//     container.
//  6. Write the gang, the fairway labels and the scheduler name.
func (d *PodDefaulter) Default(ctx context.Context, req admission.Request, pod *corev1.Pod) ([]string, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("pod", klog.KObj(pod), "generateName", pod.GenerateName)
	ns := pod.Namespace

	// 1. What is not fairway's.
	asksFairway := pod.Spec.SchedulerName == schedulerName
	serving, err := d.servingQueues(ctx, pod, log)
	if len(serving) == 0 || err != nil {
		return nil, err
	}

	// 2. The framework.
	adapter := registry.Match(d.adapters, pod)
	if adapter == nil {
		return nil, errors.New("no adapter recognises the pod; the registry must end with the plain-pod fallback")
	}
	w, err := adapter.Describe(ctx, pod, d.objects)
	if err != nil {
		// The adapter contract: an error is input the user must fix, so the pod is denied with it.
		return nil, deny("%v", err)
	}
	if w.Ignore != "" {
		log.V(4).Info("Leaving framework helper pod alone", "framework", adapter.Name(), "reason", w.Ignore)
		if asksFairway {
			// A workflow-wide schedulerName reaches helper pods too; fairway's scheduler would
			// never place a pod the webhook did not label, so the helper goes back to the default.
			pod.Spec.SchedulerName = corev1.DefaultSchedulerName
			return append(w.Warnings, fmt.Sprintf("fairway: this pod (%s) is a helper fairway leaves to %s: spec.schedulerName %q was replaced", w.Ignore, corev1.DefaultSchedulerName, schedulerName)), nil
		}
		return w.Warnings, nil
	}
	warnings := w.Warnings

	// 2b. What the queues of the namespace let fairway take (QueueSpec.Admit), and what fairway
	// can schedule at all. A pod that names fairway's scheduler itself is always taken.
	if !asksFairway {
		policy, err := d.admitPolicy(ctx, serving)
		if err != nil {
			return nil, err
		}
		if !takes(policy, pod, adapter.Name(), w) {
			log.V(4).Info("Leaving pod to its own scheduler: the queue's admit policy does not take it", "admit", policy, "framework", adapter.Name())
			return nil, nil
		}
		if what := fairwayv1.UnevaluatedConstraints(pod); len(what) > 0 {
			// Left to kube-scheduler, GPUs would be charged to no queue (BypassHandler).
			ask, err := gpuAsk(ctx, d.objects, pod)
			if err != nil {
				return nil, err
			}
			if why := bypass(pod, d.opts, ask); why != "" {
				return nil, deny("%s", why)
			}
			log.V(2).Info("Leaving pod to its own scheduler: it uses constraints fairway does not evaluate", "constraints", what)
			return []string{unevaluatedWarning(pod, what)}, nil
		}
	}
	// 2c. DRA claims asking for what fairway's allocator does not serve.
	if left, warning, err := d.unservedClaimsStep(ctx, pod, asksFairway); err != nil {
		return nil, err
	} else if left {
		log.V(2).Info("Leaving pod to its own scheduler: its claims ask for what fairway's DRA allocator does not serve", "warning", warning)
		return []string{warning}, nil
	}

	// 2d. Keys that look like fairway's but are not (fairway.dev/gpu-fracton): a warning, or a
	// refusal when the pod asks for a GPU share.
	warn, err := unknownKeys(pod)
	warnings = append(warnings, warn...)
	if err != nil {
		return warnings, err
	}

	// 3. The queue.
	queue, err := d.resolveQueue(ctx, pod, ns, w.QueueHint, serving)
	if err != nil {
		return warnings, err
	}

	// 4. The kind, the priority and the preemptibility.
	pol, warn, err := d.kindAndPriority(ctx, pod, &w, queue)
	warnings = append(warnings, warn...)
	if err != nil {
		return warnings, err
	}

	// 5. The queue's policy (its default GPU request first, so that step 6 normalizes a
	// default share as it does one the user wrote), then the GPU share.
	warn, err = d.applyPolicy(pod, w, &pol)
	if err != nil {
		return warnings, err
	}
	warnings = append(warnings, warn...)
	warn, err = d.gpuShare(pod, w)
	if err != nil {
		return warnings, err
	}
	warnings = append(warnings, warn...)

	// 6. The gang, the labels and the scheduler name; 7. the seal.
	group := d.writeKeys(req, pod, w, adapter.Name(), queue)
	// Keys only the scheduler and the gpu-agent write, at and after binding (the pod contract's
	// binding keys): a new pod carrying them copied them from an old one, or forged them. They
	// go, with a warning; the chart's admission policy refuses them on pods no webhook rewrites.
	warnings = append(warnings, dropBindingKeys(pod)...)
	d.seal(pod)

	log.V(2).Info("Pod handed to fairway", "framework", adapter.Name(), "kind", w.Kind, "queue", queue,
		"podGroup", group, "minMember", w.MinMember, "dryRun", req.DryRun != nil && *req.DryRun)
	return warnings, nil
}

// unservedClaimsStep is step 2c of Default: a pod whose DRA claims ask for what fairway's
// allocator does not serve is refused when it names fairway's scheduler (it would never be
// placed) or when they are GPUs (left to kube-scheduler, they would be charged to no queue), and
// otherwise left to its own scheduler (left) with a warning.
func (d *PodDefaulter) unservedClaimsStep(ctx context.Context, pod *corev1.Pod, asksFairway bool) (left bool, warning string, err error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return false, "", nil
	}
	claims, err := podClaims(ctx, d.objects, pod)
	if err != nil {
		return false, "", err
	}
	what, gpus := unservedClaims(claims)
	switch {
	case len(what) == 0:
		return false, "", nil
	case asksFairway:
		return false, "", unservedClaimsDenial(what, gpus)
	case gpus:
		return false, "", unservedGPUClaimsDenial(pod, what)
	}
	return true, unservedClaimsWarning(pod, what), nil
}

// servingQueues is step 1 of Default: the queues serving the pod's namespace, none (and no
// error) for a pod that is not fairway's (a protected namespace, opted out, bound already,
// another scheduler's, or a namespace no queue serves), or the refusal of a pod that names
// fairway's scheduler where fairway may not take it.
func (d *PodDefaulter) servingQueues(ctx context.Context, pod *corev1.Pod, log logr.Logger) ([]string, error) {
	ns := pod.Namespace
	asksFairway := pod.Spec.SchedulerName == schedulerName
	switch {
	case d.opts.protected(ns):
		return nil, nil
	case pod.Labels[fairwayv1.IgnoreLabel] == "true":
		if asksFairway {
			return nil, deny("label %s=true opts the pod out of fairway, but spec.schedulerName is %q: remove one of the two", fairwayv1.IgnoreLabel, schedulerName)
		}
		return nil, nil
	case pod.Spec.NodeName != "":
		return nil, nil
	case !d.opts.takesOver(pod.Spec.SchedulerName):
		log.V(4).Info("Leaving pod to its own scheduler", "schedulerName", pod.Spec.SchedulerName)
		return nil, nil
	}
	serving, err := d.state.QueuesServing(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("looking up the queues serving namespace %s: %w", ns, err)
	}
	if len(serving) == 0 && asksFairway {
		return nil, notServed(ns)
	}
	return serving, nil
}

// kindAndPriority is step 4 of Default: the kind (a user's fairway.dev/workload-kind label
// overrides the adapter's), then the priority and preemptibility the kind, or the queue's policy
// for it, gives pods that choose none. It returns the queue's policy for the kind.
func (d *PodDefaulter) kindAndPriority(ctx context.Context, pod *corev1.Pod, w *adapters.Workload, queue string) (fairwayv1.EffectivePolicy, []string, error) {
	if _, err := fairwayv1.PreemptibilityOf(pod.Labels); err != nil {
		return fairwayv1.EffectivePolicy{}, nil, deny("%v", err)
	}
	frameworkClass := w.PriorityClass
	if frameworkClass == fairwayv1.DefaultPriorityClass(w.Kind) {
		frameworkClass = "" // the adapter's kind default, not a class its framework object names
	}
	if err := kindFromLabel(pod, w); err != nil {
		return fairwayv1.EffectivePolicy{}, nil, err
	}
	chain, err := d.state.QueuePolicies(ctx, queue)
	if err != nil {
		return fairwayv1.EffectivePolicy{}, nil, fmt.Errorf("reading the policies of queue %s: %w", queue, err)
	}
	pol := fairwayv1.ResolvePolicy(w.Kind, chain)
	class := pol.PriorityClass
	if _, byQueue := pol.From[fairwayv1.RulePriorityClass]; frameworkClass != "" && !byQueue {
		class = frameworkClass
	}
	warnings, err := d.defaultPriority(ctx, pod, class)
	if err != nil {
		return pol, warnings, err
	}
	if pol.Preemptibility != "" {
		chosen, err := d.choosesPreemptibility(ctx, pod, class)
		if err != nil {
			return pol, warnings, err
		}
		if !chosen {
			setLabel(pod, fairwayv1.PreemptibilityLabel, string(pol.Preemptibility))
		}
	}
	return pol, warnings, nil
}

// writeKeys is step 6 of Default: the gang, fairway's labels and the scheduler name. It returns
// the pod's group.
func (d *PodDefaulter) writeKeys(req admission.Request, pod *corev1.Pod, w adapters.Workload, framework, queue string) string {
	group := w.PodGroup
	if group == "" {
		group = unnamedGroup(pod, req)
	}
	setLabel(pod, fairwayv1.QueueLabel, queue)
	setLabel(pod, fairwayv1.ManagedLabel, "true")
	setLabel(pod, fairwayv1.FrameworkLabel, framework)
	setAnnotation(pod, fairwayv1.PodGroupAnnotation, group)
	fairwayv1.SetMinMember(pod.Annotations, max(w.MinMember, 1))
	setAnnotation(pod, fairwayv1.WorkloadKindAnnotation, string(w.Kind))
	if w.SubGroup != "" {
		setAnnotation(pod, fairwayv1.SubGroupAnnotation, w.SubGroup)
	} else {
		delete(pod.Annotations, fairwayv1.SubGroupAnnotation)
	}
	if len(w.SubGroups) > 0 {
		setAnnotation(pod, fairwayv1.SubGroupsAnnotation, fairwayv1.FormatSubGroups(w.SubGroups))
	} else {
		delete(pod.Annotations, fairwayv1.SubGroupsAnnotation)
	}
	if w.Recreatable != nil {
		setAnnotation(pod, fairwayv1.RecreatableAnnotation, strconv.FormatBool(*w.Recreatable))
	} else {
		// A copy from another pod's metadata says nothing about this one: the owner kind decides.
		delete(pod.Annotations, fairwayv1.RecreatableAnnotation)
	}
	pod.Spec.SchedulerName = schedulerName
	return group
}

// seal is step 7 of Default, last, as it covers what the steps before decided: the webhook's seal
// (v1alpha1.AdmittedAnnotation), or none without a key.
func (d *PodDefaulter) seal(pod *corev1.Pod) {
	if d.opts.AdmissionKey != nil {
		setAnnotation(pod, fairwayv1.AdmittedAnnotation, d.opts.AdmissionKey.Seal(pod))
	} else {
		delete(pod.Annotations, fairwayv1.AdmittedAnnotation)
	}
}

// admitPolicy is the widest admit policy of the queues serving the namespace.
func (d *PodDefaulter) admitPolicy(ctx context.Context, serving []string) (fairwayv1.AdmitPolicy, error) {
	policies := make([]fairwayv1.AdmitPolicy, 0, len(serving))
	for _, q := range serving {
		p, err := d.state.QueueAdmit(ctx, q)
		if err != nil {
			return "", fmt.Errorf("reading the admit policy of queue %s: %w", q, err)
		}
		policies = append(policies, p)
	}
	return fairwayv1.Widest(policies...), nil
}

// takes reports whether the admit policy hands the pod to fairway (see QueueSpec.Admit). Pods of
// a known framework are recognised by their adapter; the plain-pod fallback claims the rest.
func takes(policy fairwayv1.AdmitPolicy, pod *corev1.Pod, framework string, w adapters.Workload) bool {
	if policy == fairwayv1.AdmitAll || asksForGPU(pod) || asksForFairway(pod) || w.QueueHint != "" {
		return true
	}
	known := framework != plainpod.Name
	if policy == fairwayv1.AdmitGPU {
		// A gang is placed whole or not at all: its pods without a GPU (a Ray head) go with it.
		return known && w.MinMember > 1
	}
	return known
}

// asksForGPU: a container asks for whole GPUs, the pod for a GPU share (a malformed share
// counts, so that the pod is refused with the annotation's error rather than left alone), or
// for devices through ResourceClaims (DRA, docs/dra.md: fairway's scheduler allocates them).
func asksForGPU(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	if c, _ := wholeGPUs(pod); c != "" {
		return true
	}
	share, err := gpurequest.Parse(pod.Annotations)
	return err != nil || !share.IsZero()
}

// asksForFairway: the pod carries a fairway.dev/ label or annotation, or a queue label fairway
// reads (fairway's, Run:ai's, KAI's).
func asksForFairway(pod *corev1.Pod) bool {
	if key, _, err := fairwayv1.QueueOf(pod.Labels); key != "" || err != nil {
		return true
	}
	for _, m := range []map[string]string{pod.Labels, pod.Annotations} {
		for k := range m {
			if strings.HasPrefix(k, fairwayv1.Prefix) {
				return true
			}
		}
	}
	return false
}

// ownScheduler names the scheduler a pod the webhook leaves alone goes to, for its warnings.
func ownScheduler(pod *corev1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return corev1.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// unevaluatedWarning is what the creator of a pod left to kube-scheduler for its constraints
// reads.
func unevaluatedWarning(pod *corev1.Pod, what []string) string {
	return fmt.Sprintf("fairway: pod uses %s, which fairway does not evaluate, so it is left to scheduler %s: it gets no fairway queue, quota, gang or GPU share; "+
		"to have fairway schedule it, use a node selector, node affinity or a fairway topology annotation instead", strings.Join(what, ", "), ownScheduler(pod))
}

func notServed(ns string) error {
	return deny("namespace %q is not served by any fairway queue, so pods there cannot use spec.schedulerName %q: add the namespace to a Queue's spec.namespaces (or label it for a Queue's spec.namespaceSelector), or remove the scheduler name", ns, schedulerName)
}

// resolveQueue picks the pod's queue: the one its labels name (fairway's label or the Run:ai and
// KAI aliases, read by fairwayv1.QueueOf, which refuses labels that disagree), else the one its
// framework object names, else the one queue serving the namespace. A queue that does not serve
// the pod's namespace is refused, so no label lets a pod spend another team's quota.
func (d *PodDefaulter) resolveQueue(ctx context.Context, pod *corev1.Pod, ns, hint string, serving []string) (string, error) {
	key, asked, err := fairwayv1.QueueOf(pod.Labels)
	if err != nil {
		return "", deny("%v", err)
	}
	if key == "" && hint != "" {
		key, asked = "queue label on the pod's "+"framework object", hint
	}
	if key == "" {
		if len(serving) > 1 {
			return "", deny("namespace %q is served by several queues (%s): choose one with the %s label", ns, strings.Join(serving, ", "), fairwayv1.QueueLabel)
		}
		return serving[0], nil
	}
	if slices.Contains(serving, asked) {
		return asked, nil
	}
	allowed := fmt.Sprintf("pods in namespace %q may use queue %s", ns, quoteList(serving))
	exists, err := d.state.QueueExists(ctx, asked)
	if err != nil {
		return "", fmt.Errorf("looking up queue %s: %w", asked, err)
	}
	if !exists {
		return "", deny("%s %q: no such queue; %s", key, asked, allowed)
	}
	return "", deny("%s %q: queue %q does not serve namespace %q; %s", key, asked, asked, ns, allowed)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, " or ")
}

// defaultPriority gives a pod without a priority class the workload kind's default class. The
// API server's Priority admission plugin runs before mutating webhooks, so by now it has filled
// spec.priority (and spec.preemptionPolicy) from the cluster's global default, and the class name
// too when a global-default class exists; a class equal to the global default is therefore taken
// as "not chosen by the user". Because the API server re-runs its own admission plugins after a
// webhook changed the pod, the webhook clears spec.priority and spec.preemptionPolicy along with
// setting the class: the Priority plugin then resolves them from the new class, instead of
// refusing a priority that disagrees with it. A class that does not exist would make the API
// server refuse the pod, so it is not set, and the client is warned.
func (d *PodDefaulter) defaultPriority(ctx context.Context, pod *corev1.Pod, class string) ([]string, error) {
	if class == "" || pod.Spec.PriorityClassName == class {
		return nil, nil
	}
	if current := pod.Spec.PriorityClassName; current != "" {
		globalDefault, err := d.state.GlobalDefaultPriorityClass(ctx)
		if err != nil {
			return nil, fmt.Errorf("looking up the global default priority class: %w", err)
		}
		if current != globalDefault {
			return nil, nil // the user's choice
		}
	}
	exists, err := d.state.PriorityClassExists(ctx, class)
	if err != nil {
		return nil, fmt.Errorf("looking up priority class %s: %w", class, err)
	}
	if !exists {
		return []string{fmt.Sprintf("fairway: priority class %q does not exist, so the pod keeps the cluster's default priority; install fairway's priority classes (the Helm chart does)", class)}, nil
	}
	pod.Spec.PriorityClassName = class
	pod.Spec.Priority = nil
	pod.Spec.PreemptionPolicy = nil
	return nil, nil
}

// z2jhPriorityClassSuffix ends the name of the class zero-to-jupyterhub's
// scheduling.podPriority gives every notebook (<release>-default-priority, value 0).
const z2jhPriorityClassSuffix = "-default-priority"

// choosesPreemptibility reports whether a pod's creator chose its preemptibility: with the
// fairway.dev/preemptibility label, or with a priority class of their own (a notebook profile's
// priority_class_name: fairway-training). Otherwise the pod gets its kind's preemptibility, or
// its queue's for the kind, whatever class its framework gave it: a notebook holds a user's live
// session, which preemption would kill, and z2jh's podPriority class (value 0) would make it
// preemptible by priority alone. Runs after defaultPriority, so an unchosen class has become
// defaultClass (the kind's or the queue's) by now.
func (d *PodDefaulter) choosesPreemptibility(ctx context.Context, pod *corev1.Pod, defaultClass string) (bool, error) {
	if _, ok := pod.Labels[fairwayv1.PreemptibilityLabel]; ok {
		return true, nil
	}
	class := pod.Spec.PriorityClassName
	if class == "" || class == defaultClass || strings.HasSuffix(class, z2jhPriorityClassSuffix) {
		return false, nil
	}
	globalDefault, err := d.state.GlobalDefaultPriorityClass(ctx)
	if err != nil {
		return false, fmt.Errorf("looking up the global default priority class: %w", err)
	}
	return class != globalDefault, nil
}

// kindFromLabel applies a user's fairway.dev/workload-kind label to the pod's workload: it names
// the kind of work of pods whose framework fairway does not know (a model server's Deployment
// labelled inference), or corrects an adapter's guess (a RayCluster that serves). A value that
// is not a kind is refused.
func kindFromLabel(pod *corev1.Pod, w *adapters.Workload) error {
	v, ok := pod.Labels[fairwayv1.WorkloadKindLabel]
	if !ok {
		return nil
	}
	k := fairwayv1.WorkloadKind(v)
	if !slices.Contains(fairwayv1.WorkloadKinds, k) {
		names := make([]string, len(fairwayv1.WorkloadKinds))
		for i, k := range fairwayv1.WorkloadKinds {
			names[i] = string(k)
		}
		return deny("label %s %q: must be one of %s", fairwayv1.WorkloadKindLabel, v, strings.Join(names, ", "))
	}
	w.Kind = k
	return nil
}

// unnamedGroup names the gang of a pod that is a gang of its own: after the pod's name, or, for a
// pod made from generateName, after the admission request's UID, which is unique per creation.
func unnamedGroup(pod *corev1.Pod, req admission.Request) string {
	if pod.Name != "" {
		return adapters.GroupName("pod", pod.Name)
	}
	return adapters.GroupName("pod", strings.TrimSuffix(pod.GenerateName, "-"), adapters.ShortHash(string(req.UID)))
}

func setLabel(pod *corev1.Pod, key, value string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[key] = value
}

func setAnnotation(pod *corev1.Pod, key, value string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
}

// dropBindingKeys removes the pod contract's binding keys from a pod being created, saying which.
func dropBindingKeys(pod *corev1.Pod) []string {
	var dropped []string
	for _, k := range fairwayv1.BindingPodLabels {
		if _, ok := pod.Labels[k]; ok {
			delete(pod.Labels, k)
			dropped = append(dropped, "label "+k)
		}
	}
	for _, k := range fairwayv1.BindingPodAnnotations {
		if _, ok := pod.Annotations[k]; ok {
			delete(pod.Annotations, k)
			dropped = append(dropped, "annotation "+k)
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	return []string{"fairway: removed " + strings.Join(dropped, ", ") + ": only fairway's scheduler and gpu-agent write these keys, once the pod is placed"}
}
