package mutatingwebhook_test

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/gpurequest/gpurequesttest"
	mutatingwebhook "github.com/fairway-sched/fairway/mutating-webhook"
)

// TestGPUShareCases runs the GPU-share table that gpurequest, the scheduler's snapshot and the CLI
// also run through the whole admission path: a refused input is denied (403) with the parser's
// message, an accepted one is admitted with the canonical value under fairway's key, and what
// the webhook leaves on the pod reads back to the same request.
func TestGPUShareCases(t *testing.T) {
	state := defaultState()
	state.gpuMemoryMiB = gpurequest.MaxMemoryMiB // only the parser refuses here, never the cluster's GPUs
	h := newHandler(state, nil, mutatingwebhook.Options{})
	for _, tc := range gpurequesttest.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			pod := makePod("p").obj()
			pod.Annotations = maps.Clone(tc.Annotations)
			req := createRequest(t, pod, "team-a")
			resp := h.Handle(context.Background(), req)
			if tc.Refused() {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden {
					t.Fatalf("result %+v, want denied (403) with %q", resp.Result, tc.Err)
				}
				if msg := resp.Result.Message; !strings.HasPrefix(msg, tc.ErrKey+" ") || !strings.Contains(msg, tc.Err) {
					t.Fatalf("denied with %q, want a message starting with %s and containing %q", msg, tc.ErrKey, tc.Err)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied (%+v), want admitted with %d milli-GPU / %d MiB", resp.Result, tc.Milli, tc.MemoryMiB)
			}
			got := applyPatch(t, req, resp)
			wantFrac, wantMem := "", ""
			if tc.Milli > 0 {
				wantFrac = gpurequest.FormatMilli(tc.Milli)
			}
			if tc.MemoryMiB > 0 {
				wantMem = strconv.FormatInt(tc.MemoryMiB, 10)
			}
			if f, m := got.Annotations[gpurequesttest.Frac], got.Annotations[gpurequesttest.Mem]; f != wantFrac || m != wantMem {
				t.Errorf("admitted with %s=%q %s=%q, want %q and %q", gpurequesttest.Frac, f, gpurequesttest.Mem, m, wantFrac, wantMem)
			}
			again, err := gpurequest.Parse(got.Annotations)
			if err != nil || again.Milli != tc.Milli || again.MemoryMiB != tc.MemoryMiB {
				t.Errorf("the admitted pod reads back as %+v, %v; want %d milli-GPU / %d MiB", again, err, tc.Milli, tc.MemoryMiB)
			}
		})
	}
}
