package usergang_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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
	cases := map[string]struct {
		pod     string
		objects []string
		want    adapters.Workload
		warns   int
	}{
		"Kueue plain pod group: its total count": {
			pod:  "kueue-pod.yaml",
			want: training(adapters.Workload{PodGroup: "gang-sample-group", MinMember: 2}),
		},
		"KAI: the PodGroup's leaf sub-groups": {
			pod: "kai-pod.yaml", objects: []string{"kai-podgroup.yaml"},
			want: training(adapters.Workload{PodGroup: "gang-sample1", MinMember: 5, SubGroup: "subgroup-a",
				SubGroups: []fairwayv1.SubGroup{{Name: "subgroup-a", MinMember: 2}, {Name: "subgroup-b", MinMember: 3}}}),
		},
		"KAI: PodGroup missing": {
			pod:   "kai-pod.yaml",
			want:  training(adapters.Workload{PodGroup: "gang-sample1", MinMember: 1, SubGroup: "subgroup-a"}),
			warns: 1,
		},
		"coscheduling: the PodGroup's minMember": {
			pod: "coscheduling-pod.yaml", objects: []string{"coscheduling-podgroup.yaml"},
			want: training(adapters.Workload{PodGroup: "gang-pg1", MinMember: 3}),
		},
		"coscheduling: CRD missing": {
			pod:   "coscheduling-pod.yaml",
			want:  training(adapters.Workload{PodGroup: "gang-pg1", MinMember: 1}),
			warns: 1,
		},
		"Workload API: the gang policy's minCount": {
			pod: "workload-pod.yaml", objects: []string{"workload-podgroup.yaml"},
			want: training(adapters.Workload{PodGroup: "gang-training-worker-0", MinMember: 4}),
		},
		"Workload API not served": {
			pod:   "workload-pod.yaml",
			want:  training(adapters.Workload{PodGroup: "gang-training-worker-0", MinMember: 1}),
			warns: 1,
		},
		"indexed Job with fairway.dev/gang: parallelism": {
			pod: "indexed-job-pod.yaml", objects: []string{"indexed-job.yaml"},
			want: training(adapters.Workload{PodGroup: "job-sample-job", MinMember: 3, Recreatable: adapters.Bool(false)}),
		},
		"indexed Job not in the cache yet": {
			pod:   "indexed-job-pod.yaml",
			want:  training(adapters.Workload{PodGroup: "job-sample-job", MinMember: 1}),
			warns: 1,
		},
	}
	a := usergang.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			reader := adaptertest.NewReader()
			for _, f := range tc.objects {
				for _, o := range adaptertest.LoadObjects(t, filepath.Join("testdata", f)) {
					reader.Add(o)
				}
			}
			if !a.Recognize(pod) {
				t.Fatalf("Recognize = false, want true")
			}
			got, err := a.Describe(context.Background(), pod, reader)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != tc.warns {
				t.Errorf("warnings = %q, want %d", got.Warnings, tc.warns)
			}
		})
	}
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
