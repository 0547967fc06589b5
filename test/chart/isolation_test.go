package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
)

// TestIsolationDocsMatchTheChart keeps docs/isolation.md, the chart's default and the examples'
// promises in agreement: the page states the chart's default of agent.mps.enabled (the line
// "Chart default: `agent.mps.enabled: <bool>`."), which must be values.yaml's; it describes every
// sharing mode `fairway nodes` can show; and while MPS is off by default, no JupyterHub profile
// promises an amount of GPU memory without saying it is a hard limit only where the node runs
// MPS.
func TestIsolationDocsMatchTheChart(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "isolation.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^Chart default: `agent\\.mps\\.enabled: (true|false)`\\.$").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/isolation.md does not state the chart's default (a line \"Chart default: `agent.mps.enabled: <bool>`.\")")
	}
	documented, _ := strconv.ParseBool(string(m[1]))

	raw, err := os.ReadFile(filepath.Join(root, "charts", "fairway", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Agent struct {
			MPS struct {
				Enabled *bool `json:"enabled"`
			} `json:"mps"`
		} `json:"agent"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	if values.Agent.MPS.Enabled == nil {
		t.Fatal("values.yaml has no agent.mps.enabled")
	}
	if *values.Agent.MPS.Enabled != documented {
		t.Errorf("docs/isolation.md says the chart's default is agent.mps.enabled: %v; values.yaml has %v", documented, *values.Agent.MPS.Enabled)
	}
	for _, mode := range []fairwayv1.GPUSharingMode{fairwayv1.GPUSharingSoft, fairwayv1.GPUSharingMPS, fairwayv1.GPUSharingMIG} {
		if !strings.Contains(string(doc), "**"+string(mode)+"**") {
			t.Errorf("docs/isolation.md does not describe the sharing mode %q (as **%s** in its table)", mode, mode)
		}
	}

	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	z2jh, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	memory := regexp.MustCompile(`\d+ ?(GB|GiB|MiB)`)
	for _, p := range z2jh.Singleuser.ProfileList {
		if memory.MatchString(p.Description) && !documented && !strings.Contains(p.Description, "only where the node runs MPS") {
			t.Errorf("examples/jupyterhub profile %q promises %q, but the chart runs no MPS by default: say the memory is a hard limit only where the node runs MPS",
				p.Slug, memory.FindString(p.Description))
		}
	}
}
