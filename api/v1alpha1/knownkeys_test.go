package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKnownKeysListEveryKey fails when a fairway.dev/ key constant of this package is in none of
// the lists of knownkeys.go: the webhook would then warn about, or refuse, pods that carry it.
func TestKnownKeysListEveryKey(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, v := range spec.Values {
				key, ok := stringConst(v)
				if !ok || key == Prefix || !strings.HasPrefix(key, Prefix) {
					continue
				}
				found++
				if !knownAnywhere(key) {
					t.Errorf("%s: %s = %q is in none of PodLabelKeys, PodAnnotationKeys or OtherKeys (knownkeys.go)", fset.Position(v.Pos()), spec.Names[i], key)
				}
			}
			return true
		})
	}
	if found < 20 {
		t.Fatalf("found %d fairway.dev/ constants; the parser missed how they are written", found)
	}
}

// stringConst evaluates a constant written as "literal" or Prefix + "literal".
func stringConst(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if id, ok := e.X.(*ast.Ident); ok && id.Name == "Prefix" && e.Op == token.ADD {
			s, ok := stringConst(e.Y)
			return Prefix + s, ok
		}
	}
	return "", false
}

func knownAnywhere(key string) bool {
	_, other := OtherKeys[key]
	return other || slices.Contains(PodLabelKeys, key) || slices.Contains(PodAnnotationKeys, key)
}

func TestGPUShareKeysArePodAnnotations(t *testing.T) {
	for _, k := range GPUShareKeys {
		if !slices.Contains(PodAnnotationKeys, k) && !slices.Contains(AliasAnnotationKeys, k) {
			t.Errorf("GPUShareKeys has %q, which is not a pod annotation key", k)
		}
	}
}

func TestPodKeyProblems(t *testing.T) {
	cases := []struct {
		labels, annotations map[string]string
		want                []string // messages
	}{
		{labels: map[string]string{QueueLabel: "a", "app": "x"}, annotations: map[string]string{GPUFractionAnnotation: "0.5", "gpu-fraction": "0.5"}},
		{annotations: map[string]string{"fairway.dev/gpu-fracton": "0.5"}, want: []string{"unknown annotation key fairway.dev/gpu-fracton; did you mean fairway.dev/gpu-fraction?"}},
		{annotations: map[string]string{"fairway.dev/Queue": "a"}, want: []string{"unknown annotation key fairway.dev/Queue: fairway neither reads nor writes it"}},
		{labels: map[string]string{"fairway.dev/Queue": "a"}, want: []string{"unknown label key fairway.dev/Queue; did you mean fairway.dev/queue?"}},
		{annotations: map[string]string{QueueLabel: "a"}, want: []string{"fairway.dev/queue is a label, not an annotation: fairway does not read it here; move it to metadata.labels"}},
		{annotations: map[string]string{"gpu_memory": "1Gi", "cpu-memory": "1Gi", "": "x"}, want: []string{"unknown annotation key gpu_memory; did you mean gpu-memory?"}},
		{labels: map[string]string{"kai.scheduler/queues": "a"}, want: []string{"unknown label key kai.scheduler/queues; did you mean kai.scheduler/queue?"}},
	}
	for _, c := range cases {
		var got []string
		for _, p := range PodKeyProblems(c.labels, c.annotations) {
			got = append(got, p.Message)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("labels %v, annotations %v:\n got %q\nwant %q", c.labels, c.annotations, got, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"gpu-fracton", "gpu-fraction", 1}, {"gpu-mmeory", "gpu-memory", 1}, {"kitten", "sitting", 3}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
