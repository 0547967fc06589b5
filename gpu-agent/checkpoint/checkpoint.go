package checkpoint

import (
	"errors"
	"fmt"
	"time"
)

// State is a CUDA process's checkpoint state (CUprocessState).
type State int

// The driver's values of CUprocessState.
const (
	// Running: the process makes CUDA calls as usual.
	Running State = 0
	// Locked: further CUDA calls block; submitted work has completed.
	Locked State = 1
	// Checkpointed: the GPU memory is on the host and the process holds no GPU resources.
	Checkpointed State = 2
	// Failed: an uncorrectable error during checkpoint or restore; the process's CUDA state is
	// lost.
	Failed State = 3
	// Checkpointing and Restoring: an operation is under way (newer drivers report them).
	Checkpointing State = 4
	Restoring     State = 5
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Locked:
		return "locked"
	case Checkpointed:
		return "checkpointed"
	case Failed:
		return "failed"
	case Checkpointing:
		return "checkpointing"
	case Restoring:
		return "restoring"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// API is the driver's checkpoint API, per process. Each call acts on another process by its
// PID in the caller's PID namespace (the agent runs with the host's), which needs ptrace-level
// rights over it (CAP_SYS_PTRACE, or the same user).
//
// The cycle is Lock (Running → Locked), Checkpoint (Locked → Checkpointed), Restore
// (Checkpointed → Locked), Unlock (Locked → Running).
type API interface {
	// State returns the process's state; ErrNoProcess when it is not a CUDA process (any more).
	State(pid int) (State, error)
	// Lock blocks the process's further CUDA calls once its submitted work completes, waiting
	// at most timeout (0: no limit; the agent always sets one). On ErrTimeout the process is
	// left Running.
	Lock(pid int, timeout time.Duration) error
	// Checkpoint moves a Locked process's GPU memory to host memory and releases its GPU
	// resources. ErrNotSupported: the driver cannot checkpoint this process (an MPS client, IPC
	// memory shared with another process, UVM); it stays Locked.
	Checkpoint(pid int) error
	// Restore brings a Checkpointed process's memory back onto its GPUs and leaves it Locked.
	// ErrOutOfMemory: the GPU lacks the room (a loan has not gone yet); it stays Checkpointed.
	Restore(pid int) error
	// Unlock lets a Locked process make CUDA calls again.
	Unlock(pid int) error
}

// Sentinel errors, matched with errors.Is on the *Error the implementations return.
var (
	// ErrNotAvailable: no driver, or one without the checkpoint API (older than r550).
	ErrNotAvailable = errors.New("the CUDA checkpoint API is not available")
	// ErrTimeout: Lock's timeout passed (the process was mid-kernel, or kept submitting work).
	ErrTimeout = errors.New("timed out")
	// ErrNotSupported: the driver cannot checkpoint this process.
	ErrNotSupported = errors.New("not supported for this process")
	// ErrOutOfMemory: not enough GPU memory to restore.
	ErrOutOfMemory = errors.New("out of GPU memory")
	// ErrIllegalState: the call does not apply in the process's state (e.g. Checkpoint of a
	// Running process).
	ErrIllegalState = errors.New("illegal in the process's state")
	// ErrNoProcess: the PID is not a CUDA process the driver knows.
	ErrNoProcess = errors.New("no such CUDA process")
	// ErrPermission: the caller lacks the rights over the process.
	ErrPermission = errors.New("not permitted")
)

// CUDA driver result codes the sentinels stand for (CUresult).
const (
	cudaErrorInvalidValue   = 1
	cudaErrorOutOfMemory    = 2
	cudaErrorNotInitialized = 3
	cudaErrorIllegalState   = 401
	cudaErrorNotFound       = 500
	cudaErrorNotPermitted   = 800
	cudaErrorNotSupported   = 801
	cudaErrorTimeout        = 909
)

// Error is a failed driver call.
type Error struct {
	// Op is the driver function, e.g. cuCheckpointProcessLock.
	Op  string
	PID int
	// Code is the CUresult, Name its name (cuGetErrorName; empty when unknown).
	Code int
	Name string
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult"
	}
	return fmt.Sprintf("%s(pid %d): %s (%d)", e.Op, e.PID, name, e.Code)
}

// Is maps the driver's codes to the sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Code == cudaErrorTimeout
	case ErrNotSupported:
		return e.Code == cudaErrorNotSupported
	case ErrOutOfMemory:
		return e.Code == cudaErrorOutOfMemory
	case ErrIllegalState:
		return e.Code == cudaErrorIllegalState
	case ErrNoProcess:
		return e.Code == cudaErrorNotFound || e.Code == cudaErrorInvalidValue
	case ErrPermission:
		return e.Code == cudaErrorNotPermitted
	case ErrNotAvailable:
		return e.Code == cudaErrorNotInitialized
	}
	return false
}

// driverCodes are the CUresult, and its name, the driver returns for each sentinel.
var driverCodes = map[error]struct {
	code int
	name string
}{
	ErrNoProcess:    {cudaErrorNotFound, "CUDA_ERROR_NOT_FOUND"},
	ErrIllegalState: {cudaErrorIllegalState, "CUDA_ERROR_ILLEGAL_STATE"},
	ErrNotSupported: {cudaErrorNotSupported, "CUDA_ERROR_NOT_SUPPORTED"},
	ErrOutOfMemory:  {cudaErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"},
	ErrTimeout:      {cudaErrorTimeout, "CUDA_ERROR_TIMEOUT"},
	ErrPermission:   {cudaErrorNotPermitted, "CUDA_ERROR_NOT_PERMITTED"},
	ErrNotAvailable: {cudaErrorNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
}

// DriverError is the *Error the driver returns from op on pid for one of the sentinels, for
// stand-ins of the driver (Mock, the fake GPU nodes); it panics on any other error.
func DriverError(op Op, pid int, sentinel error) error {
	c, ok := driverCodes[sentinel]
	if !ok {
		panic(fmt.Sprintf("checkpoint: no driver code for %v", sentinel))
	}
	return &Error{Op: string(op), PID: pid, Code: c.code, Name: c.name}
}
