//go:build cgo

package nvmllib_test

import (
	"errors"
	"testing"

	"github.com/fairway-sched/fairway/gpu-agent/gpu"
	"github.com/fairway-sched/fairway/gpu-agent/nvmllib"
)

// On a machine without the NVIDIA driver the real library must fail cleanly with an error the
// agent can explain, not crash.
func TestOpenWithoutDriver(t *testing.T) {
	lib := nvmllib.Open()
	err := lib.Init()
	if err == nil {
		_ = lib.Shutdown()
		t.Skip("an NVIDIA driver is installed here; nothing to check")
	}
	if !errors.Is(err, gpu.ErrLibraryNotFound) && !errors.Is(err, gpu.ErrDriverNotLoaded) {
		t.Fatalf("Init error = %v, want ErrLibraryNotFound or ErrDriverNotLoaded", err)
	}
	if gpu.Code(err) == "other" {
		t.Errorf("error %v carries no NVML code", err)
	}
}
