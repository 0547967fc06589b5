//go:build cgo

package fakegpu_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/gpu-agent/checkpoint"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
)

// A fake node's checkpoint API takes a process and its memory off the GPU and puts them back
// only when the GPU has the room, and the control endpoint shows where each process is.
func TestNodeCheckpoints(t *testing.T) {
	n, err := fakegpu.New("dgxh100", "kwok-node-0")
	if err != nil {
		t.Fatal(err)
	}
	api := n.Checkpoints()
	total := func() uint64 { m, _ := n.Device(1).GetMemoryInfo(); return m.Total }()
	owner := fakegpu.Process{PID: 4242, PodUID: "nb", UsedMiB: 30000, CPUMillis: 1500}
	n.Device(1).SetState(fakegpu.State{Processes: []fakegpu.Process{owner}})

	if s, err := api.State(4242); err != nil || s != checkpoint.Running {
		t.Fatalf("State = %s, %v; want running", s, err)
	}
	if _, err := api.State(7); !errors.Is(err, checkpoint.ErrNoProcess) {
		t.Errorf("State of no process: %v", err)
	}
	if err := api.Checkpoint(4242); !errors.Is(err, checkpoint.ErrIllegalState) {
		t.Errorf("Checkpoint of a running process: %v, want illegal state", err)
	}
	if err := api.Lock(4242, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := api.Checkpoint(4242); err != nil {
		t.Fatal(err)
	}
	m, _ := n.Device(1).GetMemoryInfo()
	procs, _ := n.Device(1).GetComputeRunningProcesses()
	if m.Used != 0 || len(procs) != 0 {
		t.Fatalf("checkpointed: used %d, processes %v; want the GPU empty", m.Used, procs)
	}
	if uid, ok := n.PodUID(4242); !ok || uid != "nb" {
		t.Errorf("PodUID of a checkpointed process = %q, %v", uid, ok)
	}
	// A loan takes 90% of the GPU: the restore waits for it to go.
	loanMiB := total * 9 / 10 >> 20
	n.Device(1).SetState(fakegpu.State{Processes: []fakegpu.Process{owner, {PID: 5151, PodUID: "loan", UsedMiB: loanMiB}}})
	if err := api.Restore(4242); !errors.Is(err, checkpoint.ErrOutOfMemory) {
		t.Fatalf("Restore under the loan: %v, want out of memory", err)
	}
	if s, _ := api.State(4242); s != checkpoint.Checkpointed {
		t.Fatalf("after a restore short of memory: %s, want still checkpointed", s)
	}

	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/gpus/1")
	if err != nil {
		t.Fatal(err)
	}
	var st fakegpu.DeviceStatus
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Checkpoint[4242] != "checkpointed" || len(st.Checkpoint) != 1 {
		t.Fatalf("GET /gpus/1 = %+v, %v; want 4242 checkpointed", st, err)
	}
	// The owner's next cell, while blocked: its CPU time.
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/gpus/1", strings.NewReader(`{"processes":[{"pid":4242,"podUID":"nb","usedMiB":30000,"cpuMillis":1800}]}`))
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if cpu, err := n.ProcessCPU(4242); err != nil || cpu != 1800*time.Millisecond {
		t.Fatalf("ProcessCPU = %v, %v", cpu, err)
	}
	if err := api.Restore(4242); err != nil {
		t.Fatal(err)
	}
	if err := api.Unlock(4242); err != nil {
		t.Fatal(err)
	}
	m, _ = n.Device(1).GetMemoryInfo()
	if s, _ := api.State(4242); s != checkpoint.Running || m.Used != 30000<<20 {
		t.Fatalf("restored: %s with %d bytes used; want running with its 30000 MiB", s, m.Used)
	}

	// A process the driver cannot checkpoint stays locked; one that exits takes its state along.
	n.Device(2).SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 6000, UsedMiB: 10, NotCheckpointable: "IPC"}}})
	_ = api.Lock(6000, time.Second)
	if err := api.Checkpoint(6000); !errors.Is(err, checkpoint.ErrNotSupported) {
		t.Errorf("Checkpoint of a process the driver cannot checkpoint: %v", err)
	}
	n.Device(2).SetState(fakegpu.State{})
	n.Device(2).SetState(fakegpu.State{Processes: []fakegpu.Process{{PID: 6000, UsedMiB: 10}}})
	if s, _ := api.State(6000); s != checkpoint.Running {
		t.Errorf("a new process with an old PID starts %s, want running", s)
	}
}
