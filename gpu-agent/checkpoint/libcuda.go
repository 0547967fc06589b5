//go:build cgo && linux

package checkpoint

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;

// CUcheckpointLockArgs as cuda.h lays it out: 64 bytes, all but the timeout reserved and zero.
typedef struct {
	unsigned int timeoutMs;
	unsigned int reserved0;
	uint64_t reserved1[7];
} fw_lock_args;

static void *fw_lib;
static CUresult (*fw_cuInit)(unsigned int);
static CUresult (*fw_cuGetErrorName)(CUresult, const char **);
static CUresult (*fw_lock)(int, fw_lock_args *);
static CUresult (*fw_checkpoint)(int, void *);
static CUresult (*fw_restore)(int, void *);
static CUresult (*fw_unlock)(int, void *);
static CUresult (*fw_get_state)(int, int *);

// fw_load returns NULL when the library and every entry point loaded, else why not.
static const char *fw_load(void) {
	if (fw_lib) return NULL;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return dlerror();
	fw_cuInit = dlsym(lib, "cuInit");
	fw_cuGetErrorName = dlsym(lib, "cuGetErrorName");
	fw_lock = dlsym(lib, "cuCheckpointProcessLock");
	fw_checkpoint = dlsym(lib, "cuCheckpointProcessCheckpoint");
	fw_restore = dlsym(lib, "cuCheckpointProcessRestore");
	fw_unlock = dlsym(lib, "cuCheckpointProcessUnlock");
	fw_get_state = dlsym(lib, "cuCheckpointProcessGetState");
	if (!fw_cuInit || !fw_cuGetErrorName) {
		dlclose(lib);
		return "libcuda.so.1 lacks cuInit";
	}
	if (!fw_lock || !fw_checkpoint || !fw_restore || !fw_unlock || !fw_get_state) {
		dlclose(lib);
		return "libcuda.so.1 has no cuCheckpointProcess* entry points (driver older than r550)";
	}
	fw_lib = lib;
	return NULL;
}

static CUresult fw_init(void) { return fw_cuInit(0); }

static const char *fw_error_name(CUresult r) {
	const char *s = NULL;
	if (fw_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}

static CUresult fw_do_lock(int pid, unsigned int timeout_ms) {
	fw_lock_args a;
	memset(&a, 0, sizeof a);
	a.timeoutMs = timeout_ms;
	return fw_lock(pid, &a);
}
// NULL arguments: checkpoint to and restore from the driver's host memory, on the same GPUs.
static CUresult fw_do_checkpoint(int pid) { return fw_checkpoint(pid, NULL); }
static CUresult fw_do_restore(int pid) { return fw_restore(pid, NULL); }
static CUresult fw_do_unlock(int pid) { return fw_unlock(pid, NULL); }
static CUresult fw_do_get_state(int pid, int *state) { return fw_get_state(pid, state); }
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"time"
)

var (
	openOnce sync.Once
	openErr  error
)

// Open loads libcuda.so.1 with dlopen and initialises the driver (a restore needs cuInit in
// the caller, or persistence mode). It returns ErrNotAvailable, wrapped with why, where there
// is no driver or one without the checkpoint API. The library stays loaded for the process's
// life; every Open returns the same binding.
func Open() (API, error) {
	openOnce.Do(func() {
		if why := C.fw_load(); why != nil {
			openErr = fmt.Errorf("%w: %s", ErrNotAvailable, C.GoString(why))
			return
		}
		if r := C.fw_init(); r != 0 {
			openErr = fmt.Errorf("%w: %w", ErrNotAvailable, libcuda{}.err("cuInit", 0, r))
		}
	})
	if openErr != nil {
		return nil, openErr
	}
	return libcuda{}, nil
}

// libcuda is the real driver. Its calls are thread-safe in the driver.
type libcuda struct{}

func (libcuda) err(op string, pid int, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Op: op, PID: pid, Code: int(r)}
	if s := C.fw_error_name(r); s != nil {
		e.Name = C.GoString(s)
	}
	return e
}

func (l libcuda) State(pid int) (State, error) {
	var s C.int
	if err := l.err("cuCheckpointProcessGetState", pid, C.fw_do_get_state(C.int(pid), &s)); err != nil {
		return 0, err
	}
	return State(s), nil
}

func (l libcuda) Lock(pid int, timeout time.Duration) error {
	ms := timeout.Milliseconds()
	if timeout > 0 && ms == 0 {
		ms = 1 // 0 would mean no timeout
	}
	ms = min(ms, math.MaxUint32)
	return l.err("cuCheckpointProcessLock", pid, C.fw_do_lock(C.int(pid), C.uint(ms)))
}

func (l libcuda) Checkpoint(pid int) error {
	return l.err("cuCheckpointProcessCheckpoint", pid, C.fw_do_checkpoint(C.int(pid)))
}

func (l libcuda) Restore(pid int) error {
	return l.err("cuCheckpointProcessRestore", pid, C.fw_do_restore(C.int(pid)))
}

func (l libcuda) Unlock(pid int) error {
	return l.err("cuCheckpointProcessUnlock", pid, C.fw_do_unlock(C.int(pid)))
}
