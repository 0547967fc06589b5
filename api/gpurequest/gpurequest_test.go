package gpurequest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
)

// TestParse runs the shared table (which the webhook, the snapshot and the CLI run too) through
// Parse.
func TestParse(t *testing.T) {
	for _, tc := range gpurequesttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := gpurequest.Parse(tc.Annotations)
			if tc.Refused() {
				var perr *gpurequest.Error
				if !errors.As(err, &perr) {
					t.Fatalf("Parse(%q) = %+v, %v; want a *gpurequest.Error containing %q", tc.Annotations, got, err, tc.Err)
				}
				if perr.Key != tc.ErrKey || !strings.HasPrefix(err.Error(), tc.ErrKey+" ") || !strings.Contains(err.Error(), tc.Err) {
					t.Fatalf("Parse error = %q (key %s), want one starting with %s and containing %q", err, perr.Key, tc.ErrKey, tc.Err)
				}
				if got != (gpurequest.Request{}) {
					t.Errorf("a refusal returned %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.Annotations, err)
			}
			want := gpurequest.Request{Milli: tc.Milli, MemoryMiB: tc.MemoryMiB, Key: tc.Key}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.Annotations, diff)
			}
		})
	}
}

// TestParseMessages pins whole messages, as users see them in the webhook's denial.
func TestParseMessages(t *testing.T) {
	for ann, want := range map[[2]string]string{
		{gpurequesttest.Frac, "1.5"}:    `fairway.dev/gpu-fraction "1.5": must be a decimal greater than 0 and less than 1 (e.g. 0.5)`,
		{gpurequesttest.Frac, "0.9996"}: `fairway.dev/gpu-fraction "0.9996": must be a decimal greater than 0 and less than 1 (e.g. 0.5); it rounds to 1 at fairway's resolution of 0.001 (ask for a whole GPU with an nvidia.com/gpu limit instead)`,
		{gpurequesttest.Mem, "1e3"}:     `fairway.dev/gpu-memory "1e3": must be a whole number of MiB greater than 0 (e.g. 20000) or a quantity with a byte unit (e.g. 20Gi, 20480Mi, 20G), at most 16Ti`,
	} {
		_, err := gpurequest.Parse(map[string]string{ann[0]: ann[1]})
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%s=%q) error = %v, want %s", ann[0], ann[1], err, want)
		}
	}
	_, err := gpurequest.Parse(map[string]string{gpurequesttest.Frac: "0.5", gpurequesttest.AliasF: "0.25"})
	if want := `fairway.dev/gpu-fraction "0.5": disagrees with gpu-fraction "0.25": set one of the two`; err == nil || err.Error() != want {
		t.Errorf("disagreeing alias: %v, want %s", err, want)
	}
}

func TestFormat(t *testing.T) {
	for milli, want := range map[int64]string{500: "0.5", 333: "0.333", 250: "0.25", 1: "0.001", 999: "0.999", 10: "0.01"} {
		got := gpurequest.Request{Milli: milli}.Fraction()
		if got != want {
			t.Errorf("Fraction(%d) = %q, want %q", milli, got, want)
		}
	}
	if got := (gpurequest.Request{MemoryMiB: 20480}).Memory(); got != "20480" {
		t.Errorf("Memory() = %q, want 20480", got)
	}
}

// TestParseDoesNotAllocate keeps Parse cheap on the scheduler's informer path, where every pod
// event reads it.
func TestParseDoesNotAllocate(t *testing.T) {
	for _, ann := range []map[string]string{
		{}, {gpurequesttest.Frac: "0.333", gpurequesttest.AliasF: "0.3333"}, {gpurequesttest.Mem: "20480"},
	} {
		if n := testing.AllocsPerRun(100, func() { _, _ = gpurequest.Parse(ann) }); n != 0 {
			t.Errorf("Parse(%q) allocates %v times", ann, n)
		}
	}
}

// BenchmarkParse times the reading the scheduler does on every pod event, on pods as the webhook
// leaves them: fairway's key with the user's alias beside it.
func BenchmarkParse(b *testing.B) {
	for name, ann := range map[string]map[string]string{
		"none":     {},
		"fraction": {gpurequesttest.Frac: "0.333", gpurequesttest.AliasF: "0.3333"},
		"memory":   {gpurequesttest.Mem: "20480", gpurequesttest.AliasMem: "20Gi"},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_, _ = gpurequest.Parse(ann)
			}
		})
	}
}

func TestFormatGPUs(t *testing.T) {
	for milli, want := range map[int64]string{500: "0.5 GPU", 1000: "1 GPU", 2500: "2.5 GPUs", 8000: "8 GPUs", 1250: "1.25 GPUs", 0: "0 GPU"} {
		if got := gpurequest.FormatGPUs(milli); got != want {
			t.Errorf("FormatGPUs(%d) = %q, want %q", milli, got, want)
		}
	}
}

func TestMemoryOn(t *testing.T) {
	for _, c := range []struct {
		r    gpurequest.Request
		want int64
	}{
		{gpurequest.Request{Milli: 500}, 40960},
		{gpurequest.Request{MemoryMiB: 10240}, 10240},
		{gpurequest.Request{}, 0},
	} {
		if got := c.r.MemoryOn(81920); got != c.want {
			t.Errorf("%+v.MemoryOn(81920) = %d, want %d", c.r, got, c.want)
		}
	}
}
