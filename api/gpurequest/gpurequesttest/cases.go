// Package gpurequesttest holds the one table of GPU-share annotation inputs and what they mean. The
// tests of every reader (gpurequest itself, the mutating webhook, the scheduler's snapshot and the
// CLI) run all of it, so the readers cannot drift apart again: each must read every input to the
// value written here, or refuse it.
package gpurequesttest

import fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"

// The annotation keys, short for the table.
const (
	Frac     = fairwayv1.GPUFractionAnnotation
	Mem      = fairwayv1.GPUMemoryAnnotation
	AliasF   = fairwayv1.GPUFractionAliasAnnotation
	AliasMem = fairwayv1.GPUMemoryAliasAnnotation
)

// Case is one input and the request it means.
type Case struct {
	Name        string
	Annotations map[string]string
	// Milli and MemoryMiB are the share read; Key is the annotation it is read from. All three
	// are zero when the input is refused or asks for nothing.
	Milli, MemoryMiB int64
	Key              string
	// Err, when not empty, says the input is refused, with a message that contains Err and
	// starts with ErrKey, the annotation at fault.
	Err, ErrKey string
}

// Refused reports whether the case's input is refused.
func (c Case) Refused() bool { return c.Err != "" }

const (
	decimal  = "must be a decimal greater than 0 and less than 1"
	mib      = "must be a whole number of MiB greater than 0"
	toZero   = "rounds to 0 at fairway's resolution of 0.001"
	toOne    = "rounds to 1 at fairway's resolution of 0.001"
	disagree = "disagrees with"
	notBoth  = "by fraction or by memory, not both"
)

func frac(v string) map[string]string { return map[string]string{Frac: v} }
func mem(v string) map[string]string  { return map[string]string{Mem: v} }

// Cases is the table.
var Cases = []Case{
	// Nothing asked.
	{Name: "no annotations"},
	{Name: "unrelated annotation", Annotations: map[string]string{"example.com/gpu": "0.5"}},

	// Fractions, rounded half up to milli-GPU on their digits.
	{Name: "0.5", Annotations: frac("0.5"), Milli: 500, Key: Frac},
	{Name: "0.3333 rounds down", Annotations: frac("0.3333"), Milli: 333, Key: Frac},
	{Name: "0.3335 rounds half up", Annotations: frac("0.3335"), Milli: 334, Key: Frac},
	{Name: "0.6667 rounds up", Annotations: frac("0.6667"), Milli: 667, Key: Frac},
	{Name: "0.33", Annotations: frac("0.33"), Milli: 330, Key: Frac},
	{Name: "0.29 exactly, no float error", Annotations: frac("0.29"), Milli: 290, Key: Frac},
	{Name: "0.001, the resolution", Annotations: frac("0.001"), Milli: 1, Key: Frac},
	{Name: "0.0005 rounds up to the resolution", Annotations: frac("0.0005"), Milli: 1, Key: Frac},
	{Name: "leading dot", Annotations: frac(".25"), Milli: 250, Key: Frac},
	{Name: "trailing zeros", Annotations: frac("0.500"), Milli: 500, Key: Frac},
	{Name: "blanks around", Annotations: frac(" 0.2\t"), Milli: 200, Key: Frac},
	{Name: "0.9994 rounds to 0.999", Annotations: frac("0.9994"), Milli: 999, Key: Frac},
	{Name: "0.9996 rounds to a whole GPU", Annotations: frac("0.9996"), Err: toOne, ErrKey: Frac},
	{Name: "0.0004 rounds to nothing", Annotations: frac("0.0004"), Err: toZero, ErrKey: Frac},
	{Name: "zero", Annotations: frac("0"), Err: decimal, ErrKey: Frac},
	{Name: "0.", Annotations: frac("0."), Err: decimal, ErrKey: Frac},
	{Name: "one", Annotations: frac("1"), Err: decimal, ErrKey: Frac},
	{Name: "above one", Annotations: frac("1.5"), Err: decimal, ErrKey: Frac},
	{Name: "negative", Annotations: frac("-0.5"), Err: decimal, ErrKey: Frac},
	{Name: "explicit plus", Annotations: frac("+0.5"), Err: decimal, ErrKey: Frac},
	{Name: "empty", Annotations: frac(""), Err: decimal, ErrKey: Frac},
	{Name: "blank", Annotations: frac("   "), Err: decimal, ErrKey: Frac},
	{Name: "lone dot", Annotations: frac("."), Err: decimal, ErrKey: Frac},
	{Name: "exponent 1e-1", Annotations: frac("1e-1"), Err: decimal, ErrKey: Frac},
	{Name: "hexadecimal float 0x1p-1", Annotations: frac("0x1p-1"), Err: decimal, ErrKey: Frac},
	{Name: "NaN", Annotations: frac("NaN"), Err: decimal, ErrKey: Frac},
	{Name: "+Inf", Annotations: frac("+Inf"), Err: decimal, ErrKey: Frac},
	{Name: "percent", Annotations: frac("50%"), Err: decimal, ErrKey: Frac},
	{Name: "decimal comma", Annotations: frac("0,5"), Err: decimal, ErrKey: Frac},
	{Name: "a word", Annotations: frac("half"), Err: decimal, ErrKey: Frac},

	// The Run:ai/KAI alias, alone and beside fairway's key.
	{Name: "fraction alias", Annotations: map[string]string{AliasF: "0.25"}, Milli: 250, Key: AliasF},
	{Name: "fraction alias rounds alike", Annotations: map[string]string{AliasF: "0.3335"}, Milli: 334, Key: AliasF},
	{Name: "fraction alias agrees", Annotations: map[string]string{Frac: "0.50", AliasF: "0.5"}, Milli: 500, Key: Frac},
	{Name: "fraction alias agrees after rounding", Annotations: map[string]string{Frac: "0.333", AliasF: "0.3333"}, Milli: 333, Key: Frac},
	{Name: "fraction alias disagrees", Annotations: map[string]string{Frac: "0.5", AliasF: "0.25"}, Err: disagree, ErrKey: Frac},
	{Name: "fraction alias invalid beside a valid key", Annotations: map[string]string{Frac: "0.5", AliasF: "abc"}, Err: decimal, ErrKey: AliasF},
	{Name: "fraction alias empty beside a valid key", Annotations: map[string]string{Frac: "0.5", AliasF: ""}, Err: decimal, ErrKey: AliasF},
	{Name: "fraction alias bad", Annotations: map[string]string{AliasF: "1e-1"}, Err: decimal, ErrKey: AliasF},

	// Memory: MiB, or a quantity with a byte unit rounded up to MiB.
	{Name: "memory MiB", Annotations: mem("20000"), MemoryMiB: 20000, Key: Mem},
	{Name: "memory 20Gi", Annotations: mem("20Gi"), MemoryMiB: 20480, Key: Mem},
	{Name: "memory 20480Mi", Annotations: mem("20480Mi"), MemoryMiB: 20480, Key: Mem},
	{Name: "memory 20G rounds up to MiB", Annotations: mem("20G"), MemoryMiB: 19074, Key: Mem},
	{Name: "memory 0.5Gi", Annotations: mem("0.5Gi"), MemoryMiB: 512, Key: Mem},
	{Name: "memory 1Ki rounds up to 1 MiB", Annotations: mem("1Ki"), MemoryMiB: 1, Key: Mem},
	{Name: "memory 1025Ki rounds up to 2 MiB", Annotations: mem("1025Ki"), MemoryMiB: 2, Key: Mem},
	{Name: "memory 16Ti, the most", Annotations: mem("16Ti"), MemoryMiB: 16 << 20, Key: Mem},
	{Name: "memory blanks around", Annotations: mem(" 4096 "), MemoryMiB: 4096, Key: Mem},
	{Name: "memory zero", Annotations: mem("0"), Err: mib, ErrKey: Mem},
	{Name: "memory zero with a unit", Annotations: mem("0Gi"), Err: mib, ErrKey: Mem},
	{Name: "memory negative", Annotations: mem("-5Mi"), Err: mib, ErrKey: Mem},
	{Name: "memory decimal without a unit", Annotations: mem("1.5"), Err: mib, ErrKey: Mem},
	{Name: "memory exponent without a unit", Annotations: mem("1e3"), Err: mib, ErrKey: Mem},
	{Name: "memory lower-case unit", Annotations: mem("20gi"), Err: mib, ErrKey: Mem},
	{Name: "memory milli unit", Annotations: mem("2000m"), Err: mib, ErrKey: Mem},
	{Name: "memory empty", Annotations: mem(""), Err: mib, ErrKey: Mem},
	{Name: "memory above 16Ti", Annotations: mem("17Ti"), Err: mib, ErrKey: Mem},
	{Name: "memory too many digits", Annotations: mem("99999999999999999999"), Err: mib, ErrKey: Mem},
	{Name: "memory alias", Annotations: map[string]string{AliasMem: "4096"}, MemoryMiB: 4096, Key: AliasMem},
	{Name: "memory alias with a unit", Annotations: map[string]string{AliasMem: "20Gi"}, MemoryMiB: 20480, Key: AliasMem},
	{Name: "memory alias agrees (as the webhook leaves it)", Annotations: map[string]string{Mem: "20480", AliasMem: "20Gi"}, MemoryMiB: 20480, Key: Mem},
	{Name: "memory alias disagrees", Annotations: map[string]string{Mem: "20000", AliasMem: "20Gi"}, Err: disagree, ErrKey: Mem},

	// Fraction and memory together.
	{Name: "fraction and memory", Annotations: map[string]string{Frac: "0.5", Mem: "1000"}, Err: notBoth, ErrKey: Frac},
	{Name: "fraction and memory by aliases", Annotations: map[string]string{AliasF: "0.5", AliasMem: "1000"}, Err: notBoth, ErrKey: AliasF},
	{Name: "fraction key and memory alias", Annotations: map[string]string{Frac: "0.5", AliasMem: "20Gi"}, Err: notBoth, ErrKey: Frac},
	{Name: "bad fraction beside memory", Annotations: map[string]string{Frac: "2", Mem: "1000"}, Err: decimal, ErrKey: Frac},
}
