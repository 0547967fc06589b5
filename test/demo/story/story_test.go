package story

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
