package cli

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
)

// TestGPUShareCases runs the GPU-share table that gpurequest, the webhook and the scheduler's
// snapshot also run through gpuOf, which every view of the CLI reads shares with: an accepted
// input is the share the table gives, a refused one is no share, as the scheduler places none.
func TestGPUShareCases(t *testing.T) {
	for _, tc := range gpurequesttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: maps.Clone(tc.Annotations)}}
			g := gpuOf(p)
			if g.Milli != tc.Milli || g.MemoryMiB != tc.MemoryMiB {
				t.Errorf("read %d milli-GPU / %d MiB, want %d / %d", g.Milli, g.MemoryMiB, tc.Milli, tc.MemoryMiB)
			}
			if want := tc.Milli != 0 || tc.MemoryMiB != 0; g.shared() != want {
				t.Errorf("shared() = %v, want %v", g.shared(), want)
			}
		})
	}
}
