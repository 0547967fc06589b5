package kfp_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kfp"
)

// KFP compiles a task's retry policy into a retryStrategy without retryPolicy (Argo's OnFailure),
// which does not retry a deleted pod: on the KFP compiler's own output, an executor with
// retries is still not recreatable, and a workflow-wide OnError does not override the
// template's own strategy (Argo reads the template's first).
func TestRecreatableOnCompiledWorkflow(t *testing.T) {
	objs := adaptertest.LoadObjects(t, filepath.Join("testdata", "realworld", "pipeline_with_retry.yaml"))
	if len(objs) != 1 || objs[0].GetKind() != "Workflow" {
		t.Fatalf("want one Workflow in the compiled pipeline, got %d objects", len(objs))
	}
	wf := objs[0]
	pod := adaptertest.LoadPod(t, filepath.Join("testdata", "executor-2.17.yaml"))
	wf.SetName(pod.Labels[argo.WorkflowLabel])
	wf.SetNamespace(pod.Namespace)

	templates, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	var impl map[string]any
	for _, t := range templates {
		if m, ok := t.(map[string]any); ok && m["name"] == "retry-system-container-impl" {
			impl = m
		}
	}
	if impl == nil {
		t.Fatal("the compiled workflow has no retry-system-container-impl template")
	}
	if _, ok := impl["retryStrategy"]; !ok {
		t.Fatal("the executor template of a task with retries has no retryStrategy")
	}
	// Argo puts the template on the pod with its parameters resolved: the task's
	// maxRetryCount (3) for the limit.
	resolved := runtimeCopy(impl)
	_ = unstructured.SetNestedField(resolved, "3", "retryStrategy", "limit")
	raw, err := json.Marshal(resolved)
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.InitContainers = append([]corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: argo.TemplateEnv, Value: string(raw)}}}}, pod.Spec.InitContainers...)

	check := func(name string, reader *adaptertest.Reader, want bool) {
		t.Helper()
		got, err := kfp.New().Describe(context.Background(), pod, reader)
		if err != nil {
			t.Fatalf("%s: Describe: %v", name, err)
		}
		if got.Recreatable == nil || *got.Recreatable != want || len(got.Warnings) > 0 {
			t.Errorf("%s: Recreatable = %v (want %v), warnings %q", name, got.Recreatable, want, got.Warnings)
		}
	}
	check("compiled retry policy (OnFailure)", adaptertest.NewReader(wf), false)
	wide := wf.DeepCopy()
	_ = unstructured.SetNestedMap(wide.Object, map[string]any{"retryPolicy": "OnError"}, "spec", "retryStrategy")
	check("workflow-wide OnError under the template's own strategy", adaptertest.NewReader(wide), false)

	// The same template asking for OnError (as a user's pipeline can through the Argo
	// workflow, not through the KFP SDK) is retried after a deletion.
	_ = unstructured.SetNestedField(resolved, "OnError", "retryStrategy", "retryPolicy")
	raw, _ = json.Marshal(resolved)
	pod.Spec.InitContainers[0].Env[0].Value = string(raw)
	check("template with retryPolicy OnError", adaptertest.NewReader(wf), true)
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
