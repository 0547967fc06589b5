package cli

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/duration"
)

// table writes kubectl-style aligned columns: upper-case headers, three spaces between columns,
// "<none>"-free cells ("-" for nothing).
type table struct {
	w *tabwriter.Writer
}

func newTable(out io.Writer, headers ...string) *table {
	t := &table{w: tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }

// age formats a duration the way kubectl's AGE column does ("45s", "3m20s", "5h", "12d").
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// Amount is a resource amount in natural units: GPUs, CPU cores, bytes.
type Amount float64

// amountOf converts a quantity of the named resource (gpu, gpu/<type>, cpu, memory).
func amountOf(q resource.Quantity) Amount { return Amount(q.AsApproximateFloat64()) }

// formatAmount prints GPUs and cores as short decimals ("2.5", "0.333") and memory in binary
// units ("64Gi", "1.5Gi", "512Mi").
func formatAmount(res string, a Amount) string {
	v := float64(a)
	if res != "memory" {
		return decimal(v)
	}
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 1<<40:
		return decimal(v/(1<<40)) + "Ti"
	case math.Abs(v) >= 1<<30:
		return decimal(v/(1<<30)) + "Gi"
	case math.Abs(v) >= 1<<20:
		return decimal(v/(1<<20)) + "Mi"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// decimal prints at most three decimals, without trailing zeros.
func decimal(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1000)/1000, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// compareNamespaced compares ns1+"/"+name1 with ns2+"/"+name2, the order the CLI lists
// namespaced names in, without building the strings: sorting a node's pods or a cluster's
// jobs built two strings per comparison.
func compareNamespaced(ns1, name1, ns2, name2 string) int {
	if ns1 == ns2 {
		return strings.Compare(name1, name2)
	}
	n := min(len(ns1), len(ns2))
	if c := strings.Compare(ns1[:n], ns2[:n]); c != 0 {
		return c
	}
	// One namespace begins the other: the shorter one's "/" meets the longer one's next byte.
	// Namespaces hold no "/"; were one to, the joined strings decide.
	switch {
	case len(ns1) < len(ns2) && ns2[n] != '/':
		return cmp.Compare(byte('/'), ns2[n])
	case len(ns2) < len(ns1) && ns1[n] != '/':
		return cmp.Compare(ns1[n], byte('/'))
	}
	return strings.Compare(ns1+"/"+name1, ns2+"/"+name2)
}
