//go:build e2enodes

package e2enodes

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/assign"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// TestRealNodes is the tier's foundation: two kubelets join the local control plane and run
// pods in containerd, a pod on one node reaches a pod on the other over the pod network, the
// API server reads a container's log from its kubelet, and a pod asking for GPUs gets devices
// the kubelet itself allocated from the device plugin, in its environment and in the kubelet's
// PodResources API. kwok shows none of it: its pods are rows in etcd, with made-up IPs, no
// process, no log and no device.
func TestRealNodes(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{})
	ns := nodes.StartT(t, c, nodes.Config{Count: 2})
	a, b := ns.Nodes[0], ns.Nodes[1]
	const namespace = "real"
	newNamespace(t, c, namespace)

	t.Run("PodNetwork", func(t *testing.T) {
		mustCreate(t, c, shPod(namespace, "server", a.Name,
			`mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www`))
		server := waitPhase(t, c, namespace, "server", corev1.PodRunning, 2*time.Minute)
		if !podIPIn(server.Status.PodIP, a.PodCIDR) {
			t.Fatalf("server pod IP %q is not in node %s's pod subnet %s", server.Status.PodIP, a.Name, a.PodCIDR)
		}
		// nc, not wget: Debian's static busybox wget segfaults (exit 139) in any container.
		mustCreate(t, c, shPod(namespace, "client", b.Name,
			`for i in $(seq 60); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 `+server.Status.PodIP+` 8080 | grep hello && exit 0; sleep 1; done; exit 1`))
		waitPhase(t, c, namespace, "client", corev1.PodSucceeded, 2*time.Minute)
		if logs := waitLog(t, c, namespace, "client", "hello-from-server", 30*time.Second); !strings.Contains(logs, "hello-from-server") {
			t.Fatalf("client log: %q", logs)
		}
	})

	t.Run("DevicePlugin", func(t *testing.T) {
		p := shPod(namespace, "gpus", a.Name, `echo "visible=$NVIDIA_VISIBLE_DEVICES"; exec sleep 3600`)
		two := resource.MustParse("2")
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: two}
		mustCreate(t, c, p)
		waitPhase(t, c, namespace, "gpus", corev1.PodRunning, 2*time.Minute)
		logs := waitLog(t, c, namespace, "gpus", "visible=", 30*time.Second)
		visible := strings.Split(strings.TrimPrefix(logs, "visible="), ",")
		if len(visible) != 2 {
			t.Fatalf("NVIDIA_VISIBLE_DEVICES: %q, want two device UUIDs", logs)
		}
		for _, id := range visible {
			if !slices.Contains(a.Plugin.DeviceIDs(), id) {
				t.Errorf("visible device %q is not one of node %s's (%v)", id, a.Name, a.Plugin.DeviceIDs())
			}
		}
		pr, err := assign.Dial(a.PodResourcesSocket)
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		var got []string
		eventually(t, 30*time.Second, "the kubelet's PodResources API listing the pod's devices", func(ctx context.Context) (bool, error) {
			all, err := pr.List(ctx, fairwayv1.ResourceGPU)
			if err != nil {
				return false, nil
			}
			got = all[types.NamespacedName{Namespace: namespace, Name: "gpus"}]
			return len(got) == 2, nil
		})
		slices.Sort(got)
		slices.Sort(visible)
		if !slices.Equal(got, visible) {
			t.Errorf("PodResources says %v, the container sees %v", got, visible)
		}
	})
}

// podIPIn reports whether ip is in cidr.
func podIPIn(ip, cidr string) bool {
	addr, err := netip.ParseAddr(ip)
	pfx, perr := netip.ParsePrefix(cidr)
	return err == nil && perr == nil && pfx.Contains(addr)
}
