package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// constsOfType returns the values of the string constants of the named type declared in file.
func constsOfType(t *testing.T, file, typ string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: a %s must be a string literal", file, typ)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// A constant that is not in the list would have no hint and would not be read back from a
// pod's condition: the list is what every consumer iterates.
func TestUnschedulableReasonsListed(t *testing.T) {
	declared := constsOfType(t, "reasons.go", "UnschedulableReason")
	var listed []string
	for _, r := range UnschedulableReasons() {
		listed = append(listed, string(r))
	}
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Errorf("UnschedulableReasons() = %v, want the declared constants in order %v", listed, declared)
	}
	declared = constsOfType(t, "reasons.go", "QueueNotReadyReason")
	listed = nil
	for _, r := range QueueNotReadyReasons() {
		listed = append(listed, string(r))
	}
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Errorf("QueueNotReadyReasons() = %v, want the declared constants in order %v", listed, declared)
	}
}

func TestPodScheduledMessageRoundTrip(t *testing.T) {
	for _, r := range UnschedulableReasons() {
		for _, msg := range []string{"queue a: gpu limit 4 would be exceeded", "", "x: y: z"} {
			got, m, ok := ParsePodScheduledMessage(PodScheduledMessage(r, msg))
			if !ok || got != r || m != msg {
				t.Errorf("ParsePodScheduledMessage(PodScheduledMessage(%s, %q)) = %s, %q, %v", r, msg, got, m, ok)
			}
		}
	}
	for _, s := range []string{
		"0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", // kube-scheduler's
		"Something New: later versions' codes are not guessed",
		"QueueLimitExtra: a known code must end at the colon",
		"QueueLimit",
		"",
	} {
		if r, _, ok := ParsePodScheduledMessage(s); ok {
			t.Errorf("ParsePodScheduledMessage(%q) = %s, want not ok", s, r)
		}
	}
}
