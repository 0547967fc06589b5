package engine_test

// Building the objects of a scenario file.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
	"github.com/fairway-sched/fairway/scheduler/testutil"
)

func buildNodes(ns nodeSpec) []*corev1.Node {
	names := []string{ns.Name}
	if ns.Count > 1 {
		names = nil
		for i := 1; i <= ns.Count; i++ {
			names = append(names, fmt.Sprintf("%s-%d", ns.Name, i))
		}
	}
	var out []*corev1.Node
	for _, name := range names {
		b := testutil.MakeNode(name)
		if ns.GPUs > 0 {
			b.GPUs(ns.GPUs, ns.GPUType)
		}
		switch {
		case ns.GPUMemoryMiB > 0:
			b.GPUMemory(ns.GPUMemoryMiB)
		case ns.GPUMemoryMiB < 0: // the node publishes no GPU memory
			delete(b.Labels, v1alpha1.GPUMemoryLabel)
		}
		mem := ns.GPUMemoryMiB
		if mem == 0 {
			mem = 81920
		}
		switch {
		case ns.Replicas > 1:
			b.TimeSliced(ns.Replicas, mem)
		case ns.Inventory:
			b.Inventory(mem)
		}
		if ns.CPU != "" {
			b.Allocatable(corev1.ResourceCPU, ns.CPU)
		}
		if ns.Memory != "" {
			b.Allocatable(corev1.ResourceMemory, ns.Memory)
		}
		if ns.Pods != "" {
			b.Allocatable(corev1.ResourcePods, ns.Pods)
		}
		for k, v := range ns.Extended {
			b.Allocatable(corev1.ResourceName(k), v)
		}
		for k, v := range ns.Labels {
			b.Label(k, v)
		}
		for _, tt := range ns.Taints {
			k, v, e := parseTaint(tt)
			b.Taint(k, v, e)
		}
		if ns.Unschedulable {
			b.Unschedulable()
		}
		out = append(out, b.Obj())
	}
	return out
}

// parseTaint reads key=value:Effect or key:Effect.
func parseTaint(s string) (string, string, corev1.TaintEffect) {
	kv, eff, _ := strings.Cut(s, ":")
	k, v, _ := strings.Cut(kv, "=")
	return k, v, corev1.TaintEffect(eff)
}

func buildQueue(qs queueSpec) *v1alpha1.Queue {
	b := testutil.MakeQueue(qs.Name).Parent(qs.Parent).Priority(qs.Priority)
	conv := func(t *termsSpec) *v1alpha1.ResourceQuota {
		if t == nil {
			return nil
		}
		return &v1alpha1.ResourceQuota{Quota: t.Quota, OverQuotaWeight: t.Weight, Limit: t.Limit}
	}
	b.Spec.Resources = v1alpha1.QueueResources{GPU: conv(qs.GPU), CPU: conv(qs.CPU), Memory: conv(qs.Memory)}
	for _, gt := range qs.GPUTypes {
		b.Spec.GPUTypes = append(b.Spec.GPUTypes, v1alpha1.GPUTypeQuota{Name: gt.Name, Quota: gt.Quota, OverQuotaWeight: gt.Weight, Limit: gt.Limit})
	}
	if qs.ReclaimMinRuntime.Duration > 0 {
		b.ReclaimMinRuntime(qs.ReclaimMinRuntime.Duration)
	}
	if qs.PreemptMinRuntime.Duration > 0 {
		b.PreemptMinRuntime(qs.PreemptMinRuntime.Duration)
	}
	if d := qs.MaxEvictionGracePeriod; d != nil {
		b.Spec.MaxEvictionGracePeriod = &metav1.Duration{Duration: d.Duration}
	}
	b.Spec.IdleLending = qs.IdleLending
	b.Spec.Policy = qs.Policy
	if qs.Namespaces != nil {
		b.Namespaces(qs.Namespaces...)
	}
	return b.Obj()
}

func addJob(t *testing.T, s *sim, j *jobSpec, jobs map[string]*jobSpec) {
	t.Helper()
	if j.Replicas == 0 {
		j.Replicas = 1
	}
	if j.Namespace == "" {
		j.Namespace = j.Queue
	}
	jobs[j.Name] = j
	gang := j.Replicas > 1
	if j.Gang != nil {
		gang = *j.Gang
	}
	if j.PodGroup != nil {
		gang = true
		pg := testutil.MakePodGroup(j.Namespace, j.Name).MinMember(max(j.PodGroup.MinMember, 1)).Queue(j.PodGroup.Queue)
		if j.PodGroup.Required != "" {
			pg.Topology(j.PodGroup.Required, "")
		}
		for _, sg := range j.PodGroup.SubGroups {
			pg.SubGroup(sg.Name, sg.MinMember, sg.Required)
		}
		pg.CreationTimestamp.Time = s.now.Add(-j.CreatedAgo.Duration)
		if err := s.snap.UpsertPodGroup(pg.Obj()); err != nil {
			t.Fatal(err)
		}
		s.minMember[snapshot.GangKey{Namespace: j.Namespace, Name: j.Name, PodGroup: true}] = max(j.PodGroup.MinMember, 1)
	}
	started := time.Hour
	if j.StartedAgo != nil {
		started = j.StartedAgo.Duration
	}
	for i := 0; i < j.Replicas; i++ {
		name := j.Name
		if j.Replicas > 1 {
			name = fmt.Sprintf("%s-%d", j.Name, i)
		}
		b := testutil.MakePod(j.Namespace, name).Queue(j.Queue).Created(s.now.Add(-j.CreatedAgo.Duration))
		b.Labels[jobLabel] = j.Name
		if j.Grace != nil {
			b.Spec.TerminationGracePeriodSeconds = ptr(int64(j.Grace.Duration / time.Second))
		}
		if j.Joins != "" {
			b.PodGroup(j.Joins)
		} else if gang {
			b.PodGroup(j.Name)
			min := j.MinMember
			if min == 0 {
				min = j.Replicas
			}
			if j.PodGroup == nil {
				b.MinMember(min)
			}
		}
		if j.GPU > 0 {
			b.GPU(j.GPU)
		}
		if j.Fraction != "" {
			b.Fraction(j.Fraction)
		}
		if j.GPUMemory > 0 {
			b.GPUMemory(j.GPUMemory)
		}
		cpu, mem := j.CPU, j.Memory
		if cpu == "" {
			cpu = "1"
		}
		if mem == "" {
			mem = "1Gi"
		}
		b.CPU(cpu).Memory(mem)
		for k, v := range j.Extended {
			b.Request(corev1.ResourceName(k), v)
		}
		if j.Priority != nil {
			b.Priority(*j.Priority)
		}
		if j.Preemptibility != "" {
			b.Preemptibility(v1alpha1.Preemptibility(j.Preemptibility))
		}
		for k, v := range j.NodeSelector {
			b.NodeSelector(k, v)
		}
		for k, v := range j.AffinityIn {
			b.NodeAffinityIn(k, v...)
		}
		for _, tt := range j.Tolerations {
			k, v, e := parseTaint(tt)
			b.Toleration(k, v, e)
		}
		if j.AntiAffinity {
			b.PodAntiAffinity("app", j.Name)
		}
		if j.HostPort > 0 {
			b.HostPort(j.HostPort)
		}
		if j.TopologyRequired != "" {
			b.TopologyRequired(j.TopologyRequired)
		}
		if j.TopologyPreferred != "" {
			b.TopologyPreferred(j.TopologyPreferred)
		}
		if i < len(j.SubGroups) {
			b.SubGroup(j.SubGroups[i])
		}
		for k, v := range j.Annotations {
			b.Annotation(k, v)
		}
		if j.Gated {
			b.Gate("example.com/wait")
		}
		if j.Borrow {
			b.Annotation(v1alpha1.BorrowIdleGPUAnnotation, "true")
		}
		if node := replicaNode(j.Running, i); node != "" {
			b.Node(node).Started(s.now.Add(-started))
			switch {
			case i < len(j.GPUIndex):
				b.GPUIndex(j.GPUIndex[i]...)
			case j.GPU > 0:
				// Whole GPUs of pods set up running get the node's next indexes, as the runtime
				// would have recorded them.
				var idx []int
				for range j.GPU {
					idx = append(idx, s.nextIndex[node])
					s.nextIndex[node]++
				}
				b.GPUIndex(idx...)
			}
		}
		recreate := j.Recreate == nil || *j.Recreate
		if err := s.addPod(b.Obj(), recreate); err != nil {
			t.Fatal(err)
		}
		if j.Idle != nil && replicaNode(j.Running, i) != "" {
			mem := int64(-1)
			if j.Idle.MemoryMiB != nil {
				mem = *j.Idle.MemoryMiB
			}
			now := s.now
			s.now = now.Add(-j.Idle.Ago.Duration)
			mustNoErr(t, s.setIdle(types.NamespacedName{Namespace: j.Namespace, Name: name}, true, mem))
			mustNoErr(t, s.setSwap(types.NamespacedName{Namespace: j.Namespace, Name: name}, j.Idle.Swap))
			s.now = now
		}
	}
}

func replicaNode(running []string, i int) string {
	switch {
	case len(running) == 1:
		return running[0]
	case i < len(running):
		return running[i]
	}
	return ""
}

// podsOf resolves a job name or ns/pod to pod keys, sorted.
func podsOf(s *sim, ref string, jobs map[string]*jobSpec) []types.NamespacedName {
	var out []types.NamespacedName
	if j := jobs[ref]; j != nil {
		for k, p := range s.pods {
			if k.Namespace == j.Namespace && (p.Annotations[v1alpha1.PodGroupAnnotation] == j.Name || k.Name == j.Name || strings.HasPrefix(k.Name, j.Name+"-")) {
				out = append(out, k)
			}
		}
	} else if ns, name, ok := strings.Cut(ref, "/"); ok {
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
