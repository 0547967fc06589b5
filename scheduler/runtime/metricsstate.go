package runtime

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/engine"
	"github.com/fairway-sched/fairway/scheduler/runtime/cache"
	"github.com/fairway-sched/fairway/scheduler/runtime/gpushare"
	"github.com/fairway-sched/fairway/scheduler/runtime/metrics"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// metricsState collects the state metrics from the snapshot and the caches after a cycle. It
// runs on the loop at most once a second (and after cycles that decided something).
func (l *loop) metricsState(res *engine.Result) *metrics.State {
	st := &metrics.State{}
	quota := map[string]map[string]float64{}
	for _, q := range l.snap.Queues() {
		m := map[string]float64{}
		for d := 0; d < l.snap.NumDims(); d++ {
			if v := q.Quota.At(d); v > 0 {
				m[l.snap.DimName(d)] = natural(l.snap.DimName(d), v)
			}
		}
		quota[q.Name] = m
		if q.Defined {
			st.QueueTree = append(st.QueueTree, metrics.QueueInfo{Queue: q.Name, Parent: q.Spec.Parent})
		}
	}
	loans := map[string]int{}
	for _, n := range l.snap.Nodes() {
		if n == nil || n.Loans == 0 {
			continue
		}
		for _, t := range n.Tasks {
			if t.GPUs.Loan && t.Gang != nil {
				loans[t.Gang.QueueName()]++
			}
		}
	}
	for i := range res.Queues {
		q := &res.Queues[i]
		st.Queues = append(st.Queues, metrics.QueueAmounts{
			Queue: q.Name, Guaranteed: quota[q.Name], FairShare: naturals(q.FairShare), Allocated: naturals(q.Allocated),
			AllocatedNonPreemptible: naturals(q.AllocatedNonPreemptible), Requested: naturals(q.Requested), Borrowed: naturals(q.Borrowed),
			Loaned: naturals(q.Loaned), Loans: loans[q.Name],
		})
		if l.hist != nil {
			st.Queues[len(st.Queues)-1].Usage, st.Queues[len(st.Queues)-1].OverQuotaUsageShare = l.usageMetrics(q.Name)
		}
	}
	type qr struct{ q, r string }
	pend := map[qr]*metrics.Pending{}
	for _, u := range res.Unschedulable {
		k := qr{u.Queue, string(u.Code)}
		p := pend[k]
		if p == nil {
			p = &metrics.Pending{Queue: u.Queue, Reason: string(u.Code)}
			pend[k] = p
		}
		p.Pods += u.PendingPods
		p.Gangs++
	}
	for _, p := range pend {
		st.Pending = append(st.Pending, *p)
	}
	uuids := l.reservationUUIDs()
	for _, n := range l.snap.Nodes() {
		if n == nil {
			continue
		}
		shared := false
		for i := range n.Slots {
			s := &n.Slots[i]
			if s.Sharers == 0 && s.Reserved == 0 {
				continue // most slots: one test
			}
			shared = true
			if s.Sharers > 0 && s.Owners == 0 {
				st.Shares = append(st.Shares, metrics.Share{Node: n.Name, GPUIndex: s.Index, Ratio: float64(s.UsedMilli) / snapshot.MilliPerGPU,
					GPUUUID: uuids[gpushare.SlotKey{Node: n.Name, Slot: s.Index}]})
			}
		}
		if !n.Unschedulable && (len(n.Slots) > 0 || n.InventoryGPUs > 0) {
			st.NodeGPUs = append(st.NodeGPUs, nodeGPUs(n))
		}
		if shared {
			st.Swapped = append(st.Swapped, swappedGPUs(n, uuids)...)
		}
	}
	st.PodGroups = l.podGroupCounts()
	return st
}

// podInfos lists fairway's bound, live pods of queues with their queue and kind of work, for
// fairway_pod_info: read from the informer's store when the metrics are scraped, so the loop does
// no work for it. Reservation pods, which belong to no queue, are left out.
func (r *Runtime) podInfos() []metrics.PodInfo {
	objs := r.inf.Pods.GetStore().List()
	out := make([]metrics.PodInfo, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
			v1alpha1.IsReservationPod(p, r.opts.Namespace) {
			continue
		}
		if q := queueOf(p); q != "" {
			out = append(out, metrics.PodInfo{Namespace: p.Namespace, Pod: p.Name, Queue: q, Kind: string(v1alpha1.KindOf(p)), Node: p.Spec.NodeName})
		}
	}
	return out
}

// nodeGPUs counts a node's GPUs by state. Slots come from the node's nvidia.com/gpu allocatable,
// which a device plugin lowers when a GPU fails; where it does not (kwok nodes), the unhealthy
// GPUs are taken out of the free ones, so the states always sum to the node's GPUs.
func nodeGPUs(n *snapshot.Node) metrics.NodeGPUs {
	out := metrics.NodeGPUs{Node: n.Name, GPUType: n.GPUType, Unhealthy: n.UnhealthyGPUs}
	empty := 0
	for i := range n.Slots {
		s := &n.Slots[i]
		switch {
		case s.Owners > 0:
			out.Whole++
		case !s.Empty():
			out.Shared++
		default:
			empty++
		}
	}
	floating := min(int(n.Floating), empty)
	out.Whole += floating
	out.Free = empty - floating
	if total := max(len(n.Slots), n.InventoryGPUs); len(n.Slots)+n.UnhealthyGPUs > total {
		out.Free = max(0, out.Free-(len(n.Slots)+n.UnhealthyGPUs-total))
	}
	return out
}

// swappedGPUs lists the node's shared GPUs with holders whose memory their gpu-agent reports on
// host RAM (fairway.dev/gpu-swap SwappedOut), in slot order. Only tasks on a shared (or
// reserved) slot can hold swapped memory: metricsState calls it only for nodes that have one,
// which it sees in the walk over the slots it makes anyway (most nodes have none, and their
// tasks are many pointers apart where their slots are one short array).
func swappedGPUs(n *snapshot.Node, uuids map[gpushare.SlotKey]string) []metrics.Swapped {
	var out []metrics.Swapped
	at := map[int32]int{}
	for _, t := range n.Tasks {
		// The slot tests first: Swap copies the task's swap state, and most tasks share no GPU.
		if t.GPUs.Shared < 0 || t.GPUs.Loan || int(t.GPUs.Shared) >= len(n.Slots) || t.Swap().State != v1alpha1.GPUSwappedOut {
			continue
		}
		i, ok := at[t.GPUs.Shared]
		if !ok {
			s := &n.Slots[t.GPUs.Shared]
			i = len(out)
			at[t.GPUs.Shared] = i
			out = append(out, metrics.Swapped{Node: n.Name, GPUIndex: s.Index, GPUUUID: uuids[gpushare.SlotKey{Node: n.Name, Slot: s.Index}]})
		}
		out[i].Holders++
		out[i].Bytes += t.Swap().Bytes
	}
	slices.SortFunc(out, func(a, b metrics.Swapped) int { return a.GPUIndex - b.GPUIndex })
	return out
}

// reservationUUIDs maps each slot held by a live reservation pod to the physical GPU its gpu-agent
// reported for it.
func (l *loop) reservationUUIDs() map[gpushare.SlotKey]string {
	out := make(map[gpushare.SlotKey]string, len(l.resv.byName))
	for name, r := range l.resv.byName {
		if r.terminating {
			continue
		}
		if p := l.rt.inf.Pod(l.opts.Namespace, name); p != nil {
			if u := p.Annotations[v1alpha1.GPUUUIDAnnotation]; u != "" {
				out[r.slot] = u
			}
		}
	}
	return out
}

// podGroupCounts counts the PodGroups by queue, framework and kind of work (their pods') and
// phase.
func (l *loop) podGroupCounts() []metrics.PodGroups {
	type key struct{ q, f, k, p string }
	counts := map[key]int{}
	for _, o := range l.rt.inf.PodGroups.GetStore().List() {
		pg := o.(*v1alpha1.PodGroup)
		pods := l.rt.inf.PodsByIndex(cache.IndexPodGroup, pg.Namespace+"/"+pg.Name)
		k := key{q: pg.Spec.Queue, f: podsFramework(pods), k: podsKind(pods), p: string(pg.Status.Phase)}
		if k.p == "" {
			k.p = string(v1alpha1.PodGroupPending)
		}
		if k.q == "" {
			for _, p := range pods {
				if k.q = queueOf(p); k.q != "" {
					break
				}
			}
		}
		counts[k]++
	}
	out := make([]metrics.PodGroups, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.PodGroups{Queue: k.q, Framework: k.f, Kind: k.k, Phase: k.p, Count: n})
	}
	slices.SortFunc(out, func(a, b metrics.PodGroups) int {
		return strings.Compare(a.Queue+"\x00"+a.Framework+"\x00"+a.Kind+"\x00"+a.Phase, b.Queue+"\x00"+b.Framework+"\x00"+b.Kind+"\x00"+b.Phase)
	})
	return out
}

// podsFramework is the fairway.dev/framework of the first pod that has one, "none" otherwise.
func podsFramework(pods []*corev1.Pod) string {
	for _, p := range pods {
		if f := p.Labels[v1alpha1.FrameworkLabel]; f != "" {
			return f
		}
	}
	return "none"
}

// podsKind is the kind of work of the first pod that names one (v1alpha1.KindOf), "pod"
// otherwise.
func podsKind(pods []*corev1.Pod) string {
	for _, p := range pods {
		if _, ok := p.Annotations[v1alpha1.WorkloadKindAnnotation]; ok {
			return string(v1alpha1.KindOf(p))
		}
	}
	return string(v1alpha1.KindPod)
}

// kindOf is a pod's kind of work, "pod" when it has none.
func kindOf(p *corev1.Pod) string {
	if p == nil {
		return string(v1alpha1.KindPod)
	}
	return string(v1alpha1.KindOf(p))
}

// kindLabel is the kind label of a request, "pod" when it carries none.
func kindLabel(k string) string {
	if k == "" {
		return string(v1alpha1.KindPod)
	}
	return k
}

// frameworkOf is a pod's fairway.dev/framework, "none" when it has none.
func frameworkOf(p *corev1.Pod) string {
	if p == nil {
		return "none"
	}
	return podsFramework([]*corev1.Pod{p})
}

// queueOf is the queue the pod's labels name (v1alpha1.QueueOf), "" for none.
func queueOf(p *corev1.Pod) string {
	_, q, _ := v1alpha1.QueueOf(p.Labels)
	return q
}

func naturals(a engine.Amounts) map[string]float64 {
	m := make(map[string]float64, len(a))
	for k, v := range a {
		m[k] = natural(k, v)
	}
	return m
}

// natural converts engine units (milli-GPU, milli-CPU, bytes) to GPUs, cores and bytes.
func natural(resource string, v int64) float64 {
	if resource == "memory" {
		return float64(v)
	}
	return float64(v) / 1000
}

// usageMetrics are a queue's decayed usage in resource-hours and its over-quota usage share
// (what fair share over time weighs), per base resource.
func (l *loop) usageMetrics(queue string) (hours, overShare map[string]float64) {
	t, ok := l.hist.Totals(queue)
	if !ok {
		return nil, nil
	}
	hours, overShare = map[string]float64{}, map[string]float64{}
	sh := l.hist.OverQuotaShare(queue)
	for d := 0; d < snapshot.NumBaseDims; d++ {
		name := l.snap.DimName(d)
		hours[name] = natural(name, int64(t.Used[d]/3600))
		overShare[name] = sh[d]
	}
	return hours, overShare
}
