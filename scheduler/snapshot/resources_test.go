package snapshot

import "testing"

func TestSharedMilli(t *testing.T) {
	r := Request{GPUMemoryMiB: 20000}
	if got := r.SharedMilli(80000); got != 250 {
		t.Errorf("20000 of 80000 MiB = %d milli, want 250", got)
	}
	if got := r.SharedMilli(30000); got != 667 {
		t.Errorf("20000 of 30000 MiB = %d milli, want 667 (rounded up)", got)
	}
	if got := r.SharedMilli(0); got != -1 {
		t.Errorf("unknown memory = %d, want -1", got)
	}
	f := Request{FractionMilli: 250}
	if got := f.SharedMemMiB(81920); got != 20480 {
		t.Errorf("0.25 of 81920 MiB = %d, want 20480", got)
	}
}

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		d    int
		v    int64
		want string
	}{
		{DimGPU, 2000, "2"}, {DimGPU, 2500, "2.5"}, {DimGPU, 333, "0.333"},
		{DimCPU, 1500, "1.5"}, {DimMemory, 8 << 30, "8Gi"}, {DimMemory, 512 << 20, "512Mi"},
	} {
		if got := FormatAmount(tc.d, tc.v); got != tc.want {
			t.Errorf("FormatAmount(%d, %d) = %q, want %q", tc.d, tc.v, got, tc.want)
		}
	}
}
