package plainpod_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters"
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
