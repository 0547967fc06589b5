package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Op names one of the API's calls, for Mock.FailNext.
type Op string

// The API's calls.
const (
	OpState      Op = "cuCheckpointProcessGetState"
	OpLock       Op = "cuCheckpointProcessLock"
	OpCheckpoint Op = "cuCheckpointProcessCheckpoint"
	OpRestore    Op = "cuCheckpointProcessRestore"
	OpUnlock     Op = "cuCheckpointProcessUnlock"
)

// Mock is an API over simulated CUDA processes, for tests without a GPU. Each process holds one
// buffer of device memory on one simulated GPU; a checkpoint moves the buffer to simulated host
// memory (the device copy is gone and its GPU memory free), a restore moves it back into new
// device memory, so that a test can compare the contents byte for byte. A GPU has a capacity:
// a restore fails with ErrOutOfMemory while others (a loan) hold the room, as on a real GPU.
//
// Failures are injected per process and call (FailNext), or as the driver's reasons: a process
// the driver cannot checkpoint (NotCheckpointable: an MPS client, IPC memory, UVM) and one whose
// lock times out (Busy: mid-kernel). The mock is safe for concurrent use.
type Mock struct {
	mu     sync.Mutex
	gpus   map[int]*mockGPU
	procs  map[int]*mockProcess
	faults map[mockFault][]error
	// Delay, if set, is how long a checkpoint or restore of n bytes takes (the host-device copy).
	Delay func(n int64) time.Duration
}

type mockGPU struct{ capacity, used int64 }

type mockProcess struct {
	gpu    int
	state  State
	device []byte // resident memory; nil once checkpointed
	host   []byte // the checkpoint; nil while resident
	// blocked counts CUDA calls made while locked: each would block in the real process.
	blocked int
	// notCheckpointable is why Checkpoint refuses it; busy makes Lock time out.
	notCheckpointable string
	busy              bool
}

type mockFault struct {
	pid int
	op  Op
}

var _ API = (*Mock)(nil)

// NewMock returns a mock with no GPU and no process.
func NewMock() *Mock {
	return &Mock{gpus: map[int]*mockGPU{}, procs: map[int]*mockProcess{}, faults: map[mockFault][]error{}}
}

// AddGPU adds a GPU of capacity bytes.
func (m *Mock) AddGPU(index int, capacity int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gpus[index] = &mockGPU{capacity: capacity}
}

// Spawn starts a CUDA process pid on gpu holding a copy of memory, or fails with ErrOutOfMemory
// when the GPU lacks the room.
func (m *Mock) Spawn(pid, gpu int, memory []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.gpus[gpu]
	if !ok {
		return fmt.Errorf("mock: no GPU %d", gpu)
	}
	if _, ok := m.procs[pid]; ok {
		return fmt.Errorf("mock: process %d exists", pid)
	}
	if g.used+int64(len(memory)) > g.capacity {
		return &Error{Op: "cuMemAlloc", PID: pid, Code: cudaErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	g.used += int64(len(memory))
	m.procs[pid] = &mockProcess{gpu: gpu, device: slices.Clone(memory)}
	return nil
}

// Exit ends process pid: its device memory (or checkpoint) is freed.
func (m *Mock) Exit(pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[pid]; ok {
		m.gpus[p.gpu].used -= int64(len(p.device))
		delete(m.procs, pid)
	}
}

// Touch is process pid making a CUDA call: it succeeds while Running; otherwise the call would
// block until the process is unlocked, and Touch counts it (Blocked) and returns false.
func (m *Mock) Touch(pid int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[pid]
	if !ok {
		return false
	}
	if p.state != Running {
		p.blocked++
		return false
	}
	return true
}

// Blocked is how many CUDA calls process pid made while it was not Running.
func (m *Mock) Blocked(pid int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[pid]; ok {
		return p.blocked
	}
	return 0
}

// Memory returns a copy of process pid's device memory, as the process would read it, or an
// error when it is not resident (checkpointed, failed) or the process is gone.
func (m *Mock) Memory(pid int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[pid]
	switch {
	case !ok:
		return nil, fmt.Errorf("mock: no process %d", pid)
	case p.device == nil:
		return nil, fmt.Errorf("mock: process %d is %s: its memory is not on the GPU", pid, p.state)
	}
	return slices.Clone(p.device), nil
}

// HostBytes is what process pid has checkpointed to host memory (0 while resident).
func (m *Mock) HostBytes(pid int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[pid]; ok {
		return int64(len(p.host))
	}
	return 0
}

// DeviceUsed is the memory in use on gpu.
func (m *Mock) DeviceUsed(gpu int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.gpus[gpu]; ok {
		return g.used
	}
	return 0
}

// NotCheckpointable makes the driver refuse to checkpoint process pid (ErrNotSupported), as it
// does an MPS client, a process sharing memory over IPC, or one using UVM; why is for messages.
func (m *Mock) NotCheckpointable(pid int, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[pid]; ok {
		p.notCheckpointable = why
	}
}

// Busy makes every Lock of process pid time out (a kernel that outlasts the timeout), until
// busy is false again.
func (m *Mock) Busy(pid int, busy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.procs[pid]; ok {
		p.busy = busy
	}
}

// FailNext makes the next call op on process pid fail with err, without any other effect,
// except for a restore: a failed restore that is not ErrOutOfMemory leaves the process Failed,
// its memory lost, as the driver's uncorrectable error does. Several calls queue up.
func (m *Mock) FailNext(pid int, op Op, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := mockFault{pid, op}
	m.faults[k] = append(m.faults[k], err)
}

// fault pops the next injected failure of op on pid; the caller holds mu.
func (m *Mock) fault(pid int, op Op) error {
	k := mockFault{pid, op}
	q := m.faults[k]
	if len(q) == 0 {
		return nil
	}
	if len(q) == 1 {
		delete(m.faults, k)
	} else {
		m.faults[k] = q[1:]
	}
	return q[0]
}

func mockErr(op Op, pid, code int, name string) error {
	return &Error{Op: string(op), PID: pid, Code: code, Name: name}
}

// process returns pid's process and the injected fault of op, or the error for a missing one;
// the caller holds mu.
func (m *Mock) process(op Op, pid int) (*mockProcess, error) {
	p, ok := m.procs[pid]
	if !ok {
		return nil, mockErr(op, pid, cudaErrorNotFound, "CUDA_ERROR_NOT_FOUND")
	}
	if err := m.fault(pid, op); err != nil {
		return p, err
	}
	return p, nil
}

func (m *Mock) State(pid int) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.process(OpState, pid)
	if err != nil {
		return 0, err
	}
	return p.state, nil
}

func (m *Mock) Lock(pid int, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.process(OpLock, pid)
	switch {
	case err != nil:
		return err
	case p.state != Running:
		return mockErr(OpLock, pid, cudaErrorIllegalState, "CUDA_ERROR_ILLEGAL_STATE")
	case p.busy:
		return mockErr(OpLock, pid, cudaErrorTimeout, "CUDA_ERROR_TIMEOUT")
	}
	p.state = Locked
	return nil
}

func (m *Mock) Checkpoint(pid int) error {
	m.mu.Lock()
	p, err := m.process(OpCheckpoint, pid)
	switch {
	case err != nil:
		m.mu.Unlock()
		return err
	case p.state != Locked:
		m.mu.Unlock()
		return mockErr(OpCheckpoint, pid, cudaErrorIllegalState, "CUDA_ERROR_ILLEGAL_STATE")
	case p.notCheckpointable != "":
		m.mu.Unlock()
		return mockErr(OpCheckpoint, pid, cudaErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED")
	}
	p.state = Checkpointing
	n := int64(len(p.device))
	m.mu.Unlock()
	m.sleep(n)
	m.mu.Lock()
	defer m.mu.Unlock()
	// The copy to the host, then the device memory released: a new buffer each way, so that a
	// test comparing contents compares what went through the host.
	p.host = slices.Clone(p.device)
	clear(p.device)
	p.device = nil
	m.gpus[p.gpu].used -= n
	p.state = Checkpointed
	return nil
}

func (m *Mock) Restore(pid int) error {
	m.mu.Lock()
	p, err := m.process(OpRestore, pid)
	if err != nil {
		if p != nil && !isCode(err, cudaErrorOutOfMemory) {
			p.state, p.host = Failed, nil
		}
		m.mu.Unlock()
		return err
	}
	g := m.gpus[p.gpu]
	switch {
	case p.state != Checkpointed:
		m.mu.Unlock()
		return mockErr(OpRestore, pid, cudaErrorIllegalState, "CUDA_ERROR_ILLEGAL_STATE")
	case g.used+int64(len(p.host)) > g.capacity:
		m.mu.Unlock()
		return mockErr(OpRestore, pid, cudaErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY")
	}
	n := int64(len(p.host))
	g.used += n // the room is taken before the copy, as the driver allocates first
	p.state = Restoring
	m.mu.Unlock()
	m.sleep(n)
	m.mu.Lock()
	defer m.mu.Unlock()
	p.device = slices.Clone(p.host)
	p.host = nil
	p.state = Locked
	return nil
}

func (m *Mock) Unlock(pid int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.process(OpUnlock, pid)
	switch {
	case err != nil:
		return err
	case p.state != Locked:
		return mockErr(OpUnlock, pid, cudaErrorIllegalState, "CUDA_ERROR_ILLEGAL_STATE")
	}
	p.state = Running
	return nil
}

func (m *Mock) sleep(n int64) {
	if m.Delay != nil {
		time.Sleep(m.Delay(n))
	}
}

func isCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// InjectedError is an error the driver could return from op, for FailNext: code is a CUresult
// (e.g. 999, CUDA_ERROR_UNKNOWN).
func InjectedError(op Op, pid, code int, name string) error { return mockErr(op, pid, code, name) }
