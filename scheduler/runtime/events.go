package runtime

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/binder"
	"github.com/fairway-sched/fairway/scheduler/runtime/evictor"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/runtime/metrics"
)

func scheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// eventSink records the runtime's events on pods and PodGroups.
type eventSink struct {
	rec events.EventRecorder
}

func podRef(pod types.NamespacedName, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: uid}
}

// Victim records an eviction on the evicted pod, related to the object it makes room for (the
// beneficiary's pod or PodGroup; nil for none), which readers such as `fairway why` name.
func (s *eventSink) Victim(pod types.NamespacedName, uid types.UID, related *corev1.ObjectReference, reason, note string) {
	s.rec.Eventf(podRef(pod, uid), related, corev1.EventTypeNormal, reason, "Evict", "%s", note)
}

// Beneficiary records an eviction on the object it makes room for: the pod of a gang of one
// pod, else the gang's PodGroup (or lone pod).
func (s *eventSink) Beneficiary(ref *corev1.ObjectReference, reason, note string) {
	s.rec.Eventf(ref, nil, corev1.EventTypeNormal, reason, "Preempt", "%s", note)
}

// WaitingForVolumes records on a placed pod that it waits for its claims to be bound.
func (s *eventSink) WaitingForVolumes(r *binder.Request, note string) {
	s.rec.Eventf(podRef(r.Pod, r.UID), nil, corev1.EventTypeNormal, "WaitingForVolumes", "Bind", "%s", note)
}

// bindObserver turns binder outcomes into metrics and events.
type bindObserver struct {
	m      *metrics.Metrics
	events *eventSink
}

func (o *bindObserver) Bound(r *binder.Request, at time.Time) {
	o.m.Bindings.Inc()
	framework := r.Framework
	if framework == "" {
		framework = "none"
	}
	if !r.Created.IsZero() {
		o.m.SchedulingLatency.WithLabelValues(framework, r.Queue, kindLabel(r.Kind)).Observe(max(at.Sub(r.Created).Seconds(), 0))
	}
	if r.Shared != nil && r.Shared.Loan && o.events != nil {
		o.events.rec.Eventf(podRef(r.Pod, r.UID), nil, corev1.EventTypeNormal, "OnLoan", "Bind",
			"Running on loan on GPU %d of node %s, lent by idle interactive pods; evicted with a short grace period as soon as one of them does GPU work again",
			r.Shared.Index, r.Node)
	}
}

func (o *bindObserver) Failed(r *binder.Request, reason binder.FailureReason, err error) {
	o.m.BindingErrors.WithLabelValues(string(reason)).Inc()
	if reason == binder.ReasonConflict || reason == binder.ReasonNotFound {
		return // bound by someone else, or gone: nothing for the user to act on
	}
	note := "binding to node " + r.Node + " failed; the pod waits for another cycle: " + err.Error()
	if errors.Is(err, gpushare.ErrNoGPUReported) {
		note = "no gpu-agent on node " + r.Node + " reported the GPU of the pod's reservation; the pod waits for another cycle: " + err.Error()
	}
	o.events.rec.Eventf(podRef(r.Pod, r.UID), nil, corev1.EventTypeWarning, "FailedBinding", "Bind", "%s", note)
}

// evictObserver counts evictions.
type evictObserver struct{ m *metrics.Metrics }

func (o *evictObserver) Evicted(r *evictor.Request) {
	framework := r.Framework
	if framework == "" {
		framework = "none"
	}
	o.m.Evictions.WithLabelValues(string(r.Reason), r.Queue, framework, kindLabel(r.Kind)).Inc()
	if r.Reason == engine.EvictLoanReturn && !r.WokeAt.IsZero() {
		o.m.LoanReturn.Observe(max(time.Since(r.WokeAt).Seconds(), 0))
	}
}

func (o *evictObserver) EvictionFailed(*evictor.Request, error) {}
