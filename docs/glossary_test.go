// Package docs_test checks the prose of the repository against docs/glossary.md: one word per
// concept, and no retired word coming back.
package docs_test

import (
	"bufio"
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// retired are the words glossary.md retires ("reserve" named three concepts: GPU reservation
// pods, the engine's holds and the taint that projects them), case-insensitive. Only a Markdown
// section whose heading says "retired" (the glossary's table, the upgrade note in
// coexistence.md) may use them, to explain them.
var retired = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\breserved nodes?\b`),
	regexp.MustCompile(`(?i)\bnode reservations?\b`),
	regexp.MustCompile(`(?i)\breserve taints?\b`),
	regexp.MustCompile(`(?i)\breservation taints?\b`),
	regexp.MustCompile(`(?i)\bfairway\.dev/reserved\b`),
	regexp.MustCompile(`(?i)\bStageReserved\b`),
	regexp.MustCompile(`(?i)\bstage reservations?\b`),
}

// terms are the words glossary.md must define (each a "### " heading naming it).
var terms = []string{
	"queue", "department", "project", "guarantee", "limit", "over-quota", "borrowing", "fair share",
	"usage", "priority", "preemptible", "reclaim", "preemption", "consolidation", "move", "eviction",
	"eviction budget", "nomination", "gang", "sub-group", "stale gang", "starvation", "slot", "share",
	"reservation", "loan", "idle", "interactive", "hold", "held node", "hold taint", "run admission",
	"held run", "stage", "stage hold", "stand-in", "reason", "reservedFor",
}

var heading = regexp.MustCompile(`^(#{1,6}) (.*)$`)

// repoRoot is the module root: the tests of this package run in docs/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod above docs/: %v", err)
	}
	return root
}

// retiredIn returns "line: word" for each retired word in a Markdown page outside a section
// whose heading says "retired". Fenced code blocks count: a retired key in an example is what a
// reader copies.
func retiredIn(md []byte) []string {
	var out []string
	allowLevel := 0 // the level of the "retired" heading we are under; 0 when none
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if m := heading.FindStringSubmatch(line); m != nil && !fenced {
			level := len(m[1])
			if allowLevel > 0 && level <= allowLevel {
				allowLevel = 0
			}
			if allowLevel == 0 && strings.Contains(strings.ToLower(m[2]), "retired") {
				allowLevel = level
				continue
			}
		}
		if allowLevel > 0 {
			continue
		}
		for _, re := range retired {
			if w := re.FindString(line); w != "" {
				out = append(out, strconv.Itoa(n)+": "+w)
			}
		}
	}
	return out
}

// skipDir are directories whose files are not the repository's prose: build outputs, test data
// (real third-party manifests), tools.
func skipDir(name string) bool {
	return name == ".git" || name == "testdata" || name == "bin" || name == "_output" || name == "node_modules" || name == "vendor"
}

// TestNoRetiredWords: no Markdown page of the repository (docs/, README.md, the chart's README,
// every other README) and no Go package doc comment uses a retired word, except where the
// glossary and the upgrade note explain it.
func TestNoRetiredWords(t *testing.T) {
	root := repoRoot(t)
	pages, docs := 0, 0
	pkgDocs := map[string][]string{} // directory -> doc comments of its files
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case strings.HasSuffix(path, ".md"):
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pages++
			for _, hit := range retiredIn(data) {
				t.Errorf("%s:%s: retired word; see docs/glossary.md#retired-words", rel, hit)
			}
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			if f.Doc != nil {
				pkgDocs[filepath.Dir(rel)] = append(pkgDocs[filepath.Dir(rel)], f.Doc.Text())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, texts := range pkgDocs {
		docs++
		for _, text := range texts {
			for _, re := range retired {
				if w := re.FindString(text); w != "" {
					t.Errorf("package doc of %s: retired word %q; see docs/glossary.md#retired-words", dir, w)
				}
			}
		}
	}
	// The walk must have seen the pages and packages named in the glossary's promise.
	for _, must := range []string{"README.md", "docs/coexistence.md", "charts/fairway/README.md"} {
		if _, err := os.Stat(filepath.Join(root, must)); err != nil {
			t.Errorf("%s: %v", must, err)
		}
	}
	if pages < 20 || docs < 50 {
		t.Errorf("read %d Markdown pages and %d package docs; the walk missed the repository", pages, docs)
	}
}

// TestRetiredMatcher: the matcher finds each retired word, also in a code block, and lets a
// section headed "retired" explain them until the next heading of its level.
func TestRetiredMatcher(t *testing.T) {
	page := "# Page\n\nA reserved node, a Node Reservation, the reserve taint.\n\n```yaml\n- key: fairway.dev/reserved\n```\n" +
		"\n## Retired words\n\nfairway.dev/reserved was the key; StageReserved the reason.\n\n### detail\n\nstage reservation\n" +
		"\n## Next\n\nthe reservation taint; StageReserved\n"
	got := retiredIn([]byte(page))
	want := []string{"3: reserved node", "3: Node Reservation", "3: reserve taint", "6: fairway.dev/reserved",
		"19: reservation taint", "19: StageReserved"}
	if !slices.Equal(got, want) {
		t.Errorf("retiredIn = %q, want %q", got, want)
	}
	for _, ok := range []string{"a GPU reservation pod", "status.reservedFor", "fairway.dev/reservation=true", "the hold taint fairway.dev/held", "reserveClaims"} {
		if hits := retiredIn([]byte(ok)); len(hits) > 0 {
			t.Errorf("%q reported as retired: %q", ok, hits)
		}
	}
}

// TestGlossaryDefinesTerms: the glossary has an entry for each of fairway's words, each entry
// names its owner (a package, type or field, in backticks), and its "Retired words" section
// explains every retired word.
func TestGlossaryDefinesTerms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "glossary.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{} // each "### " heading's name -> the entry's text
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			for n := range strings.SplitSeq(name, ",") {
				entries[strings.TrimSpace(strings.TrimSuffix(n, " (Kubernetes' word)"))] = body.String()
			}
		}
		name = ""
		body.Reset()
	}
	var retiredSection strings.Builder
	inRetired := false
	for line := range strings.SplitSeq(string(data), "\n") {
		m := heading.FindStringSubmatch(line)
		switch {
		case m != nil && len(m[1]) == 3:
			flush()
			name = m[2]
		case m != nil:
			flush()
			inRetired = strings.Contains(strings.ToLower(m[2]), "retired")
		case inRetired:
			retiredSection.WriteString(line + "\n")
		default:
			body.WriteString(line + "\n")
		}
	}
	flush()
	for _, term := range terms {
		text, ok := entries[term]
		switch {
		case !ok:
			t.Errorf("glossary.md has no entry %q (a \"### %s\" heading)", term, term)
		case !strings.Contains(text, "`"):
			t.Errorf("glossary.md entry %q names no owner (a package, type or field in backticks)", term)
		}
	}
	for _, re := range retired {
		if !re.MatchString(retiredSection.String()) {
			t.Errorf("glossary.md's retired words section does not explain %s", re)
		}
	}
}
