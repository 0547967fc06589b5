package console

import "testing"

// TestCount: the pages count in words, "1 pod waits", never "1 pods wait", for every integer
// type the views hold.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    any
		want string
	}{{1, "1 pod waits"}, {int32(1), "1 pod waits"}, {int64(3), "3 pods wait"}, {0, "0 pods wait"}} {
		if got, err := count(tc.n, "pod waits", "pods wait"); err != nil || got != tc.want {
			t.Errorf("count(%v) = %q, %v; want %q", tc.n, got, err, tc.want)
		}
	}
	if _, err := count("1", "pod", "pods"); err == nil {
		t.Error("count of a string: no error")
	}
}
