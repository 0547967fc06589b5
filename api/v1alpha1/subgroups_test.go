package v1alpha1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSubGroupsRoundTrip(t *testing.T) {
	subs := []SubGroup{{Name: "head", MinMember: 1}, {Name: "gpu-workers", MinMember: 6}, {Name: "cpu.small_1", MinMember: 100000}}
	v := FormatSubGroups(subs)
	if v != "head=1,gpu-workers=6,cpu.small_1=100000" {
		t.Fatalf("FormatSubGroups = %q", v)
	}
	got, err := ParseSubGroups(v)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(subs, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if got, err := ParseSubGroups(" "); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
}

func TestParseSubGroupsRefuses(t *testing.T) {
	for v, want := range map[string]string{
		"head":                             "is not name=minimum",
		"head=0":                           "must be an integer from 1 to 100000",
		"head=100001":                      "must be an integer from 1 to 100000",
		"head=x":                           "must be an integer",
		"=1":                               "non-empty label value",
		"a b=1":                            "non-empty label value",
		"head=1,head=2":                    "appears twice",
		strings.Repeat("a=1,", 32) + "b=1": "at most 32",
	} {
		_, err := ParseSubGroups(v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSubGroups(%q) = %v, want an error with %q", v, err, want)
		}
	}
}
