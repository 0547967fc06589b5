package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// PolicyList is the output of `fairway policy -o json|yaml`: for each queue serving the
// namespace (or the queue named), what each kind of work may ask for.
type PolicyList struct {
	Kind      string       `json:"kind"` // PolicyList
	Namespace string       `json:"namespace,omitempty"`
	Items     []PolicyView `json:"items"`
}

// PolicyView is the resolved policy of one queue.
type PolicyView struct {
	Queue string `json:"queue"`
	// Set is false when no queue of the ancestry has a policy: everything is open.
	Set   bool             `json:"set"`
	Kinds []KindPolicyView `json:"kinds,omitempty"`
}

// KindPolicyView is what one kind of work may ask for in a queue.
type KindPolicyView struct {
	Kind fairwayv1.WorkloadKind `json:"kind"`
	// GPUTypes is the allow-list; empty when every type is open.
	GPUTypes []string `json:"gpuTypes,omitempty"`
	// DefaultGPU is what a pod asking for no GPU gets ("" for nothing): "0.25", "20Gi", "1 GPU".
	DefaultGPU string `json:"defaultGPU,omitempty"`
	// MaxGPUsPerPod is the per-pod cap ("" for none).
	MaxGPUsPerPod string                    `json:"maxGPUsPerPod,omitempty"`
	Borrowing     fairwayv1.BorrowingPolicy `json:"borrowing"`
	CPUOnGPUNodes bool                      `json:"cpuOnGPUNodes"`
	// PriorityClass and Preemptibility are what the kind's pods get when they choose neither:
	// the queue's rule, else the kind's default ("" for the cluster's default class, or for
	// preemptibility by priority).
	PriorityClass  string                   `json:"priorityClass,omitempty"`
	Preemptibility fairwayv1.Preemptibility `json:"preemptibility,omitempty"`
	// From names, per rule, the queue that set it.
	From map[string]string `json:"from,omitempty"`
}

// RunPolicy prints the policies of the queues serving the namespace, or of the queue named.
func RunPolicy(ctx context.Context, o *Options, queue string) error {
	var list fairwayv1.QueueList
	if err := o.list(ctx, &list, "Queues"); err != nil {
		return err
	}
	byName := map[string]*fairwayv1.Queue{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	out := PolicyList{Kind: "PolicyList", Items: []PolicyView{}}
	var names []string
	if queue != "" {
		if byName[queue] == nil {
			return fmt.Errorf("queue %q not found", queue)
		}
		names = []string{queue}
	} else {
		out.Namespace = o.namespace
		ns := &corev1.Namespace{}
		if err := o.Client.Get(ctx, client.ObjectKey{Name: o.namespace}, ns); err != nil {
			return apiError(err, "Namespace "+o.namespace)
		}
		for name, q := range byName {
			m, err := fairwayv1.NewNamespaceMatcher(&q.Spec)
			if (err == nil || !m.HasSelector()) && m.Serves(ns.Name, ns.Labels) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		if len(names) == 0 && o.Output == "" {
			_, err := fmt.Fprintf(o.Out, "No queue serves namespace %s, so fairway does not schedule its pods.\n", o.namespace)
			return err
		}
	}
	for _, name := range names {
		out.Items = append(out.Items, BuildPolicy(name, byName))
	}
	if ok, err := o.printStructured(out); ok {
		return err
	}
	return PrintPolicy(o.Out, out)
}

// BuildPolicy resolves the policy of queue name for every kind of work, from the queue and its
// ancestors in byName (fairwayv1.ResolvePolicy, as the webhook and the scheduler do).
func BuildPolicy(name string, byName map[string]*fairwayv1.Queue) PolicyView {
	chain, _ := fairwayv1.PolicyChain(name, func(n string) (*fairwayv1.QueueSpec, error) {
		if q := byName[n]; q != nil {
			return &q.Spec, nil
		}
		return nil, nil
	})
	v := PolicyView{Queue: name}
	for _, k := range fairwayv1.WorkloadKinds {
		p := fairwayv1.ResolvePolicy(k, chain)
		if !p.Set {
			return v
		}
		v.Set = true
		kv := KindPolicyView{Kind: k, GPUTypes: p.GPUTypes, Borrowing: p.Borrowing, CPUOnGPUNodes: p.CPUOnGPUNodes, From: p.From,
			PriorityClass: p.PriorityClass, Preemptibility: p.Preemptibility}
		if d := p.DefaultGPU; d != nil {
			switch {
			case d.GPUs != nil:
				kv.DefaultGPU = fmt.Sprintf("%d GPU", *d.GPUs)
			case d.Fraction != nil:
				kv.DefaultGPU = *d.Fraction
			case d.Memory != nil:
				kv.DefaultGPU = *d.Memory
			}
		}
		if p.MaxGPUsPerPod != nil {
			kv.MaxGPUsPerPod = p.MaxGPUsPerPod.String()
		}
		v.Kinds = append(v.Kinds, kv)
	}
	return v
}

// PrintPolicy writes one table per queue: a row per kind of work.
func PrintPolicy(w io.Writer, l PolicyList) error {
	for i, q := range l.Items {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if !q.Set {
			fmt.Fprintf(w, "Queue %s has no policy: every GPU type is open to every kind of work, with no default or cap.\n", q.Queue)
			continue
		}
		fmt.Fprintf(w, "Queue %s\n", q.Queue)
		t := newTable(w, "KIND", "GPU TYPES", "DEFAULT GPU", "MAX GPU/POD", "BORROWING", "CPU ON GPU NODES", "PRIORITY CLASS", "PREEMPTIBILITY")
		for _, k := range q.Kinds {
			types := strings.Join(k.GPUTypes, ",")
			if types == "" {
				types = "any"
			}
			preempt := string(k.Preemptibility)
			if preempt == "" {
				preempt = "by priority"
			}
			t.row(string(k.Kind), types, k.DefaultGPU, k.MaxGPUsPerPod, string(k.Borrowing), yesNo(k.CPUOnGPUNodes), k.PriorityClass, preempt)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
