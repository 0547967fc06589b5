package shareplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

const node = "n1"

var gpus = []GPU{{UUID: "GPU-a", Minor: 0, Healthy: true}, {UUID: "GPU-b", Minor: 1, Healthy: true}}

// cache plays the agent's informer cache of the node's pods.
type cache struct {
	mu   sync.Mutex
	pods []corev1.Pod
}

func (c *cache) add(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = append(c.pods, *p)
}

func (c *cache) list(context.Context) ([]corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]corev1.Pod, len(c.pods))
	for i := range c.pods {
		c.pods[i].DeepCopyInto(&out[i])
	}
	return out, nil
}

// sharePod is a pod bound to the node, asking for a share, placed on GPU uuid ("": no decision).
func sharePod(ns, name, uuid string) *corev1.Pod {
	one := corev1.ResourceList{fairwayv1alpha1.ResourceGPUShare: resource.MustParse("1")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Limits: one, Requests: one}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if uuid != "" {
		p.Annotations[fairwayv1alpha1.GPUUUIDAnnotation] = uuid
	}
	return p
}

func newPlugin(t *testing.T, c *cache, mod func(*Options)) *Plugin {
	t.Helper()
	opts := Options{NodeName: node, SlotsPerGPU: 4, GPUs: func() []GPU { return gpus }, Pods: c.list, Wait: 50 * time.Millisecond, Poll: time.Millisecond}
	if mod != nil {
		mod(&opts)
	}
	return New(opts)
}

func slots(uuids ...string) []string {
	var out []string
	for _, u := range uuids {
		for k := range 4 {
			out = append(out, fairwayv1alpha1.ShareSlotID(u, k))
		}
	}
	return out
}

func allocate(p *Plugin, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0], nil
}

func preferred(t *testing.T, p *Plugin) []string {
	t.Helper()
	resp, err := p.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: slots("GPU-a", "GPU-b"), AllocationSize: 1,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.ContainerResponses[0].DeviceIDs
}

// TestAllocateGivesTheChosenGPU: the kubelet is steered to a slot of the GPU the scheduler
// recorded on the pod, and the answer names that GPU, by CDI, device nodes and the NVIDIA
// runtime's volume mount, and nothing of the neighbour's GPU, with no environment variable.
func TestAllocateGivesTheChosenGPU(t *testing.T) {
	c := &cache{}
	dir := t.TempDir()
	cd, err := NewCDI([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p := newPlugin(t, c, func(o *Options) { o.CDI = cd })
	c.add(sharePod("team-a", "half", "GPU-b"))

	ids := preferred(t, p)
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "GPU-b::share-") {
		t.Fatalf("preferred %v, want a slot of GPU-b", ids)
	}
	r, err := allocate(p, ids...)
	if err != nil {
		t.Fatal(err)
	}
	var cdi, nodes, mounts []string
	for _, d := range r.CdiDevices {
		cdi = append(cdi, d.Name)
	}
	for _, d := range r.Devices {
		nodes = append(nodes, d.HostPath+">"+d.ContainerPath)
	}
	for _, m := range r.Mounts {
		mounts = append(mounts, m.HostPath+">"+m.ContainerPath)
	}
	if want := []string{"fairway.dev/gpu=GPU-b"}; !slices.Equal(cdi, want) {
		t.Errorf("CDI devices %v, want %v", cdi, want)
	}
	if want := []string{"/dev/nvidia1>/dev/nvidia1", "/dev/nvidiactl>/dev/nvidiactl", "/dev/nvidia-uvm>/dev/nvidia-uvm", "/dev/nvidia-uvm-tools>/dev/nvidia-uvm-tools"}; !slices.Equal(nodes, want) {
		t.Errorf("device nodes %v, want %v", nodes, want)
	}
	if want := []string{"/dev/null>/var/run/nvidia-container-devices/GPU-b"}; !slices.Equal(mounts, want) {
		t.Errorf("mounts %v, want %v", mounts, want)
	}
	if len(r.Envs) != 0 || len(r.Annotations) != 0 {
		t.Errorf("envs %v annotations %v, want none", r.Envs, r.Annotations)
	}
	// The spec the runtime resolves the name with has the GPU's node and only that.
	spec, err := os.ReadFile(filepath.Join(dir, fairwayv1alpha1.CDISpecName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: fairway.dev/gpu", "name: GPU-b", "path: /dev/nvidia1", "path: /dev/nvidiactl"} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("CDI spec lacks %q:\n%s", want, spec)
		}
	}

	// The pod has its device: a second call for the same GPU finds nobody waiting.
	if _, err := allocate(p, ids...); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second allocation: %v, want FailedPrecondition", err)
	}
}

// TestAllocateRefuses: every call the plugin cannot tie to the scheduler's decision for a
// waiting pod is refused, saying what it saw.
func TestAllocateRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		pods []*corev1.Pod
		ids  []string
		code codes.Code
		want string
	}{
		"nobody waits": {nil, slots("GPU-a")[:1], codes.FailedPrecondition,
			"no pod bound to node n1 waits for a fairway.dev/gpu-share"},
		"no decision": {[]*corev1.Pod{sharePod("t", "rogue", "")}, slots("GPU-a")[:1], codes.FailedPrecondition,
			"no pod waiting on node n1 was placed there by the scheduler; waiting: t/rogue on no GPU recorded (fairway.dev/gpu-uuid unset"},
		"another GPU": {[]*corev1.Pod{sharePod("t", "p", "GPU-a")}, slots("GPU-b")[:1], codes.FailedPrecondition,
			"the kubelet chose a fairway.dev/gpu-share slot of GPU GPU-b, but no pod waiting on node n1 was placed there by the scheduler; waiting: t/p on GPU-a"},
		"admitted already": {[]*corev1.Pod{func() *corev1.Pod {
			p := sharePod("t", "p", "GPU-a")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main"}}
			return p
		}()}, slots("GPU-a")[:1], codes.FailedPrecondition, "no pod bound to node n1 waits"},
		"two GPUs": {[]*corev1.Pod{sharePod("t", "p", "GPU-a")}, []string{slots("GPU-a")[0], slots("GPU-b")[0]}, codes.InvalidArgument,
			"the kubelet asked for fairway.dev/gpu-share slots of two GPUs (GPU-a and GPU-b): a share is on one GPU"},
		"unknown GPU": {[]*corev1.Pod{sharePod("t", "p", "GPU-z")}, []string{"GPU-z::share-0"}, codes.InvalidArgument,
			"fairway.dev/gpu-share slot GPU-z::share-0: GPU GPU-z is not a GPU of node n1"},
		"not a slot": {nil, []string{"GPU-a"}, codes.InvalidArgument, `device ID "GPU-a": a fairway.dev/gpu-share slot is <GPU UUID>::share-<n>`},
	} {
		t.Run(name, func(t *testing.T) {
			c := &cache{}
			for _, p := range tc.pods {
				c.add(p)
			}
			_, err := allocate(newPlugin(t, c, nil), tc.ids...)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %s containing %q", err, tc.code, tc.want)
			}
		})
	}
}

// TestAllocateWaitsForTheCache: the kubelet's watch can deliver a binding before the agent's;
// the call waits for the pod to reach the cache.
func TestAllocateWaitsForTheCache(t *testing.T) {
	c := &cache{}
	p := newPlugin(t, c, func(o *Options) { o.Wait = 5 * time.Second })
	time.AfterFunc(30*time.Millisecond, func() { c.add(sharePod("t", "late", "GPU-a")) })
	ids := preferred(t, p)
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "GPU-a::") {
		t.Fatalf("preferred %v, want a slot of GPU-a", ids)
	}
	if _, err := allocate(p, ids...); err != nil {
		t.Fatal(err)
	}
}

// TestAdmissionOrder: pods are served in the order their bindings reached the agent, which is
// the order the kubelet admits them in, and a pod the kubelet's record shows admitted (the
// PodResources API, e.g. after an agent restart) is never served again.
func TestAdmissionOrder(t *testing.T) {
	c := &cache{}
	first, second, third := sharePod("t", "first", "GPU-b"), sharePod("t", "second", "GPU-a"), sharePod("t", "old", "GPU-a")
	admitted := map[types.NamespacedName][]string{{Namespace: "t", Name: "old"}: {fairwayv1alpha1.ShareSlotID("GPU-a", 3)}}
	p := newPlugin(t, c, func(o *Options) {
		o.Admitted = func(context.Context) (map[types.NamespacedName][]string, error) { return admitted, nil }
	})
	for _, pod := range []*corev1.Pod{third, second, first} {
		c.add(pod)
	}
	p.Observe(third)
	p.Observe(first)
	p.Observe(second)
	for _, want := range []string{"GPU-b", "GPU-a"} {
		ids := preferred(t, p)
		if len(ids) != 1 || !strings.HasPrefix(ids[0], want+"::") {
			t.Fatalf("preferred %v, want a slot of %s", ids, want)
		}
		if _, err := allocate(p, ids...); err != nil {
			t.Fatal(err)
		}
	}
	if got := preferred(t, p); len(got) != 0 {
		t.Errorf("preferred %v with nobody waiting, want none", got)
	}
}

// TestConcurrentAdmissions: many allocations at once, for pods on two GPUs: each waiting pod is
// given exactly one device, of its own GPU, and an allocation beyond the waiting pods is refused.
func TestConcurrentAdmissions(t *testing.T) {
	c := &cache{}
	want := map[string]int{"GPU-a": 25, "GPU-b": 15}
	for g, n := range want {
		for i := range n {
			c.add(sharePod("t", fmt.Sprintf("%s-%d", g, i), g))
		}
	}
	p := newPlugin(t, c, nil)
	var wg sync.WaitGroup
	got := map[string]int{}
	var mu sync.Mutex
	for g, n := range want {
		for i := range n {
			wg.Go(func() {
				r, err := allocate(p, fairwayv1alpha1.ShareSlotID(g, i%4))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, d := range r.Devices {
					if isGPUNode(d.HostPath) {
						got[d.HostPath]++
					}
				}
			})
		}
	}
	wg.Wait()
	if got["/dev/nvidia0"] != 25 || got["/dev/nvidia1"] != 15 || len(got) != 2 {
		t.Errorf("device nodes given %v, want 25 of /dev/nvidia0 and 15 of /dev/nvidia1", got)
	}
	p.mu.Lock()
	per := map[string]int{}
	for _, g := range p.allocated {
		per[g]++
	}
	p.mu.Unlock()
	if len(p.allocated) != 40 || per["GPU-a"] != 25 || per["GPU-b"] != 15 {
		t.Errorf("allocated %d pods %v, want each of the 40 once, on its GPU", len(p.allocated), per)
	}
	if _, err := allocate(p, fairwayv1alpha1.ShareSlotID("GPU-a", 0)); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("an allocation beyond the waiting pods: %v, want FailedPrecondition", err)
	}
}

// TestMismatches: a pod whose slot in the kubelet's record is on another GPU than its decision
// is reported.
func TestMismatches(t *testing.T) {
	c := &cache{}
	c.add(sharePod("t", "ok", "GPU-a"))
	c.add(sharePod("t", "swapped", "GPU-a"))
	admitted := map[types.NamespacedName][]string{
		{Namespace: "t", Name: "ok"}:      {fairwayv1alpha1.ShareSlotID("GPU-a", 0)},
		{Namespace: "t", Name: "swapped"}: {fairwayv1alpha1.ShareSlotID("GPU-b", 0)},
	}
	p := newPlugin(t, c, func(o *Options) {
		o.Admitted = func(context.Context) (map[types.NamespacedName][]string, error) { return admitted, nil }
	})
	got, err := p.Mismatches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].String() != "pod t/swapped was placed on GPU GPU-a but holds a share slot of GPU GPU-b" {
		t.Errorf("mismatches %v", got)
	}
}

// TestStrategies: the environment variable only when asked for, and CDI as annotations instead
// of the CRI field for older runtimes, never both.
func TestStrategies(t *testing.T) {
	if _, err := ParseStrategies("cdi-cri,cdi-annotations"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("both CDI strategies: %v", err)
	}
	if _, err := ParseStrategies("cdi,nodes"); err == nil || !strings.Contains(err.Error(), `device list strategy "cdi"`) {
		t.Errorf("unknown strategy: %v", err)
	}
	st, err := ParseStrategies("cdi-annotations, envvar")
	if err != nil {
		t.Fatal(err)
	}
	cd, err := NewCDI([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := &cache{}
	c.add(sharePod("t", "p", "GPU-a"))
	r, err := allocate(newPlugin(t, c, func(o *Options) { o.Strategies, o.CDI = st, cd }), fairwayv1alpha1.ShareSlotID("GPU-a", 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a" || len(r.CdiDevices) != 0 || len(r.Devices) != 0 ||
		r.Annotations["cdi.k8s.io/fairway.dev-gpu-share_GPU-a"] != "fairway.dev/gpu=GPU-a" {
		t.Errorf("response %+v", r)
	}
}

// TestNVIDIADevice: where the node has NVIDIA's CDI spec, a share also gets NVIDIA's device of
// its GPU (the driver's libraries), found by its device node whatever the spec names it, and
// never NVIDIA's "all".
func TestNVIDIADevice(t *testing.T) {
	etc, run := t.TempDir(), t.TempDir()
	nvidia := `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0}]
- name: "1"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia1}]
- name: all
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]
containerEdits:
  deviceNodes: [{path: /dev/nvidiactl}]
  mounts: [{hostPath: /usr/lib/libcuda.so.1, containerPath: /usr/lib/libcuda.so.1}]
`
	if err := os.WriteFile(filepath.Join(etc, "nvidia.yaml"), []byte(nvidia), 0o644); err != nil {
		t.Fatal(err)
	}
	cd, err := NewCDI([]string{etc, run})
	if err != nil {
		t.Fatal(err)
	}
	if err := cd.WriteSpec(gpus, DefaultControlDevices); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, fairwayv1alpha1.CDISpecName)); err != nil {
		t.Errorf("fairway's spec is not in the last directory: %v", err)
	}
	if got, want := cd.Devices(gpus[1]), []string{"fairway.dev/gpu=GPU-b", "nvidia.com/gpu=1"}; !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
}

// fakeKubelet serves a kubelet's registration socket in a new short directory (unix socket
// paths are short), removed with the test.
func fakeKubelet(t *testing.T) (string, *registration) {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kubelet := &registration{got: make(chan *pluginapi.RegisterRequest, 1)}
	srv, err := kubelet.serve(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return dir, kubelet
}

// TestServe: the plugin registers with the kubelet on its socket and lists its slots there,
// and again, with the GPU's health, when a GPU fails.
func TestServe(t *testing.T) {
	dir, kubelet := fakeKubelet(t)

	health := []GPU{gpus[0], gpus[1]}
	var mu sync.Mutex
	p := New(Options{NodeName: node, SlotsPerGPU: 2, GPUs: func() []GPU {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(health)
	}, Pods: (&cache{}).list})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, dir) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("Serve: %v", err)
		}
	})

	var req *pluginapi.RegisterRequest
	select {
	case req = <-kubelet.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
	}
	if req.ResourceName != "fairway.dev/gpu-share" || req.Endpoint != fairwayv1alpha1.ShareDevicePluginSocket || !req.Options.GetPreferredAllocationAvailable {
		t.Errorf("registration %+v", req)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list := func() string {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, d := range resp.Devices {
			s = append(s, d.ID+"="+d.Health)
		}
		return strings.Join(s, " ")
	}
	if got, want := list(), "GPU-a::share-0=Healthy GPU-a::share-1=Healthy GPU-b::share-0=Healthy GPU-b::share-1=Healthy"; got != want {
		t.Errorf("devices %q, want %q", got, want)
	}
	mu.Lock()
	health[1].Healthy = false
	mu.Unlock()
	p.Refresh()
	if got, want := list(), "GPU-a::share-0=Healthy GPU-a::share-1=Healthy GPU-b::share-0=Unhealthy GPU-b::share-1=Unhealthy"; got != want {
		t.Errorf("devices after GPU-b failed %q, want %q", got, want)
	}
}

// TestServeRegistersOnce: once registered, the plugin keeps its socket and registration until the
// kubelet restarts. (It used to serve and register again every checkEvery: a real kubelet
// refused the second registration as "device plugin already connected", dropped the plugin, and
// failed admissions with "dial unix .../fairway-gpu-share.sock: no such file or directory".)
func TestServeRegistersOnce(t *testing.T) {
	dir, kubelet := fakeKubelet(t)
	p := New(Options{NodeName: node, SlotsPerGPU: 1, GPUs: func() []GPU { return gpus[:1] }, Pods: (&cache{}).list})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, dir) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	}()
	select {
	case <-kubelet.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
	}
	sock, err := os.Stat(filepath.Join(dir, fairwayv1alpha1.ShareDevicePluginSocket))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(checkEvery * 5 / 2)
	if n := kubelet.count.Load(); n != 1 {
		t.Errorf("%d registrations in %s, want 1", n, checkEvery*5/2)
	}
	if now, err := os.Stat(filepath.Join(dir, fairwayv1alpha1.ShareDevicePluginSocket)); err != nil || !os.SameFile(sock, now) {
		t.Errorf("the plugin's socket was replaced (%v) while the kubelet was connected", err)
	}
}

// registration plays the kubelet's registration service.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	got   chan *pluginapi.RegisterRequest
	count atomic.Int32
}

func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.count.Add(1)
	select {
	case r.got <- req:
	default:
	}
	return &pluginapi.Empty{}, nil
}

func (r *registration) serve(sock string) (*grpc.Server, error) {
	lis, err := (&netListener{}).listen(sock)
	if err != nil {
		return nil, err
	}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, r)
	go func() { _ = s.Serve(lis) }()
	return s, nil
}

type netListener struct{}

func (netListener) listen(sock string) (net.Listener, error) { return net.Listen("unix", sock) }

// TestAllocateGivesTheShareItsFiles: the share library's mounts come with the device, for the
// pod being admitted; when they cannot be prepared the allocation is refused (a share never
// starts without its limit) and the pod stays waiting for the kubelet's retry.
func TestAllocateGivesTheShareItsFiles(t *testing.T) {
	c := &cache{}
	fail := true
	var gotPod, gotGPU string
	p := newPlugin(t, c, func(o *Options) {
		o.Files = func(pod *corev1.Pod, g GPU) ([]*pluginapi.Mount, error) {
			if fail {
				return nil, errors.New("disk full")
			}
			gotPod, gotGPU = pod.Name, g.UUID
			return []*pluginapi.Mount{{HostPath: "/var/lib/fairway/share/shares/" + string(pod.UID), ContainerPath: "/usr/local/fairway-share", ReadOnly: true}}, nil
		}
	})
	c.add(sharePod("team-a", "half", "GPU-a"))
	ids := preferred(t, p)
	if _, err := allocate(p, ids...); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("allocation with failing files: %v, want FailedPrecondition naming the cause", err)
	}
	fail = false
	r, err := allocate(p, ids...)
	if err != nil {
		t.Fatalf("the kubelet's retry: %v", err)
	}
	if gotPod != "half" || gotGPU != "GPU-a" {
		t.Errorf("files prepared for %s on %s, want half on GPU-a", gotPod, gotGPU)
	}
	found := false
	for _, m := range r.Mounts {
		found = found || (m.ContainerPath == "/usr/local/fairway-share" && m.ReadOnly)
	}
	if !found {
		t.Errorf("mounts %v lack the share's read-only directory", r.Mounts)
	}
}

// TestPreStartContainerLimitsThePod: with Options.Limit the plugin asks the kubelet for
// PreStartContainer calls, and in each puts the limit of the pod that holds the slots on the
// slots' GPU; an error refuses the container, a driver without the limit lets it start; after
// an agent restart the kubelet's record names the slots' pod.
func TestPreStartContainerLimitsThePod(t *testing.T) {
	c := &cache{}
	type call struct{ pod, gpu string }
	var calls []call
	var kernel bool
	var fail error
	limit := func(pod *corev1.Pod, g GPU) (bool, error) {
		calls = append(calls, call{pod.Name, g.UUID})
		return kernel, fail
	}
	admitted := map[types.NamespacedName][]string{}
	p := newPlugin(t, c, func(o *Options) {
		o.Limit = limit
		o.Admitted = func(context.Context) (map[types.NamespacedName][]string, error) { return admitted, nil }
	})
	if o, err := p.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{}); err != nil || !o.PreStartRequired || !o.GetPreferredAllocationAvailable {
		t.Fatalf("options %+v, %v: want PreStartRequired", o, err)
	}
	if o, _ := newPlugin(t, c, nil).GetDevicePluginOptions(context.Background(), &pluginapi.Empty{}); o.PreStartRequired {
		t.Error("a plugin without Limit asks for PreStartContainer calls")
	}
	preStart := func(p *Plugin, ids ...string) error {
		_, err := p.PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: ids})
		return err
	}

	c.add(sharePod("team-a", "half", "GPU-b"))
	if err := preStart(p, slots("GPU-b")[0]); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no pod holds it") {
		t.Errorf("PreStartContainer of a slot nobody holds: %v, want FailedPrecondition", err)
	}
	ids := preferred(t, p)
	if _, err := allocate(p, ids...); err != nil {
		t.Fatal(err)
	}
	kernel = true
	if err := preStart(p, ids...); err != nil {
		t.Fatalf("PreStartContainer: %v", err)
	}
	if len(calls) != 1 || calls[0] != (call{"half", "GPU-b"}) {
		t.Errorf("limits set %v, want half's on GPU-b", calls)
	}
	fail = errors.New("ERROR_NO_PERMISSION")
	if err := preStart(p, ids...); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "pod team-a/half: setting the GPU share's memory limit on its cgroup: ERROR_NO_PERMISSION") {
		t.Errorf("PreStartContainer with a failing limit: %v, want FailedPrecondition naming the pod and cause", err)
	}
	fail, kernel = nil, false
	if err := preStart(p, ids...); err != nil {
		t.Errorf("PreStartContainer on a driver without the limit: %v, want the container to start", err)
	}

	// A restarted agent: the kubelet's record says which pod holds the slot.
	restarted := newPlugin(t, c, func(o *Options) {
		o.Limit = limit
		o.Admitted = func(context.Context) (map[types.NamespacedName][]string, error) { return admitted, nil }
	})
	admitted[types.NamespacedName{Namespace: "team-a", Name: "half"}] = ids
	calls = nil
	if err := preStart(restarted, ids...); err != nil || len(calls) != 1 || calls[0].pod != "half" {
		t.Errorf("PreStartContainer after a restart: %v, limits %v; want half's", err, calls)
	}
	if err := preStart(restarted, "GPU-z::share-0"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PreStartContainer of another node's GPU: %v, want InvalidArgument", err)
	}
}
