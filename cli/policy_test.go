package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// TestPolicyView: a project inherits its department's rules and overrides one, and the table
// shows both with the defaults of a policy (borrowing Allowed, CPU pods off GPU nodes).
func TestPolicyView(t *testing.T) {
	dept := &fairwayv1.Queue{}
	dept.Name = "product"
	dept.Spec.Policy = &fairwayv1.QueuePolicy{
		PolicyRules: fairwayv1.PolicyRules{GPUTypes: []string{"T4", "L4"}},
		Workloads: []fairwayv1.WorkloadPolicy{{Kind: fairwayv1.KindNotebook,
			PolicyRules: fairwayv1.PolicyRules{DefaultGPU: &fairwayv1.DefaultGPU{Fraction: ptr.To("0.25")}}}},
	}
	proj := &fairwayv1.Queue{}
	proj.Name, proj.Spec.Parent = "notebooks", "product"
	proj.Spec.Policy = &fairwayv1.QueuePolicy{Workloads: []fairwayv1.WorkloadPolicy{{Kind: fairwayv1.KindNotebook,
		PolicyRules: fairwayv1.PolicyRules{GPUTypes: []string{"L4"}}}}}
	free := &fairwayv1.Queue{}
	free.Name = "free"
	byName := map[string]*fairwayv1.Queue{"product": dept, "notebooks": proj, "free": free}

	v := BuildPolicy("notebooks", byName)
	nb := v.Kinds[0]
	if nb.Kind != fairwayv1.KindNotebook || strings.Join(nb.GPUTypes, ",") != "L4" || nb.DefaultGPU != "0.25" ||
		nb.From[fairwayv1.RuleGPUTypes] != "notebooks" || nb.From[fairwayv1.RuleDefaultGPU] != "product" {
		t.Errorf("notebook rules = %+v, want L4 from notebooks and the default 0.25 from product", nb)
	}
	var out bytes.Buffer
	if err := PrintPolicy(&out, PolicyList{Items: []PolicyView{v, BuildPolicy("free", byName)}}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(out.String(), "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	for _, want := range []string{"Queue notebooks", "notebook L4 0.25 - Allowed no fairway-interactive non-preemptible", "training L4,T4 - - Allowed no fairway-training by priority",
		"inference L4,T4 - - Allowed no fairway-inference non-preemptible",
		"Queue free has no policy: every GPU type is open to every kind of work, with no default or cap."} {
		if !slices.Contains(rows, want) {
			t.Errorf("output lacks the row %q:\n%s", want, out.String())
		}
	}
}
