package gpurequest_test

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
)

// FuzzParse feeds arbitrary values to the four GPU-share annotations, seeded with the shared
// table. Parse must never panic; an accepted request is in range, an accepted fraction is the
// exact value rounded half up to thousandths (checked with math/big, not with Parse's own digit
// arithmetic), accepted memory is what resource.ParseQuantity reads rounded up to MiB (Parse
// reads the common spellings without it), and a request survives a round trip through its canonical form; a refusal is an
// *Error whose message names the annotation and quotes the value.
func FuzzParse(f *testing.F) {
	for _, seed := range [][4]string{
		{"0.5", "", "", ""}, {"", "0.3333", "", ""}, {"", "", "20000", ""}, {"", "", "", "20Gi"},
		{"1.5", "", "", ""}, {"0.5", "0.25", "", ""}, {"0.5", "", "1000", ""}, {"0.0004", "", "", ""},
		{"0.9996", "", "", ""}, {"abc", "", "", ""}, {"", "", "1e3", ""}, {"", "", "", "-5Mi"}, {".", "", "", ""},
		{"", "", "0.5Gi", ""}, {"", "", "99999999999999999999999Ti", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	for _, tc := range gpurequesttest.Cases {
		a := tc.Annotations
		f.Add(a[frac], a[aliasF], a[mem], a[aliasMem])
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
		if got.Milli != 0 {
			if want := roundedMilli(ann[got.Key]); want != got.Milli {
				t.Fatalf("Parse(%q) = %d milli, exact rounding gives %d", ann, got.Milli, want)
			}
		}
		if got.MemoryMiB != 0 {
			if want := quantityMiB(ann[got.Key]); want != got.MemoryMiB {
				t.Fatalf("Parse(%q) = %d MiB, resource.ParseQuantity gives %d", ann, got.MemoryMiB, want)
			}
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

const (
	frac     = gpurequesttest.Frac
	mem      = gpurequesttest.Mem
	aliasF   = gpurequesttest.AliasF
	aliasMem = gpurequesttest.AliasMem
)

// roundedMilli is v, a decimal, in thousandths rounded half up, computed exactly; -1 when v is
// not a number big.Rat reads.
func roundedMilli(v string) int64 {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(v))
	if !ok {
		return -1
	}
	r.Mul(r, big.NewRat(1000, 1)).Add(r, big.NewRat(1, 2))
	q := new(big.Int).Quo(r.Num(), r.Denom()) // truncation is floor: r > 0
	return q.Int64()
}

// quantityMiB is v, MiB or a quantity, in MiB rounded up, as resource.ParseQuantity reads it; -1
// when it does not.
func quantityMiB(v string) int64 {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return -1
	}
	return (q.Value() + 1<<20 - 1) >> 20 // Value rounds up to whole bytes
}
