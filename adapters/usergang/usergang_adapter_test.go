package usergang_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/usergang"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestDescribe(t *testing.T) {
	training := func(w adapters.Workload) adapters.Workload {
		w.Kind, w.PriorityClass = adapters.KindTraining, fairwayv1.PriorityClassTraining
		return w
	}
	cases := map[string]adaptertest.DescribeCase{
		"Kueue plain pod group: its total count": {
			Pod:  "kueue-pod.yaml",
			Want: training(adapters.Workload{PodGroup: "gang-sample-group", MinMember: 2}),
		},
		"KAI: the PodGroup's leaf sub-groups": {
			Pod: "kai-pod.yaml", Objects: "kai-podgroup.yaml",
			Want: training(adapters.Workload{PodGroup: "gang-sample1", MinMember: 5, SubGroup: "subgroup-a",
				SubGroups: []fairwayv1.SubGroup{{Name: "subgroup-a", MinMember: 2}, {Name: "subgroup-b", MinMember: 3}}}),
		},
		"KAI: PodGroup missing": {
			Pod:      "kai-pod.yaml",
			Want:     training(adapters.Workload{PodGroup: "gang-sample1", MinMember: 1, SubGroup: "subgroup-a"}),
			Warnings: 1,
		},
		"coscheduling: the PodGroup's minMember": {
			Pod: "coscheduling-pod.yaml", Objects: "coscheduling-podgroup.yaml",
			Want: training(adapters.Workload{PodGroup: "gang-pg1", MinMember: 3}),
		},
		"coscheduling: CRD missing": {
			Pod:      "coscheduling-pod.yaml",
			Want:     training(adapters.Workload{PodGroup: "gang-pg1", MinMember: 1}),
			Warnings: 1,
		},
		"Workload API: the gang policy's minCount": {
			Pod: "workload-pod.yaml", Objects: "workload-podgroup.yaml",
			Want: training(adapters.Workload{PodGroup: "gang-training-worker-0", MinMember: 4}),
		},
		"Workload API not served": {
			Pod:      "workload-pod.yaml",
			Want:     training(adapters.Workload{PodGroup: "gang-training-worker-0", MinMember: 1}),
			Warnings: 1,
		},
		"indexed Job with fairway.dev/gang: parallelism": {
			Pod: "indexed-job-pod.yaml", Objects: "indexed-job.yaml",
			Want: training(adapters.Workload{PodGroup: "job-sample-job", MinMember: 3, Recreatable: adapters.Bool(false)}),
		},
		"indexed Job not in the cache yet": {
			Pod:      "indexed-job-pod.yaml",
			Want:     training(adapters.Workload{PodGroup: "job-sample-job", MinMember: 1}),
			Warnings: 1,
		},
	}
	adaptertest.RunDescribe(t, usergang.New(), cases)
}

// Input the user must fix is refused with the key, the value and what is allowed.
func TestDescribeRefuses(t *testing.T) {
	kueue := adaptertest.LoadPod(t, filepath.Join("testdata", "kueue-pod.yaml"))
	noCount := kueue.DeepCopy()
	delete(noCount.Annotations, usergang.KueuePodGroupTotalCountAnnotation)
	badCount := kueue.DeepCopy()
	badCount.Annotations[usergang.KueuePodGroupTotalCountAnnotation] = "two"
	job := adaptertest.LoadPod(t, filepath.Join("testdata", "indexed-job-pod.yaml"))
	badGang := job.DeepCopy()
	badGang.Annotations[fairwayv1.GangAnnotation] = "4"
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{fairwayv1.GangAnnotation: "true"}}}
	cases := map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"Kueue group without its count": {noCount, []string{usergang.KueuePodGroupTotalCountAnnotation, "sample-group", "whole number"}},
		"Kueue count not a number":      {badCount, []string{`"two"`, "whole number"}},
		"gang annotation not true":      {badGang, []string{fairwayv1.GangAnnotation, `"4"`, `"true"`}},
		"gang annotation on a bare pod": {bare, []string{fairwayv1.GangAnnotation, "batch/v1 Job", usergang.KueuePodGroupNameLabel}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := usergang.New().Describe(context.Background(), tc.pod, adaptertest.NewReader())
			if err == nil {
				t.Fatal("Describe accepted the pod")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRecognize(t *testing.T) {
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}}}
	if usergang.New().Recognize(bare) {
		t.Error("Recognize(a pod naming no gang) = true")
	}
}

// JobGangSize: the pods the Job runs at once.
func TestJobGangSize(t *testing.T) {
	for _, tc := range []struct {
		spec map[string]any
		want int32
	}{
		{map[string]any{"parallelism": int64(4), "completions": int64(4)}, 4},
		{map[string]any{"parallelism": int64(4), "completions": int64(2)}, 2},
		{map[string]any{"parallelism": int64(4)}, 4},
		{map[string]any{}, 1},
		{map[string]any{"parallelism": int64(0)}, 1},
	} {
		if got := usergang.JobGangSize(tc.spec); got != tc.want {
			t.Errorf("JobGangSize(%v) = %d, want %d", tc.spec, got, tc.want)
		}
	}
}
