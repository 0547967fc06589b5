package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

var draNow = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// draCluster is nodes n0..n<k-1> with 8 H100s each published through DRA, NVIDIA's device
// class, and queue team-a serving namespace team-a with a GPU quota.
func draCluster(t testing.TB, nodes int, quota string) *snapshot.Snapshot {
	t.Helper()
	snap := snapshot.New()
	snap.UpsertDeviceClass(testutil.NVIDIADeviceClass())
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		if err := snap.UpsertNode(testutil.MakeNode(name).Label("fairway.dev/nvlink-domain", "nvl-"+name).Obj()); err != nil {
			t.Fatal(err)
		}
		snap.UpsertResourceSlice(testutil.NVIDIAGPUSlice(name, 8, "NVIDIA H100 80GB HBM3", 80))
	}
	if err := snap.UpsertQueue(testutil.MakeQueue("team-a").Namespaces("team-a").GPU(quota, 1, "").Obj()); err != nil {
		t.Fatal(err)
	}
	return snap
}

// commitClaims writes the engine's allocations into the claims as the runtime does, and binds
// the pods, as the API server's events would tell the snapshot.
func commitClaims(t *testing.T, snap *snapshot.Snapshot, res *engine.Result, pods map[string]*testutil.PodWrapper) {
	t.Helper()
	for _, b := range res.Bindings {
		p := pods[b.Pod.Name]
		for _, ca := range b.Claims {
			c := snap.ResourceClaim(ca.Claim).Obj.DeepCopy()
			if ca.Result != nil {
				c.Status.Allocation = ca.Result
			}
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			snap.UpsertResourceClaim(c)
		}
		if err := snap.UpsertPod(p.Node(b.Node).Obj()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDRAGangOfClaimsFromTemplates(t *testing.T) {
	snap := draCluster(t, 2, "8")
	pods := map[string]*testutil.PodWrapper{}
	for i := range 4 {
		name := fmt.Sprintf("w%d", i)
		p := testutil.MakePod("team-a", name).Queue("team-a").PodGroup("job").MinMember(4).ClaimTemplate("gpu", "one-gpu", name+"-gpu-x")
		pods[name] = p
		snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("team-a", name+"-gpu-x", 1), p.Obj()))
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	eng := engine.New(engine.Options{})
	res := eng.Schedule(snap, draNow)
	if len(res.Bindings) != 4 {
		t.Fatalf("bindings = %d, want 4; reasons %+v", len(res.Bindings), res.Unschedulable)
	}
	devices := map[string]bool{}
	for _, b := range res.Bindings {
		if b.Node != res.Bindings[0].Node {
			t.Errorf("gang split over nodes: %s on %s, %s on %s", b.Pod, b.Node, res.Bindings[0].Pod, res.Bindings[0].Node)
		}
		if len(b.Claims) != 1 || b.Claims[0].Result == nil || len(b.Claims[0].Result.Devices.Results) != 1 {
			t.Fatalf("binding %s: claims %+v, want one allocated claim with one device", b.Pod, b.Claims)
		}
		r := b.Claims[0].Result.Devices.Results[0]
		if r.Pool != b.Node || r.Driver != "gpu.nvidia.com" {
			t.Errorf("binding %s on %s got device %s/%s/%s", b.Pod, b.Node, r.Driver, r.Pool, r.Device)
		}
		key := r.Pool + "/" + r.Device
		if devices[key] {
			t.Errorf("device %s allocated twice", key)
		}
		devices[key] = true
		if len(b.GPUs) != 1 {
			t.Errorf("binding %s: GPUs %v, want the one device's slot", b.Pod, b.GPUs)
		}
	}
	if got := res.Queues[0].Allocated["gpu"]; got != 4000 {
		t.Errorf("team-a allocated %d milli-GPU, want 4000 (4 claims of one GPU)", got)
	}
	if got := res.Queues[0].Allocated["gpu/H100"]; got != 4000 {
		t.Errorf("team-a allocated %d milli-GPU of gpu/H100, want 4000 (productName)", got)
	}
	// The runtime writes the claims and binds; the next cycle keeps the devices taken.
	commitClaims(t, snap, &res, pods)
	n := snap.Node(res.Bindings[0].Node)
	if free := n.FreeWholeSlots(); free != 4 {
		t.Errorf("node %s has %d free GPUs after 4 one-GPU claims, want 4", n.Name, free)
	}
	// A 5th pod asking for 5 GPUs in one claim does not fit the half-used node.
	big := testutil.MakePod("team-a", "big").Queue("team-a").ClaimRef("gpus", "five")
	snap.UpsertResourceClaim(testutil.GPUClaim("team-a", "five", 5))
	if err := snap.UpsertPod(big.Obj()); err != nil {
		t.Fatal(err)
	}
	res = eng.Schedule(snap, draNow.Add(time.Second))
	if len(res.Bindings) != 1 || res.Bindings[0].Node == n.Name {
		t.Fatalf("5-GPU claim: bindings %+v, want one on the other node", res.Bindings)
	}
}

func TestDRASelectorsAndForeignAllocations(t *testing.T) {
	snap := draCluster(t, 1, "8")
	// Another scheduler's claim holds gpu-0 and gpu-1.
	foreign := testutil.GPUClaim("other", "theirs", 2)
	foreign.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n0", Device: "gpu-0"},
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n0", Device: "gpu-1"},
	}}}
	snap.UpsertResourceClaim(foreign)
	if free := snap.Node("n0").FreeWholeSlots(); free != 6 {
		t.Fatalf("free GPUs with a foreign claim on 2: %d, want 6", free)
	}
	// A claim whose selector wants gpu-1 cannot have it; one that wants gpu-7 gets it.
	for _, tc := range []struct {
		name, device string
		fits         bool
	}{{"want1", "gpu-1", false}, {"want7", "gpu-7", true}} {
		p := testutil.MakePod("team-a", tc.name).Queue("team-a").ClaimRef("gpu", tc.name)
		snap.UpsertResourceClaim(testutil.GPUClaim("team-a", tc.name, 1, fmt.Sprintf("device.attributes['gpu.nvidia.com'].uuid == 'GPU-n0-%s'", tc.device[4:])))
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	res := engine.New(engine.Options{}).Schedule(snap, draNow)
	if len(res.Bindings) != 1 || res.Bindings[0].Pod.Name != "want7" {
		t.Fatalf("bindings %+v, want only want7", res.Bindings)
	}
	if d := res.Bindings[0].Claims[0].Result.Devices.Results[0].Device; d != "gpu-7" {
		t.Errorf("want7 got %s", d)
	}
	var reason string
	for _, u := range res.Unschedulable {
		reason += u.Message
	}
	if !slices.ContainsFunc(res.Unschedulable, func(u engine.GangReason) bool { return u.Gang.Name == "want1" }) {
		t.Errorf("want1 not reported waiting: %q", reason)
	}
	// The foreign claim is deallocated: its devices are free again.
	foreign = foreign.DeepCopy()
	foreign.Status.Allocation = nil
	snap.UpsertResourceClaim(foreign)
	res = engine.New(engine.Options{}).Schedule(snap, draNow.Add(time.Second))
	if len(res.Bindings) != 1 || res.Bindings[0].Pod.Name != "want1" {
		t.Fatalf("after deallocation: bindings %+v, want want1", res.Bindings)
	}
}

func TestDRAKindsDoNotMix(t *testing.T) {
	snap := draCluster(t, 1, "8")
	if err := snap.UpsertNode(testutil.MakeNode("plugin").GPUs(8, "H100").Obj()); err != nil {
		t.Fatal(err)
	}
	plain := testutil.MakePod("team-a", "plain").Queue("team-a").GPU(8)
	dra := testutil.MakePod("team-a", "dra").Queue("team-a").ClaimRef("gpu", "eight")
	snap.UpsertResourceClaim(testutil.GPUClaim("team-a", "eight", 8))
	for _, p := range []*testutil.PodWrapper{plain, dra} {
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	res := engine.New(engine.Options{}).Schedule(snap, draNow)
	got := map[string]string{}
	for _, b := range res.Bindings {
		got[b.Pod.Name] = b.Node
	}
	if got["plain"] != "plugin" || got["dra"] != "n0" {
		t.Fatalf("placements %v, want plain on the device-plugin node and dra on the DRA node", got)
	}
}

func TestDRAMissingClaimWaits(t *testing.T) {
	snap := draCluster(t, 1, "8")
	p := testutil.MakePod("team-a", "p").Queue("team-a").ClaimTemplate("gpu", "one-gpu", "")
	if err := snap.UpsertPod(p.Obj()); err != nil {
		t.Fatal(err)
	}
	res := engine.New(engine.Options{}).Schedule(snap, draNow)
	if len(res.Bindings) != 0 || len(res.Unschedulable) != 1 {
		t.Fatalf("bindings %+v, waiting %+v: want the pod waiting for its claim", res.Bindings, res.Unschedulable)
	}
	// kube-controller-manager makes the claim and names it in the pod's status.
	p = testutil.MakePod("team-a", "p").Queue("team-a").ClaimTemplate("gpu", "one-gpu", "p-gpu-1")
	snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("team-a", "p-gpu-1", 1), p.Obj()))
	if err := snap.UpsertPod(p.Obj()); err != nil {
		t.Fatal(err)
	}
	res = engine.New(engine.Options{}).Schedule(snap, draNow.Add(time.Second))
	if len(res.Bindings) != 1 {
		t.Fatalf("bindings %+v after the claim appeared, want 1 (%+v)", res.Bindings, res.Unschedulable)
	}
	// A failed binding takes the engine's allocation back.
	if err := snap.Forget(types.NamespacedName{Namespace: "team-a", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	if c := snap.ResourceClaim(types.NamespacedName{Namespace: "team-a", Name: "p-gpu-1"}); c.Allocation() != nil {
		t.Errorf("claim still allocated after Forget: %+v", c.Allocation())
	}
	if len(snap.AllocatedDevices()) != 0 {
		t.Errorf("allocated devices after Forget: %v", snap.AllocatedDevices())
	}
}

// TestDRAReclaim: a borrower's 4-pod DRA gang on n0, another scheduler's DRA claims on 6 more
// devices wherever they are (beside the gang, all on the other node, split; the claims alone or
// with the bound pods that reserve them), and a lender's gang of 8 under its quota: 6 devices are
// free, so at least 2 of the gang's must be reclaimed.
func TestDRAReclaim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		devs     []string
		withPods bool
	}{
		{"pinned", []string{"n0/gpu-4", "n0/gpu-5", "n0/gpu-6", "n0/gpu-7", "n1/gpu-0", "n1/gpu-1"}, false},
		{"pinned-pods", []string{"n0/gpu-4", "n0/gpu-5", "n0/gpu-6", "n0/gpu-7", "n1/gpu-0", "n1/gpu-1"}, true},
		{"all-n1", []string{"n1/gpu-0", "n1/gpu-1", "n1/gpu-2", "n1/gpu-3", "n1/gpu-4", "n1/gpu-5"}, false},
		{"all-n1-pods", []string{"n1/gpu-0", "n1/gpu-1", "n1/gpu-2", "n1/gpu-3", "n1/gpu-4", "n1/gpu-5"}, true},
		{"3-3-pods", []string{"n0/gpu-4", "n0/gpu-5", "n0/gpu-6", "n1/gpu-0", "n1/gpu-1", "n1/gpu-2"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := draCluster(t, 2, "0")
			if err := snap.UpsertQueue(testutil.MakeQueue("team-a").Namespaces("team-a").Obj()); err != nil {
				t.Fatal(err)
			}
			if err := snap.UpsertQueue(testutil.MakeQueue("lend").Namespaces("lend").GPU("16", 1, "").Obj()); err != nil {
				t.Fatal(err)
			}
			eng := engine.New(engine.Options{})
			pods := map[string]*testutil.PodWrapper{}
			for i := range 4 {
				name := fmt.Sprintf("w%d", i)
				p := testutil.MakePod("team-a", name).Queue("team-a").PodGroup("job").MinMember(4).TopologyRequired("fairway.dev/nvlink-domain").ClaimTemplate("gpu", "one-gpu", name+"-gpu")
				pods[name] = p
				snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("team-a", name+"-gpu", 1), p.Obj()))
				if err := snap.UpsertPod(p.Obj()); err != nil {
					t.Fatal(err)
				}
			}
			res := eng.Schedule(snap, draNow)
			commitClaims(t, snap, &res, pods)
			// A node update puts its pods back on their devices (the slots their own claims claim).
			if err := snap.UpsertNode(testutil.MakeNode("n0").Label("fairway.dev/nvlink-domain", "nvl-n0").Label("x", "y").Obj()); err != nil {
				t.Fatal(err)
			}
			if n := snap.Node("n0"); n.Floating != 0 || n.FreeWholeSlots() != 4 {
				t.Fatalf("after a node update: %d floating GPUs, %d free; want 0 and 4", n.Floating, n.FreeWholeSlots())
			}
			for i, dev := range tc.devs {
				name := fmt.Sprintf("k%d", i)
				c := testutil.GPUClaim("plain", name+"-gpu", 1)
				c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: "gpu.nvidia.com", Pool: dev[:2], Device: dev[3:]}}}}
				if tc.withPods {
					p := testutil.MakePod("plain", name).SchedulerName("default-scheduler").ClaimTemplate("gpu", "one-gpu", name+"-gpu").Node(dev[:2])
					c = testutil.OwnedBy(c, p.Obj())
					c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: p.UID}}
					snap.UpsertResourceClaim(c)
					if err := snap.UpsertPod(p.Obj()); err != nil {
						t.Fatal(err)
					}
				} else {
					snap.UpsertResourceClaim(c)
				}
			}
			for i := range 8 {
				name := fmt.Sprintf("l%d", i)
				p := testutil.MakePod("lend", name).Queue("lend").CPU("100m").Memory("128Mi").PodGroup("lend").MinMember(8).ClaimTemplate("gpu", "one-gpu", name+"-gpu")
				snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("lend", name+"-gpu", 1), p.Obj()))
				if err := snap.UpsertPod(p.Obj()); err != nil {
					t.Fatal(err)
				}
			}
			if free := snap.Node("n0").FreeWholeSlots() + snap.Node("n1").FreeWholeSlots(); free != 6 {
				t.Fatalf("%d GPUs free before the lender's gang, want 6", free)
			}
			res = eng.Schedule(snap, draNow.Add(time.Minute))
			if len(res.Evictions) < 2 {
				t.Errorf("evictions %+v, want at least 2 of team-a's pods; waiting: %+v", res.Evictions, res.Unschedulable)
			}
		})
	}
}

// BenchmarkDRACycle: one cycle placing 500 pending pods, each with its own one-GPU claim, on 500
// nodes that publish 8 GPUs each in ResourceSlices (4,000 devices): every placement runs the
// structured allocator on its node.
func BenchmarkDRACycle(b *testing.B) {
	build := func() *snapshot.Snapshot {
		snap := draCluster(b, 500, "4000")
		for i := range 500 {
			name := fmt.Sprintf("p%d", i)
			p := testutil.MakePod("team-a", name).Queue("team-a").CPU("1").ClaimTemplate("gpu", "one-gpu", name+"-gpu")
			snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("team-a", name+"-gpu", 1), p.Obj()))
			if err := snap.UpsertPod(p.Obj()); err != nil {
				b.Fatal(err)
			}
		}
		return snap
	}
	eng := engine.New(engine.Options{})
	for b.Loop() {
		b.StopTimer()
		snap := build()
		b.StartTimer()
		res := eng.Schedule(snap, draNow)
		if len(res.Bindings) != 500 {
			b.Fatalf("bindings %d, want 500", len(res.Bindings))
		}
	}
}

// TestDRAUnservedClaimIsUnsupported: a pod that reached fairway with a claim fairway does not
// serve (a share of a GPU by something other than its memory: the webhook leaves such pods to
// kube-scheduler) is reported UnsupportedConstraint, naming the claim and the request, rather
// than left waiting without a word; once its claim is one fairway serves, it is placed.
func TestDRAUnservedClaimIsUnsupported(t *testing.T) {
	snap := draCluster(t, 1, "8")
	p := testutil.MakePod("team-a", "p").Queue("team-a").ClaimTemplate("gpu", "part-gpu", "p-gpu-1")
	c := testutil.OwnedBy(testutil.GPUClaim("team-a", "p-gpu-1", 1), p.Obj())
	c.Spec.Devices.Requests[0].Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		"multiprocessors": resource.MustParse("66"),
	}}
	snap.UpsertResourceClaim(c)
	if err := snap.UpsertPod(p.Obj()); err != nil {
		t.Fatal(err)
	}
	res := engine.New(engine.Options{}).Schedule(snap, draNow)
	if len(res.Bindings) != 0 || len(res.Unschedulable) != 1 {
		t.Fatalf("bindings %+v, unschedulable %+v: want the pod unschedulable", res.Bindings, res.Unschedulable)
	}
	if u := res.Unschedulable[0]; u.Code != engine.ReasonUnsupported || !strings.Contains(u.Message, `ResourceClaim p-gpu-1 (request "gpu": capacity "multiprocessors" (a share of a GPU is counted by its "memory" only))`) {
		t.Errorf("reason %s %q, want %s naming the claim and its capacity request", u.Code, u.Message, engine.ReasonUnsupported)
	}
	snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUClaim("team-a", "p-gpu-1", 1), p.Obj()))
	if err := snap.UpsertPod(p.Obj()); err != nil {
		t.Fatal(err)
	}
	if res := engine.New(engine.Options{}).Schedule(snap, draNow.Add(time.Second)); len(res.Bindings) != 1 {
		t.Errorf("bindings %+v with a claim for a whole GPU, want 1 (%+v)", res.Bindings, res.Unschedulable)
	}
}

// TestDRAShares: claims for part of a GPU (consumable capacity, on GPUs that allow several
// allocations) are shares in fairway's accounting, counted by the memory they consume exactly as
// a device-plugin pod's fairway.dev/gpu-memory share is, beside such a share on a device-plugin
// node; the allocator packs them onto devices by capacity, never past a device's memory, and
// the next cycle reads the written allocations back to the same accounting.
func TestDRAShares(t *testing.T) {
	snap := snapshot.New()
	snap.UpsertDeviceClass(testutil.NVIDIADeviceClass())
	if err := snap.UpsertNode(testutil.MakeNode("dra").Obj()); err != nil {
		t.Fatal(err)
	}
	snap.UpsertResourceSlice(testutil.SharedGPUSlice("dra", 2, "NVIDIA H100 80GB HBM3", 80))
	if err := snap.UpsertNode(testutil.MakeNode("plugin").GPUs(1, "H100").GPUMemory(80 << 10).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := snap.UpsertQueue(testutil.MakeQueue("team-a").Namespaces("team-a").GPU("4", 1, "").Obj()); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*testutil.PodWrapper{}
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		p := testutil.MakePod("team-a", name).Queue("team-a").ClaimTemplate("gpu", "part-gpu", name+"-gpu")
		pods[name] = p
		snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUShareClaim("team-a", name+"-gpu", "30Gi"), p.Obj()))
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	plugin := testutil.MakePod("team-a", "plugin-share").Queue("team-a").Fraction("0.5")
	if err := snap.UpsertPod(plugin.Obj()); err != nil {
		t.Fatal(err)
	}
	pods[plugin.Name] = plugin

	eng := engine.New(engine.Options{})
	res := eng.Schedule(snap, draNow)
	if len(res.Bindings) != 4 {
		t.Fatalf("bindings = %d, want 4; reasons %+v", len(res.Bindings), res.Unschedulable)
	}
	perDevice := map[string]int64{}
	for _, b := range res.Bindings {
		if b.Pod.Name == plugin.Name {
			if b.Node != "plugin" || b.Shared == nil || b.Shared.MilliGPU != 500 || len(b.Claims) != 0 {
				t.Errorf("device-plugin share: node %s, shared %+v; want half a GPU on node plugin", b.Node, b.Shared)
			}
			continue
		}
		if b.Node != "dra" || b.Shared != nil || len(b.GPUs) != 0 || len(b.Claims) != 1 || b.Claims[0].Result == nil {
			t.Fatalf("DRA share %s: node %s, shared %+v, GPUs %v, claims %+v; want one claim allocated on node dra, no gpu-agent share", b.Pod, b.Node, b.Shared, b.GPUs, b.Claims)
		}
		r := b.Claims[0].Result.Devices.Results[0]
		mem := r.ConsumedCapacity["memory"]
		if r.ShareID == nil || mem.Cmp(resource.MustParse("30Gi")) != 0 {
			t.Errorf("DRA share %s: share ID %v, consumed %s; want a share of 30Gi", b.Pod, r.ShareID, mem.String())
		}
		perDevice[r.Device] += mem.Value()
	}
	for dev, used := range perDevice {
		if used > 80<<30 {
			t.Errorf("device %s: %d GiB allocated of 80", dev, used>>30)
		}
	}
	// 30 GiB of an 80 GiB GPU is 375 milli-GPU; three of them and half a GPU.
	want := int64(3*375 + 500)
	if got := res.Queues[0].Allocated["gpu"]; got != want {
		t.Errorf("team-a allocated %d milli-GPU, want %d (three 30Gi DRA shares and a half GPU share)", got, want)
	}
	commitClaims(t, snap, &res, pods)
	res = eng.Schedule(snap, draNow.Add(time.Second))
	if got := res.Queues[0].Allocated["gpu"]; got != want {
		t.Errorf("after the claims are written: team-a allocated %d milli-GPU, want %d", got, want)
	}
	// A fourth 30Gi share fits only beside the single share: the device holding two has 20 GiB
	// left; a 60Gi share fits nowhere.
	for name, mem := range map[string]string{"s3": "30Gi", "big": "60Gi"} {
		p := testutil.MakePod("team-a", name).Queue("team-a").ClaimTemplate("gpu", "part-gpu", name+"-gpu")
		pods[name] = p
		snap.UpsertResourceClaim(testutil.OwnedBy(testutil.GPUShareClaim("team-a", name+"-gpu", mem), p.Obj()))
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	res = eng.Schedule(snap, draNow.Add(2*time.Second))
	if len(res.Bindings) != 1 || res.Bindings[0].Pod.Name != "s3" {
		t.Fatalf("bindings %+v, want s3 alone (reasons %+v)", res.Bindings, res.Unschedulable)
	}
	lone := ""
	for dev, used := range perDevice {
		if used == 30<<30 {
			lone = dev
		}
	}
	if got := res.Bindings[0].Claims[0].Result.Devices.Results[0].Device; got != lone {
		t.Errorf("s3's share went to %s, want %s (the device with room)", got, lone)
	}
}

// TestDRATwoSharesAreUnsupported: fairway's accounting holds whole GPUs or one share per pod, as
// for device-plugin pods; a pod whose claims ask for two shares is told so instead of placed.
func TestDRATwoSharesAreUnsupported(t *testing.T) {
	snap := draCluster(t, 1, "8")
	p := testutil.MakePod("team-a", "p").Queue("team-a").ClaimRef("a", "share-a").ClaimRef("b", "share-b")
	snap.UpsertResourceClaim(testutil.GPUShareClaim("team-a", "share-a", "10Gi"))
	snap.UpsertResourceClaim(testutil.GPUShareClaim("team-a", "share-b", "10Gi"))
	if err := snap.UpsertPod(p.Obj()); err != nil {
		t.Fatal(err)
	}
	res := engine.New(engine.Options{}).Schedule(snap, draNow)
	if len(res.Bindings) != 0 || len(res.Unschedulable) != 1 {
		t.Fatalf("bindings %+v, unschedulable %+v: want the pod unschedulable", res.Bindings, res.Unschedulable)
	}
	if u := res.Unschedulable[0]; u.Code != engine.ReasonUnsupported || !strings.Contains(u.Message, "ask for shares of GPUs (2) and whole GPUs (0)") {
		t.Errorf("reason %s %q, want %s naming the two shares", u.Code, u.Message, engine.ReasonUnsupported)
	}
}

// TestDRAPartitions: claims for MIG devices (partitions of a GPU in MIG mode, which NVIDIA's
// driver publishes instead of the GPU) are shares of their GPU in fairway's accounting, each
// its memory slices' part of the GPU (1g.10gb one eighth, 3g.40gb half); while pending a claim
// counts as the smallest partition, and the queue's limits are checked again with the
// partition it gets.
func TestDRAPartitions(t *testing.T) {
	snap := snapshot.New()
	snap.UpsertDeviceClass(testutil.NVIDIAMIGDeviceClass())
	if err := snap.UpsertNode(testutil.MakeNode("mig").Obj()); err != nil {
		t.Fatal(err)
	}
	snap.UpsertResourceSlice(testutil.MIGSlice("mig", 2, "NVIDIA H100 80GB HBM3", testutil.H100MIGLayout))
	if n := snap.Node("mig"); len(n.Slots) != 2 || n.Slots[0].UUID != "GPU-mig-0" || n.GPUType != "H100" {
		t.Fatalf("node in MIG mode: slots %+v, type %q; want its two GPUs, H100s", n.Slots, n.GPUType)
	}
	if err := snap.UpsertQueue(testutil.MakeQueue("team-a").Namespaces("team-a").GPU("1", 1, "1").Obj()); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*testutil.PodWrapper{}
	add := func(name, profile string) {
		p := testutil.MakePod("team-a", name).Queue("team-a").ClaimTemplate("gpu", "mig", name+"-gpu")
		pods[name] = p
		snap.UpsertResourceClaim(testutil.OwnedBy(testutil.MIGClaim("team-a", name+"-gpu", profile), p.Obj()))
		if err := snap.UpsertPod(p.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	add("small", "1g.10gb")
	add("half", "3g.40gb")
	eng := engine.New(engine.Options{})
	res := eng.Schedule(snap, draNow)
	if len(res.Bindings) != 2 {
		t.Fatalf("bindings = %d, want 2; reasons %+v", len(res.Bindings), res.Unschedulable)
	}
	for _, b := range res.Bindings {
		if b.Shared != nil || len(b.GPUs) != 0 || len(b.Claims) != 1 || b.Claims[0].Result == nil {
			t.Fatalf("%s: shared %+v, GPUs %v, claims %+v; want its claim allocated and no gpu-agent share", b.Pod, b.Shared, b.GPUs, b.Claims)
		}
		t.Logf("%s got %s", b.Pod.Name, b.Claims[0].Result.Devices.Results[0].Device)
	}
	if got := res.Queues[0].Allocated["gpu"]; got != 625 {
		t.Errorf("team-a allocated %d milli-GPU, want 625 (a 1g.10gb and a 3g.40gb partition)", got)
	}
	if got := res.Queues[0].Allocated["gpu/H100"]; got != 625 {
		t.Errorf("team-a allocated %d milli-GPU of gpu/H100, want 625", got)
	}
	commitClaims(t, snap, &res, pods)
	res = eng.Schedule(snap, draNow.Add(time.Second))
	if got := res.Queues[0].Allocated["gpu"]; got != 625 {
		t.Errorf("after the claims are written: team-a allocated %d milli-GPU, want 625", got)
	}
	var used int64
	for _, g := range snap.Node("mig").Slots {
		used += g.UsedMilli
	}
	if used != 625 {
		t.Errorf("the GPUs' used shares are %d milli-GPU, want 625", used)
	}
	// The queue's limit of 1 GPU: another 1g.10gb fits (750); another 3g.40gb, counted as
	// 125 while pending, would make 1250 once it got its device (the second GPU has one).
	add("small-2", "1g.10gb")
	add("half-2", "3g.40gb")
	res = eng.Schedule(snap, draNow.Add(2*time.Second))
	if len(res.Bindings) != 1 || res.Bindings[0].Pod.Name != "small-2" {
		t.Fatalf("bindings %+v, want small-2 alone (reasons %+v)", res.Bindings, res.Unschedulable)
	}
	if len(res.Unschedulable) != 1 || !strings.Contains(res.Unschedulable[0].Gang.String(), "half-2") {
		t.Fatalf("unschedulable %+v, want half-2", res.Unschedulable)
	}
	t.Logf("half-2 waits: %s: %s", res.Unschedulable[0].Code, res.Unschedulable[0].Message)
}
