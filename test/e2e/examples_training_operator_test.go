//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/kubeflowjob"
	"github.com/fairway-sched/fairway/adapters/mpijob"
	"github.com/fairway-sched/fairway/adapters/pytorchjob"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleTrainingOperator runs examples/training-operator with the real Kubeflow Training
// Operator v1.8.1 (bin/training-operator, no gang scheduler flag): the PyTorchJob (master + 3
// workers, a GPU each) and the MPIJob (a CPU-only launcher + 2 workers of a GPU each) of project
// ml-team, which has no guarantee and runs on borrowed GPUs.
//
//  1. On one node of 4 GPUs the PyTorchJob starts whole. The MPIJob's launcher would fit (it
//     asks for CPU only) but does not start without its workers: none of its pods is bound.
//  2. A node of 2 GPUs joins: the MPIJob starts whole, launcher with its workers.
//  3. Project prod, whose guarantee is the 6 GPUs, asks for them: fairway reclaims both jobs
//     whole (every pod of both gangs is evicted). The evicted pods turn Failed, as on a real
//     node: the operator makes the PyTorchJob's pods again (restart policy OnFailure), and they
//     wait, none bound, while prod runs; it fails the MPIJob, whose launcher failed
//     (training-operator v1.8.1; docs/gangs.md), and makes none of its pods again.
//  4. prod's pods finish: the PyTorchJob comes back whole, the MPIJob stays failed.
//  5. A TFJob, an XGBoostJob and a PaddleJob of the operator's own examples: the pods the real
//     operator makes for them are recognised, one gang each.
//
// What kwok hides: no container runs. (Its nodes report ephemeral-storage only when asked, as
// here: the launcher's kubectl-delivery init container requests 5Gi.) Pods are Running as soon as they are bound, so the MPI
// launcher's kubectl-delivery init container, which on a real node waits until every worker is
// Ready, and the PyTorch workers' init container, which waits for the master's DNS name, pass at
// once; the operator itself creates the launcher right after the workers, without waiting for
// them. An evicted pod turns Failed at once (kwok's pod-terminate stage, as a kubelet reports
// it), without waiting out its grace period.
func TestExampleTrainingOperator(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := "ml-team"
	four := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 4,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti", EphemeralStorage: "1Ti"}
	c := startExample(t, []cluster.NodePool{four}, []client.Object{
		exampleQueue("ml-team", ns, ""), exampleQueue("prod", "prod", "6"),
	}, stack.Options{NoAgents: true, ProbeNamespace: ns})
	if _, err := c.StartTrainingOperator(ctx, cluster.TrainingOperatorOptions{}); err != nil {
		t.Fatalf("starting the training operator: %v", err)
	}

	type job struct {
		obj       *unstructured.Unstructured
		sel       map[string]string
		framework string
		group     string
		size      int
		gpus      int64
		subs      map[string]int32
		firstUIDs map[types.UID]bool // the pods of the first start; guarded by mu once set
		fileName  string
	}
	pt := &job{fileName: "pytorchjob.yaml", framework: pytorchjob.Name, size: 4, gpus: 4, subs: map[string]int32{"master": 1, "worker": 3}}
	mpi := &job{fileName: "mpijob.yaml", framework: mpijob.Name, size: 3, gpus: 2, subs: map[string]int32{"launcher": 1, "worker": 2}}
	for _, j := range []*job{pt, mpi} {
		j.obj = exampleObject(t, ns, "training-operator", j.fileName)
		j.sel = map[string]string{kubeflowjob.JobNameLabel: j.obj.GetName()}
		j.group = adapters.GroupName(j.framework, j.obj.GetName())
	}
	// checkGang: the pods are the job's whole gang as the webhook wrote it.
	checkGang := func(j *job, pods []corev1.Pod) {
		t.Helper()
		var gpus int64
		for i := range pods {
			p := &pods[i]
			checkPod(t, p, expectPod{queue: ns, framework: j.framework, kind: string(adapters.KindTraining), podGroup: j.group,
				subGroup: p.Labels[kubeflowjob.ReplicaTypeLabel], minMember: j.size, priorityClass: fairwayv1.PriorityClassTraining,
				priority: ptr.To[int32](50)})
			gpus += gpusOf(p)
		}
		if gpus != j.gpus {
			t.Errorf("%s: its pods ask for %d GPUs, want %d", j.obj.GetName(), gpus, j.gpus)
		}
		var pg fairwayv1.PodGroup
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: j.group}, &pg); err != nil {
			t.Fatalf("the PodGroup of %s: %v", j.obj.GetName(), err)
		}
		subs := map[string]int32{}
		for _, sg := range pg.Spec.SubGroups {
			subs[sg.Name] = sg.MinMember
		}
		if pg.Spec.MinMember != int32(j.size) || fmt.Sprint(subs) != fmt.Sprint(j.subs) {
			t.Errorf("PodGroup %s: minMember %d sub-groups %v, want %d %v", j.group, pg.Spec.MinMember, subs, j.size, j.subs)
		}
	}

	// A gang never runs partly: from now on, every 100 ms, each job has all the pods of its
	// current start bound or none. The pods of the first start that a reclaim is evicting, one
	// by one, are not a start and are left aside. Binding a gang is one API call per pod, so a
	// sample may fall between two of them: a job seen partly bound twice in a row ran partly.
	var mu sync.Mutex
	var partial []string
	wasPartial := map[string]bool{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		for watchCtx.Err() == nil {
			for _, j := range []*job{pt, mpi} {
				var list corev1.PodList
				if err := c.Client().List(watchCtx, &list, client.InNamespace(ns), client.MatchingLabels(j.sel)); err != nil {
					continue // the test is ending
				}
				mu.Lock()
				var current []corev1.Pod
				for _, p := range list.Items {
					if !j.firstUIDs[p.UID] {
						current = append(current, p)
					}
				}
				b := len(bound(current))
				isPartial := b > 0 && b < j.size
				if isPartial && wasPartial[j.obj.GetName()] {
					partial = append(partial, fmt.Sprintf("%s: %d of %d bound at %s (%s)", j.obj.GetName(), b, j.size,
						time.Now().Format("15:04:05.000"), describePods(current)))
				}
				wasPartial[j.obj.GetName()] = isPartial
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		stopWatch()
		watching.Wait()
		for _, p := range partial {
			t.Errorf("a gang ran partly: %s", p)
		}
	}()

	// 1. The PyTorchJob starts whole on the four GPUs.
	mustCreate(t, c, pt.obj)
	begin := time.Now()
	eventually(t, 90*time.Second, "the PyTorchJob's 4 pods bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, pt.sel))) == pt.size, nil
	})
	t.Logf("PyTorchJob %s bound whole %v after submission", pt.obj.GetName(), time.Since(begin).Round(time.Millisecond))
	checkGang(pt, podsIn(t, c, ctx, ns, pt.sel))

	// The MPIJob has no GPU left: none of its pods starts, not even the launcher.
	mustCreate(t, c, mpi.obj)
	mpiPods := waitPods(t, c, ns, mpi.sel, mpi.size, 60*time.Second)
	checkGang(mpi, mpiPods)
	var pg fairwayv1.PodGroup
	eventually(t, 30*time.Second, "the MPIJob's PodGroup unschedulable", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: mpi.group}, &pg); err != nil {
			return false, err
		}
		why := conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable)
		return conditionStatus(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable) == metav1.ConditionTrue &&
			!strings.HasPrefix(why, "WaitingForPods"), fmt.Errorf("condition %q", why)
	})
	t.Logf("MPIJob %s waits: %s", mpi.obj.GetName(), conditionMessage(pg.Status.Conditions, fairwayv1.PodGroupConditionUnschedulable))
	if b := bound(podsIn(t, c, ctx, ns, mpi.sel)); len(b) != 0 {
		t.Fatalf("the MPIJob started partly without GPUs for its workers: %s", describePods(b))
	}

	// 2. Two more GPUs: the launcher starts with its workers.
	two := cluster.NodePool{Name: "h100-more", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 2,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti", EphemeralStorage: "1Ti"}
	if _, err := c.AddNodes(ctx, two); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx); err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	eventually(t, 60*time.Second, "the MPIJob's launcher and 2 workers bound", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, mpi.sel))) == mpi.size, nil
	})
	t.Logf("MPIJob %s bound whole %v after the node joined", mpi.obj.GetName(), time.Since(begin).Round(time.Millisecond))
	mu.Lock()
	for _, j := range []*job{pt, mpi} {
		j.firstUIDs = map[types.UID]bool{}
		for _, p := range podsIn(t, c, ctx, ns, j.sel) {
			j.firstUIDs[p.UID] = true
		}
	}
	mu.Unlock()
	eventually(t, 60*time.Second, "the operator sees both jobs running", func(ctx context.Context) (bool, error) {
		for _, j := range []*job{pt, mpi} {
			if err := c.Client().Get(ctx, client.ObjectKeyFromObject(j.obj), j.obj); err != nil {
				return false, err
			}
			if s := lastCondition(j.obj); s != "Running" {
				return false, fmt.Errorf("%s is %q", j.obj.GetName(), s)
			}
		}
		return true, nil
	})

	// 3. prod takes its six GPUs back: both gangs are reclaimed whole.
	for name, gpus := range map[string]string{"serve-a": "4", "serve-b": "2"} {
		p := plainPod(name)
		p.Namespace = "prod"
		p.Annotations = map[string]string{cluster.CompleteDelayAnnotation: "15s"}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse(gpus)}
		mustCreate(t, c, p)
	}
	begin = time.Now()
	eventually(t, 60*time.Second, "prod's pods bound on the reclaimed GPUs", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "prod", nil))) == 2, nil
	})
	t.Logf("prod's pods bound %v after asking", time.Since(begin).Round(time.Millisecond))
	eventually(t, 30*time.Second, "the PyTorchJob's pods made again by the operator, none bound", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, ns, pt.sel)
		for _, p := range pods {
			if pt.firstUIDs[p.UID] {
				return false, fmt.Errorf("%s's pod %s is still there", pt.obj.GetName(), p.Name)
			}
		}
		if len(pods) != pt.size || len(bound(pods)) != 0 {
			return false, fmt.Errorf("%s: %s", pt.obj.GetName(), describePods(pods))
		}
		return true, nil
	})
	// The evicted launcher turned Failed, as on a real node: training-operator v1.8.1 fails the
	// MPIJob and makes none of its pods again (docs/gangs.md).
	eventually(t, 30*time.Second, "the MPIJob failed, none of its pods bound", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(mpi.obj), mpi.obj); err != nil {
			return false, err
		}
		pods := podsIn(t, c, ctx, ns, mpi.sel)
		s := lastCondition(mpi.obj)
		return s == "Failed" && len(bound(pods)) == 0, fmt.Errorf("%s is %q: %s", mpi.obj.GetName(), s, describePods(pods))
	})
	if notes := eventsAtLeast(t, c, ctx, ns, "Reclaim", pt.size+mpi.size, 30*time.Second); len(notes) < pt.size+mpi.size {
		t.Errorf("want a Reclaim event on each of the %d pods, got %d: %v", pt.size+mpi.size, len(notes), notes)
	} else {
		t.Logf("%d Reclaim events, e.g. %s", len(notes), notes[0])
	}

	// 4. prod is done: the PyTorchJob comes back whole; the failed MPIJob does not.
	begin = time.Now()
	eventually(t, 90*time.Second, "the PyTorchJob bound whole again", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, ns, pt.sel))) == pt.size, nil
	})
	t.Logf("the PyTorchJob bound whole again %v after prod's pods bound", time.Since(begin).Round(time.Millisecond))
	if pods := podsIn(t, c, ctx, ns, mpi.sel); len(bound(pods)) != 0 || lastCondition(mpi.obj) != "Failed" {
		t.Errorf("the failed MPIJob (%s) came back: %s", lastCondition(mpi.obj), describePods(pods))
	}
	for _, j := range []*job{pt, mpi} {
		pods := podsIn(t, c, ctx, ns, j.sel)
		if j == pt {
			checkGang(j, pods)
		}
		// The PyTorchJob's replicas restart OnFailure; the MPIJob's launcher fails its job.
		want := map[string]string{pytorchjob.Name: "true", mpijob.Name: "false"}[j.framework]
		for _, p := range pods {
			if got := p.Annotations[fairwayv1.RecreatableAnnotation]; got != want {
				t.Errorf("pod %s: %s %q, want %q", p.Name, fairwayv1.RecreatableAnnotation, got, want)
			}
		}
	}

	// 5. The operator's other kinds, from its own examples (the adapters' test data): their pods,
	// as the real operator makes them, are recognised and sized as one gang each. They ask for
	// CPU only (the PaddleJob's GPUs are taken out: the GPUs are busy).
	for _, tc := range []struct {
		file, framework string
		size            int
	}{
		{"adapters/tfjob/testdata/tf_job_mnist.yaml", "tfjob", 6},
		{"adapters/xgboostjob/testdata/xgboostjob.yaml", "xgboostjob", 3},
		{"adapters/paddlejob/testdata/simple-gpu.yaml", "paddlejob", 2},
	} {
		obj := loadUnstructured(t, tc.file)
		obj.SetNamespace(ns)
		specs, _, _ := unstructured.NestedMap(obj.Object, "spec")
		for field, v := range specs {
			if !strings.HasSuffix(field, "ReplicaSpecs") {
				continue
			}
			for _, r := range v.(map[string]any) {
				containers, _, _ := unstructured.NestedSlice(r.(map[string]any), "template", "spec", "containers")
				for _, c := range containers {
					delete(c.(map[string]any), "resources")
				}
				if err := unstructured.SetNestedSlice(r.(map[string]any), containers, "template", "spec", "containers"); err != nil {
					t.Fatal(err)
				}
			}
			if err := unstructured.SetNestedMap(obj.Object, v.(map[string]any), "spec", field); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(t, c, obj)
		sel := map[string]string{kubeflowjob.JobNameLabel: obj.GetName()}
		pods := waitPods(t, c, ns, sel, tc.size, 60*time.Second)
		for i := range pods {
			checkPod(t, &pods[i], expectPod{queue: ns, framework: tc.framework, kind: string(adapters.KindTraining),
				podGroup: adapters.GroupName(tc.framework, obj.GetName()), subGroup: pods[i].Labels[kubeflowjob.ReplicaTypeLabel],
				minMember: tc.size, priorityClass: fairwayv1.PriorityClassTraining, priority: ptr.To[int32](50)})
		}
		t.Logf("%s %s: %d pods, one gang", obj.GetKind(), obj.GetName(), len(pods))
	}
}

// lastCondition is the type of the last condition in a Training Operator job's status.
func lastCondition(obj *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if len(conds) == 0 {
		return ""
	}
	last, _ := conds[len(conds)-1].(map[string]any)
	return fmt.Sprint(last["type"])
}
