package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// QueueList is the output of `fairway queues -o json|yaml`: every queue in tree order (a
// department, then its children, depth first, siblings by name).
type QueueList struct {
	Kind string `json:"kind"` // QueueList
	// Resources are the resources shown, as asked with --resources.
	Resources []string    `json:"resources"`
	Items     []QueueView `json:"items"`
}

// QueueView is one queue.
type QueueView struct {
	Name string `json:"name"`
	// Parent is the department, empty for a top-level queue.
	Parent string `json:"parent,omitempty"`
	// Depth is 0 for a top-level queue, 1 for its children, ...
	Depth int `json:"depth"`
	// Ready is false when the queue takes no work; NotReady then says why.
	Ready    bool   `json:"ready"`
	NotReady string `json:"notReady,omitempty"`
	// Resources holds the amounts per resource (gpu, cpu, memory, gpu/<type>) in natural units:
	// GPUs, CPU cores, bytes.
	Resources map[string]QueueAmounts `json:"resources"`
	// PendingPods counts the queue's waiting pods.
	PendingPods int32 `json:"pendingPods"`
	// UsageHalfLife is the half-life of the queue's usage history (status.usage), empty when
	// the scheduler keeps none (fair share over time off).
	UsageHalfLife string `json:"usageHalfLife,omitempty"`
}

// QueueAmounts is one resource of a queue.
type QueueAmounts struct {
	// Guaranteed is the quota from the Queue's spec.
	Guaranteed Amount `json:"guaranteed"`
	// Limit caps guaranteed plus borrowed; absent for no limit.
	Limit *Amount `json:"limit,omitempty"`
	// FairShare, Allocated and Borrowed are the scheduler's status.
	FairShare Amount `json:"fairShare"`
	Allocated Amount `json:"allocated"`
	Borrowed  Amount `json:"borrowed"`
	// Loaned is the part of Allocated (and Borrowed) on loan on idle notebooks' GPUs: it goes
	// back the moment they do GPU work again.
	Loaned Amount `json:"loaned,omitempty"`
	// Pending is what waiting pods ask for: status requested minus allocated.
	Pending Amount `json:"pending"`
	// NoTypeQuota is true for a GPU type (gpu/<type>) the queue sets no quota for: its use of
	// that type counts against its gpu quota only, so guaranteed, fair share and borrowed are
	// those of gpu, and the table shows "-" here.
	NoTypeQuota bool `json:"noTypeQuota,omitempty"`
	// Used is the queue's decayed usage in resource-hours (GPU-hours, core-hours, byte-hours)
	// and UsedShare the fraction of the cluster it is over the usage window; OverQuotaShare the
	// same for its use above its guarantee, what fair share over time weighs (status.usage).
	// Absent without usage history, and for GPU types.
	Used           *Amount  `json:"used,omitempty"`
	UsedShare      *float64 `json:"usedShare,omitempty"`
	OverQuotaShare *float64 `json:"overQuotaShare,omitempty"`
}

// QueuesOptions are the flags of `fairway queues`.
type QueuesOptions struct {
	*Options
	Resources []string
}

// RunQueues prints the queue tree.
func RunQueues(ctx context.Context, o *QueuesOptions) error {
	var list fairwayv1.QueueList
	if err := o.list(ctx, &list, "Queues"); err != nil {
		return err
	}
	if len(list.Items) == 0 && o.Output == "" {
		_, err := fmt.Fprintln(o.Out, "No queues: create a Queue (kind: Queue, apiVersion: fairway.dev/v1alpha1) for each department and project.")
		return err
	}
	view := BuildQueues(list.Items, o.Resources)
	if ok, err := o.printStructured(view); ok {
		return err
	}
	return PrintQueues(o.Out, view)
}

// BuildQueues makes the tree view of the queues for the resources.
func BuildQueues(queues []fairwayv1.Queue, resources []string) QueueList {
	out := QueueList{Kind: "QueueList", Resources: resources, Items: []QueueView{}}
	byName := map[string]*fairwayv1.Queue{}
	children := map[string][]string{}
	for i := range queues {
		q := &queues[i]
		byName[q.Name] = q
	}
	var roots []string
	for name, q := range byName {
		if p := q.Spec.Parent; p != "" && byName[p] != nil {
			children[p] = append(children[p], name)
		} else {
			roots = append(roots, name)
		}
	}
	seen := map[string]bool{}
	var walk func(name string, depth int)
	walk = func(name string, depth int) {
		if seen[name] {
			return
		}
		seen[name] = true
		out.Items = append(out.Items, queueView(byName[name], depth, resources))
		kids := children[name]
		slices.Sort(kids)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	slices.Sort(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	// Queues in a parent cycle have no root; list them at the top so none is hidden.
	var rest []string
	for name := range byName {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, r := range rest {
		walk(r, 0)
	}
	return out
}

func queueView(q *fairwayv1.Queue, depth int, resources []string) QueueView {
	v := QueueView{Name: q.Name, Parent: q.Spec.Parent, Depth: depth, Ready: true, PendingPods: q.Status.PendingPods,
		Resources: map[string]QueueAmounts{}}
	if c := meta.FindStatusCondition(q.Status.Conditions, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
		v.Ready, v.NotReady = false, c.Reason
		if c.Message != "" {
			v.NotReady += ": " + c.Message
		}
	}
	if u := q.Status.Usage; u != nil {
		v.UsageHalfLife = u.HalfLife.Duration.String()
	}
	for _, r := range resources {
		quota, limit := quotaOf(q, r)
		a := QueueAmounts{
			Guaranteed: quota,
			Limit:      limit,
			FairShare:  statusAmount(q.Status.FairShare, r),
			Allocated:  statusAmount(q.Status.Allocated, r),
			Borrowed:   statusAmount(q.Status.Borrowed, r),
			Loaned:     statusAmount(q.Status.Loaned, r),
		}
		a.Pending = max(statusAmount(q.Status.Requested, r)-a.Allocated, 0)
		a.NoTypeQuota = strings.HasPrefix(r, "gpu/") && !listsGPUType(q, strings.TrimPrefix(r, "gpu/"))
		if u := q.Status.Usage; u != nil && !strings.HasPrefix(r, "gpu/") {
			used, over := statusAmount(u.Used, r), statusAmount(u.OverQuota, r)
			a.Used = &used
			if c := statusAmount(u.Capacity, r); c > 0 {
				us, os := min(float64(used/c), 1), min(float64(over/c), 1)
				a.UsedShare, a.OverQuotaShare = &us, &os
			}
		}
		v.Resources[r] = a
	}
	return v
}

func statusAmount(l corev1.ResourceList, res string) Amount {
	q, ok := l[corev1.ResourceName(res)]
	if !ok {
		return 0
	}
	return amountOf(q)
}

func listsGPUType(q *fairwayv1.Queue, name string) bool {
	for _, t := range q.Spec.GPUTypes {
		if t.Name == name {
			return true
		}
	}
	return false
}

// quotaOf reads a resource's guarantee and limit from the spec: gpu, cpu and memory from
// spec.resources, gpu/<type> from spec.gpuTypes.
func quotaOf(q *fairwayv1.Queue, res string) (Amount, *Amount) {
	var rq *fairwayv1.ResourceQuota
	switch {
	case res == "gpu":
		rq = q.Spec.Resources.GPU
	case res == "cpu":
		rq = q.Spec.Resources.CPU
	case res == "memory":
		rq = q.Spec.Resources.Memory
	case strings.HasPrefix(res, "gpu/"):
		for _, t := range q.Spec.GPUTypes {
			if t.Name == strings.TrimPrefix(res, "gpu/") {
				rq = &fairwayv1.ResourceQuota{Quota: t.Quota, Limit: t.Limit}
			}
		}
	}
	if rq == nil {
		return 0, nil
	}
	var quota Amount
	if rq.Quota != nil {
		quota = amountOf(*rq.Quota)
	}
	if rq.Limit == nil {
		return quota, nil
	}
	l := amountOf(*rq.Limit)
	return quota, &l
}

// PrintQueues writes the tree as a table: one column group per resource. Borrowed use on loan
// on idle notebooks' GPUs is marked "(X on loan)". With usage history (fair share over time),
// a RECENT USE column per resource shows the decayed resource-hours, the fraction of the
// cluster they are and the fraction above the queue's guarantee (what fair share weighs).
func PrintQueues(w io.Writer, v QueueList) error {
	history := false
	for _, q := range v.Items {
		history = history || q.UsageHalfLife != ""
	}
	headers := []string{"QUEUE"}
	for _, r := range v.Resources {
		R := strings.ToUpper(r)
		headers = append(headers, R+" GUARANTEED", R+" FAIR SHARE", R+" ALLOCATED", R+" BORROWED", R+" PENDING")
		if history && !strings.HasPrefix(r, "gpu/") {
			headers = append(headers, R+" RECENT USE")
		}
	}
	headers = append(headers, "PENDING PODS")
	t := newTable(w, headers...)
	for _, q := range v.Items {
		name := strings.Repeat("  ", q.Depth) + q.Name
		if !q.Ready {
			name += " (not ready)"
		}
		cells := []string{name}
		for _, r := range v.Resources {
			a := q.Resources[r]
			if a.NoTypeQuota {
				cells = append(cells, "-", "-", formatAmount(r, a.Allocated), "-", formatAmount(r, a.Pending))
				continue
			}
			guar := formatAmount(r, a.Guaranteed)
			if a.Limit != nil {
				guar += " (max " + formatAmount(r, *a.Limit) + ")"
			}
			borrowed := formatAmount(r, a.Borrowed)
			if a.Loaned > 0 {
				borrowed += " (" + formatAmount(r, a.Loaned) + " on loan)"
			}
			cells = append(cells, guar, formatAmount(r, a.FairShare), formatAmount(r, a.Allocated),
				borrowed, formatAmount(r, a.Pending))
			if history && !strings.HasPrefix(r, "gpu/") {
				cells = append(cells, recentUse(r, a))
			}
		}
		cells = append(cells, fmt.Sprint(q.PendingPods))
		t.row(cells...)
	}
	return t.flush()
}

// recentUse prints decayed usage as resource-hours, the cluster's fraction they are and the
// fraction above the guarantee: "36.5h (25%, 10% over quota)".
func recentUse(r string, a QueueAmounts) string {
	if a.Used == nil {
		return "-"
	}
	out := formatAmount(r, *a.Used) + "h"
	if r == "memory" {
		out = formatAmount(r, *a.Used) + "·h"
	}
	if a.UsedShare != nil && a.OverQuotaShare != nil {
		out += fmt.Sprintf(" (%.0f%%, %.0f%% over quota)", *a.UsedShare*100, *a.OverQuotaShare*100)
	}
	return out
}

// ParseResources checks a --resources list: gpu, cpu, memory and gpu/<type>.
func ParseResources(list []string) ([]string, error) {
	var out []string
	for _, r := range list {
		r = strings.TrimSpace(r)
		switch {
		case r == "gpu", r == "cpu", r == "memory", strings.HasPrefix(r, "gpu/") && len(r) > 4:
			out = append(out, r)
		case r == "":
		default:
			return nil, fmt.Errorf("unknown resource %q in --resources: use gpu, cpu, memory or gpu/<type> (e.g. gpu/H100)", r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--resources is empty: name at least one of gpu, cpu, memory")
	}
	return out, nil
}
