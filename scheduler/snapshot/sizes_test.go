package snapshot

import (
	"testing"
	"unsafe"
)

// TestPerPodStructsFitTheirSizeClass keeps a Task and a Gang (one each per pod for lone pods)
// within Go's 512-byte allocation size class: past it, every one takes 576 bytes, and a
// snapshot of 140,000 pods 17 MB more (the scratch benchmarks' bytes/op rose 8 to 15% when a
// field pushed them over). A field that must be added goes behind a pointer when few pods
// have it (Task.swap), or where padding was (Gang.runMin).
func TestPerPodStructsFitTheirSizeClass(t *testing.T) {
	const class = 512
	if n := unsafe.Sizeof(Task{}); n > class {
		t.Errorf("Task is %d bytes, over the %d-byte size class", n, class)
	}
	if n := unsafe.Sizeof(Gang{}); n > class {
		t.Errorf("Gang is %d bytes, over the %d-byte size class", n, class)
	}
}
