package plainpod_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/plainpod"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		meta metav1.ObjectMeta
		want adapters.Workload
	}{
		"named bare pod": {
			meta: metav1.ObjectMeta{Name: "debug"},
			want: adapters.Workload{Kind: adapters.KindPod, PodGroup: "pod-debug", MinMember: 1},
		},
		"generateName only: the webhook names the gang": {
			meta: metav1.ObjectMeta{GenerateName: "web-7d9f-"},
			want: adapters.Workload{Kind: adapters.KindPod, MinMember: 1},
		},
		"DaemonSet pod is left alone": {
			meta: metav1.ObjectMeta{GenerateName: "agent-", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}},
			want: adapters.Workload{Ignore: "DaemonSet pod"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := plainpod.New().Describe(context.Background(), &corev1.Pod{ObjectMeta: tc.meta}, nil)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

// A Job's pod comes back after an eviction only when the Job's podFailurePolicy ignores
// DisruptionTarget; a Job that cannot be read leaves the owner-kind default (nil).
func TestDescribeJobPod(t *testing.T) {
	job := func(rules []any) *unstructured.Unstructured {
		spec := map[string]any{"backoffLimit": int64(6)}
		if rules != nil {
			spec["podFailurePolicy"] = map[string]any{"rules": rules}
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "train", "namespace": "team-a"}, "spec": spec,
		}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "train-", Namespace: "team-a", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "batch/v1", Kind: "Job", Name: "train", Controller: ptr.To(true)}}}}
	ignore := []any{map[string]any{"action": "Ignore", "onPodConditions": []any{map[string]any{"type": "DisruptionTarget"}}}}
	cases := []struct {
		name   string
		reader *adaptertest.Reader
		want   *bool
	}{
		{name: "podFailurePolicy ignores DisruptionTarget", reader: adaptertest.NewReader(job(ignore)), want: adapters.Bool(true)},
		{name: "no podFailurePolicy: an eviction burns backoffLimit", reader: adaptertest.NewReader(job(nil)), want: adapters.Bool(false)},
		{name: "Job not readable", reader: adaptertest.NewReader()},
	}
	for _, c := range cases {
		got, err := plainpod.New().Describe(context.Background(), pod, c.reader)
		if err != nil {
			t.Fatalf("%s: Describe: %v", c.name, err)
		}
		if diff := cmp.Diff(c.want, got.Recreatable); diff != "" {
			t.Errorf("%s: Recreatable (-want +got):\n%s", c.name, diff)
		}
	}
}
