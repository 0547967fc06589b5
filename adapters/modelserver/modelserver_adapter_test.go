package modelserver_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/modelserver"
)

func TestDescribe(t *testing.T) {
	cases := map[string]struct {
		server modelserver.Server
		pod    string
		want   adapters.Workload
	}{
		"Triton chart replica: by image and by its tritonserver argument": {
			server: modelserver.Triton, pod: "triton-chart.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: "triton-inference-server"},
		},
		"vLLM guide replica: vllm serve inside sh -c": {
			server: modelserver.VLLM, pod: "vllm-guide.yaml",
			want: adapters.Workload{Kind: adapters.KindInference, MinMember: 1, GPUContainer: "mistral-7b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := modelserver.New(tc.server)
			pod := adaptertest.LoadPod(t, filepath.Join("testdata", tc.pod))
			if !a.Recognize(pod) {
				t.Fatalf("Recognize(%s) = false", tc.pod)
			}
			got, err := a.Describe(context.Background(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecognizeRule covers each half of the rule: the image alone, the command alone (in an image
// of one's own), a Job running the same server (batch inference, not claimed), and the other
// server's adapter.
func TestRecognizeRule(t *testing.T) {
	base := adaptertest.LoadPod(t, filepath.Join("testdata", "vllm-guide.yaml"))
	cases := map[string]struct {
		edit func(p *metav1.ObjectMeta, image *string, command, args *[]string)
		want bool
	}{
		"image and command": {edit: func(*metav1.ObjectMeta, *string, *[]string, *[]string) {}, want: true},
		"ROCm image, no command": {edit: func(_ *metav1.ObjectMeta, i *string, c, a *[]string) {
			*i, *c, *a = "rocm/vllm:rocm6.2_mi300", nil, nil
		}, want: true},
		"own image, python -m api_server": {edit: func(_ *metav1.ObjectMeta, i *string, c, a *[]string) {
			*i, *c, *a = "registry.local/llm:7", []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"}, nil
		}, want: true},
		"own image, vllm serve as args": {edit: func(_ *metav1.ObjectMeta, i *string, c, a *[]string) {
			*i, *c, *a = "registry.local/llm:7", nil, []string{"vllm", "serve", "m"}
		}, want: true},
		"own image, another program": {edit: func(_ *metav1.ObjectMeta, i *string, c, a *[]string) {
			*i, *c, *a = "registry.local/llm:7", []string{"python", "train.py"}, nil
		}, want: false},
		"image whose tag says vllm": {edit: func(_ *metav1.ObjectMeta, i *string, c, a *[]string) {
			*i, *c, *a = "registry.local/tools:vllm", nil, nil
		}, want: false},
		"run by a Job (batch inference)": {edit: func(m *metav1.ObjectMeta, _ *string, _, _ *[]string) {
			m.OwnerReferences[0].APIVersion, m.OwnerReferences[0].Kind = "batch/v1", "Job"
		}, want: false},
	}
	a := modelserver.New(modelserver.VLLM)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := base.DeepCopy()
			c := &pod.Spec.Containers[0]
			tc.edit(&pod.ObjectMeta, &c.Image, &c.Command, &c.Args)
			if got := a.Recognize(pod); got != tc.want {
				t.Errorf("Recognize = %v, want %v", got, tc.want)
			}
		})
	}
	if modelserver.New(modelserver.Triton).Recognize(base) {
		t.Error("the Triton adapter recognises a vLLM replica")
	}
}
