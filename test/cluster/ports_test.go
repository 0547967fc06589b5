package cluster

import "testing"

// TestFreePortsNeverRepeat: ports come from below the kernel's ephemeral range, and one process
// never gets the same port twice (parallel e2e tests share the process).
func TestFreePortsNeverRepeat(t *testing.T) {
	seen := map[int]bool{}
	high := ephemeralLow()
	for range 50 {
		ps, err := FreePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] || p < portFloor || p >= high {
				t.Fatalf("port %d: handed out before %v, or outside [%d, %d)", p, seen[p], portFloor, high)
			}
			seen[p] = true
		}
	}
}
