//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
)

// coexistenceAuditPolicy records evictions, and writes of nodes (not their status: kwok's
// heartbeats), to count what fairway evicts and how often it taints.
const coexistenceAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: Request
  verbs: ["patch", "update"]
  resources:
  - group: ""
    resources: ["nodes"]
- level: None
`

// TestCoexistence: fairway and the real kube-scheduler share three 8-GPU nodes. A borrower queue
// runs 20 one-GPU pods over its share (fairway packs them: h100-0 and h100-1 full, 4 on
// h100-2); a namespace no queue serves gets a steady stream of plain one-GPU pods that
// kube-scheduler places on the GPUs left (each finishes 3 s after it starts, and a few always
// wait). Then the lender, whose quota is 16, submits a gang of 2×8 GPUs: fairway reclaims the
// borrower's pods of two nodes and holds the room. The gang must start, and fairway must have
// evicted exactly the 16 pods it needed: the nodes it frees get the hold taint fairway.dev/held
// before the evictions, so the stream's pods cannot take the room (kube-scheduler ignores
// fairway's holds, and the nominatedNodeName of pods it does not schedule; docs/coexistence.md).
//
// FAIRWAY_E2E_NO_HOLD_TAINTS=1 runs the same with --no-hold-taints, to see what the
// taint prevents: the stream takes the freed GPUs and the gang does not start.
func TestCoexistence(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(coexistenceAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartT(t, cluster.Config{
		NodePools:      []cluster.NodePool{cluster.H100Pool(3)},
		KubeScheduler:  true,
		APIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	ensureSchedFixtures(t, c)
	var args []string
	off := os.Getenv("FAIRWAY_E2E_NO_HOLD_TAINTS") != ""
	if off {
		args = append(args, "--no-hold-taints")
		t.Log("running with --no-hold-taints: the gang is expected not to start")
	}
	startSched(t, c, bin, "fairway-scheduler", true, args...)
	ctx := t.Context()
	for _, ns := range []string{"lend", "borrow", "plain"} {
		newNamespace(t, c, ns)
	}
	schedQueue(t, c, "lend", "16", "lend")
	schedQueue(t, c, "borrow", "", "borrow")

	borrower := schedPod("borrow", "b", "borrow").GPUs(1).Priority(fairwayv1.PriorityClassTraining)
	mustCreate(t, c, replicaSet(borrower, 20))
	eventually(t, 60*time.Second, "the borrower's 20 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "borrow", nil))) == 20, nil
	})

	// The stream: a plain pod every 200 ms while fewer than 6 wait.
	var created, placed atomic.Int64
	streamCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(streamCtx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			var list corev1.PodList
			if err := c.Client().List(ctx, &list, client.InNamespace("plain")); err != nil {
				return false, nil
			}
			var bound int64
			waiting := 0
			for _, p := range list.Items {
				if p.Spec.NodeName != "" {
					bound++
				} else {
					waiting++
				}
			}
			placed.Store(bound)
			if waiting < 6 {
				if err := c.Client().Create(ctx, plainGPUPod(created.Add(1))); err != nil && ctx.Err() == nil {
					t.Logf("creating a plain pod: %v", err)
				}
			}
			return false, nil
		})
	})
	eventually(t, 60*time.Second, "kube-scheduler placing the stream's pods", func(context.Context) (bool, error) {
		return placed.Load() >= 8, nil // the 4 free GPUs, twice over
	})

	// The nodes the borrower fills: the gang's two pods can go nowhere else.
	full := map[string]int{}
	for _, p := range bound(podsIn(t, c, ctx, "borrow", nil)) {
		full[p.Spec.NodeName]++
	}
	for n, k := range full {
		if k < 8 {
			delete(full, n)
		}
	}
	if len(full) != 2 {
		t.Fatalf("the borrower fills %d nodes, want 2 (fairway packs): %v", len(full), full)
	}

	start := time.Now()
	gang := schedPod("lend", "g", "lend").GPUs(8).Priority(fairwayv1.PriorityClassTraining).Gang("g", 2)
	for i := range 2 {
		p := gang.Obj()
		p.Name = fmt.Sprintf("g-%d", i)
		mustCreate(t, c, p)
	}
	var gangBound []corev1.Pod
	waitErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		gangBound = bound(podsIn(t, c, ctx, "lend", nil))
		return len(gangBound) == 2, nil
	})
	took := time.Since(start)
	// Long enough for a repeated reclaim to show.
	time.Sleep(5 * time.Second)
	placedAtGang := placed.Load()

	// Pods evicted, not eviction requests: an eviction whose answer came after the scheduler's
	// write timeout (a loaded CI machine) is sent again, guarded by the pod's UID, and the API
	// server answers it again for the pod still terminating; it disrupts nothing more.
	evicted, requests := map[string]int{}, 0
	for _, e := range readEvictions(t, auditLog, "borrow") {
		if e.succeeded() {
			evicted[e.pod]++
			requests++
		}
	}
	evictions := len(evicted)
	// fairway's writes of nodes: patches of the node object (not its status) that add the taint
	// (the key is in the body) or take it off (a taint list without it); by user, so that the
	// count is fairway's own.
	taintWrites, nodeWrites := 0, map[string]int{}
	readAudit(t, auditLog, func(_ int, ev *auditEvent) {
		if ev.ObjectRef.Resource != "nodes" || ev.ObjectRef.Subresource != "" {
			return
		}
		nodeWrites[fmt.Sprintf("%s %s (%d)", ev.User.Username, ev.Verb, ev.ResponseStatus.Code)]++
		// The node lifecycle controller patches taints too; its user is a system one.
		if ev.Verb == "patch" && !strings.HasPrefix(ev.User.Username, "system:") && bytes.Contains(ev.RequestObject, []byte(`"taints"`)) {
			taintWrites++
		}
	})
	t.Logf("node writes in the audit log, by user, verb and response: %v", nodeWrites)
	// Plain pods kube-scheduler placed on the nodes fairway freed for the gang (finished ones
	// included: they took the room while they ran).
	foreignOnFreed := 0
	for _, p := range podsIn(t, c, ctx, "plain", nil) {
		if full[p.Spec.NodeName] > 0 {
			foreignOnFreed++
		}
	}
	t.Logf("coexistence (hold taints %v): gang bound %d/2 after %v; fairway evicted %d pods (the gang needs 16) in %d eviction requests; fairway's node taint patches %d; kube-scheduler placed %d of %d plain pods, %d of them on the 2 nodes freed for the gang",
		!off, len(gangBound), took.Round(100*time.Millisecond), evictions, requests, taintWrites, placedAtGang, created.Load(), foreignOnFreed)

	if waitErr != nil {
		t.Errorf("the gang did not start within 90s: %d of its pods bound", len(gangBound))
	}
	if evictions != 16 {
		t.Errorf("fairway evicted %d of the borrower's pods; the gang needs 16 (one node's worth each for its two 8-GPU pods): %v", evictions, evicted)
	}
	if off {
		return
	}
	if foreignOnFreed > 0 {
		t.Errorf("kube-scheduler placed %d plain pods on the nodes fairway freed for the gang", foreignOnFreed)
	}
	if taintWrites < 2 {
		t.Errorf("%d node taint patches; want the two nodes tainted and untainted", taintWrites)
	}
	// The hold taints go once the gang is bound; the stream takes what the gang left.
	eventually(t, 20*time.Second, "no node with the hold taint any more", func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := c.Client().List(ctx, &nodes); err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			for _, tt := range n.Spec.Taints {
				if fairwayv1.IsHoldTaintKey(tt.Key) {
					return false, fmt.Errorf("node %s still has %s", n.Name, tt.ToString())
				}
			}
		}
		return true, nil
	})
}

// plainGPUPod is a pod of the unserved namespace, for kube-scheduler: one GPU, done 3 s after
// it starts.
func plainGPUPod(i int64) *corev1.Pod {
	gpu := resource.MustParse("1")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "plain", Name: fmt.Sprintf("plain-%d", i),
			Annotations: map[string]string{cluster.CompleteDelayAnnotation: "3s"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), fairwayv1.ResourceGPU: gpu},
				Limits:   corev1.ResourceList{fairwayv1.ResourceGPU: gpu},
			}}},
		},
	}
}
