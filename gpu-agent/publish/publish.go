package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Options configure a Publisher.
type Options struct {
	// NodeName is the node to write.
	NodeName string
	// Refresh is how often the inventory is re-confirmed although unchanged.
	Refresh time.Duration
	// OwnedLabels are the label keys the publisher manages: it removes those not wanted.
	OwnedLabels []string
	// Reader reads the node; the client given to New when nil. The agent passes an uncached
	// reader, so a publish right after another never compares against a stale cache and
	// patches twice.
	Reader client.Reader
	Clock  clock.PassiveClock
	Log    logr.Logger
}

// Publisher writes labels and inventory onto one Node.
type Publisher struct {
	client client.Client
	opts   Options
}

// New returns a publisher that reads and patches the node through c.
func New(c client.Client, opts Options) *Publisher {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Reader == nil {
		opts.Reader = c
	}
	return &Publisher{client: c, opts: opts}
}

// Result says what a Publish call did.
type Result struct {
	// Patched is true when the node was written.
	Patched bool
	// Changed lists what differed: label keys, and "inventory" when its content changed
	// (not only its ObservedAt).
	Changed []string
}

// Publish makes the node carry labels (for the owned keys) and inv. It patches when a label
// or the inventory's content differs, or when the inventory on the node was confirmed more
// than about one refresh period ago; inv.ObservedAt is set to now then.
func (p *Publisher) Publish(ctx context.Context, labels map[string]string, inv fairwayv1alpha1.GPUInventory) (Result, error) {
	var node corev1.Node
	if err := p.opts.Reader.Get(ctx, client.ObjectKey{Name: p.opts.NodeName}, &node); err != nil {
		return Result{}, fmt.Errorf("getting node %s: %w", p.opts.NodeName, err)
	}
	var res Result
	labelPatch := map[string]any{}
	for _, key := range p.opts.OwnedLabels {
		want, wanted := labels[key]
		have, has := node.Labels[key]
		switch {
		case wanted && (!has || have != want):
			labelPatch[key] = want
			res.Changed = append(res.Changed, key)
		case !wanted && has:
			labelPatch[key] = nil // JSON merge patch: remove
			res.Changed = append(res.Changed, key)
		}
	}

	now := p.opts.Clock.Now()
	current, parseErr := Parse(node.Annotations[fairwayv1alpha1.GPUInventoryAnnotation])
	contentChanged := parseErr != nil || !sameContent(current, &inv)
	// Confirm a little early so that a caller ticking every Refresh never skips a period.
	due := current == nil || now.Sub(current.ObservedAt.Time) >= p.opts.Refresh-p.opts.Refresh/10
	annotationPatch := map[string]any{}
	if contentChanged || due {
		inv.ObservedAt = metav1.NewTime(now)
		data, err := json.Marshal(inv)
		if err != nil {
			return Result{}, fmt.Errorf("encoding inventory: %w", err)
		}
		annotationPatch[fairwayv1alpha1.GPUInventoryAnnotation] = string(data)
		if contentChanged {
			res.Changed = append(res.Changed, "inventory")
		}
	}
	if len(labelPatch) == 0 && len(annotationPatch) == 0 {
		return res, nil
	}
	meta := map[string]any{}
	if len(labelPatch) > 0 {
		meta["labels"] = labelPatch
	}
	if len(annotationPatch) > 0 {
		meta["annotations"] = annotationPatch
	}
	data, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return Result{}, fmt.Errorf("encoding node patch: %w", err)
	}
	if err := p.client.Patch(ctx, &node, client.RawPatch(types.MergePatchType, data)); err != nil {
		return Result{}, fmt.Errorf("patching node %s: %w", p.opts.NodeName, err)
	}
	res.Patched = true
	if len(res.Changed) > 0 {
		p.opts.Log.Info("Published GPU inventory", "node", p.opts.NodeName, "changed", res.Changed, "gpus", len(inv.GPUs))
	} else {
		p.opts.Log.V(2).Info("Confirmed GPU inventory", "node", p.opts.NodeName)
	}
	return res, nil
}

// Parse decodes a fairway.dev/gpu-inventory annotation; nil, nil when it is empty.
func Parse(annotation string) (*fairwayv1alpha1.GPUInventory, error) {
	if annotation == "" {
		return nil, nil
	}
	var inv fairwayv1alpha1.GPUInventory
	if err := json.Unmarshal([]byte(annotation), &inv); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", fairwayv1alpha1.GPUInventoryAnnotation, err)
	}
	return &inv, nil
}

// Stale reports whether an inventory was last confirmed more than three of its refresh periods
// before now: its agent stopped, or cannot reach the API server.
func Stale(inv *fairwayv1alpha1.GPUInventory, now time.Time) bool {
	if inv == nil || inv.RefreshSeconds <= 0 {
		return inv == nil
	}
	return now.Sub(inv.ObservedAt.Time) > 3*time.Duration(inv.RefreshSeconds)*time.Second
}

// sameContent compares two inventories, ignoring when they were observed.
func sameContent(a, b *fairwayv1alpha1.GPUInventory) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.ObservedAt, y.ObservedAt = metav1.Time{}, metav1.Time{}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
