package v1alpha1

import "testing"

func TestWidestAdmitPolicy(t *testing.T) {
	for _, tc := range []struct {
		in   []AdmitPolicy
		want AdmitPolicy
	}{
		{nil, AdmitFrameworks},
		{[]AdmitPolicy{""}, AdmitFrameworks},
		{[]AdmitPolicy{"bogus"}, AdmitFrameworks},
		{[]AdmitPolicy{AdmitGPU}, AdmitGPU},
		{[]AdmitPolicy{AdmitGPU, AdmitGPU}, AdmitGPU},
		{[]AdmitPolicy{AdmitGPU, ""}, AdmitFrameworks},
		{[]AdmitPolicy{AdmitFrameworks, AdmitAll, AdmitGPU}, AdmitAll},
	} {
		if got := Widest(tc.in...); got != tc.want {
			t.Errorf("Widest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
