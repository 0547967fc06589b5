package adapters_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fairway-sched/fairway/adapters"
)

func TestGroupName(t *testing.T) {
	cases := map[string]struct {
		prefix string
		parts  []string
		want   string // exact, or "" to only check validity and uniqueness
	}{
		"clean name stays readable":                  {prefix: "ray", parts: []string{"rc-gpu"}, want: "ray-rc-gpu"},
		"upper case and dots are cleaned and hashed": {prefix: "nb", parts: []string{"Jupyter.Alice"}},
		"long names are cut and hashed":              {prefix: "wf", parts: []string{strings.Repeat("very-long-workflow-name-", 5), "0011aabb"}},
		"empty part":                                 {prefix: "pod", parts: []string{""}},
	}
	seen := map[string]string{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := adapters.GroupName(tc.prefix, tc.parts...)
			if tc.want != "" && got != tc.want {
				t.Errorf("GroupName = %q, want %q", got, tc.want)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("GroupName = %q is not a DNS-1123 label: %v", got, errs)
			}
			if other, dup := seen[got]; dup {
				t.Errorf("GroupName = %q for both %q and %q", got, name, other)
			}
			seen[got] = name
		})
	}
	if a, b := adapters.GroupName("nb", "a.b"), adapters.GroupName("nb", "a-b"); a == b {
		t.Errorf("names that differ only in cleaned characters collide: %q", a)
	}
}

func TestIgnoresDisruption(t *testing.T) {
	rule := func(action, status string) map[string]any {
		cond := map[string]any{"type": "DisruptionTarget"}
		if status != "" {
			cond["status"] = status
		}
		return map[string]any{"podFailurePolicy": map[string]any{"rules": []any{
			map[string]any{"action": action, "onPodConditions": []any{cond}},
		}}}
	}
	cases := []struct {
		name string
		spec map[string]any
		want bool
	}{
		{name: "no policy", spec: map[string]any{"backoffLimit": int64(6)}},
		{name: "Ignore, status defaulted to True", spec: rule("Ignore", ""), want: true},
		{name: "Ignore, status True", spec: rule("Ignore", "True"), want: true},
		{name: "Ignore, status False", spec: rule("Ignore", "False")},
		{name: "Count", spec: rule("Count", "")},
		{name: "FailJob", spec: rule("FailJob", "")},
	}
	for _, c := range cases {
		if got := adapters.IgnoresDisruption(c.spec); got != c.want {
			t.Errorf("%s: IgnoresDisruption = %v, want %v", c.name, got, c.want)
		}
	}
}
