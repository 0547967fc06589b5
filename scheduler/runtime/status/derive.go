// Package status keeps the status of Queues, PodGroups and waiting pods true: after each cycle
// the loop publishes what the engine decided (Report); every few seconds a writer derives each
// object's status from it and from the informer caches, and writes the objects whose status
// changed, through the status subresource.
package status

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
)

// Condition types and reasons written here.
const (
	QueueConditionReady = "Ready"
	ReasonReady         = "Ready"
	ReasonGangScheduled = "GangScheduled"
	ReasonWaiting       = "Waiting"
	ReasonSchedulable   = "Schedulable"
)

// QueueStatus is the status a Queue must have: the engine's accounting of it (st, nil when the
// engine has not seen the queue yet), its children, and its Ready condition, keeping the
// transition times of conditions that did not change.
func QueueStatus(cur *v1alpha1.QueueStatus, st *engine.QueueStatus, children []string, now metav1.Time) v1alpha1.QueueStatus {
	out := v1alpha1.QueueStatus{ChildQueues: children, Conditions: slices.Clone(cur.Conditions)}
	ready := metav1.Condition{Type: QueueConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady, Message: "the queue takes work", LastTransitionTime: now}
	if len(children) > 0 {
		ready.Message = "the queue divides its quota among its child queues"
	}
	if st != nil {
		out.Allocated = nonEmpty(st.Allocated)
		out.AllocatedNonPreemptible = nonEmpty(st.AllocatedNonPreemptible)
		out.Requested = nonEmpty(st.Requested)
		out.FairShare = nonEmpty(st.FairShare)
		out.Borrowed = nonEmpty(st.Borrowed)
		out.Loaned = nonEmpty(st.Loaned)
		out.PendingPods = st.PendingPods
		if st.NotReadyReason != "" {
			// The reason is the engine's code (v1alpha1.QueueNotReadyReason), the message its words.
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(st.NotReadyReason), st.NotReady
		}
	}
	meta.SetStatusCondition(&out.Conditions, ready)
	return out
}

func nonEmpty(a engine.Amounts) corev1.ResourceList {
	if len(a) == 0 {
		return nil
	}
	return a.ResourceList()
}

// PodCounts are a gang's pods by state.
type PodCounts struct {
	Total, Scheduled, Running, Succeeded, Failed int32
}

// CountPods counts a gang's pods: Scheduled are bound to a node and not failed (running,
// starting or done), Running are in phase Running.
func CountPods(pods []*corev1.Pod) PodCounts {
	var c PodCounts
	for _, p := range pods {
		c.Total++
		switch p.Status.Phase {
		case corev1.PodFailed:
			c.Failed++
			continue
		case corev1.PodSucceeded:
			c.Succeeded++
		case corev1.PodRunning:
			c.Running++
		}
		if p.Spec.NodeName != "" {
			c.Scheduled++
		}
	}
	return c
}

// PodGroupStatus is the status a PodGroup must have given its pods and the engine's reason for
// the gang, if it waits. Conditions keep their transition times when they do not change;
// LastStartTime is set when the gang becomes Running.
func PodGroupStatus(cur *v1alpha1.PodGroupStatus, minMember int32, pods []*corev1.Pod, reason *engine.GangReason, now metav1.Time) v1alpha1.PodGroupStatus {
	c := CountPods(pods)
	minMember = max(minMember, 1)
	out := v1alpha1.PodGroupStatus{
		Scheduled: c.Scheduled, Running: c.Running, Succeeded: c.Succeeded, Failed: c.Failed,
		LastStartTime: cur.LastStartTime, Conditions: slices.Clone(cur.Conditions),
	}
	switch {
	case c.Total > 0 && c.Succeeded == c.Total:
		out.Phase = v1alpha1.PodGroupSucceeded
	case c.Failed > 0 && c.Total-c.Failed < minMember:
		out.Phase = v1alpha1.PodGroupFailed
	case c.Running > 0 && c.Running+c.Succeeded >= minMember:
		out.Phase = v1alpha1.PodGroupRunning
	case c.Scheduled >= minMember:
		out.Phase = v1alpha1.PodGroupScheduled
	default:
		out.Phase = v1alpha1.PodGroupPending
	}
	if out.Phase == v1alpha1.PodGroupRunning && cur.Phase != v1alpha1.PodGroupRunning {
		out.LastStartTime = &now
	}
	unsched := metav1.Condition{Type: v1alpha1.PodGroupConditionUnschedulable, Status: metav1.ConditionFalse,
		Reason: ReasonSchedulable, Message: "no pod of the gang waits", LastTransitionTime: now}
	if reason != nil {
		unsched.Status, unsched.Reason, unsched.Message = metav1.ConditionTrue, string(reason.Code), reason.Message
	}
	meta.SetStatusCondition(&out.Conditions, unsched)
	sched := metav1.Condition{Type: v1alpha1.PodGroupConditionScheduled, Status: metav1.ConditionFalse, Reason: ReasonWaiting,
		Message: fmt.Sprintf("%s bound, of the gang's minimum of %d", count(c.Scheduled, "pod", "pods"), minMember), LastTransitionTime: now}
	if c.Scheduled+c.Succeeded >= minMember || out.Phase == v1alpha1.PodGroupSucceeded {
		sched.Status, sched.Reason = metav1.ConditionTrue, ReasonGangScheduled
		sched.Message = fmt.Sprintf("the gang was placed whole (minimum %s)", count(minMember, "pod", "pods"))
	}
	meta.SetStatusCondition(&out.Conditions, sched)
	return out
}

// PodUnschedulable is the PodScheduled condition of a waiting pod, as kube-scheduler writes it:
// False, reason Unschedulable, and the engine's code and message in the format
// v1alpha1.PodScheduledMessage defines (the CLI reads the code back with
// v1alpha1.ParsePodScheduledMessage).
func PodUnschedulable(r *engine.GangReason, now metav1.Time) corev1.PodCondition {
	return corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: v1alpha1.PodScheduledMessage(r.Code, r.Message), LastTransitionTime: now,
	}
}

// PodConditionDiffers reports whether the pod lacks the condition c (same status, reason and
// message).
func PodConditionDiffers(pod *corev1.Pod, c corev1.PodCondition) bool {
	for _, x := range pod.Status.Conditions {
		if x.Type == c.Type {
			return x.Status != c.Status || x.Reason != c.Reason || x.Message != c.Message
		}
	}
	return true
}

// count is n with its noun: "1 pod", "4 pods", never "1 pods".
func count(n int32, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
