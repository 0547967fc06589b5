package gpu

import (
	"errors"
	"fmt"
)

// Sentinel errors a Library or Device returns, wrapped in an *Error, so that callers decide with
// errors.Is instead of reading library-specific codes.
var (
	// ErrLibraryNotFound: libnvidia-ml.so.1 could not be loaded, so no NVIDIA driver is
	// installed or it is not visible to the agent (missing runtime class or mounts).
	ErrLibraryNotFound = errors.New("NVML library not found")
	// ErrDriverNotLoaded: the library loaded but the kernel driver is not running.
	ErrDriverNotLoaded = errors.New("NVIDIA driver not loaded")
	// ErrGPULost: the device fell off the bus or stopped answering; it needs a reset.
	ErrGPULost = errors.New("GPU is lost")
	// ErrNotSupported: the device or driver does not support the query.
	ErrNotSupported = errors.New("not supported")
	// ErrNotFound: the query had nothing to report (for example no process samples yet).
	ErrNotFound = errors.New("not found")
	// ErrUnknown is every other library failure.
	ErrUnknown = errors.New("NVML error")
)

// Error is a failed library call: which operation, on which device, and the library's own code.
type Error struct {
	// Op is the library function, e.g. "nvmlDeviceGetUUID".
	Op string
	// Device is the device index, or -1 for a library-wide call.
	Device int
	// Code is the library's name for the failure, e.g. "ERROR_GPU_IS_LOST"; metrics use it
	// as a label value.
	Code string
	// Message is the library's description of the failure.
	Message string
	// Kind is one of the sentinel errors above.
	Kind error
}

func (e *Error) Error() string {
	what := e.Message
	if what == "" {
		what = e.Code
	} else if e.Code != "" && e.Code != e.Message {
		what += " (" + e.Code + ")"
	}
	if e.Device >= 0 {
		return fmt.Sprintf("%s on GPU %d: %s", e.Op, e.Device, what)
	}
	return fmt.Sprintf("%s: %s", e.Op, what)
}

// Unwrap makes errors.Is(err, ErrGPULost) and friends work.
func (e *Error) Unwrap() error { return e.Kind }

// Code returns the library code of err ("ERROR_GPU_IS_LOST", ...) for labelling, or "other"
// when err is not an *Error.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return "other"
}
