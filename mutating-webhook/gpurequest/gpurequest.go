// Package gpurequest parses and normalizes the annotations with which a pod asks for a share of
// one GPU: fairway.dev/gpu-fraction or fairway.dev/gpu-memory, and their Run:ai/KAI aliases
// gpu-fraction and gpu-memory. The webhook writes the normalized value back under fairway's own
// key, which is the only one the scheduler reads; the scheduler can use Parse on it again.
//
// Fractions are decimals in (0, 1) rounded half-up to a resolution of 0.001 (Resolution):
// "0.3333" becomes "0.333", "0.0005" becomes "0.001". A value that rounds to 0 or to 1 is refused,
// as is anything that is not a plain decimal. Memory is a whole number of MiB ("20000"), or a
// quantity with a unit ("20Gi", "20G"), rounded up to whole MiB.
package gpurequest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Resolution is the number of steps in one GPU: fractions are kept in thousandths.
const Resolution = 1000

// maxValueLen bounds what is parsed at all: no real value is longer.
const maxValueLen = 64

// MaxMemoryMiB bounds a memory request (16 TiB), far above any GPU, so sums cannot overflow.
const MaxMemoryMiB = 16 << 20

// What is allowed, as the webhook's denial messages say it.
const (
	AllowedFraction = "must be a decimal greater than 0 and less than 1 (e.g. 0.5)"
	AllowedMemory   = "must be a whole number of MiB greater than 0 (e.g. 20000) or a quantity with a unit (e.g. 20Gi)"
)

// Request is a normalized request for a share of one GPU. The zero value asks for nothing.
type Request struct {
	// Milli is the share of one GPU in thousandths, 1 to 999; 0 when the pod asks by memory or
	// not at all.
	Milli int32
	// MemoryMiB is the GPU memory asked for, in MiB; 0 when the pod asks by fraction or not at all.
	MemoryMiB int64
	// Key is the annotation the request came from (fairway's key or its alias).
	Key string
}

// IsZero reports whether the pod asks for no GPU share.
func (r Request) IsZero() bool { return r.Milli == 0 && r.MemoryMiB == 0 }

// Fraction is the canonical decimal of a fraction request ("0.5", "0.333"), "" for none.
func (r Request) Fraction() string {
	if r.Milli == 0 {
		return ""
	}
	return FormatMilli(r.Milli)
}

// Memory is the canonical MiB value of a memory request ("20000"), "" for none.
func (r Request) Memory() string {
	if r.MemoryMiB == 0 {
		return ""
	}
	return strconv.FormatInt(r.MemoryMiB, 10)
}

// FormatMilli writes thousandths of a GPU (1 to 999) as the shortest decimal: 500 is "0.5".
func FormatMilli(milli int32) string {
	s := strings.TrimRight(fmt.Sprintf("%03d", milli), "0")
	return "0." + s
}

// Error is an annotation value the webhook refuses. Its message names the annotation, the value
// and what is allowed, and is shown to the user as the reason the pod was denied.
type Error struct {
	Key, Value string
	// Allowed says what the value must be.
	Allowed string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Key, e.Value, e.Allowed)
}

// Parse reads a pod's GPU-share annotations. Fairway's keys and the Run:ai/KAI aliases are
// equivalent; when both are set they must agree. A pod may ask by fraction or by memory, not both.
// Every error is an *Error.
func Parse(annotations map[string]string) (Request, error) {
	fKey, fVal, err := pick(annotations, fairwayv1.GPUFractionAnnotation, fairwayv1.GPUFractionAliasAnnotation)
	if err != nil {
		return Request{}, err
	}
	mKey, mVal, err := pick(annotations, fairwayv1.GPUMemoryAnnotation, fairwayv1.GPUMemoryAliasAnnotation)
	if err != nil {
		return Request{}, err
	}
	switch {
	case fKey != "" && mKey != "":
		return Request{}, &Error{Key: fKey, Value: fVal,
			Allowed: fmt.Sprintf("cannot be combined with %s %q: ask for a GPU share by fraction or by memory, not both", mKey, mVal)}
	case fKey != "":
		milli, allowed := ParseFraction(fVal)
		if allowed != "" {
			return Request{}, &Error{Key: fKey, Value: fVal, Allowed: allowed}
		}
		return Request{Milli: milli, Key: fKey}, nil
	case mKey != "":
		mib, ok := ParseMemoryMiB(mVal)
		if !ok {
			return Request{}, &Error{Key: mKey, Value: mVal, Allowed: AllowedMemory}
		}
		return Request{MemoryMiB: mib, Key: mKey}, nil
	}
	return Request{}, nil
}

// pick returns the key and value set among fairway's key and its alias. When both are set, their
// values must mean the same.
func pick(annotations map[string]string, key, alias string) (string, string, error) {
	v, ok := annotations[key]
	av, aok := annotations[alias]
	switch {
	case ok && aok && strings.TrimSpace(v) != strings.TrimSpace(av):
		if same(key, v, av) {
			return key, v, nil
		}
		return "", "", &Error{Key: key, Value: v, Allowed: fmt.Sprintf("disagrees with %s %q: set one of the two", alias, av)}
	case ok:
		return key, v, nil
	case aok:
		return alias, av, nil
	}
	return "", "", nil
}

// same reports whether two spellings of a fraction or memory annotation normalize to the same
// request ("0.50" and "0.5").
func same(key, a, b string) bool {
	if key == fairwayv1.GPUFractionAnnotation {
		ma, ea := ParseFraction(a)
		mb, eb := ParseFraction(b)
		return ea == "" && eb == "" && ma == mb
	}
	ma, oka := ParseMemoryMiB(a)
	mb, okb := ParseMemoryMiB(b)
	return oka && okb && ma == mb
}

// ParseFraction parses a decimal in (0, 1) into thousandths, rounding half up. On failure it
// returns what is allowed instead, for the denial message.
func ParseFraction(s string) (milli int32, allowed string) {
	s = strings.TrimSpace(s)
	intPart, frac, _ := strings.Cut(s, ".")
	if len(s) > maxValueLen || intPart+frac == "" || !digits(intPart) || !digits(frac) {
		return 0, AllowedFraction
	}
	if strings.Trim(intPart, "0") != "" {
		return 0, AllowedFraction
	}
	frac += "0000"
	n, _ := strconv.Atoi(frac[:3])
	if frac[3] >= '5' {
		n++
	}
	switch {
	case n == 0 && strings.Trim(frac, "0") == "":
		return 0, AllowedFraction
	case n == 0:
		return 0, AllowedFraction + "; it rounds to 0 at fairway's resolution of 0.001"
	case n >= Resolution:
		return 0, AllowedFraction + "; it rounds to 1 at fairway's resolution of 0.001 (ask for a whole GPU with an nvidia.com/gpu limit instead)"
	}
	return int32(n), ""
}

// ParseMemoryMiB parses a whole number of MiB, or a quantity with a unit rounded up to whole MiB,
// greater than 0 and at most MaxMemoryMiB.
func ParseMemoryMiB(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxValueLen {
		return 0, false
	}
	if digits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n > MaxMemoryMiB {
			return 0, false
		}
		return n, true
	}
	if !hasUnit(s) {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, false
	}
	bytes, ok := q.AsInt64()
	if !ok {
		f := q.AsApproximateFloat64()
		if f > float64(MaxMemoryMiB)*(1<<20) || math.IsNaN(f) {
			return 0, false
		}
		bytes = int64(math.Ceil(f))
	}
	mib := (bytes + (1<<20 - 1)) >> 20
	if mib <= 0 || mib > MaxMemoryMiB {
		return 0, false
	}
	return mib, true
}

// hasUnit accepts the binary and decimal byte suffixes of Kubernetes quantities, so that "1e3"
// (bytes? MiB?) is refused as ambiguous.
func hasUnit(s string) bool {
	for _, u := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P"} {
		if strings.HasSuffix(s, u) && digitsOrDot(strings.TrimSuffix(s, u)) {
			return true
		}
	}
	return false
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func digitsOrDot(s string) bool {
	intPart, frac, _ := strings.Cut(s, ".")
	return intPart+frac != "" && digits(intPart) && digits(frac)
}
