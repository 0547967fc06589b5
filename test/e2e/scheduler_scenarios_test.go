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
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// TestScheduler runs `fairway scheduler` against a local cluster of four fake 8-GPU H100 nodes,
// each with its gpu-agent, and plays the four product-brief scenarios end to end, then deletes a
// node under a gang and shared GPUs. The subtests share the cluster and run one after another;
// each cleans up after itself.
func TestScheduler(t *testing.T) {
	ctrllog.SetLogger(testr.New(t))
	bin := buildFairway(t)
	c := startSchedCluster(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(4)}})
	ensureSchedFixtures(t, c)
	nodes, err := gpuagents.GPUNodes(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := gpuagents.Start(t.Context(), c, gpuagents.Options{Nodes: nodes, Binary: bin, RefreshInterval: 30 * time.Second, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Stop)
	sched := startSched(t, c, bin, "fairway-scheduler", true)

	t.Run("ReclaimGuaranteedQuota", func(t *testing.T) { testReclaim(t, c, sched) })
}

// testReclaim is scenario (a): team A has 2 guaranteed GPUs, team B borrows the whole 8-GPU node,
// team A asks for 2: exactly 2 of B's pods are evicted; their ReplicaSet re-creates them and they
// wait, with the reason on the pod.
func testReclaim(t *testing.T, c *cluster.Cluster, sched *schedProc) {
	ctx := t.Context()
	newNamespace(t, c, "team-a")
	newNamespace(t, c, "team-b")
	schedQueue(t, c, "team-a", "2", "team-a")
	schedQueue(t, c, "team-b", "", "team-b")
	defer deleteNamespace(t, c, "team-a", "team-a")
	defer deleteNamespace(t, c, "team-b", "team-b")
	node := "h100-0"

	mustCreate(t, c, replicaSet(schedPod("team-b", "train-b", "team-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node), 8))
	eventually(t, 30*time.Second, "team B's 8 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "team-b", nil))) == 8, nil
	})
	before := map[string]bool{}
	for _, p := range podsIn(t, c, ctx, "team-b", nil) {
		before[p.Name] = true
	}

	for i := range 2 {
		mustCreate(t, c, schedPod("team-a", fmt.Sprintf("train-a-%d", i), "team-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	}
	begin := time.Now()
	eventually(t, 30*time.Second, "team A's 2 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "team-a", nil))) == 2, nil
	})
	t.Logf("team A bound %v after asking", time.Since(begin).Round(time.Millisecond))

	// Exactly two of B's pods went; the ReplicaSet re-created them and they wait with a reason.
	var waiting []corev1.Pod
	eventually(t, 20*time.Second, "2 re-created pods of team B waiting with a reason", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, "team-b", nil)
		waiting = pendingPods(pods)
		if len(waiting) != 2 || len(bound(pods)) != 6 {
			return false, fmt.Errorf("%d bound, %d waiting", len(bound(pods)), len(waiting))
		}
		for _, p := range waiting {
			if before[p.Name] || reasonOf(&p) == "" {
				return false, fmt.Errorf("pod %s: re-created %v, reason %q", p.Name, !before[p.Name], reasonOf(&p))
			}
		}
		return true, nil
	})
	t.Logf("re-created pod waits: %s", reasonOf(&waiting[0]))
	time.Sleep(2 * time.Second) // nothing more is evicted
	pods := podsIn(t, c, ctx, "team-b", nil)
	if len(bound(pods)) != 6 || len(pendingPods(pods)) != 2 {
		t.Errorf("after settling: %d bound, %d waiting; want 6 and 2", len(bound(pods)), len(pendingPods(pods)))
	}
	victims := eventsFor(t, c, ctx, "team-b", "Reclaim")
	if len(victims) != 2 {
		t.Errorf("want 2 Reclaim events on team B's pods, got %d: %v", len(victims), victims)
	}
	for _, n := range victims {
		if !strings.Contains(n, "Reclaimed by team-a/train-a-") {
			t.Errorf("victim event does not name the beneficiary: %q", n)
		}
	}
	fams, err := scrape(ctx, sched.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := value(fams, "fairway_evictions_total", map[string]string{"reason": "Reclaim", "queue": "team-b"}); v != 2 {
		t.Errorf("fairway_evictions_total{reason=Reclaim,queue=team-b} = %v, want 2", v)
	}
}

// eventsFor returns the notes of the events of a reason in a namespace.
func eventsFor(t *testing.T, c *cluster.Cluster, ctx context.Context, namespace, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.Client().List(ctx, &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

var _ = metav1.Now
