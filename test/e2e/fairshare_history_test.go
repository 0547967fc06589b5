//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestFairShareHistory: fair share over time keeps its memory across a leader change and a
// restart. Team A runs 8 of the 16 GPUs alone for a while under two replicas; the leader is
// killed, and the standby that takes over goes on from the usage in team A's status (it does
// not start from zero). Both replicas are then stopped and a fresh scheduler started: it too
// goes on from the status. Team B then asks for the whole cluster: with team A's history, team
// B's fair share is the larger one (without history both would get 8).
func TestFairShareHistory(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	c := cluster.StartT(t, cluster.Config{NodePools: []cluster.NodePool{cluster.H100Pool(2)}})
	ensureSchedFixtures(t, c)
	for _, ns := range []string{"hist-a", "hist-b"} {
		newNamespace(t, c, ns)
		schedQueue(t, c, ns, "", ns)
	}
	flags := []string{"--fair-share-usage-half-life=1h", "--fair-share-usage-sync-period=1s"}
	var (
		mu       sync.Mutex
		replicas []*schedProc
	)
	start := func(name string, wait bool) *schedProc {
		p := startSched(t, c, bin, name, wait, flags...)
		mu.Lock()
		replicas = append(replicas, p)
		mu.Unlock()
		return p
	}
	start("fairway-scheduler-0", true)
	start("fairway-scheduler-1", false)

	mustCreate(t, c, replicaSet(schedPod("hist-a", "train", "hist-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining), 8))
	eventually(t, 60*time.Second, "team A's 8 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "hist-a", nil))) == 8, nil
	})
	// used reads team A's status.usage: GPU-hours and when they were observed.
	used := func(ctx context.Context) (float64, time.Time, error) {
		var q fairwayv1.Queue
		if err := c.Client().Get(ctx, types.NamespacedName{Name: "hist-a"}, &q); err != nil {
			return 0, time.Time{}, err
		}
		u := q.Status.Usage
		if u == nil {
			return 0, time.Time{}, nil
		}
		if u.HalfLife.Duration != time.Hour {
			return 0, time.Time{}, fmt.Errorf("status.usage.halfLife %v, want 1h", u.HalfLife.Duration)
		}
		g := u.Used["gpu"]
		return g.AsApproximateFloat64(), u.ObservedTime.Time, nil
	}
	// 8 GPUs for 20 s is 0.044 GPU-hours; a history that started over would need as long again.
	var before float64
	eventually(t, 90*time.Second, "team A's usage to reach 0.04 GPU-hours in its status", func(ctx context.Context) (bool, error) {
		v, _, err := used(ctx)
		before = v
		return v >= 0.04, err
	})
	t.Logf("team A used %.3f GPU-hours before the leader change", before)

	// Leader change.
	leader := waitLeader(t, &mu, &replicas, func() {}, 30*time.Second)
	killed := time.Now()
	if err := syscall.Kill(leader.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// usedAfter waits for a scheduler to write team A's usage observed after since.
	usedAfter := func(since time.Time, who string) float64 {
		var v float64
		eventually(t, 60*time.Second, who+" to write team A's usage", func(ctx context.Context) (bool, error) {
			u, at, err := used(ctx)
			v = u
			return at.After(since.Add(time.Second)), err
		})
		return v
	}
	afterChange := usedAfter(killed, "the new leader")
	if afterChange < before*0.99 {
		t.Errorf("after the leader change team A's usage is %.3f GPU-hours, down from %.3f: the new leader did not go on from the status", afterChange, before)
	}
	t.Logf("after the leader change: %.3f GPU-hours", afterChange)

	// Restart: no replica left, then a fresh one.
	mu.Lock()
	for _, r := range replicas {
		_ = r.Stop() // a killed replica reports its SIGKILL here
	}
	replicas = nil
	mu.Unlock()
	stopped := time.Now()
	start("fairway-scheduler-2", true)
	afterRestart := usedAfter(stopped, "the restarted scheduler")
	if afterRestart < afterChange*0.99 {
		t.Errorf("after the restart team A's usage is %.3f GPU-hours, down from %.3f: the restarted scheduler did not go on from the status", afterRestart, afterChange)
	}
	t.Logf("after the restart: %.3f GPU-hours", afterRestart)

	// The history is used: team B, which used nothing, gets the larger fair share.
	mustCreate(t, c, replicaSet(schedPod("hist-b", "train", "hist-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining), 16))
	eventually(t, 60*time.Second, "team B's fair share above team A's", func(ctx context.Context) (bool, error) {
		share := func(name string) (float64, error) {
			var q fairwayv1.Queue
			if err := c.Client().Get(ctx, types.NamespacedName{Name: name}, &q); err != nil {
				return 0, err
			}
			v := q.Status.FairShare["gpu"]
			return v.AsApproximateFloat64(), nil
		}
		a, err := share("hist-a")
		if err != nil {
			return false, err
		}
		b, err := share("hist-b")
		if err != nil {
			return false, err
		}
		t.Logf("fair shares: team A %.2f, team B %.2f GPUs", a, b)
		return b > a+1, nil
	})
}
