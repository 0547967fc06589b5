//go:build cgo

package fakegpu

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Handler is the fake node's HTTP control endpoint, served by the agent only in mock mode
// (--mock-control-address), so the e2e tests and the demo can drive a fake node's GPUs from
// outside the agent process:
//
//	GET  /gpus           -> []DeviceStatus
//	GET  /gpus/{index}   -> DeviceStatus
//	PUT  /gpus/{index}   DeviceUpdate -> DeviceStatus
//	PUT  /library        LibraryUpdate
//	PUT  /topology       TopologyUpdate
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /gpus", func(w http.ResponseWriter, _ *http.Request) {
		out := make([]DeviceStatus, 0, n.Len())
		for i := range n.Len() {
			out = append(out, n.status(i))
		}
		writeJSON(w, out)
	})
	mux.HandleFunc("GET /gpus/{index}", func(w http.ResponseWriter, r *http.Request) {
		i, ok := n.index(w, r)
		if ok {
			writeJSON(w, n.status(i))
		}
	})
	mux.HandleFunc("PUT /gpus/{index}", func(w http.ResponseWriter, r *http.Request) {
		i, ok := n.index(w, r)
		if !ok {
			return
		}
		var u DeviceUpdate
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := n.update(i, u); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, n.status(i))
	})
	mux.HandleFunc("PUT /library", func(w http.ResponseWriter, r *http.Request) {
		var u LibraryUpdate
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		ret, err := parseReturn(u.Failure)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n.FailLibrary(ret)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /topology", func(w http.ResponseWriter, r *http.Request) {
		var u TopologyUpdate
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if u.Fabric != nil {
			b, err := hex.DecodeString(strings.ReplaceAll(u.Fabric.ClusterUUIDString, "-", ""))
			if err != nil || len(b) != 16 {
				http.Error(w, "fabric.clusterUUID must be a UUID", http.StatusBadRequest)
				return
			}
			copy(u.Fabric.ClusterUUID[:], b)
		}
		n.SetNVLinkGroups(u.NVLinkGroups)
		n.SetFabric(u.Fabric)
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func (n *Node) index(w http.ResponseWriter, r *http.Request) (int, bool) {
	i, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || i < 0 || i >= n.Len() {
		http.Error(w, fmt.Sprintf("no GPU %q on this node (0..%d)", r.PathValue("index"), n.Len()-1), http.StatusNotFound)
		return 0, false
	}
	return i, true
}

func (n *Node) status(i int) DeviceStatus {
	d := n.Device(i)
	s := DeviceStatus{Index: i, UUID: d.Device.UUID, Name: d.Config.Name, State: d.State()}
	if f := d.Failure(); f != nvml.SUCCESS {
		s.Failure = returnNames[f]
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range s.Processes {
		if st, ok := n.ckpt[p.PID]; ok {
			if s.Checkpoint == nil {
				s.Checkpoint = map[uint32]string{}
			}
			s.Checkpoint[p.PID] = st.String()
		}
	}
	return s
}

func (n *Node) update(i int, u DeviceUpdate) error {
	d := n.Device(i)
	if u.Failure != nil {
		ret, err := parseReturn(*u.Failure)
		if err != nil {
			return err
		}
		d.Fail(ret)
	}
	s := d.State()
	if u.ClearOverrides {
		s.UtilizationPercent, s.MemoryUsedMiB = nil, nil
	}
	if u.UtilizationPercent != nil {
		s.UtilizationPercent = u.UtilizationPercent
	}
	if u.MemoryUsedMiB != nil {
		s.MemoryUsedMiB = u.MemoryUsedMiB
	}
	if u.Processes != nil {
		s.Processes = *u.Processes
	}
	d.SetState(s)
	return nil
}

// returnNames are the NVML failures a test may inject by name.
var returnNames = map[nvml.Return]string{
	nvml.ERROR_GPU_IS_LOST:       "ERROR_GPU_IS_LOST",
	nvml.ERROR_UNKNOWN:           "ERROR_UNKNOWN",
	nvml.ERROR_DRIVER_NOT_LOADED: "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_LIBRARY_NOT_FOUND: "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_TIMEOUT:           "ERROR_TIMEOUT",
	nvml.ERROR_RESET_REQUIRED:    "ERROR_RESET_REQUIRED",
	nvml.ERROR_NOT_SUPPORTED:     "ERROR_NOT_SUPPORTED",
}

func parseReturn(name string) (nvml.Return, error) {
	if name == "" || name == "SUCCESS" {
		return nvml.SUCCESS, nil
	}
	for ret, n := range returnNames {
		if n == name {
			return ret, nil
		}
	}
	return nvml.SUCCESS, fmt.Errorf("unknown NVML failure %q", name)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
