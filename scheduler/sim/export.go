package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/api/gpurequest"
	"github.com/fairway-sched/fairway/api/v1alpha1"
)

// Export is a live cluster turned into simulator input (fairway sim export): its nodes as Node
// objects, its queues, and its pods as a trace in which the running ones run from the start on
// their node and GPUs (for ever: nobody knows when they end) and the pending ones arrive at once.
type Export struct {
	Nodes  []*corev1.Node
	Queues []*v1alpha1.Queue
	Trace  []TraceEntry
	// Skipped counts pods left out: not fairway's (no queue label), GPU reservations (the
	// simulator's scheduler makes its own), finished or terminating ones.
	Skipped int
}

// NewExport converts what was listed from a cluster. Pods are named <namespace>.<name> in their
// queue; a pod of a gang keeps its gang (group) and minimum.
func NewExport(nodes []corev1.Node, queues []v1alpha1.Queue, pods []corev1.Pod) (*Export, error) {
	ex := &Export{}
	for i := range nodes {
		n := &nodes[i]
		ex.Nodes = append(ex.Nodes, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations},
			Spec:       corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
			Status:     corev1.NodeStatus{Allocatable: n.Status.Allocatable, Capacity: n.Status.Capacity},
		})
		if len(n.Status.Allocatable) == 0 {
			ex.Nodes[i].Status.Allocatable = n.Status.Capacity // as the API server defaults it
		}
	}
	for i := range queues {
		q := &queues[i]
		ex.Queues = append(ex.Queues, &v1alpha1.Queue{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Queue"},
			ObjectMeta: metav1.ObjectMeta{Name: q.Name, Labels: q.Labels, Annotations: q.Annotations},
			Spec:       q.Spec,
		})
	}
	for i := range pods {
		p := &pods[i]
		queue := p.Labels[v1alpha1.QueueLabel]
		if queue == "" || p.Labels[v1alpha1.ReservationLabel] == "true" || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			ex.Skipped++
			continue
		}
		e, err := exportPod(p, queue)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		ex.Trace = append(ex.Trace, e)
	}
	slices.SortFunc(ex.Trace, func(a, b TraceEntry) int {
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return ex, nil
}

func exportPod(p *corev1.Pod, queue string) (TraceEntry, error) {
	e := TraceEntry{Name: p.Namespace + "." + p.Name, Queue: queue, Kind: p.Labels[v1alpha1.FrameworkLabel], Node: p.Spec.NodeName}
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	if q, ok := req[corev1.ResourceCPU]; ok && !q.IsZero() {
		e.CPU = q.String()
	}
	if q, ok := req[corev1.ResourceMemory]; ok && !q.IsZero() {
		e.Memory = q.String()
	}
	if q, ok := req[v1alpha1.ResourceGPU]; ok && q.Value() > 0 {
		e.GPUs = int(q.Value())
	}
	share, err := gpurequest.Parse(p.Annotations)
	if err != nil {
		return e, err
	}
	switch {
	case e.GPUs > 0:
	case share.Milli > 0:
		e.GPUShare = fractionString(share.Milli)
	case share.MemoryMiB > 0:
		e.GPUMemory = strconv.FormatInt(share.MemoryMiB, 10) + "Mi"
	}
	if p.Spec.Priority != nil {
		e.Priority = *p.Spec.Priority
	}
	if g := p.Annotations[v1alpha1.PodGroupAnnotation]; g != "" {
		e.Group = p.Namespace + "." + g
		n, _, _ := v1alpha1.MinMemberOf(p.Annotations)
		e.MinMember = int(n)
	}
	if e.Node != "" {
		b, err := v1alpha1.PodBindingOf(p.Labels, p.Annotations)
		if err != nil {
			return e, err
		}
		e.GPUIndex = b.GPUIndexes
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range t.MatchExpressions {
				if r.Key == v1alpha1.GPUTypeLabel && r.Operator == corev1.NodeSelectorOpIn {
					e.GPUTypes = r.Values
				}
			}
		}
	}
	return e, nil
}

// Write writes nodes.yaml, queues.yaml, trace.yaml and config.yaml (naming the other three) into
// dir: `fairway sim run --config dir/config.yaml` replays the cluster as it was.
func (ex *Export) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	docs := func(objs []any) ([]byte, error) {
		var buf bytes.Buffer
		for i, o := range objs {
			b, err := yaml.Marshal(o)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				buf.WriteString("---\n")
			}
			buf.Write(b)
		}
		return buf.Bytes(), nil
	}
	var nodes, queues []any
	for _, n := range ex.Nodes {
		nodes = append(nodes, n)
	}
	for _, q := range ex.Queues {
		queues = append(queues, q)
	}
	trace, err := yaml.Marshal(traceFile{Pods: ex.Trace})
	if err != nil {
		return err
	}
	files := map[string][]byte{"trace.yaml": trace, "config.yaml": []byte("# A snapshot of a live cluster (fairway sim export).\nname: export\nnodes: nodes.yaml\nqueues: queues.yaml\ntrace: trace.yaml\n")}
	if files["nodes.yaml"], err = docs(nodes); err != nil {
		return err
	}
	if files["queues.yaml"], err = docs(queues); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loadNodeObjects reads a file of Node objects (YAML documents, as fairway sim export writes);
// ok is false when its first document is not a Node (a node-pool file, then).
func loadNodeObjects(path string) (nodes []*corev1.Node, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	for i, doc := range strings.Split("\n"+string(b), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, false, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		if tm.Kind != "Node" {
			if len(nodes) == 0 {
				return nil, false, nil
			}
			return nil, true, fmt.Errorf("%s: document %d is a %q, want only Nodes", path, i+1, tm.Kind)
		}
		var n corev1.Node
		if err := yaml.UnmarshalStrict([]byte(doc), &n); err != nil {
			return nil, true, fmt.Errorf("%s: document %d: %w", path, i+1, err)
		}
		nodes = append(nodes, &n)
	}
	return nodes, len(nodes) > 0, nil
}
