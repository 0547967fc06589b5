//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/gpu-agent/fakegpu"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/gpuagents"
)

// runDashboardWorkload makes the series every panel needs. Queues: department research with
// team-a (2 GPUs guaranteed) and team-b (none), department ops with notebooks (1 GPU). team-b
// borrows all of h100-0 with a ReplicaSet of eight 1-GPU training pods; team-a then asks for its
// 2 guaranteed GPUs, so the scheduler reclaims two of team-b's pods, which come back and wait.
// Three notebooks of 0.25 GPU share one A100; one computes, two go idle. A team-a pod asking for
// 16 GPUs never fits. With the scheduler, a notebook of queue labs on h100-1 is swapped to host
// RAM for a loan and brought back (dashboardSwap). Pods are shaped as fairway's webhook leaves them (queue, framework, kind of
// work, gang and share annotations). Without a scheduler the pods are bound directly, so the
// gpu-agents still see them. kwok's resource metrics (cluster.Config.KwokMetrics) give every
// running pod a CPU and memory use of half its requests.
func runDashboardWorkload(t *testing.T, c *cluster.Cluster, fleet *gpuagents.Fleet, scheduler bool) {
	t.Helper()
	ctx := t.Context()
	quota := func(gpu, cpu, mem string) fairwayv1.QueueResources {
		q := func(s string) *fairwayv1.ResourceQuota {
			v := resource.MustParse(s)
			return &fairwayv1.ResourceQuota{Quota: &v}
		}
		return fairwayv1.QueueResources{GPU: q(gpu), CPU: q(cpu), Memory: q(mem)}
	}
	for _, q := range []*fairwayv1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: fairwayv1.QueueSpec{Resources: quota("4", "64", "256Gi")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: fairwayv1.QueueSpec{Parent: "research", Namespaces: []string{"team-a"}, Resources: quota("2", "16", "64Gi")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}, Spec: fairwayv1.QueueSpec{Parent: "research", Namespaces: []string{"team-b"}, Resources: quota("0", "2", "4Gi")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ops"}, Spec: fairwayv1.QueueSpec{Resources: quota("2", "16", "64Gi")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "notebooks"}, Spec: fairwayv1.QueueSpec{Parent: "ops", Namespaces: []string{"notebooks"}, Resources: quota("1", "8", "32Gi")}},
	} {
		dashCreate(t, c, q)
	}
	for _, ns := range []string{"team-a", "team-b", "notebooks"} {
		dashCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		eventually(t, 30*time.Second, "the default ServiceAccount of "+ns, func(ctx context.Context) (bool, error) {
			_, err := c.Clientset().CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	a100 := fleet.Agent("a100-0")
	gpus, err := a100.GPUs(ctx)
	if err != nil || len(gpus) == 0 {
		t.Fatalf("the GPUs of a100-0: %v", err)
	}
	uuidIndex := map[string]int{}
	for _, g := range gpus {
		uuidIndex[g.UUID] = g.Index
	}

	// team-b borrows h100-0.
	borrower := dashPod("team-b", "train-b", "team-b", "pytorchjob").gpus(1).priority(fairwayv1.PriorityClassTraining).kind("training").on("h100-0")
	if scheduler {
		dashCreate(t, c, borrower.replicaSet(8))
		waitBound(t, c, "team-b", 8)
	} else {
		for i := range 6 {
			dashCreate(t, c, borrower.named(fmt.Sprintf("train-b-%d", i)).bind("h100-0").pod())
		}
	}
	// Notebooks share one A100.
	for i := range 3 {
		nb := dashPod("notebooks", fmt.Sprintf("nb-%d", i), "notebooks", "jupyterhub").fraction("0.25").
			priority(fairwayv1.PriorityClassInteractive).kind("notebook").on("a100-0")
		if !scheduler {
			nb = nb.bind("a100-0").sharedGPU(0, gpus[0].UUID)
		}
		dashCreate(t, c, nb.pod())
	}
	// team-a asks for its guarantee: reclaim.
	for i := range 2 {
		p := dashPod("team-a", fmt.Sprintf("train-a-%d", i), "team-a", "argo").gpus(1).priority(fairwayv1.PriorityClassTraining).kind("workflow-step").on("h100-0")
		if !scheduler {
			p = p.bind("h100-0")
		}
		dashCreate(t, c, p.pod())
	}
	// Something that never fits.
	dashCreate(t, c, dashPod("team-a", "too-big", "team-a", "ray").gpus(16).priority(fairwayv1.PriorityClassTraining).gang("too-big", 1).pod())

	waitBound(t, c, "notebooks", 3)
	waitBound(t, c, "team-a", 2)
	if scheduler {
		eventually(t, 30*time.Second, "team-b's reclaimed pods re-created and waiting", func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			if err := c.Client().List(ctx, &pods, client.InNamespace("team-b")); err != nil {
				return false, err
			}
			waiting := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
					waiting++
				}
			}
			return waiting >= 1, fmt.Errorf("%d waiting", waiting)
		})
	}

	// GPU activity: training keeps h100-0 busy; nb-0 computes on its share, nb-1 and nb-2 only
	// hold memory and go idle.
	h100 := fleet.Agent("h100-0")
	for i := range 8 {
		if _, err := h100.SetGPU(ctx, i, fakegpu.DeviceUpdate{UtilizationPercent: ptr.To[uint32](70), MemoryUsedMiB: ptr.To[uint64](30000)}); err != nil {
			t.Fatal(err)
		}
	}
	var procs []fakegpu.Process
	var shared string
	for i := range 3 {
		var p corev1.Pod
		if err := c.Client().Get(ctx, types.NamespacedName{Namespace: "notebooks", Name: fmt.Sprintf("nb-%d", i)}, &p); err != nil {
			t.Fatal(err)
		}
		shared = p.Annotations[fairwayv1.GPUUUIDAnnotation]
		sm := uint32(0)
		if i == 0 {
			sm = 60
		}
		procs = append(procs, fakegpu.Process{PID: uint32(4000 + i), PodUID: string(p.UID), UsedMiB: uint64(1024 * (i + 1)), SMPercent: sm})
	}
	idx, ok := uuidIndex[shared]
	if !ok {
		t.Fatalf("the notebooks' GPU %q is not a GPU of a100-0", shared)
	}
	if _, err := a100.SetGPU(ctx, idx, fakegpu.DeviceUpdate{Processes: &procs}); err != nil {
		t.Fatal(err)
	}
	if scheduler {
		dashboardSwap(t, c, fleet)
	}
}

// dashboardSwap makes the swap panels' series: a notebook of queue labs (which lends) holds
// swapOwnerMiB on a GPU of h100-1, whose other 7 GPUs labs holds whole; a sweep asking 0.9 of a
// GPU is lent that GPU once the notebook's memory is on the host (the agents run with --swap),
// long enough for several scrapes, and the notebook's next cell brings it back.
func dashboardSwap(t *testing.T, c *cluster.Cluster, fleet *gpuagents.Fleet) {
	t.Helper()
	for _, ns := range []string{"labs", "sweeps"} {
		newNamespace(t, c, ns)
	}
	dashCreate(t, c, lendingQueue("labs", "8", "labs"))
	dashCreate(t, c, &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "sweeps"}, Spec: fairwayv1.QueueSpec{Namespaces: []string{"sweeps"}}})
	nb := startSwapNotebook(t, c, fleet.Agent("h100-1"), schedPod("labs", "nb-swap", "labs").Fraction("0.5").
		Priority(fairwayv1.PriorityClassInteractive).Annotate(fairwayv1.WorkloadKindAnnotation, "notebook").OnNodes("h100-1").Obj())
	hold := schedPod("labs", "hold", "labs").GPUs(7).Priority(fairwayv1.PriorityClassTraining).OnNodes("h100-1").Obj()
	dashCreate(t, c, hold)
	waitBound(t, c, "labs", 2)
	train := nb.swapOutForLoan(t, schedPod("sweeps", "sweep-swap", "sweeps").Fraction("0.9").Priority(fairwayv1.PriorityClassTraining).
		Annotate(fairwayv1.BorrowIdleGPUAnnotation, "true").OnNodes("h100-1").Obj())
	time.Sleep(3 * time.Second) // swapped: a few scrapes of the bytes on the host
	nb.swapInOnWork(t, train)
}

func waitBound(t *testing.T, c *cluster.Cluster, namespace string, n int) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%d pods of %s bound", n, namespace), func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.Client().List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		bound := 0
		var waiting []string
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName != "" && p.DeletionTimestamp == nil:
				bound++
			case p.Spec.NodeName == "":
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled {
						waiting = append(waiting, p.Name+": "+c.Message)
					}
				}
			}
		}
		return bound >= n, fmt.Errorf("%d bound; waiting: %v", bound, waiting)
	})
}

// dashPodB builds a pod as fairway's webhook leaves it.
type dashPodB struct{ p corev1.Pod }

func dashPod(namespace, name, queue, framework string) dashPodB {
	return dashPodB{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels:      map[string]string{fairwayv1.QueueLabel: queue, fairwayv1.ManagedLabel: "true", fairwayv1.FrameworkLabel: framework},
			Annotations: map[string]string{fairwayv1.WorkloadKindAnnotation: "pod"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 fairwayv1.SchedulerName,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}}}},
		},
	}}
}

func (b dashPodB) clone() dashPodB { return dashPodB{*b.p.DeepCopy()} }

func (b dashPodB) named(name string) dashPodB { b = b.clone(); b.p.Name = name; return b }

func (b dashPodB) gpus(n int) dashPodB {
	b = b.clone()
	q := resource.MustParse(strconv.Itoa(n))
	c := &b.p.Spec.Containers[0]
	c.Resources.Requests[fairwayv1.ResourceGPU] = q
	c.Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: q}
	return b
}

func (b dashPodB) priority(class string) dashPodB {
	b = b.clone()
	b.p.Spec.PriorityClassName = class
	return b
}

func (b dashPodB) kind(kind string) dashPodB {
	b = b.clone()
	b.p.Annotations[fairwayv1.WorkloadKindAnnotation] = kind
	return b
}

func (b dashPodB) gang(group string, minMember int) dashPodB {
	b = b.clone()
	b.p.Annotations[fairwayv1.PodGroupAnnotation] = group
	b.p.Annotations[fairwayv1.MinMemberAnnotation] = strconv.Itoa(minMember)
	return b
}

func (b dashPodB) on(node string) dashPodB {
	b = b.clone()
	b.p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	return b
}

// fraction makes the pod ask for a GPU share, with the fairway.dev/gpu-share ticket the webhook
// gives its GPU container.
func (b dashPodB) fraction(f string) dashPodB {
	b = b.clone()
	b.p.Annotations[fairwayv1.GPUFractionAnnotation] = f
	b.p.Annotations[fairwayv1.GPUContainerAnnotation] = "main"
	one := resource.MustParse("1")
	ctr := &b.p.Spec.Containers[0]
	if ctr.Resources.Limits == nil {
		ctr.Resources.Limits = corev1.ResourceList{}
	}
	if ctr.Resources.Requests == nil {
		ctr.Resources.Requests = corev1.ResourceList{}
	}
	ctr.Resources.Limits[fairwayv1.ResourceGPUShare], ctr.Resources.Requests[fairwayv1.ResourceGPUShare] = one, one
	return b
}

// bind places the pod directly, as the scheduler would, for runs without one.
func (b dashPodB) bind(node string) dashPodB {
	b = b.clone()
	b.p.Spec.NodeName = node
	return b
}

// sharedGPU records the GPU slot and UUID of a fractional pod, as the scheduler does.
func (b dashPodB) sharedGPU(slot int, uuid string) dashPodB {
	b = b.clone()
	b.p.Annotations[fairwayv1.GPUIndexAnnotation] = strconv.Itoa(slot)
	b.p.Annotations[fairwayv1.GPUUUIDAnnotation] = uuid
	return b
}

func (b dashPodB) pod() *corev1.Pod { return b.p.DeepCopy() }

func (b dashPodB) replicaSet(n int32) *appsv1.ReplicaSet {
	tmpl := b.pod()
	labels := maps.Clone(tmpl.Labels)
	labels["app"] = tmpl.Name
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: tmpl.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": tmpl.Name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(tmpl.Annotations)}, Spec: tmpl.Spec}},
	}
}
