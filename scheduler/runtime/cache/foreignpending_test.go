package cache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestTrimPendingForeignPod(t *testing.T) {
	pod := func(scheduler string, gpus string) *corev1.Pod {
		c := corev1.Container{Name: "main", Image: "busybox", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		if gpus != "" {
			c.Resources.Requests[v1alpha1.ResourceGPU] = resource.MustParse(gpus)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "plain", Labels: map[string]string{"a": "b"}},
			Spec:   corev1.PodSpec{SchedulerName: scheduler, Containers: []corev1.Container{c, c}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		gpus int64
	}{
		{pod("default-scheduler", "2"), 4},
		{pod("default-scheduler", ""), 0},
		{pod(v1alpha1.SchedulerName, "2"), 0},
	} {
		got := TrimPendingForeignPod(c.pod)
		if n := PendingForeignGPUs(got); n != c.gpus {
			t.Errorf("%s pod: %d GPUs after trimming, want %d", c.pod.Spec.SchedulerName, n, c.gpus)
		}
		if got.Labels != nil || got.Spec.SchedulerName != c.pod.Spec.SchedulerName || len(got.Spec.Containers) > 1 {
			t.Errorf("trimmed pod keeps too much or too little: %+v", got)
		}
	}
}
