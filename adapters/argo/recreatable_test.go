package argo_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/argo"
)

// Argo retries a deleted step pod (its node errors) only under retryPolicy Always or OnError.
func TestRetries(t *testing.T) {
	limit := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	cases := []struct {
		name string
		s    *argo.RetryStrategy
		want bool
	}{
		{name: "no retryStrategy"},
		{name: "default policy is OnFailure: errors are not retried", s: &argo.RetryStrategy{Limit: limit(intstr.FromString("3"))}},
		{name: "OnFailure", s: &argo.RetryStrategy{RetryPolicy: "OnFailure"}},
		{name: "OnTransientError: a deleted pod is not a transient error", s: &argo.RetryStrategy{RetryPolicy: "OnTransientError"}},
		{name: "OnError without limit", s: &argo.RetryStrategy{RetryPolicy: "OnError"}, want: true},
		{name: "Always, limit 2", s: &argo.RetryStrategy{RetryPolicy: "Always", Limit: limit(intstr.FromInt32(2))}, want: true},
		{name: "OnError, limit \"1\"", s: &argo.RetryStrategy{RetryPolicy: "OnError", Limit: limit(intstr.FromString("1"))}, want: true},
		{name: "limit 0 allows no retry", s: &argo.RetryStrategy{RetryPolicy: "OnError", Limit: limit(intstr.FromInt32(0))}},
		{name: "unresolved limit", s: &argo.RetryStrategy{RetryPolicy: "OnError", Limit: limit(intstr.FromString("{{inputs.parameters.n}}"))}},
		{name: "an expression may refuse", s: &argo.RetryStrategy{RetryPolicy: "Always", Expression: "lastRetry.status == 'Failed'"}},
	}
	for _, c := range cases {
		if got := argo.Retries(c.s); got != c.want {
			t.Errorf("%s: Retries = %v, want %v", c.name, got, c.want)
		}
	}
}

func withTemplate(pod *corev1.Pod, json string) *corev1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.InitContainers[0].Env = append(pod.Spec.InitContainers[0].Env, corev1.EnvVar{Name: argo.TemplateEnv, Value: json})
	return pod
}

func workflow(retry map[string]any) *unstructured.Unstructured {
	spec := map[string]any{"entrypoint": "main"}
	if retry != nil {
		spec["retryStrategy"] = retry
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"name": "train-pipeline-x7k2p", "namespace": "team-a"}, "spec": spec,
	}}
}

func TestDescribeRecreatable(t *testing.T) {
	base := adaptertest.LoadPod(t, filepath.Join("testdata", "step-gpu.yaml"))
	cases := []struct {
		name    string
		pod     *corev1.Pod
		reader  *adaptertest.Reader
		want    bool
		warning string
	}{
		{name: "template retries errors", pod: withTemplate(base, `{"name":"train","retryStrategy":{"limit":"2","retryPolicy":"OnError"}}`),
			reader: adaptertest.NewReader(), want: true},
		{name: "template retries failures only, whatever the workflow says",
			pod:    withTemplate(base, `{"name":"train","retryStrategy":{"limit":"2"}}`),
			reader: adaptertest.NewReader(workflow(map[string]any{"retryPolicy": "Always"}))},
		{name: "no retryStrategy on the template: the workflow's applies", pod: withTemplate(base, `{"name":"train"}`),
			reader: adaptertest.NewReader(workflow(map[string]any{"retryPolicy": "Always", "limit": int64(3)})), want: true},
		{name: "no retryStrategy anywhere", pod: base, reader: adaptertest.NewReader(workflow(nil))},
		{name: "workflow unreadable: not moved, and the client is told", pod: base, reader: adaptertest.NewReader(),
			warning: "will not move it"},
		{name: "malformed template", pod: withTemplate(base, `{"retryStrategy":`), reader: adaptertest.NewReader(workflow(nil)),
			warning: "is not a template"},
	}
	for _, c := range cases {
		got, err := argo.New().Describe(context.Background(), c.pod, c.reader)
		if err != nil {
			t.Fatalf("%s: Describe: %v", c.name, err)
		}
		if got.Recreatable == nil || *got.Recreatable != c.want {
			t.Errorf("%s: Recreatable = %v, want %v", c.name, got.Recreatable, c.want)
		}
		switch {
		case c.warning == "" && len(got.Warnings) > 0:
			t.Errorf("%s: unexpected warnings %q", c.name, got.Warnings)
		case c.warning != "" && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], c.warning)):
			t.Errorf("%s: warnings %q, want one containing %q", c.name, got.Warnings, c.warning)
		}
	}
}
