package jupyterhub_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jupyterhub"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		fixture    string
		recognized bool
		want       adapters.Workload
	}{
		"z2jh named server": {
			fixture: "z2jh-notebook.yaml", recognized: true,
			want: adapters.Workload{Kind: adapters.KindNotebook, PodGroup: "nb-jupyter-alice--gpu", MinMember: 1,
				PriorityClass: "fairway-interactive", GPUContainer: "notebook"},
		},
		"plain KubeSpawner default server with a sidecar": {
			fixture: "kubespawner-default.yaml", recognized: true,
			want: adapters.Workload{Kind: adapters.KindNotebook, PodGroup: "nb-jupyter-bob", MinMember: 1,
				PriorityClass: "fairway-interactive", GPUContainer: "notebook"},
		},
		"user placeholder is not a notebook": {fixture: "placeholder.yaml"},
	}
	a := jupyterhub.New()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.fixture))
			if got := a.Recognize(pod); got != tc.recognized {
				t.Fatalf("Recognize = %v, want %v", got, tc.recognized)
			}
			if !tc.recognized {
				return
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}
