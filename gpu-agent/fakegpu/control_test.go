//go:build cgo

package fakegpu_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
)

func TestControlEndpoint(t *testing.T) {
	n, err := fakegpu.New("dgxh200", "kwok-node-0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()

	type reply struct {
		StatusCode int
		Status     string
	}
	put := func(path, body string) reply {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return reply{StatusCode: resp.StatusCode, Status: resp.Status}
	}

	if r := put("/gpus/2", `{"processes":[{"pid":4242,"podUID":"pod-a","usedMiB":2048,"smPercent":35}]}`); r.StatusCode != http.StatusOK {
		t.Fatalf("PUT /gpus/2: %s", r.Status)
	}
	u, _ := n.Device(2).GetUtilizationRates()
	m, _ := n.Device(2).GetMemoryInfo()
	procs, _ := n.Device(2).GetComputeRunningProcesses()
	if u.Gpu != 35 || m.Used != 2048<<20 || len(procs) != 1 || procs[0].Pid != 4242 {
		t.Errorf("after PUT: util=%d used=%d procs=%v", u.Gpu, m.Used, procs)
	}
	if uid, ok := n.PodUID(4242); !ok || uid != "pod-a" {
		t.Errorf("PodUID(4242) = %q, %v", uid, ok)
	}

	put("/gpus/2", `{"utilizationPercent":90,"memoryUsedMiB":100}`)
	u, _ = n.Device(2).GetUtilizationRates()
	m, _ = n.Device(2).GetMemoryInfo()
	if u.Gpu != 90 || m.Used != 100<<20 {
		t.Errorf("overrides: util=%d used=%d", u.Gpu, m.Used)
	}

	put("/gpus/2", `{"failure":"ERROR_GPU_IS_LOST"}`)
	if _, ret := n.Device(2).GetUUID(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("lost GPU answered %v", ret)
	}
	put("/library", `{"failure":"ERROR_DRIVER_NOT_LOADED"}`)
	if _, ret := n.DeviceGetCount(); ret != nvml.ERROR_DRIVER_NOT_LOADED {
		t.Errorf("DeviceGetCount answered %v", ret)
	}

	resp, err := http.Get(srv.URL + "/gpus")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all []fakegpu.DeviceStatus
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 || all[2].Failure != "ERROR_GPU_IS_LOST" || all[0].UUID != fakegpu.DeviceUUID("kwok-node-0", 0) {
		t.Errorf("GET /gpus = %+v", all)
	}

	if r := put("/gpus/9", `{}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("PUT /gpus/9: %s, want 404", r.Status)
	}
	if r := put("/gpus/1", `{"failure":"ERROR_BOGUS"}`); r.StatusCode != http.StatusBadRequest {
		t.Errorf("bogus failure: %s, want 400", r.Status)
	}
	if r := put("/topology", `{"nvlinkGroups":[[0,1]],"fabric":{"clusterUUID":"12345678-9abc-def0-0102-030405060708","cliqueID":3}}`); r.StatusCode != http.StatusNoContent {
		t.Errorf("PUT /topology: %s", r.Status)
	}
	info, ret := n.Device(0).GetGpuFabricInfo()
	if ret != nvml.SUCCESS || info.CliqueId != 3 || info.ClusterUuid[0] != 0x12 {
		t.Errorf("fabric = %+v, %v", info, ret)
	}
}
