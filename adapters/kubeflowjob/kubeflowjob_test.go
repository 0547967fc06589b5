package kubeflowjob_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jaxjob"
	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
	"github.com/fairway-sched/fairway/adapters/mpijob"
	"github.com/fairway-sched/fairway/adapters/paddlejob"
	"github.com/fairway-sched/fairway/adapters/pytorchjob"
	"github.com/fairway-sched/fairway/adapters/tfjob"
	"github.com/fairway-sched/fairway/adapters/xgboostjob"
)

// The operator's kinds share their label keys: each kind's pods are recognised by that kind's
// adapter only, by the operator-name label, or by the controller owner when the label is gone.
func TestRecognizeOnlyOwnKind(t *testing.T) {
	family := []*kubeflowjob.Adapter{pytorchjob.New(), mpijob.New(), tfjob.New(), xgboostjob.New(), paddlejob.New(), jaxjob.New()}
	fixtures := map[string]string{
		"../pytorchjob/testdata/worker.yaml": pytorchjob.Name,
		"../mpijob/testdata/launcher.yaml":   mpijob.Name,
		"../mpijob/testdata/worker.yaml":     mpijob.Name,
		"../tfjob/testdata/ps.yaml":          tfjob.Name,
		"../xgboostjob/testdata/worker.yaml": xgboostjob.Name,
		"../paddlejob/testdata/worker.yaml":  paddlejob.Name,
		"../jaxjob/testdata/worker.yaml":     jaxjob.Name,
	}
	for path, want := range fixtures {
		pod := adaptertest.LoadPod(t, path)
		noLabel := pod.DeepCopy()
		delete(noLabel.Labels, kubeflowjob.OperatorNameLabel)
		for _, p := range []*corev1.Pod{pod, noLabel} {
			for _, a := range family {
				if got := a.Recognize(p); got != (a.Name() == want) {
					t.Errorf("%s (operator-name %q): %s.Recognize = %v", path, p.Labels[kubeflowjob.OperatorNameLabel], a.Name(), got)
				}
			}
		}
	}
}

// A pod that carries the job-name label but neither the operator's name nor a job owner (a
// user's copy of the label) is no one's.
func TestRecognizeLookAlike(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "copy", Labels: map[string]string{kubeflowjob.JobNameLabel: "ddp"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ddp", Controller: new(true)}}}}
	for _, a := range []*kubeflowjob.Adapter{pytorchjob.New(), mpijob.New(), tfjob.New()} {
		if a.Recognize(pod) {
			t.Errorf("%s.Recognize(look-alike) = true", a.Name())
		}
	}
}
