package examples_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/examples"
)

// TestJupyterHubProfilesWithinQueuePolicy keeps the JupyterHub example's profile list in step
// with the notebook policy of examples/queues (docs/policies.md): every profile, rendered as
// KubeSpawner makes its pod, asks for no more GPU than the notebooks queue's policy allows one
// notebook, and names no GPU type it closes. A profile the policy would refuse fails here
// before a user starting it is refused.
func TestJupyterHubProfilesWithinQueuePolicy(t *testing.T) {
	objs, err := examples.Objects("queues", "queues.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]*fairwayv1.QueueSpec{}
	for _, o := range objs {
		if o.GetKind() != "Queue" {
			continue
		}
		var q fairwayv1.Queue
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &q); err != nil {
			t.Fatal(err)
		}
		specs[q.Name] = &q.Spec
	}
	chain, err := fairwayv1.PolicyChain("notebooks", func(name string) (*fairwayv1.QueueSpec, error) { return specs[name], nil })
	if err != nil {
		t.Fatal(err)
	}
	pol := fairwayv1.ResolvePolicy(fairwayv1.KindNotebook, chain)
	if pol.MaxGPUsPerPod == nil || pol.DefaultGPU == nil || pol.GPUTypes == nil {
		t.Fatalf("queue notebooks' policy for notebooks %+v: want a cap, a default and GPU types, which this test checks the profiles against", pol)
	}
	v := loadValues(t)
	for _, p := range v.Singleuser.ProfileList {
		pod, err := examples.RenderNotebook(v, examples.NotebookOptions{Release: "jhub", Namespace: "notebooks", User: "alice", Profile: p.Slug})
		if err != nil {
			t.Fatal(err)
		}
		var asks resource.Quantity
		if f, ok := pod.Annotations[fairwayv1.GPUFractionAnnotation]; ok {
			asks = resource.MustParse(f)
		}
		for _, c := range pod.Spec.Containers {
			if n, ok := c.Resources.Limits[fairwayv1.ResourceGPU]; ok {
				asks.Add(n)
			}
		}
		if asks.Cmp(*pol.MaxGPUsPerPod) > 0 {
			t.Errorf("profile %s asks for %s GPU; %s allows at most %s", p.Slug, asks.String(), pol.Describe(fairwayv1.RuleMaxGPUsPerPod), pol.MaxGPUsPerPod.String())
		}
		if typ, ok := pod.Spec.NodeSelector[fairwayv1.GPUTypeLabel]; ok && !pol.AllowsGPUType(typ) {
			t.Errorf("profile %s selects GPU type %s; %s allows %s", p.Slug, typ, pol.Describe(fairwayv1.RuleGPUTypes), pol.GPUTypesText())
		}
	}
}
