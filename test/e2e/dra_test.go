//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/testutil"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// TestDRA: GPUs through Dynamic Resource Allocation on the real control plane (docs/dra.md).
// Two kwok nodes without nvidia.com/gpu publish 8 GPUs each in ResourceSlices shaped as NVIDIA's
// DRA driver publishes them (testutil.NVIDIAGPUSlice), each node its own NVLink domain; the
// DeviceClass is NVIDIA's. Pods ask for GPUs with ResourceClaimTemplates, whose claims the real
// kube-controller-manager makes; the real kube-scheduler schedules an unserved namespace's DRA
// pods on the same nodes.
//
//   - A 4-pod gang, each pod with a one-GPU claim from a template, starts whole on one NVLink
//     domain; fairway wrote the claims' allocations (distinct devices of that node, the pod in
//     reservedFor) before binding; the queue's status counts 4 GPUs, of type H100 (read from
//     the devices' productName).
//   - kube-scheduler's DRA pods take devices on the same nodes; no device is ever allocated to
//     two claims (checked on the claims' allocations at every step).
//   - A lender under its quota asks for more GPUs than are free: fairway reclaims the borrower's
//     DRA pods; their claims go (kube-controller-manager deletes a pod's template claims with it,
//     and deallocates), and their devices are allocated again to the lender's claims.
//   - Shares (docs/dra.md, "Shares through DRA"): three nodes join, one whose GPUs claims may
//     share by memory (consumable capacity, testutil.SharedGPUSlice), one whose GPU is in MIG
//     mode (its MIG devices published as NVIDIA's driver does, testutil.MIGSlice) and one with a
//     device-plugin GPU and its gpu-agent. Pods with claims for 20Gi and 40Gi of a GPU, for a
//     1g.10gb and a 3g.40gb MIG device, and one with fairway.dev/gpu-fraction 0.5 run; the
//     claims hold parts of one device (share IDs, the memory consumed) and MIG devices of the
//     profiles asked for, and the queue's status counts 0.25 + 0.5 + 0.125 + 0.5 + 0.5 GPU.
func TestDRA(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	pool := cluster.NodePool{
		Name: "dra", Count: 2, CPU: "224", Memory: "2Ti", Pods: 110,
		Topology: map[string]string{"nvlink": "nvl-{{.Index}}"},
	}
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{pool}, KubeScheduler: true})
	ctx := t.Context()
	defer dumpWaiting(t, c, "borrow", "lend", "plain")
	res := c.Clientset().ResourceV1()
	// The 1.37 API server serves resource.k8s.io/v1 by default.
	if _, err := c.Clientset().Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1"); err != nil {
		t.Fatalf("resource.k8s.io/v1 not served: %v", err)
	}
	if _, err := res.DeviceClasses().Create(ctx, testutil.NVIDIADeviceClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range pool.Count {
		node := fmt.Sprintf("dra-%d", i)
		if _, err := res.ResourceSlices().Create(ctx, testutil.NVIDIAGPUSlice(node, 8, "NVIDIA H100 80GB HBM3", 80), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ensureSchedFixtures(t, c)
	startSched(t, c, bin, "fairway-scheduler", true)
	for _, ns := range []string{"borrow", "lend", "plain"} {
		newNamespace(t, c, ns)
		tmpl := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-gpu"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{testutil.GPURequest("gpu", 1)}}}},
		}
		if _, err := res.ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	schedQueue(t, c, "borrow", "", "borrow")
	schedQueue(t, c, "lend", "16", "lend")
	draPod := func(p *podB) *corev1.Pod {
		o := p.Obj()
		o.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		o.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		return o
	}

	// (a) The gang.
	for i := range 4 {
		p := schedPod("borrow", fmt.Sprintf("w%d", i), "borrow").Gang("job", 4).Priority(fairwayv1.PriorityClassTraining).
			Annotate(fairwayv1.TopologyRequiredAnnotation, fairwayv1.NVLinkDomainLabel)
		mustCreate(t, c, draPod(p))
	}
	eventually(t, 60*time.Second, "the gang's 4 DRA pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "borrow", nil))) == 4, nil
	})
	domains := map[string]bool{}
	for _, p := range bound(podsIn(t, c, ctx, "borrow", nil)) {
		var n corev1.Node
		if err := c.Client().Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
			t.Fatal(err)
		}
		domains[n.Labels[fairwayv1.NVLinkDomainLabel]] = true
		claim := podClaim(t, c, &p)
		if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("pod %s bound with claim %s not allocated one device: %+v", p.Name, claim.Name, claim.Status.Allocation)
		}
		if r := claim.Status.Allocation.Devices.Results[0]; r.Pool != p.Spec.NodeName {
			t.Errorf("pod %s on %s got device %s/%s", p.Name, p.Spec.NodeName, r.Pool, r.Device)
		}
		if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != p.UID {
			t.Errorf("claim %s reservedFor %+v, want pod %s", claim.Name, claim.Status.ReservedFor, p.Name)
		}
	}
	if len(domains) != 1 {
		t.Errorf("the gang spans NVLink domains %v, want one", domains)
	}
	eventually(t, 30*time.Second, "queue borrow's status counting 4 GPUs, 4 of type H100", func(ctx context.Context) (bool, error) {
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, client.ObjectKey{Name: "borrow"}, &q); err != nil {
			return false, err
		}
		return amount(q.Status.Allocated, "gpu") == 4 && amount(q.Status.Allocated, "gpu/H100") == 4, nil
	})
	checkNoDoubleAllocation(t, c)

	// (b) kube-scheduler's DRA pods in a namespace no queue serves, on the same nodes.
	for i := range 6 {
		p := draPod(schedPod("plain", fmt.Sprintf("k%d", i), ""))
		p.Spec.SchedulerName = corev1.DefaultSchedulerName
		delete(p.Labels, fairwayv1.QueueLabel)
		delete(p.Labels, fairwayv1.ManagedLabel)
		mustCreate(t, c, p)
	}
	eventually(t, 60*time.Second, "kube-scheduler's 6 DRA pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "plain", nil))) == 6, nil
	})
	checkNoDoubleAllocation(t, c)
	perNode := map[string]int{}
	for _, p := range bound(podsIn(t, c, ctx, "plain", nil)) {
		perNode[p.Spec.NodeName]++
	}
	t.Logf("kube-scheduler placed its DRA pods %v; the gang is on %v", perNode, domains)

	// (c) Reclaim: the lender asks for 8 GPUs, 6 are free (16, less the gang's 4 and
	// kube-scheduler's 6, wherever kube-scheduler put them): at least 2 of the borrower's must go.
	borrowed := map[string]bool{}
	for _, p := range bound(podsIn(t, c, ctx, "borrow", nil)) {
		r := podClaim(t, c, &p).Status.Allocation.Devices.Results[0]
		borrowed[r.Pool+"/"+r.Device] = true
	}
	for i := range 8 {
		mustCreate(t, c, draPod(schedPod("lend", fmt.Sprintf("l%d", i), "lend").Gang("lend", 8).Priority(fairwayv1.PriorityClassTraining)))
	}
	eventually(t, 90*time.Second, "the lender's 8 DRA pods bound", func(ctx context.Context) (bool, error) {
		checkNoDoubleAllocation(t, c)
		return len(bound(podsIn(t, c, ctx, "lend", nil))) == 8, nil
	})
	if left := len(bound(podsIn(t, c, ctx, "borrow", nil))); left > 2 {
		t.Errorf("%d of the borrower's pods still run; reclaim needed at least 2 of them", left)
	}
	reused := 0
	for _, p := range bound(podsIn(t, c, ctx, "lend", nil)) {
		r := podClaim(t, c, &p).Status.Allocation.Devices.Results[0]
		if borrowed[r.Pool+"/"+r.Device] {
			reused++
		}
	}
	if reused < 2 {
		t.Errorf("%d of the lender's claims got a device the reclaimed pods' claims had, want at least 2", reused)
	}
	// The evicted pods' claims are gone (deleted with their pods, deallocated first).
	eventually(t, 30*time.Second, "the reclaimed pods' claims gone", func(ctx context.Context) (bool, error) {
		list, err := res.ResourceClaims("borrow").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(list.Items) == len(bound(podsIn(t, c, ctx, "borrow", nil))), nil
	})
	checkNoDoubleAllocation(t, c)

	// (d) Shares through DRA beside a device-plugin share.
	testDRAShares(t, c, bin)
}

func testDRAShares(t *testing.T, c *cluster.Cluster, bin string) {
	ctx := t.Context()
	defer dumpWaiting(t, c, "share")
	res := c.Clientset().ResourceV1()
	shared := cluster.NodePool{Name: "shared", Count: 1, CPU: "64", Memory: "512Gi", Pods: 110}
	mig := cluster.NodePool{Name: "mig", Count: 1, CPU: "64", Memory: "512Gi", Pods: 110}
	plugin := cluster.NodePool{Name: "plugin", Count: 1, CPU: "64", Memory: "512Gi", Pods: 110,
		GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 1, GPUMemoryMiB: 81559}
	for _, pool := range []cluster.NodePool{shared, mig, plugin} {
		nodes, err := pool.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			mustCreate(t, c, n)
		}
	}
	fleet, err := gpuagents.Start(ctx, c, gpuagents.Options{Nodes: []gpuagents.Node{{Name: "plugin-0", System: "dgxh100", GPUs: 1}},
		Binary: bin, RefreshInterval: 30 * time.Second, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	if _, err := res.ResourceSlices().Create(ctx, testutil.SharedGPUSlice("shared-0", 2, "NVIDIA H100 80GB HBM3", 80), metav1.CreateOptions{}); err != nil {
		t.Fatalf("publishing GPUs that claims may share (consumable capacity): %v", err)
	}
	if _, err := res.ResourceSlices().Create(ctx, testutil.MIGSlice("mig-0", 1, "NVIDIA H100 80GB HBM3", testutil.H100MIGLayout), metav1.CreateOptions{}); err != nil {
		t.Fatalf("publishing a GPU in MIG mode: %v", err)
	}
	if _, err := res.DeviceClasses().Create(ctx, testutil.NVIDIAMIGDeviceClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newNamespace(t, c, "share")
	schedQueue(t, c, "share", "2", "share")
	for _, mem := range []string{"20Gi", "40Gi"} {
		tmpl := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "share", Name: "gpu-" + strings.ToLower(mem)},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: testutil.GPUShareClaim("", "", mem).Spec},
		}
		if _, err := res.ResourceClaimTemplates("share").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := schedPod("share", "dra-"+strings.ToLower(mem), "share").Priority(fairwayv1.PriorityClassInteractive).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		mustCreate(t, c, p)
	}
	for _, profile := range []string{"1g.10gb", "3g.40gb"} {
		tmpl := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: "share", Name: "mig-" + profile},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: testutil.MIGClaim("", "", profile).Spec},
		}
		if _, err := res.ResourceClaimTemplates("share").Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := schedPod("share", "mig-"+strings.ReplaceAll(profile, ".", "-"), "share").Priority(fairwayv1.PriorityClassInteractive).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		mustCreate(t, c, p)
	}
	mustCreate(t, c, schedPod("share", "plugin-half", "share").Fraction("0.5").Priority(fairwayv1.PriorityClassInteractive).Obj())
	eventually(t, 90*time.Second, "the two DRA shares, the two MIG devices and the device-plugin share bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "share", nil))) == 5, nil
	})
	devices := map[string]bool{}
	for _, p := range bound(podsIn(t, c, ctx, "share", nil)) {
		if p.Name == "plugin-half" {
			if p.Spec.NodeName != "plugin-0" {
				t.Errorf("the device-plugin share is on %s, want plugin-0", p.Spec.NodeName)
			}
			continue
		}
		if strings.HasPrefix(p.Name, "mig-") {
			claim := podClaim(t, c, &p)
			if p.Spec.NodeName != "mig-0" || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
				t.Fatalf("pod %s on %s, claim allocation %+v: want one MIG device of mig-0", p.Name, p.Spec.NodeName, claim.Status.Allocation)
			}
			r := claim.Status.Allocation.Devices.Results[0]
			want := map[string]string{"mig-1g-10gb": "gpu-0-mig-19-", "mig-3g-40gb": "gpu-0-mig-9-"}[p.Name]
			if !strings.HasPrefix(r.Device, want) {
				t.Errorf("pod %s got MIG device %s, want one named %s...", p.Name, r.Device, want)
			}
			t.Logf("pod %s: claim %s holds MIG device %s/%s", p.Name, claim.Name, r.Pool, r.Device)
			continue
		}
		claim := podClaim(t, c, &p)
		want := resource.MustParse(strings.TrimPrefix(p.Name, "dra-")[:2] + "Gi")
		if p.Spec.NodeName != "shared-0" || claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
			t.Fatalf("pod %s on %s, claim allocation %+v: want one part of a device of shared-0", p.Name, p.Spec.NodeName, claim.Status.Allocation)
		}
		r := claim.Status.Allocation.Devices.Results[0]
		got := r.ConsumedCapacity[fairwayv1.DRAMemoryCapacity]
		if r.ShareID == nil || got.Cmp(want) != 0 {
			t.Errorf("pod %s: claim %s share ID %v, consumed memory %s; want a share of %s", p.Name, claim.Name, r.ShareID, got.String(), want.String())
		}
		devices[r.Device] = true
		t.Logf("pod %s: claim %s holds %s of %s/%s (share %s)", p.Name, claim.Name, got.String(), r.Pool, r.Device, *r.ShareID)
	}
	if len(devices) != 1 {
		t.Errorf("the two shares are on devices %v, want one device (fairway packs shares)", devices)
	}
	checkNoDoubleAllocation(t, c)
	eventually(t, 30*time.Second, "queue share's status counting 0.25 + 0.5 GPU of claims, 0.125 + 0.5 of MIG devices and 0.5 of the device plugin", func(ctx context.Context) (bool, error) {
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, client.ObjectKey{Name: "share"}, &q); err != nil {
			return false, err
		}
		got := amount(q.Status.Allocated, "gpu")
		t.Logf("queue share allocated %v GPU (%v of type H100)", got, amount(q.Status.Allocated, "gpu/H100"))
		return got == 1.875 && amount(q.Status.Allocated, "gpu/H100") == 1.875, nil
	})
}

// podClaim reads the claim kube-controller-manager made for the pod's "gpu" template claim.
func podClaim(t *testing.T, c *cluster.Cluster, p *corev1.Pod) *resourceapi.ResourceClaim {
	t.Helper()
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == "gpu" && s.ResourceClaimName != nil {
			claim, err := c.Clientset().ResourceV1().ResourceClaims(p.Namespace).Get(t.Context(), *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("claim of pod %s: %v", p.Name, err)
			}
			return claim
		}
	}
	t.Fatalf("pod %s has no claim in its status: %+v", p.Name, p.Status.ResourceClaimStatuses)
	return nil
}

// checkNoDoubleAllocation fails the test when two claims of any namespace hold one device, but
// for parts of a shared device (consumable capacity) whose memory together fits the device's.
func checkNoDoubleAllocation(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	list, err := c.Clientset().ResourceV1().ResourceClaims("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		t.Fatal(err)
	}
	whole := map[string]string{}  // device: the claim holding it whole
	shared := map[string]string{} // device: a claim holding a part of it
	sharedMem := map[string]int64{}
	for _, claim := range list.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		name := claim.Namespace + "/" + claim.Name
		for _, r := range claim.Status.Allocation.Devices.Results {
			dev := strings.Join([]string{r.Driver, r.Pool, r.Device}, "/")
			if other, ok := whole[dev]; ok {
				t.Errorf("device %s allocated whole to claim %s and again to %s", dev, other, name)
			}
			if r.ShareID == nil {
				if other, ok := shared[dev]; ok {
					t.Errorf("device %s allocated in part to claim %s and whole to %s", dev, other, name)
				}
				whole[dev] = name
				continue
			}
			mem := r.ConsumedCapacity[fairwayv1.DRAMemoryCapacity]
			if sharedMem[dev] += mem.Value(); sharedMem[dev] > 80<<30 {
				t.Errorf("device %s: parts of it consume %d GiB of memory, more than its 80", dev, sharedMem[dev]>>30)
			}
			shared[dev] = name
		}
	}
}

// dumpWaiting logs, when the test failed, why the namespaces' pods that are not bound wait.
func dumpWaiting(t *testing.T, c *cluster.Cluster, namespaces ...string) {
	if !t.Failed() {
		return
	}
	for _, ns := range namespaces {
		var list corev1.PodList
		if err := c.Client().List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
					t.Logf("%s/%s waits: %s: %s", ns, p.Name, cond.Reason, cond.Message)
				}
			}
			if p.Spec.NodeName != "" {
				t.Logf("%s/%s on %s", ns, p.Name, p.Spec.NodeName)
			}
		}
	}
}
