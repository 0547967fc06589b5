package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/fairway-sched/fairway/test/cluster"
)

var (
	// yamlBlock is a fenced YAML block of a Markdown page.
	yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")
	// wholeObject tells a block that shows an object from a fragment of one.
	wholeObject = regexp.MustCompile(`(?m)^apiVersion:`)
)

// TestDocsYAMLDecodes: the whole objects the feature guides under docs/ show (blocks with an
// apiVersion) decode strictly into their types, as the examples do, so that a renamed or
// misspelt field in the guide fails here rather than in a user's kubectl apply.
func TestDocsYAMLDecodes(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scheme := strictScheme(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages under docs/")
	}
	objects := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range yamlBlock.FindAllSubmatch(data, -1) {
			if !wholeObject.Match(m[1]) {
				continue // a fragment of a spec, not an object
			}
			docs, err := splitYAML(m[1])
			if err != nil {
				t.Fatalf("%s block %d: %v", filepath.Base(page), i+1, err)
			}
			for j, doc := range docs {
				objects++
				if err := checkObject(scheme, doc); err != nil {
					t.Errorf("%s block %d, document %d: %v", filepath.Base(page), i+1, j+1, err)
				}
			}
		}
	}
	if objects == 0 {
		t.Error("no object in any YAML block under docs/")
	}
}
