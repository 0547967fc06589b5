package snapshot_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// BenchmarkPodInfoFromPod times reading one pod, which the informer does on every pod event: a
// whole-GPU pod, and shared pods as the webhook leaves them (fairway's keys, the user's alias
// kept beside them).
func BenchmarkPodInfoFromPod(b *testing.B) {
	for name, pod := range map[string]*corev1.Pod{
		"whole": testutil.MakePod("a", "p").Queue("a").GPU(1).CPU("1").Memory("1G").Obj(),
		"fraction": testutil.MakePod("a", "p").Queue("a").Fraction("0.333").CPU("1").
			Annotation(v1alpha1.GPUFractionAliasAnnotation, "0.3333").Obj(),
		"memory": testutil.MakePod("a", "p").Label(v1alpha1.RunAIQueueLabel, "a").Queue("a").GPUMemory(20480).
			Annotation(v1alpha1.GPUMemoryAliasAnnotation, "20Gi").Obj(),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = snapshot.PodInfoFromPod(pod)
			}
		})
	}
}
