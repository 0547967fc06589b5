//go:build cgo

package agent

import (
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
)

func TestOptionsValidate(t *testing.T) {
	ok := DefaultOptions()
	ok.NodeName = "n1"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with a node name: %v", err)
	}
	mock := ok
	mock.NVML, mock.MockControlAddress = "mock:dgxa100", "127.0.0.1:0"
	if err := mock.Validate(); err != nil || mock.MockSystem() != "dgxa100" {
		t.Fatalf("mock options: %v (system %q)", err, mock.MockSystem())
	}

	bad := DefaultOptions()
	bad.NVML = "mock:dgx-1"
	bad.MockControlAddress = "127.0.0.1:0"
	bad.UsageInterval = 0
	bad.IdleThreshold = 100
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid options accepted")
	}
	for _, want := range []string{"--node-name", "unknown mock system", "--usage-interval", "--idle-threshold"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	realWithControl := ok
	realWithControl.MockControlAddress = "127.0.0.1:0"
	if err := realWithControl.Validate(); err == nil || !strings.Contains(err.Error(), "needs --nvml=mock") {
		t.Errorf("control endpoint on a real node: %v", err)
	}
}

func TestOpenLibraryMockResolvesFakeProcesses(t *testing.T) {
	o := DefaultOptions()
	o.NodeName, o.NVML = "n1", "mock:dgxh200"
	lib, err := OpenLibrary(&o)
	if err != nil {
		t.Fatal(err)
	}
	if lib.Fake == nil {
		t.Fatal("mock library without a fake node")
	}
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	if n, _ := lib.DeviceCount(); n != 8 {
		t.Errorf("DeviceCount = %d", n)
	}
	lib.Fake.Device(1).SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 77, PodUID: "pod-uid"}}})
	if uid, ok := lib.Resolver.PodUID(77); !ok || uid != "pod-uid" {
		t.Errorf("fake process resolved to %q, %v", uid, ok)
	}
}
