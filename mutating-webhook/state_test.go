package mutatingwebhook

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestGPUMemoryIndex(t *testing.T) {
	g := newGPUMemoryIndex()
	h := g.handler()
	node := func(name, mib string) *metav1.PartialObjectMetadata {
		n := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if mib != "" {
			n.Labels = map[string]string{"fairway.dev/gpu-memory": mib}
		}
		return n
	}
	steps := []struct {
		do   func()
		want int64
	}{
		{func() { h.OnAdd(node("cpu-0", ""), true) }, 0},
		{func() { h.OnAdd(node("l4-0", "23034"), true) }, 23034},
		{func() { h.OnAdd(node("h100-0", "81559"), true) }, 81559},
		{func() { h.OnUpdate(node("h100-0", "81559"), node("h100-0", "not-a-number")) }, 23034},
		{func() { h.OnUpdate(node("h100-0", ""), node("h100-0", "81559")) }, 81559},
		{func() { h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "h100-0", Obj: node("h100-0", "81559")}) }, 23034},
		{func() { h.OnDelete(node("l4-0", "23034")) }, 0},
	}
	for i, s := range steps {
		s.do()
		if got := g.largest(); got != s.want {
			t.Errorf("step %d: largest = %d, want %d", i, got, s.want)
		}
	}
}
