package checkpoint

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// Open works where a driver with the checkpoint API is, and elsewhere says so with
// ErrNotAvailable, never another error: the agent tells the two apart.
func TestOpenSaysNotAvailableWithoutADriver(t *testing.T) {
	api, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNotAvailable) {
			t.Fatalf("Open = %v, want ErrNotAvailable or a binding", err)
		}
		return
	}
	// A driver is here: the agent's own PID is no checkpointable CUDA process, or one running.
	if s, err := api.State(1 << 30); err == nil {
		t.Errorf("State of a PID that cannot exist = %s, want an error", s)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// The mock's full cycle moves the memory off the GPU and back, byte for byte, five times.
func TestMockCycleKeepsEveryByte(t *testing.T) {
	m := NewMock()
	m.AddGPU(0, 1<<20)
	want := pattern(600<<10, 0x5a)
	if err := m.Spawn(42, 0, want); err != nil {
		t.Fatal(err)
	}
	for cycle := range 5 {
		for _, step := range []func() error{
			func() error { return m.Lock(42, time.Second) }, func() error { return m.Checkpoint(42) },
		} {
			if err := step(); err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
		}
		if s, _ := m.State(42); s != Checkpointed || m.DeviceUsed(0) != 0 || m.HostBytes(42) != int64(len(want)) {
			t.Fatalf("cycle %d: after checkpoint state %s, device %d, host %d", cycle, s, m.DeviceUsed(0), m.HostBytes(42))
		}
		if m.Touch(42) {
			t.Fatalf("cycle %d: a CUDA call of a checkpointed process went through", cycle)
		}
		// A loan takes 90% of the GPU and leaves: the restore needs the room.
		if err := m.Spawn(99, 0, make([]byte, 900<<10)); err != nil {
			t.Fatalf("cycle %d: loan: %v", cycle, err)
		}
		if err := m.Restore(42); !errors.Is(err, ErrOutOfMemory) {
			t.Fatalf("cycle %d: restore under the loan = %v, want ErrOutOfMemory", cycle, err)
		}
		m.Exit(99)
		if err := m.Restore(42); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(42); err != nil {
			t.Fatal(err)
		}
		got, err := m.Memory(42)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("cycle %d: memory after restore differs (%v)", cycle, err)
		}
	}
	if m.Blocked(42) != 5 {
		t.Errorf("blocked calls = %d, want 5", m.Blocked(42))
	}
}

func TestMockFailures(t *testing.T) {
	m := NewMock()
	m.AddGPU(0, 1<<20)
	for pid := range 4 {
		if err := m.Spawn(pid, 0, pattern(1000, byte(pid))); err != nil {
			t.Fatal(err)
		}
	}
	m.Busy(0, true)
	if err := m.Lock(0, time.Second); !errors.Is(err, ErrTimeout) {
		t.Errorf("lock of a busy process = %v, want ErrTimeout", err)
	}
	if s, _ := m.State(0); s != Running {
		t.Errorf("after a lock timeout the process is %s, want running", s)
	}
	m.NotCheckpointable(1, "MPS client")
	_ = m.Lock(1, time.Second)
	if err := m.Checkpoint(1); !errors.Is(err, ErrNotSupported) {
		t.Errorf("checkpoint of an MPS client = %v, want ErrNotSupported", err)
	}
	if err := m.Checkpoint(2); !errors.Is(err, ErrIllegalState) {
		t.Errorf("checkpoint of a running process = %v, want ErrIllegalState", err)
	}
	_ = m.Lock(3, time.Second)
	_ = m.Checkpoint(3)
	m.FailNext(3, OpRestore, InjectedError(OpRestore, 3, 999, "CUDA_ERROR_UNKNOWN"))
	if err := m.Restore(3); err == nil || errors.Is(err, ErrOutOfMemory) {
		t.Errorf("injected restore failure = %v", err)
	}
	if s, _ := m.State(3); s != Failed {
		t.Errorf("after a failed restore the process is %s, want failed", s)
	}
	if _, err := m.State(77); !errors.Is(err, ErrNoProcess) {
		t.Errorf("state of no process = %v, want ErrNoProcess", err)
	}
}

// A stand-in's errors match the sentinels as the real driver's do.
func TestDriverErrorMatchesItsSentinel(t *testing.T) {
	for _, s := range []error{ErrNoProcess, ErrIllegalState, ErrNotSupported, ErrOutOfMemory, ErrTimeout, ErrPermission, ErrNotAvailable} {
		err := DriverError(OpRestore, 7, s)
		if !errors.Is(err, s) {
			t.Errorf("DriverError(%v) = %v, which is not %v", s, err, s)
		}
		var e *Error
		if !errors.As(err, &e) || e.Op != string(OpRestore) || e.PID != 7 || e.Name == "" {
			t.Errorf("DriverError(%v) = %#v", s, err)
		}
	}
}
