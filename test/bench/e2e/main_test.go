package main

import (
	"slices"
	"testing"
)

func TestParseSchedulers(t *testing.T) {
	for _, tc := range []struct {
		list, baseline string
		gang           int
		want           []string
		wantErr        bool
	}{
		{list: "fairway,kube-scheduler,noop-binder", want: []string{"fairway", "kube-scheduler", noopName}},
		{list: "noop, fairway,noop", want: []string{noopName, "fairway"}},
		{list: "fairway,noop", baseline: "/tmp/fw", want: []string{"fairway", baselineName, noopName}},
		{list: "noop", baseline: "/tmp/fw", want: []string{baselineName, noopName}},
		{list: "fairway,kube-scheduler,noop", gang: 8, baseline: "/tmp/fw", want: []string{"fairway", baselineName}},
		{list: "kube-scheduler", gang: 8, wantErr: true},
		{list: "volcano", wantErr: true},
		{list: "", wantErr: true},
	} {
		got, err := parseSchedulers(tc.list, tc.baseline, tc.gang)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseSchedulers(%q, %q, %d) = %v, %v; want %v (error: %v)", tc.list, tc.baseline, tc.gang, got, err, tc.want, tc.wantErr)
		}
	}
}
