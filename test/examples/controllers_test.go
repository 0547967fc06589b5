package examples_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/kubeflownotebook"
	"github.com/fairway-sched/fairway/adapters/lws"
	"github.com/fairway-sched/fairway/adapters/mlflow"
	"github.com/fairway-sched/fairway/test/examples"
)

// podOf is the pod a StatefulSet or Job controller makes from a template, with its owner.
func podOf(tmpl corev1.PodTemplateSpec, name, namespace, ownerKind, ownerAPI, owner string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: ownerAPI, Kind: ownerKind, Name: owner, Controller: new(bool)}}}, Spec: tmpl.Spec}
}

func controller(p *corev1.Pod) *corev1.Pod { *p.OwnerReferences[0].Controller = true; return p }

// TestPlayedControllersMakeRecognisedPods: the objects the played controllers build give pods
// their adapters recognise, as the adapters' fixtures (taken from the projects) are.
func TestPlayedControllersMakeRecognisedPods(t *testing.T) {
	nb, err := examples.Object("kubeflow-notebooks", "notebook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sts, err := examples.NotebookStatefulSet(nb)
	if err != nil {
		t.Fatal(err)
	}
	if p := controller(podOf(sts.Spec.Template, sts.Name+"-0", sts.Namespace, "StatefulSet", "apps/v1", sts.Name)); !kubeflownotebook.New().Recognize(p) {
		t.Errorf("the notebook StatefulSet's pod is not a Kubeflow notebook: %v", p.Labels)
	}

	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.9.1"}}}}
	leader, workers := examples.LeaderWorkerSetGroup("vllm", "team-a", 4, 0, tmpl)
	lp := controller(podOf(leader.Spec.Template, "vllm-0", "team-a", "StatefulSet", "apps/v1", leader.Name))
	wp := controller(podOf(workers.Spec.Template, "vllm-0-1", "team-a", "StatefulSet", "apps/v1", workers.Name))
	for _, p := range []*corev1.Pod{lp, wp} {
		w, err := lws.New().Describe(context.Background(), p, adaptertest.NewReader())
		if err != nil || !lws.New().Recognize(p) || w.PodGroup != "lws-vllm-0" || w.MinMember != 4 {
			t.Errorf("pod %s: recognised %v, gang %s of %d (%v)", p.Name, lws.New().Recognize(p), w.PodGroup, w.MinMember, err)
		}
	}

	tpl, err := examples.Object("mlflow", "kubernetes_job_template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job, err := examples.MLflowJob(tpl, "wine", "2026-08-01-10-00-00-123456", "registry.local/wine@sha256:00", []string{"python", "train.py"}, "run1", "3", "http://mlflow:5000")
	if err != nil {
		t.Fatal(err)
	}
	if p := controller(podOf(job.Spec.Template, "", job.Namespace, "Job", "batch/v1", job.Name)); !mlflow.New().Recognize(p) {
		t.Errorf("the MLflow Job's pod is not an MLflow run: %v", p.Spec.Containers[0].Env)
	}
}
