package story

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPause: between acts the demo waits Pace, or in step mode for Enter, saying so on screen
// and in plain lines; Ctrl-C (ctx) ends either wait.
func TestPause(t *testing.T) {
	var out bytes.Buffer
	next := make(chan struct{})
	e := &Env{opts: Options{Next: next, Pace: time.Hour, Out: &out}}
	go func() { next <- struct{}{} }()
	if err := e.pause(context.Background(), acts[1], 2); err != nil {
		t.Fatal(err)
	}
	want := "Press Enter for act 2/4: " + acts[1].title
	if !strings.Contains(out.String(), want) || e.narration.prompt != want {
		t.Errorf("step mode said %q (view: %q), want %q", out.String(), e.narration.prompt, want)
	}
	if screen := renderScreen(&state{narration: e.narration}, 100, 40, false); !strings.Contains(screen, want) {
		t.Errorf("the live view lacks the prompt:\n%s", screen)
	}

	e = &Env{opts: Options{Pace: 10 * time.Millisecond, Out: &out}}
	begin := time.Now()
	if err := e.pause(context.Background(), acts[1], 2); err != nil || time.Since(begin) < 10*time.Millisecond {
		t.Errorf("pace: %v after %v", err, time.Since(begin))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e = &Env{opts: Options{Next: make(chan struct{}), Out: &out}}
	if err := e.pause(ctx, acts[1], 2); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled step wait returned %v", err)
	}
}

// TestWorkloadsLine: the install line names every workload it counts (it said "The 4
// workloads" and listed three).
func TestWorkloadsLine(t *testing.T) {
	obj := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetKind(kind)
		u.SetName(name)
		return u
	}
	got := workloadsLine([]*unstructured.Unstructured{obj("Deployment", "fairway-scheduler"), obj("Deployment", "fairway-webhook"),
		obj("DaemonSet", "fairway-agent"), obj("Job", "fairway-webhook-cleanup")})
	want := "The chart's 4 workloads (Deployment fairway-scheduler, Deployment fairway-webhook, DaemonSet fairway-agent, Job fairway-webhook-cleanup) are only admitted"
	if !strings.HasPrefix(got, want) {
		t.Errorf("workloadsLine = %q, want it to start %q", got, want)
	}
	if got := workloadsLine([]*unstructured.Unstructured{obj("Deployment", "x")}); !strings.HasPrefix(got, "The chart's 1 workload (Deployment x) is only") {
		t.Errorf("one workload: %q", got)
	}
}

// TestCounts: the outcomes the story prints count in words, never "1 workers" or "1 GPUs".
func TestCounts(t *testing.T) {
	for got, want := range map[string]string{
		count(1, "worker", "workers"): "1 worker", count(4, "worker", "workers"): "4 workers", count(0, "pod", "pods"): "0 pods",
		gpuAmount(1): "1 GPU", gpuAmount(0.5): "0.5 GPU", gpuAmount(20): "20 GPUs", gpuAmount(0): "0 GPUs",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
