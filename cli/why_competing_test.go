package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// `fairway why` on a pod that waits for GPUs counts the pending pods of other schedulers that
// ask for GPUs too; pods that ask for none, bound ones and fairway's own are not counted.
func TestWhyCompeting(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gpuPod := func(ns, name, scheduler, node string, gpus int64) corev1.Pod {
		c := corev1.Container{Name: "main"}
		if gpus > 0 {
			q := *resource.NewQuantity(gpus, resource.DecimalSI)
			c.Resources.Requests = corev1.ResourceList{fairwayv1.ResourceGPU: q}
			c.Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: q}
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			Labels: map[string]string{fairwayv1.QueueLabel: "team-a"}},
			Spec: corev1.PodSpec{SchedulerName: scheduler, NodeName: node, Containers: []corev1.Container{c}}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	me := gpuPod("team-a", "big", fairwayv1.SchedulerName, "", 8)
	me.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: string(fairwayv1.ReasonNoNodeFits), Message: "0/3 nodes fit"}}
	var foreign []corev1.Pod
	for i := range 3 {
		foreign = append(foreign, gpuPod("plain", fmt.Sprint("p", i), corev1.DefaultSchedulerName, "", 1))
	}
	foreign = append(foreign, gpuPod("plain", "cpu", corev1.DefaultSchedulerName, "", 0), gpuPod("plain", "bound", corev1.DefaultSchedulerName, "h100-0", 1),
		gpuPod("hpc", "mpi", "volcano", "", 4))
	v := cli.BuildWhy(&cli.WhySnapshot{Pod: &me, Pods: []corev1.Pod{me}, ForeignPending: foreign}, now)
	want := []cli.CompetingView{{Scheduler: corev1.DefaultSchedulerName, Pods: 3, GPUs: 3}, {Scheduler: "volcano", Pods: 1, GPUs: 4}}
	if fmt.Sprint(v.Competing) != fmt.Sprint(want) {
		t.Errorf("competing %+v, want %+v", v.Competing, want)
	}
	var b strings.Builder
	if err := cli.PrintWhy(&b, v); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "Competing:  3 pods of scheduler default-scheduler wait for 3 GPUs (nvidia.com/gpu)") ||
		!strings.Contains(out, "Competing:  1 pod of scheduler volcano waits for 4 GPUs (nvidia.com/gpu)") {
		t.Errorf("output\n%s\nwants a Competing line for default-scheduler (3 pods) and for volcano (1 pod)", out)
	}
}
