package runtime

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// mpsCache remembers, per node, whether its gpu-agent runs MPS (its inventory annotation says
// so), so that the inventory's JSON is decoded once per change rather than once per fractional
// binding. It is the loop's: one goroutine, no lock.
type mpsCache map[string]mpsEntry

type mpsEntry struct {
	annotation string
	mps        bool
}

// nodeMPS reports whether n's gpu-agent runs MPS; false for a nil node.
func (c mpsCache) nodeMPS(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	ann := n.Annotations[v1alpha1.GPUInventoryAnnotation]
	if e, ok := c[n.Name]; ok && e.annotation == ann {
		return e.mps
	}
	var inv v1alpha1.GPUInventory
	mps := json.Unmarshal([]byte(ann), &inv) == nil && inv.MPS
	c[n.Name] = mpsEntry{annotation: ann, mps: mps}
	return mps
}
