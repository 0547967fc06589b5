package assign

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Options wire an Assigner.
type Options struct {
	// Pods lists the non-terminated pods of this node (from the agent's cache).
	Pods func(ctx context.Context) ([]corev1.Pod, error)
	// Inventory returns the latest inventory, to map device IDs to indexes and UUIDs.
	Inventory func() *fairwayv1alpha1.GPUInventory
	// Resync is the period of a full pass without pod events; 10s when zero.
	Resync time.Duration
	// Retry is how soon a pass is repeated while a reservation pod has no device yet (the
	// kubelet admits pods a moment after they are bound); 500ms when zero.
	Retry time.Duration
	Log   logr.Logger
	// Namespace is fairway's own namespace, the only one whose pods can be reservations
	// (v1alpha1.IsReservationPod); v1alpha1.DefaultNamespace when empty.
	Namespace string
}

// Assigner keeps reservation pods' GPU annotations and the pod -> GPU map in step with the
// kubelet. It implements manager.Runnable.
type Assigner struct {
	lister Lister
	client client.Client
	opts   Options
	kick   chan struct{}

	mu      sync.RWMutex
	podGPUs map[types.NamespacedName][]int
}

// New returns an assigner reading lister and patching through c.
func New(lister Lister, c client.Client, opts Options) *Assigner {
	if opts.Resync == 0 {
		opts.Resync = 10 * time.Second
	}
	if opts.Retry == 0 {
		opts.Retry = 500 * time.Millisecond
	}
	if opts.Namespace == "" {
		opts.Namespace = fairwayv1alpha1.DefaultNamespace
	}
	return &Assigner{lister: lister, client: c, opts: opts, kick: make(chan struct{}, 1), podGPUs: map[types.NamespacedName][]int{}}
}

// Trigger asks for a pass soon (a pod of the node changed); it never blocks.
func (a *Assigner) Trigger() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// PodGPUs returns the GPU indexes the kubelet gave pod, as of the last pass.
func (a *Assigner) PodGPUs(pod *corev1.Pod) []int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.podGPUs[client.ObjectKeyFromObject(pod)]
}

// NeedLeaderElection is false: every agent serves its own node.
func (a *Assigner) NeedLeaderElection() bool { return false }

// Start runs passes on triggers, on retries and every Resync until ctx ends.
func (a *Assigner) Start(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case <-timer.C:
		}
		next := a.opts.Resync
		pending, err := a.Sync(ctx)
		if err != nil {
			a.opts.Log.Error(err, "Reading GPU assignments from the kubelet")
			next = min(next, 2*time.Second)
		} else if pending > 0 {
			next = a.opts.Retry
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// Sync makes one pass: list the kubelet's assignments, annotate reservation pods whose GPU
// is known and differs from their annotations. It returns how many reservation pods still
// wait for a device.
func (a *Assigner) Sync(ctx context.Context) (pending int, err error) {
	pods, err := a.opts.Pods(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing pods: %w", err)
	}
	assigned, err := a.lister.List(ctx, fairwayv1alpha1.ResourceGPU)
	if err != nil {
		return 0, err
	}
	inv := a.opts.Inventory()
	podGPUs := map[types.NamespacedName][]int{}
	for key, ids := range assigned {
		for _, id := range ids {
			if idx, _, ok := Resolve(inv, id); ok {
				podGPUs[key] = append(podGPUs[key], idx)
			}
		}
	}
	a.mu.Lock()
	a.podGPUs = podGPUs
	a.mu.Unlock()

	var errs []error
	for i := range pods {
		pod := &pods[i]
		if !fairwayv1alpha1.IsReservationPod(pod, a.opts.Namespace) {
			continue
		}
		ids := assigned[client.ObjectKeyFromObject(pod)]
		if len(ids) == 0 {
			pending++
			continue
		}
		if len(ids) > 1 {
			a.opts.Log.Info("Reservation pod holds more than one GPU; publishing the first", "pod", klog.KObj(pod), "devices", ids)
		}
		idx, uuid, ok := Resolve(inv, ids[0])
		if !ok {
			// Not in the inventory yet (first discovery pending) or a MIG device.
			pending++
			continue
		}
		if err := a.annotate(ctx, pod, uuid, idx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return pending, fmt.Errorf("annotating reservation pods: %v", errs)
	}
	return pending, nil
}

func (a *Assigner) annotate(ctx context.Context, pod *corev1.Pod, uuid string, index int) error {
	idx := strconv.Itoa(index)
	if pod.Annotations[fairwayv1alpha1.GPUUUIDAnnotation] == uuid && pod.Annotations[fairwayv1alpha1.GPUIndexAnnotation] == idx {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID, // precondition: never annotate a re-created pod of the same name
		"annotations": map[string]string{
			fairwayv1alpha1.GPUUUIDAnnotation:  uuid,
			fairwayv1alpha1.GPUIndexAnnotation: idx,
		},
	}})
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	if err := a.client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating %s: %w", klog.KObj(pod), err)
	}
	a.opts.Log.Info("Reservation pod got its GPU", "pod", klog.KObj(pod), "gpuUUID", uuid, "gpuIndex", index)
	return nil
}

// Resolve maps a device ID the kubelet reports to the GPU's index and UUID through the
// inventory. The NVIDIA device plugin names devices by UUID ("GPU-...") by default and by
// index with --device-id-strategy=index; time-slicing replicas carry a "::<n>" suffix. MIG
// devices ("MIG-...") are not GPUs fairway shares; ok is false for them and for unknown IDs.
func Resolve(inv *fairwayv1alpha1.GPUInventory, id string) (index int, uuid string, ok bool) {
	if inv == nil {
		return 0, "", false
	}
	id, _, _ = strings.Cut(id, "::")
	n, numErr := strconv.Atoi(id)
	for _, g := range inv.GPUs {
		if g.UUID == id || (numErr == nil && int(g.Index) == n) {
			return int(g.Index), g.UUID, g.UUID != ""
		}
	}
	return 0, "", false
}
