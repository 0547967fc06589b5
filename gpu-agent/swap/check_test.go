package swap

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
)

// syncBuffer is a bytes.Buffer safe to read while RunCheck writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The check's agent side against the mock: out, the owner's CPU shows work, in once the loan has
// gone; the owner's memory is intact.
func TestRunCheck(t *testing.T) {
	m := checkpoint.NewMock()
	m.AddGPU(0, 10*mib)
	want := pattern(6*mib, 9)
	_ = m.Spawn(7, 0, want)
	var mu sync.Mutex
	cpu := time.Second
	pr, pw := io.Pipe()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- RunCheck(context.Background(), CheckOptions{API: m, PID: 7, WakeCPU: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
			LockTimeout: time.Second, RestoreTimeout: 5 * time.Second,
			CPU: func(int) (time.Duration, error) { mu.Lock(); defer mu.Unlock(); return cpu, nil }}, pr, out)
	}()
	waitFor := func(s string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(out.String(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in %q", s, out.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	for range 2 {
		_, _ = io.WriteString(pw, "out\n")
		waitFor("swap-check: out ")
		_ = m.Spawn(8, 0, make([]byte, 9*mib)) // the loan
		mu.Lock()
		cpu += 100 * time.Millisecond
		mu.Unlock()
		waitFor("swap-check: work ")
		_, _ = io.WriteString(pw, "in\n")
		time.Sleep(30 * time.Millisecond) // the restore waits for the loan's memory
		m.Exit(8)
		waitFor("swap-check: in ")
		got, err := m.Memory(7)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("owner's memory differs after the check's swap (%v)", err)
		}
		out.mu.Lock()
		out.b.Reset()
		out.mu.Unlock()
	}
	_, _ = io.WriteString(pw, "quit\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
