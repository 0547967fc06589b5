//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/test/cluster"
)

// evictionAuditPolicy records every eviction and every pod deletion with its request body.
const evictionAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: Request
  verbs: ["delete"]
  resources:
  - group: ""
    resources: ["pods"]
- level: None
`

// TestEvictions proves the eviction contract on a real API server: fairway evicts through the
// Eviction API with the pod's own grace period, announces it with its DisruptionTarget reason
// first, and never takes a PodDisruptionBudget below what it allows.
func TestEvictions(t *testing.T) {
	t.Parallel()
	bin := buildFairway(t)
	dir := t.TempDir()
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(evictionAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartT(t, cluster.Config{
		NodePools:      []cluster.NodePool{cluster.H100Pool(4)}, // one node per subtest that fills one
		APIServerFlags: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-mode=blocking"},
	})
	ensureSchedFixtures(t, c)
	startSched(t, c, bin, "fairway-scheduler", true)

	t.Run("OwnGracePeriod", func(t *testing.T) { testOwnGrace(t, c, auditLog) })
	t.Run("PodDisruptionBudget", func(t *testing.T) { testBudget(t, c) })
	t.Run("BudgetTimeout", func(t *testing.T) { testBudgetTimeout(t, c, auditLog) })
	t.Run("TerminalVictimHoldsNothing", func(t *testing.T) { testTerminalVictim(t, c) })
}

// testTerminalVictim: a borrower's eight pods fill a node, each kept by a finalizer of its own
// (as a Job's pod is kept by the Job's tracking finalizer until the Job controller syncs). A
// claimant reclaims one GPU. The victim turns Failed (kwok, as a kubelet, ends a deleted pod's
// containers before the final delete) and stays, held by its finalizer; the claimant binds to
// the node while the victim is still there. A scheduler that waited for the object to go would
// never bind it: the finalizer is only taken off after the check.
func testTerminalVictim(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	const keep = "e2e.fairway.dev/keep"
	defer claimantAndBorrower(t, c, "term-a", "1", "term-b")()
	defer func() { // before the namespace goes: nothing else takes the finalizer off
		pods, err := listPods(context.Background(), c, "term-b", nil)
		if err != nil {
			t.Errorf("listing term-b's pods to release them: %v", err)
		}
		for i := range pods {
			p := &pods[i]
			if len(p.Finalizers) == 0 {
				continue
			}
			patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
			if err := c.Client().Patch(context.Background(), p, patch); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("releasing pod %s: %v", p.Name, err)
			}
		}
	}()
	node := "h100-3"
	for i := range 8 {
		p := schedPod("term-b", fmt.Sprintf("held-%d", i), "term-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj()
		p.Finalizers = []string{keep}
		mustCreate(t, c, p)
	}
	eventually(t, 30*time.Second, "the borrower's 8 pods bound", func(ctx context.Context) (bool, error) {
		n := len(bound(podsIn(t, c, ctx, "term-b", nil)))
		return n == 8, fmt.Errorf("%d bound", n)
	})

	mustCreate(t, c, schedPod("term-a", "claim", "term-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	eventually(t, 30*time.Second, "the claimant bound", func(ctx context.Context) (bool, error) {
		n := len(bound(podsIn(t, c, ctx, "term-a", nil)))
		return n == 1, fmt.Errorf("%d bound", n)
	})
	var victims []string
	for _, p := range podsIn(t, c, ctx, "term-b", nil) {
		if p.DeletionTimestamp == nil {
			continue
		}
		victims = append(victims, p.Name)
		if p.Status.Phase != corev1.PodFailed || !slices.Contains(p.Finalizers, keep) {
			t.Errorf("victim %s: phase %s, finalizers %v; want Failed and still held by %s", p.Name, p.Status.Phase, p.Finalizers, keep)
		}
	}
	if len(victims) != 1 {
		t.Fatalf("victims still present when the claimant bound: %v; want exactly one, Failed and held by its finalizer", victims)
	}
	if n := len(bound(podsIn(t, c, ctx, "term-b", nil))); n != 7 {
		t.Errorf("%d of the borrower's pods still run, want 7", n)
	}
	t.Logf("the claimant bound beside victim %s, Failed and still held by its finalizer", victims[0])
}

// testBudgetTimeout: a borrower runs eight training pods on one node with a PodDisruptionBudget
// of maxUnavailable 0; the owner, guaranteed all eight GPUs (reclaim.budgetTimeout 20s), asks
// for four. The API server refuses the evictions and the owner waits for the budget, its
// reason naming it; once it has waited the timeout, fairway deletes four borrowed pods itself
// (a pod delete, not an eviction, in the audit log), with their own grace period, each with an
// event naming the budget it overrode; the owner's four pods bind no later than the timeout
// plus the victims' grace (kwok ends them at once) plus a few cycles.
func testBudgetTimeout(t *testing.T, c *cluster.Cluster, auditLog string) {
	ctx := t.Context()
	const timeout = 20 * time.Second
	newNamespace(t, c, "pdbt-owner")
	newNamespace(t, c, "pdbt-borrow")
	schedQueue(t, c, "pdbt-owner", "8", "pdbt-owner")
	schedQueue(t, c, "pdbt-borrow", "", "pdbt-borrow")
	updateQueue(t, c, "pdbt-owner", func(s *fairwayv1.QueueSpec) {
		s.Reclaim = &fairwayv1.QueueReclaim{BudgetTimeout: &metav1.Duration{Duration: timeout}}
	})
	defer deleteNamespace(t, c, "pdbt-owner", "pdbt-owner")
	defer deleteNamespace(t, c, "pdbt-borrow", "pdbt-borrow")
	var q fairwayv1.Queue
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "pdbt-owner"}, &q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.Reclaim == nil || q.Spec.Reclaim.BudgetTimeout == nil || q.Spec.Reclaim.BudgetTimeout.Duration != timeout {
		t.Fatalf("the API server kept spec.reclaim as %+v: the CRD does not serve it", q.Spec.Reclaim)
	}
	node := "h100-2"
	sel := map[string]string{"app": "borrowed"}
	mustCreate(t, c, replicaSet(schedPod("pdbt-borrow", "borrowed", "pdbt-borrow").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Label("app", "borrowed"), 8))
	mustCreate(t, c, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "t-pdb", Namespace: "pdbt-borrow"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: sel}},
	})
	eventually(t, 2*time.Minute, "the borrower's 8 pods ready, the budget allowing none", func(ctx context.Context) (bool, error) {
		var pdb policyv1.PodDisruptionBudget
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "pdbt-borrow", Name: "t-pdb"}, &pdb); err != nil {
			return false, err
		}
		n := available(podsIn(t, c, ctx, "pdbt-borrow", sel))
		return n == 8 && pdb.Status.ExpectedPods == 8 && pdb.Status.DisruptionsAllowed == 0,
			fmt.Errorf("%d available, budget expects %d", n, pdb.Status.ExpectedPods)
	})

	start := time.Now()
	for i := range 4 {
		mustCreate(t, c, schedPod("pdbt-owner", fmt.Sprintf("own-%d", i), "pdbt-owner").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	}
	var reason string
	eventually(t, timeout, "the owner waiting for the budget, the reason naming it", func(ctx context.Context) (bool, error) {
		waiting := pendingPods(podsIn(t, c, ctx, "pdbt-owner", nil))
		if len(waiting) == 0 {
			return false, fmt.Errorf("no owner pod waits")
		}
		reason = reasonOf(&waiting[0])
		return strings.Contains(reason, "PodDisruptionBudget pdbt-borrow/t-pdb"), fmt.Errorf("reason %q", reason)
	})
	t.Logf("before the timeout, the owner's reason: %s", reason)
	eventually(t, 2*time.Minute, "the owner's 4 pods bound", func(ctx context.Context) (bool, error) {
		n := len(bound(podsIn(t, c, ctx, "pdbt-owner", nil)))
		return n == 4, fmt.Errorf("%d bound", n)
	})
	took := time.Since(start)
	// The victims' grace is 0 on kwok; the slack is the cycles around the timeout (the loop
	// runs every second) and the API round trips on a loaded machine.
	const slack = 15 * time.Second
	t.Logf("the owner's guarantee arrived %s after it asked (budget timeout %s)", took.Round(100*time.Millisecond), timeout)
	if took > timeout+slack {
		t.Errorf("the owner waited %s; a budget may delay a guarantee by at most the timeout (%s) plus the victims' grace and %s", took, timeout, slack)
	}
	if took < timeout-time.Second {
		t.Errorf("the owner's pods bound after %s, before the budget's timeout (%s): the budget was not honoured", took, timeout)
	}
	notes := eventsAtLeast(t, c, ctx, "pdbt-borrow", "GuaranteeReclaimedPastBudget", 4, 30*time.Second)
	if len(notes) != 4 {
		t.Errorf("%d GuaranteeReclaimedPastBudget events in pdbt-borrow, want 4: %q", len(notes), notes)
	}
	for _, n := range notes {
		if !strings.Contains(n, "PodDisruptionBudget pdbt-borrow/t-pdb") {
			t.Errorf("event %q does not name the budget", n)
		}
	}
	// The overridden pods were deleted, not evicted: their evictions were refused (429).
	evicted := map[string]bool{}
	for _, e := range readEvictions(t, auditLog, "pdbt-borrow") {
		if (e.code == 200 || e.code == 201) && !e.dryRun {
			evicted[e.pod] = true
		}
	}
	deleted := map[string]bool{}
	for _, d := range readDeletes(t, auditLog, "pdbt-borrow") {
		if !evicted[d.pod] {
			deleted[d.pod] = true
		}
	}
	if len(deleted) != 4 || len(evicted) != 0 {
		t.Errorf("the audit log shows %d pods of pdbt-borrow deleted without an eviction and %d evicted; want the 4 overridden pods deleted, none evicted past the budget", len(deleted), len(evicted))
	}
}

// testOwnGrace: a borrower's pods have terminationGracePeriodSeconds 120; a claimant reclaims
// one GPU. The API server's audit log shows the eviction request (pods/eviction, not a delete)
// with a grace period of 120 s, and the victim saw fairway's DisruptionTarget reason before it
// was told to stop (kwok deletes a terminating pod at once, so nothing waits the 120 s).
func testOwnGrace(t *testing.T, c *cluster.Cluster, auditLog string) {
	ctx := t.Context()
	defer claimantAndBorrower(t, c, "grace-a", "2", "grace-b")()
	node := "h100-0"

	long := schedPod("grace-b", "long", "grace-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node)
	long.Spec.TerminationGracePeriodSeconds = ptr.To[int64](120)
	mustCreate(t, c, replicaSet(long, 8))
	eventually(t, 30*time.Second, "the borrower's 8 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "grace-b", nil))) == 8, nil
	})

	// Watch the borrower's pods as a workload would: the first DisruptionTarget condition each
	// one shows, and whether it was already terminating then.
	type seen struct {
		reason      string
		terminating bool
	}
	var mu sync.Mutex
	first := map[string]seen{}
	w, err := c.Clientset().CoreV1().Pods("grace-b").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
					mu.Lock()
					if _, ok := first[p.Name]; !ok {
						first[p.Name] = seen{reason: cond.Reason, terminating: p.DeletionTimestamp != nil}
					}
					mu.Unlock()
				}
			}
		}
	}()

	mustCreate(t, c, schedPod("grace-a", "claim", "grace-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	eventually(t, 30*time.Second, "the claimant bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "grace-a", nil))) == 1, nil
	})

	var evictions []auditEviction
	eventually(t, 10*time.Second, "the eviction in the audit log", func(context.Context) (bool, error) {
		evictions = firstPerPod(readEvictions(t, auditLog, "grace-b"))
		return len(evictions) >= 1, nil
	})
	if len(evictions) != 1 {
		t.Fatalf("want exactly one eviction of the borrower's pods, got %+v", evictions)
	}
	e := evictions[0]
	if (e.code != 200 && e.code != 201) || e.grace == nil || *e.grace != 120 || e.dryRun {
		t.Errorf("eviction of %s: response %d, gracePeriodSeconds %v, dry run %v; want success with the pod's own 120 s", e.pod, e.code, ptr.Deref(e.grace, -1), e.dryRun)
	}
	t.Logf("the API server received the eviction of %s with gracePeriodSeconds %d", e.pod, *e.grace)
	// kwok deletes a terminating pod (it plays the kubelet); nothing deletes the victim before
	// its eviction.
	for _, d := range readDeletes(t, auditLog, "grace-b") {
		if d.pod == e.pod && d.line < e.line {
			t.Errorf("pod %s was deleted (by %s) before its eviction", d.pod, d.user)
		}
	}
	mu.Lock()
	s, ok := first[e.pod]
	mu.Unlock()
	if !ok {
		t.Fatalf("the victim %s never showed a DisruptionTarget condition", e.pod)
	}
	if s.reason != "Fairway"+string(engine.EvictReclaim) || s.terminating {
		t.Errorf("the victim first saw DisruptionTarget reason %q (terminating %v); want fairway's FairwayReclaim before the signal", s.reason, s.terminating)
	}

	// The borrower's queue now caps the grace of its evicted pods at 45 s: the next victim gets
	// 45 s, not its own 120.
	updateQueue(t, c, "grace-b", func(q *fairwayv1.QueueSpec) { q.MaxEvictionGracePeriod = &metav1.Duration{Duration: 45 * time.Second} })
	time.Sleep(time.Second) // the scheduler's Queue informer
	mustCreate(t, c, schedPod("grace-a", "claim-2", "grace-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	eventually(t, 30*time.Second, "the second eviction in the audit log", func(context.Context) (bool, error) {
		evictions = firstPerPod(readEvictions(t, auditLog, "grace-b"))
		return len(evictions) >= 2, nil
	})
	if e := evictions[1]; len(evictions) != 2 || e.grace == nil || *e.grace != 45 {
		t.Errorf("evictions after the cap: %+v; want a second one with gracePeriodSeconds 45", evictions)
	} else {
		t.Logf("with maxEvictionGracePeriod 45s the API server received the eviction of %s with gracePeriodSeconds %d", e.pod, *e.grace)
	}
}

// testBudget: an inference Deployment of four GPUs with a PodDisruptionBudget of maxUnavailable
// 1 and four batch pods borrow a node; a claimant entitled to six GPUs of it asks for them.
// Fairway takes the batch pods first, then the one web pod the budget allows; the sixth GPU
// would take the budget beyond it, so the API server refuses and the claimant's last pod waits,
// its reason naming the budget. At no time are more than one of web's pods unavailable.
func testBudget(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	newNamespace(t, c, "pdb-a")
	newNamespace(t, c, "pdb-b")
	schedQueue(t, c, "pdb-a", "6", "pdb-a")
	schedQueue(t, c, "pdb-b", "", "pdb-b")
	// Within the timeout a budget holds: this test shows that, BudgetTimeout the override.
	updateQueue(t, c, "pdb-a", func(s *fairwayv1.QueueSpec) {
		s.Reclaim = &fairwayv1.QueueReclaim{BudgetTimeout: &metav1.Duration{Duration: time.Hour}}
	})
	defer deleteNamespace(t, c, "pdb-a", "pdb-a")
	defer deleteNamespace(t, c, "pdb-b", "pdb-b")
	node := "h100-1"

	// Batch first, web a little later: the most recently started pods are the preferred
	// victims, so without its budget web's pods would all go before batch's.
	batchSel, webSel := map[string]string{"app": "batch"}, map[string]string{"app": "web"}
	mustCreate(t, c, replicaSet(schedPod("pdb-b", "batch", "pdb-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node), 4))
	eventually(t, 60*time.Second, "batch's 4 pods bound", func(ctx context.Context) (bool, error) {
		return available(podsIn(t, c, ctx, "pdb-b", batchSel)) == 4, nil
	})
	time.Sleep(1100 * time.Millisecond) // start times have a resolution of a second
	web := schedPod("pdb-b", "web", "pdb-b").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Label("app", "web")
	mustCreate(t, c, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "pdb-b"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: webSel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web.Labels, Annotations: web.Annotations}, Spec: web.Spec}},
	})
	mustCreate(t, c, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", Namespace: "pdb-b"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: webSel}},
	})
	eventually(t, 60*time.Second, "web's 4 pods ready, the budget allowing 1", func(ctx context.Context) (bool, error) {
		var pdb policyv1.PodDisruptionBudget
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "pdb-b", Name: "web-pdb"}, &pdb); err != nil {
			return false, err
		}
		return available(podsIn(t, c, ctx, "pdb-b", webSel)) == 4 && pdb.Status.DisruptionsAllowed == 1, fmt.Errorf("budget allows %d", pdb.Status.DisruptionsAllowed)
	})

	// Poll web's pods while the claimant reclaims: never more than one unavailable.
	stop := make(chan struct{})
	worst := make(chan int, 1)
	go func() {
		w := 0
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				worst <- w
				return
			case <-tick.C:
				var list corev1.PodList
				if err := c.Client().List(ctx, &list, client.InNamespace("pdb-b"), client.MatchingLabels(webSel)); err == nil {
					w = max(w, 4-available(list.Items))
				}
			}
		}
	}()
	for i := range 6 {
		mustCreate(t, c, schedPod("pdb-a", fmt.Sprintf("claim-%d", i), "pdb-a").GPUs(1).Priority(fairwayv1.PriorityClassTraining).OnNodes(node).Obj())
	}
	var reason string
	eventually(t, 60*time.Second, "5 claimant pods bound, the 6th waiting for the budget", func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := c.Client().List(ctx, &list, client.InNamespace("pdb-a")); err != nil {
			return false, err
		}
		pods := list.Items
		waiting := pendingPods(pods)
		if len(bound(pods)) != 5 || len(waiting) != 1 {
			return false, fmt.Errorf("%d bound, %d waiting", len(bound(pods)), len(waiting))
		}
		reason = reasonOf(&waiting[0])
		return strings.Contains(reason, "PodDisruptionBudget pdb-b/web-pdb"), fmt.Errorf("reason %q", reason)
	})
	t.Logf("the waiting pod's reason: %s", reason)
	time.Sleep(5 * time.Second) // later cycles try again; the budget still allows nothing
	close(stop)
	if w := <-worst; w > 1 {
		t.Errorf("up to %d of web's pods were unavailable at once; the budget allows 1", w)
	}
	pods := podsIn(t, c, ctx, "pdb-b", nil)
	if n := len(bound(podsIn(t, c, ctx, "pdb-b", batchSel))); n != 0 {
		t.Errorf("%d batch pods still run: victims no budget protects go first", n)
	}
	if n := available(podsIn(t, c, ctx, "pdb-b", webSel)); n != 3 {
		t.Errorf("%d of web's pods available, want 3 (%d pods in pdb-b)", n, len(pods))
	}
}

// available counts pods that run, are ready and are not terminating: what a budget counts as
// healthy.
func available(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// auditEviction is one pods/eviction request in the audit log.
type auditEviction struct {
	pod, user string
	line      int
	code      int
	grace     *int64
	dryRun    bool
}

type auditDelete struct {
	pod, user string
	line      int
}

type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

func readAudit(t *testing.T, path string, f func(line int, ev *auditEvent)) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	defer fh.Close()
	s := bufio.NewScanner(fh)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 0; s.Scan(); line++ {
		var ev auditEvent
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		f(line, &ev)
	}
}

// readEvictions returns the evictions of a namespace's pods, as the API server received them.
func readEvictions(t *testing.T, path, namespace string) []auditEviction {
	var out []auditEviction
	readAudit(t, path, func(line int, ev *auditEvent) {
		if ev.ObjectRef.Namespace != namespace || ev.ObjectRef.Subresource != "eviction" {
			return
		}
		var body policyv1.Eviction
		if err := json.Unmarshal(ev.RequestObject, &body); err != nil {
			t.Errorf("eviction request body: %v", err)
			return
		}
		e := auditEviction{pod: ev.ObjectRef.Name, user: ev.User.Username, code: ev.ResponseStatus.Code, line: line}
		if o := body.DeleteOptions; o != nil {
			e.grace, e.dryRun = o.GracePeriodSeconds, len(o.DryRun) > 0
		}
		out = append(out, e)
	})
	return out
}

// firstPerPod keeps one eviction request per pod, in the order of their first: the first that
// succeeded, else the first. An eviction whose answer came after the scheduler's write timeout
// (a loaded machine) is sent again, guarded by the pod's UID, and the API server answers it again
// while the pod terminates: it is one eviction of the pod.
func firstPerPod(evs []auditEviction) []auditEviction {
	at := map[string]int{}
	var out []auditEviction
	for _, e := range evs {
		i, seen := at[e.pod]
		switch {
		case !seen:
			at[e.pod] = len(out)
			out = append(out, e)
		case !out[i].succeeded() && e.succeeded():
			out[i] = e
		}
	}
	return out
}

func (e auditEviction) succeeded() bool { return !e.dryRun && (e.code == 200 || e.code == 201) }

// readDeletes returns the deletions of a namespace's pods.
func readDeletes(t *testing.T, path, namespace string) []auditDelete {
	var out []auditDelete
	readAudit(t, path, func(line int, ev *auditEvent) {
		if ev.ObjectRef.Namespace == namespace && ev.Verb == "delete" && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "" {
			out = append(out, auditDelete{pod: ev.ObjectRef.Name, user: ev.User.Username, line: line})
		}
	})
	return out
}
