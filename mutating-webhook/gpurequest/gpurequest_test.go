package gpurequest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/mutating-webhook/gpurequest"
)

const (
	frac     = "fairway.dev/gpu-fraction"
	mem      = "fairway.dev/gpu-memory"
	aliasF   = "gpu-fraction"
	aliasMem = "gpu-memory"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		ann     map[string]string
		want    gpurequest.Request
		wantErr string
	}{
		"nothing":               {ann: map[string]string{"other": "x"}},
		"half":                  {ann: map[string]string{frac: "0.5"}, want: gpurequest.Request{Milli: 500, Key: frac}},
		"third rounds to 0.333": {ann: map[string]string{frac: "0.3333"}, want: gpurequest.Request{Milli: 333, Key: frac}},
		"two thirds round up":   {ann: map[string]string{frac: "0.6667"}, want: gpurequest.Request{Milli: 667, Key: frac}},
		"leading dot":           {ann: map[string]string{frac: ".25"}, want: gpurequest.Request{Milli: 250, Key: frac}},
		"spaces are trimmed":    {ann: map[string]string{frac: " 0.2 "}, want: gpurequest.Request{Milli: 200, Key: frac}},
		"half of the smallest step rounds up": {
			ann: map[string]string{frac: "0.0005"}, want: gpurequest.Request{Milli: 1, Key: frac}},
		"Run:ai alias":       {ann: map[string]string{aliasF: "0.25"}, want: gpurequest.Request{Milli: 250, Key: aliasF}},
		"alias agrees":       {ann: map[string]string{frac: "0.50", aliasF: "0.5"}, want: gpurequest.Request{Milli: 500, Key: frac}},
		"memory MiB":         {ann: map[string]string{mem: "20000"}, want: gpurequest.Request{MemoryMiB: 20000, Key: mem}},
		"memory alias":       {ann: map[string]string{aliasMem: "4096"}, want: gpurequest.Request{MemoryMiB: 4096, Key: aliasMem}},
		"memory quantity Gi": {ann: map[string]string{mem: "20Gi"}, want: gpurequest.Request{MemoryMiB: 20480, Key: mem}},
		"memory quantity G rounds up to MiB": {
			ann: map[string]string{mem: "1G"}, want: gpurequest.Request{MemoryMiB: 954, Key: mem}},

		"one":              {ann: map[string]string{frac: "1"}, wantErr: `fairway.dev/gpu-fraction "1": must be a decimal greater than 0 and less than 1 (e.g. 0.5)`},
		"above one":        {ann: map[string]string{frac: "1.5"}, wantErr: `fairway.dev/gpu-fraction "1.5": must be a decimal greater than 0 and less than 1 (e.g. 0.5)`},
		"zero":             {ann: map[string]string{frac: "0"}, wantErr: `fairway.dev/gpu-fraction "0": must be a decimal`},
		"negative":         {ann: map[string]string{frac: "-0.5"}, wantErr: `"-0.5": must be a decimal`},
		"not a number":     {ann: map[string]string{aliasF: "half"}, wantErr: `gpu-fraction "half": must be a decimal`},
		"percent":          {ann: map[string]string{frac: "50%"}, wantErr: `"50%": must be a decimal`},
		"exponent":         {ann: map[string]string{frac: "5e-1"}, wantErr: `"5e-1": must be a decimal`},
		"rounds to zero":   {ann: map[string]string{frac: "0.0004"}, wantErr: "rounds to 0 at fairway's resolution of 0.001"},
		"rounds to one":    {ann: map[string]string{frac: "0.9996"}, wantErr: "rounds to 1 at fairway's resolution of 0.001"},
		"alias disagrees":  {ann: map[string]string{frac: "0.5", aliasF: "0.25"}, wantErr: `fairway.dev/gpu-fraction "0.5": disagrees with gpu-fraction "0.25"`},
		"both kinds":       {ann: map[string]string{frac: "0.5", mem: "1000"}, wantErr: `fairway.dev/gpu-fraction "0.5": cannot be combined with fairway.dev/gpu-memory "1000"`},
		"both via aliases": {ann: map[string]string{aliasF: "0.5", aliasMem: "1000"}, wantErr: "not both"},
		"memory zero":      {ann: map[string]string{mem: "0"}, wantErr: `fairway.dev/gpu-memory "0": must be a whole number of MiB`},
		"memory decimal":   {ann: map[string]string{mem: "1.5"}, wantErr: `must be a whole number of MiB`},
		"memory ambiguous": {ann: map[string]string{mem: "1e3"}, wantErr: `must be a whole number of MiB`},
		"memory huge":      {ann: map[string]string{mem: "99999999999999999999"}, wantErr: `must be a whole number of MiB`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := gpurequest.Parse(tc.ann)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				var perr *gpurequest.Error
				if !errors.As(err, &perr) {
					t.Errorf("error %T is not a *gpurequest.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for milli, want := range map[int32]string{500: "0.5", 333: "0.333", 250: "0.25", 1: "0.001", 999: "0.999", 10: "0.01"} {
		got := gpurequest.Request{Milli: milli}.Fraction()
		if got != want {
			t.Errorf("Fraction(%d) = %q, want %q", milli, got, want)
		}
	}
	if got := (gpurequest.Request{MemoryMiB: 20480}).Memory(); got != "20480" {
		t.Errorf("Memory() = %q, want 20480", got)
	}
}
