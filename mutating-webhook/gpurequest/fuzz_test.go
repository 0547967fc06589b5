package gpurequest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/mutating-webhook/gpurequest"
)

// FuzzGPURequest feeds arbitrary values to the four GPU-share annotations. Parse must never
// panic; an accepted request is in range and survives a round trip through its canonical
// form; a refusal is an *Error whose message names the annotation and quotes the value.
func FuzzGPURequest(f *testing.F) {
	for _, seed := range [][4]string{
		{"0.5", "", "", ""}, {"", "0.3333", "", ""}, {"", "", "20000", ""}, {"", "", "", "20Gi"},
		{"1.5", "", "", ""}, {"0.5", "0.25", "", ""}, {"0.5", "", "1000", ""}, {"0.0004", "", "", ""},
		{"0.9996", "", "", ""}, {"abc", "", "", ""}, {"", "", "1e3", ""}, {"", "", "", "-5Mi"}, {".", "", "", ""},
		{"", "", "0.5Gi", ""}, {"", "", "99999999999999999999999Ti", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, fraction, fractionAlias, memory, memoryAlias string) {
		ann := map[string]string{}
		for k, v := range map[string]string{frac: fraction, aliasF: fractionAlias, mem: memory, aliasMem: memoryAlias} {
			if v != "" {
				ann[k] = v
			}
		}
		got, err := gpurequest.Parse(ann)
		if err != nil {
			var perr *gpurequest.Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T (%v) is not a *gpurequest.Error", err, err)
			}
			if _, ok := ann[perr.Key]; !ok {
				t.Fatalf("error names %q, which the pod does not set: %v", perr.Key, err)
			}
			if !strings.HasPrefix(err.Error(), perr.Key+" ") || perr.Allowed == "" {
				t.Fatalf("malformed message %q", err)
			}
			return
		}
		switch {
		case got.Milli != 0 && got.MemoryMiB != 0:
			t.Fatalf("both fraction and memory in %+v", got)
		case got.Milli < 0 || got.Milli >= gpurequest.Resolution:
			t.Fatalf("fraction out of range: %+v", got)
		case got.MemoryMiB < 0 || got.MemoryMiB > gpurequest.MaxMemoryMiB:
			t.Fatalf("memory out of range: %+v", got)
		case got.IsZero() != (len(ann) == 0):
			t.Fatalf("Parse(%q) = %+v: a request exactly when an annotation is set", ann, got)
		}
		var again gpurequest.Request
		if got.Milli != 0 {
			again, err = gpurequest.Parse(map[string]string{frac: got.Fraction()})
		} else if got.MemoryMiB != 0 {
			again, err = gpurequest.Parse(map[string]string{mem: got.Memory()})
		}
		if err != nil || again.Milli != got.Milli || again.MemoryMiB != got.MemoryMiB {
			t.Fatalf("canonical form of %+v does not round-trip: %+v, %v", got, again, err)
		}
	})
}
