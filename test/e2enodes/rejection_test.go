//go:build e2enodes

package e2enodes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// TestKubeletRejection: every GPU of a real node fails in its device plugin (marked unhealthy)
// while the Node object still advertises them (the kubelet posts its status every 30 s here).
// fairway binds a bare GPU pod there; the real kubelet refuses it at admission, with its own
// reason; fairway says so in a KubeletRejected event, and a ReplicaSet whose pods only that node
// could take is not bound there in a loop. The kwok tier plays the refusal with a stand-in
// that writes what the test author believes a kubelet writes; here the kubelet writes it.
func TestKubeletRejection(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{})
	ns := nodes.StartT(t, c, nodes.Config{Count: 1, Labels: h100Labels(),
		Kubelet: map[string]any{"nodeStatusUpdateFrequency": "30s"}})
	node := ns.Nodes[0]
	startScheduler(t, c)
	const n = "rejects"
	newNamespace(t, c, n)
	queue(t, c, n, "", n)

	node.Plugin.SetHealthy(false, node.Plugin.DeviceIDs()...)
	mustCreate(t, c, onNode(withGPUs(fairwayPod(n, "notebook", n, "exec sleep 3600"), 1), node.Name))
	var rejected *corev1.Pod
	eventually(t, 60*time.Second, "the kubelet refusing the notebook", func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, c, n, "notebook")
		if err != nil {
			return false, nil
		}
		if p.Status.Phase == corev1.PodRunning {
			t.Fatalf("the kubelet ran the notebook on a node whose GPUs are all unhealthy")
		}
		rejected = p
		return p.Status.Phase == corev1.PodFailed, nil
	})
	if rejected.Spec.NodeName != node.Name {
		t.Fatalf("notebook failed unbound: %s: %s", rejected.Status.Reason, rejected.Status.Message)
	}
	t.Logf("kubelet: %s: %s", rejected.Status.Reason, rejected.Status.Message)
	if r := rejected.Status.Reason; r != "OutOf"+fairwayv1.ResourceGPU && r != "UnexpectedAdmissionError" {
		t.Errorf("the kubelet's reason %q is neither of the two fairway's rejections.go reads for a device", r)
	}
	eventually(t, 30*time.Second, "fairway's KubeletRejected event on the notebook", func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := c.Client().List(ctx, &list, client.InNamespace(n)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "KubeletRejected" && e.Regarding.Name == "notebook" && strings.Contains(e.Note, node.Name) {
				t.Logf("event: %s", e.Note)
				return true, nil
			}
		}
		return false, nil
	})

	// A controller that keeps making pods only this node could take.
	mustCreate(t, c, replicaSetOf(onNode(withGPUs(fairwayPod(n, "loop", n, "exec sleep 3600"), 1), node.Name), 1))
	time.Sleep(50 * time.Second)
	list, err := c.Clientset().CoreV1().Pods(n).List(t.Context(), metav1.ListOptions{LabelSelector: "app=loop"})
	if err != nil {
		t.Fatal(err)
	}
	binds, waiting := 0, 0
	for _, p := range list.Items {
		if p.Spec.NodeName == node.Name {
			binds++
		} else if p.Status.Phase == corev1.PodPending {
			waiting++
		}
	}
	t.Logf("after 50 s: %d pods of the ReplicaSet bound to %s, %d in all, %d waiting", binds, node.Name, len(list.Items), waiting)
	if binds > 2 {
		t.Errorf("%d pods bound to %s in 50 s after it rejected one; want at most 2 (one per backoff)", binds, node.Name)
	}
	if waiting != 1 {
		t.Errorf("want the ReplicaSet's one pod waiting, got %d", waiting)
	}
}
