// Package consoletest builds the console's test snapshots: the CLI's fixed scenario
// (cli/clitest), so that the console's Why page can be checked against the CLI's goldens, and
// a large synthetic cluster for the render benchmarks.
package consoletest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/argo"
	"github.com/fairway-sched/fairway/adapters/kuberay"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli/clitest"
	"github.com/fairway-sched/fairway/console/view"
)

// CLIScenario is cli/clitest's scenario as a snapshot at clitest.Now, with one Reclaim
// eviction event on team-b.
func CLIScenario() *view.Snapshot {
	s := &view.Snapshot{Now: clitest.Now}
	add(s, clitest.Nodes())
	add(s, clitest.Objects())
	s.Events = append(s.Events, EvictionEvent("team-b", "sweep-old", fairwayv1.EvictReclaim,
		"reclaimed for queue team-a (PodGroup team-a/train-llama): team-b borrowed 2 GPUs above its guarantee", clitest.Now.Add(-5*time.Minute)))
	return s
}

func add(s *view.Snapshot, objs []client.Object) {
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Node:
			s.Nodes = append(s.Nodes, *v)
		case *corev1.Pod:
			s.Pods = append(s.Pods, *v)
		case *fairwayv1.Queue:
			s.Queues = append(s.Queues, *v)
		case *fairwayv1.PodGroup:
			s.PodGroups = append(s.PodGroups, *v)
		case *schedulingv1.PriorityClass:
			s.PriorityClasses = append(s.PriorityClasses, *v)
		default:
			panic(fmt.Sprintf("consoletest: unexpected %T", o))
		}
	}
}

// EvictionEvent is the scheduler's event on a pod it evicted.
func EvictionEvent(ns, pod string, reason fairwayv1.EvictionReason, note string, at time.Time) eventsv1.Event {
	return eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod + ".evicted", CreationTimestamp: metav1.NewTime(at)},
		EventTime: metav1.NewMicroTime(at), Reason: string(reason), Note: note, Type: corev1.EventTypeNormal,
		ReportingController: "fairway-scheduler", Action: "Evict",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}
}

// Large is a synthetic cluster of nodes 8-GPU H100 nodes and pods pods in 50 namespaces, one
// leaf queue each under 5 departments: per namespace, Argo workflows of 8 one-GPU steps, Ray
// clusters of a head and 7 workers holding 2 GPUs, notebooks sharing GPUs in fours, and
// pending pods with a reason; enough pods run to fill about 90% of the GPUs.
func Large(nodes, pods int) *view.Snapshot {
	now := clitest.Now
	s := &view.Snapshot{Now: now}
	for i := range nodes {
		name := fmt.Sprintf("gpu-%04d", i)
		s.Nodes = append(s.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{fairwayv1.GPUTypeLabel: "H100", fairwayv1.GPUMemoryLabel: "81559"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}}})
	}
	const namespaces, departments = 50, 5
	for d := range departments {
		s.Queues = append(s.Queues, fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dept-%d", d)},
			Spec: fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: qty(fmt.Sprint(nodes * 8 / departments))}}}})
	}
	for n := range namespaces {
		ns := fmt.Sprintf("team-%02d", n)
		s.Queues = append(s.Queues, fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: ns},
			Spec: fairwayv1.QueueSpec{Parent: fmt.Sprintf("dept-%d", n%departments), Namespaces: []string{ns},
				Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: qty(fmt.Sprint(nodes * 8 / namespaces))}}},
			Status: fairwayv1.QueueStatus{Allocated: corev1.ResourceList{"gpu": resource.MustParse("100")},
				FairShare: corev1.ResourceList{"gpu": resource.MustParse("150")}, Borrowed: corev1.ResourceList{"gpu": resource.MustParse("10")}}})
	}
	// GPUs are handed out node by node, slot by slot.
	node, slot := 0, 0
	place := func(gpus int) (string, bool) {
		if slot+gpus > 8 {
			node, slot = node+1, 0
		}
		if node >= nodes || float64(node*8+slot) > 0.9*float64(nodes*8) {
			return "", false
		}
		slot += gpus
		return fmt.Sprintf("gpu-%04d", node), true
	}
	for i := 0; len(s.Pods) < pods; i++ {
		ns := fmt.Sprintf("team-%02d", i%namespaces)
		base := clitest.PodSpec{Namespace: ns, Queue: ns, Class: fairwayv1.PriorityClassTraining}
		switch i % 4 {
		case 0: // an Argo workflow of 8 one-GPU steps
			wf := fmt.Sprintf("wf-%d", i)
			for st := range 8 {
				p := base
				p.Name, p.Kind, p.Framework, p.WholeGPUs = fmt.Sprintf("%s-%d", wf, st), fairwayv1.KindWorkflowStep, "argo", 1
				p.Group = p.Name
				p.Node, _ = place(1)
				if p.Node == "" {
					p.Waiting = "NoNodeFits: 0/1000 nodes fit the pod: no free GPU"
				}
				pod := clitest.Pod(p)
				pod.Labels[argo.WorkflowLabel] = wf
				pod.Annotations[fairwayv1.ArgoNodeNameAnnotation] = fmt.Sprintf("%s.train(%d)", wf, st)
				s.Pods = append(s.Pods, *pod)
				s.PodGroups = append(s.PodGroups, podGroup(ns, p.Name, ns, 1))
			}
		case 1: // a RayCluster: a head and 7 workers of 2 GPUs, one gang
			rc := fmt.Sprintf("ray-%d", i)
			s.PodGroups = append(s.PodGroups, podGroup(ns, rc, ns, 8))
			for w := range 8 {
				p := base
				p.Name, p.Kind, p.Framework, p.Group, p.WholeGPUs = fmt.Sprintf("%s-%d", rc, w), fairwayv1.KindRay, "ray", rc, 2
				p.Node, _ = place(2)
				if p.Node == "" {
					p.Waiting = "NoNodeFits: 0/1000 nodes fit the gang"
				}
				pod := clitest.Pod(p)
				pod.Labels[kuberay.ClusterLabel] = rc
				pod.Labels[kuberay.NodeTypeLabel] = map[bool]string{true: "head", false: "worker"}[w == 0]
				s.Pods = append(s.Pods, *pod)
			}
		case 2: // four notebooks on one shared GPU
			node, ok := place(1)
			for k := range 4 {
				p := base
				p.Name, p.Kind, p.Framework, p.Class, p.Fraction = fmt.Sprintf("nb-%d-%d", i, k), fairwayv1.KindNotebook, "jupyterhub", fairwayv1.PriorityClassInteractive, "0.25"
				p.Group = p.Name
				if ok {
					p.Node, p.Slot, p.UUID = node, slot-1, fmt.Sprintf("GPU-%s-%d", node, slot-1)
				} else {
					p.Waiting = "NonPreemptibleOverQuota: over quota"
				}
				s.Pods = append(s.Pods, *clitest.Pod(p))
				s.PodGroups = append(s.PodGroups, podGroup(ns, p.Name, ns, 1))
			}
		default: // a pending pod of its own
			p := base
			p.Name, p.Kind, p.WholeGPUs = fmt.Sprintf("job-%d", i), fairwayv1.KindPod, 1
			p.Waiting = "QueueLimit: queue " + ns + " would hold more than its limit"
			s.Pods = append(s.Pods, *clitest.Pod(p))
		}
	}
	s.Pods = s.Pods[:pods]
	for i := range 200 {
		ns := fmt.Sprintf("team-%02d", i%namespaces)
		s.Events = append(s.Events, EvictionEvent(ns, fmt.Sprintf("wf-%d-0", i*4), fairwayv1.EvictReclaim, "reclaimed for queue team-00", now.Add(-time.Duration(i)*time.Second)))
	}
	return s
}

func podGroup(ns, name, queue string, minMember int32) fairwayv1.PodGroup {
	return fairwayv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(clitest.T0)},
		Spec: fairwayv1.PodGroupSpec{MinMember: minMember, Queue: queue}}
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
