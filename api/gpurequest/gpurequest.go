// Package gpurequest is the one reader of the annotations with which a pod asks for a share of
// one GPU: fairway.dev/gpu-fraction or fairway.dev/gpu-memory, and their Run:ai/KAI aliases
// gpu-fraction and gpu-memory. The mutating webhook, the scheduler's snapshot and the CLI all
// call Parse, so a pod the webhook never saw (created before fairway was installed, or while the
// webhook was down) is read by the same rules as one it admitted. The webhook writes the
// canonical value back under fairway's own key (Request.Fraction, Request.Memory); Parse reads
// that again to the same request. The package lives in api/ because the rules are a contract
// between components; it depends only on apimachinery and api/v1alpha1.
//
// The rules:
//
//   - A fraction is a plain decimal: ASCII digits with at most one '.', blanks around it ignored
//     ("0.5", ".25", "0.50", " 0.2 "). Signs, exponents ("1e-1"), hexadecimal floats ("0x1p-1"),
//     "NaN", "Inf", percentages and commas are refused: they are what a float parser happens to
//     accept, not what Run:ai or KAI document, and every one has a plain spelling.
//   - A fraction is rounded half up to thousandths of a GPU (Resolution), on its digits rather
//     than through a float, so every reader gets the same number: "0.3333" is 333 milli-GPU,
//     "0.3335" is 334, "0.0005" is 1. One that rounds to 0 ("0", "0.0004") or is a whole GPU or
//     more once rounded ("1", "0.9996", "1.5") is refused: whole GPUs are asked for with an
//     nvidia.com/gpu limit, which the kubelet enforces.
//   - Memory is a whole number of MiB ("20000"), or a Kubernetes quantity with a byte unit,
//     binary (Ki Mi Gi Ti Pi) or decimal (k M G T P), rounded up to whole MiB: "20Gi" and
//     "20480Mi" are 20480, "20G" (20e9 bytes) is 19074. A number without a unit is MiB, so one
//     that is not a whole number ("1.5", "1e3") is refused as ambiguous. It must be at least 1 MiB
//     and at most MaxMemoryMiB.
//   - An empty or blank value is refused: setting the key says the pod wants a share, and reading
//     it as no share would start the pod without a GPU.
//   - Fairway's key and its alias may both be set only when they mean the same request ("0.50"
//     and "0.5", "20Gi" and "20480"). A pod asks by fraction or by memory, not both.
//
// Every refusal is an *Error whose message names the annotation, quotes the value and says what
// is allowed. The webhook denies the pod with it; the scheduler reports it as the reason the pod
// is unschedulable; the CLI counts no share for the pod.
package gpurequest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Resolution is the number of steps in one GPU: fractions are kept in thousandths (milli-GPU).
const Resolution = 1000

// maxValueLen bounds what is parsed at all: no real value is longer.
const maxValueLen = 64

// MaxMemoryMiB bounds a memory request (16 TiB), far above any GPU, so sums cannot overflow.
const MaxMemoryMiB = 16 << 20

// What is allowed, as the messages of *Error say it.
const (
	AllowedFraction = "must be a decimal greater than 0 and less than 1 (e.g. 0.5)"
	AllowedMemory   = "must be a whole number of MiB greater than 0 (e.g. 20000) or a quantity with a byte unit (e.g. 20Gi, 20480Mi, 20G), at most 16Ti"
)

// Request is a normalized request for a share of one GPU. The zero value asks for nothing.
type Request struct {
	// Milli is the share of one GPU in thousandths, 1 to 999; 0 when the pod asks by memory or
	// not at all.
	Milli int64
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

// MemoryOn is the GPU memory, in MiB, the share takes on a GPU of gpuMiB: what it asked for,
// else its fraction of the GPU's memory. The MPS server's limit and the share library's both
// come from it.
func (r Request) MemoryOn(gpuMiB int64) int64 {
	if r.MemoryMiB != 0 {
		return r.MemoryMiB
	}
	return r.Milli * gpuMiB / 1000
}

// FormatMilli writes thousandths of a GPU (1 to 999) as the shortest decimal: 500 is "0.5".
func FormatMilli(milli int64) string {
	s := strings.TrimRight(fmt.Sprintf("%03d", milli), "0")
	return "0." + s
}

// FormatGPUs writes an amount of GPUs in thousandths as words for messages: "0.5 GPU",
// "1 GPU", "2.5 GPUs", "8 GPUs".
func FormatGPUs(milli int64) string {
	n := strconv.FormatInt(milli/1000, 10)
	if r := milli % 1000; r != 0 {
		n = strings.TrimSuffix(strconv.FormatInt(milli/1000, 10)+FormatMilli(r)[1:], ".")
	}
	if milli <= 1000 {
		return n + " GPU"
	}
	return n + " GPUs"
}

// Error is an annotation value that Parse refuses. Its message names the annotation, the value
// and what is allowed; the webhook shows it to the user as the reason the pod was denied.
type Error struct {
	Key, Value string
	// Allowed says what the value must be.
	Allowed string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Key, e.Value, e.Allowed)
}

// Parse reads a pod's GPU-share annotations by the rules of the package doc. Every error is an
// *Error. It does not allocate unless it refuses.
func Parse(annotations map[string]string) (Request, error) {
	f, err := pick(annotations, fairwayv1.GPUFractionAnnotation, fairwayv1.GPUFractionAliasAnnotation, readFraction)
	if err != nil {
		return Request{}, err
	}
	m, err := pick(annotations, fairwayv1.GPUMemoryAnnotation, fairwayv1.GPUMemoryAliasAnnotation, readMemory)
	if err != nil {
		return Request{}, err
	}
	switch {
	case f.Key != "" && m.Key != "":
		return Request{}, &Error{Key: f.Key, Value: annotations[f.Key],
			Allowed: fmt.Sprintf("cannot be combined with %s %q: ask for a GPU share by fraction or by memory, not both", m.Key, annotations[m.Key])}
	case f.Key != "":
		return Request{Milli: f.n, Key: f.Key}, nil
	case m.Key != "":
		return Request{MemoryMiB: m.n, Key: m.Key}, nil
	}
	return Request{}, nil
}

// picked is the value read from fairway's key or its alias; Key is "" when neither is set.
type picked struct {
	Key string
	n   int64
}

// pick reads fairway's key and its alias with read, which returns what is allowed when it refuses
// a value. When both are set they must read the same.
func pick(annotations map[string]string, key, alias string, read func(string) (int64, string)) (picked, error) {
	v, ok := annotations[key]
	av, aok := annotations[alias]
	var n, an int64
	if ok {
		var allowed string
		if n, allowed = read(v); allowed != "" {
			return picked{}, &Error{Key: key, Value: v, Allowed: allowed}
		}
	}
	if aok {
		var allowed string
		if an, allowed = read(av); allowed != "" {
			return picked{}, &Error{Key: alias, Value: av, Allowed: allowed}
		}
	}
	switch {
	case ok && aok && n != an:
		return picked{}, &Error{Key: key, Value: v, Allowed: fmt.Sprintf("disagrees with %s %q: set one of the two", alias, av)}
	case ok:
		return picked{Key: key, n: n}, nil
	case aok:
		return picked{Key: alias, n: an}, nil
	}
	return picked{}, nil
}

// readFraction parses a decimal in (0, 1) into thousandths, rounding half up on its digits. On
// refusal it returns what is allowed instead.
func readFraction(s string) (int64, string) {
	s = strings.TrimSpace(s)
	intPart, frac, _ := strings.Cut(s, ".")
	if len(s) > maxValueLen || len(intPart)+len(frac) == 0 || !digits(intPart) || !digits(frac) ||
		strings.Trim(intPart, "0") != "" {
		return 0, AllowedFraction
	}
	var n int64
	for i := 0; i < 3; i++ {
		n *= 10
		if i < len(frac) {
			n += int64(frac[i] - '0')
		}
	}
	if len(frac) > 3 && frac[3] >= '5' {
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
	return n, ""
}

// readMemory parses a whole number of MiB, or a quantity with a byte unit rounded up to whole
// MiB, from 1 to MaxMemoryMiB. On refusal it returns what is allowed instead.
func readMemory(s string) (int64, string) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxValueLen {
		return 0, AllowedMemory
	}
	if digits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n > MaxMemoryMiB {
			return 0, AllowedMemory
		}
		return n, ""
	}
	if mib, ok := binaryMiB(s); ok {
		if mib <= 0 || mib > MaxMemoryMiB {
			return 0, AllowedMemory
		}
		return mib, ""
	}
	if !hasUnit(s) {
		return 0, AllowedMemory
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, AllowedMemory
	}
	bytes, ok := q.AsInt64()
	if !ok {
		f := q.AsApproximateFloat64()
		if f > float64(MaxMemoryMiB)*(1<<20) || math.IsNaN(f) {
			return 0, AllowedMemory
		}
		bytes = int64(math.Ceil(f))
	}
	mib := (bytes + (1<<20 - 1)) >> 20
	if mib <= 0 || mib > MaxMemoryMiB {
		return 0, AllowedMemory
	}
	return mib, ""
}

// binaryMiB reads the common spelling, a whole number with a binary unit ("20Gi", "20480Mi"),
// without resource.ParseQuantity, which costs more than the rest of reading a pod's share: the
// webhook leaves the user's alias beside fairway's key, so the scheduler reads it on every pod
// event. ok is false for any other spelling; mib is -1 when the value is out of range.
func binaryMiB(s string) (mib int64, ok bool) {
	if len(s) < 3 || s[len(s)-1] != 'i' || !digits(s[:len(s)-2]) {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-2], 10, 64)
	if err != nil {
		return -1, true // more digits than int64 holds
	}
	var shift uint // from MiB
	switch s[len(s)-2] {
	case 'K':
		if n%1024 != 0 {
			return n/1024 + 1, true
		}
		return n / 1024, true
	case 'M':
		shift = 0
	case 'G':
		shift = 10
	case 'T':
		shift = 20
	case 'P':
		shift = 30
	default:
		return 0, false
	}
	if n > MaxMemoryMiB>>shift {
		return -1, true
	}
	return n << shift, true
}

// hasUnit accepts a plain decimal followed by one of the binary and decimal byte suffixes of
// Kubernetes quantities, so that "1e3" (bytes? MiB?) is refused as ambiguous.
func hasUnit(s string) bool {
	for _, u := range []string{"Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P"} {
		if strings.HasSuffix(s, u) && plainDecimal(strings.TrimSuffix(s, u)) {
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

func plainDecimal(s string) bool {
	intPart, frac, _ := strings.Cut(s, ".")
	return len(intPart)+len(frac) != 0 && digits(intPart) && digits(frac)
}
