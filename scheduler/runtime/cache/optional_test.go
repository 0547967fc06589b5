package cache

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// countingMapper counts the look-ups that reach the wrapped mapper (in the scheduler,
// controller-runtime's lazy mapper, which reloads the whole discovery on each miss).
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// A kind whose group version is not served is answered NoKindMatch by the probe alone; once
// it is served, the look-up goes to the mapper and finds it.
func TestProbeServedAsksTheMapperOnlyForServedKinds(t *testing.T) {
	wf := schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Workflow"}
	inner := meta.NewDefaultRESTMapper(nil)
	inner.Add(wf, meta.RESTScopeNamespace)
	counting := &countingMapper{RESTMapper: inner}
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	m := ProbeServed(counting, dc)

	for range 5 {
		_, err := m.RESTMapping(wf.GroupKind(), wf.Version)
		if !meta.IsNoMatchError(err) {
			t.Fatalf("kind not served: got %v, want a NoKindMatch error", err)
		}
	}
	if counting.calls != 0 {
		t.Fatalf("the mapper was asked %d times for a kind that is not served, want 0", counting.calls)
	}

	dc.Resources = []*metav1.APIResourceList{{GroupVersion: wf.GroupVersion().String(),
		APIResources: []metav1.APIResource{{Name: "workflows", Kind: "Workflow", Namespaced: true}}}}
	got, err := m.RESTMapping(wf.GroupKind(), wf.Version)
	if err != nil {
		t.Fatalf("kind served: %v", err)
	}
	if got.Resource.Resource != "workflows" || counting.calls != 1 {
		t.Fatalf("got %v after %d mapper calls, want workflows after 1", got.Resource, counting.calls)
	}
}
