package cache

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fairway-sched/fairway/scheduler/testutil"
)

// A pod's budgets are those whose selector matches it (an empty policy/v1 selector matches every
// pod of the namespace, as the API server's eviction reads it), less those that already count it
// as disrupted.
func TestPodBudgets(t *testing.T) {
	inf, err := New(fake.NewClientset(), crfake.NewClientBuilder().Build(), NewQueue(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	pdb := func(name string, sel map[string]string, disrupted ...string) *policyv1.PodDisruptionBudget {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: sel}}}
		for _, d := range disrupted {
			if b.Status.DisruptedPods == nil {
				b.Status.DisruptedPods = map[string]metav1.Time{}
			}
			b.Status.DisruptedPods[d] = metav1.Now()
		}
		return TrimBudget(b)
	}
	for _, b := range []*policyv1.PodDisruptionBudget{
		pdb("web-pdb", map[string]string{"app": "web"}),
		pdb("everything", map[string]string{}),
		pdb("other", map[string]string{"app": "db"}),
		pdb("counted", map[string]string{"app": "web"}, "web-1"),
	} {
		if err := inf.Budgets.GetIndexer().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	names := func(p string) []string {
		var out []string
		for _, b := range inf.PodBudgets(testutil.MakePod("serve", p).Queue("serve").Label("app", "web").Obj()) {
			out = append(out, b.Name)
		}
		return out
	}
	if got := strings.Join(names("web-0"), ","); got != "counted,everything,web-pdb" {
		t.Errorf("web-0's budgets %v, want counted,everything,web-pdb", got)
	}
	if got := strings.Join(names("web-1"), ","); got != "everything,web-pdb" {
		t.Errorf("web-1 (disrupted already for counted): %v, want everything,web-pdb", got)
	}
}
